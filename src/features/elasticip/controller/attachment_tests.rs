//! ElasticIPAttachments (NAT-03) over whole passes of the controller.
use super::tests::{attachment, eip, pod, settle, world};
use crate::{
    api::{
        RouteTable, Subnet, Vpc,
        net::shown,
        routetable::{Route, RouteTableSpec, Via},
        subnet::{SubnetSpec, SubnetStatus},
        vpc::VpcSpec,
    },
    cluster::World,
};

/// `world` with Vpc `t`, its Subnet `web` (10.71.0.0/24, VNI 7101) and its main
/// RouteTable `t` routing 0.0.0.0/0 via the internet gateway, ElasticIP `web-eip` and
/// the attachment `nat` of it to `app.eth0`.
fn tenant() -> World {
    let mut w = world("192.0.2.10-192.0.2.20");
    let s = &mut w.objects;
    s.vpcs.push(Vpc::new("t", VpcSpec::default()));
    let mut web = Subnet::new(
        "web",
        SubnetSpec {
            vpc: "t".into(),
            cidr: "10.71.0.0/24".into(),
            ..Default::default()
        },
    );
    web.status = Some(SubnetStatus {
        vni: 7101,
        gateway: "10.71.0.1".parse().ok(),
        gateway_mac: "02:4a:4e:00:1b:bd".parse().ok(),
        ..Default::default()
    });
    s.subnets.push(web);
    s.route_tables.push(RouteTable::new(
        "t",
        RouteTableSpec {
            vpc: "t".into(),
            routes: vec![Route {
                dst: "0.0.0.0/0".into(),
                via: Via {
                    type_: "internetGateway".into(),
                    ..Default::default()
                },
            }],
        },
    ));
    s.elastic_ips.push(eip("web-eip"));
    s.elastic_ip_attachments.push(attachment("nat"));
    w
}

fn on(subnet: &str, node: &str) -> crate::api::PodRecord {
    let networks = format!(r#"[{{"interface":"eth0","subnet":"{subnet}"}}]"#);
    pod("app", node, "1", &[("networks", networks.as_str())])
}

#[test]
fn nat_03_an_attachment_goes_pending_then_attached_with_its_pod_ip_and_node() {
    let mut w = tenant();
    let d = settle(&mut w);
    let st = &d.attachment_status["default/nat"];
    assert_eq!(
        (st.phase.as_str(), st.conditions[0].reason.as_str()),
        ("Pending", "WaitingForNetworkInterface"),
        "no NIC yet"
    );
    assert!(
        st.conditions[0].message.contains("default/app.eth0"),
        "{st:?}"
    );
    assert!(d.arp_advertisements.is_empty());
    w.pods.push(on("web", "node-a"));
    let d = settle(&mut w);
    let st = &d.attachment_status["default/nat"];
    assert_eq!(st.phase, "Attached", "{st:?}");
    assert_eq!(
        (
            shown(&st.elastic_ip).as_str(),
            shown(&st.pod_ip).as_str(),
            st.node_name.as_str()
        ),
        ("192.0.2.10", "10.71.0.2", "node-a")
    );
    assert_eq!(st.conditions[0].status, "True");
    let e = &d.elastic_ip_status["default/web-eip"];
    assert_eq!(e.phase, "Attached");
    assert_eq!(
        e.attachment
            .as_ref()
            .map(|a| (a.kind.as_str(), a.name.as_str())),
        Some(("ElasticIPAttachment", "nat"))
    );
    // The NIC itself is an ordinary Subnet NIC: its own address, no ElasticIP.
    let nic = d
        .interfaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some("app.eth0"))
        .unwrap();
    assert_eq!(shown(&nic.status.as_ref().unwrap().address), "10.71.0.2/24");
    // Its Node answers ARP for the address.
    let adv: Vec<_> = d
        .arp_advertisements
        .iter()
        .map(|a| (shown(&a.spec.address), a.spec.node_name.as_str()))
        .collect();
    assert_eq!(adv, vec![("192.0.2.10".to_owned(), "node-a")]);
}

