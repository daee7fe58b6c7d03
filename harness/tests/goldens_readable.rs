//! The goldens are ordinary pcaps: a real reader (tshark) must read every one of them
//! and count the same frames as the harness, and the `.txt` beside each must be its
//! decoding.
use juneau_harness::{
    decode::render,
    golden::{read_pcap, root},
};

#[test]
fn every_golden_pcap_is_read_by_tshark_and_its_txt_is_its_decoding() {
    let mut checked = 0;
    for dir in std::fs::read_dir(root()).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&dir).unwrap() {
            let pcap = f.unwrap().path();
            if pcap.extension().is_none_or(|e| e != "pcap") {
                continue;
            }
            let out = std::process::Command::new("tshark")
                .args(["-n", "-T", "fields", "-e", "frame.number", "-r"])
                .arg(&pcap)
                .output()
                .expect("tshark is installed by cargo xtask bootstrap");
            assert!(
                out.status.success(),
                "tshark cannot read {}",
                pcap.display()
            );
            let frames = String::from_utf8_lossy(&out.stdout).lines().count();
            assert_eq!(frames, read_pcap(&pcap).len(), "{}", pcap.display());
            // The decoded text reviewers read must say what the pcap holds.
            let txt = std::fs::read_to_string(pcap.with_extension("txt"))
                .unwrap_or_else(|e| panic!("no decoded .txt beside {}: {e}", pcap.display()));
            assert_eq!(
                txt,
                render(&read_pcap(&pcap)),
                "{} is stale: rewrite it with UPDATE_GOLDEN=1 and review the diff",
                pcap.with_extension("txt").display()
            );
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} goldens found");
}
