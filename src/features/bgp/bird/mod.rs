//! The Nodes' BGP speaker, BIRD 2 (docs/bgp-plan.md, section 2): its configuration
//! rendered from the intent (`render`, pure), its control socket (`ctl`), and what its
//! replies say (`state`, pure). Every parser is tested on text captured from a real
//! bird 2.0.12 (`../testdata/`), never on a guess.
pub mod ctl;
pub mod render;
pub mod state;
