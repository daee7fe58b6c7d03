//! `describe pod` and `trace` on a small World: two Pods naming one ElasticIP (one
//! carries it, one waits), and two Pods of one L2Network on two Nodes.
use serde_json::json;

use super::{describe, trace};
use crate::cluster::World;

fn meta(name: &str) -> serde_json::Value {
    json!({"name": name, "namespace": "default"})
}

fn nic(
    name: &str,
    pod: &str,
    spec: serde_json::Value,
    status: serde_json::Value,
) -> serde_json::Value {
    let mut s = json!({"interface": "eth0", "podRef": {"name": pod}, "nodeName": "n1"});
    s.as_object_mut()
        .unwrap()
        .extend(spec.as_object().unwrap().clone());
    json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkInterface",
        "metadata": meta(name), "spec": s, "status": status})
}

fn endpoint(name: &str, node: &str, node_ip: &str, addr: &str, mac: &str) -> serde_json::Value {
    json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkEndpoint",
        "metadata": meta(name), "spec": {"kind": "Pod", "l2Network": "blue", "address": addr,
        "macAddress": mac, "nodeName": node, "nodeIp": node_ip}})
}

fn world() -> World {
    let pod = |n: &str, node: &str| {
        json!({"namespace": "default", "name": n, "node": node,
        "annotations": {}, "dns_policy": ""})
    };
    serde_json::from_value(json!({
        "objects": {
            "vpcs": [], "peerings": [], "transit_gateways": [], "subnets": [],
            "l2networks": [{"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "L2Network",
                "metadata": {"name": "blue"}, "spec": {"vpc": "prod"}}],
            "route_tables": [], "network_acls": [], "security_groups": [], "service_cidrs": [],
            "external_networks": [{"apiVersion": "juneau.loutres.me/v1alpha1",
                "kind": "ExternalNetwork", "metadata": {"name": "ext"},
                "spec": {"type": "arp", "addressPools": ["lan"]}, "status": {"networkID": 4097}}],
            "elastic_ips": [{"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ElasticIP",
                "metadata": meta("web-eip"), "spec": {"externalNetwork": "ext"},
                "status": {"address": "192.0.2.10", "phase": "Attached",
                    "attachment": {"kind": "NetworkInterface", "name": "web.eth0"}}}],
            "interfaces": [
                nic("web.eth0", "web", json!({"elasticIP": "web-eip"}),
                    json!({"address": "192.0.2.10/32", "phase": "Ready"})),
                nic("web2.eth0", "web2", json!({"elasticIP": "web-eip"}),
                    json!({"phase": "Pending", "conditions": [{"type": "Allocated",
                        "status": "False", "reason": "WaitingForElasticIP",
                        "message": "held by web.eth0"}]})),
                nic("a.eth0", "a", json!({"l2Network": "blue"}),
                    json!({"address": "10.1.0.2/24", "vni": 7, "phase": "Ready"})),
                nic("b.eth0", "b", json!({"l2Network": "blue"}),
                    json!({"address": "10.1.0.3/24", "vni": 7, "phase": "Ready"})),
            ],
        },
        "endpoints": [
            endpoint("a.eth0", "n1", "172.18.0.1", "10.1.0.2/24", "02:00:00:00:00:0a"),
            endpoint("b.eth0", "n2", "172.18.0.2", "10.1.0.3/24", "02:00:00:00:00:0b"),
        ],
        "pods": [pod("web", "n1"), pod("web2", "n2"), pod("a", "n1"), pod("b", "n2")],
    }))
    .expect("the test world reads")
}

