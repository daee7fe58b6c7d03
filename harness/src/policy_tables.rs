//! The rule tables of the policy benchmarks: a NetworkACL on Subnet A and two
//! SecurityGroups on one NIC of Subnet B, `n` rules each, rendered both as what the
//! daemon's compiler writes into the datapath and as the same rules in nftables, so the
//! two sides of a comparison judge exactly one table.
//!
//! Every rule is one entry (one peer CIDR, one port). The measured connection is
//! allowed only by the last rule of the ACL's egress and of the second group's ingress,
//! unless `deny_first` puts a deny of it first (same count of rules).
use std::{fmt::Write, net::Ipv4Addr};

use juneau::{
    api::{networkacl::AclRule, securitygroup::SecurityGroup},
    features::policy::node::{self as policy, Compiled, PolicyState, compile},
};
use juneau_common::policy::SET_ACL;
use serde_json::{Value, json};

/// One rule: the peer is the destination for egress, the source for ingress.
#[derive(Clone, Debug)]
pub struct Row {
    pub priority: u32,
    pub allow: bool,
    pub proto: &'static str,
    pub cidr: String,
    pub port: u16,
}

impl Row {
    fn acl_json(&self) -> Value {
        json!({"priority": self.priority, "action": if self.allow { "allow" } else { "deny" },
            "protocol": self.proto, "cidr": self.cidr, "ports": [{"port": self.port}]})
    }

    fn sg_json(&self) -> Value {
        json!({"from": [{"cidr": self.cidr}], "protocol": self.proto,
            "ports": [{"port": self.port}]})
    }

    /// The rule as an nftables match (`peer` is `saddr` or `daddr`), without its verdict.
    fn nft_match(&self, peer: &str) -> String {
        format!("ip {peer} {} {} dport {}", self.cidr, self.proto, self.port)
    }
}

/// The connection the tables are about: from Subnet A to `to`:`port`/`proto`.
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    pub proto: &'static str,
    pub to: Ipv4Addr,
    pub port: u16,
}

/// The ACL (Subnet A, both directions) and the two groups' ingress (the NIC `flow.to`).
#[derive(Clone, Debug)]
pub struct Tables {
    pub acl_egress: Vec<Row>,
    pub acl_ingress: Vec<Row>,
    pub groups: [Vec<Row>; 2],
}

impl Tables {
    pub fn new(n: u32, flow: Flow, deny_first: bool) -> Tables {
        let mut acl_egress: Vec<Row> = (0..n - 1)
            .map(|i| Row {
                priority: 10 + i,
                allow: i % 2 == 1,
                proto: "tcp",
                cidr: format!("10.{}.{}.0/24", 1 + i / 200, i % 200),
                port: 1000 + i as u16,
            })
            .collect();
        acl_egress.push(Row {
            priority: 5000,
            allow: true,
            proto: flow.proto,
            cidr: "10.0.2.0/24".into(),
            port: flow.port,
        });
        if deny_first {
            acl_egress[0] = Row {
                priority: 1,
                allow: false,
                proto: flow.proto,
                cidr: format!("{}/32", flow.to),
                port: flow.port,
            };
        }
        let acl_ingress = (0..n)
            .map(|i| Row {
                priority: 10 + i,
                allow: true,
                proto: "tcp",
                cidr: format!("10.0.2.{}/32", i % 250),
                port: 2000 + i as u16,
            })
            .collect();
        let group = |base: u32, admits: bool| -> Vec<Row> {
            let mut rows: Vec<Row> = (0..n)
                .map(|i| Row {
                    priority: i,
                    allow: true,
                    proto: "tcp",
                    cidr: format!("10.0.1.{}/32", 100 + i % 150),
                    port: (base + i) as u16,
                })
                .collect();
            if admits {
                *rows.last_mut().unwrap() = Row {
                    priority: n - 1,
                    allow: true,
                    proto: flow.proto,
                    cidr: "10.0.1.0/24".into(),
                    port: flow.port,
                };
            }
            rows
        };
        Tables {
            acl_egress,
            acl_ingress,
            groups: [group(3000, false), group(4000, true)],
        }
    }

