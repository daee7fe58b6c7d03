//! The admission webhook as the API server calls it: `juneau webhook` serving HTTPS,
//! registered by the webhook configurations of `kind/webhook.yaml` (their Service
//! reference replaced by this test's URL, their caBundle by this test's CA), and kubectl
//! refused with the seed's messages.
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/webhook.rs"]
mod webhook;

use std::time::{Duration, Instant};

use control_plane::{ControlPlane, free_port};

#[test]
fn l2_04_l2_07_l2_08_l2_10_l2_27_eip_04_bgp_01_nat_03_the_registered_webhook_refuses_with_the_seed_messages_and_rewrites_dns_policy()
 {
    let cp = ControlPlane::start();
    cp.install_crds();

    // The webhook's serving certificate, signed by a CA the API server is given.
    let dir =
        std::env::temp_dir().join(format!("juneau-wh-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    /// The folder goes however the test ends.
    struct Folder(std::path::PathBuf);
    impl Drop for Folder {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _folder = Folder(dir.clone());
    let _webhook = webhook::start(&cp, &dir, &[]);
    let vpc =
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: Vpc\nmetadata: {name: tenant-a}\nspec: {}\n";
    assert!(cp.apply(vpc).status.success());

    // Refused by the rules, with their messages word for word. The webhook's view of a
    // just-created object may lag one watch event: retry a refusal that is not the
    // expected one for a few seconds.
    let refused = |yaml: &str, message: &str| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let out = cp.kubectl_stdin(&["create", "-f", "-"], yaml);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(!out.status.success(), "accepted: {yaml}");
            if stderr.contains(message) || Instant::now() > deadline {
                assert!(
                    stderr.contains("admission webhook") && stderr.contains(message),
                    "refused otherwise: {stderr}"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    };
    let l2 = |spec: &str| {
        format!(
            "apiVersion: juneau.loutres.me/v1alpha1\nkind: L2Network\nmetadata: {{name: x}}\nspec: {spec}\n"
        )
    };
    refused(
        &l2("{vpc: tenant-a, cidr: 10.0.1.5/24}"),
        "spec.cidr: 10.0.1.5/24 has host bits set; use 10.0.1.0/24",
    );
    refused(
        &l2("{vpc: tenant-a, cidr: 10.0.0.0/16}"),
        "spec.cidr: 10.0.0.0/16 overlaps the cluster's Service CIDR 10.0.0.0/24",
    );
    refused(
        &l2("{vpc: nope}"),
        "spec.vpc: Vpc \"nope\" does not exist; create it first",
    );
    refused(
        &l2("{vpc: tenant-a, gateway: {}}"),
        "spec.gateway: requires spec.cidr: a gateway routes the segment's addresses; add spec.cidr or remove spec.gateway",
    );
    // BGP-01: the BGP kinds are judged by the same rules (and the manifests register
    // them); NAT-03: so are ElasticIPAttachments, namespaced.
    refused(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: BGPPeer\nmetadata: {name: up}\nspec: {myASN: 0, peerASN: 64512, peerAddress: 10.99.0.254}\n",
        "spec.myASN: 0 is not an AS number: use 1-4294967294",
    );
    refused(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: BGPAdvertisement\nmetadata: {name: adv}\nspec: {addressPools: []}\n",
        "spec.addressPools: list at least one AddressPool",
    );
    refused(
        "apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIPAttachment\nmetadata: {name: att, namespace: default}\nspec: {elasticIPRef: {name: nope}, targetRef: {networkInterfaceName: web.eth0}}\n",
        "spec.elasticIPRef.name: no ElasticIP \"nope\" in namespace \"default\"",
    );
    // Accepted, then a Pod on it gets dnsPolicy Default from the mutating half (L2-27).
    let out = cp.kubectl_stdin(
        &["create", "-f", "-"],
        &l2("{vpc: tenant-a, cidr: 10.70.0.0/24, gateway: {}}"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: default\n  annotations:\n    \
               juneau.loutres.me/networks: '[{\"interface\": \"eth0\", \"l2Network\": \"x\"}]'\n\
               spec:\n  dnsPolicy: ClusterFirst\n  nodeName: node-a\n  containers: [{name: c, image: busybox}]\n";
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = cp.kubectl_stdin(&["create", "-f", "-"], pod);
        if out.status.success() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Pod was refused: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    assert_eq!(
        cp.kubectl_ok(&["get", "pod", "web", "-o", "jsonpath={.spec.dnsPolicy}"]),
        "Default"
    );
    // EIP-04: the rule for namespaced ElasticIPs is registered too: a move to another
    // network is refused.
    assert!(
        cp.apply(
            "apiVersion: juneau.loutres.me/v1alpha1\nkind: ElasticIP\nmetadata: {name: web-eip, namespace: default}\nspec: {externalNetwork: ext}\n"
        )
        .status
        .success()
    );
    let patch = |body: &str| {
        cp.kubectl(&[
            "patch",
            "elasticip",
            "web-eip",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            body,
        ])
    };
    let out = patch(r#"{"spec":{"externalNetwork":"other"}}"#);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("spec.externalNetwork: is immutable"),
        "{stderr}"
    );
    // Only spec changes are sent: with the webhook down, the controller's finalizer
    // (a metadata update) still goes through, while a spec change fails closed.
    drop(_webhook);
    let out =
        patch(r#"{"metadata":{"finalizers":["elasticip.juneau.loutres.me/allocation-claim"]}}"#);
    assert!(
        out.status.success(),
        "a metadata update waited on the webhook: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = patch(r#"{"spec":{"requestedIP":"192.0.2.7"}}"#);
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains("webhook"),
        "a spec change went past the webhook while it was down"
    );
}
