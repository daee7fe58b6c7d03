//! BPF_PROG_TEST_RUN of a TC program, with real interfaces behind the ifindexes it
//! uses: a [`PortBed`] is a namespace of veth pairs whose host ends stand for ports, so
//! `bpf_clone_redirect` copies really leave and are counted by the interface.
use std::time::Duration;

use aya::programs::{SchedClassifier, TestRun, TestRunOptions};

use crate::Netns;

pub const TC_ACT_OK: u32 = 0;
pub const TC_ACT_SHOT: u32 = 2;
pub const TC_ACT_REDIRECT: u32 = 7;

/// Offset of `ingress_ifindex` in `struct __sk_buff`; the test run copies it to the
/// skb, so the program sees the frame arrive on that interface.
const INGRESS_IFINDEX_OFFSET: usize = 36;

pub struct Run {
    pub verdict: u32,
    pub data: Vec<u8>,
    /// Mean time per run, as measured by the kernel.
    pub per_run: Duration,
}

/// The `__sk_buff` context of a frame arriving on `ingress`.
fn ctx_for(ingress: u32) -> [u8; INGRESS_IFINDEX_OFFSET + 4] {
    let mut ctx = [0u8; INGRESS_IFINDEX_OFFSET + 4];
    ctx[INGRESS_IFINDEX_OFFSET..].copy_from_slice(&ingress.to_ne_bytes());
    ctx
}

/// Runs `prog` once on each frame, all arriving on `ingress`, on one thread inside
/// `ns` (a thread per run would dominate when teaching a table many MACs).
pub fn run_tc_each(
    ns: &Netns,
    prog: &SchedClassifier,
    ingress: u32,
    frames: &mut (dyn Iterator<Item = Vec<u8>> + Send),
) {
    let ctx = ctx_for(ingress);
    ns.run(|| {
        for f in frames {
            prog.test_run(TestRunOptions {
                data_in: Some(&f),
                ctx_in: Some(&ctx),
                repeat: 1,
                ..Default::default()
            })
            .expect("BPF_PROG_TEST_RUN");
        }
    })
}

/// Runs `prog` `repeat` times on `frame` arriving on `ingress`, inside `ns` (helpers
/// that look interfaces up resolve them there).
pub fn run_tc(ns: &Netns, prog: &SchedClassifier, ingress: u32, frame: &[u8], repeat: u32) -> Run {
    try_run_tc(ns, prog, ingress, frame, repeat).expect("BPF_PROG_TEST_RUN")
}

/// [`run_tc`], with the kernel's refusal of the input (a frame BPF_PROG_TEST_RUN
/// cannot make an skb of) returned instead of a panic: for the fuzzer, whose inputs
/// may be such frames.
pub fn try_run_tc(
    ns: &Netns,
    prog: &SchedClassifier,
    ingress: u32,
    frame: &[u8],
    repeat: u32,
) -> Result<Run, aya::programs::ProgramError> {
    let ctx = ctx_for(ingress);
    let mut out = vec![0u8; frame.len() + 256];
    let result = ns.run(|| {
        prog.test_run(TestRunOptions {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ctx_in: Some(&ctx),
            repeat,
            ..Default::default()
        })
    });
    let result = result?;
    out.truncate(result.data_size_out as usize);
    Ok(Run {
        verdict: result.return_value,
        data: out,
        per_run: result.duration,
    })
}

/// As [`run_tc`] (once), the frame received by interface `dev` itself (`ifindex` too):
/// the kernel classifies it against that interface's MAC (`pkt_type`), as for a frame
/// from the wire.
pub fn run_tc_on_dev(ns: &Netns, prog: &SchedClassifier, dev: u32, frame: &[u8]) -> Run {
    ns.run(|| run_tc_on_dev_here(prog, dev, frame))
}

