//! Which maps `bpf dump` knows, and its `--filter key=value` flags (EIP-25: seed 003's
//! troubleshooting narrows a dump to one ElasticIP or one veth). Each map admits only
//! the keys that name one of its columns, so a mistyped key fails instead of silently
//! showing everything.
use std::net::Ipv4Addr;

use super::CliError;

/// The names `bpf dump` accepts, in the order its help and errors list them.
pub const DUMPABLE_MAPS: [&str; 19] = [
    "l2_fdb",
    "drops",
    "gw_seg",
    "gw_routes",
    "gw_nbr",
    "gw_stats",
    "elastic_ip_direct",
    "external_arp_table",
    "ifindex_external_network",
    "ifindex_host_mac",
    "arp_table",
    "fdb",
    "external_address_pools",
    "services",
    "backends",
    "conntrack",
    "policy",
    "policy_nics",
    "nat",
];

/// The dump a name asks for: one of [`DUMPABLE_MAPS`], also reached through the
/// pinned map's own name (`jn_eip_direct`, `jn_ext_arp`, `jn_ext_pools`, `jn_gw_rt`,
/// `jn_svc`, `jn_ct`, `jn_pol_set`, `jn_pol_nic`), so that a name read off bpffs works
/// too, and with `-` for `_` (`policy-nics`), as kubectl's own names are spelt. `None`
/// for anything else.
pub fn dumpable(name: &str) -> Option<&'static str> {
    let name = name.trim_start_matches("jn_").replace('-', "_");
    let name = name.as_str();
    let canonical = match name {
        "gw_rt" => "gw_routes",
        "eip_direct" => "elastic_ip_direct",
        "ext_arp" => "external_arp_table",
        "ext_pools" => "external_address_pools",
        "svc" => "services",
        "svc_backend" => "backends",
        "ct" => "conntrack",
        "pol_set" => "policy",
        "pol_nic" => "policy_nics",
        other => other,
    };
    DUMPABLE_MAPS.iter().copied().find(|m| *m == canonical)
}

/// The `--filter` keys a dump admits (named as the seed's troubleshooting writes them).
pub fn filter_keys(map: &str) -> &'static [&'static str] {
    match map {
        "elastic_ip_direct" => &["addr", "network_id"],
        "external_arp_table" => &["addr"],
        "ifindex_external_network" => &["ifindex", "network_id"],
        "ifindex_host_mac" => &["ifindex"],
        "arp_table" => &["subnet_id", "ipaddr"],
        "fdb" => &["subnet_id"],
        "external_address_pools" => &["addr"],
        "services" | "backends" | "conntrack" | "nat" => &["addr"],
        "policy" => &["set", "kind"],
        "policy_nics" => &["vni", "addr", "set"],
        _ => &[],
    }
}

/// The `--filter` flags of one dump, parsed: a row is shown when it matches every
/// key given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub addr: Option<Ipv4Addr>,
    pub network_id: Option<u32>,
    pub ifindex: Option<u32>,
    /// A rule set's id (`policy`, `policy_nics`).
    pub set: Option<u32>,
    /// A rule set's kind, `policy::SET_*` (`kind=acl|sg`).
    pub kind: Option<u32>,
}