#[test]
fn eip_25_describe_pod_says_which_nic_carries_the_elastic_ip() {
    let w = world();
    let holder = describe::describe_pod(&w, "default", "web").unwrap();
    assert_eq!(
        holder.nics[0].network,
        "ElasticIP web-eip (direct, 192.0.2.10, networkID 4097, carried by this NIC)"
    );
    let waiter = describe::describe_pod(&w, "default", "web2").unwrap();
    assert_eq!(
        waiter.nics[0].network,
        "ElasticIP web-eip (direct, 192.0.2.10, networkID 4097, carried by NetworkInterface web.eth0)"
    );
    assert_eq!(
        waiter.nics[0].waiting.as_deref(),
        Some("Allocated WaitingForElasticIP: held by web.eth0")
    );
    let text = describe::render(&waiter);
    assert!(
        text.contains("waiting: Allocated WaitingForElasticIP"),
        "{text}"
    );
    let l2 = describe::describe_pod(&w, "default", "a").unwrap();
    assert_eq!(l2.nics[0].network, "L2Network blue (VNI 7)");
    assert_eq!(l2.nics[0].mac, "02:00:00:00:00:0a");
    assert!(describe::describe_pod(&w, "default", "nope").is_err());
}

#[test]
fn eip_21_trace_refuses_a_direct_nic_as_source_or_destination() {
    let w = world();
    let none = |_: &str, _: u32, _: &str| None;
    for (from, to) in [("web", "a"), ("a", "web.eth0"), ("a", "192.0.2.10")] {
        let e = trace::trace(&w, "default", from, to, &none)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(trace::UNSUPPORTED), "{from} -> {to}: {e}");
        assert!(e.contains("web.eth0 holds ElasticIP web-eip"), "{e}");
    }
}

#[test]
fn l2_30_trace_follows_a_segment_across_nodes_and_reads_the_learned_table() {
    let w = world();
    let seen = std::cell::RefCell::new(Vec::new());
    let fdb = |node: &str, vni: u32, mac: &str| {
        seen.borrow_mut()
            .push((node.to_owned(), vni, mac.to_owned()));
        Some(format!("{mac} learned behind VTEP 172.18.0.2"))
    };
    let hops = trace::trace(&w, "default", "a", "10.1.0.3", &fdb).unwrap();
    let what: Vec<&str> = hops.iter().map(|h| h.what.as_str()).collect();
    assert_eq!(what[1], "switched in VNI 7 to 02:00:00:00:00:0b");
    assert_eq!(
        what[2],
        "l2_fdb: 02:00:00:00:00:0b learned behind VTEP 172.18.0.2"
    );
    assert_eq!(
        what[3],
        "carried by VXLAN, VNI 7, to Node n2 (VTEP 172.18.0.2)"
    );
    assert_eq!(hops[4].node, "n2");
    assert_eq!(
        *seen.borrow(),
        [("n1".to_owned(), 7, "02:00:00:00:00:0b".to_owned())]
    );
    let e = trace::trace(&w, "default", "a", "10.9.9.9", &fdb).unwrap_err();
    assert!(
        e.to_string()
            .contains("no NetworkInterface has the address 10.9.9.9"),
        "{e}"
    );
}

#[test]
fn l2_30_trace_refuses_an_address_two_nics_share_and_names_them() {
    let mut w = world();
    let mut twin = w.objects.interfaces[3].clone();
    twin.metadata.namespace = Some("other".into());
    w.objects.interfaces.push(twin);
    let none = |_: &str, _: u32, _: &str| None;
    let e = trace::trace(&w, "default", "a", "10.1.0.3", &none)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("10.1.0.3 is the address of 2 NetworkInterfaces")
            && e.contains("default/b.eth0")
            && e.contains("other/b.eth0"),
        "{e}"
    );
    // By name it is unambiguous.
    assert!(trace::trace(&w, "default", "a", "b", &none).is_ok());
}

