//! Rebuild the eBPF objects when bpf-linker changes (it is the linker of this crate).
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
