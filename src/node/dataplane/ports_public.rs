//! The port owner's side of 1:1 NAT (NAT-03): the ElasticIP attached to each Subnet NIC
//! of this Node, kept in its port (`PortConfig::public_ip`) so that the way out via
//! the internet gateway costs no lookup. Given by the ElasticIPs' sync
//! ([`Dataplane::set_public_addresses`]) and applied whenever a port is written, like
//! the gateway bits: a port attached between two syncs (or again after a restart) has
//! its address from its first packet.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau_common::port::{PORT_EIP, PORT_ROUTED};

use super::{Dataplane, DataplaneError};

/// The ElasticIP attached to each Subnet NIC, by the NIC's (segment VNI, address).
pub type PublicAddresses = BTreeMap<(u32, Ipv4Addr), Ipv4Addr>;

impl Dataplane {
    /// Makes every Subnet NIC's port carry the ElasticIP `public` attaches to it (0 for
    /// none); returns how many ports were written.
    pub fn set_public_addresses(
        &mut self,
        public: PublicAddresses,
    ) -> Result<usize, DataplaneError> {
        // Unchanged since every port was written from it: every port written since has
        // its address already (`public_ip_of`). `None` (a start, adopted ports with
        // what an older daemon wrote, or a write that failed) scans them all.
        if self.public.as_ref() == Some(&public) {
            return Ok(0);
        }
        let ports: Vec<u32> = self.segments.ports().collect();
        let mut written = 0;
        for ifindex in ports {
            let mut port = self.port(ifindex)?;
            if port.flags & PORT_ROUTED == 0 || port.flags & PORT_EIP != 0 {
                continue;
            }
            let want = public_ip(&public, port.vni, port.own_ip);
            if port.public_ip != want {
                port.public_ip = want;
                self.write_port(ifindex, port)?;
                written += 1;
            }
        }
        self.public = Some(public);
        Ok(written)
    }

    /// The ElasticIP attached to the Subnet NIC of `vni` held to `own_ip` (both as the
    /// port holds them, the address in network order); 0 for none.
    pub(super) fn public_ip_of(&self, vni: u32, own_ip: u32) -> u32 {
        self.public
            .as_ref()
            .map_or(0, |public| public_ip(public, vni, own_ip))
    }
}

fn public_ip(public: &PublicAddresses, vni: u32, own_ip: u32) -> u32 {
    let own = Ipv4Addr::from(own_ip.to_ne_bytes());
    public
        .get(&(vni, own))
        .map_or(0, |ip| u32::from_ne_bytes(ip.octets()))
}
