//! The ARPAdvertisement of an `arp` network's ElasticIP (EIP-11), on the Node of the NIC
//! that holds it directly or that it is attached to (NAT-03).
use std::net::Ipv4Addr;

use super::{Outcome, name, ns};
use crate::{
    admission::validate::Snapshot,
    api::{
        ARPAdvertisement, ElasticIP, NetworkInterface,
        arpadvertisement::{ARPAdvertisementSpec, name_for_eip},
        externalnetwork::TYPE_ARP,
    },
};

/// The ARPAdvertisement of an `arp` network's ElasticIP, on its holder NIC's Node.
pub(super) fn advertise(
    snap: &Snapshot,
    e: &ElasticIP,
    eip: Ipv4Addr,
    holder: &NetworkInterface,
    out: &mut Outcome,
) {
    let node = holder.spec.node_name.clone();
    let network = snap.external_network(&e.spec.external_network);
    if let Some(net) = network.filter(|n| n.spec.type_ == TYPE_ARP)
        && !node.is_empty()
    {
        out.arp_advertisements.push(ARPAdvertisement::new(
            &name_for_eip(ns(e), name(e)),
            ARPAdvertisementSpec {
                external_network: name(net).to_owned(),
                address: Some(eip),
                node_name: node,
            },
        ));
    }
}
