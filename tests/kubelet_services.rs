//! Cluster DNS on the kubelet Nodes (issue 28, SVC-01, SVC-02): CoreDNS v1.14.7, built
//! from its Go module, runs as a Pod the kubelet starts from its image (its Corefile a
//! ConfigMap volume, its credentials a projected ServiceAccount token), reads the
//! cluster through the `kubernetes` Service's ClusterIP, and passes its readiness
//! probe (`ready` plugin) through the Node's door. The kubelet writes every
//! ClusterFirst Pod's resolv.conf with the DNS Service's ClusterIP (`clusterDNS`), and
//! a busybox Pod on the other Node resolves `kubernetes.default` by its search list.
//!
//! No kube-controller-manager runs here: the test writes the two EndpointSlices (as
//! its EndpointSlice controller and the API server's endpoint reconciler, off in the
//! test control plane, would) and the `kube-root-ca.crt` ConfigMap (its root CA
//! publisher's). The API server, on the test's loopback, is the `kubernetes` Service's
//! backend by a relay on node-a's address, as a hostNetwork backend would be.
#[path = "common/containerd.rs"]
mod containerd;
#[path = "common/control_plane.rs"]
mod control_plane;
#[path = "common/kubelet.rs"]
mod kubelet;
#[path = "common/kubelet_bed.rs"]
mod kubelet_bed;
#[path = "common/node_bed.rs"]
mod node_bed;
#[path = "common/relay.rs"]
mod relay;
#[path = "common/webhook.rs"]
mod webhook;

use std::time::Duration;

use kubelet_bed::{Bed, container_of, json, node_of, ready_ips};
use node_bed::{TestDir, wait_for};

/// The image the kubelet runs CoreDNS from.
const COREDNS_IMAGE: &str = "localhost/coredns:juneau-test";
/// node-a's underlay address: the API server's stand-in backend.
const API_BACKEND: &str = "10.99.0.1:6443";
/// What kubelet.rs gives the kubelets as `clusterDNS`, and the `kubernetes` ClusterIP.
const DNS_IP: &str = kubelet::CLUSTER_DNS;
const KUBERNETES_IP: &str = "10.0.0.1";

/// CoreDNS's objects, as a cluster's add-on manifests have them (the Deployment as
/// one Pod on node-a: no controller manager here).
fn coredns(ca_pem: &str) -> String {
    let ca = ca_pem.replace('\n', "\n    ");
    format!(
        "apiVersion: v1
kind: ServiceAccount
metadata: {{name: coredns, namespace: kube-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: 'system:coredns'}}
rules:
- apiGroups: ['']
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: 'system:coredns'}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: 'system:coredns'}}
subjects: [{{kind: ServiceAccount, name: coredns, namespace: kube-system}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kube-root-ca.crt, namespace: kube-system}}
data:
  ca.crt: |
    {ca}
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: coredns, namespace: kube-system}}
data:
  Corefile: |
    .:53 {{
        errors
        health
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {{
            fallthrough in-addr.arpa ip6.arpa
        }}
        cache 30
    }}
---
apiVersion: v1
kind: Service
metadata: {{name: kube-dns, namespace: kube-system}}
spec:
  clusterIP: {DNS_IP}
  selector: {{k8s-app: kube-dns}}
  ports:
  - {{name: dns, port: 53, protocol: UDP}}
  - {{name: dns-tcp, port: 53, protocol: TCP}}
---
apiVersion: v1
kind: Pod
metadata:
  name: coredns
  namespace: kube-system
  labels: {{k8s-app: kube-dns}}
spec:
  nodeName: node-a
  serviceAccountName: coredns
  automountServiceAccountToken: false
  dnsPolicy: Default
  terminationGracePeriodSeconds: 0
  containers:
  - name: coredns
    image: {COREDNS_IMAGE}
    imagePullPolicy: Never
    command: [/coredns, -conf, /etc/coredns/Corefile]
    ports:
    - {{name: dns, containerPort: 53, protocol: UDP}}
    - {{name: metrics, containerPort: 9153, protocol: TCP}}
    readinessProbe: {{httpGet: {{path: /ready, port: 8181}}, periodSeconds: 1, timeoutSeconds: 3}}
    livenessProbe: {{httpGet: {{path: /health, port: 8080}}, periodSeconds: 5, timeoutSeconds: 3, failureThreshold: 5}}
    volumeMounts:
    - {{name: config, mountPath: /etc/coredns, readOnly: true}}
    - {{name: api, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}}
  volumes:
  - name: config
    configMap: {{name: coredns}}
  - name: api
    projected:
      sources:
      - serviceAccountToken: {{path: token, expirationSeconds: 3607}}
      - configMap: {{name: kube-root-ca.crt, items: [{{key: ca.crt, path: ca.crt}}]}}
      - downwardAPI: {{items: [{{path: namespace, fieldRef: {{fieldPath: metadata.namespace}}}}]}}
"
    )
}

/// An EndpointSlice of `service` with one ready endpoint on node-a.
fn slice(namespace: &str, service: &str, address: &str, ports: &[(&str, u16, &str)]) -> String {
    control_plane::endpoint_slice(namespace, service, address, "node-a", ports)
}

