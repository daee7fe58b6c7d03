//! The Services', connections' and policy's dumps (SVC-01, POL-03).
use super::*;

#[test]
fn svc_01_bpf_dump_services_backends_and_conntrack_show_what_the_maps_hold() {
    use juneau::features::services::node::{Frontend, FrontendKey, ServiceState};
    use juneau_common::ct::{CT_ESTABLISHED, CT_F_REPLY, CT_F_SERVICE, CtEntry, CtKey};
    let node = format!("jn-clisvc-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let _ = std::fs::remove_dir_all(&root);
    // The pins go by name also when an assertion fails.
    struct Unpin(std::path::PathBuf);
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _unpin = Unpin(root.clone());
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(Some(&root), 64).unwrap()).unwrap();
    let dns: std::net::Ipv4Addr = "10.96.0.10".parse().unwrap();
    let backend: std::net::Ipv4Addr = "10.0.3.11".parse().unwrap();
    let want = ServiceState {
        frontends: [
            (
                FrontendKey {
                    ip: dns,
                    port: 53,
                    proto: 17,
                },
                Frontend {
                    backends: vec![(backend, 5353)],
                    affinity_s: None,
                },
            ),
            (
                FrontendKey {
                    ip: "10.96.0.1".parse().unwrap(),
                    port: 443,
                    proto: 6,
                },
                Frontend {
                    backends: vec![("10.0.3.12".parse().unwrap(), 6443)],
                    affinity_s: Some(10_800),
                },
            ),
        ]
        .into(),
        ..Default::default()
    };
    dp.sync_services(&want).unwrap();
    // A connection's pair, as the datapath writes it.
    let raw = |a: std::net::Ipv4Addr| u32::from_ne_bytes(a.octets());
    let client: std::net::Ipv4Addr = "10.0.3.10".parse().unwrap();
    let fwd = CtKey {
        zone: 12,
        saddr: raw(client),
        daddr: raw(dns),
        sport: 40000u16.to_be(),
        dport: 53u16.to_be(),
        proto: 17,
        pad0: 0,
        pad1: 0,
    };
    let entry = CtEntry {
        last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
        state: CT_ESTABLISHED,
        flags: CT_F_SERVICE,
        service: 1,
        backend_ip: raw(backend),
        backend_port: 5353u16.to_be(),
        service_ip: raw(dns),
        service_port: 53u16.to_be(),
        ..CtEntry::default()
    };
    let rev = CtKey {
        saddr: raw(backend),
        daddr: raw(client),
        sport: 5353u16.to_be(),
        dport: 40000u16.to_be(),
        ..fwd
    };
    {
        let data =
            aya::maps::MapData::from_pin(dp.pins().unwrap().maps_dir().join("jn_ct")).unwrap();
        let mut ct: aya::maps::HashMap<_, CtKey, CtEntry> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        ct.insert(fwd, entry, 0).unwrap();
        ct.insert(
            rev,
            CtEntry {
                flags: CT_F_SERVICE | CT_F_REPLY,
                ..entry
            },
            0,
        )
        .unwrap();
    }
    let dump = |map: &str, rest: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let (ok, text, err) = dump("services", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["10.96.0.1", "443", "tcp", "1", "1", "10800s"],
            ["10.96.0.10", "53", "udp", "2", "1", "-"],
        ]
    );
    let (ok, text, err) = dump("backends", &["--filter", "addr=10.0.3.11"]);
    assert!(ok, "{err}");
    assert_eq!(table_rows(&text), [["2", "10.0.3.11", "5353", "pod"]]);
    let (ok, text, err) = dump("conntrack", &["--filter", "addr=10.96.0.10"]);
    assert!(ok, "{err}");
    let rows = table_rows(&text);
    assert_eq!(rows.len(), 2, "{text}");
    assert_eq!(
        rows[0][..7],
        [
            "12",
            "udp",
            "10.0.3.10:40000",
            "10.96.0.10:53",
            "original",
            "established",
            "10.0.3.11:5353"
        ]
    );
    assert_eq!(rows[1][4..7], ["reply", "established", "10.96.0.10:53"]);
    let (ok, text, _) = dump("conntrack", &["--filter", "addr=10.9.9.9"]);
    assert!(ok);
    assert!(table_rows(&text).is_empty(), "filtered out: {text}");
    let (ok, _, err) = dump("conntrack", &["--filter", "port=53"]);
    assert!(!ok && err.contains("conntrack filters on addr"), "{err}");
    drop(dp);
}

