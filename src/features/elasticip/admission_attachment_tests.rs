use super::*;
use crate::{
    admission::validate::validate_pod_elastic_ips,
    api::{
        AddressPool, ElasticIP, ExternalNetwork, NetworkInterface, PodRecord, RouteTable, Subnet,
        Vpc,
        addresspool::AddressPoolSpec,
        elasticip::{Attachment, ElasticIPSpec, ElasticIPStatus},
        elasticipattachment::{ElasticIPAttachmentSpec, NameRef, TargetRef},
        externalnetwork::ExternalNetworkSpec,
        networkinterface::NetworkInterfaceSpec,
        routetable::{Route, RouteTableSpec, Via},
        subnet::SubnetSpec,
        vpc::VpcSpec,
    },
};

fn attach(name: &str, eip: &str, nic: &str) -> ElasticIPAttachment {
    let mut a = ElasticIPAttachment::new(
        name,
        ElasticIPAttachmentSpec {
            elastic_ip_ref: NameRef { name: eip.into() },
            target_ref: TargetRef {
                network_interface_name: nic.into(),
            },
        },
    );
    a.metadata.namespace = Some("shop".into());
    a
}

fn nic(name: &str, subnet: Option<&str>, eip: Option<&str>) -> NetworkInterface {
    let mut n = NetworkInterface::new(
        name,
        NetworkInterfaceSpec {
            subnet: subnet.map(Into::into),
            elastic_ip: eip.map(Into::into),
            ..Default::default()
        },
    );
    n.metadata.namespace = Some("shop".into());
    n
}

/// Tenant Vpc t (Subnet web, table t via the internet gateway; Subnet closed,
/// table closed-rt without), the default Vpc's Subnet, ElasticIPs web-eip
/// (192.0.2.10 of pool lan) and far-eip (asks for 203.0.113.9), the NICs of each.
fn snap() -> Snapshot {
    let mut s = Snapshot::default();
    s.address_pools.push(AddressPool::new(
        "lan",
        AddressPoolSpec {
            advertise_mode: "arp".into(),
            addresses: vec!["192.0.2.10-192.0.2.20".into()],
        },
    ));
    s.external_networks.push(ExternalNetwork::new(
        "ext",
        ExternalNetworkSpec {
            type_: "arp".into(),
            address_pools: vec!["lan".into()],
        },
    ));
    for (name, requested) in [("web-eip", None), ("far-eip", Some("203.0.113.9"))] {
        let mut e = ElasticIP::new(
            name,
            ElasticIPSpec {
                external_network: "ext".into(),
                requested_ip: requested.map(Into::into),
            },
        );
        e.metadata.namespace = Some("shop".into());
        if requested.is_none() {
            e.status = Some(ElasticIPStatus {
                address: "192.0.2.10".parse().ok(),
                ..Default::default()
            });
        }
        s.elastic_ips.push(e);
    }
    s.vpcs.push(Vpc::new("t", VpcSpec::default()));
    for (name, vpc, cidr, table) in [
        ("web", "t", "10.71.0.0/24", Some("t")),
        ("closed", "u", "10.72.0.0/24", None),
        ("default", "default", "10.16.0.0/16", None),
    ] {
        s.subnets.push(Subnet::new(
            name,
            SubnetSpec {
                vpc: vpc.into(),
                cidr: cidr.into(),
                ..Default::default()
            },
        ));
        if let Some(t) = table {
            s.route_tables.push(RouteTable::new(
                t,
                RouteTableSpec {
                    vpc: vpc.into(),
                    routes: vec![Route {
                        dst: "0.0.0.0/0".into(),
                        via: Via {
                            type_: "internetGateway".into(),
                            ..Default::default()
                        },
                    }],
                },
            ));
        }
    }
    s.vpcs.push(Vpc::new("u", VpcSpec::default()));
    s.interfaces.extend([
        nic("app.eth0", Some("web"), None),
        nic("shut.eth0", Some("closed"), None),
        nic("sys.eth0", Some("default"), None),
    ]);
    s
}

fn msg(v: Verdict) -> String {
    v.expect_err("refused").to_string()
}

#[test]
fn nat_03_an_attachment_to_a_tenant_subnet_nic_or_a_nic_not_made_yet_is_accepted() {
    let s = snap();
    assert!(
        validate_elastic_ip_attachment_create(&attach("nat", "web-eip", "app.eth0"), &s).is_ok()
    );
    assert!(
        validate_elastic_ip_attachment_create(&attach("nat", "web-eip", "later.eth0"), &s).is_ok(),
        "its Pod may come later"
    );
}

#[test]
fn nat_03_an_attachment_to_a_default_subnet_nic_is_refused() {
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "web-eip", "sys.eth0"),
        &snap(),
    ));
    assert!(
        m.starts_with("spec.targetRef.networkInterfaceName: ") && m.contains("default Vpc"),
        "{m}"
    );
    // Nor to an L2Network NIC or one holding an ElasticIP itself.
    let mut s = snap();
    s.interfaces.push(nic("l2.eth1", None, None));
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "web-eip", "l2.eth1"),
        &s,
    ));
    assert!(m.contains("is not a NIC of a Subnet"), "{m}");
}

