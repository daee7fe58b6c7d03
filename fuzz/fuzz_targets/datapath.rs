//! libFuzzer's entry for `juneau_fuzz::datapath::datapath` (what it checks is said there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| juneau_fuzz::datapath::datapath(data));
