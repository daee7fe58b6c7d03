//! Pod NIC plumbing: the veth pair between a Pod and its Node.
use std::{
    os::fd::AsRawFd,
    path::{Path, PathBuf},
};

use rtnetlink::{
    LinkMessageBuilder, LinkUnspec, LinkVeth,
    packet_route::link::{InfoData, InfoVeth, LinkAttribute},
};

use super::netlink::{self, NetlinkError, Session, own_and_up, req};
use crate::netns;

/// The interface alias that marks a host-side veth as made by Juneau. The datapath is
/// attached only to interfaces that carry it (MX-02): never to a NIC another CNI owns.
pub const OWNER_ALIAS: &str = "juneau:port";

/// What to create: `host_name` in the Node namespace, `pod_name` in the Pod's.
#[derive(Clone, Debug)]
pub struct VethSpec {
    pub host_name: String,
    pub host_mac: [u8; 6],
    pub pod_netns: PathBuf,
    pub pod_name: String,
    pub pod_mac: [u8; 6],
    /// Set on both ends (L2-21); `None` keeps the kernel default.
    pub mtu: Option<u32>,
    /// The host end's alias: [`OWNER_ALIAS`], optionally followed by `:<container
    /// id>:<interface>` so that DEL finds what ADD made even after a daemon restart.
    pub alias: String,
    /// Give the host end its clsact qdisc before it goes up (ports attached as tc
    /// filters): see [`netlink::add_clsact`].
    pub clsact: bool,
}

/// Prefix of every Pod NIC's host-side veth (as Cilium's `lxc` and Calico's `cali`):
/// tells Juneau's ports apart in `ip link` at a glance.
pub const HOST_PREFIX: &str = "jn";

/// What the alias of a Pod NIC's host end records: enough for DEL, GC and a restarted
/// daemon to find the NIC's container, interface and Pod with nothing remembered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortAlias {
    pub container_id: String,
    pub interface: String,
    pub namespace: String,
    pub pod: String,
}

/// The kernel keeps at most this many bytes of an interface alias (IFALIASZ - 1).
pub const MAX_ALIAS: usize = 255;

impl PortAlias {
    /// `juneau:port:<container id>:<interface>:<namespace>/<pod>`.
    pub fn render(&self) -> String {
        format!(
            "{OWNER_ALIAS}:{}:{}:{}/{}",
            self.container_id, self.interface, self.namespace, self.pod
        )
    }

    /// The alias of one of Juneau's Pod NICs; `None` for anything else.
    pub fn parse(alias: &str) -> Option<PortAlias> {
        let rest = alias.strip_prefix(OWNER_ALIAS)?.strip_prefix(':')?;
        let mut parts = rest.splitn(3, ':');
        let container_id = parts.next()?.to_owned();
        let interface = parts.next()?.to_owned();
        let (namespace, pod) = parts.next()?.split_once('/')?;
        Some(PortAlias {
            container_id,
            interface,
            namespace: namespace.to_owned(),
            pod: pod.to_owned(),
        })
    }

    /// The prefix every NIC of one container shares.
    pub fn container_prefix(container_id: &str) -> String {
        format!("{OWNER_ALIAS}:{container_id}:")
    }

    /// `<namespace>/<pod>.<interface>`: the NetworkInterface this port serves.
    pub fn nic(&self) -> String {
        format!("{}/{}.{}", self.namespace, self.pod, self.interface)
    }
}

/// A host-side port link of this Node: (name, ifindex, what its alias says).
pub type PortLink = (String, u32, PortAlias);

/// Juneau's Pod NIC links in the calling thread's namespace whose alias starts with
/// `prefix` (every port: [`OWNER_ALIAS`]; one container's: its
/// [`PortAlias::container_prefix`]). Links with an alias that does not parse are not
/// Juneau's ports.
pub fn ports(prefix: &str) -> Result<Vec<PortLink>, NetlinkError> {
    Ok(netlink::links_with_alias(prefix)?
        .into_iter()
        .filter_map(|(name, ifindex, alias)| Some((name, ifindex, PortAlias::parse(&alias)?)))
        .collect())
}

