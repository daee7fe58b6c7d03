//! `kubectl juneau trace` to an address outside the cluster: when the source NIC's
//! table routes it via a NATGateway (NAT-01), the steps of its translation on the
//! source's own Node (no gateway Pod: every Node translates its own Pods), the way out
//! and the way its replies come back; via the internet gateway (NAT-03), the 1:1
//! rewrite to the NIC's attached ElasticIP, or the Vpc's NATGateway the datapath falls
//! back to, or the refusal. Refused, as the datapath does, for the cluster's own
//! ranges, which are never translated.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::cli::{
    CliError,
    describe::{attachment_of, nat_route_of},
    hop::Hop,
};
use crate::{api::NetworkInterface, cluster::World};

/// The steps to `to` through the NIC's NATGateway or internet gateway, or `None` when
/// no such route of its table covers `to` (the caller then says no NIC has the address).
pub fn outside_hops(
    world: &World,
    src: &NetworkInterface,
    node: &str,
    first: Hop,
    to: Ipv4Addr,
) -> Result<Option<Vec<Hop>>, CliError> {
    let hop = |what: String| Hop {
        node: node.to_owned(),
        what,
    };
    let vpc = vpc_of(world, src);
    let nat = nat_route_of(world, src, node, Some(to))
        .filter(|r| r.dst.parse::<Ipv4Net>().is_ok_and(|net| net.contains(&to)));
    let igw = internet_gateway_route(world, src, &vpc, to);
    if nat.is_none() && igw.is_none() {
        return Ok(None);
    }
    let mut hops = vec![first];
    if let Some(range) = crate::node::egress::cluster_ranges(world, &vpc)
        .into_iter()
        .find(|r| r.contains(&to))
    {
        hops.push(hop(format!(
            "{to} is in the cluster's own range {range}: never translated out; refused \
             at once (a Service CIDR of a Vpc that does not consume Services: \
             SVC_NOT_CONSUMED, a TCP reset; else as no route, NO_ROUTE)"
        )));
        return Ok(Some(hops));
    }
    let client_ip = src.ip();
    let client = client_ip.map(|a| a.to_string()).unwrap_or_default();
    let client = client.as_str();
    if let Some(route) = nat {
        hops.push(hop(format!(
            "routed by Vpc {vpc}'s router: {} via NATGateway {}, TTL decremented, then \
             nat_out (tail call)",
            route.dst, route.gateway
        )));
        let Some(address) = route.address else {
            hops.push(hop(format!(
                "no address on ExternalNetwork {} on this Node yet (its \
                 ExternalNetworkAttachment waits): refused, ICMP unreachable \
                 (administratively prohibited) to the Pod, counted as NAT_NO_ADDRESS",
                route.external_network
            )));
            return Ok(Some(hops));
        };
        hops.extend(napt(node, client, address, to, &route.external_network).map(hop));
        return Ok(Some(hops));
    }
    let Some(route) = igw else {
        return Ok(None);
    };
    hops.push(hop(format!(
        "routed by Vpc {vpc}'s router: {route} via the internet gateway, TTL decremented"
    )));
    // Attached as the Node writes it (`node::elasticip::attached`: the attachment
    // Attached, the ElasticIP naming it, the NIC's endpoint at its address); only a
    // Subnet port carries a public address.
    let vni = src.status.as_ref().map_or(0, |s| s.vni);
    let public = client_ip
        .filter(|_| src.spec.subnet.is_some())
        .and_then(|ip| {
            crate::node::egress::attached(world)
                .find(|(_, h)| h.vni == vni && h.pod_ip == Some(ip))
                .map(|(eip, _)| eip)
        });
    if let Some((eip, a)) = public.zip(attachment_of(world, src)) {
        let name = a.metadata.name.as_deref().unwrap_or("");
        let answering = a.status.as_ref().map_or("", |s| s.node_name.as_str());
        hops.push(hop(format!(
            "nat_out (tail call), 1:1 by ElasticIPAttachment {name}: source {client} \
             becomes ElasticIP {eip}, ports kept, no connection claimed (a connection the \
             Vpc's NATGateway mapped before the attachment keeps its mapping)"
        )));
        hops.push(hop(format!(
            "out by Node {node}'s own routing table (bpf_fib_lookup, bpf_redirect) to {to}, \
             from {eip}"
        )));
        hops.push(hop(format!(
            "replies to {eip} reach the uplink of Node {answering} (it answers ARP for {eip}), or of \
             any Node the upstream sends them to, which carries them by VXLAN (VNI {vni}) to \
             Node {node}: eip_uplink gives the Pod back {client} and delivers it through \
             its Subnet's NetworkACL and its SecurityGroups"
        )));
        return Ok(Some(hops));
    }
    // No ElasticIP attached: the Vpc's NATGateway, as the route is written.
    let through = crate::node::egress::internet_gateway_fallback(world, node, &vpc);
    let Some((gateway, address)) = through else {
        hops.push(hop(format!(
            "no ElasticIP attached to {} and no NATGateway of Vpc {vpc} with an address \
             on Node {node}: refused, ICMP unreachable (administratively prohibited) to \
             the Pod, counted as IGW_NO_PUBLIC_ADDRESS",
            src.metadata.name.as_deref().unwrap_or("")
        )));
        return Ok(Some(hops));
    };
    hops.push(hop(format!(
        "no ElasticIP attached: through Vpc {vpc}'s NATGateway {}, then nat_out (tail call)",
        gateway.metadata.name.as_deref().unwrap_or("")
    )));
    hops.extend(napt(node, client, address, to, &gateway.spec.external_network).map(hop));
    Ok(Some(hops))
}

