//! Routes and rules beyond a plain default route, for direct ElasticIP NICs: the
//! on-link default route via 169.254.0.1 (in a table of its own for a secondary NIC,
//! EIP-08, EIP-10), the rule that picks that table, and the Node's route of eth0's
//! ElasticIP to its host veth (EIP-18: kubelet probes reach the Pod). Each replaces
//! what is there: an ADD retried in the same namespace, or a new holder on the Node of
//! an old one whose veth is not gone yet, takes the place over.
use std::net::Ipv4Addr;

use futures::TryStreamExt;
use rtnetlink::{
    Handle, RouteMessageBuilder,
    packet_route::{link::LinkAttribute, route::RouteScope},
};

use super::{NetlinkError, req, with_netlink};

/// `ip route add <dst>/<len> via <gw> dev <ifname> [onlink] [table <table>]` in the
/// namespace of `handle` (table 0: main); `oif` is `ifname`'s index.
pub async fn add_route_via_on(
    handle: &Handle,
    (oif, ifname): (u32, &str),
    dst: ipnet::Ipv4Net,
    gw: Ipv4Addr,
    on_link: bool,
    table: u32,
) -> Result<(), NetlinkError> {
    let mut route = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(dst.network(), dst.prefix_len())
        .gateway(gw)
        .output_interface(oif);
    if on_link {
        route = route.onlink();
    }
    if table != 0 {
        route = route.table_id(table);
    }
    handle
        .route()
        .add(route.build())
        .replace()
        .execute()
        .await
        .map_err(req(format!(
            "add route {dst} via {gw} dev {ifname} table {table}"
        )))
}

/// `ip rule add from <from> lookup <table> priority <priority>`.
pub async fn add_rule_on(
    handle: &Handle,
    from: Ipv4Addr,
    table: u32,
    priority: u32,
) -> Result<(), NetlinkError> {
    handle
        .rule()
        .add()
        .v4()
        .source_prefix(from, 32)
        .table_id(table)
        .priority(priority)
        .action(rtnetlink::packet_route::rule::RuleAction::ToTable)
        .replace()
        .execute()
        .await
        .map_err(req(format!("add rule from {from} lookup {table}")))
}

/// `ip route add <dst>/32 dev <ifname> scope link [src <src>]`: gone with the interface;
/// `oif` is `ifname`'s index.
pub async fn add_host_route_on(
    handle: &Handle,
    (oif, ifname): (u32, &str),
    dst: Ipv4Addr,
    src: Option<Ipv4Addr>,
) -> Result<(), NetlinkError> {
    let mut route = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(dst, 32)
        .output_interface(oif)
        .scope(RouteScope::Link);
    if let Some(src) = src {
        route = route.pref_source(src);
    }
    let route = route.build();
    handle
        .route()
        .add(route)
        .replace()
        .execute()
        .await
        .map_err(req(format!("add route {dst}/32 dev {ifname}")))
}

/// The MAC of interface `ifindex` in the calling thread's namespace.
pub fn mac_of(ifindex: u32) -> Result<[u8; 6], NetlinkError> {
    with_netlink(None, async |handle| {
        let mut links = handle.link().get().match_index(ifindex).execute();
        let link = links
            .try_next()
            .await
            .map_err(req(format!("get link {ifindex}")))?
            .ok_or_else(|| NetlinkError::NoSuchLink(ifindex.to_string()))?;
        link.attributes
            .iter()
            .find_map(|a| match a {
                LinkAttribute::Address(m) if m.len() == 6 => {
                    Some([m[0], m[1], m[2], m[3], m[4], m[5]])
                }
                _ => None,
            })
            .ok_or_else(|| NetlinkError::NoSuchLink(format!("{ifindex} (no MAC)")))
    })
}