#[test]
fn pol_03_dump_policy_shows_the_sets_nics_counters_and_connections_policy_bits() {
    use juneau::features::policy::node::{Compiled, PolicyState, compile};
    use juneau_common::{
        ct::{CtEntry, CtKey},
        policy::{POL_F_EGRESS, PolCounters, SET_ACL, SET_PENDING, SET_SG},
    };
    let node = format!("jn-clipol-{}", std::process::id());
    let root = juneau::standalone::pin_dir_of(&node);
    let _ = std::fs::remove_dir_all(&root);
    struct Unpin(std::path::PathBuf);
    impl Drop for Unpin {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _unpin = Unpin(root.clone());
    let mut dp = Whole::of(juneau::node::Dataplane::load_sized(Some(&root), 64).unwrap()).unwrap();
    // Set 7: a NetworkACL, ingress two rules, egress omitted (open); set 12: a
    // SecurityGroup with one ingress rule and egress omitted.
    let rules: Vec<juneau::api::networkacl::AclRule> = serde_json::from_value(serde_json::json!([
        {"priority": 10, "action": "deny", "protocol": "tcp", "cidr": "10.0.2.0/24"},
        {"priority": 20, "action": "allow", "protocol": "all", "cidr": ""},
    ]))
    .unwrap();
    let (ingress, p) = compile::acl_direction(Some(&rules));
    assert!(p.is_none(), "{p:?}");
    let (egress, _) = compile::acl_direction(None);
    let acl = Compiled {
        kind: SET_ACL,
        version: 3,
        dirs: [ingress.clone(), egress.clone()],
    };
    let sg = Compiled {
        kind: SET_SG,
        version: 1,
        dirs: [
            compile::Direction {
                open: false,
                rules: ingress.rules[1..].to_vec(),
            },
            egress,
        ],
    };
    let nic = |a: &str| (21, a.parse::<std::net::Ipv4Addr>().unwrap());
    let want = PolicyState {
        sets: [(7, acl), (12, sg)].into(),
        nics: [
            (nic("10.0.1.10"), [12, 0]),
            (nic("10.0.1.11"), [12, SET_PENDING]),
        ]
        .into(),
    };
    let epoch = dp.policy.sync(&want).unwrap().epoch;
    assert!(epoch > 0);
    let maps = dp.pins().unwrap().maps_dir();
    // The datapath's counters, as its two CPUs would leave them: set 7 ingress.
    {
        let data = aya::maps::MapData::from_pin(maps.join("jn_pol_stats")).unwrap();
        let mut stats: aya::maps::PerCpuArray<_, PolCounters> =
            aya::maps::PerCpuArray::try_from(aya::maps::Map::PerCpuArray(data)).unwrap();
        let cpus = aya::util::nr_cpus().unwrap();
        let mut values = vec![PolCounters::default(); cpus];
        values[0] = PolCounters {
            allowed: 4,
            denied_by_rule: 2,
            denied_no_match: 0,
        };
        values[cpus - 1].allowed += 1;
        stats
            .set(7 * 2, aya::maps::PerCpuValues::try_from(values).unwrap(), 0)
            .unwrap();
    }
    // A connection's original entry, allowed on egress under this epoch.
    {
        let data = aya::maps::MapData::from_pin(maps.join("jn_ct")).unwrap();
        let mut ct: aya::maps::HashMap<_, CtKey, CtEntry> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).unwrap();
        let raw = |a: [u8; 4]| u32::from_ne_bytes(a);
        ct.insert(
            CtKey::new(
                21,
                raw([10, 0, 1, 10]),
                raw([10, 0, 2, 12]),
                40000u16.to_be(),
                80u16.to_be(),
                6,
            ),
            CtEntry {
                last_seen_ns: juneau::node::dataplane::monotonic_coarse_ns(),
                policy: POL_F_EGRESS,
                policy_version: epoch,
                ..CtEntry::default()
            },
            0,
        )
        .unwrap();
    }
    let dump = |map: &str, rest: &[&str]| {
        let mut args = vec!["bpf", "dump", map, "--node", &node];
        args.extend(rest);
        kubectl_juneau(&args)
    };
    let e = epoch.to_string();
    let (ok, text, err) = dump("policy", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["7", "acl", "3", "14", "2", "open", "5/0", "2/0", "0/0", &e],
            ["12", "sg", "1", "24", "1", "open", "0/0", "0/0", "0/0", &e],
        ],
        "{text}"
    );
    let (ok, text, err) = dump("jn_pol_set", &["--filter", "kind=sg"]);
    assert!(ok, "{err}");
    assert_eq!(table_rows(&text).len(), 1, "{text}");
    assert_eq!(table_rows(&text)[0][0], "12", "{text}");
    let rows = common::kubectl_juneau_json(&[
        "bpf", "dump", "policy", "--node", &node, "--filter", "set=7",
    ]);
    assert_eq!(rows.as_array().unwrap().len(), 1, "{rows}");
    assert_eq!(rows[0]["ingress"]["allowed"], 5, "{rows}");
    assert_eq!(rows[0]["ingress"]["denied_by_rule"], 2, "{rows}");
    assert_eq!(rows[0]["egress"]["open"], true, "{rows}");
    let (ok, text, err) = dump("policy-nics", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text),
        [
            ["21", "10.0.1.10", "12", &e],
            ["21", "10.0.1.11", "12,pending", &e],
        ],
        "{text}"
    );
    let (ok, text, _) = dump("policy_nics", &["--filter", "addr=10.0.1.11"]);
    assert!(ok);
    assert_eq!(table_rows(&text).len(), 1, "{text}");
    let (ok, text, err) = dump("conntrack", &[]);
    assert!(ok, "{err}");
    assert_eq!(
        table_rows(&text)[0].last().map(String::as_str),
        Some(format!("egress@{epoch}").as_str()),
        "{text}"
    );
    let (ok, _, err) = dump("policy", &["--filter", "addr=10.0.1.10"]);
    assert!(!ok && err.contains("policy filters on set, kind"), "{err}");
    drop(dp);
}
