//! The test harness: builds Node and Pod network namespaces on one machine, plumbs them
//! with the daemon's own code, injects raw frames, captures what every interface
//! receives and compares it with golden pcaps under `pcaps/`.
//!
//! Every namespace is uniquely named (`jn-<role>-<pid>-<n>`) and deleted by name when
//! its guard drops, also when a test fails: tests run in parallel and leave nothing.
pub mod bench;
pub mod capture;
pub mod crr;
pub mod decode;
pub mod frames;
pub mod golden;
pub mod netns;
pub mod node;
pub mod policy_tables;
pub mod router;
pub mod scenario;
pub mod scene;
pub mod testrun;
pub mod two_subnets;
pub mod uplink;

pub use capture::Capture;
pub use netns::Netns;
pub use node::{Node, Pod};
