//! Builds the eBPF programs of `ebpf/juneau-ebpf` with aya-build so that a plain
//! `cargo build` embeds them in the daemon. The stable toolchain is used with
//! `RUSTC_BOOTSTRAP=1` (set in `.cargo/config.toml`): no nightly is needed.
fn main() -> anyhow::Result<()> {
    let package = aya_build::Package {
        name: "juneau-ebpf",
        root_dir: "ebpf/juneau-ebpf",
        ..Default::default()
    };
    println!("cargo:rerun-if-changed=ebpf/juneau-common/src");
    aya_build::build_ebpf([package], aya_build::Toolchain::Custom("stable"))
}
