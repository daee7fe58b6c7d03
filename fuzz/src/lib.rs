//! The fuzz targets' bodies, one function per parser of untrusted input, each taking
//! the raw bytes libFuzzer hands over. The libFuzzer binaries (`fuzz_targets/`, built
//! with `--features libfuzzer` by `cargo xtask fuzz`) only wrap them; the suite runs
//! the same functions in the normal build (`tests/replay.rs`: the committed seeds,
//! past findings and a bounded number of generated inputs), so it needs no
//! instrumented build of the whole tree.
use std::sync::OnceLock;

use arbitrary::{Arbitrary, Unstructured};
use juneau::{
    admission::Snapshot,
    store::{Object, Store},
};

pub mod datapath;
pub mod targets;

/// One target: the bytes libFuzzer (or the replay test) hands over.
pub type Target = fn(&[u8]);

/// Every target by name, as `cargo fuzz` and `fuzz/corpus/<name>` name them.
pub const TARGETS: &[(&str, Target)] = &[
    ("annotations", targets::annotations),
    ("cni_invocation", targets::cni_invocation),
    ("scenario", targets::scenario),
    ("admission_review", targets::admission_review),
    ("frames", targets::frames),
    ("datapath", datapath::datapath),
];

/// Reads a typed input out of the bytes as libfuzzer-sys's typed `fuzz_target!` does
/// (`arbitrary_take_rest`), so a corpus entry means the same input in both builds.
/// `None`: the bytes decode to no input (libFuzzer skips those too).
pub fn typed<'a, T: Arbitrary<'a>>(data: &'a [u8]) -> Option<T> {
    T::arbitrary_take_rest(Unstructured::new(data)).ok()
}

/// A snapshot with the README demo's objects, so that the rules that look things up
/// find something.
pub fn snapshot() -> &'static Snapshot {
    static SNAP: OnceLock<Snapshot> = OnceLock::new();
    SNAP.get_or_init(|| {
        let demo = include_str!("../../scenarios/stack/l2-demo.yaml");
        let s = juneau::scenario::Scenario::parse(demo).expect("the demo scenario parses");
        let store = Store::new();
        for o in s.objects {
            store
                .create(Object::from_value(o).expect("the demo's objects read"))
                .expect("the demo's objects are admitted");
        }
        store.read().0.objects
    })
}
