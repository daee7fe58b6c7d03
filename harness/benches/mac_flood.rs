//! A MAC flood on one segment: one Pod sends frames with a new source MAC each (as fast as
//! the generator can, on CPU 0) while another Pod sends known unicast to a third (on
//! CPU 1). Reported: the rate the third Pod still receives, Juneau beside a Linux bridge
//! under the same flood in the same run, and each beside its own rate without a flood.
//! Juneau's segment table fills and refuses the rest (counted), keeping its hosts; the
//! bridge learns every source.
use std::time::Duration;

use juneau_harness::{
    Netns, Node,
    bench::{LiveFrames, Measurement, gro_on, median, plain_pods, write_part},
    capture::inject,
    frames::{self, BROADCAST, fixtures::*},
};

/// Measured frames per round (A -> B), and the flood's (long enough to outlast them).
const FRAMES: u32 = 500_000;
const FLOOD_FRAMES: u32 = 6_000_000;
const ROUNDS: usize = 3;

/// Pods 0 (sender), 1 (receiver), 2 (flooder), 3 (the flood's destination).
struct Bed {
    pods: Vec<Netns>,
    _keep: Box<dyn std::any::Any>,
}

/// Every Pod speaks once, so that each destination is known unicast.
fn introduce(pods: &[Netns]) {
    for (i, pod) in pods.iter().enumerate() {
        inject(
            pod,
            "eth0",
            &frames::raw(BROADCAST, pod_mac(i as u8), 0x88b5, b"hi"),
        );
    }
    std::thread::sleep(Duration::from_millis(100));
}

fn juneau_bed() -> Bed {
    let mut node = Node::new();
    for i in 0..4 {
        node.add_pod(i, 1);
    }
    gro_on(&node.ns, "jp0");
    gro_on(&node.ns, "jp2");
    let pods: Vec<Netns> = node.pods.drain(..).map(|p| p.ns).collect();
    introduce(&pods);
    Bed {
        pods,
        _keep: Box::new(node),
    }
}

fn bridge_bed() -> Bed {
    let (node, pods) = plain_pods(4);
    node.ip(&["link", "add", "br0", "type", "bridge"]);
    node.ip(&["link", "set", "br0", "up"]);
    for i in 0..4 {
        node.ip(&["link", "set", &format!("h{i}"), "master", "br0"]);
    }
    gro_on(&node, "h0");
    gro_on(&node, "h2");
    introduce(&pods);
    Bed {
        pods,
        _keep: Box::new(node),
    }
}

/// A -> B Mpps, without and then under a flood from pod 2 to pod 3.
fn round(quiet_gen: &LiveFrames, flood_gen: &LiveFrames, bed: &Bed) -> (f64, f64) {
    let unicast = frames::raw(pod_mac(1), pod_mac(0), 0x88b5, b"kept");
    let flood = frames::raw(pod_mac(3), [0; 6], 0x88b5, b"flood");
    let p = &bed.pods;
    let quiet = quiet_gen.blast(&p[0], "eth0", &p[1], &unicast, FRAMES);
    let under = std::thread::scope(|s| {
        let flooding = s.spawn(|| {
            flood_gen.blast_with(
                "xdp_tx_new_source",
                0,
                &p[2],
                "eth0",
                &p[3],
                &flood,
                FLOOD_FRAMES,
            )
        });
        std::thread::sleep(Duration::from_millis(200));
        let under = quiet_gen.blast(&p[0], "eth0", &p[1], &unicast, FRAMES);
        assert!(
            !flooding.is_finished(),
            "the flood ended before the measurement: raise FLOOD_FRAMES"
        );
        let flood_rate = flooding.join().unwrap();
        println!("  flood delivered {flood_rate:.2} Mpps");
        under
    });
    (quiet, under)
}

fn main() {
    let (quiet_gen, flood_gen) = (LiveFrames::load(), LiveFrames::load());
    let beds = [("juneau", juneau_bed()), ("linux bridge", bridge_bed())];
    let mut quiet = vec![Vec::new(); beds.len()];
    let mut under = vec![Vec::new(); beds.len()];
    for _ in 0..ROUNDS {
        for (i, (name, bed)) in beds.iter().enumerate() {
            let (q, u) = round(&quiet_gen, &flood_gen, bed);
            println!("{name}: {q:.2} Mpps quiet, {u:.2} Mpps under the flood");
            quiet[i].push(q);
            under[i].push(u);
        }
    }
    let q: Vec<f64> = quiet.iter_mut().map(|v| median(v)).collect();
    let u: Vec<f64> = under.iter_mut().map(|v| median(v)).collect();
    write_part(
        "mac_flood",
        &[
            Measurement::new(
                "pps_mac_flood_vs_linux_bridge",
                "Mpps",
                u[0],
                ("linux_bridge", u[1]),
                "goal >= 1.0; known unicast between two Pods while a third sends a new source MAC per frame (CPU 0) to a fourth; median of 3 interleaved rounds",
            ),
            Measurement::new(
                "pps_mac_flood_juneau_kept",
                "Mpps",
                u[0],
                ("juneau_without_flood", q[0]),
                "the same rate beside Juneau's own without the flood, same run",
            ),
            Measurement::new(
                "pps_mac_flood_bridge_kept",
                "Mpps",
                u[1],
                ("linux_bridge_without_flood", q[1]),
                "the bridge's rate under the flood beside its own without it",
            ),
        ],
    );
}
