//! The node agent: what the daemon does for the CNI plugin (ADD, DEL, CHECK, GC,
//! STATUS) and for the other Nodes (remote VTEP lists from NetworkEndpoints).
//!
//! Every call runs on a thread inside the Node's network namespace. ADD is all or
//! nothing: what it made is undone when a later step fails. DEL is idempotent and finds
//! its work by the host veths' aliases, so it needs nothing remembered.
use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    path::Path,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::{
    Dataplane,
    dataplane::PortSpec,
    netlink,
    veth::{self, VethSpec},
};
use crate::{
    api::{NetworkEndpoint, NetworkInterface, networkendpoint::NetworkEndpointSpec},
    cni::{CniError, CniResult, Interface, IpConfig, Request, RouteConfig, code},
    store::Store,
};

/// How long ADD waits for the controller to allocate a Pod's NICs.
const NIC_WAIT: Duration = Duration::from_secs(10);

pub struct Agent {
    pub node: String,
    pub node_ip: Ipv4Addr,
    pub store: Store,
    pub dataplane: Mutex<Dataplane>,
    /// NetworkEndpoints of other Nodes already in the remote lists: name -> (vni, vtep).
    remotes: Mutex<BTreeMap<String, (u32, Ipv4Addr)>>,
}

/// A stable, locally administered MAC for one NIC of one container.
pub fn nic_mac(container_id: &str, interface: &str) -> [u8; 6] {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in container_id.bytes().chain([b'/']).chain(interface.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    [0x02, b[1], b[2], b[3], b[4], b[5]]
}

/// The host-side veth name: the interface name plus the start of the container id,
/// within IFNAMSIZ.
pub fn host_name(container_id: &str, interface: &str) -> String {
    let room = 15usize.saturating_sub(interface.len());
    let id: String = container_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(room)
        .collect();
    format!("{interface}{id}")
}

fn io(what: &str) -> impl FnOnce(String) -> CniError + '_ {
    move |e| CniError::new(code::IO_FAILURE, what.to_owned()).details(e)
}

/// What one ADD made, to undo on failure.
#[derive(Default)]
struct Made {
    ports: Vec<u32>,
    links: Vec<String>,
    endpoints: Vec<(String, String)>,
}

impl Agent {
    pub fn new(node: &str, node_ip: Ipv4Addr, store: Store, dataplane: Dataplane) -> Self {
        Self {
            node: node.into(),
            node_ip,
            store,
            dataplane: Mutex::new(dataplane),
            remotes: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn handle(&self, req: &Request) -> Result<Option<CniResult>, CniError> {
        match req.command.as_str() {
            "ADD" => self.add(req).map(Some),
            "DEL" => self.del(req).map(|()| None),
            "CHECK" => self.check(req).map(|()| None),
            "GC" => self.gc(req).map(|()| None),
            "STATUS" => Ok(None),
            other => Err(CniError::new(
                code::INVALID_ENV,
                format!("unknown CNI_COMMAND {other:?}"),
            )),
        }
    }

    fn pod_of(req: &Request) -> Result<(String, String), CniError> {
        match (
            req.args.get("K8S_POD_NAMESPACE"),
            req.args.get("K8S_POD_NAME"),
        ) {
            (Some(ns), Some(name)) => Ok((ns.clone(), name.clone())),
            _ => Err(CniError::new(
                code::INVALID_ENV,
                "CNI_ARGS must carry K8S_POD_NAMESPACE and K8S_POD_NAME",
            )),
        }
    }

    /// The Pod's NICs once the controller allocated all of them.
    fn wait_for_nics(&self, ns: &str, pod: &str) -> Result<Vec<NetworkInterface>, CniError> {
        let deadline = Instant::now() + NIC_WAIT;
        let mut seen = 0;
        loop {
            let nics = self.store.interfaces_of(ns, pod);
            if let Some(failed) = nics
                .iter()
                .find(|n| n.status.as_ref().is_some_and(|s| s.phase == "Failed"))
            {
                let why = failed
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.first())
                    .map(|c| c.message.clone())
                    .unwrap_or_default();
                return Err(CniError::new(
                    code::INVALID_CONFIG,
                    format!(
                        "NetworkInterface {ns}/{} cannot be set up: {why}",
                        failed.metadata.name.as_deref().unwrap_or("")
                    ),
                ));
            }
            let ready = !nics.is_empty()
                && nics
                    .iter()
                    .all(|n| n.status.as_ref().is_some_and(|s| s.phase == "Allocated"));
            if ready {
                return Ok(nics);
            }
            if Instant::now() >= deadline {
                return Err(CniError::new(
                    code::TRY_AGAIN_LATER,
                    format!(
                        "the NICs of Pod {ns}/{pod} are not allocated yet; the kubelet will retry"
                    ),
                ));
            }
            seen = self.store.wait(seen, Duration::from_millis(200));
        }
    }

    fn add(&self, req: &Request) -> Result<CniResult, CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let nics = self.wait_for_nics(&ns, &pod)?;
        let mut made = Made::default();
        let mut result = CniResult {
            cni_version: crate::cni::VERSION.into(),
            dns: serde_json::json!({}),
            ..Default::default()
        };
        for nic in &nics {
            if let Err(e) = self.add_nic(req, &ns, &pod, nic, &mut made, &mut result) {
                self.undo(made);
                return Err(e);
            }
        }
        Ok(result)
    }

