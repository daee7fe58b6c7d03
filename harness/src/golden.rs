//! Golden pcaps: `pcaps/<test>/<capture>.pcap` with a decoded `.txt` beside it.
//!
//! Timestamps are synthetic (frame `i` at `i` ms) so a golden depends only on the bytes
//! that crossed the interface. `UPDATE_GOLDEN=1` rewrites goldens instead of comparing.
use std::{
    fmt::Write as _,
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use pcap_file::{
    DataLink,
    pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter},
};

use crate::{Capture, decode};

/// `pcaps/` at the workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcaps")
}

pub fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(File::create(path).unwrap(), header).unwrap();
    for (i, f) in frames.iter().enumerate() {
        let ts = Duration::from_millis(i as u64);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
            .unwrap();
    }
}

pub fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::new(File::open(path).unwrap()).unwrap();
    let mut frames = Vec::new();
    while let Some(p) = r.next_packet() {
        frames.push(p.unwrap().data.into_owned());
    }
    frames
}

/// Differences between two captures, layer by layer; empty when equal.
pub fn diff(want: &[Vec<u8>], got: &[Vec<u8>]) -> String {
    let mut out = String::new();
    if want.len() != got.len() {
        let _ = writeln!(
            out,
            "  frame count: golden {} captured {}",
            want.len(),
            got.len()
        );
    }
    for i in 0..want.len().max(got.len()) {
        let w = want.get(i).map(|f| decode::layers(f)).unwrap_or_default();
        let g = got.get(i).map(|f| decode::layers(f)).unwrap_or_default();
        if w == g {
            continue;
        }
        let _ = writeln!(out, "  frame {i}:");
        for j in 0..w.len().max(g.len()) {
            match (w.get(j), g.get(j)) {
                (Some(a), Some(b)) if a == b => {}
                (a, b) => {
                    if let Some(a) = a {
                        let _ = writeln!(out, "    - {a}");
                    }
                    if let Some(b) = b {
                        let _ = writeln!(out, "    + {b}");
                    }
                }
            }
        }
    }
    out
}

/// Compares each capture with `pcaps/<test>/<capture name>.pcap`, reporting every
/// mismatch at once (golden `-`, captured `+`).
pub fn assert_goldens(test: &str, captures: &[(&Capture, Vec<Vec<u8>>)]) {
    let dir = root().join(test);
    let update = std::env::var("UPDATE_GOLDEN").is_ok_and(|v| v == "1");
    let mut failures = String::new();
    for (cap, frames) in captures {
        let pcap = dir.join(format!("{}.pcap", cap.name));
        let txt = dir.join(format!("{}.txt", cap.name));
        if update {
            write_pcap(&pcap, frames);
            std::fs::write(&txt, decode::render(frames)).unwrap();
            continue;
        }
        if !pcap.exists() {
            let _ = writeln!(
                failures,
                "{}: no golden at {} (run with UPDATE_GOLDEN=1 to create it)",
                cap.name,
                pcap.display()
            );
            continue;
        }
        let want = read_pcap(&pcap);
        let d = diff(&want, frames);
        if !d.is_empty() {
            let _ = writeln!(
                failures,
                "{} differs from {}:\n{d}",
                cap.name,
                pcap.display()
            );
        }
    }
    assert!(
        failures.is_empty(),
        "golden mismatch in {test}:\n{failures}"
    );
}
