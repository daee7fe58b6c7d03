//! EIP-20 on a standalone cluster: an ElasticIP named by two Pods of one workload (the
//! same allocation identity, as a VM's launcher Pods) is carried by one NIC; the other
//! Pod waits in ContainerCreating (its ADD says why) and takes the address as soon as
//! the holder is deleted, on another Node, and the external client's flow comes back,
//! first through the old Node (the router's ARP cache still points there: the packet is
//! carried to the new holder) and then by the new Node's answers.
use std::time::{Duration, Instant};

use juneau::{
    scenario::{Layer, steps},
    standalone::{Options, PodDef, Run, Scenario},
};

const EIP: &str = "10.99.0.110";

fn scenario() -> Scenario {
    let obj = |kind: &str, name: &str, spec: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "juneau.loutres.me/v1alpha1",
            "kind": kind,
            "metadata": {"name": name, "namespace": "default"},
            "spec": spec,
        })
    };
    Scenario {
        description: "ElasticIP handover".into(),
        layer: Layer::Stack,
        proves: vec!["EIP-20".into()],
        segments: Default::default(),
        steps: Vec::new(),
        nodes: vec!["ho-a".into(), "ho-b".into()],
        objects: vec![
            obj(
                "AddressPool",
                "ho-lan",
                serde_json::json!({"advertiseMode": "arp", "addresses": ["10.99.0.110-10.99.0.119"]}),
            ),
            obj(
                "ExternalNetwork",
                "ho-ext",
                serde_json::json!({"type": "arp", "addressPools": ["ho-lan"]}),
            ),
            obj(
                "ElasticIP",
                "vm-eip",
                serde_json::json!({"externalNetwork": "ho-ext"}),
            ),
        ],
        pods: Vec::new(),
        outside: true,
    }
}

fn launcher(name: &str, node: &str) -> PodDef {
    PodDef {
        name: name.into(),
        namespace: "default".into(),
        node: node.into(),
        annotations: [
            (
                "juneau.loutres.me/elastic-ip".to_owned(),
                "vm-eip".to_owned(),
            ),
            (
                "juneau.loutres.me/allocation-identity".to_owned(),
                "vmi.vm".to_owned(),
            ),
        ]
        .into(),
        segment: None,
        addresses: Vec::new(),
        bridge_hosts: Vec::new(),
    }
}

fn client_ping(run: &Run) -> Result<String, String> {
    steps::ping_all(run, juneau::scenario::CLIENT, EIP, 3)
}

#[test]
fn eip_20_the_waiting_nic_takes_the_elastic_ip_over_when_the_holder_goes() {
    let mut run = Run::start(&scenario(), &Options::default(), &mut |_| {}).expect("start");
    run.add_pod(&launcher("launcher-1", "ho-a"))
        .expect("the first launcher");
    client_ping(&run).expect("the client reaches the ElasticIP on ho-a");
    // The second launcher waits: its ADD gives up after the daemon's wait, with the
    // reason, and its NIC names the holder.
    let waited = run
        .add_pod(&launcher("launcher-2", "ho-b"))
        .expect_err("the second launcher's ADD waits for the ElasticIP")
        .to_string();
    assert!(waited.contains("not allocated yet"), "{waited}");
    let nic = run.store.interfaces_of("default", "launcher-2");
    let st = nic[0].status.clone().unwrap();
    assert_eq!(st.phase, "Pending");
    assert_eq!(st.conditions[0].reason, "WaitingForElasticIP");
    assert!(
        st.conditions[0].message.contains("launcher-1.eth0"),
        "{:?}",
        st.conditions
    );
    // The holder goes: the next ADD of the waiting Pod gets the address at once.
    run.delete_pod("launcher-1").expect("delete the holder");
    let t = Instant::now();
    let added = loop {
        match run.retry_add("launcher-2") {
            Ok(out) => break out,
            Err(e) if t.elapsed() < Duration::from_secs(30) => {
                eprintln!("retry: {e}");
            }
            Err(e) => panic!("the waiting launcher never got the ElasticIP: {e}"),
        }
    };
    assert!(added.contains(&format!("{EIP}/32")), "{added}");
    eprintln!(
        "handover: ADD done {:?} after the holder's DEL",
        t.elapsed()
    );
    // The flow comes back (the router's cache may still name ho-a: carried from there).
    let t = Instant::now();
    while let Err(e) = client_ping(&run) {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the client never got back: {e}"
        );
    }
    // Only ho-b answers ARP for it now.
    let upstream = juneau::scenario::UPSTREAM;
    steps::exec(&run, upstream, &["ip", "neigh", "flush", "dev", "ul0"]).unwrap();
    client_ping(&run).expect("after the router asked again");
    let neigh = steps::exec(&run, upstream, &["ip", "neigh", "show", EIP]).unwrap();
    assert!(neigh.contains("lladdr 02:00:00:99:00:02"), "{neigh}");
}
