//! `kubectl juneau trace` to an address outside the cluster (NAT-01): when the source
//! NIC's table routes it via a NATGateway, the steps of its translation on the source's
//! own Node (no gateway Pod: every Node translates its own Pods), the way out and the
//! way its replies come back. Refused, as the datapath does, for the cluster's own
//! ranges, which are never translated.
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use super::{CliError, describe::nat_route_of, trace::Hop};
use crate::{api::NetworkInterface, cluster::World};

/// The steps to `to` through the NIC's NATGateway, or `None` when no NATGateway route
/// of its table covers `to` (the caller then says no NIC has the address).
pub fn outside_hops(
    world: &World,
    src: &NetworkInterface,
    node: &str,
    first: Hop,
    to: Ipv4Addr,
) -> Result<Option<Vec<Hop>>, CliError> {
    let Some(route) = nat_route_of(world, src, node, Some(to)) else {
        return Ok(None);
    };
    let covers = route
        .dst
        .parse::<Ipv4Net>()
        .is_ok_and(|net| net.contains(&to));
    if !covers {
        return Ok(None);
    }
    let hop = |what: String| Hop {
        node: node.to_owned(),
        what,
    };
    let vpc = match (&src.spec.subnet, &src.spec.l2_network) {
        (Some(s), _) => world.objects.subnet(s).map(|s| s.spec.vpc.clone()),
        (None, Some(l)) => world.objects.l2network(l).map(|l| l.spec.vpc.clone()),
        _ => None,
    }
    .unwrap_or_default();
    let mut hops = vec![first];
    if let Some(range) = crate::node::gateway::nat_cluster_ranges(world, &vpc)
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
    hops.push(hop(format!(
        "routed by Vpc {vpc}'s router: {} via NATGateway {}, TTL decremented, then \
         nat_out (tail call)",
        route.dst, route.gateway
    )));
    let Some(address) = route.address else {
        hops.push(hop(format!(
            "no address on ExternalNetwork {} on this Node yet (its \
             ExternalNetworkAttachment waits): refused, ICMP unreachable (administratively \
             prohibited) to the Pod, counted as NAT_NO_ADDRESS",
            route.external_network
        )));
        return Ok(Some(hops));
    };
    let client = src.status.as_ref().map_or("", |s| s.address.as_str());
    let client = client.split('/').next().unwrap_or("");
    hops.push(hop(format!(
        "nat_out: source {client}:<port> becomes {address}:<port> (the Pod's own port when \
         free toward {to}, else one of 128 random ports claimed by an atomic insert; none \
         free: refused, NAT_PORT_EXHAUSTED), the mapping in the connection table"
    )));
    hops.push(hop(format!(
        "out by Node {node}'s own routing table (bpf_fib_lookup, bpf_redirect) to {to}, \
         from {address} on ExternalNetwork {}",
        route.external_network
    )));
    hops.push(hop(format!(
        "replies to {address}:<port> reach Node {node}'s uplink (it alone answers ARP for \
         {address}): eip_uplink gives the Pod back its address and port and delivers it \
         through its NetworkACL and SecurityGroups"
    )));
    Ok(Some(hops))
}
