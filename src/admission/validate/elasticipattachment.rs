//! ElasticIPAttachment admission (NAT-03): the ElasticIP and the NIC it maps 1:1 are
//! named once and for good. The ElasticIP exists in the attachment's namespace, has an
//! address inside its network's pools, and serves no one else: no other attachment
//! and no NIC holding it directly (EIP-02, EIP-22; a Pod naming an attached one is
//! refused by the Pod's own rule). The NIC, when it exists already, is a Subnet NIC of
//! a tenant Vpc whose RouteTable goes out by the internet gateway, and has no other
//! attachment. A NIC that does not exist yet is allowed (its Pod may come later): the
//! controller holds it to the same rules then, in the attachment's status.
use std::net::Ipv4Addr;

use super::{Snapshot, Verdict, reject};
use crate::{
    api::{DEFAULT_VPC, ElasticIPAttachment},
    controller::elasticip::pool_ranges,
};

const EIP_FIELD: &str = "spec.elasticIPRef.name";
const NIC_FIELD: &str = "spec.targetRef.networkInterfaceName";

fn ns(a: &ElasticIPAttachment) -> &str {
    a.metadata.namespace.as_deref().unwrap_or("default")
}

pub fn validate_elastic_ip_attachment_create(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    elastic_ip(a, snap)?;
    target(a, snap)
}

/// Both names are the attachment's identity: the datapath and the ARP answers follow
/// them.
pub fn validate_elastic_ip_attachment_update(
    old: &ElasticIPAttachment,
    new: &ElasticIPAttachment,
) -> Verdict {
    if old.spec != new.spec {
        return Err(reject(
            "spec",
            "is immutable (an attachment maps one ElasticIP onto one NIC); delete this attachment and create another",
        ));
    }
    Ok(())
}