    /// The ACL as the daemon compiles it.
    pub fn acl(&self, version: u32) -> Compiled {
        let dir = |rows: &[Row]| {
            let rules: Vec<AclRule> =
                serde_json::from_value(rows.iter().map(Row::acl_json).collect()).expect("rules");
            let (d, problem) = compile::acl_direction(Some(&rules));
            assert!(problem.is_none(), "{problem:?}");
            assert_eq!(d.rules.len(), rows.len());
            d
        };
        Compiled {
            kind: SET_ACL,
            version,
            dirs: [dir(&self.acl_ingress), dir(&self.acl_egress)],
        }
    }

    /// Group `g` (0 or 1) as the daemon compiles it.
    pub fn group(&self, g: usize) -> Compiled {
        let rows = &self.groups[g];
        let sg: SecurityGroup = serde_json::from_value(json!({
            "apiVersion": "juneau.loutres.me/v1alpha1", "kind": "SecurityGroup",
            "metadata": {"name": format!("g{g}")},
            "spec": {"vpc": "v", "ingress": rows.iter().map(Row::sg_json).collect::<Vec<_>>()}
        }))
        .expect("a SecurityGroup");
        let (set, problems) = policy::compile_sg(&sg, &[]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(set.dirs[0].rules.len(), rows.len());
        set
    }

    /// The ACL as `acl_id` and the groups as `sgs` on the NIC `nic` (VNI, address).
    pub fn state(
        &self,
        version: u32,
        acl_id: u32,
        sgs: [u16; 2],
        nic: (u32, Ipv4Addr),
    ) -> PolicyState {
        PolicyState {
            sets: [
                (acl_id, self.acl(version)),
                (u32::from(sgs[0]), self.group(0)),
                (u32::from(sgs[1]), self.group(1)),
            ]
            .into_iter()
            .collect(),
            nics: [(nic, sgs)].into_iter().collect(),
        }
    }

    /// The same rules as an nftables table `name` on the forward hook of a Node that
    /// routes Subnet A (`a`) and the NIC `nic`, stateful as Juneau is: established and
    /// related packets are accepted first (counted by that rule's counter); a
    /// new connection leaving A meets the ACL's egress, one entering A its ingress
    /// (first match by priority decides, no match denies), one to the NIC the groups'
    /// ingress (any match allows, none denies).
    pub fn nft(&self, name: &str, a: &str, nic: Ipv4Addr) -> String {
        let mut s = format!("table ip {name} {{\n");
        let mut chain = |chain: &str, rows: &[Row], peer: &str, allow: &str| {
            let mut sorted: Vec<&Row> = rows.iter().collect();
            sorted.sort_by_key(|r| r.priority);
            writeln!(s, "  chain {chain} {{").unwrap();
            for r in sorted {
                let verdict = if r.allow { allow } else { "drop" };
                writeln!(s, "    {} {verdict}", r.nft_match(peer)).unwrap();
            }
            writeln!(s, "    drop\n  }}").unwrap();
        };
        chain("acl_egress", &self.acl_egress, "daddr", "return");
        chain("acl_ingress", &self.acl_ingress, "saddr", "return");
        let groups: Vec<Row> = self.groups.iter().flatten().cloned().collect();
        chain("sg_ingress", &groups, "saddr", "accept");
        write!(
            s,
            "  chain forward {{\n    type filter hook forward priority filter; policy drop;\n    ct state established,related counter accept\n    ct state invalid drop\n    ip saddr {a} ip daddr != {a} jump acl_egress\n    ip daddr {a} ip saddr != {a} jump acl_ingress\n    ip daddr {nic} jump sg_ingress\n    accept\n  }}\n}}\n"
        )
        .unwrap();
        s
    }
}
