use super::*;
use crate::api::externalnetwork::BGP_SPEAKER_ON_NODES;
use crate::api::{
    AddressPool,
    addresspool::AddressPoolSpec,
    bgpadvertisement::BGPAdvertisementSpec,
    bgppeer::{BGPPeerSpec, Bfd},
};

fn peer(name: &str, address: &str) -> BGPPeer {
    BGPPeer::new(
        name,
        BGPPeerSpec {
            my_asn: 64513,
            peer_asn: 64512,
            peer_address: address.into(),
            ..Default::default()
        },
    )
}

fn snap() -> Snapshot {
    let mut s = Snapshot {
        node_addresses: vec![("node-b".into(), "10.99.0.2".parse().unwrap())],
        ..Default::default()
    };
    s.bgp_peers.push(peer("upstream", "10.99.0.254"));
    for (name, mode, a) in [
        ("wan", "bgp", "203.0.113.0/24"),
        ("node-lan", "arp", "10.99.0.100-10.99.0.120"),
    ] {
        s.address_pools.push(AddressPool::new(
            name,
            AddressPoolSpec {
                advertise_mode: mode.into(),
                addresses: vec![a.into()],
            },
        ));
    }
    s
}

fn refused(v: Verdict) -> String {
    v.unwrap_err().to_string()
}

#[test]
fn bgp_01_an_asn_of_0_is_refused_naming_spec_my_asn() {
    let mut p = peer("b", "10.99.0.253");
    p.spec.my_asn = 0;
    assert!(
        refused(validate_bgp_peer_create(&p, &snap()))
            .starts_with("spec.myASN: 0 is not an AS number: use 1-4294967294")
    );
    p.spec.my_asn = 64513;
    p.spec.peer_asn = u32::MAX;
    assert!(
        refused(validate_bgp_peer_create(&p, &snap()))
            .starts_with("spec.peerASN: 4294967295 is reserved")
    );
    p.spec.peer_asn = 4_294_967_294;
    assert!(validate_bgp_peer_create(&p, &snap()).is_ok());
}

#[test]
fn bgp_01_a_peer_address_that_is_a_node_or_taken_or_not_ipv4_is_refused() {
    let s = snap();
    assert_eq!(
        refused(validate_bgp_peer_create(&peer("b", "10.99.0.2"), &s)),
        "spec.peerAddress: 10.99.0.2 is the InternalIP of Node \"node-b\": a BGPPeer is a router outside the cluster, every Node's speaker peers with it"
    );
    assert_eq!(
        refused(validate_bgp_peer_create(&peer("b", "10.99.0.254"), &s)),
        "spec.peerAddress: 10.99.0.254 is already BGPPeer \"upstream\"'s: one BGPPeer per address"
    );
    // The peer itself, updated in place, is no clash.
    assert!(
        validate_bgp_peer_update(
            &peer("upstream", "10.99.0.254"),
            &peer("upstream", "10.99.0.254"),
            &s
        )
        .is_ok()
    );
    assert!(
        refused(validate_bgp_peer_create(&peer("b", "fe80::1"), &s))
            .starts_with("spec.peerAddress: \"fe80::1\" is not an IPv4 address")
    );
}

#[test]
fn bgp_01_ports_hold_times_and_bfd_timers_out_of_range_are_refused() {
    let s = snap();
    let mut p = peer("b", "10.99.0.253");
    p.spec.peer_port = Some(0);
    assert!(
        refused(validate_bgp_peer_create(&p, &s)).starts_with("spec.peerPort: 0 is not a port")
    );
    p.spec.peer_port = Some(1179);
    p.spec.hold_time = Some(2);
    assert!(refused(validate_bgp_peer_create(&p, &s)).starts_with("spec.holdTime: 2: use 0"));
    p.spec.hold_time = Some(0);
    p.spec.bfd = Some(Bfd {
        enabled: true,
        interval_ms: Some(5),
        multiplier: None,
    });
    assert!(
        refused(validate_bgp_peer_create(&p, &s))
            .starts_with("spec.bfd.intervalMs: 5 is below 10 ms")
    );
    p.spec.bfd = Some(Bfd {
        enabled: true,
        interval_ms: Some(50),
        multiplier: Some(0),
    });
    assert!(
        refused(validate_bgp_peer_create(&p, &s)).starts_with("spec.bfd.multiplier: 0: use 1-255")
    );
    p.spec.bfd = None;
    assert!(validate_bgp_peer_create(&p, &s).is_ok());
    // Left out: BFD on at 100 ms x 3, hold 90 s, port 179.
    let d = peer("c", "10.99.0.252").spec;
    assert_eq!((d.port(), d.hold()), (179, 90));
    let t = d.bfd_timers().unwrap();
    assert_eq!((t.interval_ms, t.multiplier), (100, 3));
}

