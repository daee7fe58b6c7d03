//! `kubectl juneau describe pod`: one row per NIC of a Pod, read from the cluster's
//! objects (the API server, or a standalone run's store), saying which network each NIC
//! is on and, for a direct ElasticIP, who carries the address (EIP-25): the first thing
//! to look at when an ElasticIP is not reached from outside.
use serde::Serialize;

use super::CliError;
use crate::{
    admission::validate::Snapshot,
    api::{ElasticIP, NetworkInterface, net::shown},
    cluster::World,
};

#[derive(Debug, Serialize, PartialEq)]
pub struct PodDescription {
    pub namespace: String,
    pub name: String,
    pub node: String,
    pub terminating: bool,
    pub nics: Vec<NicRow>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct NicRow {
    pub interface: String,
    /// The NetworkInterface, `<pod>.<iface>`.
    pub name: String,
    pub phase: String,
    pub address: String,
    /// From the NIC's NetworkEndpoint: empty until its Node attached it.
    pub mac: String,
    /// `L2Network blue (VNI 4097)`, `Subnet web (Vpc prod, VNI 12)`, or
    /// `ElasticIP web-eip (direct, 10.225.51.8, networkID 4097, carried by this NIC)`.
    pub network: String,
    /// Why the NIC is not Ready, from its first condition that is not True.
    pub waiting: Option<String>,
    /// How the NIC reaches the outside, when its Vpc's table routes via a NATGateway:
    /// `NATGateway out (0.0.0.0/0, from 10.99.0.100, ExternalNetwork ext on node-a)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside: Option<String>,
}

fn name_of<K: kube::Resource>(o: &K) -> &str {
    o.meta().name.as_deref().unwrap_or("")
}

fn ns_of<K: kube::Resource>(o: &K) -> &str {
    o.meta().namespace.as_deref().unwrap_or("default")
}

/// The Pod's NICs as the cluster's objects describe them.
pub fn describe_pod(world: &World, namespace: &str, pod: &str) -> Result<PodDescription, CliError> {
    let record = world
        .pods
        .iter()
        .find(|p| p.namespace == namespace && p.name == pod)
        .ok_or_else(|| CliError::Usage(format!("pod {namespace}/{pod} not found")))?;
    let mut nics: Vec<NicRow> = world
        .objects
        .interfaces
        .iter()
        .filter(|n| ns_of(*n) == namespace && n.spec.pod_ref.name == pod)
        .map(|nic| nic_row(world, nic, &record.node))
        .collect();
    nics.sort_by(|a, b| a.interface.cmp(&b.interface));
    Ok(PodDescription {
        namespace: namespace.to_owned(),
        name: pod.to_owned(),
        node: record.node.clone(),
        terminating: record.terminating,
        nics,
    })
}

fn nic_row(world: &World, nic: &NetworkInterface, node: &str) -> NicRow {
    let status = nic.status.clone().unwrap_or_default();
    let endpoint = world
        .endpoints
        .iter()
        .find(|e| name_of(*e) == name_of(nic) && ns_of(*e) == ns_of(nic));
    let waiting = status
        .conditions
        .iter()
        .find(|c| c.status != "True")
        .map(|c| format!("{} {}: {}", c.type_, c.reason, c.message));
    NicRow {
        interface: nic.spec.interface.clone(),
        name: name_of(nic).to_owned(),
        phase: status.phase.clone(),
        address: status.address.map(|a| a.to_string()).unwrap_or_default(),
        mac: endpoint
            .and_then(|e| e.spec.mac_address)
            .map(|m| m.to_string())
            .unwrap_or_default(),
        network: network_of(&world.objects, nic, status.vni),
        waiting,
        outside: one_to_one_of(world, nic)
            .or_else(|| internet_gateway_of(world, nic, node))
            .or_else(|| nat_of(world, nic, node)),
    }
}

/// A NIC's way to the outside through a NATGateway (NAT-01), as its Node holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NatRoute {
    /// The route's destination (`0.0.0.0/0`).
    pub dst: String,
    pub gateway: String,
    pub external_network: String,
    /// The address the NIC's Node translates to, once its attachment has one.
    pub address: Option<std::net::Ipv4Addr>,
}