#[test]
fn nat_03_an_attachment_to_a_nic_of_a_vpc_without_internet_gateway_route_is_refused() {
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "web-eip", "shut.eth0"),
        &snap(),
    ));
    assert_eq!(
        m,
        "spec.targetRef.networkInterfaceName: NetworkInterface \"shut.eth0\" is on Subnet \"closed\", whose RouteTable \"vpc:u\" has no internetGateway route; add one (e.g. 0.0.0.0/0 via internetGateway) first"
    );
}

#[test]
fn nat_03_an_attachment_of_an_address_outside_every_pool_is_refused() {
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "far-eip", "app.eth0"),
        &snap(),
    ));
    assert_eq!(
        m,
        "spec.elasticIPRef.name: ElasticIP \"far-eip\" has address 203.0.113.9, outside every pool of ExternalNetwork \"ext\" (lan); give it an address of those pools"
    );
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "nope", "app.eth0"),
        &snap(),
    ));
    assert!(
        m.starts_with("spec.elasticIPRef.name: no ElasticIP \"nope\""),
        "{m}"
    );
}

#[test]
fn nat_03_a_second_attachment_of_one_address_or_one_nic_is_refused() {
    let mut s = snap();
    s.elastic_ip_attachments
        .push(attach("first", "web-eip", "app.eth0"));
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("second", "web-eip", "other.eth0"),
        &s,
    ));
    assert!(
        m.starts_with("spec.elasticIPRef.name: ") && m.contains("ElasticIPAttachment \"first\""),
        "{m}"
    );
    s.elastic_ips[1].spec.requested_ip = Some("192.0.2.11".into());
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("second", "far-eip", "app.eth0"),
        &s,
    ));
    assert!(
        m.starts_with("spec.targetRef.networkInterfaceName: ") && m.contains("\"first\""),
        "{m}"
    );
}

#[test]
fn nat_03_removing_the_internet_gateway_route_an_attachment_uses_is_refused_naming_it() {
    use crate::admission::validate::validate_route_table_update;
    let mut s = snap();
    s.elastic_ip_attachments
        .push(attach("nat", "web-eip", "app.eth0"));
    let old = s.route_tables[0].clone();
    let mut new = old.clone();
    new.spec.routes.clear();
    let m = msg(validate_route_table_update(&old, &new, &s));
    assert_eq!(
        m,
        "spec.routes: ElasticIPAttachments shop/nat go out by this table's internetGateway route; delete them first"
    );
    // Another route changing beside it goes through; so does the removal once no
    // attachment uses the table.
    let mut more = old.clone();
    more.spec.routes.push(Route {
        dst: "192.168.0.0/16".into(),
        via: Via {
            type_: "internetGateway".into(),
            ..Default::default()
        },
    });
    assert!(validate_route_table_update(&old, &more, &s).is_ok());
    s.elastic_ip_attachments.clear();
    assert!(validate_route_table_update(&old, &new, &s).is_ok());
}

#[test]
fn nat_03_an_attachments_fields_are_immutable() {
    let old = attach("nat", "web-eip", "app.eth0");
    let mut new = old.clone();
    new.spec.target_ref.network_interface_name = "other.eth0".into();
    assert!(
        msg(validate_elastic_ip_attachment_update(&old, &new)).starts_with("spec: is immutable")
    );
    let mut labelled = old.clone();
    labelled.metadata.labels = Some([("a".to_owned(), "b".to_owned())].into());
    assert!(validate_elastic_ip_attachment_update(&old, &labelled).is_ok());
}

#[test]
fn eip_02_eip_22_the_webhook_refuses_each_side_naming_the_other_holder() {
    // An attachment of an ElasticIP a NIC holds (its status says so).
    let mut s = snap();
    s.elastic_ips[0].status.as_mut().unwrap().attachment = Some(Attachment {
        kind: "NetworkInterface".into(),
        name: "holder.eth0".into(),
    });
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "web-eip", "app.eth0"),
        &s,
    ));
    assert!(
        m.contains("held directly by NetworkInterface \"holder.eth0\""),
        "{m}"
    );
    // The same before the status is written: a NIC names it.
    let mut s = snap();
    s.interfaces.push(nic("early.eth0", None, Some("web-eip")));
    let m = msg(validate_elastic_ip_attachment_create(
        &attach("nat", "web-eip", "app.eth0"),
        &s,
    ));
    assert!(m.contains("NetworkInterface \"early.eth0\""), "{m}");
    // A Pod naming an attached ElasticIP, before the attachment's status too.
    let mut s = snap();
    s.elastic_ip_attachments
        .push(attach("nat", "web-eip", "app.eth0"));
    let pod = PodRecord {
        namespace: "shop".into(),
        name: "web".into(),
        annotations: [(
            "juneau.loutres.me/elastic-ip".to_owned(),
            "web-eip".to_owned(),
        )]
        .into(),
        ..Default::default()
    };
    let m = msg(validate_pod_elastic_ips(&pod, &s));
    assert!(m.contains("ElasticIPAttachment \"nat\""), "{m}");
}
