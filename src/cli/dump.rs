//! `kubectl juneau bpf dump MAP --node N`: which map a name reads, and how its rows
//! print. The reads are in `maps.rs`, `gw.rs`, `eip.rs`, `svc.rs`, `policy.rs` and
//! `views.rs`, one per feature.
use super::{
    CliError,
    output::{Output, counters, json, show},
};

/// Reads `map` from `node`'s pins and prints it.
pub fn dump(
    node: &str,
    map: &str,
    inner_key: Option<String>,
    filter: &[String],
    output: Output,
) -> Result<(), CliError> {
    let Some(name) = super::dumpable(map) else {
        return Err(CliError::Usage(format!(
            "unknown map {map:?}: {}",
            super::DUMPABLE_MAPS.join(", ")
        )));
    };
    let filter = super::Filter::parse(name, filter)?;
    let dir = super::node_dir(node);
    match name {
        "l2_fdb" => {
            let key = inner_key.ok_or_else(|| {
                CliError::Usage(
                    "l2_fdb holds one table per segment: add --inner-key vni=<VNI>".into(),
                )
            })?;
            let mut rows = super::dump_fdb(&dir, super::parse_inner_key(&key)?)?;
            // The NIC behind each local port, when the Node's namespace can be found.
            let names = super::node_netns(node)
                .and_then(|ns| super::port_names(&ns))
                .unwrap_or_default();
            for r in &mut rows {
                if let Some(n) = names.get(&r.ifindex) {
                    r.port.clone_from(n);
                }
            }
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:<18} {:>8} {:<32} {:<16} {:>4}",
                        "MAC", "IFINDEX", "PORT", "VTEP", "AGE"
                    );
                    for r in rows {
                        println!(
                            "{:<18} {:>8} {:<32} {:<16} {:>3}s",
                            r.mac,
                            r.ifindex,
                            if r.port.is_empty() { "-" } else { &r.port },
                            if r.vtep.is_empty() { "-" } else { &r.vtep },
                            r.age_seconds
                        );
                    }
                }
            }
        }
        "drops" => counters(&super::dump_drops(&dir)?, "REASON", output),
        "gw_stats" => counters(&super::dump_gw_stats(&dir)?, "COUNTER", output),
        "gw_seg" => {
            let rows = super::dump_gw_segments(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>8} {:<16} {:<18} {:>5} {:>5}",
                        "VNI", "GATEWAY", "GATEWAYMAC", "MTU", "TABLE"
                    );
                    for r in rows {
                        println!(
                            "{:>8} {:<16} {:<18} {:>5} {:>5}",
                            r.vni, r.gateway, r.gateway_mac, r.mtu, r.table
                        );
                    }
                }
            }
        }
        "gw_routes" => {
            let rows = super::dump_gw_routes(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>5} {:<20} {:<12} {:>8} {:<16} {:>5} {:<16}",
                        "TABLE", "DST", "KIND", "VNI", "GATEWAY", "MTU", "NEXTHOP"
                    );
                    for r in rows {
                        println!(
                            "{:>5} {:<20} {:<12} {:>8} {:<16} {:>5} {:<16}",
                            r.table,
                            r.dst,
                            r.kind,
                            r.vni,
                            r.gateway,
                            r.mtu,
                            r.next_hop.as_deref().unwrap_or("-")
                        );
                    }
                }
            }
        }
        "gw_nbr" => {
            let rows = super::dump_gw_neighbours(&dir)?;
            match output {
                Output::Json => json(&rows),
                Output::Table => {
                    println!(
                        "{:>8} {:<16} {:<18} {:<16} SOURCE",
                        "VNI", "ADDRESS", "MAC", "VTEP"
                    );
                    for r in rows {
                        println!(
                            "{:>8} {:<16} {:<18} {:<16} {}",
                            r.vni, r.address, r.mac, r.vtep, r.source
                        );
                    }
                }
            }
        }
        "services" => show(
            &super::dump_services(&dir, &filter)?,
            output,
            super::service_table,
        ),
        "backends" => show(
            &super::dump_backends(&dir, &filter)?,
            output,
            super::backend_table,
        ),
        "conntrack" => show(
            &super::dump_conntrack(&dir, &filter)?,
            output,
            super::connection_table,
        ),
        "policy" => show(
            &crate::features::policy::cli::dump_policy(&dir, &filter)?,
            output,
            crate::features::policy::cli::policy_table,
        ),
        "policy_nics" => show(
            &crate::features::policy::cli::dump_policy_nics(&dir, &filter)?,
            output,
            crate::features::policy::cli::policy_nic_table,
        ),
        "nat" => {
            let d = crate::features::nat::cli::dump_nat(&dir, &filter)?;
            match output {
                Output::Json => json(&d),
                Output::Table => print!("{}", crate::features::nat::cli::nat_table(&d)),
            }
        }
        "elastic_ip_direct" => show(
            &super::dump_elastic_ips(&dir, node, &filter)?,
            output,
            super::elastic_ip_table,
        ),
        "external_arp_table" => show(
            &super::dump_arp_answers(&dir, &filter)?,
            output,
            super::arp_answer_table,
        ),
        "ifindex_external_network" => show(
            &super::dump_eip_ports(&dir, &filter)?,
            output,
            super::eip_port_table,
        ),
        "ifindex_host_mac" => show(
            &super::host_macs(&super::dump_eip_ports(&dir, &filter)?),
            output,
            super::host_mac_table,
        ),
        "arp_table" => show(
            &super::dump_arp_table(&dir, node, &filter)?,
            output,
            super::arp_table,
        ),
        "fdb" => show(
            &super::dump_fdb_view(&dir, node, &filter)?,
            output,
            super::fdb_table,
        ),
        "external_address_pools" => show(
            &super::dump_address_pools(&dir, node, &filter)?,
            output,
            super::pool_table,
        ),
        other => unreachable!("{other} is in DUMPABLE_MAPS without a dump"),
    }
    Ok(())
}
