//! The plugin's edges (MX-01): the socket's mode, DEL and GC of what is unknown or
//! gone, CHECK after a change, and a hundred calls at once.
use super::*;

#[test]
fn mx_01_the_cni_socket_is_0600_whatever_the_umask_and_only_root_is_served() {
    use std::os::unix::{fs::PermissionsExt, process::CommandExt};
    // SAFETY: umask only changes this process's file creation mask.
    let old = unsafe { libc::umask(0) };
    let b = bed(&[]);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let mode = std::fs::metadata(&b.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the socket must not inherit umask 0");
    let as_nobody = || {
        let mut child = Command::new(juneau::standalone::sibling_binary("juneau-cni"))
            .env_clear()
            .env("CNI_COMMAND", "STATUS")
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut conf = conf();
        conf["socket"] = serde_json::json!(b.socket);
        child
            .stdin
            .take()
            .unwrap()
            .write_all(conf.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    // Root is served.
    let env = [("CNI_COMMAND", "STATUS")];
    assert!(cni(&b.socket, &env, conf()).0, "root may ask for STATUS");
    // Another user: the file mode keeps it out...
    let (ok, out) = as_nobody();
    assert!(
        !ok && out.contains("cannot reach the node daemon") && out.contains("Permission denied"),
        "{out}"
    );
    // ...and were the file opened up, the daemon itself refuses it (SO_PEERCRED).
    std::fs::set_permissions(&b.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let (ok, out) = as_nobody();
    assert!(!ok, "{out}");
    assert!(
        out.contains("uid 65534") && out.contains("only root may use this socket"),
        "{out}"
    );
}

#[test]
fn mx_01_del_of_an_unknown_container_and_gc_with_an_empty_list_answer_as_the_spec_says() {
    let bed = bed(&[("one", r#"[{"interface":"eth0","l2Network":"routed"}]"#)]);
    let pod = Owned::create(&uniq("pod")).unwrap();
    // DEL of a container this Node never saw: success, nothing changes.
    let (ok, v) = run(&bed, "DEL", "neverseen0001", &pod, "ghost");
    assert!(ok, "DEL of an unknown container: {v}");
    assert!(run(&bed, "ADD", "gc00000001", &pod, "one").0);
    assert_eq!(owned_links(&bed).len(), 1);
    // GC with an empty valid list: every attachment is stale and goes.
    let mut gc = conf();
    gc["cni.dev/valid-attachments"] = serde_json::json!([]);
    let (ok, v) = cni(&bed.socket, &[("CNI_COMMAND", "GC")], gc);
    assert!(ok, "GC failed: {v}");
    assert!(owned_links(&bed).is_empty(), "{:?}", owned_links(&bed));
    assert!(bed.store.read().0.endpoints.is_empty(), "GC left endpoints");
    assert!(bed._agent.dataplane.lock().unwrap().ports().is_empty());
}

#[test]
fn l2_21_mx_01_check_fails_when_a_veth_mtu_was_changed_and_passes_once_restored() {
    let bed = bed(&[("mtu", r#"[{"interface":"eth0","l2Network":"routed"}]"#)]);
    let pod = Owned::create(&uniq("pod")).unwrap();
    let cid = "mtu0000000001";
    assert!(run(&bed, "ADD", cid, &pod, "mtu").0);
    assert!(run(&bed, "CHECK", cid, &pod, "mtu").0);
    pod.exec(&["ip", "link", "set", "eth0", "mtu", "1300"])
        .unwrap();
    let (ok, v) = run(&bed, "CHECK", cid, &pod, "mtu");
    assert!(!ok);
    assert_eq!(v["code"], 5, "{v}");
    assert!(
        v["msg"]
            .as_str()
            .unwrap()
            .contains("eth0 has MTU 1300, the segment's is 1450"),
        "{v}"
    );
    pod.exec(&["ip", "link", "set", "eth0", "mtu", "1450"])
        .unwrap();
    let host = veth::host_name(cid, "eth0");
    bed.node
        .exec(&["ip", "link", "set", &host, "mtu", "1500"])
        .unwrap();
    let (ok, v) = run(&bed, "CHECK", cid, &pod, "mtu");
    assert!(
        !ok && v["msg"]
            .as_str()
            .unwrap()
            .contains(&format!("{host} has MTU 1500")),
        "{v}"
    );
    bed.node
        .exec(&["ip", "link", "set", &host, "mtu", "1450"])
        .unwrap();
    assert!(run(&bed, "CHECK", cid, &pod, "mtu").0, "restored");
}

#[test]
fn mx_01_del_after_the_pod_namespace_is_gone_removes_the_port_and_the_endpoint() {
    let bed = bed(&[("gone", r#"[{"interface":"eth0","l2Network":"routed"}]"#)]);
    let pod = Owned::create(&uniq("pod")).unwrap();
    let path = pod.path().to_str().unwrap().to_owned();
    let cid = "gone000000001";
    assert!(run(&bed, "ADD", cid, &pod, "gone").0);
    assert_eq!(bed._agent.dataplane.lock().unwrap().ports().len(), 1);
    // The runtime tore the sandbox down first: the veth pair went with it.
    drop(pod);
    let env = pod_env("DEL", cid, &path, "gone");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (ok, v) = cni(&bed.socket, &env, conf());
    assert!(ok, "DEL without a namespace must succeed: {v}");
    assert!(
        bed._agent.dataplane.lock().unwrap().ports().is_empty(),
        "the datapath kept a port for a veth that is gone"
    );
    assert!(
        bed.store.read().0.endpoints.is_empty(),
        "the endpoint stayed"
    );
}

#[test]
fn mx_01_a_hundred_concurrent_adds_and_dels_each_get_their_own_address_and_leave_nothing() {
    const N: usize = 100;
    let names: Vec<String> = (0..N).map(|i| format!("c{i:03}")).collect();
    let pods: Vec<(&str, &str)> = names
        .iter()
        .map(|n| (n.as_str(), r#"[{"interface":"eth0","l2Network":"routed"}]"#))
        .collect();
    let bed = bed(&pods);
    let netns: Vec<Owned> = (0..N)
        .map(|_| Owned::create(&uniq("cc")).unwrap())
        .collect();
    // Every plugin process at once, as a kubelet starting a hundred Pods would.
    let results: Vec<(bool, serde_json::Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (bed, ns, name) = (&bed, &netns[i], &names[i]);
                s.spawn(move || run(bed, "ADD", &format!("conc{i:06}"), ns, name))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut addresses = std::collections::BTreeSet::new();
    for (i, (ok, v)) in results.iter().enumerate() {
        assert!(ok, "ADD {i} failed: {v}");
        let addr = v["ips"][0]["address"].as_str().unwrap().to_owned();
        assert!(addresses.insert(addr.clone()), "{addr} handed out twice");
        // The address is really on the Pod's eth0.
        let have = netns[i]
            .exec(&["ip", "-4", "-o", "addr", "show", "dev", "eth0"])
            .unwrap();
        assert!(have.contains(&format!("inet {addr} ")), "{i}: {have}");
    }
    assert_eq!(owned_links(&bed).len(), N);
    assert_eq!(bed._agent.dataplane.lock().unwrap().ports().len(), N);
    assert_eq!(bed.store.read().0.endpoints.len(), N);
    let dels: Vec<(bool, serde_json::Value)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..N)
            .map(|i| {
                let (bed, ns, name) = (&bed, &netns[i], &names[i]);
                s.spawn(move || run(bed, "DEL", &format!("conc{i:06}"), ns, name))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, (ok, v)) in dels.iter().enumerate() {
        assert!(ok, "DEL {i} failed: {v}");
    }
    assert!(owned_links(&bed).is_empty(), "{:?}", owned_links(&bed));
    assert!(bed._agent.dataplane.lock().unwrap().ports().is_empty());
    assert!(bed.store.read().0.endpoints.is_empty());
    // The daemon still serves.
    assert!(cni(&bed.socket, &[("CNI_COMMAND", "STATUS")], conf()).0);
}
