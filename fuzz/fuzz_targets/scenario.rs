//! Scenario files: parse and check answer with a message naming the field, never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = juneau::scenario::Scenario::parse(text);
});
