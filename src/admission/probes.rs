//! `--enable-probe-rewrite` (L2-27, seed 000): the kubelet probes a Pod from the Node,
//! by the Pod's address, and a Pod whose eth0 is on an L2Network or on a Subnet of a
//! Vpc other than the default has no route from its Node (Vpcs may reuse the Node's
//! ranges). Its httpGet and tcpSocket probes are rewritten at admission (probes cannot
//! change after it) into an httpGet on the Node's daemon (`127.0.0.1:9465`: the kubelet
//! shares the Node's namespace with it, and nothing off the Node reaches it), which
//! runs the original inside the Pod's network namespace (`node::probe`).
//!
//! The originals go in the annotation `juneau.loutres.me/probes` with a token: a
//! mutating webhook sees no Pod name (generateName) nor UID, so the rewritten path
//! names the Pod by its namespace and that token. A probe with `host` set is dialled
//! from the Node already and stays; so do exec and grpc probes (grpc always dials the
//! Pod's address: reported as a warning), and HTTPS ones (reported too).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api::{
    ANNOTATION_PREFIX, DEFAULT_VPC,
    annotations::{self, Target},
};

/// Where the daemon answers rewritten probes, on the Node's loopback.
pub const PROBE_PORT: u16 = 9465;
/// The annotation holding the originals.
pub const PROBES_KEY: &str = "probes";
/// The path prefix of a rewritten probe: `/juneau/probe/<ns>/<token>/<container>/<kind>`.
pub const PROBE_PATH: &str = "/juneau/probe";

/// The three probe fields of a container, by the name the path carries.
const KINDS: [(&str, &str); 3] = [
    ("readinessProbe", "readiness"),
    ("livenessProbe", "liveness"),
    ("startupProbe", "startup"),
];

/// One original probe, its port a number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Check {
    Http {
        port: u16,
        path: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        headers: Vec<(String, String)>,
    },
    Tcp {
        port: u16,
    },
}

/// One original probe and the time the kubelet gives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Original {
    pub check: Check,
    pub timeout_seconds: u32,
}

/// The annotation's value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stored {
    pub token: String,
    /// `<container>/<kind>` → the original.
    pub probes: BTreeMap<String, Original>,
}

impl Stored {
    /// The annotation of a Pod, if it has a readable one.
    pub fn of(annotations: &BTreeMap<String, String>) -> Option<Stored> {
        let raw = annotations.get(&format!("{ANNOTATION_PREFIX}{PROBES_KEY}"))?;
        serde_json::from_str(raw).ok()
    }
}

/// The JSON patch and the warnings of a rewrite.
#[derive(Debug, Default)]
pub struct Rewrite {
    pub patch: Vec<Value>,
    pub warnings: Vec<String>,
}

/// Whether a Pod's eth0 has no route from its Node: on an L2Network, or on a Subnet
/// other than the default one (an ElasticIP eth0 has its Node route: EIP-18).
fn unreachable_from_node(annotations: &BTreeMap<String, String>) -> bool {
    let Ok(nets) = annotations::parse(annotations) else {
        return false;
    };
    nets.nics
        .iter()
        .find(|n| n.interface == "eth0")
        .is_some_and(|n| match &n.target {
            Target::L2Network(_) => true,
            Target::Subnet(s) => s != DEFAULT_VPC,
            Target::ElasticIp(_) => false,
        })
}

/// A probe's port as a number: an integer, or the name of one of the container's ports.
fn port_of(v: &Value, container: &Value) -> Option<u16> {
    match v {
        Value::Number(n) => n.as_u64().and_then(|p| u16::try_from(p).ok()),
        Value::String(name) => container["ports"]
            .as_array()?
            .iter()
            .find(|p| p["name"].as_str() == Some(name))?["containerPort"]
            .as_u64()
            .and_then(|p| u16::try_from(p).ok()),
        _ => None,
    }
}

