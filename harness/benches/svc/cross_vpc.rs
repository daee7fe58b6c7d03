//! `svc_cross_vpc_vs_same_vpc` (SVC-02): the per-packet cost of a Service connection
//! from another Vpc (a tenant Pod to a provider Pod: both addresses translated, routed
//! by the provider's table) against the same Service from the provider Vpc itself (the
//! destination translated, routed by its own table). BPF_PROG_TEST_RUN of
//! `port_ingress` on a TCP segment of an established connection each, single runs
//! interleaved, median of rounds; both end in a redirect to the backend's port.
use std::{collections::BTreeMap, net::Ipv4Addr};

use juneau::features::services::node::{Frontend, FrontendKey, ServiceState};
use juneau::node::dataplane::{PortKind, PortSpec, Whole};
use juneau_common::{FdbKey, ct::PROTO_TCP, svc::SvcHost};
use juneau_harness::{
    bench::{Measurement, interleaved_medians},
    frames::{self, fixtures::*},
    router::{self, Seg},
    testrun::{PortBed, TC_ACT_REDIRECT, run_tc},
};

const VNI_P: u32 = 21;
const VNI_T: u32 = 22;
const GW_P: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 21];
const GW_T: [u8; 6] = [0x02, 0x4a, 0x4e, 0, 0, 22];
const API: [u8; 4] = [10, 96, 0, 1];
const TENANT: [u8; 4] = [10, 0, 1, 10];
const SOURCE: [u8; 4] = [10, 0, 3, 250];
const SINGLE: usize = 5_000;
const ROUNDS: usize = 5;

const fn p_ip(i: u8) -> [u8; 4] {
    [10, 0, 3, 10 + i]
}

/// Port 0: the tenant's client; port 1: the provider's client; port 2: the backend.
fn bed() -> (PortBed, Whole) {
    let bed = PortBed::new(3);
    let mut dp =
        Whole::of(juneau::node::Dataplane::load_sized(None, 1024).expect("load")).expect("writers");
    let here = Ipv4Addr::UNSPECIFIED;
    let provider = Seg {
        vni: VNI_P,
        cidr: "10.0.3.0/24",
        gw: [10, 0, 3, 1],
        gw_mac: GW_P,
        mtu: 1500,
    };
    let tenant = Seg {
        vni: VNI_T,
        cidr: "10.0.1.0/24",
        gw: [10, 0, 1, 1],
        gw_mac: GW_T,
        mtu: 1500,
    };
    let mut want = router::state(
        &[provider, tenant],
        &[
            (VNI_T, TENANT, pod_mac(0), here),
            (VNI_P, p_ip(0), pod_mac(1), here),
            (VNI_P, p_ip(1), pod_mac(2), here),
        ],
    );
    want.segments.get_mut(&VNI_T).unwrap().provider = false;
    dp.sync_router(&want).unwrap();
    let ports = [
        (VNI_T, pod_mac(0), TENANT),
        (VNI_P, pod_mac(1), p_ip(0)),
        (VNI_P, pod_mac(2), p_ip(1)),
    ];
    for (i, (vni, mac, ip)) in ports.into_iter().enumerate() {
        dp.configure_port(PortSpec {
            ifindex: bed.ifindex(i),
            vni,
            mtu: 0,
            peer: true,
            security_groups: false,
            kind: PortKind::Subnet { mac, ip: ip.into() },
        })
        .unwrap();
    }
    dp.sync_services(&ServiceState {
        frontends: BTreeMap::from([(
            FrontendKey {
                ip: API.into(),
                port: 443,
                proto: PROTO_TCP,
            },
            Frontend {
                backends: vec![(p_ip(1).into(), 6443)],
                affinity_s: None,
            },
        )]),
        provider_backends: [p_ip(1).into()].into_iter().collect(),
        ..Default::default()
    })
    .unwrap();
    dp.services
        .set_host(SvcHost {
            // Not used on this path: any device of the bed.
            ifindex: bed.ifindex(2),
            snat_ip: u32::from_ne_bytes(SOURCE),
            mac: FdbKey::new([0x02, 0x5e, 0x77, 0, 0, 1]),
            provider_vni: VNI_P,
            pad: 0,
        })
        .unwrap();
    (bed, dp)
}

pub fn run(out: &mut Vec<Measurement>) {
    let (bed, dp) = bed();
    let send =
        |port: usize, f: &[u8]| run_tc(&bed.ns, dp.l2_port_program(), bed.ifindex(port), f, 1);
    let from_tenant =
        |syn| frames::tcp((pod_mac(0), TENANT, 50000), (GW_T, API, 443), syn, &[0; 6]);
    let from_provider =
        |syn| frames::tcp((pod_mac(1), p_ip(0), 50000), (GW_P, API, 443), syn, &[0; 6]);
    // Each connection opened once; then their established segments, taking turns.
    for (port, syn) in [(0, from_tenant(true)), (1, from_provider(true))] {
        assert_eq!(send(port, &syn).verdict, TC_ACT_REDIRECT);
    }
    let (cross, same) = (from_tenant(false), from_provider(false));
    let (cross_ns, same_ns) = interleaved_medians(
        ROUNDS,
        SINGLE / ROUNDS,
        || {
            let a = send(0, &cross);
            assert_eq!(a.verdict, TC_ACT_REDIRECT);
            assert_eq!(&a.data[26..30], &SOURCE, "from the Node's source address");
            assert_eq!(&a.data[30..34], &p_ip(1), "to the backend");
            a.per_run.as_nanos() as f64
        },
        || {
            let b = send(1, &same);
            assert_eq!(b.verdict, TC_ACT_REDIRECT);
            assert_eq!(&b.data[26..30], &p_ip(0), "from the client itself");
            b.per_run.as_nanos() as f64
        },
    );
    out.push(Measurement::new(
        "svc_cross_vpc_vs_same_vpc",
        "ns",
        cross_ns,
        ("same_vpc_service_connection", same_ns),
        "goal <= 1.15x; a TCP segment of an established Service connection from a tenant Vpc's Subnet Pod to a provider (default Vpc) Pod through port_ingress (tail call to the router: connection lookup, destination and source translated to the Node's Service source address, routed by the provider's table to the backend's port, the reply lookup at delivery) vs the same segment of a connection to the same Service from a provider Subnet Pod (destination translated, its own table); single runs, median of 1,000 per round, median of 5 rounds",
    ));
}