fn adv(pools: &[&str], prefix: Option<&str>) -> BGPAdvertisement {
    BGPAdvertisement::new(
        "a",
        BGPAdvertisementSpec {
            address_pools: pools.iter().map(|p| p.to_string()).collect(),
            node_name: None,
            prefix: prefix.map(Into::into),
        },
    )
}

#[test]
fn bgp_02_a_prefix_outside_its_pools_or_with_host_bits_is_refused() {
    let s = snap();
    assert_eq!(
        refused(validate_bgp_advertisement_create(
            &adv(&["wan"], Some("203.0.114.0/28")),
            &s
        )),
        "spec.prefix: 203.0.114.0/28 lies in none of the CIDRs of spec.addressPools (wan: 203.0.113.0/24): name a prefix inside one of them"
    );
    assert_eq!(
        refused(validate_bgp_advertisement_create(
            &adv(&["wan"], Some("203.0.113.5/28")),
            &s
        )),
        "spec.prefix: 203.0.113.5/28 has host bits set; use 203.0.113.0/28"
    );
    assert!(
        validate_bgp_advertisement_create(&adv(&["wan"], Some("203.0.113.128/25")), &s).is_ok()
    );
    assert_eq!(
        refused(validate_bgp_advertisement_create(&adv(&[], None), &s)),
        "spec.addressPools: list at least one AddressPool"
    );
}

#[test]
fn bgp_02_an_arp_pool_is_refused_in_an_advertisement_and_a_missing_one_admitted() {
    let s = snap();
    assert_eq!(
        refused(validate_bgp_advertisement_create(
            &adv(&["wan", "node-lan"], None),
            &s
        )),
        "spec.addressPools[1]: AddressPool \"node-lan\" has advertiseMode arp: a BGPAdvertisement announces bgp pools only"
    );
    assert!(validate_bgp_advertisement_create(&adv(&["later"], None), &s).is_ok());
}

#[test]
fn bgp_02_a_pool_announced_or_listed_is_not_deleted() {
    use crate::admission::validate::validate_delete_address_pool;
    let mut s = snap();
    assert!(validate_delete_address_pool("wan", &s).is_ok());
    s.bgp_advertisements.push(BGPAdvertisement::new(
        "wan-all",
        BGPAdvertisementSpec {
            address_pools: vec!["wan".into()],
            ..Default::default()
        },
    ));
    assert_eq!(
        refused(validate_delete_address_pool("wan", &s)),
        "metadata.name: AddressPool \"wan\" is announced by BGPAdvertisement \"wan-all\": edit or delete it first"
    );
}

#[test]
fn eip_12_a_bgp_network_refuses_an_arp_pool_and_a_bgp_pool_refuses_host_bits() {
    use crate::{
        admission::validate::{validate_address_pool_create, validate_external_network_create},
        api::{ExternalNetwork, externalnetwork::ExternalNetworkSpec},
    };
    let s = snap();
    let net = ExternalNetwork::new(
        "ext",
        ExternalNetworkSpec {
            type_: "bgp".into(),
            address_pools: vec!["wan".into(), "node-lan".into()],
        },
    );
    assert_eq!(
        refused(validate_external_network_create(&net, &s)),
        "spec.addressPools[1]: AddressPool \"node-lan\" has advertiseMode arp: an ExternalNetwork of type bgp takes bgp pools only"
    );
    let pool = AddressPool::new(
        "more",
        AddressPoolSpec {
            advertise_mode: "bgp".into(),
            addresses: vec!["198.51.100.5/24".into()],
        },
    );
    assert_eq!(
        refused(validate_address_pool_create(&pool, &s)),
        "spec.addresses[0]: 198.51.100.5/24 has host bits set: write 198.51.100.0/24"
    );
}

#[test]
fn bgp_01_a_well_formed_peer_is_admitted_once_the_nodes_run_a_speaker() {
    use crate::admission::{Request, admit};
    let s = snap();
    let p = crate::api::Object::BGPPeer(peer("b", "10.99.0.253"));
    let verdict = admit(Request::Create(&p), &s);
    if BGP_SPEAKER_ON_NODES {
        assert!(verdict.is_ok(), "{verdict:?}");
    } else {
        assert!(
            refused(verdict).starts_with("kind: BGPPeer: the Nodes' BGP speaker is not built yet")
        );
    }
    // A bad one is refused for what is wrong with it.
    let mut bad = peer("b", "10.99.0.253");
    bad.spec.my_asn = 0;
    assert!(
        refused(admit(
            Request::Create(&crate::api::Object::BGPPeer(bad)),
            &s
        ))
        .starts_with("spec.myASN")
    );
}