    fn add_nic(
        &self,
        req: &Request,
        ns: &str,
        pod: &str,
        nic: &NetworkInterface,
        made: &mut Made,
        result: &mut CniResult,
    ) -> Result<(), CniError> {
        let status = nic.status.clone().unwrap_or_default();
        let iface = nic.spec.interface.clone();
        let host = host_name(&req.container_id, &iface);
        let mac = nic_mac(&req.container_id, &iface);
        let spec = VethSpec {
            host_name: host.clone(),
            host_mac: nic_mac(&req.container_id, &format!("{iface}-host")),
            pod_netns: req.netns.clone().into(),
            pod_name: iface.clone(),
            pod_mac: mac,
            mtu: (status.mtu != 0).then_some(status.mtu),
            alias: veth::alias_for(&req.container_id, &iface),
        };
        let ifindex = veth::create(None, &spec)
            .map_err(|e| io(&format!("cannot create the veth pair for {iface}"))(e.to_string()))?;
        made.links.push(host.clone());
        result.interfaces.push(Interface {
            name: host.clone(),
            mac: crate::format_mac(&spec.host_mac),
            mtu: spec.mtu,
            sandbox: None,
        });
        result.interfaces.push(Interface {
            name: iface.clone(),
            mac: crate::format_mac(&mac),
            mtu: spec.mtu,
            sandbox: Some(req.netns.clone()),
        });
        let pod_ns = Path::new(&req.netns);
        if !status.address.is_empty() {
            netlink::add_address(pod_ns, &iface, &status.address)
                .map_err(|e| io(&format!("cannot address {iface}"))(e.to_string()))?;
            let gateway = status.routes.first().map(|r| r.gw.clone());
            result.ips.push(IpConfig {
                address: status.address.clone(),
                gateway: gateway.clone(),
                interface: result.interfaces.len() - 1,
            });
        }
        for r in &status.routes {
            let gw: Ipv4Addr = r.gw.parse().map_err(|_| {
                CniError::new(
                    code::INVALID_CONFIG,
                    format!("route gateway {:?} is not IPv4", r.gw),
                )
            })?;
            netlink::add_default_route(pod_ns, gw)
                .map_err(|e| io(&format!("cannot add {iface}'s default route"))(e.to_string()))?;
            result.routes.push(RouteConfig {
                dst: r.dst.clone(),
                gw: Some(r.gw.clone()),
            });
        }
        let port = PortSpec {
            ifindex,
            vni: status.vni,
            mtu: status.mtu,
            peer: true,
        };
        self.dataplane
            .lock()
            .expect("dataplane lock")
            .attach_port(&host, port)
            .map_err(|e| io(&format!("cannot attach the datapath to {host}"))(e.to_string()))?;
        made.ports.push(ifindex);
        let name = format!("{pod}.{iface}");
        let mut ep = NetworkEndpoint::new(
            &name,
            NetworkEndpointSpec {
                kind: "Pod".into(),
                subnet: nic.spec.subnet.clone(),
                l2_network: nic.spec.l2_network.clone(),
                address: status.address.clone(),
                mac_address: crate::format_mac(&mac),
                node_name: self.node.clone(),
                node_ip: self.node_ip.to_string(),
            },
        );
        ep.metadata.namespace = Some(ns.to_owned());
        self.store.put_endpoint(ep);
        made.endpoints.push((ns.to_owned(), name));
        Ok(())
    }

    /// Undoes a partial ADD, in reverse order; errors are collected, never stop it.
    fn undo(&self, made: Made) {
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        for ifindex in made.ports {
            let _ = dp.remove_port(ifindex);
        }
        drop(dp);
        for link in made.links {
            let _ = veth::delete(None, &link);
        }
        for (ns, name) in made.endpoints {
            self.store.delete_endpoint(&ns, &name);
        }
    }

