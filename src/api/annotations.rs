//! Pod annotations `juneau.loutres.me/*`: which NICs a Pod gets. Errors name the
//! annotation, the entry and the field, and say what to write instead.
use std::collections::BTreeMap;

use serde::Deserialize;

use super::ANNOTATION_PREFIX;

/// Where one NIC goes (exactly one per entry: L2-24).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Subnet(String),
    L2Network(String),
    ElasticIp(String),
}

/// One NIC a Pod asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NicRequest {
    pub interface: String,
    pub target: Target,
    pub address: Option<String>,
    pub security_groups: Vec<String>,
}

/// Every NIC of a Pod, eth0 first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodNetworks {
    pub nics: Vec<NicRequest>,
    pub dns_inject_skip: bool,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AnnotationError {
    #[error("annotation {ANNOTATION_PREFIX}networks is not a JSON list of NIC entries: {0}")]
    NetworksJson(String),
    #[error(
        "annotation {ANNOTATION_PREFIX}networks entry {index} ({interface}): set exactly one of subnet, l2Network, elasticIP (found {found})"
    )]
    TargetCount {
        index: usize,
        interface: String,
        found: String,
    },
    #[error(
        "annotation {ANNOTATION_PREFIX}networks entry {index}: interface {interface:?} must be a DNS-1123 label of at most 8 characters (e.g. eth1)"
    )]
    InterfaceName { index: usize, interface: String },
    #[error(
        "annotation {ANNOTATION_PREFIX}networks entry {index}: interface {interface} is listed twice"
    )]
    DuplicateInterface { index: usize, interface: String },
    #[error(
        "annotation {ANNOTATION_PREFIX}networks entry {index} ({interface}): securityGroups holds {count} groups, at most 2 are allowed"
    )]
    TooManyGroups {
        index: usize,
        interface: String,
        count: usize,
    },
    #[error(
        "annotation {ANNOTATION_PREFIX}networks entry {index} ({interface}): an elasticIP entry takes no {field}: the NIC holds the ElasticIP's address"
    )]
    ElasticIpWith {
        index: usize,
        interface: String,
        field: &'static str,
    },
    #[error(
        "annotation {ANNOTATION_PREFIX}{key} cannot be used when {ANNOTATION_PREFIX}networks has an eth0 entry: move it into that entry"
    )]
    SingleNicKeyWithEth0 { key: &'static str },
    #[error(
        "annotation {ANNOTATION_PREFIX}elastic-ip cannot be combined with {ANNOTATION_PREFIX}{key}: eth0 then holds the ElasticIP and joins no Subnet"
    )]
    ElasticIpWithKey { key: &'static str },
    #[error(
        "annotation {ANNOTATION_PREFIX}dns-inject-skip must be \"true\" or \"false\", not {0:?}"
    )]
    DnsInjectSkip(String),
    #[error(
        "annotation {ANNOTATION_PREFIX}{at}: address {value:?} is not an IPv4 address (write a.b.c.d, inside the network's spec.cidr)"
    )]
    Address { at: String, value: String },
    #[error(
        "annotation {ANNOTATION_PREFIX}security-groups holds {0} groups, at most 2 are allowed"
    )]
    TooManyGroupsKey(usize),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Entry {
    interface: String,
    #[serde(default)]
    subnet: Option<String>,
    #[serde(default)]
    l2_network: Option<String>,
    #[serde(default, rename = "elasticIP")]
    elastic_ip: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    security_groups: Option<Vec<String>>,
}

fn dns1123_label(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn get<'a>(annotations: &'a BTreeMap<String, String>, key: &str) -> Option<&'a String> {
    annotations.get(&format!("{ANNOTATION_PREFIX}{key}"))
}

/// A requested address: `a.b.c.d`, or `a.b.c.d/len` as the NIC's status writes it
/// (the controller reads the address before the slash). Anything else used to be
/// dropped quietly for the next free address.
fn check_address(value: &str, at: impl FnOnce() -> String) -> Result<(), AnnotationError> {
    let ok = match value.split_once('/') {
        Some((ip, len)) => {
            ip.parse::<std::net::Ipv4Addr>().is_ok() && len.parse::<u8>().is_ok_and(|l| l <= 32)
        }
        None => value.parse::<std::net::Ipv4Addr>().is_ok(),
    };
    if ok {
        Ok(())
    } else {
        Err(AnnotationError::Address {
            at: at(),
            value: value.to_owned(),
        })
    }
}

