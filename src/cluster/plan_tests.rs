//! The rules every backend writes a pass by, one at a time, on small worlds.
use super::*;
use crate::api::{
    ARPAdvertisement, ElasticIP, L2Network, RouteTable,
    arpadvertisement::ARPAdvertisementSpec,
    elasticip::ElasticIPSpec,
    l2network::L2NetworkSpec,
    routetable::{RouteTableSpec, Via},
    subnet::SubnetSpec,
    vpc::VpcSpec,
};
use crate::cluster::apply_to;

fn l2(name: &str) -> L2Network {
    L2Network::new(
        name,
        L2NetworkSpec {
            vpc: "t".into(),
            ..Default::default()
        },
    )
}

fn status(vni: u32) -> L2NetworkStatus {
    L2NetworkStatus {
        vni,
        ..Default::default()
    }
}

fn no_admission(_: &Subnet, _: &World) -> Result<(), String> {
    Ok(())
}

#[test]
fn l2_22_a_segment_the_pass_has_no_status_for_keeps_its_vni_and_a_status_is_written_where_it_differs()
 {
    let mut w = World::default();
    w.objects.l2networks = vec![l2("same"), l2("new"), l2("later")];
    w.objects.l2networks[0].status = Some(status(2));
    w.objects.l2networks[2].status = Some(status(9));
    let mut d = Desired::default();
    d.l2_status.insert("same".into(), status(2));
    d.l2_status.insert("new".into(), status(3));
    // "later" was created after the pass read the cluster: no status for it.
    let writes = plan(&w, &d);
    assert_eq!(
        writes,
        vec![Write::L2NetworkStatus("new".into(), status(3))]
    );
    assert!(apply_to(&mut w, &writes, &no_admission));
    assert_eq!(w.objects.l2networks[1].status, Some(status(3)));
    // Cleared, its VNI 9 would look free to the next pass while the Nodes still
    // forward by it: two segments on one VNI (L2-22).
    assert_eq!(
        w.objects.l2networks[2].status,
        Some(status(9)),
        "left alone"
    );
    assert!(plan(&w, &d).is_empty(), "a fixed point");
}

#[test]
fn l2_05_the_default_subnet_is_made_once_its_vpc_is_there() {
    let mut w = World::default();
    let d = Desired {
        default_vpc: Some(crate::api::Vpc::new(DEFAULT_VPC, VpcSpec::default())),
        default_subnet: Some(Subnet::new(
            DEFAULT_VPC,
            SubnetSpec {
                vpc: DEFAULT_VPC.into(),
                cidr: "10.16.0.0/16".into(),
                network_acl: None,
            },
        )),
        ..Default::default()
    };
    let first = plan(&w, &d);
    assert!(
        matches!(first.as_slice(), [Write::CreateVpc(_)]),
        "{first:?}"
    );
    apply_to(&mut w, &first, &no_admission);
    let second = plan(&w, &d);
    assert!(
        matches!(second.as_slice(), [Write::CreateSubnet(_)]),
        "{second:?}"
    );
    // A store's admission that refuses it: nothing is made, nothing half-applied.
    let refuse = |_: &Subnet, _: &World| Err("overlaps".to_owned());
    assert!(!apply_to(&mut w, &second, &refuse));
    assert!(w.objects.subnet(DEFAULT_VPC).is_none());
    assert!(apply_to(&mut w, &second, &no_admission));
    assert!(plan(&w, &d).is_empty());
}

#[test]
fn l2_14_only_the_routes_of_a_table_that_still_exists_are_written() {
    let table = |name: &str, dst: &str| {
        RouteTable::new(
            name,
            RouteTableSpec {
                vpc: "t".into(),
                routes: vec![Route {
                    dst: dst.into(),
                    via: Via {
                        type_: "natGateway".into(),
                        nat_gateway: Some("out".into()),
                        ..Default::default()
                    },
                }],
            },
        )
    };
    let mut w = World::default();
    let mut have = table("main", "10.0.0.0/8");
    have.metadata.labels = Some([("owner".to_owned(), "team".to_owned())].into());
    w.objects.route_tables = vec![have];
    let d = Desired {
        route_tables: vec![table("main", "0.0.0.0/0"), table("deleted", "0.0.0.0/0")],
        ..Default::default()
    };
    let writes = plan(&w, &d);
    assert_eq!(writes.len(), 1, "{writes:?}");
    apply_to(&mut w, &writes, &no_admission);
    assert_eq!(
        w.objects.route_tables.len(),
        1,
        "a deleted table stays deleted"
    );
    let t = &w.objects.route_tables[0];
    assert_eq!(t.spec.routes[0].dst, "0.0.0.0/0");
    assert!(
        t.metadata.labels.is_some(),
        "the rest of the table is its owner's"
    );
}