#[test]
fn svc_01_svc_02_mx_01_coredns_runs_as_a_kubelet_pod_and_pods_resolve_kubernetes_default() {
    let bed = Bed::start("");
    let cp = &bed.cp;
    // CoreDNS's image, from the binary `tools/build.sh coredns` made (statically linked).
    let images = TestDir::new(
        std::env::temp_dir().join(format!("juneau-coredns-img-{}", std::process::id())),
    );
    std::fs::create_dir_all(&images.0).unwrap();
    let image = images.0.join("coredns.tar");
    containerd::oci_image(
        &image,
        COREDNS_IMAGE,
        &[("coredns", &control_plane::tool("coredns", "coredns"))],
        &["/coredns"],
    );
    bed.runtimes[0].import(&image);
    // The API server as node-a's hostNetwork backend of `kubernetes`.
    let upstream = cp.server().trim_start_matches("https://").parse().unwrap();
    relay::relay_at(
        node_of(&bed.topo, "node-a").ns.path(),
        API_BACKEND.parse().unwrap(),
        upstream,
    );
    let (address, port) = API_BACKEND.split_once(':').unwrap();
    bed.apply(&slice(
        "default",
        "kubernetes",
        address,
        &[("https", port.parse().unwrap(), "TCP")],
    ));
    let ca = std::fs::read_to_string(cp.kubeconfig.parent().unwrap().join("certs/ca.crt")).unwrap();
    bed.apply(&coredns(&ca));
    // CoreDNS's address, once its sandbox has one: the DNS Service's backend.
    let dns_pod = wait_for(
        Duration::from_secs(120),
        || format!("the coredns Pod got no address:\n{}", bed.describe()),
        || {
            let p = json(cp, &["get", "pod", "coredns", "-n", "kube-system"]);
            p["status"]["podIP"].as_str().map(str::to_owned)
        },
    );
    bed.apply(&slice(
        "kube-system",
        "kube-dns",
        &dns_pod,
        &[("dns", 53, "UDP"), ("dns-tcp", 53, "TCP")],
    ));
    // Ready: its `ready` plugin answers once the kubernetes plugin has synced with the
    // API server through the ClusterIP (and the kubelet's probe reached it).
    wait_for(
        Duration::from_secs(120),
        || {
            format!(
                "coredns never became Ready:\n{}\n{}",
                cp.kubectl(&["logs", "-n", "kube-system", "coredns"])
                    .stdout
                    .iter()
                    .map(|b| *b as char)
                    .collect::<String>(),
                bed.describe()
            )
        },
        || {
            let p = json(cp, &["get", "pod", "coredns", "-n", "kube-system"]);
            p["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        },
    );
    // A ClusterFirst Pod on the other Node resolves the API server's short name.
    bed.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: client, namespace: default}}\n\
         spec:\n  nodeName: node-b\n  terminationGracePeriodSeconds: 0\n  \
         containers: [{{name: c, image: {}, imagePullPolicy: Never}}]\n",
        containerd::BUSYBOX
    ));
    bed.wait_ready("client");
    let ctr = container_of(&bed.runtimes[1], "client");
    let resolv =
        bed.runtimes[1].crictl_ok(&["exec", &ctr, "/bin/busybox", "cat", "/etc/resolv.conf"]);
    assert!(resolv.contains(&format!("nameserver {DNS_IP}")), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local"),
        "{resolv}"
    );
    // The resolver of the client's libc (busybox's ping resolves by getaddrinfo, with
    // the search list; its nslookup sends the name as given) finds the short name.
    let last = std::cell::RefCell::new(String::new());
    let coredns_log = || {
        let c = container_of(&bed.runtimes[0], "coredns");
        let out = bed.runtimes[0].crictl(&["logs", &c]);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    let answer = wait_for(
        Duration::from_secs(60),
        || {
            format!(
                "kubernetes.default did not resolve: {}\ncoredns: {}",
                last.borrow(),
                coredns_log()
            )
        },
        || {
            let (_, text) = bed.runtimes[1]
                .busybox(&ctr, &["ping", "-c", "1", "-W", "1", "kubernetes.default"]);
            let found = text.contains(&format!("PING kubernetes.default ({KUBERNETES_IP})"));
            *last.borrow_mut() = text.clone();
            found.then_some(text)
        },
    );
    eprintln!("{answer}");
    // The DNS Service answers the full name from CoreDNS's records.
    let (_, text) = bed.runtimes[1].busybox(
        &ctr,
        &[
            "nslookup",
            "-type=a",
            "kubernetes.default.svc.cluster.local",
        ],
    );
    assert!(
        text.contains(&format!("Address: {KUBERNETES_IP}")),
        "{text}\ncoredns: {}",
        coredns_log()
    );
    // A Service that does not exist is NXDOMAIN (the checks above can fail).
    let (_, text) = bed.runtimes[1].busybox(
        &ctr,
        &["nslookup", "-type=a", "nothere.default.svc.cluster.local"],
    );
    assert!(text.contains("NXDOMAIN"), "{text}");
    assert!(
        !text.contains(&format!("Address: {KUBERNETES_IP}")),
        "{text}"
    );
    assert!(ready_ips(cp, "client").is_some());
}