fn elastic_ip(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    let name = &a.spec.elastic_ip_ref.name;
    if name.is_empty() {
        return Err(reject(EIP_FIELD, "required: the ElasticIP to map 1:1"));
    }
    let Some(e) = snap.elastic_ip(ns(a), name) else {
        return Err(reject(
            EIP_FIELD,
            format!(
                "no ElasticIP {name:?} in namespace {:?}; create it first (an attachment names one of its own namespace)",
                ns(a)
            ),
        ));
    };
    let address = e
        .status
        .as_ref()
        .map(|s| s.address.clone())
        .filter(|s| !s.is_empty())
        .or_else(|| e.spec.requested_ip.clone().filter(|r| !r.is_empty()));
    if let (Some(addr), Some(net)) = (address, snap.external_network(&e.spec.external_network)) {
        let ranges = pool_ranges(snap, net);
        let inside = addr
            .parse::<Ipv4Addr>()
            .is_ok_and(|ip| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&ip)));
        if !inside {
            return Err(reject(
                EIP_FIELD,
                format!(
                    "ElasticIP {name:?} has address {addr}, outside every pool of ExternalNetwork {:?} ({}); give it an address of those pools",
                    e.spec.external_network,
                    net.spec.address_pools.join(", ")
                ),
            ));
        }
    }
    let same_ns = |m: &kube::api::ObjectMeta| m.namespace.as_deref().unwrap_or("default") == ns(a);
    if let Some(other) = snap.elastic_ip_attachments.iter().find(|o| {
        same_ns(&o.metadata)
            && o.metadata.name != a.metadata.name
            && o.spec.elastic_ip_ref.name == *name
    }) {
        return Err(reject(
            EIP_FIELD,
            format!(
                "ElasticIP {name:?} is already attached by ElasticIPAttachment {:?}; one ElasticIP maps onto one NIC",
                other.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    // Held directly: by its status, or by a NIC that names it before the status says so.
    let by_status = e
        .status
        .as_ref()
        .and_then(|s| s.attachment.as_ref())
        .filter(|h| h.kind == "NetworkInterface")
        .map(|h| h.name.clone());
    let by_nic = snap
        .interfaces
        .iter()
        .find(|n| same_ns(&n.metadata) && n.spec.elastic_ip.as_deref() == Some(name.as_str()))
        .and_then(|n| n.metadata.name.clone());
    if let Some(nic) = by_status.or(by_nic) {
        return Err(reject(
            EIP_FIELD,
            format!(
                "ElasticIP {name:?} is held directly by NetworkInterface {nic:?}: one ElasticIP serves NAT or a NIC, not both; delete that Pod first"
            ),
        ));
    }
    Ok(())
}

fn target(a: &ElasticIPAttachment, snap: &Snapshot) -> Verdict {
    let wanted = &a.spec.target_ref.network_interface_name;
    if wanted.is_empty() {
        return Err(reject(
            NIC_FIELD,
            "required: the Subnet NIC (<pod>.<interface>) the ElasticIP maps onto",
        ));
    }
    let same_ns = |m: &kube::api::ObjectMeta| m.namespace.as_deref().unwrap_or("default") == ns(a);
    if let Some(other) = snap.elastic_ip_attachments.iter().find(|o| {
        same_ns(&o.metadata)
            && o.metadata.name != a.metadata.name
            && o.spec.target_ref.network_interface_name == *wanted
    }) {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} already has ElasticIPAttachment {:?}; a NIC maps one ElasticIP",
                other.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    let Some(nic) = snap
        .interfaces
        .iter()
        .find(|n| same_ns(&n.metadata) && n.metadata.name.as_deref() == Some(wanted.as_str()))
    else {
        return Ok(());
    };
    let Some(subnet) = nic
        .spec
        .subnet
        .as_deref()
        .filter(|_| nic.spec.elastic_ip.is_none())
        .and_then(|s| snap.subnet(s))
    else {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is not a NIC of a Subnet (an L2Network's, or one holding an ElasticIP itself, cannot be mapped 1:1); attach to a Subnet NIC"
            ),
        ));
    };
    let vpc = &subnet.spec.vpc;
    if vpc == DEFAULT_VPC {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is on Subnet {:?} of the default Vpc, which has no internet gateway; attach to a NIC of a tenant Vpc's Subnet",
                subnet.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    let table = snap.table_of(vpc, None);
    let goes_out = snap.route_tables.iter().any(|rt| {
        rt.metadata.name.as_deref() == Some(table.as_str())
            && rt
                .spec
                .routes
                .iter()
                .any(|r| r.via.type_ == "internetGateway")
    });
    if !goes_out {
        return Err(reject(
            NIC_FIELD,
            format!(
                "NetworkInterface {wanted:?} is on Subnet {:?}, whose RouteTable {table:?} has no internetGateway route; add one (e.g. 0.0.0.0/0 via internetGateway) first",
                subnet.metadata.name.as_deref().unwrap_or("")
            ),
        ));
    }
    Ok(())
}

/// The attachments whose NIC (made already) is on a Subnet that routes by RouteTable
/// `table`: they go out by its `internetGateway` route.
pub fn attachments_routed_by(table: &str, snap: &Snapshot) -> Vec<String> {
    snap.elastic_ip_attachments
        .iter()
        .filter(|a| {
            let wanted = &a.spec.target_ref.network_interface_name;
            snap.interfaces
                .iter()
                .find(|n| {
                    n.metadata.namespace.as_deref().unwrap_or("default") == ns(a)
                        && n.metadata.name.as_deref() == Some(wanted.as_str())
                })
                .and_then(|n| snap.subnet(n.spec.subnet.as_deref()?))
                .is_some_and(|s| snap.table_of(&s.spec.vpc, None) == table)
        })
        .map(|a| format!("{}/{}", ns(a), a.metadata.name.as_deref().unwrap_or("")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        admission::validate::validate_pod_elastic_ips,
        api::{
            AddressPool, ElasticIP, ExternalNetwork, NetworkInterface, PodRecord, RouteTable,
            Subnet, Vpc,
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
                    address: "192.0.2.10".into(),
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
            validate_elastic_ip_attachment_create(&attach("nat", "web-eip", "app.eth0"), &s)
                .is_ok()
        );
        assert!(
            validate_elastic_ip_attachment_create(&attach("nat", "web-eip", "later.eth0"), &s)
                .is_ok(),
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
            m.starts_with("spec.elasticIPRef.name: ")
                && m.contains("ElasticIPAttachment \"first\""),
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
            msg(validate_elastic_ip_attachment_update(&old, &new))
                .starts_with("spec: is immutable")
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
}