/// The NATGateway route of the table a NIC's segment routes by (an L2Network's own
/// `gateway.routeTable`, else the RouteTable named as its Vpc), or the default Vpc's
/// implicit route to a Ready `default` gateway; `None` without one. With `to`, the
/// route the router takes for it, the longest prefix of the table that covers it, and
/// only when that is a NATGateway route; without, the widest NATGateway route (the way
/// out a NIC "goes by").
pub fn nat_route_of(
    world: &World,
    nic: &NetworkInterface,
    node: &str,
    to: Option<std::net::Ipv4Addr>,
) -> Option<NatRoute> {
    use crate::api::natgateway::DEFAULT_NAT_GATEWAY;
    let objects = &world.objects;
    let (vpc, own) = match (&nic.spec.subnet, &nic.spec.l2_network) {
        (Some(s), _) => (objects.subnet(s)?.spec.vpc.clone(), None),
        (None, Some(l)) => {
            let l = objects.l2network(l)?;
            let own = l.spec.gateway.as_ref()?.route_table.clone();
            (l.spec.vpc.clone(), own)
        }
        _ => return None,
    };
    // The table the Node routes the NIC's segment by (`node::gateway`).
    let table = objects
        .route_table(&objects.table_of(&vpc, own))
        .filter(|t| t.spec.vpc == vpc);
    let ready = |g: &crate::api::NATGateway| {
        g.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
    };
    let (dst, name) = match table {
        Some(t) => {
            let routes = t.spec.routes.iter().filter_map(|r| Some((r.prefix()?, r)));
            let nat = |r: &&crate::api::routetable::Route| r.via.type_ == "natGateway";
            let chosen = match to {
                Some(a) => routes
                    .filter(|(n, _)| n.contains(&a))
                    .max_by_key(|(n, _)| n.prefix_len())
                    .filter(|(_, r)| nat(r)),
                None => routes
                    .filter(|(_, r)| nat(r))
                    .min_by_key(|(n, _)| n.prefix_len()),
            };
            chosen.map(|(_, r)| (r.dst.clone(), r.via.nat_gateway.clone().unwrap_or_default()))?
        }
        None if vpc == crate::api::DEFAULT_VPC
            && objects.nat_gateway(DEFAULT_NAT_GATEWAY).is_some_and(ready) =>
        {
            ("0.0.0.0/0".to_owned(), DEFAULT_NAT_GATEWAY.to_owned())
        }
        None => return None,
    };
    let external_network = objects
        .nat_gateway(&name)
        .map(|g| g.spec.external_network.clone())
        .unwrap_or_default();
    let address = crate::node::egress::address_of(world, &external_network, node);
    Some(NatRoute {
        dst,
        gateway: name,
        external_network,
        address,
    })
}

/// NAT-03: the ElasticIPAttachment that names this NIC, whatever its phase.
pub fn attachment_of<'w>(
    world: &'w World,
    nic: &NetworkInterface,
) -> Option<&'w crate::api::ElasticIPAttachment> {
    world.objects.elastic_ip_attachments.iter().find(|a| {
        a.metadata.namespace.as_deref().unwrap_or("default") == ns_of(nic)
            && a.spec.target_ref.network_interface_name == name_of(nic)
    })
}

/// NAT-03: the ElasticIP an ElasticIPAttachment maps onto this NIC, with its state.
fn one_to_one_of(world: &World, nic: &NetworkInterface) -> Option<String> {
    let a = attachment_of(world, nic)?;
    let st = a.status.clone().unwrap_or_default();
    let name = a.metadata.name.as_deref().unwrap_or("");
    let eip = &a.spec.elastic_ip_ref.name;
    Some(if st.phase == "Attached" {
        format!(
            "ElasticIP {eip} (1:1 by ElasticIPAttachment {name}, {} <-> {}, answered by {})",
            shown(&st.elastic_ip),
            shown(&st.pod_ip),
            st.node_name
        )
    } else {
        let why = st
            .conditions
            .first()
            .map(|c| format!("{}: {}", c.reason, c.message))
            .unwrap_or_default();
        format!(
            "ElasticIP {eip} by ElasticIPAttachment {name}, {}: {why}",
            or_dash_str(&st.phase)
        )
    })
}

