//! ClusterIP Services from another Vpc on the wire (SVC-02), two Nodes on the underlay
//! bridge: every capture of each test is compared with `pcaps/<test>/`.
//!
//! Two tenant Vpcs with one CIDR, each a gateway segment (T1, T2: 10.0.1.0/24, own
//! tables, consuming Services), and the provider Vpc's segment P (10.244.0.0/24, the
//! default Vpc's, whose Pods back the Services). The clients are Pod 0 (T1) and Pod 2
//! (T2) on node0, both 10.0.1.10; the backend is Pod 1 (P, 10.244.0.20) on node1. Each
//! Node has its Service source address at the top of P (node0 .254, node1 .253), a
//! neighbour of P at that Node's VTEP, as the daemons write them from the Subnet's
//! `status.nodeAddresses`.
use std::collections::BTreeMap;

use juneau::features::router::gateway::{GatewaySegment, Neighbour, RouterState};
use juneau::features::services::node::{Frontend, FrontendKey, ServiceState};
use juneau_common::{
    FdbKey,
    ct::{CT_F_PROVIDER, CT_F_REPLY, CT_F_SNAT, PROTO_TCP, ZONE_HOST},
    svc::{SVC_SOURCE_MAC, SvcHost},
};
use juneau_harness::{
    frames::{self, fixtures::*, ones_complement},
    node::{Cluster, PodOptions, node_ip},
    router::Seg,
    scene::Scene,
};

const VNI_T1: u32 = 6301;
const VNI_T2: u32 = 6302;
const VNI_P: u32 = 6300;
const GW_T1: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x9d];
const GW_T2: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x9e];
const GW_P: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0x18, 0x9c];
const fn tenant(vni: u32, gw_mac: [u8; 6]) -> Seg {
    Seg {
        vni,
        cidr: "10.0.1.0/24",
        gw: [10, 0, 1, 1],
        gw_mac,
        mtu: 1450,
    }
}
const SEG_P: Seg = Seg {
    vni: VNI_P,
    cidr: "10.244.0.0/24",
    gw: [10, 244, 0, 1],
    gw_mac: GW_P,
    mtu: 1450,
};
/// Both clients' address (the tenants overlap).
const CLIENT: [u8; 4] = [10, 0, 1, 10];
const BACKEND: [u8; 4] = [10, 244, 0, 20];
const WEB: [u8; 4] = [10, 96, 0, 80];
/// Node `n`'s Service source address.
const fn source(n: u8) -> [u8; 4] {
    [10, 244, 0, 254 - n]
}

fn segment(s: &Seg, table: &str, provider: bool) -> GatewaySegment {
    GatewaySegment {
        gw_ip: s.gw.into(),
        gw_mac: s.gw_mac,
        mtu: s.mtu,
        prefix_len: 24,
        table: table.into(),
        services: true,
        provider,
        acl: 0,
    }
}

/// Every Node's router: each Vpc its own table with its own segment; the clients, the
/// backend and both Service source addresses as neighbours.
fn router() -> RouterState {
    let (t1, t2) = (tenant(VNI_T1, GW_T1), tenant(VNI_T2, GW_T2));
    let mut s = RouterState::default();
    for (seg, table, provider) in [(&t1, "t1", false), (&t2, "t2", false), (&SEG_P, "p", true)] {
        s.tables
            .entry(table.into())
            .or_default()
            .insert(seg.connected());
        s.segments.insert(seg.vni, segment(seg, table, provider));
    }
    let nbr = |mac, n: usize| Neighbour {
        mac,
        vtep: node_ip(n),
    };
    s.neighbours
        .insert((VNI_T1, CLIENT.into()), nbr(pod_mac(0), 0));
    s.neighbours
        .insert((VNI_T2, CLIENT.into()), nbr(pod_mac(2), 0));
    s.neighbours
        .insert((VNI_P, BACKEND.into()), nbr(pod_mac(1), 1));
    for n in 0..2u8 {
        s.neighbours
            .insert((VNI_P, source(n).into()), nbr(SVC_SOURCE_MAC, n as usize));
    }
    s
}

fn services() -> ServiceState {
    ServiceState {
        frontends: BTreeMap::from([(
            FrontendKey {
                ip: WEB.into(),
                port: 80,
                proto: PROTO_TCP,
            },
            Frontend {
                backends: vec![(BACKEND.into(), 8080)],
                affinity_s: None,
            },
        )]),
        provider_backends: [BACKEND.into()].into_iter().collect(),
        ..Default::default()
    }
}

