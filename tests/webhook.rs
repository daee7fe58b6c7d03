//! Real AdmissionReview requests over HTTPS to the running webhook (curl as the
//! client, the certificate pinned), checking verdicts and messages.
use std::{process::Command, sync::Arc};

use juneau::{
    store::{Object, Store},
    webhook::{self, Source},
};

fn yaml(s: &str) -> Object {
    Object::from_value(serde_yaml_ng::from_str(s).unwrap()).unwrap()
}

fn review(
    kind: &str,
    op: &str,
    name: &str,
    object: serde_json::Value,
    old: serde_json::Value,
) -> serde_json::Value {
    let (group, version) = if kind == "Pod" {
        ("", "v1")
    } else {
        ("juneau.loutres.me", "v1alpha1")
    };
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("uid-{name}-{op}"),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": format!("{}s", kind.to_lowercase())},
            "name": name,
            "namespace": if kind == "Pod" { serde_json::json!("team") } else { serde_json::Value::Null },
            "operation": op,
            "userInfo": {"username": "tester"},
            "object": object,
            "oldObject": old,
            "dryRun": false
        }
    })
}

fn l2(name: &str, spec: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "L2Network", "metadata": {"name": name}, "spec": spec})
}

#[test]
fn l2_04_l2_07_l2_19_l2_32_eip_04_eip_06_eip_17_eip_24_admission_reviews_over_https() {
    let store = Store::new();
    store
        .create(yaml(
            "kind: Vpc\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: t}\nspec: {}",
        ))
        .unwrap();
    store.create(yaml("kind: L2Network\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: pure}\nspec: {vpc: t}")).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = std::env::temp_dir().join(format!("jn-webhook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = axum_server::Handle::new();
    let source: Source = Arc::new(store.clone());
    rt.spawn(webhook::serve(
        "127.0.0.1:0".parse().unwrap(),
        cert.cert.pem().into_bytes(),
        cert.key_pair.serialize_pem().into_bytes(),
        source,
        webhook::Mutation::default(),
        handle.clone(),
    ));
    let port = rt
        .block_on(handle.listening())
        .expect("webhook listening")
        .port();
    let post_to = |path: &str, body: serde_json::Value| -> serde_json::Value {
        let out = Command::new("curl")
            .args([
                "--silent",
                "--show-error",
                "--fail",
                "--cacert",
                ca.to_str().unwrap(),
            ])
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .args([
                "-H",
                "Content-Type: application/json",
                "--data-binary",
                &body.to_string(),
            ])
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .expect("curl is installed by cargo xtask bootstrap");
        assert!(
            out.status.success(),
            "curl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let post = |body: serde_json::Value| post_to("/validate", body);
    let verdict = |v: &serde_json::Value| {
        (
            v["response"]["allowed"].as_bool().unwrap(),
            v["response"]["status"]["message"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        )
    };

    // L2-07: the message suggests the normalized CIDR.
    let r = post(review(
        "L2Network",
        "CREATE",
        "bad",
        l2(
            "bad",
            serde_json::json!({"vpc": "t", "cidr": "10.0.1.5/24"}),
        ),
        serde_json::Value::Null,
    ));
    assert_eq!(r["response"]["uid"], "uid-bad-CREATE");
    assert_eq!(
        verdict(&r),
        (
            false,
            "spec.cidr: 10.0.1.5/24 has host bits set; use 10.0.1.0/24".to_owned()
        )
    );
    let r = post(review(
        "L2Network",
        "CREATE",
        "good",
        l2(
            "good",
            serde_json::json!({"vpc": "t", "cidr": "10.0.1.0/24"}),
        ),
        serde_json::Value::Null,
    ));
    assert_eq!(verdict(&r), (true, String::new()));
    // L2-04: vpc is immutable.
    let old = l2("pure", serde_json::json!({"vpc": "t"}));
    let new = l2("pure", serde_json::json!({"vpc": "other"}));
    let r = post(review("L2Network", "UPDATE", "pure", new, old));
    assert_eq!(
        verdict(&r),
        (
            false,
            "spec.vpc: is immutable; create a new L2Network in the other Vpc instead".to_owned()
        )
    );
    // L2-19: SecurityGroups on a gateway-less segment.
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "team", "annotations": {
        "juneau.loutres.me/networks": "[{\"interface\":\"eth1\",\"l2Network\":\"pure\",\"securityGroups\":[\"sg\"]}]"}}, "spec": {"containers": []}});
    let r = post(review("Pod", "CREATE", "app", pod, serde_json::Value::Null));
    let (allowed, msg) = verdict(&r);
    assert!(
        !allowed
            && msg.contains("has no gateway, and SecurityGroups act only on traffic crossing it"),
        "{msg}"
    );
    // L2-32: the Vpc still has L2Networks.
    let r = post(review(
        "Vpc",
        "DELETE",
        "t",
        serde_json::Value::Null,
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "Vpc", "metadata": {"name": "t"}, "spec": {}}),
    ));
    assert_eq!(
        verdict(&r),
        (
            false,
            "metadata.name: Vpc \"t\" still has L2Networks \"pure\"; delete them first".to_owned()
        )
    );
    // L2-27 by the mutating half: eth0 on an L2Network gets dnsPolicy Default (a JSON
    // patch); a Pod on no L2Network, or one that opted out, is left as it is.
    let on_l2 = |extra: &str| {
        serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "dns", "namespace": "team", "annotations": {
            "juneau.loutres.me/networks": "[{\"interface\":\"eth0\",\"l2Network\":\"pure\"}]",
            "juneau.loutres.me/dns-inject-skip": extra}}, "spec": {"containers": [], "dnsPolicy": "ClusterFirst"}})
    };
    let mutate = |skip: &str| {
        post_to(
            "/mutate",
            review("Pod", "CREATE", "dns", on_l2(skip), serde_json::Value::Null),
        )
    };
    let r = mutate("false");
    assert_eq!(r["response"]["allowed"], true, "{r}");
    assert_eq!(r["response"]["patchType"], "JSONPatch", "{r}");
    // kube-rs writes the patch bytes as a JSON array (Go's decoder takes that for a
    // []byte as well as base64).
    let patch: Vec<u8> = serde_json::from_value(r["response"]["patch"].clone()).unwrap();
    let patch: serde_json::Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        serde_json::json!([{"op": "add", "path": "/spec/dnsPolicy", "value": "Default"}])
    );
    let r = mutate("true");
    assert_eq!(r["response"]["allowed"], true, "{r}");
    assert!(
        r["response"]["patch"].is_null(),
        "dns-inject-skip: no patch: {r}"
    );
    // EIP-06 and EIP-24: an eth0 ElasticIP beside subnet is refused at creation with
    // both annotations named; the same Pod updated is not judged again.
    let eip_pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pub", "namespace": "team", "annotations": {
        "juneau.loutres.me/elastic-ip": "web-eip", "juneau.loutres.me/subnet": "web"}}, "spec": {"containers": []}});
    let r = post(review(
        "Pod",
        "CREATE",
        "pub",
        eip_pod.clone(),
        serde_json::Value::Null,
    ));
    assert_eq!(
        verdict(&r),
        (
            false,
            "metadata.annotations: annotation juneau.loutres.me/elastic-ip cannot be combined with juneau.loutres.me/subnet: eth0 then holds the ElasticIP and joins no Subnet".to_owned()
        )
    );
    let r = post(review("Pod", "UPDATE", "pub", eip_pod.clone(), eip_pod));
    assert_eq!(verdict(&r), (true, String::new()), "EIP-24: creation only");
    // EIP-17: a direct eth0 gets dnsPolicy Default.
    let direct = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pub2", "namespace": "team", "annotations": {
        "juneau.loutres.me/elastic-ip": "web-eip"}}, "spec": {"containers": []}});
    let r = post_to(
        "/mutate",
        review("Pod", "CREATE", "pub2", direct, serde_json::Value::Null),
    );
    let patch: Vec<u8> = serde_json::from_value(r["response"]["patch"].clone()).unwrap();
    let patch: serde_json::Value = serde_json::from_slice(&patch).unwrap();
    assert_eq!(
        patch,
        serde_json::json!([{"op": "add", "path": "/spec/dnsPolicy", "value": "Default"}])
    );
    // EIP-04: an allocated ElasticIP keeps its network and address.
    let eip = |net: &str, requested: &str| {
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ElasticIP",
            "metadata": {"name": "web-eip", "namespace": "team"},
            "spec": {"externalNetwork": net, "requestedIP": requested},
            "status": {"address": "10.99.0.120"}})
    };
    let old = eip("ext", "10.99.0.120");
    let r = post(review(
        "ElasticIP",
        "UPDATE",
        "web-eip",
        eip("other", "10.99.0.120"),
        old.clone(),
    ));
    assert_eq!(
        verdict(&r),
        (
            false,
            "spec.externalNetwork: is immutable: the address belongs to that network's pools; create a new ElasticIP on the other ExternalNetwork instead".to_owned()
        )
    );
    let r = post(review(
        "ElasticIP",
        "UPDATE",
        "web-eip",
        eip("ext", "10.99.0.121"),
        old.clone(),
    ));
    assert_eq!(
        verdict(&r),
        (
            false,
            "spec.requestedIP: is immutable once an address is allocated (10.99.0.120); create a new ElasticIP for another address".to_owned()
        )
    );
    let r = post(review("ElasticIP", "UPDATE", "web-eip", old.clone(), old));
    assert_eq!(verdict(&r), (true, String::new()));
    // Updates that change the spec are held to the creation rules, the object itself
    // left out of what it is compared with; metadata-only updates pass.
    for obj in [
        "kind: AddressPool\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: pool}\nspec: {advertiseMode: arp, addresses: [192.0.2.1-192.0.2.9]}",
        "kind: AddressPool\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: other}\nspec: {advertiseMode: arp, addresses: [198.51.100.1-198.51.100.9]}",
        "kind: ExternalNetwork\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: ext}\nspec: {type: arp, addressPools: [pool]}",
        "kind: ExternalNetwork\napiVersion: juneau.loutres.me/v1alpha1\nmetadata: {name: ext2}\nspec: {type: arp, addressPools: [other]}",
    ] {
        store.create(yaml(obj)).unwrap();
    }
    let pool = |range: &str| {
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "AddressPool",
            "metadata": {"name": "pool"}, "spec": {"advertiseMode": "arp", "addresses": [range]}})
    };
    let pool_update = |new: &str, old: &str| {
        verdict(&post(review(
            "AddressPool",
            "UPDATE",
            "pool",
            pool(new),
            pool(old),
        )))
    };
    assert_eq!(
        pool_update("192.0.2.9-192.0.2.1", "192.0.2.1-192.0.2.9"),
        (
            false,
            "spec.addresses[0]: \"192.0.2.9-192.0.2.1\" starts after it ends: write the lower address first".to_owned()
        )
    );
    assert_eq!(
        pool_update("192.0.2.1-192.0.2.20", "192.0.2.1-192.0.2.9"),
        (true, String::new()),
        "the pool's own old range is no overlap"
    );
    let (allowed, why) = pool_update("198.51.100.5-198.51.100.20", "192.0.2.1-192.0.2.9");
    assert!(
        !allowed && why.contains("overlaps \"198.51.100.1-198.51.100.9\" of AddressPool \"other\""),
        "{why}"
    );
    // A spec left as it was passes, whatever it clashes with (labels, finalizers).
    assert_eq!(
        pool_update("198.51.100.5-198.51.100.20", "198.51.100.5-198.51.100.20"),
        (true, String::new())
    );
    let ext = |pools: &[&str]| {
        serde_json::json!({"apiVersion": "juneau.loutres.me/v1alpha1", "kind": "ExternalNetwork",
            "metadata": {"name": "ext"}, "spec": {"type": "arp", "addressPools": pools}})
    };
    let r = post(review(
        "ExternalNetwork",
        "UPDATE",
        "ext",
        ext(&["pool", "spare"]),
        ext(&["pool"]),
    ));
    assert_eq!(
        verdict(&r),
        (true, String::new()),
        "its own pool is no clash"
    );
    let r = post(review(
        "ExternalNetwork",
        "UPDATE",
        "ext",
        ext(&["pool", "other"]),
        ext(&["pool"]),
    ));
    let (allowed, why) = verdict(&r);
    assert!(
        !allowed
            && why.contains("AddressPool \"other\" already belongs to ExternalNetwork \"ext2\""),
        "{why}"
    );
    handle.shutdown();
    let _ = std::fs::remove_dir_all(dir);
}
