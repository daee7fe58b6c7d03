//! Services and EndpointSlices as Juneau reads them. They are Kubernetes' own kinds, not
//! CRDs: the Kubernetes backend watches them (`discovery.k8s.io/v1` for the slices) and
//! turns each into a record here; the embedded store takes a scenario's Services as
//! `kubectl apply` would (a ClusterIP allocated when none is written) and its slices
//! from the standalone EndpointSlice controller (`controller::endpointslice`), since no
//! kube-controller-manager runs there. The records hold only what the Services feature
//! and that controller read.
use std::collections::BTreeMap;

use k8s_openapi::{
    api::{core::v1::Service, discovery::v1::EndpointSlice},
    apimachinery::pkg::util::intstr::IntOrString,
};
use serde::{Deserialize, Serialize};

/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming who maintains a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// What Juneau's own EndpointSlice controller writes in [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_JUNEAU: &str = "endpointslice.juneau.loutres.me";
/// kube-apiserver's default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours).
pub const DEFAULT_AFFINITY_S: u32 = 10_800;

/// A Service port's `targetPort`: a number, or the name of a container port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TargetPort {
    Number(u16),
    Name(String),
}

/// One port of a Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServicePortRecord {
    /// Empty for a Service's only, unnamed port.
    #[serde(default)]
    pub name: String,
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    pub target_port: TargetPort,
}

/// A Service.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceRecord {
    pub namespace: String,
    pub name: String,
    /// `spec.clusterIPs` (`None` for a headless Service).
    pub cluster_ips: Vec<String>,
    pub ports: Vec<ServicePortRecord>,
    /// `spec.selector`: `None` for a Service whose slices someone else writes.
    pub selector: Option<BTreeMap<String, String>>,
    /// `sessionAffinity: ClientIP`: its timeout in seconds.
    pub affinity_s: Option<u32>,
    /// `internalTrafficPolicy: Local`: only the client's own Node's endpoints.
    pub internal_local: bool,
    /// `spec.type` (`ClusterIP` when unset).
    pub kind: String,
}

/// One port of a slice: the Service port's name and the number it resolved to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SlicePort {
    #[serde(default)]
    pub name: String,
    pub port: u16,
    pub protocol: String,
}

/// One endpoint of a slice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SliceEndpoint {
    pub addresses: Vec<String>,
    /// `conditions.ready` (unset reads as ready, as the API says).
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    #[serde(default)]
    pub node: String,
    /// `targetRef` of kind Pod: `namespace/name`.
    #[serde(default)]
    pub pod: Option<String>,
}

/// An EndpointSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSliceRecord {
    pub namespace: String,
    pub name: String,
    /// The Service it belongs to ([`SERVICE_NAME_LABEL`]).
    pub service: String,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    /// [`MANAGED_BY_LABEL`].
    #[serde(default)]
    pub managed_by: String,
    pub ports: Vec<SlicePort>,
    pub endpoints: Vec<SliceEndpoint>,
}

fn port_u16(n: i32) -> Option<u16> {
    u16::try_from(n).ok().filter(|p| *p != 0)
}

