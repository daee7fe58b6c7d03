//! The eBPF object's census: for every program, the instructions the kernel's verifier
//! processed when the daemon's own bring-up loaded it, and for every function of the
//! object (programs and BPF-to-BPF subprograms) its instruction count and a hash of its
//! code as `llvm-objdump` prints it (relocations by symbol name, jumps relative, no
//! addresses). A restructuring that leaves every hash alone changed no instruction of
//! the datapath; one that changes a hash names the function to look at.
//!
//! `cargo run -p juneau-harness --example census` (root: the bed is a network
//! namespace) prints the census as Markdown; `docs/ebpf-census.md` keeps the last one.
//! `JN_CENSUS_DUMP=<function>` prints one function's normalized lines instead.
use std::{collections::BTreeMap, process::Command};

use juneau_harness::testrun::PortBed;

/// Each function's normalized instructions, from the object's disassembly: no
/// addresses, relocations by symbol name, and a reference into `.text` (a call to a
/// subprogram, a callback's address) by the name of the function there, so that a
/// subprogram placed elsewhere in `.text` changes no caller.
fn functions(object: &[u8]) -> BTreeMap<String, Vec<String>> {
    let path = std::env::temp_dir().join(format!("juneau-census-{}.o", std::process::id()));
    std::fs::write(&path, object).expect("write the object");
    let objdump = |args: &[&str]| {
        let out = Command::new("llvm-objdump")
            .args(args)
            .arg(&path)
            .output()
            .expect("llvm-objdump (Debian's llvm package)");
        assert!(out.status.success(), "llvm-objdump {args:?} failed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let (symbols, text) = (
        objdump(&["-t"]),
        objdump(&["-d", "-r", "--no-show-raw-insn"]),
    );
    let _ = std::fs::remove_file(&path);
    // `.text` offset -> function name.
    let in_text: BTreeMap<u64, String> = symbols
        .lines()
        .filter(|l| l.contains(" F .text"))
        .filter_map(|l| {
            let offset = u64::from_str_radix(l.split_whitespace().next()?, 16).ok()?;
            Some((offset, l.split_whitespace().last()?.to_owned()))
        })
        .collect();
    let name_at = |offset: i64| {
        u64::try_from(offset)
            .ok()
            .and_then(|o| in_text.get(&o))
            .map_or_else(|| format!(".text+{offset}"), |n| demangle(n))
    };
    let mut all: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Disassembly of section") {
            current = None;
            continue;
        }
        if let Some(name) = line
            .split_once(" <")
            .and_then(|(_, n)| n.strip_suffix(">:"))
        {
            current = Some(name.to_owned());
            continue;
        }
        let Some(name) = &current else {
            continue;
        };
        let Some(list) = (!line.is_empty()).then(|| all.entry(name.clone()).or_default()) else {
            continue;
        };
        if let Some((_, rel)) = line.split_once(":  R_") {
            let rel = format!("R_{}", rel.split_whitespace().collect::<Vec<_>>().join(" "));
            if rel.ends_with(" .text")
                && let Some(last) = list.last_mut()
            {
                // The instruction before names a place in `.text`: a call's immediate
                // is (offset / 8 - 1), an address load's the offset.
                let imm = |s: &str| {
                    s.split_whitespace()
                        .nth(if s.starts_with("call") { 1 } else { 2 })?
                        .parse::<i64>()
                        .ok()
                };
                if let Some(v) = imm(last) {
                    let target = if last.starts_with("call") {
                        (v + 1) * 8
                    } else {
                        v
                    };
                    *last = format!(
                        "{} <{}>",
                        last.split_whitespace().next().unwrap_or(""),
                        name_at(target)
                    );
                }
            }
            list.push(rel);
            continue;
        }
        // `  94:\tcall -1`: the instruction without its index.
        if let Some((_, insn)) = line.split_once(":\t") {
            list.push(insn.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    all
}

/// A Rust symbol's path (`juneau::svc::untangle` for `_RNvNtCs.._6juneau3svc8untangle`),
/// read from its v0 mangling's identifiers after the crate's; others as they are.
fn demangle(symbol: &str) -> String {
    let Some(at) = symbol.find("6juneau") else {
        return symbol.to_owned();
    };
    let mut rest = &symbol[at..];
    let mut parts = Vec::new();
    while let Some(digits) = rest.find(|c: char| !c.is_ascii_digit()).filter(|d| *d > 0) {
        let Ok(len) = rest[..digits].parse::<usize>() else {
            break;
        };
        let Some(ident) = rest.get(digits..digits + len) else {
            break;
        };
        parts.push(ident);
        rest = &rest[digits + len..];
    }
    parts.join("::")
}

/// FNV-1a, 64 bits: a stable hash without a dependency.
fn fnv(lines: &[String]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lines.iter().flat_map(|l| l.bytes().chain([b'\n'])) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn main() {
    let bed = PortBed::new(1);
    let dp = bed.bring_up_node();
    let functions = functions(juneau::EBPF_OBJECT);
    // `JN_CENSUS_DUMP=<function>`: its normalized lines, to diff two builds.
    if let Ok(name) = std::env::var("JN_CENSUS_DUMP") {
        for (f, lines) in &functions {
            if *f == name || demangle(f) == name {
                lines.iter().for_each(|l| println!("{l}"));
            }
        }
        return;
    }
    let insns = |f: &[String]| f.iter().filter(|l| !l.starts_with("R_")).count();
    println!("| program | verified insns | object insns | code hash |");
    println!("|---|---|---|---|");
    for name in juneau_common::prog_names::ALL {
        let verified = dp
            .program(name)
            .info()
            .ok()
            .and_then(|i| i.verified_instruction_count())
            .unwrap_or(0);
        let f = functions.get(name).map(Vec::as_slice).unwrap_or_default();
        println!("| `{name}` | {verified} | {} | {:016x} |", insns(f), fnv(f));
    }
    println!();
    println!("| subprogram | object insns | code hash |");
    println!("|---|---|---|");
    for (name, f) in &functions {
        if juneau_common::prog_names::ALL.contains(&name.as_str()) {
            continue;
        }
        println!("| `{}` | {} | {:016x} |", demangle(name), insns(f), fnv(f));
    }
}