/// `world` with Vpc prod's Subnet web-s routed 0.0.0.0/0 via NATGateway out (on
/// ExternalNetwork ext, where n1 has 192.0.2.50 and n2 nothing yet), and its NICs c.eth0
/// on n1 and d.eth0 on n2.
fn nat_world() -> World {
    use crate::api::{
        ExternalNetworkAttachment, NATGateway, NetworkInterface, PodRecord, RouteTable, Subnet,
        externalnetworkattachment::{
            ExternalNetworkAttachmentSpec, ExternalNetworkAttachmentStatus,
        },
        natgateway::NATGatewaySpec,
        routetable::{Route, RouteTableSpec, Via},
        subnet::SubnetSpec,
    };
    let mut w = world();
    w.objects.subnets.push(Subnet::new(
        "web-s",
        SubnetSpec {
            vpc: "prod".into(),
            cidr: "10.5.0.0/24".into(),
            network_acl: None,
        },
    ));
    w.objects.nat_gateways.push(NATGateway::new(
        "out",
        NATGatewaySpec {
            vpc: "prod".into(),
            external_network: "ext".into(),
        },
    ));
    w.objects.route_tables.push(RouteTable::new(
        "prod",
        RouteTableSpec {
            vpc: "prod".into(),
            routes: vec![Route {
                dst: "0.0.0.0/0".into(),
                via: Via {
                    type_: "natGateway".into(),
                    nat_gateway: Some("out".into()),
                    ..Default::default()
                },
            }],
        },
    ));
    let mut ena = ExternalNetworkAttachment::new(
        "ext--n1",
        ExternalNetworkAttachmentSpec {
            external_network: "ext".into(),
            node_name: "n1".into(),
        },
    );
    ena.status = Some(ExternalNetworkAttachmentStatus {
        assigned_ip: "192.0.2.50".parse().ok(),
        conditions: vec![],
    });
    w.objects.external_network_attachments.push(ena);
    let on_n1: NetworkInterface = serde_json::from_value(nic(
        "c.eth0",
        "c",
        json!({"subnet": "web-s"}),
        json!({"address": "10.5.0.2/24", "vni": 9, "phase": "Ready"}),
    ))
    .unwrap();
    w.objects.interfaces.push(on_n1);
    for (pod, node) in [("c", "n1"), ("d", "n2")] {
        w.pods.push(PodRecord {
            namespace: "default".into(),
            name: pod.into(),
            node: node.into(),
            ..Default::default()
        });
    }
    let mut on_n2: NetworkInterface = serde_json::from_value(nic(
        "d.eth0",
        "d",
        json!({"subnet": "web-s"}),
        json!({"address": "10.5.0.3/24", "vni": 9, "phase": "Ready"}),
    ))
    .unwrap();
    on_n2.spec.node_name = "n2".into();
    w.objects.interfaces.push(on_n2);
    w
}

#[test]
fn nat_01_describe_pod_says_which_nat_gateway_a_nic_goes_out_by_and_from_which_address() {
    use crate::api::{
        NATGateway,
        natgateway::NATGatewaySpec,
        routetable::{Route, Via},
    };
    let mut w = nat_world();
    let c = describe::describe_pod(&w, "default", "c").unwrap();
    assert_eq!(
        c.nics[0].outside.as_deref(),
        Some("NATGateway out (0.0.0.0/0, from 192.0.2.50, ExternalNetwork ext on n1)")
    );
    assert!(describe::render(&c).contains("outside: NATGateway out"));
    let d = describe::describe_pod(&w, "default", "d").unwrap();
    assert_eq!(
        d.nics[0].outside.as_deref(),
        Some("NATGateway out (0.0.0.0/0, no address on this Node yet, ExternalNetwork ext on n2)")
    );
    // An L2Network without a gateway goes out by nothing of a Vpc.
    let a = describe::describe_pod(&w, "default", "a").unwrap();
    assert_eq!(a.nics[0].outside, None);
    // trace to an outside address: the translation on the source's own Node.
    w.endpoints.push(
        serde_json::from_value(json!({"apiVersion": "juneau.loutres.me/v1alpha1",
            "kind": "NetworkEndpoint", "metadata": meta("c.eth0"),
            "spec": {"kind": "Pod", "subnet": "web-s", "address": "10.5.0.2/24",
            "macAddress": "02:00:00:00:00:0c", "nodeName": "n1", "nodeIp": "172.18.0.1"}}))
        .unwrap(),
    );
    w.objects.service_cidrs = vec!["10.96.0.0/12".parse().unwrap()];
    let none = |_: &str, _: u32, _: &str| None;
    let hops = trace::trace(&w, "default", "c", "198.51.100.10", &none).unwrap();
    let what: Vec<&str> = hops.iter().map(|h| h.what.as_str()).collect();
    assert!(what[1].contains("0.0.0.0/0 via NATGateway out"), "{what:?}");
    assert!(
        what[2].starts_with("nat_out: source 10.5.0.2:<port> becomes 192.0.2.50:<port>"),
        "{what:?}"
    );
    assert!(
        hops.iter().all(|h| h.node == "n1"),
        "all on the source's Node"
    );
    // The cluster's own ranges are never translated.
    let hops = trace::trace(&w, "default", "c", "10.96.0.10", &none).unwrap();
    assert!(
        hops[1]
            .what
            .contains("cluster's own range 10.96.0.0/12: never translated"),
        "{hops:?}"
    );
    // The longest prefix decides: a second gateway for one network, listed after the
    // default route, takes what it covers; describe names the widest.
    w.objects.nat_gateways.push(NATGateway::new(
        "lab",
        NATGatewaySpec {
            vpc: "prod".into(),
            external_network: "ext".into(),
        },
    ));
    w.objects.route_tables[0].spec.routes.push(Route {
        dst: "203.0.113.0/24".into(),
        via: Via {
            type_: "natGateway".into(),
            nat_gateway: Some("lab".into()),
            ..Default::default()
        },
    });
    let hops = trace::trace(&w, "default", "c", "203.0.113.7", &none).unwrap();
    assert!(
        hops[1].what.contains("203.0.113.0/24 via NATGateway lab"),
        "{hops:?}"
    );
    let hops = trace::trace(&w, "default", "c", "198.51.100.10", &none).unwrap();
    assert!(
        hops[1].what.contains("0.0.0.0/0 via NATGateway out"),
        "{hops:?}"
    );
    let c = describe::describe_pod(&w, "default", "c").unwrap();
    assert!(
        c.nics[0]
            .outside
            .as_deref()
            .is_some_and(|o| o.starts_with("NATGateway out (0.0.0.0/0")),
        "{:?}",
        c.nics[0].outside
    );
}

