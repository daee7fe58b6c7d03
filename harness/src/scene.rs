//! A running topology with a capture on every Pod and on every Node's underlay port,
//! driven step by step: inject a frame, collect what every capture saw.
use std::time::Duration;

use crate::{
    Capture, capture::inject, decode::normalize_underlay, golden::assert_goldens, node::Cluster,
};

const QUIET: Duration = Duration::from_millis(150);

pub struct Scene {
    /// Pod captures `node<n>-pod<p>` first, then underlay captures `underlay-node<n>`
    /// (what Node n sent onto the underlay).
    pub caps: Vec<Capture>,
    pub record: Vec<Vec<Vec<u8>>>,
    pod_caps: usize,
    pub cluster: Cluster,
}

/// What one step delivered, by capture.
pub struct Seen(pub Vec<Vec<Vec<u8>>>);

impl Scene {
    pub fn new(cluster: Cluster) -> Scene {
        let mut caps = Vec::new();
        for (n, node) in cluster.nodes.iter().enumerate() {
            for (p, pod) in node.pods.iter().enumerate() {
                caps.push(Capture::start(
                    &pod.ns,
                    &pod.ifname,
                    &format!("node{n}-pod{p}"),
                ));
            }
        }
        let pod_caps = caps.len();
        for n in 0..cluster.nodes.len() {
            caps.push(Capture::start(
                &cluster.underlay,
                &format!("n{n}"),
                &format!("underlay-node{n}"),
            ));
        }
        Scene {
            record: vec![Vec::new(); caps.len()],
            caps,
            pod_caps,
            cluster,
        }
    }

    fn index(&self, name: &str) -> usize {
        self.caps
            .iter()
            .position(|c| c.name == name)
            .unwrap_or_else(|| panic!("no capture {name}"))
    }

    /// Collects what arrived since the last step, without sending.
    pub fn settle(&mut self) -> Seen {
        let mut seen = Vec::new();
        for (i, c) in self.caps.iter().enumerate() {
            let mut frames = c.received(QUIET);
            if i >= self.pod_caps {
                frames.iter_mut().for_each(|f| normalize_underlay(f));
            }
            self.record[i].extend(frames.iter().cloned());
            seen.push(frames);
        }
        Seen(seen)
    }

    /// Sends `frame` from Pod `p` of Node `n` and collects.
    pub fn send(&mut self, n: usize, p: usize, frame: &[u8]) -> Seen {
        let pod = self.cluster.pod(n, p);
        inject(&pod.ns, &pod.ifname, frame);
        self.settle()
    }

    pub fn frames<'a>(&self, seen: &'a Seen, name: &str) -> &'a Vec<Vec<u8>> {
        &seen.0[self.index(name)]
    }

    /// Number of frames each Pod capture got in a step, by name.
    pub fn pod_counts(&self, seen: &Seen) -> Vec<(String, usize)> {
        self.caps[..self.pod_caps]
            .iter()
            .zip(&seen.0)
            .map(|(c, f)| (c.name.clone(), f.len()))
            .collect()
    }

    /// Compares everything recorded with `pcaps/<test>/`.
    pub fn assert_goldens(&self, test: &str) {
        let pairs: Vec<_> = self.caps.iter().zip(self.record.iter().cloned()).collect();
        assert_goldens(test, &pairs);
    }
}
