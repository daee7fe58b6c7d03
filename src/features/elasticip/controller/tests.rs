//! The ElasticIP reconciler over whole passes of the controller.
use std::collections::BTreeMap;

use crate::{
    api::{
        AddressPool, ElasticIP, ElasticIPAttachment, ExternalNetwork, PodRecord,
        addresspool::AddressPoolSpec,
        elasticip::ElasticIPSpec,
        elasticipattachment::{ElasticIPAttachmentSpec, NameRef, TargetRef},
        externalnetwork::ExternalNetworkSpec,
        net::shown,
        networkinterface::{NicRoute, NicRule},
    },
    cluster::{Desired, World},
    controller::{Config, reconcile},
};

pub(super) fn world(range: &str) -> World {
    let mut w = World::default();
    let s = &mut w.objects;
    s.address_pools.push(AddressPool::new(
        "lan",
        AddressPoolSpec {
            advertise_mode: "arp".into(),
            addresses: vec![range.into()],
        },
    ));
    s.external_networks.push(ExternalNetwork::new(
        "ext",
        ExternalNetworkSpec {
            type_: "arp".into(),
            address_pools: vec!["lan".into()],
        },
    ));
    w
}

pub(super) fn eip(name: &str) -> ElasticIP {
    let mut e = ElasticIP::new(
        name,
        ElasticIPSpec {
            external_network: "ext".into(),
            requested_ip: None,
        },
    );
    e.metadata.namespace = Some("default".into());
    e
}

/// An ElasticIPAttachment (NAT) of `web-eip` for a Subnet NIC.
pub(super) fn attachment(name: &str) -> ElasticIPAttachment {
    let mut a = ElasticIPAttachment::new(
        name,
        ElasticIPAttachmentSpec {
            elastic_ip_ref: NameRef {
                name: "web-eip".into(),
            },
            target_ref: TargetRef {
                network_interface_name: "app.eth0".into(),
            },
        },
    );
    a.metadata.namespace = Some("default".into());
    a
}

pub(super) fn pod(
    name: &str,
    node: &str,
    created: &str,
    annotations: &[(&str, &str)],
) -> PodRecord {
    PodRecord {
        namespace: "default".into(),
        name: name.into(),
        node: node.into(),
        annotations: annotations
            .iter()
            .map(|(k, v)| (format!("juneau.loutres.me/{k}"), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        created: created.into(),
        ..Default::default()
    }
}

/// Reconciles and writes everything back, as a store would, until nothing changes.
pub(super) fn settle(w: &mut World) -> Desired {
    let cfg = Config {
        default_subnet_cidr: None,
        ..Default::default()
    };
    for _ in 0..5 {
        let d = reconcile(w, &cfg);
        // A fixed point of everything the pass writes back, not of the NICs alone.
        let writes = crate::cluster::plan(w, &d);
        if !crate::cluster::apply_to(w, &writes, &|_, _| Ok(())) {
            return d;
        }
    }
    panic!("no fixed point in 5 passes");
}

fn nic<'a>(d: &'a Desired, name: &str) -> &'a crate::api::NetworkInterface {
    d.interfaces
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no NIC {name}"))
}

fn reason(d: &Desired, name: &str) -> (String, String, String) {
    let st = nic(d, name).status.clone().unwrap();
    let c = &st.conditions[0];
    (st.phase, c.reason.clone(), c.message.clone())
}