    /// Removes every NIC of the container; succeeds when there is nothing left to do.
    fn del(&self, req: &Request) -> Result<(), CniError> {
        let prefix = format!("{}:{}:", veth::OWNER_ALIAS, req.container_id);
        let links = netlink::links_with_alias(&prefix)
            .map_err(|e| io("cannot list the Node's links")(e.to_string()))?;
        let mut errors = Vec::new();
        for (name, ifindex, alias) in links {
            if let Err(e) = self
                .dataplane
                .lock()
                .expect("dataplane lock")
                .remove_port(ifindex)
            {
                errors.push(e.to_string());
            }
            if let Err(e) = veth::delete(None, &name) {
                errors.push(e.to_string());
            }
            if let (Ok((ns, pod)), Some(iface)) = (Self::pod_of(req), alias.rsplit(':').next()) {
                self.store.delete_endpoint(&ns, &format!("{pod}.{iface}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(CniError::new(code::IO_FAILURE, "DEL left something behind")
                .details(errors.join("; ")))
        }
    }

    /// Every NIC of the Pod exists, is attached, and has its address.
    fn check(&self, req: &Request) -> Result<(), CniError> {
        let (ns, pod) = Self::pod_of(req)?;
        let prefix = format!("{}:{}:", veth::OWNER_ALIAS, req.container_id);
        let links = netlink::links_with_alias(&prefix)
            .map_err(|e| io("cannot list the Node's links")(e.to_string()))?;
        for nic in self.store.interfaces_of(&ns, &pod) {
            let iface = &nic.spec.interface;
            let host = host_name(&req.container_id, iface);
            let Some((_, ifindex, _)) = links.iter().find(|(n, _, _)| *n == host) else {
                return Err(CniError::new(
                    code::UNKNOWN_CONTAINER,
                    format!("{iface}: host veth {host} is missing"),
                ));
            };
            let port = self
                .dataplane
                .lock()
                .expect("dataplane lock")
                .port(*ifindex);
            if !port.is_ok_and(|p| p.flags & juneau_common::l2::PORT_ACTIVE != 0) {
                return Err(CniError::new(
                    code::IO_FAILURE,
                    format!("{iface}: {host} is not an active datapath port"),
                ));
            }
            let want = nic
                .status
                .as_ref()
                .map(|s| s.address.clone())
                .unwrap_or_default();
            if !want.is_empty() {
                let have = netlink::addresses(Path::new(&req.netns), iface)
                    .map_err(|e| io("cannot read the Pod's addresses")(e.to_string()))?;
                if !have.contains(&want) {
                    return Err(CniError::new(
                        code::IO_FAILURE,
                        format!("{iface}: address {want} is missing in the Pod (has {have:?})"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Removes the attachments of containers that are not in the valid list.
    fn gc(&self, req: &Request) -> Result<(), CniError> {
        let valid = req.config.valid_attachments.clone().unwrap_or_default();
        let links = netlink::links_with_alias(&format!("{}:", veth::OWNER_ALIAS))
            .map_err(|e| io("cannot list the Node's links")(e.to_string()))?;
        for (name, ifindex, alias) in links {
            let mut parts = alias.splitn(4, ':').skip(2);
            let (Some(cid), Some(iface)) = (parts.next(), parts.next()) else {
                continue;
            };
            if !valid
                .iter()
                .any(|a| a.container_id == cid && a.ifname == iface)
            {
                let _ = self
                    .dataplane
                    .lock()
                    .expect("dataplane lock")
                    .remove_port(ifindex);
                let _ = veth::delete(None, &name);
            }
        }
        Ok(())
    }

    /// Brings the remote VTEP lists in line with the NetworkEndpoints of other Nodes.
    pub fn sync_remotes(&self) {
        let (world, _) = self.store.read();
        let vni_of = |l2: &str| {
            world
                .objects
                .l2network(l2)
                .and_then(|l| l.status.as_ref())
                .map(|s| s.vni)
                .unwrap_or(0)
        };
        let want: BTreeMap<String, (u32, Ipv4Addr)> = world
            .endpoints
            .iter()
            .filter(|e| e.spec.node_name != self.node)
            .filter_map(|e| {
                let vni = vni_of(e.spec.l2_network.as_deref()?);
                let ip = e.spec.node_ip.parse().ok()?;
                let key = format!(
                    "{}/{}",
                    e.metadata.namespace.as_deref().unwrap_or(""),
                    e.metadata.name.as_deref().unwrap_or("")
                );
                (vni != 0).then_some((key, (vni, ip)))
            })
            .collect();
        let mut have = self.remotes.lock().expect("remotes lock");
        let mut dp = self.dataplane.lock().expect("dataplane lock");
        let gone: Vec<String> = have
            .keys()
            .filter(|k| !want.contains_key(*k))
            .cloned()
            .collect();
        for k in gone {
            if let Some((vni, ip)) = have.remove(&k) {
                let _ = dp.remove_remote(vni, ip);
            }
        }
        let new: Vec<(String, (u32, Ipv4Addr))> = want
            .into_iter()
            .filter(|(k, _)| !have.contains_key(k))
            .collect();
        let batch: Vec<(u32, Ipv4Addr)> = new.iter().map(|(_, v)| *v).collect();
        if dp.add_remotes(&batch).is_ok() {
            have.extend(new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_01_host_names_fit_ifnamsiz_and_macs_are_stable_and_local() {
        assert_eq!(host_name("0123456789abcdef0123", "eth1"), "eth10123456789a");
        assert!(host_name("x", "eth1").len() <= 15);
        let m = nic_mac("abc", "eth1");
        assert_eq!(m, nic_mac("abc", "eth1"));
        assert_ne!(m, nic_mac("abc", "eth2"));
        assert_eq!(m[0] & 0x03, 0x02, "locally administered, unicast");
    }
}
