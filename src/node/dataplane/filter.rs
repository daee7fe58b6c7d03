//! Ports' programs as tc filters (clsact ingress, cls_bpf direct action) rather than TCX
//! links: creating a TCX link waits for an RCU grace period under RTNL (13.6 ms per
//! port measured), which a hundred concurrent CNI ADDs paid one after another; a filter
//! is added by netlink with no grace period. A port's filter lives as long as its veth.
//! One fixed place (priority and handle) per veth, so that a later daemon (an upgrade,
//! a layout change) finds and replaces the same filter instead of stacking a second one,
//! and removes the ones it does not serve.
use aya::programs::{
    ProgramError, TcAttachType,
    links::Link,
    tc::{
        NlOptions, SchedClassifierLink, SchedClassifierLinkId, TcAttachOptions, TcHandle,
        qdisc_add_clsact,
    },
};

use super::{Attachment, Dataplane, DataplaneError, prog_err};
use crate::node::netlink;

/// How ports get their program: a tc filter (the default: an ADD pays no grace
/// period) or a TCX link (3% more packets per second through a port in
/// `pps_one_node_tc_filter_vs_tcx`, at 13.6 ms of RTNL-held waiting per ADD);
/// `juneau node --port-attach tc|tcx`. The overlay and underlay always use TCX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortAttach {
    #[default]
    #[serde(rename = "tc")]
    Filter,
    Tcx,
}

pub const PORT_FILTER_PRIORITY: u16 = 1;
pub const PORT_FILTER_HANDLE: u16 = 1;

fn port_filter() -> NlOptions {
    NlOptions {
        priority: PORT_FILTER_PRIORITY,
        handle: TcHandle::new(0, PORT_FILTER_HANDLE),
        classid: None,
    }
}

/// A handle on the port filter of `ifname` (whoever attached it).
fn existing(ifname: &str) -> Result<SchedClassifierLink, std::io::Error> {
    let opts = port_filter();
    SchedClassifierLink::attached(
        ifname,
        TcAttachType::Ingress,
        opts.priority,
        opts.handle,
        None,
    )
}

impl Dataplane {
    /// Attaches `prog` as the port filter of `ifname` (in the calling thread's
    /// namespace), replacing the filter a previous daemon left at the same place.
    pub(super) fn attach_filter(
        &mut self,
        prog: &'static str,
        ifname: &str,
    ) -> Result<Attachment, DataplaneError> {
        // A Pod NIC's veth gets its clsact before it goes up (`VethSpec::clsact`), so
        // the filter goes straight on; another link gets the qdisc when the first try
        // fails (an adopted or reused one has it already: EEXIST, fine, the second try
        // reports a real failure).
        let attach = |dp: &mut Self| {
            dp.program_mut(prog).map(|p| {
                p.attach_with_options(
                    ifname,
                    TcAttachType::Ingress,
                    TcAttachOptions::Netlink(port_filter()),
                )
            })
        };
        let mut created = attach(self)?;
        if let Err(first) = &created {
            tracing::trace!(ifname, error = %first, "no port filter attached; adding clsact first");
            if let Err(e) = qdisc_add_clsact(ifname) {
                tracing::trace!(ifname, error = %e, "clsact already present");
            }
            created = attach(self)?;
        }
        match created {
            Ok(id) => self.keep_filter(prog, id),
            Err(created) => self.replace_filter(prog, ifname).map_err(|replaced| {
                tracing::debug!(ifname, error = %replaced, "cannot replace a filter either");
                prog_err(prog)(created)
            }),
        }
    }

    /// Switches the program of the port filter already on `ifname` to this instance's
    /// `prog`: a netlink change of the same filter, atomic (no frame sees the
    /// interface without a program). Fails when there is no such filter.
    pub(super) fn replace_filter(
        &mut self,
        prog: &'static str,
        ifname: &str,
    ) -> Result<Attachment, DataplaneError> {
        // The program first: a filter handle dropped on an early return would detach
        // the live filter.
        let program = self.program_mut(prog)?;
        let link = existing(ifname).map_err(|e| prog_err(prog)(ProgramError::IOError(e)))?;
        let id = program.attach_to_link(link).map_err(prog_err(prog))?;
        self.keep_filter(prog, id)
    }

    /// Without a pin folder the program keeps the filter (detached with the
    /// Dataplane, as tests and benchmarks want); a daemon that pins lets it outlive us.
    fn keep_filter(
        &mut self,
        prog: &'static str,
        id: SchedClassifierLinkId,
    ) -> Result<Attachment, DataplaneError> {
        if self.pins.is_none() {
            return Ok(Attachment::Owned { prog, id });
        }
        let link = self
            .program_mut(prog)?
            .take_link(id)
            .map_err(prog_err(prog))?;
        Ok(Attachment::Filter {
            prog,
            link: std::mem::ManuallyDrop::new(link),
        })
    }

    /// Detaches the port filter of `ifname`, if any: a port moved to a TCX link keeps
    /// no filter behind it (one would hold an old program and its maps, and run again
    /// if the link went).
    pub(super) fn drop_filter(ifname: &str) {
        let link = match existing(ifname) {
            Ok(link) => link,
            Err(e) => {
                tracing::warn!(ifname, error = %e, "cannot look for a port filter to drop");
                return;
            }
        };
        match link.detach() {
            Ok(()) => tracing::debug!(ifname, "detached the filter a TCX port replaces"),
            // No filter there (ENOENT), or no clsact at all (EINVAL): nothing to drop.
            Err(aya::programs::ProgramError::NetlinkError(e))
                if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINVAL)) => {}
            Err(e) => {
                tracing::warn!(ifname, error = %e, "cannot drop the port filter a TCX port replaces; it stays behind the TCX link");
            }
        }
    }

    /// Detaches the port filter of every Juneau veth in `veths` (name, ifindex) that this
    /// datapath does not serve: one a previous daemon or layout left on a NIC the
    /// reconcile did not take back (its Pod going, its NIC gone) would otherwise keep
    /// running an old program against maps nobody updates. Returns how many went.
    pub fn detach_unserved_filters(&mut self, veths: &[(String, u32)]) -> usize {
        let unserved: Vec<&(String, u32)> = veths
            .iter()
            .filter(|(_, ifindex)| !self.links.contains_key(ifindex))
            .collect();
        if unserved.is_empty() {
            return 0;
        }
        let found = netlink::with_netlink(None, async |h| {
            let mut out = Vec::new();
            for (name, ifindex) in &unserved {
                let ours = netlink::bpf_filters(&h, *ifindex).await?.iter().any(|f| {
                    f.hook == "tc/ingress"
                        && f.priority == PORT_FILTER_PRIORITY
                        && f.handle == u32::from(TcHandle::new(0, PORT_FILTER_HANDLE))
                });
                if ours {
                    out.push(name.clone());
                }
            }
            Ok(out)
        });
        let names = match found {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list the ports' filters; stale ones stay");
                return 0;
            }
        };
        let mut gone = 0;
        for name in names {
            match existing(&name)
                .map_err(ProgramError::IOError)
                .and_then(Link::detach)
            {
                Ok(()) => {
                    tracing::info!(host = name, "detached a stale port filter");
                    gone += 1;
                }
                Err(e) => {
                    tracing::warn!(host = name, error = %e, "cannot detach a stale port filter")
                }
            }
        }
        gone
    }
}
