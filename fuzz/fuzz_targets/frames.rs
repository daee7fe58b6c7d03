//! The harness's frame decoder (goldens' text, failure messages) over any bytes a
//! capture may hold, and the port alias parser over any alias a link may carry.
#![no_main]
use juneau::node::veth::PortAlias;
use juneau_harness::decode;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|frame: &[u8]| {
    let mut copy = frame.to_vec();
    decode::normalize_underlay(&mut copy);
    let _ = decode::render(&[frame.to_vec(), copy]);
    if let Some(p) = std::str::from_utf8(frame).ok().and_then(PortAlias::parse) {
        // What parse accepts, render gives back.
        assert_eq!(PortAlias::parse(&p.render()), Some(p));
    }
});