/// node0: the clients, Pod 0 on T1 and Pod 2 on T2; node1: the backend, Pod 1 on P.
fn scene() -> Scene {
    scene_with(false)
}

/// [`scene`], and with `forger` a Pod 3 on T1 on node1 (index 1 there).
fn scene_with(forger: bool) -> Scene {
    let mut c = Cluster::new(2);
    for (n, node) in c.nodes.iter_mut().enumerate() {
        node.dataplane.sync_router(&router()).unwrap();
        node.dataplane.sync_services(&services()).unwrap();
        // The Service device is not used on this path: any device, so that the
        // Node counts as having its way to host backends.
        node.dataplane
            .services
            .set_host(SvcHost {
                ifindex: 1,
                snat_ip: u32::from_ne_bytes(source(n as u8)),
                mac: FdbKey::new([0x02, 0, 0, 0, 0x5e, n as u8]),
                provider_vni: VNI_P,
                pad: 0,
            })
            .unwrap();
    }
    c.add_pod(0, 0, PodOptions::vni(VNI_T1).mtu(1450));
    c.add_pod(1, 1, PodOptions::vni(VNI_P).mtu(1450));
    c.add_pod(0, 2, PodOptions::vni(VNI_T2).mtu(1450));
    if forger {
        c.add_pod(1, 3, PodOptions::vni(VNI_T1).mtu(1450));
    }
    let mut s = Scene::new(c);
    // The backend speaks once (it asks for its gateway), so node1 switches to its port.
    s.send(1, 0, &frames::arp_request(pod_mac(1), BACKEND, SEG_P.gw));
    s
}

/// The SYN of `client` (Pod `i` of node0, its segment's gateway `gw`) to the Service.
fn syn(i: u8, gw: [u8; 6], sport: u16) -> Vec<u8> {
    frames::tcp((pod_mac(i), CLIENT, sport), (gw, WEB, 80), true, b"")
}

#[test]
fn svc_02_a_tenant_pods_syn_reaches_a_provider_pod_from_its_nodes_source_address_and_the_reply_gets_the_cluster_ip_back()
 {
    let mut s = scene();
    let seen = s.send(0, 0, &syn(0, GW_T1, 41000));
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(
        got.len(),
        1,
        "delivered to the backend once: {:?}",
        s.pod_counts(&seen)
    );
    let f = &got[0];
    assert_eq!(
        &f[26..30],
        &source(0),
        "from node0's Service source address"
    );
    assert_eq!(&f[30..34], &BACKEND, "to the backend");
    assert_eq!(
        u16::from_be_bytes([f[34], f[35]]),
        41000,
        "the client's port kept"
    );
    assert_eq!(
        u16::from_be_bytes([f[36], f[37]]),
        8080,
        "at its target port"
    );
    assert_eq!(
        &f[6..12],
        &GW_P,
        "routed into the provider's segment, by its gateway"
    );
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 checksum");
    // The entries: the original and reply in the client's zone, the claim in ZONE_HOST.
    let ct = s.cluster.nodes[0].dataplane.conntrack.entries().unwrap();
    let claim = ct
        .iter()
        .find(|(k, _)| k.zone == ZONE_HOST)
        .expect("the claim of the source address and port");
    assert_eq!(claim.0.daddr, u32::from_ne_bytes(source(0)));
    assert_eq!(
        claim.1.nat_zone, VNI_T1,
        "the client's zone, to give it back"
    );
    let original = ct
        .iter()
        .find(|(k, e)| k.zone == VNI_T1 && e.flags & CT_F_REPLY == 0)
        .unwrap();
    assert_eq!(
        original.1.flags & (CT_F_SNAT | CT_F_PROVIDER),
        CT_F_SNAT | CT_F_PROVIDER
    );
    // The backend answers to node0's source address; node1 routes it to node0, where
    // the client gets it from the ClusterIP.
    let syn_ack = frames::tcp(
        (pod_mac(1), BACKEND, 8080),
        (GW_P, source(0), 41000),
        false,
        b"ok",
    );
    let seen = s.send(1, 0, &syn_ack);
    let got = s.frames(&seen, "node0-pod0");
    assert_eq!(got.len(), 1, "{:?}", s.pod_counts(&seen));
    let f = &got[0];
    assert_eq!(&f[26..30], &WEB, "from the ClusterIP");
    assert_eq!(u16::from_be_bytes([f[34], f[35]]), 80, "and its port");
    assert_eq!(&f[30..34], &CLIENT, "to the client");
    assert_eq!(u16::from_be_bytes([f[36], f[37]]), 41000);
    assert_eq!(&f[0..6], &pod_mac(0));
    assert_eq!(ones_complement(&f[14..34]), 0, "IPv4 checksum");
    assert!(
        s.frames(&seen, "node0-pod1").is_empty(),
        "the other tenant's Pod of the same address gets nothing"
    );
    s.assert_goldens("svc_02_tenant_to_provider_pod");
}