#[test]
fn eip_04_eip_07_eip_08_eip_21_a_pod_nic_holds_the_address_with_an_on_link_default_route() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("idle"));
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    let idle = &d.elastic_ip_status["default/idle"];
    assert_eq!(
        (shown(&idle.address).as_str(), idle.phase.as_str()),
        ("192.0.2.10", "Available")
    );
    let flags: Vec<(&str, &str)> = idle
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(flags, vec![("Allocated", "True"), ("Attached", "False")]);
    let web = &d.elastic_ip_status["default/web-eip"];
    assert_eq!(shown(&web.address), "192.0.2.11");
    assert_eq!(web.phase, "Attached");
    let att = web.attachment.as_ref().unwrap();
    assert_eq!(
        (att.kind.as_str(), att.name.as_str()),
        ("NetworkInterface", "web.eth0")
    );
    let n = nic(&d, "web.eth0");
    assert_eq!(n.spec.elastic_ip.as_deref(), Some("web-eip"));
    assert_eq!(
        (n.spec.subnet.as_ref(), n.spec.l2_network.as_ref()),
        (None, None)
    );
    let st = n.status.as_ref().unwrap();
    assert_eq!(shown(&st.address), "192.0.2.11/32");
    assert_eq!(st.vni, d.external_network_status["ext"].network_id);
    assert_ne!(st.vni, 0);
    assert_eq!(
        st.routes,
        vec![NicRoute {
            dst: "0.0.0.0/0".into(),
            gw: "169.254.0.1".into(),
            on_link: true,
            table: 0,
        }]
    );
    assert!(st.rules.is_empty());
    assert_eq!(st.mtu, 0, "EIP-21: the kernel's MTU");
}

