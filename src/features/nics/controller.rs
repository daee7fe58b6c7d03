//! The Pod controller: one NetworkInterface `<pod>.<iface>` per NIC a Pod asks for,
//! with its address (IPAM), MTU, VNI and routes.
use std::{collections::HashMap, net::Ipv4Addr};

use crate::features::nics::ipam;
use crate::{
    admission::validate::Snapshot,
    alloc::Pool,
    api::{
        NetworkInterface, PodRecord,
        annotations::{self, Target},
        condition::Condition,
        networkinterface::{NetworkInterfaceSpec, NetworkInterfaceStatus, NicRoute, PodRef},
    },
};

/// The pool key of a NIC's segment: Subnets and L2Networks are named apart, so one of
/// each may share a name.
fn pool_key(n: &NetworkInterfaceSpec) -> Option<String> {
    match (&n.subnet, &n.l2_network) {
        (Some(s), _) => Some(format!("subnet/{s}")),
        (None, Some(l)) => Some(format!("l2/{l}")),
        _ => None,
    }
}

/// Per segment: the addresses its NICs and its Nodes hold, and its pool once the
/// segment's cidr is known (one per pass, so first fit costs O(n) over the pass).
#[derive(Default)]
struct Pools {
    held: HashMap<String, Vec<Ipv4Addr>>,
    pools: HashMap<String, Pool<Ipv4Addr>>,
}

impl Pools {
    fn new(snap: &Snapshot) -> Self {
        let mut p = Pools::default();
        for n in &snap.interfaces {
            if let (Some(key), Some(a)) = (pool_key(&n.spec), n.ip()) {
                p.held.entry(key).or_default().push(a);
            }
        }
        // The Nodes' Service source addresses (SVC-02) are no Pod's to take.
        for s in &snap.subnets {
            let key = format!("subnet/{}", s.metadata.name.as_deref().unwrap_or(""));
            for a in s.status.iter().flat_map(|st| &st.node_addresses) {
                if let Some(ip) = a.address {
                    p.held.entry(key.clone()).or_default().push(ip);
                }
            }
        }
        p
    }

    /// The pool of segment `key` (`cidr`, `gateway`), holding what is held in it.
    fn pool(
        &mut self,
        key: &str,
        cidr: ipnet::Ipv4Net,
        gateway: Option<Ipv4Addr>,
    ) -> &mut Pool<Ipv4Addr> {
        let held = &self.held;
        self.pools.entry(key.to_owned()).or_insert_with(|| {
            let mut p = ipam::pool(cidr, gateway);
            for a in held.get(key).into_iter().flatten() {
                p.hold(*a);
            }
            p
        })
    }
}

/// What a NIC reads of its segment, Subnet or L2Network alike.
struct Segment {
    /// Its key in [`Pools`].
    pool: String,
    vni: u32,
    /// 0: the kernel's default (Subnet NICs, L2-21).
    mtu: u32,
    /// `None`: no addresses handed out (L2-25).
    cidr: Option<ipnet::Ipv4Net>,
    gateway: Option<Ipv4Addr>,
}

/// A NIC's status while it cannot be completed (boxed: it is the error side of the
/// steps that build one).
type Waiting = Box<NetworkInterfaceStatus>;

fn pending(reason: &str, message: String) -> Waiting {
    Box::new(NetworkInterfaceStatus {
        phase: if reason == "NotSupported" || reason == "AllocationFailed" {
            "Failed"
        } else {
            "Pending"
        }
        .into(),
        conditions: vec![Condition::new("Allocated", false, reason, message)],
        ..Default::default()
    })
}

/// What [`reconcile_all`] decided for the Pods.
#[derive(Debug, Default)]
pub struct PodNics {
    /// Every Pod's desired NICs.
    pub interfaces: Vec<NetworkInterface>,
    /// The Pods whose annotations do not parse (`namespace/name`, why): they get no new
    /// NIC, and the ones they have are kept unchanged.
    pub unreadable: Vec<(String, String)>,
}

