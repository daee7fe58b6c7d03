//! Shared fixtures of the fuzz targets.
use std::sync::OnceLock;

use juneau::{
    admission::Snapshot,
    store::{Object, Store},
};

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
