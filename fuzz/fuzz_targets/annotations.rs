//! Pod annotations, as a tenant writes them: `parse` and the webhook's Pod rule over a
//! populated snapshot must answer (Ok or a message), never panic.
#![no_main]
use std::collections::BTreeMap;

use juneau::{admission::validate, api::annotations};
use juneau_fuzz::snapshot;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (String, String, Vec<(String, String)>)| {
    let (networks, skip, extra) = input;
    let mut a: BTreeMap<String, String> = extra.into_iter().collect();
    a.insert("juneau.loutres.me/networks".into(), networks);
    a.insert("juneau.loutres.me/dns-inject-skip".into(), skip);
    let parsed = annotations::parse(&a);
    let verdict = validate::validate_pod_create(&a, snapshot());
    // A rule that accepts what the parser refuses would plumb an unreadable Pod.
    if parsed.is_err() {
        assert!(
            verdict.is_err(),
            "the webhook accepted annotations parse() refuses"
        );
    }
});
