//! Services in the embedded store, as kube-apiserver takes them: a ClusterIP from the
//! Service CIDR when none is written (the lowest free address past the CIDR's first,
//! which upstream keeps for `kubernetes`), a written one checked to be inside it and
//! free, and ports checked. Nothing is stored when a check fails.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};

use super::{Store, StoreError};
use crate::{
    alloc::Pool,
    api::{EndpointSliceRecord, ServiceRecord, service::ip_proto},
};

/// The kind names a scenario writes.
pub const SERVICE_KIND: &str = "Service";
pub const ENDPOINT_SLICE_KIND: &str = "EndpointSlice";

fn invalid(svc: &str, field: &str, why: String) -> StoreError {
    StoreError::Invalid(format!("Service {svc:?}: {field}: {why}"))
}

impl Store {
    /// Creates a Service from its manifest (`kind: Service`, `v1`).
    pub fn create_service(&self, manifest: serde_json::Value) -> Result<ServiceRecord, StoreError> {
        let svc: Service = serde_json::from_value(manifest)
            .map_err(|e| StoreError::Invalid(format!("cannot read Service: {e}")))?;
        let mut rec = ServiceRecord::from_k8s(&svc);
        let name = rec.key();
        if rec.name.is_empty() {
            return Err(invalid(&name, "metadata.name", "write a name".into()));
        }
        let written = svc
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map_or(0, Vec::len);
        if rec.ports.len() != written || (rec.kind != "ExternalName" && rec.ports.is_empty()) {
            return Err(invalid(
                &name,
                "spec.ports",
                "each port needs a port (1-65535) and a targetPort in range".into(),
            ));
        }
        if let Some(p) = rec.ports.iter().find(|p| ip_proto(&p.protocol).is_none()) {
            return Err(invalid(
                &name,
                "spec.ports[].protocol",
                format!("{:?} is not TCP, UDP or SCTP", p.protocol),
            ));
        }
        self.write(|w| {
            if w.services.iter().any(|s| s.key() == name) {
                return Err(StoreError::Exists {
                    kind: SERVICE_KIND,
                    name: name.clone(),
                });
            }
            let cidrs: Vec<Ipv4Net> = w.objects.service_cidrs.clone();
            // The whole of each CIDR may be asked for; a first fit skips its network
            // and broadcast addresses and its first host (the `kubernetes` Service's).
            let mut pool = Pool::new(cidrs.iter().map(|c| (c.network(), c.broadcast())));
            for c in &cidrs {
                if c.prefix_len() < 31 {
                    pool.avoid(c.network()).avoid(c.broadcast());
                }
                if let Some(first) = c.hosts().next() {
                    pool.avoid(first);
                }
            }
            for ip in w.services.iter().flat_map(|s| &s.cluster_ips) {
                if let Ok(ip) = ip.parse() {
                    pool.hold(ip);
                }
            }
            let headless = rec.cluster_ips.iter().any(|c| c == "None");
            if !headless && rec.kind != "ExternalName" {
                match rec.cluster_ips.first() {
                    Some(ip) => {
                        let ip: Ipv4Addr = ip.parse().map_err(|_| {
                            invalid(&name, "spec.clusterIP", format!("{ip:?} is not an IPv4 address"))
                        })?;
                        if !pool.contains(ip) {
                            return Err(invalid(
                                &name,
                                "spec.clusterIP",
                                format!(
                                    "{ip} is outside the Service CIDR ({}); pick one inside or leave it out",
                                    cidrs
                                        .iter()
                                        .map(Ipv4Net::to_string)
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ));
                        }
                        if pool.is_held(ip) {
                            return Err(invalid(
                                &name,
                                "spec.clusterIP",
                                format!("{ip} is taken by another Service; leave it out for a free one"),
                            ));
                        }
                    }
                    None => {
                        let free = pool.first_free().ok_or_else(|| {
                                invalid(&name, "spec.clusterIP", "the Service CIDR is full".into())
                            })?;
                        rec.cluster_ips = vec![free.to_string()];
                    }
                }
            }
            w.services.push(rec.clone());
            Ok(rec)
        })
    }

    /// Creates an EndpointSlice a user writes (the backends of a Service without a
    /// selector: a Node's address, an address outside the cluster).
    pub fn create_endpoint_slice(
        &self,
        manifest: serde_json::Value,
    ) -> Result<EndpointSliceRecord, StoreError> {
        let slice: EndpointSlice = serde_json::from_value(manifest)
            .map_err(|e| StoreError::Invalid(format!("cannot read EndpointSlice: {e}")))?;
        let rec = EndpointSliceRecord::from_k8s(&slice);
        let what = format!(
            "EndpointSlice {:?}",
            format!("{}/{}", rec.namespace, rec.name)
        );
        if rec.service.is_empty() {
            return Err(StoreError::Invalid(format!(
                "{what}: metadata.labels: name its Service in {}",
                crate::api::service::SERVICE_NAME_LABEL
            )));
        }
        if rec.managed_by == crate::api::service::MANAGED_BY_JUNEAU {
            return Err(StoreError::Invalid(format!(
                "{what}: metadata.labels: {} is Juneau's own controller's; leave it out",
                crate::api::service::MANAGED_BY_LABEL
            )));
        }
        self.write(|w| {
            if w.endpoint_slices
                .iter()
                .any(|s| s.namespace == rec.namespace && s.name == rec.name)
            {
                return Err(StoreError::Exists {
                    kind: ENDPOINT_SLICE_KIND,
                    name: format!("{}/{}", rec.namespace, rec.name),
                });
            }
            w.endpoint_slices.push(rec.clone());
            Ok(rec)
        })
    }

    /// Deletes a Service and the slices of it; a Service that is gone succeeds.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.write(|w| {
            w.services
                .retain(|s| !(s.namespace == namespace && s.name == name));
            w.endpoint_slices
                .retain(|s| !(s.namespace == namespace && s.service == name));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> Store {
        let s = Store::new();
        s.write(|w| {
            w.objects
                .service_cidrs
                .push("10.96.0.0/12".parse().unwrap())
        });
        s
    }

    fn manifest(name: &str, ip: Option<&str>) -> serde_json::Value {
        let mut v = serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": 8080}]},
        });
        if let Some(ip) = ip {
            v["spec"]["clusterIP"] = ip.into();
        }
        v
    }

    #[test]
    fn svc_01_the_store_allocates_and_checks_cluster_ips_as_the_api_server_does() {
        let s = store();
        let a = s.create_service(manifest("a", None)).unwrap();
        assert_eq!(a.cluster_ips, ["10.96.0.2"]);
        s.create_service(manifest("dns", Some("10.96.0.10")))
            .unwrap();
        let err = |m| s.create_service(m).unwrap_err().to_string();
        assert!(
            err(manifest("b", Some("10.96.0.10"))).contains("spec.clusterIP: 10.96.0.10 is taken")
        );
        assert!(err(manifest("c", Some("192.168.0.1"))).contains("outside the Service CIDR"));
        assert!(err(manifest("a", None)).contains("already exists"));
        let mut bad = manifest("d", None);
        bad["spec"]["ports"][0]["protocol"] = "ICMP".into();
        assert!(err(bad).contains("spec.ports[].protocol"));
        let mut bad = manifest("e", None);
        bad["spec"]["ports"][0]["port"] = 0.into();
        assert!(err(bad).contains("spec.ports"));
        // Nothing of a refusal was stored.
        assert_eq!(s.read().0.services.len(), 2);
        s.delete_service("default", "a");
        assert_eq!(s.read().0.services.len(), 1);
    }
}
