//! `attachments`: which program the kernel runs on each interface of a Node (TCX
//! queries and tc filters, ingress and egress) and whose interface it is (a Pod NIC by its alias, the
//! overlay device, the underlay).
use std::{collections::BTreeMap, path::Path};

use aya::programs::{SchedClassifier, TcAttachType};
use serde::Serialize;

use super::CliError;
use crate::node::{netlink, veth::PortAlias, vxlan};

/// One program attached to one interface.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct AttachmentRow {
    pub interface: String,
    pub ifindex: u32,
    pub hook: &'static str,
    pub program: String,
    pub program_id: u32,
    /// `<namespace>/<pod>.<iface>` for a Pod NIC, `overlay` for the VXLAN device,
    /// `service` for the Service device's peer, empty for anything Juneau did not make.
    pub owner: String,
}

fn owner_of(alias: &str) -> String {
    if let Some(a) = PortAlias::parse(alias) {
        a.nic()
    } else if alias == vxlan::OWNER_ALIAS {
        "overlay".into()
    } else if alias == crate::node::netlink::svc_device::SERVICE_ALIAS {
        "service".into()
    } else {
        String::new()
    }
}

/// The kernel keeps 15 characters of a program's name (BPF_OBJ_NAME_LEN); ours are
/// given back in full.
fn full_name(kernel: &str) -> String {
    juneau_common::prog_names::ALL
        .iter()
        .find(|n| **n == kernel || (kernel.len() == 15 && n.starts_with(kernel)))
        .map(|n| (*n).to_owned())
        .unwrap_or_else(|| kernel.to_owned())
}

/// ifindex -> `<namespace>/<pod>.<iface>` of the Pod NICs in the namespace at `netns`.
pub fn port_names(netns: &Path) -> Result<BTreeMap<u32, String>, CliError> {
    let links = crate::netns::run_in(netns, || netlink::links_with_alias(""))
        .map_err(|e| CliError::Query {
            what: "the Node's links".into(),
            why: e.to_string(),
        })?
        .map_err(|e| CliError::Query {
            what: "the Node's links".into(),
            why: e.to_string(),
        })?;
    Ok(links
        .into_iter()
        .filter_map(|(_, i, alias)| Some((i, PortAlias::parse(&alias)?.nic())))
        .collect())
}

/// Every TCX attachment and BPF tc filter in the namespace at `netns`, by interface
/// (Pod ports run as tc filters, the overlay and underlay programs as TCX links).
pub fn attachments(netns: &Path) -> Result<Vec<AttachmentRow>, CliError> {
    let query = || -> Result<Vec<AttachmentRow>, String> {
        let aliases: BTreeMap<u32, String> = netlink::links_with_alias("")
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|(_, i, a)| (i, a))
            .collect();
        let links = netlink::all_links().map_err(|e| e.to_string())?;
        let filters = netlink::with_netlink(None, async |h| {
            let mut all = Vec::new();
            for (_, ifindex) in &links {
                all.push(netlink::bpf_filters(&h, *ifindex).await?);
            }
            Ok(all)
        })
        .map_err(|e| e.to_string())?;
        let mut rows = Vec::new();
        for ((name, ifindex), filters) in links.iter().zip(filters) {
            let mut found: Vec<(&'static str, String, u32)> = Vec::new();
            for (hook, t) in [
                ("tcx/ingress", TcAttachType::Ingress),
                ("tcx/egress", TcAttachType::Egress),
            ] {
                let (_, progs) =
                    SchedClassifier::query_tcx(name, t).map_err(|e| format!("{name}: {e}"))?;
                found.extend(
                    progs
                        .iter()
                        .map(|p| (hook, full_name(p.name_as_str().unwrap_or("?")), p.id())),
                );
            }
            found.extend(
                filters
                    .into_iter()
                    .map(|f| (f.hook, full_name(&f.name), f.program_id)),
            );
            for (hook, program, program_id) in found {
                let mut owner = aliases
                    .get(ifindex)
                    .map(|a| owner_of(a))
                    .unwrap_or_default();
                if owner.is_empty() && program == juneau_common::prog_names::UNDERLAY_INGRESS {
                    owner = "underlay".into();
                }
                rows.push(AttachmentRow {
                    interface: name.clone(),
                    ifindex: *ifindex,
                    hook,
                    program,
                    program_id,
                    owner,
                });
            }
        }
        Ok(rows)
    };
    crate::netns::run_in(netns, query)
        .map_err(|e| CliError::Query {
            what: "the attachments".into(),
            why: e.to_string(),
        })?
        .map_err(|why| CliError::Query {
            what: "the attachments".into(),
            why,
        })
}
