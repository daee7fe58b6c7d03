//! L2Network switching: learn the source, forward by destination MAC only (L2-01,
//! L2-28). Nothing above the Ethernet header is read (but the EtherType of an oversize
//! frame), so every protocol passes. The hooks compose these stages
//! (`hooks::port`, `hooks::overlay`).
pub mod flood;
pub mod forward;
pub mod learn;