fn or_dash_str(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

/// NAT-03: a Subnet NIC without an ElasticIP whose table routes via the internet
/// gateway goes out through its Vpc's NATGateway, or is refused by name.
fn internet_gateway_of(world: &World, nic: &NetworkInterface, node: &str) -> Option<String> {
    let objects = &world.objects;
    let vpc = &objects.subnet(nic.spec.subnet.as_deref()?)?.spec.vpc;
    let table = objects.table_of(vpc, None);
    let route = objects
        .route_table(&table)?
        .spec
        .routes
        .iter()
        .filter(|r| r.via.type_ == "internetGateway")
        .filter_map(|r| r.prefix())
        .min_by_key(|n| n.prefix_len())?;
    let spec = crate::features::router::gateway::via_internet_gateway(world, node, vpc, route);
    Some(if spec.nh_ip.is_unspecified() {
        format!(
            "internet gateway ({route}): no public address (no ElasticIP attached, no NATGateway of Vpc {vpc} with an address on {node}: IGW_NO_PUBLIC_ADDRESS)"
        )
    } else {
        format!(
            "internet gateway ({route}): through Vpc {vpc}'s NATGateway, from {} on {node}",
            spec.nh_ip
        )
    })
}

fn nat_of(world: &World, nic: &NetworkInterface, node: &str) -> Option<String> {
    let r = nat_route_of(world, nic, node, None)?;
    if r.external_network.is_empty() {
        return Some(format!("NATGateway {} ({}): not found", r.gateway, r.dst));
    }
    let from = r.address.map_or_else(
        || "no address on this Node yet".to_owned(),
        |a| format!("from {a}"),
    );
    Some(format!(
        "NATGateway {} ({}, {from}, ExternalNetwork {} on {node})",
        r.gateway, r.dst, r.external_network
    ))
}

/// What a NIC is attached to, in the words of EIP-25 for a direct ElasticIP.
pub fn network_of(objects: &Snapshot, nic: &NetworkInterface, vni: u32) -> String {
    let spec = &nic.spec;
    if let Some(eip) = &spec.elastic_ip {
        return match objects.elastic_ip(ns_of(nic), eip) {
            Some(e) => elastic_ip_line(objects, e, name_of(nic)),
            None => format!(
                "ElasticIP {eip} (direct, not found in namespace {})",
                ns_of(nic)
            ),
        };
    }
    if let Some(subnet) = &spec.subnet {
        let vpc = objects.subnet(subnet).map_or("?", |s| s.spec.vpc.as_str());
        return format!("Subnet {subnet} (Vpc {vpc}, VNI {vni})");
    }
    if let Some(l2) = &spec.l2_network {
        return format!("L2Network {l2} (VNI {vni})");
    }
    "no network".to_owned()
}

fn elastic_ip_line(objects: &Snapshot, eip: &ElasticIP, nic: &str) -> String {
    let status = eip.status.clone().unwrap_or_default();
    let address = status
        .address
        .map_or_else(|| "no address yet".to_owned(), |a| a.to_string());
    let carrier = match &status.attachment {
        Some(a) if a.kind == "NetworkInterface" && a.name == nic => {
            "carried by this NIC".to_owned()
        }
        Some(a) => format!("carried by {} {}", a.kind, a.name),
        None => "carried by nothing yet".to_owned(),
    };
    format!(
        "ElasticIP {} (direct, {address}, networkID {}, {carrier})",
        name_of(eip),
        objects.network_id_of(eip)
    )
}

/// The description as `kubectl describe` prints: a header, then one row per NIC.
pub fn render(d: &PodDescription) -> String {
    let mut out = format!(
        "Name:       {}\nNamespace:  {}\nNode:       {}{}\nNICs:\n",
        d.name,
        d.namespace,
        d.node,
        if d.terminating { " (terminating)" } else { "" }
    );
    if d.nics.is_empty() {
        out.push_str(
            "  none: the controller made no NetworkInterface for this Pod yet (its log says \
             `waiting for the network of a Pod NIC` and why)\n",
        );
        return out;
    }
    let dash = |s: &str| {
        if s.is_empty() {
            "-".to_owned()
        } else {
            s.to_owned()
        }
    };
    let mut rows = vec![[
        "INTERFACE".to_owned(),
        "NETWORKINTERFACE".to_owned(),
        "PHASE".to_owned(),
        "ADDRESS".to_owned(),
        "MAC".to_owned(),
        "NETWORK".to_owned(),
    ]];
    rows.extend(d.nics.iter().map(|n| {
        [
            n.interface.clone(),
            n.name.clone(),
            dash(&n.phase),
            dash(&n.address),
            dash(&n.mac),
            n.network.clone(),
        ]
    }));
    let width = |c: usize| rows.iter().map(|r| r[c].len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..5).map(width).collect();
    for (i, r) in rows.iter().enumerate() {
        out.push_str("  ");
        for (c, w) in widths.iter().enumerate() {
            out.push_str(&format!("{:<w$}  ", r[c]));
        }
        out.push_str(&r[5]);
        out.push('\n');
        if let Some(why) = i.checked_sub(1).and_then(|n| d.nics[n].waiting.as_ref()) {
            out.push_str(&format!("  {:<w$}  waiting: {why}\n", "", w = widths[0]));
        }
        if let Some(nat) = i.checked_sub(1).and_then(|n| d.nics[n].outside.as_ref()) {
            out.push_str(&format!("  {:<w$}  outside: {nat}\n", "", w = widths[0]));
        }
    }
    out
}