#[test]
fn eip_11_owned_advertisements_follow_the_pass_and_others_are_left_alone() {
    let ad = |name: &str, node: &str| {
        ARPAdvertisement::new(
            name,
            ARPAdvertisementSpec {
                external_network: "ext".into(),
                address: "192.0.2.10".parse().ok(),
                node_name: node.into(),
            },
        )
    };
    let mut w = World::default();
    w.objects.arp_advertisements = vec![
        ad("eip-default-web", "n1"),
        ad("ena-ext--n1", "n1"),
        ad("by-hand", "n2"),
    ];
    let d = Desired {
        arp_advertisements: vec![ad("eip-default-web", "n2")],
        ..Default::default()
    };
    let writes = plan(&w, &d);
    assert_eq!(
        writes,
        vec![
            Write::Advertisement(ad("eip-default-web", "n2")),
            Write::DeleteAdvertisement("ena-ext--n1".into()),
        ]
    );
    apply_to(&mut w, &writes, &no_admission);
    let names: Vec<(String, String)> = w
        .objects
        .arp_advertisements
        .iter()
        .map(|a| (a.metadata.name.clone().unwrap(), a.spec.node_name.clone()))
        .collect();
    assert_eq!(
        names,
        [
            ("eip-default-web".into(), "n2".into()),
            ("by-hand".into(), "n2".into())
        ]
    );
}

#[test]
fn eip_19_the_finalizer_list_is_written_first_from_the_version_read() {
    let mut e = ElasticIP::new("web", ElasticIPSpec::default());
    e.metadata.namespace = Some("shop".into());
    e.metadata.resource_version = Some("7".into());
    let mut w = World::default();
    w.objects.elastic_ips = vec![e];
    let mut d = Desired {
        eip_finalize: vec!["shop/web".into()],
        ..Default::default()
    };
    d.elastic_ip_status.insert(
        "shop/web".into(),
        ElasticIPStatus {
            phase: "Available".into(),
            ..Default::default()
        },
    );
    let writes = plan(&w, &d);
    assert_eq!(
        writes[0],
        Write::Finalizers {
            eip: ("shop".into(), "web".into()),
            list: vec![FINALIZER.into()],
            resource_version: Some("7".into()),
        }
    );
    assert!(matches!(writes[1], Write::ElasticIpStatus(..)));
    // One let go is gone with its status: no status write for it.
    let released = Desired {
        eip_release: vec!["shop/web".into()],
        ..d
    };
    assert!(
        !plan(&w, &released)
            .iter()
            .any(|w| matches!(w, Write::ElasticIpStatus(..)))
    );
}

#[test]
fn mx_01_nics_are_written_by_spec_and_status_and_unwanted_ones_go() {
    let nic = |name: &str, phase: &str| {
        let mut n: NetworkInterface = serde_json::from_value(serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "NetworkInterface",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"podRef": {"name": "p"}, "interface": "eth0", "nodeName": "n1"},
            "status": {"phase": phase}}))
        .unwrap();
        n.metadata.namespace = Some("default".into());
        n
    };
    let mut w = World::default();
    w.objects.interfaces = vec![nic("a.eth0", "Pending"), nic("gone.eth0", "Ready")];
    let d = Desired {
        interfaces: vec![nic("a.eth0", "Ready"), nic("b.eth0", "Pending")],
        ..Default::default()
    };
    let writes = plan(&w, &d);
    assert_eq!(
        writes,
        vec![
            Write::Interface {
                nic: nic("a.eth0", "Ready"),
                spec: false,
                status: true
            },
            Write::Interface {
                nic: nic("b.eth0", "Pending"),
                spec: true,
                status: true
            },
            Write::DeleteInterface(("default".into(), "gone.eth0".into())),
        ]
    );
    apply_to(&mut w, &writes, &no_admission);
    assert_eq!(w.objects.interfaces, d.interfaces);
    assert!(plan(&w, &d).is_empty());
}