#[test]
fn eip_10_a_secondary_nic_routes_by_its_own_table_chosen_by_a_rule() {
    let mut w = world("10.225.51.6-10.225.51.6");
    w.objects.elastic_ips.push(eip("gw-eip"));
    w.pods.push(pod(
        "gw",
        "node-b",
        "1",
        &[("networks", r#"[{"interface":"eth1","elasticIP":"gw-eip"}]"#)],
    ));
    let d = settle(&mut w);
    let st = nic(&d, "gw.eth1").status.clone().unwrap();
    assert_eq!(shown(&st.address), "10.225.51.6/32");
    assert_eq!(
        st.routes[0].table, 182530822,
        "the seed's number for 10.225.51.6"
    );
    assert_eq!(
        st.rules,
        vec![NicRule {
            from: "10.225.51.6".into(),
            table: 182530822,
            priority: 100,
        }]
    );
    // An address whose number is a kernel table cannot be a secondary NIC's.
    let mut w = world("0.0.0.7-0.0.0.7");
    w.objects.elastic_ips.push(eip("low"));
    w.pods.push(pod(
        "gw",
        "node-b",
        "1",
        &[("networks", r#"[{"interface":"eth1","elasticIP":"low"}]"#)],
    ));
    let d = settle(&mut w);
    let (phase, why, message) = reason(&d, "gw.eth1");
    assert_eq!(
        (phase.as_str(), why.as_str()),
        ("Failed", "InvalidElasticIPAddress")
    );
    assert!(
        message.contains("route table 7, which Linux reserves (0-255)"),
        "{message}"
    );
}

#[test]
fn eip_03_eip_25_no_nic_while_the_network_is_not_ready_and_the_reason_is_said() {
    // No ElasticIP yet, then one whose pools are exhausted.
    let mut w = world("192.0.2.10-192.0.2.10");
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    assert!(d.interfaces.is_empty());
    assert_eq!(
        d.waiting,
        vec![(
            "default/web".to_owned(),
            "no ElasticIP \"web-eip\" in namespace \"default\"".to_owned()
        )]
    );
    w.objects.elastic_ips.push(eip("first"));
    w.objects.elastic_ips.push(eip("web-eip"));
    let d = settle(&mut w);
    assert!(d.interfaces.is_empty());
    assert!(d.waiting[0].1.contains("has no address"), "{:?}", d.waiting);
    assert_eq!(
        d.elastic_ip_status["default/web-eip"].conditions[0].reason,
        "NoAddressAvailable"
    );
    // A pool with room: the NIC is made at once, with the address.
    w.objects.address_pools[0]
        .spec
        .addresses
        .push("192.0.2.11-192.0.2.12".into());
    let d = settle(&mut w);
    assert!(d.waiting.is_empty());
    assert_eq!(
        shown(&nic(&d, "web.eth0").status.as_ref().unwrap().address),
        "192.0.2.11/32"
    );
}

#[test]
fn eip_20_one_holder_the_loser_waits_naming_it_and_takes_over_when_it_goes() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    // Created at once: the older Pod wins (not the first by name).
    w.pods
        .push(pod("amy", "node-b", "2", &[("elastic-ip", "web-eip")]));
    w.pods
        .push(pod("zed", "node-a", "1", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    assert_eq!(
        shown(&nic(&d, "zed.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
    let (phase, why, message) = reason(&d, "amy.eth0");
    assert_eq!(
        (phase.as_str(), why.as_str()),
        ("Pending", "WaitingForElasticIP")
    );
    assert!(
        message.contains("\"zed.eth0\""),
        "names the holder: {message}"
    );
    assert_eq!(nic(&d, "amy.eth0").status.as_ref().unwrap().address, None);
    // The holder's Pod terminates: it keeps the address until it is gone.
    w.pods[1].terminating = true;
    let d = settle(&mut w);
    assert_eq!(
        shown(&nic(&d, "zed.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
    // Gone: the waiting NIC takes it in the next pass.
    w.pods.remove(1);
    let d = settle(&mut w);
    assert_eq!(
        shown(&nic(&d, "amy.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
    let att = d.elastic_ip_status["default/web-eip"]
        .attachment
        .clone()
        .unwrap();
    assert_eq!(att.name, "amy.eth0");
}

#[test]
fn eip_20_while_a_naming_pod_terminates_before_any_holder_the_elastic_ip_waits_for_handover() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    let mut old = pod("old", "node-a", "1", &[("elastic-ip", "web-eip")]);
    old.terminating = true;
    w.pods.push(old);
    w.pods
        .push(pod("new", "node-b", "2", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    let st = &d.elastic_ip_status["default/web-eip"];
    let attached = &st.conditions[1];
    assert_eq!(attached.reason, "WaitingForHandover");
    assert!(
        attached.message.contains("old.eth0"),
        "{}",
        attached.message
    );
    assert_eq!(reason(&d, "new.eth0").1, "WaitingForElasticIP");
}

#[test]
fn eip_11_the_arp_advertisement_follows_the_holders_node() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    let ads: Vec<(String, String, String)> = d
        .arp_advertisements
        .iter()
        .map(|a| {
            (
                a.metadata.name.clone().unwrap(),
                shown(&a.spec.address),
                a.spec.node_name.clone(),
            )
        })
        .collect();
    assert_eq!(
        ads,
        vec![(
            "eip-default-web-eip".into(),
            "192.0.2.10".into(),
            "node-a".into()
        )]
    );
    // The Pod is replaced by one on another Node.
    w.pods.clear();
    settle(&mut w);
    w.pods
        .push(pod("web2", "node-c", "2", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    assert_eq!(d.arp_advertisements[0].spec.node_name, "node-c");
    // A bgp network has none.
    w.objects.external_networks[0].spec.type_ = "bgp".into();
    w.objects.address_pools[0].spec.advertise_mode = "bgp".into();
    w.objects.address_pools[0].spec.addresses = vec!["192.0.2.0/28".into()];
    assert!(settle(&mut w).arp_advertisements.is_empty());
}

#[test]
fn eip_02_eip_22_an_attachment_and_a_nic_on_one_elastic_ip_both_wait_and_it_is_in_error() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.objects.elastic_ip_attachments.push(attachment("nat"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    let d = settle(&mut w);
    let st = &d.elastic_ip_status["default/web-eip"];
    assert_eq!(st.phase, "Error");
    assert_eq!(st.conditions[1].reason, "Conflict");
    let (phase, why, message) = reason(&d, "web.eth0");
    assert_eq!(
        (phase.as_str(), why.as_str()),
        ("Pending", "WaitingForElasticIP")
    );
    assert!(message.contains("ElasticIPAttachment \"nat\""), "{message}");
    assert_eq!(d.attachment_status["default/nat"].phase, "Pending");
    assert!(d.arp_advertisements.is_empty());
    // The attachment deleted: the NIC takes the address.
    w.objects.elastic_ip_attachments.clear();
    let d = settle(&mut w);
    assert_eq!(
        shown(&nic(&d, "web.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
}

#[test]
fn eip_19_a_deleted_elastic_ip_keeps_its_address_while_a_nic_names_it() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    settle(&mut w);
    w.objects.elastic_ips[0].metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Default::default()),
    );
    let d = settle(&mut w);
    let st = &d.elastic_ip_status["default/web-eip"];
    assert_eq!(shown(&st.address), "192.0.2.10");
    assert_eq!(st.conditions[0].reason, "WaitingForNetworkInterfaces");
    assert!(st.conditions[0].message.contains("web.eth0"));
    assert_eq!(
        shown(&nic(&d, "web.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
}

#[test]
fn eip_22_a_running_holder_keeps_its_dataplane_when_an_attachment_names_its_elastic_ip() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    settle(&mut w);
    w.objects.elastic_ip_attachments.push(attachment("late"));
    let d = settle(&mut w);
    let st = &d.elastic_ip_status["default/web-eip"];
    assert_eq!(
        (st.phase.as_str(), st.conditions[1].reason.as_str()),
        ("Error", "Conflict")
    );
    assert_eq!(
        st.attachment.as_ref().unwrap().name,
        "web.eth0",
        "still the holder"
    );
    assert_eq!(d.arp_advertisements.len(), 1, "its Node still answers");
    assert_eq!(reason(&d, "web.eth0").1, "WaitingForElasticIP");
}

#[test]
fn eip_20_while_the_holders_pod_terminates_and_another_waits_the_elastic_ip_says_handover() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("old", "node-a", "1", &[("elastic-ip", "web-eip")]));
    w.pods
        .push(pod("new", "node-b", "2", &[("elastic-ip", "web-eip")]));
    settle(&mut w);
    w.pods[0].terminating = true;
    let d = settle(&mut w);
    let attached = &d.elastic_ip_status["default/web-eip"].conditions[1];
    assert_eq!(attached.reason, "WaitingForHandover");
    assert!(
        attached.message.contains("old.eth0"),
        "{}",
        attached.message
    );
    assert_eq!(
        shown(&nic(&d, "old.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
}

#[test]
fn eip_04_a_requested_address_is_no_one_elses_first_fit() {
    let mut w = world("192.0.2.10-192.0.2.11");
    // The older ElasticIP asks for nothing; the younger asks for the first address.
    w.objects.elastic_ips.push(eip("any"));
    let mut want = eip("wants-10");
    want.spec.requested_ip = Some("192.0.2.10".into());
    w.objects.elastic_ips.push(want);
    let d = settle(&mut w);
    assert_eq!(
        shown(&d.elastic_ip_status["default/any"].address),
        "192.0.2.11"
    );
    assert_eq!(
        shown(&d.elastic_ip_status["default/wants-10"].address),
        "192.0.2.10"
    );
}

#[test]
fn eip_03_a_running_pod_keeps_its_nics_when_a_later_nic_waits() {
    let mut w = world("192.0.2.10-192.0.2.20");
    w.objects.elastic_ips.push(eip("web-eip"));
    w.pods
        .push(pod("web", "node-a", "1", &[("elastic-ip", "web-eip")]));
    settle(&mut w);
    // eth1 naming an ElasticIP that does not exist yet is added to the running Pod.
    w.pods[0].annotations.insert(
        "juneau.loutres.me/networks".into(),
        r#"[{"interface":"eth0","elasticIP":"web-eip"},{"interface":"eth1","elasticIP":"later"}]"#
            .into(),
    );
    w.pods[0].annotations.remove("juneau.loutres.me/elastic-ip");
    let d = settle(&mut w);
    assert_eq!(
        shown(&nic(&d, "web.eth0").status.as_ref().unwrap().address),
        "192.0.2.10/32"
    );
    assert_eq!(reason(&d, "web.eth1").1, "NetworkNotReady");
}