/// The Vpc a Subnet or L2Network NIC is in.
fn vpc_of(world: &World, src: &NetworkInterface) -> String {
    match (&src.spec.subnet, &src.spec.l2_network) {
        (Some(s), _) => world.objects.subnet(s).map(|s| s.spec.vpc.clone()),
        (None, Some(l)) => world.objects.l2network(l).map(|l| l.spec.vpc.clone()),
        _ => None,
    }
    .unwrap_or_default()
}

/// The longest route covering `to` of the table the Node routes the NIC's segment by
/// (a Subnet's Vpc's, a gateway L2Network's own or its Vpc's), when it is via the
/// internet gateway.
fn internet_gateway_route(
    world: &World,
    src: &NetworkInterface,
    vpc: &str,
    to: Ipv4Addr,
) -> Option<Ipv4Net> {
    let objects = &world.objects;
    let own = match (&src.spec.subnet, &src.spec.l2_network) {
        (Some(_), _) => None,
        (None, Some(l)) => objects
            .l2network(l)?
            .spec
            .gateway
            .as_ref()?
            .route_table
            .clone(),
        _ => return None,
    };
    let table = objects.route_table(&objects.table_of(vpc, own))?;
    let (net, route) = table
        .spec
        .routes
        .iter()
        .filter_map(|r| Some((r.prefix()?, r)))
        .filter(|(n, _)| n.contains(&to))
        .max_by_key(|(n, _)| n.prefix_len())?;
    (route.via.type_ == "internetGateway").then_some(net)
}

/// A NATGateway's translation from `address`, the way out and back.
fn napt(
    node: &str,
    client: &str,
    address: Ipv4Addr,
    to: Ipv4Addr,
    external_network: &str,
) -> impl Iterator<Item = String> {
    [
        format!(
            "nat_out: source {client}:<port> becomes {address}:<port> (the Pod's own port \
             when free toward {to}, else one of 128 random ports claimed by an atomic \
             insert; none free: refused, NAT_PORT_EXHAUSTED), the mapping in the \
             connection table"
        ),
        format!(
            "out by Node {node}'s own routing table (bpf_fib_lookup, bpf_redirect) to {to}, \
             from {address} on ExternalNetwork {external_network}"
        ),
        format!(
            "replies to {address}:<port> reach Node {node}'s uplink (it alone answers ARP \
             for {address}): eip_uplink gives the Pod back its address and port and \
             delivers it through its NetworkACL and SecurityGroups"
        ),
    ]
    .into_iter()
}