/// The original of one probe, or why it stays (`Err(Some(warning))`; `Err(None)`: it
/// stays silently, as an exec probe or one dialled from the Node by its `host`).
fn original(probe: &Value, container: &Value) -> Result<Check, Option<String>> {
    if let Some(h) = probe.get("httpGet") {
        if h["host"].as_str().is_some_and(|s| !s.is_empty()) {
            return Err(None);
        }
        if h["scheme"].as_str().is_some_and(|s| s != "HTTP") {
            return Err(Some("an HTTPS httpGet probe is not rewritten; it fails from the Node: use an HTTP port or an exec probe".into()));
        }
        let port = port_of(&h["port"], container).ok_or_else(|| {
            Some(format!(
                "port {} is not a number nor a named port of the container",
                h["port"]
            ))
        })?;
        let headers = h["httpHeaders"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|x| {
                Some((
                    x["name"].as_str()?.to_owned(),
                    x["value"].as_str()?.to_owned(),
                ))
            })
            .collect();
        let path = h["path"].as_str().unwrap_or("/");
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        return Ok(Check::Http {
            port,
            path,
            headers,
        });
    }
    if let Some(t) = probe.get("tcpSocket") {
        if t["host"].as_str().is_some_and(|s| !s.is_empty()) {
            return Err(None);
        }
        let port = port_of(&t["port"], container).ok_or_else(|| {
            Some(format!(
                "port {} is not a number nor a named port of the container",
                t["port"]
            ))
        })?;
        return Ok(Check::Tcp { port });
    }
    if probe.get("grpc").is_some() {
        return Err(Some("a grpc probe is not rewritten (the kubelet always dials the Pod's address); it fails from the Node: use an exec probe".into()));
    }
    Err(None)
}