/// ElasticIPAttachment web-eipa of web-eip onto c.eth0 (10.5.0.2 on n1), in `phase`.
fn web_eipa(phase: &str) -> crate::api::ElasticIPAttachment {
    use crate::api::elasticipattachment::{
        ElasticIPAttachmentSpec, ElasticIPAttachmentStatus, NameRef, TargetRef,
    };
    let mut a = crate::api::ElasticIPAttachment::new(
        "web-eipa",
        ElasticIPAttachmentSpec {
            elastic_ip_ref: NameRef {
                name: "web-eip".into(),
            },
            target_ref: TargetRef {
                network_interface_name: "c.eth0".into(),
            },
        },
    );
    a.metadata.namespace = Some("default".into());
    a.status = Some(ElasticIPAttachmentStatus {
        elastic_ip: "192.0.2.60".parse().ok(),
        pod_ip: "10.5.0.2".parse().ok(),
        node_name: "n1".into(),
        phase: phase.into(),
        ..Default::default()
    });
    a
}

#[test]
fn nat_03_describe_pod_shows_each_nics_public_address() {
    let mut w = nat_world();
    w.objects.route_tables[0].spec.routes[0].via = crate::api::routetable::Via {
        type_: "internetGateway".into(),
        ..Default::default()
    };
    let outside = |w: &World, pod: &str| {
        describe::describe_pod(w, "default", pod).unwrap().nics[0]
            .outside
            .clone()
            .unwrap_or_default()
    };
    // Without an attachment: through the Vpc's NATGateway, or refused by name.
    assert_eq!(
        outside(&w, "c"),
        "internet gateway (0.0.0.0/0): through Vpc prod's NATGateway, from 192.0.2.50 on n1"
    );
    assert!(
        outside(&w, "d").contains("no public address"),
        "{}",
        outside(&w, "d")
    );
    assert!(outside(&w, "d").contains("IGW_NO_PUBLIC_ADDRESS"));
    // c's NIC with web-eip attached.
    w.objects.elastic_ip_attachments.push(web_eipa("Attached"));
    assert_eq!(
        outside(&w, "c"),
        "ElasticIP web-eip (1:1 by ElasticIPAttachment web-eipa, 192.0.2.60 <-> 10.5.0.2, answered by n1)"
    );
    assert!(
        describe::render(&describe::describe_pod(&w, "default", "c").unwrap())
            .contains("outside: ElasticIP web-eip (1:1")
    );
}