impl Filter {
    /// Parses `raw` (`key=value` each) for dump `map` (a name from [`dumpable`]).
    pub fn parse(map: &str, raw: &[String]) -> Result<Self, CliError> {
        let keys = filter_keys(map);
        let mut f = Self::default();
        for item in raw {
            let bad = |why: String| CliError::Usage(format!("--filter {item:?}: {why}"));
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| bad("write key=value".into()))?;
            if !keys.contains(&key) {
                return Err(bad(if keys.is_empty() {
                    format!("{map} takes no --filter")
                } else {
                    format!("{map} filters on {}", keys.join(", "))
                }));
            }
            let number = || {
                value
                    .parse::<u32>()
                    .map_err(|_| bad(format!("{key} is a number")))
            };
            let twice = || bad(format!("{key} is given twice"));
            match key {
                "addr" | "ipaddr" => {
                    let a = value
                        .parse()
                        .map_err(|_| bad(format!("{key} is an IPv4 address")))?;
                    if f.addr.replace(a).is_some() {
                        return Err(twice());
                    }
                }
                "network_id" | "subnet_id" | "vni" => {
                    if f.network_id.replace(number()?).is_some() {
                        return Err(twice());
                    }
                }
                "set" => {
                    if f.set.replace(number()?).is_some() {
                        return Err(twice());
                    }
                }
                "kind" => {
                    let k = match value {
                        "acl" => juneau_common::policy::SET_ACL,
                        "sg" => juneau_common::policy::SET_SG,
                        _ => return Err(bad("kind is acl or sg".into())),
                    };
                    if f.kind.replace(k).is_some() {
                        return Err(twice());
                    }
                }
                _ => {
                    if f.ifindex.replace(number()?).is_some() {
                        return Err(twice());
                    }
                }
            }
        }
        Ok(f)
    }

    pub fn admits_addr(&self, addr: Ipv4Addr) -> bool {
        self.addr.is_none_or(|a| a == addr)
    }

    pub fn admits_network_id(&self, id: u32) -> bool {
        self.network_id.is_none_or(|n| n == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(map: &str, raw: &[&str]) -> Result<Filter, String> {
        let raw: Vec<String> = raw.iter().map(|s| (*s).to_owned()).collect();
        Filter::parse(map, &raw).map_err(|e| e.to_string())
    }

    #[test]
    fn names_resolve_to_one_dump() {
        assert_eq!(dumpable("jn_eip_direct"), Some("elastic_ip_direct"));
        assert_eq!(dumpable("elastic_ip_direct"), Some("elastic_ip_direct"));
        assert_eq!(dumpable("jn_ext_arp"), Some("external_arp_table"));
        assert_eq!(dumpable("jn_ext_pools"), Some("external_address_pools"));
        assert_eq!(dumpable("gw_rt"), Some("gw_routes"));
        assert_eq!(dumpable("jn_l2_fdb"), Some("l2_fdb"));
        assert_eq!(dumpable("arp_table"), Some("arp_table"));
        assert_eq!(dumpable("arp"), None);
    }

    #[test]
    fn filters_parse_and_refuse_what_the_map_lacks() {
        let f = parse(
            "elastic_ip_direct",
            &["addr=10.225.51.8", "network_id=4097"],
        )
        .unwrap();
        assert_eq!(f.addr, Some(Ipv4Addr::new(10, 225, 51, 8)));
        assert_eq!(f.network_id, Some(4097));
        assert!(f.admits_addr(Ipv4Addr::new(10, 225, 51, 8)));
        assert!(!f.admits_addr(Ipv4Addr::new(10, 225, 51, 9)));
        assert_eq!(
            parse("ifindex_host_mac", &["ifindex=23"]).unwrap().ifindex,
            Some(23)
        );
        let err = parse("external_arp_table", &["ifindex=23"]).unwrap_err();
        assert!(err.contains("external_arp_table filters on addr"), "{err}");
        let err = parse("drops", &["addr=1.2.3.4"]).unwrap_err();
        assert!(err.contains("drops takes no --filter"), "{err}");
        let err = parse("elastic_ip_direct", &["addr=10.225.51"]).unwrap_err();
        assert!(err.contains("addr is an IPv4 address"), "{err}");
        let err = parse("elastic_ip_direct", &["addr"]).unwrap_err();
        assert!(err.contains("write key=value"), "{err}");
        let err = parse("elastic_ip_direct", &["addr=1.2.3.4", "addr=1.2.3.5"]).unwrap_err();
        assert!(err.contains("addr is given twice"), "{err}");
        // The seed's own keys for the views: subnet_id and ipaddr.
        let f = parse("arp_table", &["subnet_id=4097", "ipaddr=10.225.51.8"]).unwrap();
        assert_eq!(
            (f.network_id, f.addr),
            (Some(4097), Some(Ipv4Addr::new(10, 225, 51, 8)))
        );
        let err = parse("arp_table", &["ipaddr=x"]).unwrap_err();
        assert!(err.contains("ipaddr is an IPv4 address"), "{err}");
        let err = parse("fdb", &["ipaddr=10.225.51.8"]).unwrap_err();
        assert!(err.contains("fdb filters on subnet_id"), "{err}");
    }

    #[test]
    fn pol_03_dump_policy_names_and_filters() {
        assert_eq!(dumpable("policy"), Some("policy"));
        assert_eq!(dumpable("jn_pol_set"), Some("policy"));
        assert_eq!(dumpable("policy-nics"), Some("policy_nics"));
        assert_eq!(dumpable("jn_pol_nic"), Some("policy_nics"));
        assert!(DUMPABLE_MAPS.contains(&"policy") && DUMPABLE_MAPS.contains(&"policy_nics"));
        let f = parse("policy", &["set=7", "kind=sg"]).unwrap();
        assert_eq!(
            (f.set, f.kind),
            (Some(7), Some(juneau_common::policy::SET_SG))
        );
        assert_eq!(
            parse("policy", &["kind=acl"]).unwrap().kind,
            Some(juneau_common::policy::SET_ACL)
        );
        let err = parse("policy", &["kind=nacl"]).unwrap_err();
        assert!(err.contains("kind is acl or sg"), "{err}");
        let err = parse("policy", &["addr=10.0.0.1"]).unwrap_err();
        assert!(err.contains("policy filters on set, kind"), "{err}");
        let f = parse("policy_nics", &["vni=21", "addr=10.0.1.10", "set=12"]).unwrap();
        assert_eq!(
            (f.network_id, f.addr, f.set),
            (Some(21), Some(Ipv4Addr::new(10, 0, 1, 10)), Some(12))
        );
        let err = parse("policy_nics", &["set=x"]).unwrap_err();
        assert!(err.contains("set is a number"), "{err}");
    }
}