/// Parses a Pod's annotations. A Pod with none gets eth0 on the default Subnet.
pub fn parse(annotations: &BTreeMap<String, String>) -> Result<PodNetworks, AnnotationError> {
    let dns_inject_skip = match get(annotations, "dns-inject-skip").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => return Err(AnnotationError::DnsInjectSkip(other.to_owned())),
    };
    let entries: Vec<Entry> = match get(annotations, "networks") {
        Some(json) => {
            serde_json::from_str(json).map_err(|e| AnnotationError::NetworksJson(e.to_string()))?
        }
        None => Vec::new(),
    };
    let mut nics = Vec::new();
    for (index, e) in entries.into_iter().enumerate() {
        let interface = e.interface;
        if !dns1123_label(&interface, 8) {
            return Err(AnnotationError::InterfaceName { index, interface });
        }
        if nics.iter().any(|n: &NicRequest| n.interface == interface) {
            return Err(AnnotationError::DuplicateInterface { index, interface });
        }
        let mut found = Vec::new();
        if e.subnet.is_some() {
            found.push("subnet");
        }
        if e.l2_network.is_some() {
            found.push("l2Network");
        }
        if e.elastic_ip.is_some() {
            found.push("elasticIP");
        }
        let target = match (e.subnet, e.l2_network, e.elastic_ip) {
            (Some(s), None, None) => Target::Subnet(s),
            (None, Some(l), None) => Target::L2Network(l),
            (None, None, Some(x)) => Target::ElasticIp(x),
            _ => {
                let found = if found.is_empty() {
                    "none".to_owned()
                } else {
                    found.join(", ")
                };
                return Err(AnnotationError::TargetCount {
                    index,
                    interface,
                    found,
                });
            }
        };
        let security_groups = e.security_groups.unwrap_or_default();
        if matches!(target, Target::ElasticIp(_)) {
            let field = if e.address.is_some() {
                Some("address")
            } else if !security_groups.is_empty() {
                Some("securityGroups")
            } else {
                None
            };
            if let Some(field) = field {
                return Err(AnnotationError::ElasticIpWith {
                    index,
                    interface,
                    field,
                });
            }
        }
        if security_groups.len() > 2 {
            let count = security_groups.len();
            return Err(AnnotationError::TooManyGroups {
                index,
                interface,
                count,
            });
        }
        if let Some(value) = &e.address {
            check_address(value, || format!("networks entry {index} ({interface})"))?;
        }
        nics.push(NicRequest {
            interface,
            target,
            address: e.address,
            security_groups,
        });
    }
    let single = ["subnet", "address", "security-groups", "elastic-ip"];
    if nics.iter().any(|n| n.interface == "eth0") {
        if let Some(key) = single.into_iter().find(|k| get(annotations, k).is_some()) {
            return Err(AnnotationError::SingleNicKeyWithEth0 { key });
        }
    } else {
        let eth0 = if let Some(eip) = get(annotations, "elastic-ip") {
            if let Some(key) = ["subnet", "address", "security-groups"]
                .into_iter()
                .find(|k| get(annotations, k).is_some())
            {
                return Err(AnnotationError::ElasticIpWithKey { key });
            }
            NicRequest {
                interface: "eth0".into(),
                target: Target::ElasticIp(eip.clone()),
                address: None,
                security_groups: Vec::new(),
            }
        } else {
            let address = get(annotations, "address").cloned();
            if let Some(value) = &address {
                check_address(value, || "address".to_owned())?;
            }
            let security_groups: Vec<String> = get(annotations, "security-groups")
                .map(|s| {
                    s.split(',')
                        .map(|g| g.trim().to_owned())
                        .filter(|g| !g.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            if security_groups.len() > 2 {
                return Err(AnnotationError::TooManyGroupsKey(security_groups.len()));
            }
            NicRequest {
                interface: "eth0".into(),
                target: Target::Subnet(
                    get(annotations, "subnet")
                        .cloned()
                        .unwrap_or_else(|| super::DEFAULT_VPC.into()),
                ),
                address,
                security_groups,
            }
        };
        nics.insert(0, eth0);
    }
    nics.sort_by_key(|n| n.interface != "eth0");
    Ok(PodNetworks {
        nics,
        dns_inject_skip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (format!("{ANNOTATION_PREFIX}{k}"), v.to_string()))
            .collect()
    }

    #[test]
    fn l2_24_networks_entry_attaches_an_l2network_nic() {
        let p = parse(&ann(&[(
            "networks",
            r#"[{"interface": "eth1", "l2Network": "lab-net"}]"#,
        )]))
        .unwrap();
        assert_eq!(p.nics.len(), 2);
        assert_eq!(
            p.nics[0].target,
            Target::Subnet("default".into()),
            "eth0 stays on the default Subnet"
        );
        assert_eq!(p.nics[1].target, Target::L2Network("lab-net".into()));
    }

    #[test]
    fn l2_24_an_entry_must_name_exactly_one_target() {
        let two = parse(&ann(&[(
            "networks",
            r#"[{"interface": "eth1", "subnet": "a", "l2Network": "b"}]"#,
        )]));
        assert_eq!(
            two.unwrap_err().to_string(),
            "annotation juneau.loutres.me/networks entry 0 (eth1): set exactly one of subnet, l2Network, elasticIP (found subnet, l2Network)"
        );
        let none = parse(&ann(&[("networks", r#"[{"interface": "eth1"}]"#)]));
        assert!(none.unwrap_err().to_string().ends_with("(found none)"));
    }

    #[test]
    fn l2_24_unknown_fields_and_bad_interfaces_are_named() {
        let e = parse(&ann(&[(
            "networks",
            r#"[{"interface": "eth1", "l2network": "x"}]"#,
        )]))
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `l2network`"), "{e}");
        let e = parse(&ann(&[(
            "networks",
            r#"[{"interface": "Eth_1", "l2Network": "x"}]"#,
        )]))
        .unwrap_err();
        assert!(e.to_string().contains("DNS-1123 label"), "{e}");
        let e = parse(&ann(&[(
            "networks",
            r#"[{"interface": "eth1", "l2Network": "x"}, {"interface": "eth1", "l2Network": "y"}]"#,
        )]))
        .unwrap_err();
        assert!(e.to_string().contains("listed twice"), "{e}");
    }

    #[test]
    fn l2_26_eth0_entry_forbids_the_single_nic_keys() {
        let e = parse(&ann(&[
            ("networks", r#"[{"interface": "eth0", "l2Network": "lab"}]"#),
            ("subnet", ""),
        ]))
        .unwrap_err();
        assert_eq!(e, AnnotationError::SingleNicKeyWithEth0 { key: "subnet" });
        let ok = parse(&ann(&[(
            "networks",
            r#"[{"interface": "eth0", "l2Network": "lab"}]"#,
        )]))
        .unwrap();
        assert_eq!(ok.nics.len(), 1);
        assert_eq!(ok.nics[0].target, Target::L2Network("lab".into()));
    }

    #[test]
    fn l2_24_single_nic_keys_and_dns_skip() {
        let p = parse(&ann(&[
            ("subnet", "web"),
            ("address", "10.1.0.9"),
            ("security-groups", "a, b"),
            ("dns-inject-skip", "true"),
        ]))
        .unwrap();
        assert_eq!(p.nics[0].target, Target::Subnet("web".into()));
        assert_eq!(p.nics[0].address.as_deref(), Some("10.1.0.9"));
        assert_eq!(p.nics[0].security_groups, vec!["a", "b"]);
        assert!(p.dns_inject_skip);
        let e = parse(&ann(&[("elastic-ip", "e"), ("address", "1.2.3.4")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("cannot be combined with juneau.loutres.me/address"),
            "{e}"
        );
        assert!(parse(&ann(&[("dns-inject-skip", "yes")])).is_err());
    }

    #[test]
    fn l2_24_a_bad_address_or_too_many_groups_is_named_not_dropped() {
        for bad in ["10.1.0.300", "banana", "10.1.0.9/33", ""] {
            let e = parse(&ann(&[("address", bad)])).unwrap_err();
            assert_eq!(
                e,
                AnnotationError::Address {
                    at: "address".into(),
                    value: bad.into()
                }
            );
            assert!(
                e.to_string()
                    .contains("is not an IPv4 address (write a.b.c.d"),
                "{e}"
            );
        }
        let entry = r#"[{"interface":"eth1","l2Network":"lab","address":"10.0.0.256"}]"#;
        let e = parse(&ann(&[("networks", entry)])).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "annotation juneau.loutres.me/networks entry 0 (eth1): address \"10.0.0.256\""
            ),
            "{e}"
        );
        for good in ["10.1.0.9", "10.1.0.9/24"] {
            assert!(parse(&ann(&[("address", good)])).is_ok(), "{good}");
        }
        let e = parse(&ann(&[("security-groups", "a,b,c")])).unwrap_err();
        assert_eq!(e, AnnotationError::TooManyGroupsKey(3));
    }
}