/// Desired NICs of every Pod. Addresses already handed out are kept; new ones are
/// allocated first-fit in Pod order.
pub fn reconcile_all(pods: &[PodRecord], snap: &Snapshot) -> PodNics {
    let mut out: Vec<NetworkInterface> = Vec::new();
    let mut unreadable = Vec::new();
    let existing_nics: HashMap<(&str, &str), &NetworkInterface> = snap
        .interfaces
        .iter()
        .map(|n| {
            (
                (
                    n.metadata.namespace.as_deref().unwrap_or(""),
                    n.metadata.name.as_deref().unwrap_or(""),
                ),
                n,
            )
        })
        .collect();
    let mut pools = Pools::new(snap);
    for pod in pods {
        let nets = match annotations::parse(&pod.annotations) {
            Ok(nets) => nets,
            Err(e) => {
                // Annotations edited into something unreadable after the Pod was admitted
                // (the webhook checks creation; it may also have been bypassed): the NICs
                // it runs with stay as they are, addresses included, rather than being
                // deleted under it and their addresses handed to other Pods
                // (`unreadable` says why).
                out.extend(
                    snap.interfaces
                        .iter()
                        .filter(|n| {
                            n.metadata.namespace.as_deref() == Some(pod.namespace.as_str())
                                && n.spec.pod_ref.name == pod.name
                        })
                        .cloned(),
                );
                unreadable.push((format!("{}/{}", pod.namespace, pod.name), e.to_string()));
                continue;
            }
        };
        for req in nets.nics {
            let name = format!("{}.{}", pod.name, req.interface);
            let existing = existing_nics
                .get(&(pod.namespace.as_str(), name.as_str()))
                .copied();
            let mut spec = NetworkInterfaceSpec {
                interface: req.interface.clone(),
                address: req.address.clone(),
                security_groups: req.security_groups.clone(),
                pod_ref: PodRef {
                    name: pod.name.clone(),
                },
                node_name: pod.node.clone(),
                // One workload's Pods (a VM's launchers) share it (EIP-20).
                allocation_identity: pod.allocation_identity(),
                ..Default::default()
            };
            let status = match &req.target {
                Target::Subnet(name) => {
                    spec.subnet = Some(name.clone());
                    subnet(name, snap).and_then(|seg| nic_status(&seg, &req, existing, &mut pools))
                }
                // Completed by the ElasticIP reconciler, which picks the holder.
                Target::ElasticIp(e) => {
                    spec.elastic_ip = Some(e.clone());
                    Err(pending(
                        "WaitingForElasticIP",
                        format!(
                            "ElasticIP {e:?} has not picked a NetworkInterface to carry it yet"
                        ),
                    ))
                }
                Target::L2Network(name) => {
                    spec.l2_network = Some(name.clone());
                    l2network(name, snap)
                        .and_then(|seg| nic_status(&seg, &req, existing, &mut pools))
                }
            }
            .unwrap_or_else(|e| *e);
            let mut nic = NetworkInterface::new(&name, spec);
            nic.metadata.namespace = Some(pod.namespace.clone());
            nic.status = Some(status);
            out.push(nic);
        }
    }
    PodNics {
        interfaces: out,
        unreadable,
    }
}

fn l2network(name: &str, snap: &Snapshot) -> Result<Segment, Waiting> {
    let Some(net) = snap.l2network(name) else {
        return Err(pending(
            "L2NetworkNotFound",
            format!("L2Network {name:?} does not exist"),
        ));
    };
    let Some(st) = net.status.as_ref().filter(|s| s.vni != 0) else {
        return Err(pending(
            "NetworkNotReady",
            format!("L2Network {name:?} has no VNI yet"),
        ));
    };
    Ok(Segment {
        pool: format!("l2/{name}"),
        vni: st.vni,
        mtu: st.mtu,
        cidr: net.prefix(),
        gateway: st.gateway,
    })
}

fn subnet(name: &str, snap: &Snapshot) -> Result<Segment, Waiting> {
    let Some(subnet) = snap.subnet(name) else {
        return Err(pending(
            "SubnetNotFound",
            format!("Subnet {name:?} does not exist"),
        ));
    };
    let ready = subnet.status.as_ref().filter(|s| s.vni != 0);
    let (Some(st), Some(cidr)) = (ready, subnet.prefix()) else {
        return Err(pending(
            "NetworkNotReady",
            format!("Subnet {name:?} has no VNI yet"),
        ));
    };
    Ok(Segment {
        pool: format!("subnet/{name}"),
        vni: st.vni,
        mtu: 0,
        cidr: Some(cidr),
        gateway: st.gateway,
    })
}

fn nic_status(
    seg: &Segment,
    req: &annotations::NicRequest,
    existing: Option<&NetworkInterface>,
    pools: &mut Pools,
) -> Result<NetworkInterfaceStatus, Waiting> {
    let mut status = NetworkInterfaceStatus {
        mtu: seg.mtu,
        vni: seg.vni,
        phase: "Allocated".into(),
        conditions: vec![Condition::new("Allocated", true, "Allocated", "")],
        ..Default::default()
    };
    // L2-25: a cidr-less segment hands out no address.
    let Some(cidr) = seg.cidr else {
        return Ok(status);
    };
    let kept = existing.and_then(|e| e.status.as_ref()?.address);
    status.address = Some(match kept {
        Some(a) => a,
        None => {
            let gateway = seg.gateway;
            let requested = req
                .address
                .as_deref()
                .and_then(|a| a.split('/').next()?.parse().ok());
            match ipam::allocate(pools.pool(&seg.pool, cidr, gateway), cidr, requested) {
                Ok(a) => ipnet::Ipv4Net::new(a, cidr.prefix_len()).expect("a prefix of the cidr"),
                Err(e) => return Err(pending("AllocationFailed", e.to_string())),
            }
        }
    });
    // L2-15: only the first NIC's default route, via the segment's gateway.
    if req.interface == "eth0"
        && let Some(gw) = seg.gateway
    {
        status.routes.push(NicRoute {
            dst: "0.0.0.0/0".into(),
            gw: gw.to_string(),
            ..Default::default()
        });
    }
    Ok(status)
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