#[test]
fn svc_02_two_tenants_of_one_cidr_use_one_service_from_one_port_and_each_gets_its_own_replies() {
    let mut s = scene();
    let a = s.send(0, 0, &syn(0, GW_T1, 42000));
    let b = s.send(0, 1, &syn(2, GW_T2, 42000));
    let (fa, fb) = (
        s.frames(&a, "node1-pod0").clone(),
        s.frames(&b, "node1-pod0").clone(),
    );
    assert_eq!((fa.len(), fb.len()), (1, 1));
    let port = |f: &[u8]| u16::from_be_bytes([f[34], f[35]]);
    assert_eq!(&fa[0][26..30], &source(0));
    assert_eq!(&fb[0][26..30], &source(0));
    assert_ne!(
        port(&fa[0]),
        port(&fb[0]),
        "one source address, two ports: the backend tells them apart"
    );
    // Each reply reaches its own tenant's Pod, and only that one.
    for (f, pod, other) in [
        (&fa[0], "node0-pod0", "node0-pod1"),
        (&fb[0], "node0-pod1", "node0-pod0"),
    ] {
        let reply = frames::tcp(
            (pod_mac(1), BACKEND, 8080),
            (GW_P, source(0), port(f)),
            false,
            b"ok",
        );
        let seen = s.send(1, 0, &reply);
        let got = s.frames(&seen, pod);
        assert_eq!(got.len(), 1, "{pod}: {:?}", s.pod_counts(&seen));
        assert_eq!(&got[0][26..30], &WEB);
        assert_eq!(u16::from_be_bytes([got[0][36], got[0][37]]), 42000);
        assert!(s.frames(&seen, other).is_empty(), "{other} gets nothing");
    }
    s.assert_goldens("svc_02_two_tenants_one_cidr");
}

#[test]
fn svc_02_a_reply_to_a_source_address_that_opened_nothing_reaches_no_pod() {
    let mut s = scene();
    let stray = frames::tcp(
        (pod_mac(1), BACKEND, 8080),
        (GW_P, source(0), 43000),
        false,
        b"ok",
    );
    let seen = s.send(1, 0, &stray);
    for pod in ["node0-pod0", "node0-pod1"] {
        assert!(s.frames(&seen, pod).is_empty(), "{pod}");
    }
    assert!(
        s.cluster.nodes[0].dataplane.drops().unwrap()["NOT_A_REPLY"] >= 1,
        "dropped by name on node0"
    );
}

#[test]
fn svc_02_a_frame_to_the_source_mac_on_a_tenant_segment_reaches_no_connection() {
    let mut s = scene_with(true);
    // Tenant T2's client holds a connection through node0's source address.
    let seen = s.send(0, 1, &syn(2, GW_T2, 42100));
    let got = s.frames(&seen, "node1-pod0");
    assert_eq!(got.len(), 1, "{:?}", s.pod_counts(&seen));
    let port = u16::from_be_bytes([got[0][34], got[0][35]]);
    // A Pod of T1 (an L2 segment: no source guard) on node1 forges the backend's
    // reply to that address and port, to the source MAC: flooded over the overlay to
    // node0, it must not reach svc_host there.
    let before = s.cluster.nodes[0].dataplane.drops().unwrap()["NOT_A_REPLY"];
    let forged = frames::tcp(
        (pod_mac(3), BACKEND, 8080),
        (SVC_SOURCE_MAC, source(0), port),
        false,
        b"forged",
    );
    let seen = s.send(1, 1, &forged);
    for pod in ["node0-pod0", "node0-pod1"] {
        assert!(
            s.frames(&seen, pod).is_empty(),
            "{pod}: {:?}",
            s.pod_counts(&seen)
        );
    }
    assert!(
        s.cluster.nodes[0].dataplane.drops().unwrap()["NOT_A_REPLY"] > before,
        "dropped by name on node0"
    );
}