/// The host-side name of a Pod NIC: [`HOST_PREFIX`] and 13 hex digits of a hash of
/// the container id and interface, within IFNAMSIZ.
pub fn host_name(container_id: &str, interface: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in container_id.bytes().chain([b'/']).chain(interface.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{HOST_PREFIX}{:013x}", h & 0x000f_ffff_ffff_ffff)
}

/// Creates the pair, both ends up, with `session` (opened in the Node's namespace with
/// the Pod's). Returns the host-side ifindex. A pair that any later step fails for is
/// removed again, so a failed ADD leaves nothing (and a half-made pair without its alias
/// would be invisible to DEL and GC).
///
/// Two RTNL requests where four were (three and five with the clsact qdisc of a port
/// that takes its program as a tc filter): in a burst of Pod starts every request waits
/// for the kernel's one netlink lock behind the other sandboxes' work, so the ADD's time
/// grows with its count of them.
/// - The pair is made from the Pod's side: the Pod end is the new link, born up in the
///   Pod's namespace (up at creation works only for the link the request names: its
///   peer is configured before the pair is tied, and a veth end will not open
///   untied), and the host end is its peer, sent to the Node's namespace, down.
/// - The host end then gets its alias, no IPv6 addresses and up in one request (the
///   kernel takes IFLA_IFALIAS and IFLA_AF_SPEC on a change, not at creation); going
///   up it gives both ends their carrier.
/// - Its index is read by `SIOCGIFINDEX` ([`Session::node_index`]), not asked of
///   RTNL.
///
/// The Pod end has no IPv6 (the Pod turns it on with its own sysctl): born so
/// ([`netlink::Ipv6Off`]); on an older kernel it is made down, quieted by its own sysctl
/// and then brought up.
pub fn create_on(session: &Session, spec: &VethSpec) -> Result<u32, NetlinkError> {
    let ipv6_off = session.pod_ipv6_off()?;
    let born_quiet = ipv6_off.is_some();
    let node = session.node();
    let index = session.block_on(async {
        let mut peer = one_queue(
            LinkMessageBuilder::<LinkUnspec>::new()
                .name(spec.host_name.clone())
                .address(spec.host_mac.to_vec())
                .setns_by_fd(session.node_ns().as_raw_fd()),
        );
        let mut pod = one_queue(
            LinkVeth::new(&spec.pod_name, &spec.host_name).address(spec.pod_mac.to_vec()),
        );
        if let Some(mtu) = spec.mtu {
            peer = peer.mtu(mtu);
            pod = pod.mtu(mtu);
        }
        if born_quiet {
            pod = pod.up();
        }
        let pod = pod
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .build();
        let created = session
            .pod()
            .link()
            .add(pod)
            .execute()
            .await
            .map_err(req(format!("create veth {}", spec.host_name)));
        let restored = ipv6_off.map_or(Ok(()), netlink::Ipv6Off::restore);
        if let (Err(_), Err(e)) = (&created, &restored) {
            tracing::warn!(error = %e, "cannot restore the Pod namespace's default disable_ipv6");
        }
        created?;
        let ready = async {
            restored?;
            let index = session.node_index(&spec.host_name)?;
            if spec.clsact {
                netlink::add_clsact(node, index).await?;
            }
            own_and_up(node, index, &spec.alias, &spec.host_name).await?;
            if !born_quiet {
                netns::run_in(&spec.pod_netns, || netlink::quiet(&spec.pod_name))??;
                session
                    .pod()
                    .link()
                    .set(LinkUnspec::new_with_name(&spec.pod_name).up().build())
                    .execute()
                    .await
                    .map_err(req(format!("set {} up", spec.pod_name)))?;
            }
            Ok::<u32, NetlinkError>(index)
        }
        .await;
        if ready.is_err()
            && let Err(undo) = netlink::delete_link_on(node, &spec.host_name).await
        {
            tracing::warn!(link = spec.host_name, error = %undo, "cannot remove a veth whose set-up failed");
        }
        ready
    })?;
    Ok(index)
}

/// One queue each way, asked for at creation: a veth otherwise gets one per CPU and is
/// cut down to one right after registering, which waits for an expedited RCU grace
/// period under RTNL for each end (and every other ADD waits with it).
fn one_queue<T>(b: LinkMessageBuilder<T>) -> LinkMessageBuilder<T> {
    b.append_extra_attribute(LinkAttribute::NumTxQueues(1))
        .append_extra_attribute(LinkAttribute::NumRxQueues(1))
}

/// [`create_on`] with a session of its own; `node_netns` is where the host end lives
/// (`None`: the caller's namespace).
pub fn create(node_netns: Option<&Path>, spec: &VethSpec) -> Result<u32, NetlinkError> {
    let work = || create_on(&Session::open(Some(&spec.pod_netns))?, spec);
    match node_netns {
        Some(ns) => netns::run_in(ns, work)?,
        None => std::thread::scope(|s| s.spawn(work).join().expect("veth thread panicked")),
    }
}

/// Deletes the host end (the kernel removes its peer). Idempotent.
pub fn delete(node_netns: Option<&Path>, host_name: &str) -> Result<(), NetlinkError> {
    netlink::delete_link(node_netns, host_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mx_01_port_alias_round_trips_and_host_names_carry_the_prefix_within_ifnamsiz() {
        let a = PortAlias {
            container_id: "0123abcd".into(),
            interface: "eth1".into(),
            namespace: "team-a".into(),
            pod: "web-0".into(),
        };
        let text = a.render();
        assert_eq!(text, "juneau:port:0123abcd:eth1:team-a/web-0");
        assert_eq!(PortAlias::parse(&text), Some(a.clone()));
        assert_eq!(a.nic(), "team-a/web-0.eth1");
        assert_eq!(PortAlias::parse("juneau:port"), None, "a bare owner mark");
        assert_eq!(PortAlias::parse("juneau:vxlan"), None);
        let name = host_name("0123abcd", "eth1");
        assert!(name.starts_with(HOST_PREFIX) && name.len() == 15, "{name}");
        assert_ne!(name, host_name("0123abcd", "eth0"));
        assert_eq!(name, host_name("0123abcd", "eth1"), "stable");
    }
}