/// The rewrite of a Pod (`pod`: its JSON as admission sees it) in `namespace`, with
/// `token` naming it in the rewritten paths; `None` when there is nothing to rewrite.
/// `port` is the daemons' probe port.
pub fn rewrite(pod: &Value, namespace: &str, token: &str, port: u16) -> Option<Rewrite> {
    let annotations: BTreeMap<String, String> =
        serde_json::from_value(pod["metadata"]["annotations"].clone()).unwrap_or_default();
    if pod["spec"]["hostNetwork"].as_bool() == Some(true) || !unreachable_from_node(&annotations) {
        return None;
    }
    let mut out = Rewrite::default();
    let mut stored = Stored {
        token: token.to_owned(),
        probes: BTreeMap::new(),
    };
    for list in ["initContainers", "containers"] {
        for (i, c) in pod["spec"][list]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let name = c["name"].as_str().unwrap_or_default();
            for (field, kind) in KINDS {
                let Some(probe) = c.get(field).filter(|p| p.is_object()) else {
                    continue;
                };
                let check = match original(probe, c) {
                    Ok(check) => check,
                    Err(Some(why)) => {
                        out.warnings
                            .push(format!("spec.{list}[{i}].{field}: {why}"));
                        continue;
                    }
                    Err(None) => continue,
                };
                let mut new = probe.clone();
                let obj = new.as_object_mut().expect("checked an object");
                obj.remove("tcpSocket");
                obj.insert(
                    "httpGet".into(),
                    json!({
                        "host": "127.0.0.1",
                        "port": port,
                        "scheme": "HTTP",
                        "path": format!("{PROBE_PATH}/{namespace}/{token}/{name}/{kind}"),
                    }),
                );
                out.patch.push(json!({"op": "replace", "path": format!("/spec/{list}/{i}/{field}"), "value": new}));
                let timeout_seconds = probe["timeoutSeconds"]
                    .as_u64()
                    .and_then(|t| u32::try_from(t).ok())
                    .unwrap_or(1);
                stored.probes.insert(
                    format!("{name}/{kind}"),
                    Original {
                        check,
                        timeout_seconds,
                    },
                );
            }
        }
    }
    if stored.probes.is_empty() {
        return (!out.warnings.is_empty()).then_some(out);
    }
    let value = serde_json::to_string(&stored).expect("probes serialize");
    let key = format!("{ANNOTATION_PREFIX}{PROBES_KEY}");
    if pod["metadata"]["annotations"].is_object() {
        // RFC 6901: `/` in a member name is written `~1`.
        out.patch.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", key.replace('~', "~0").replace('/', "~1")), "value": value}));
    } else {
        out.patch
            .push(json!({"op": "add", "path": "/metadata/annotations", "value": {key: value}}));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(networks: &str, containers: Value) -> Value {
        json!({
            "metadata": {"annotations": {"juneau.loutres.me/networks": networks}},
            "spec": {"containers": containers},
        })
    }

    fn web() -> Value {
        json!([{
            "name": "web",
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"path": "healthz", "port": "http",
                "httpHeaders": [{"name": "X-A", "value": "1"}]}, "periodSeconds": 2},
            "livenessProbe": {"tcpSocket": {"port": 8080}, "timeoutSeconds": 3},
            "startupProbe": {"exec": {"command": ["true"]}},
        }])
    }

    #[test]
    fn l2_27_an_l2network_eth0_gets_its_http_and_tcp_probes_through_the_node_daemon() {
        let p = pod(r#"[{"interface":"eth0","l2Network":"lab"}]"#, web());
        let r = rewrite(&p, "ns1", "tok", PROBE_PORT).expect("rewritten");
        let mut patched = p.clone();
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(r.patch)).unwrap();
        json_patch::patch(&mut patched, &patch).unwrap();
        let c = &patched["spec"]["containers"][0];
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"host": "127.0.0.1", "port": 9465, "scheme": "HTTP",
                "path": "/juneau/probe/ns1/tok/web/readiness"}, "periodSeconds": 2})
        );
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"host": "127.0.0.1", "port": 9465, "scheme": "HTTP",
                "path": "/juneau/probe/ns1/tok/web/liveness"}, "timeoutSeconds": 3})
        );
        assert_eq!(c["startupProbe"], json!({"exec": {"command": ["true"]}}));
        let annotations: BTreeMap<String, String> =
            serde_json::from_value(patched["metadata"]["annotations"].clone()).unwrap();
        let stored = Stored::of(&annotations).expect("the originals are kept");
        assert_eq!(stored.token, "tok");
        assert_eq!(
            stored.probes["web/readiness"],
            Original {
                check: Check::Http {
                    port: 8080,
                    path: "/healthz".into(),
                    headers: vec![("X-A".into(), "1".into())]
                },
                timeout_seconds: 1
            }
        );
        assert_eq!(
            stored.probes["web/liveness"],
            Original {
                check: Check::Tcp { port: 8080 },
                timeout_seconds: 3
            }
        );
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn l2_27_a_custom_vpc_subnet_is_rewritten_the_default_subnet_and_an_elastic_ip_are_not() {
        let custom = pod(r#"[{"interface":"eth0","subnet":"tenant-a"}]"#, web());
        assert!(rewrite(&custom, "d", "t", PROBE_PORT).is_some());
        let default = pod(r#"[{"interface":"eth0","subnet":"default"}]"#, web());
        assert!(rewrite(&default, "d", "t", PROBE_PORT).is_none());
        let none = json!({"spec": {"containers": web()}});
        assert!(rewrite(&none, "d", "t", PROBE_PORT).is_none());
        let eip = json!({"metadata": {"annotations": {"juneau.loutres.me/elastic-ip": "e"}},
            "spec": {"containers": web()}});
        assert!(rewrite(&eip, "d", "t", PROBE_PORT).is_none());
        let mut host_net = custom.clone();
        host_net["spec"]["hostNetwork"] = json!(true);
        assert!(rewrite(&host_net, "d", "t", PROBE_PORT).is_none());
    }

    #[test]
    fn l2_27_https_grpc_and_unknown_named_ports_stay_with_a_warning_a_set_host_silently() {
        let p = pod(
            r#"[{"interface":"eth0","l2Network":"lab"}]"#,
            json!([{
                "name": "c",
                "readinessProbe": {"httpGet": {"port": 443, "scheme": "HTTPS"}},
                "livenessProbe": {"grpc": {"port": 9000}},
                "startupProbe": {"tcpSocket": {"port": "nope"}},
            }, {
                "name": "d",
                "readinessProbe": {"httpGet": {"port": 80, "host": "10.0.0.5"}},
            }]),
        );
        let r = rewrite(&p, "d", "t", PROBE_PORT).expect("warnings");
        assert!(r.patch.is_empty(), "{:?}", r.patch);
        assert_eq!(r.warnings.len(), 3, "{:?}", r.warnings);
        assert!(r.warnings[0].starts_with("spec.containers[0].readinessProbe: an HTTPS"));
        assert!(r.warnings[2].contains("\"nope\""));
    }
}
