//! libFuzzer's entry for `juneau_fuzz::targets::annotations` (what it checks is said there).
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| juneau_fuzz::targets::annotations(data));