impl ServiceRecord {
    /// A Service as the API holds it; ports that do not read (0, out of range) are left
    /// out, as the API server never admits them.
    pub fn from_k8s(s: &Service) -> ServiceRecord {
        let spec = s.spec.clone().unwrap_or_default();
        let cluster_ips = spec
            .cluster_ips
            .clone()
            .filter(|ips| !ips.is_empty())
            .or_else(|| spec.cluster_ip.clone().map(|ip| vec![ip]))
            .unwrap_or_default();
        let ports = spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .filter_map(|p| {
                let port = port_u16(p.port)?;
                let target_port = match p.target_port {
                    None => TargetPort::Number(port),
                    Some(IntOrString::Int(n)) => TargetPort::Number(port_u16(n)?),
                    Some(IntOrString::String(name)) => match name.parse::<i32>() {
                        Ok(n) => TargetPort::Number(port_u16(n)?),
                        Err(_) => TargetPort::Name(name),
                    },
                };
                Some(ServicePortRecord {
                    name: p.name.unwrap_or_default(),
                    port,
                    protocol: p.protocol.unwrap_or_else(|| "TCP".into()),
                    target_port,
                })
            })
            .collect();
        let affinity_s = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .and_then(|c| c.client_ip)
                .and_then(|c| c.timeout_seconds)
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(DEFAULT_AFFINITY_S)
        });
        ServiceRecord {
            namespace: s
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: s.metadata.name.clone().unwrap_or_default(),
            cluster_ips,
            ports,
            selector: spec.selector.filter(|s| !s.is_empty()),
            affinity_s,
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            kind: spec.type_.unwrap_or_else(|| "ClusterIP".into()),
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

impl EndpointSliceRecord {
    pub fn from_k8s(s: &EndpointSlice) -> EndpointSliceRecord {
        let labels = s.metadata.labels.clone().unwrap_or_default();
        EndpointSliceRecord {
            namespace: s
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: s.metadata.name.clone().unwrap_or_default(),
            service: labels.get(SERVICE_NAME_LABEL).cloned().unwrap_or_default(),
            address_type: s.address_type.clone(),
            managed_by: labels.get(MANAGED_BY_LABEL).cloned().unwrap_or_default(),
            ports: s
                .ports
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| {
                    Some(SlicePort {
                        name: p.name.unwrap_or_default(),
                        port: port_u16(p.port?)?,
                        protocol: p.protocol.unwrap_or_else(|| "TCP".into()),
                    })
                })
                .collect(),
            endpoints: s
                .endpoints
                .iter()
                .map(|e| {
                    let c = e.conditions.clone().unwrap_or_default();
                    let ready = c.ready.unwrap_or(true);
                    SliceEndpoint {
                        addresses: e.addresses.clone(),
                        ready,
                        serving: c.serving.unwrap_or(ready),
                        terminating: c.terminating.unwrap_or(false),
                        node: e.node_name.clone().unwrap_or_default(),
                        pod: e
                            .target_ref
                            .as_ref()
                            .filter(|r| r.kind.as_deref() == Some("Pod"))
                            .map(|r| {
                                format!(
                                    "{}/{}",
                                    r.namespace.as_deref().unwrap_or("default"),
                                    r.name.as_deref().unwrap_or("")
                                )
                            }),
                    }
                })
                .collect(),
        }
    }
}

/// The IP protocol number of a Service port's protocol, for the ones the datapath
/// translates.
pub fn ip_proto(protocol: &str) -> Option<u8> {
    match protocol {
        "TCP" => Some(6),
        "UDP" => Some(17),
        "SCTP" => Some(132),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svc_03_a_service_reads_its_ports_affinity_and_policy() {
        let s: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "dns", "namespace": "kube-system"},
            "spec": {
                "clusterIP": "10.96.0.10",
                "selector": {"k8s-app": "kube-dns"},
                "sessionAffinity": "ClientIP",
                "internalTrafficPolicy": "Local",
                "ports": [
                    {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"},
                    {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
                    {"name": "metrics", "port": 9153},
                ],
            },
        }))
        .unwrap();
        let r = ServiceRecord::from_k8s(&s);
        assert_eq!(r.cluster_ips, ["10.96.0.10"]);
        assert_eq!(r.key(), "kube-system/dns");
        assert_eq!(r.affinity_s, Some(DEFAULT_AFFINITY_S));
        assert!(r.internal_local);
        assert_eq!(r.kind, "ClusterIP");
        assert_eq!(r.ports[0].target_port, TargetPort::Name("dns".into()));
        assert_eq!(r.ports[1].target_port, TargetPort::Number(5353));
        // Unset: TCP, and the port itself.
        assert_eq!(r.ports[2].protocol, "TCP");
        assert_eq!(r.ports[2].target_port, TargetPort::Number(9153));
    }

    #[test]
    fn svc_03_a_slice_reads_its_conditions_as_the_api_defines_them() {
        let s: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.16.0.5"], "nodeName": "n1"},
                {"addresses": ["10.16.0.6"],
                 "conditions": {"ready": false, "serving": true, "terminating": true}},
            ],
        }))
        .unwrap();
        let r = EndpointSliceRecord::from_k8s(&s);
        assert_eq!(r.service, "web");
        assert_eq!(r.ports[0].port, 8080);
        // No conditions: ready and serving (the API's reading of nil).
        assert!(r.endpoints[0].ready && r.endpoints[0].serving && !r.endpoints[0].terminating);
        assert_eq!(r.endpoints[0].node, "n1");
        assert!(!r.endpoints[1].ready && r.endpoints[1].terminating);
    }
}