#[test]
fn nat_03_trace_through_the_internet_gateway_shows_the_one_to_one_rewrite_or_its_fallback() {
    use crate::api::routetable::{Route, Via};
    let mut w = nat_world();
    w.objects.route_tables[0].spec.routes[0].via = Via {
        type_: "internetGateway".into(),
        ..Default::default()
    };
    for (nic, address, mac, node) in [
        ("c.eth0", "10.5.0.2/24", "02:00:00:00:00:0c", "n1"),
        ("d.eth0", "10.5.0.3/24", "02:00:00:00:00:0d", "n2"),
    ] {
        w.endpoints.push(
            serde_json::from_value(json!({"apiVersion": "juneau.loutres.me/v1alpha1",
                "kind": "NetworkEndpoint", "metadata": meta(nic),
                "spec": {"kind": "Pod", "subnet": "web-s", "address": address,
                "macAddress": mac, "nodeName": node, "nodeIp": "172.18.0.1"}}))
            .unwrap(),
        );
    }
    let none = |_: &str, _: u32, _: &str| None;
    let what = |w: &World, from: &str, to: &str| -> Vec<String> {
        trace::trace(w, "default", from, to, &none)
            .unwrap()
            .into_iter()
            .map(|h| h.what)
            .collect()
    };
    // No attachment: the Vpc's NATGateway, where this Node has an address...
    let c = what(&w, "c", "198.51.100.10");
    assert!(c[1].contains("0.0.0.0/0 via the internet gateway"), "{c:?}");
    assert!(c[2].contains("through Vpc prod's NATGateway out"), "{c:?}");
    assert!(
        c[3].starts_with("nat_out: source 10.5.0.2:<port> becomes 192.0.2.50:<port>"),
        "{c:?}"
    );
    // ... and refused by name where it has none.
    let d = what(&w, "d", "198.51.100.10");
    assert!(d.last().unwrap().contains("IGW_NO_PUBLIC_ADDRESS"), "{d:?}");
    // c's NIC with web-eip attached: 1:1, replies carried from the answering Node.
    w.objects.elastic_ip_attachments.push(web_eipa("Pending"));
    // Not yet Attached: still the fallback.
    let c = what(&w, "c", "198.51.100.10");
    assert!(c[2].contains("NATGateway out"), "{c:?}");
    w.objects.elastic_ip_attachments[0]
        .status
        .as_mut()
        .unwrap()
        .phase = "Attached".into();
    // Attached, but the ElasticIP still names another holder: the Node writes no 1:1
    // mapping (`node::elasticip::attached`), and trace says what the datapath does.
    let c = what(&w, "c", "198.51.100.10");
    assert!(c[2].contains("NATGateway out"), "{c:?}");
    w.objects.elastic_ips[0].status.as_mut().unwrap().attachment =
        Some(crate::api::elasticip::Attachment {
            kind: "ElasticIPAttachment".into(),
            name: "web-eipa".into(),
        });
    let c = what(&w, "c", "198.51.100.10");
    assert!(
        c[2].contains(
            "1:1 by ElasticIPAttachment web-eipa: source 10.5.0.2 becomes ElasticIP 192.0.2.60"
        ),
        "{c:?}"
    );
    assert!(c[3].contains("from 192.0.2.60"), "{c:?}");
    assert!(
        c[4].starts_with("replies to 192.0.2.60 reach the uplink of Node n1"),
        "{c:?}"
    );
    // The cluster's own ranges stay refused; a longer NATGateway route wins.
    w.objects.service_cidrs = vec!["10.96.0.0/12".parse().unwrap()];
    let s = what(&w, "c", "10.96.0.10");
    assert!(s[1].contains("never translated"), "{s:?}");
    w.objects.route_tables[0].spec.routes.push(Route {
        dst: "203.0.113.0/24".into(),
        via: Via {
            type_: "natGateway".into(),
            nat_gateway: Some("out".into()),
            ..Default::default()
        },
    });
    let n = what(&w, "c", "203.0.113.7");
    assert!(n[1].contains("203.0.113.0/24 via NATGateway out"), "{n:?}");
}
