//! `kubectl juneau trace`: the path a packet from one Pod NIC to another takes, worked
//! out from the cluster's objects (segments, VNIs, Nodes and their VTEPs), then held
//! against the source Node's learned table when its pinned maps are on this machine.
//! A NIC that holds an ElasticIP directly is refused (EIP-21): its packets leave by the
//! Node's routing table, not by a segment this model follows. The NetworkACLs and
//! SecurityGroups the packet meets are judged on their Nodes' steps (`trace_policy.rs`),
//! by the destination's port and protocol (`<to>:<port>[/proto]`).
use std::net::Ipv4Addr;

use super::CliError;
use crate::{
    admission::validate::Snapshot,
    api::{NetworkEndpoint, NetworkInterface, net::shown},
    cluster::World,
};

/// The refusal of EIP-21, word for word.
pub const UNSUPPORTED: &str = "tracing such a NIC is not supported yet";

pub use super::hop::Hop;

fn name_of<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

fn ns_of<K: kube::Resource>(o: &K) -> &str {
    o.meta().namespace.as_deref().unwrap_or("default")
}

/// `pod` (its eth0) or `pod.iface`, in `namespace`.
fn nic_named<'w>(world: &'w World, namespace: &str, what: &str) -> Option<&'w NetworkInterface> {
    let find = |n: &str| {
        world
            .objects
            .interfaces
            .iter()
            .find(|i| ns_of(*i) == namespace && name_of(*i) == n)
    };
    find(what).or_else(|| find(&format!("{what}.eth0")))
}

fn ip_of(nic: &NetworkInterface) -> Option<Ipv4Addr> {
    nic.ip()
}

/// A NIC by name, or the NIC (of any namespace) whose address or ElasticIP `what` is.
fn resolve<'w>(
    world: &'w World,
    namespace: &str,
    what: &str,
) -> Result<&'w NetworkInterface, CliError> {
    if let Some(nic) = nic_named(world, namespace, what) {
        return Ok(nic);
    }
    let Ok(ip) = what.parse::<Ipv4Addr>() else {
        return Err(CliError::Usage(format!(
            "no NetworkInterface {namespace}/{what} (nor {namespace}/{what}.eth0): name a \
             Pod, a `<pod>.<iface>` or an IPv4 address"
        )));
    };
    let found: Vec<&NetworkInterface> = world
        .objects
        .interfaces
        .iter()
        .filter(|n| ip_of(n) == Some(ip))
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => Err(CliError::Usage(format!(
            "no NetworkInterface has the address {ip}"
        ))),
        many => Err(CliError::Usage(format!(
            "{ip} is the address of {} NetworkInterfaces (in different Vpcs): name one \
             instead ({})",
            many.len(),
            many.iter()
                .map(|n| format!("{}/{}", ns_of(*n), name_of(*n)))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// EIP-21: a direct ElasticIP NIC is neither a source nor a destination of a trace.
fn refuse_direct(nic: &NetworkInterface) -> Result<(), CliError> {
    match &nic.spec.elastic_ip {
        Some(eip) => Err(CliError::Usage(format!(
            "{UNSUPPORTED}: NetworkInterface {}/{} holds ElasticIP {eip} directly",
            ns_of(nic),
            name_of(nic)
        ))),
        None => Ok(()),
    }
}

/// The program that takes what a NIC sends, on its host veth: a Subnet NIC's veth runs
/// the router itself, an L2Network NIC's the switch (`PortKind::program` on the Node).
pub fn ingress_program(nic: &NetworkInterface) -> &'static str {
    if nic.spec.subnet.is_some() {
        "gw_route"
    } else {
        "port_ingress"
    }
}

/// The segment a NIC is on: `(kind name, its Vpc, VNI)`.
fn segment(objects: &Snapshot, nic: &NetworkInterface) -> (String, String, u32) {
    let vni = nic.status.as_ref().map_or(0, |s| s.vni);
    if let Some(s) = &nic.spec.subnet {
        let vpc = objects.subnet(s).map(|s| s.spec.vpc.clone());
        return (format!("Subnet {s}"), vpc.unwrap_or_default(), vni);
    }
    let l2 = nic.spec.l2_network.clone().unwrap_or_default();
    let vpc = objects.l2network(&l2).map(|n| n.spec.vpc.clone());
    (format!("L2Network {l2}"), vpc.unwrap_or_default(), vni)
}

fn endpoint_of<'w>(world: &'w World, nic: &NetworkInterface) -> Option<&'w NetworkEndpoint> {
    world
        .endpoints
        .iter()
        .find(|e| name_of(*e) == name_of(nic) && ns_of(*e) == ns_of(nic))
}