#[test]
fn nat_03_an_attachment_follows_its_nic_to_a_new_node_and_its_arp_advertisement_too() {
    let mut w = tenant();
    w.pods.push(on("web", "node-a"));
    settle(&mut w);
    // The Pod recreated elsewhere under the same name.
    w.pods.clear();
    w.objects.interfaces.clear();
    w.pods.push(on("web", "node-b"));
    let d = settle(&mut w);
    assert_eq!(d.attachment_status["default/nat"].node_name, "node-b");
    assert_eq!(d.arp_advertisements.len(), 1);
    assert_eq!(d.arp_advertisements[0].spec.node_name, "node-b");
}

#[test]
fn nat_03_an_attachment_to_an_unfit_nic_is_in_error_and_says_why() {
    // A NIC of the default Vpc's Subnet.
    let mut w = tenant();
    let mut default = w.objects.subnets[0].clone();
    default.metadata.name = Some("default".into());
    default.spec.vpc = "default".into();
    default.spec.cidr = "10.16.0.0/16".into();
    default.status.as_mut().unwrap().vni = 7100;
    w.objects.subnets.push(default);
    w.pods.push(on("default", "node-a"));
    let d = settle(&mut w);
    let st = &d.attachment_status["default/nat"];
    assert_eq!(
        (st.phase.as_str(), st.conditions[0].reason.as_str()),
        ("Error", "InvalidTarget")
    );
    assert!(st.conditions[0].message.contains("default Vpc"), "{st:?}");
    assert!(d.arp_advertisements.is_empty(), "nothing is written for it");
    assert_eq!(d.elastic_ip_status["default/web-eip"].phase, "Error");
    // A tenant Subnet whose table has no internetGateway route.
    let mut w = tenant();
    w.objects.route_tables[0].spec.routes.clear();
    w.pods.push(on("web", "node-a"));
    let d = settle(&mut w);
    let st = &d.attachment_status["default/nat"];
    assert_eq!(
        (st.phase.as_str(), st.conditions[0].reason.as_str()),
        ("Error", "NoInternetGateway")
    );
    assert!(
        st.conditions[0].message.contains("RouteTable \"t\""),
        "{st:?}"
    );
    // The route added: attached at the next pass.
    w.objects.route_tables[0].spec.routes.push(Route {
        dst: "0.0.0.0/0".into(),
        via: Via {
            type_: "internetGateway".into(),
            ..Default::default()
        },
    });
    assert_eq!(
        settle(&mut w).attachment_status["default/nat"].phase,
        "Attached"
    );
}

#[test]
fn eip_22_two_attachments_of_one_elastic_ip_both_wait_naming_each_other() {
    let mut w = tenant();
    w.objects.elastic_ip_attachments.push(attachment("nat-2"));
    w.pods.push(on("web", "node-a"));
    let d = settle(&mut w);
    for (me, other) in [("nat", "nat-2"), ("nat-2", "nat")] {
        let st = &d.attachment_status[&format!("default/{me}")];
        assert_eq!(st.phase, "Pending");
        assert!(
            st.conditions[0]
                .message
                .contains(&format!("ElasticIPAttachment {other}")),
            "{st:?}"
        );
    }
    assert!(d.arp_advertisements.is_empty(), "neither is answered for");
}

#[test]
fn nat_03_an_attachment_whose_elastic_ip_goes_waits_for_it_instead_of_keeping_attached() {
    let mut w = tenant();
    w.pods.push(on("web", "node-a"));
    let d = settle(&mut w);
    assert_eq!(d.attachment_status["default/nat"].phase, "Attached");
    w.objects.elastic_ips.clear();
    let d = settle(&mut w);
    let st = &d.attachment_status["default/nat"];
    assert_eq!(
        (st.phase.as_str(), st.conditions[0].reason.as_str()),
        ("Pending", "WaitingForElasticIP"),
        "{st:?}"
    );
    assert!(
        st.conditions[0]
            .message
            .contains("no ElasticIP \"web-eip\""),
        "{st:?}"
    );
    // As written back: the store holds the waiting status, not the old one.
    let held = w.objects.elastic_ip_attachments[0].status.as_ref().unwrap();
    assert_eq!(held.phase, "Pending");
    assert_eq!(held.pod_ip, None);
}