/// [`run_tc_on_dev`] from a thread already in the interface's namespace: a benchmark
/// enters it once for all its runs, so that no thread is made and ended between two
/// runs (which leaves the caches cold and the kernel's helpers slow to reach, a cost
/// of the harness, not of the program).
pub fn run_tc_on_dev_here(prog: &SchedClassifier, dev: u32, frame: &[u8]) -> Run {
    let mut ctx = [0u8; INGRESS_IFINDEX_OFFSET + 8];
    ctx[INGRESS_IFINDEX_OFFSET..INGRESS_IFINDEX_OFFSET + 4].copy_from_slice(&dev.to_ne_bytes());
    ctx[INGRESS_IFINDEX_OFFSET + 4..].copy_from_slice(&dev.to_ne_bytes());
    let mut out = vec![0u8; frame.len() + 256];
    let result = prog.test_run(TestRunOptions {
        data_in: Some(frame),
        data_out: Some(&mut out),
        ctx_in: Some(&ctx),
        repeat: 1,
        ..Default::default()
    });
    let result = result.expect("BPF_PROG_TEST_RUN");
    out.truncate(result.data_size_out as usize);
    Run {
        verdict: result.return_value,
        data: out,
        per_run: result.duration,
    }
}

/// `n` veth pairs `h<i>` / `x<i>` in one namespace, all up.
pub struct PortBed {
    pub ns: Netns,
    pub ports: Vec<(String, u32)>,
}

impl PortBed {
    pub fn new(n: usize) -> PortBed {
        let ns = Netns::new("bed");
        let mut ports = Vec::new();
        for i in 0..n {
            let (h, x) = (format!("h{i}"), format!("x{i}"));
            ns.ip(&["link", "add", &h, "type", "veth", "peer", "name", &x]);
            ns.ip(&["link", "set", &h, "up"]);
            ns.ip(&["link", "set", &x, "up"]);
            let index = ns.run(|| {
                let c = std::ffi::CString::new(h.clone()).unwrap();
                // SAFETY: a C string we own.
                unsafe { libc::if_nametoindex(c.as_ptr()) }
            });
            ports.push((h, index));
        }
        PortBed { ns, ports }
    }

    pub fn ifindex(&self, i: usize) -> u32 {
        self.ports[i].1
    }

    /// Gives the bed an underlay (`ul0`, 10.99.0.1/24) and brings the Node's datapath
    /// up on it with the daemon's own bring-up (VXLAN device, overlay and underlay
    /// programs), as Node 10.99.0.1.
    pub fn bring_up_node(&self) -> juneau::node::dataplane::Whole {
        self.ns
            .ip(&["link", "add", "ul0", "type", "veth", "peer", "name", "ulp"]);
        self.ns.ip(&["addr", "add", "10.99.0.1/24", "dev", "ul0"]);
        self.ns.ip(&["link", "set", "ul0", "up"]);
        self.ns.ip(&["link", "set", "ulp", "up"]);
        let setup = juneau::node::daemon::NodeSetup {
            underlay: "ul0".into(),
            vtep: std::net::Ipv4Addr::new(10, 99, 0, 1),
            vxlan_mtu: 1450,
            pin_root: None,
            datapath_encap: true,
            port_attach: Default::default(),
            ct_entries: juneau_common::ct::DEFAULT_ENTRIES,
        };
        self.ns
            .run(|| juneau::node::daemon::bring_up(&setup))
            .and_then(|dp| Ok(juneau::node::dataplane::Whole::of(dp)?))
            .expect("bring up the Node")
    }

    /// `prog` run once on `frame` arriving on port `i`.
    pub fn send(&self, prog: &SchedClassifier, i: usize, frame: &[u8]) -> Run {
        run_tc(&self.ns, prog, self.ifindex(i), frame, 1)
    }

    /// Frames sent out of port `i` so far.
    pub fn tx(&self, i: usize) -> u64 {
        self.ns.counter(&self.ports[i].0, "tx_packets")
    }
}