/// A trace's source NIC, as a Service trace reads it.
pub struct SourceNic {
    pub name: String,
    /// The program on its host veth ([`ingress_program`]).
    pub program: &'static str,
    pub node: String,
    pub address: String,
    pub ip: Ipv4Addr,
    pub segment: String,
    pub vpc: String,
    pub vni: u32,
}

/// The attached, non-direct NIC `from` names.
pub fn source_nic(world: &World, namespace: &str, from: &str) -> Result<SourceNic, CliError> {
    let src = resolve(world, namespace, from)?;
    refuse_direct(src)?;
    let ep = endpoint_of(world, src).ok_or_else(|| {
        CliError::Usage(format!(
            "NetworkInterface {}/{} is not attached (no NetworkEndpoint): its Pod's ADD has              not completed",
            ns_of(src),
            name_of(src)
        ))
    })?;
    let (segment, vpc, vni) = segment(&world.objects, src);
    Ok(SourceNic {
        name: name_of(src).to_owned(),
        program: ingress_program(src),
        node: ep.spec.node_name.clone(),
        address: ep.spec.address.map(|a| a.to_string()).unwrap_or_default(),
        ip: ip_of(src).ok_or_else(|| {
            CliError::Usage(format!("NetworkInterface {} has no address", name_of(src)))
        })?,
        segment,
        vpc,
        vni,
    })
}

/// The steps of a packet from `from` to `to`. `fdb` answers "what does this Node's
/// learned table hold for this MAC in this VNI" when the Node's maps are readable.
pub fn trace(
    world: &World,
    namespace: &str,
    from: &str,
    to: &str,
    fdb: &dyn Fn(&str, u32, &str) -> Option<String>,
) -> Result<Vec<Hop>, CliError> {
    let (to, flow) = crate::features::policy::trace::split_target(to)?;
    let src = resolve(world, namespace, from)?;
    refuse_direct(src)?;
    // An address no NIC has: outside the cluster, through a NATGateway if the source's
    // table routes it so (`trace_nat.rs`).
    if let Ok(ip) = to.parse::<Ipv4Addr>()
        && !world
            .objects
            .interfaces
            .iter()
            .any(|n| ip_of(n) == Some(ip))
        && let Some(ep) = endpoint_of(world, src)
    {
        let first = Hop {
            node: ep.spec.node_name.clone(),
            what: format!(
                "{} on the host veth of {} ({}, {})",
                ingress_program(src),
                name_of(src),
                shown(&ep.spec.address),
                shown(&ep.spec.mac_address)
            ),
        };
        if let Some(hops) =
            crate::features::nat::trace::outside_hops(world, src, &ep.spec.node_name, first, ip)?
        {
            return Ok(hops);
        }
    }
    let dst = resolve(world, namespace, to)?;
    refuse_direct(dst)?;
    let attached = |nic: &NetworkInterface| {
        endpoint_of(world, nic).ok_or_else(|| {
            CliError::Usage(format!(
                "NetworkInterface {}/{} is not attached (no NetworkEndpoint): its Pod's \
                 ADD has not completed",
                ns_of(nic),
                name_of(nic)
            ))
        })
    };
    let (s_ep, d_ep) = (attached(src)?, attached(dst)?);
    let (s_seg, s_vpc, s_vni) = segment(&world.objects, src);
    let (d_seg, d_vpc, d_vni) = segment(&world.objects, dst);
    let s_node = s_ep.spec.node_name.clone();
    let d_mac = &shown(&d_ep.spec.mac_address);
    let hop = |node: &str, what: String| Hop {
        node: node.to_owned(),
        what,
    };
    let mut hops = vec![hop(
        &s_node,
        format!(
            "{} on the host veth of {} ({}, {}) in {s_seg}, VNI {s_vni}",
            ingress_program(src),
            name_of(src),
            shown(&s_ep.spec.address),
            shown(&s_ep.spec.mac_address)
        ),
    )];
    if s_vni != d_vni {
        if s_vpc.is_empty() || s_vpc != d_vpc {
            hops.push(hop(
                &s_node,
                format!(
                    "no path: {s_seg} is in Vpc {s_vpc:?} and {d_seg} in Vpc {d_vpc:?}; \
                     routes between Vpcs are not traced"
                ),
            ));
            return Ok(hops);
        }
        hops.push(hop(
            &s_node,
            format!(
                "routed by Vpc {s_vpc}'s router from {s_seg} to {d_seg} (VNI {d_vni}), TTL \
                 decremented, source MAC the gateway's"
            ),
        ));
    }
    let policy = crate::features::policy::trace::judge(world, src, dst, flow);
    let d_node = &d_ep.spec.node_name;
    let (egress, ingress): (Vec<_>, Vec<_>) = policy
        .steps
        .into_iter()
        .partition(|(at, _)| *at == crate::features::policy::trace::At::Source);
    hops.extend(egress.into_iter().map(|(_, s)| hop(&s_node, s)));
    // Denied on the sender's side: nothing leaves its Node.
    if let Some(reason) = policy.dropped
        && ingress.is_empty()
    {
        hops.push(hop(
            &s_node,
            crate::features::policy::trace::drop_line(reason),
        ));
        return Ok(hops);
    }
    hops.push(hop(&s_node, format!("switched in VNI {d_vni} to {d_mac}")));
    // A routed packet's next hop is the router's neighbour, not a learned entry.
    if s_vni == d_vni
        && let Some(entry) = fdb(&s_node, d_vni, d_mac)
    {
        hops.push(hop(&s_node, format!("l2_fdb: {entry}")));
    }
    if *d_node != s_node {
        hops.push(hop(
            &s_node,
            format!(
                "carried by VXLAN, VNI {d_vni}, to Node {d_node} (VTEP {})",
                shown(&d_ep.spec.node_ip)
            ),
        ));
    }
    // The receiver's side, at delivery on its Node.
    hops.extend(ingress.into_iter().map(|(_, s)| hop(d_node, s)));
    if let Some(reason) = policy.dropped {
        hops.push(hop(
            d_node,
            crate::features::policy::trace::drop_line(reason),
        ));
        return Ok(hops);
    }
    hops.push(hop(
        d_node,
        if *d_node == s_node {
            format!(
                "delivered to {} on the same Node (redirect into the Pod)",
                name_of(dst)
            )
        } else {
            format!(
                "overlay_ingress: delivered to {} ({})",
                name_of(dst),
                shown(&d_ep.spec.address)
            )
        },
    ));
    Ok(hops)
}

pub fn render(hops: &[Hop]) -> String {
    let mut out = format!("{:<5} {:<16} {}\n", "STEP", "NODE", "WHAT");
    for (i, h) in hops.iter().enumerate() {
        out.push_str(&format!("{:<5} {:<16} {}\n", i + 1, h.node, h.what));
    }
    out
}

/// What `node`'s learned table holds for `mac` in `vni`, when its pinned maps are on
/// this machine (a standalone run, or kubectl-juneau run on that Node).
pub fn local_fdb(node: &str, vni: u32, mac: &str) -> Option<String> {
    let dir = super::node_dir(node);
    if !dir.exists() {
        return None;
    }
    Some(match super::dump_fdb(&dir, vni) {
        Err(e) => format!("cannot read node {node}'s table: {e}"),
        Ok(rows) => match rows.iter().find(|r| r.mac.eq_ignore_ascii_case(mac)) {
            Some(r) if r.vtep.is_empty() => format!(
                "{mac} learned on ifindex {} ({})",
                r.ifindex,
                if r.port.is_empty() { "-" } else { &r.port }
            ),
            Some(r) => format!("{mac} learned behind VTEP {}", r.vtep),
            None => format!("{mac} not learned on {node}: flooded to the segment until it speaks"),
        },
    })
}

/// The policy steps to each backend of `backends` that is a NIC of the client's Vpc.
pub fn backend_policy(
    world: &World,
    src: &SourceNic,
    proto: u8,
    backends: &[(Ipv4Addr, u16)],
) -> Vec<Hop> {
    use crate::features::policy::trace::{self as tp, At, Flow};
    let Some(client) = tp::nic_at(world, src.vni, src.ip) else {
        return Vec::new();
    };
    let mut hops = Vec::new();
    for (a, p) in backends {
        let Some(backend) = tp::nic_in_vpc(world, &src.vpc, *a) else {
            continue;
        };
        let flow = Flow {
            proto,
            port: Some(*p),
        };
        let j = tp::judge(world, client, backend, flow);
        let node = |at: At| match at {
            At::Source => src.node.clone(),
            At::Destination => backend.spec.node_name.clone(),
        };
        let mut last = At::Source;
        for (at, step) in j.steps {
            last = at;
            hops.push(Hop {
                node: node(at),
                what: format!("to backend {a}:{p}: {step}"),
            });
        }
        if let Some(reason) = j.dropped {
            hops.push(Hop {
                node: node(last),
                what: format!("to backend {a}:{p}: {}", tp::drop_line(reason)),
            });
        }
    }
    hops
}
