//! The P4 targets: a lab's fabric in the turbonet pipeline
//! (`p4/turbonet.p4`) on P4 switches: turbonet's soft switch (`soft`),
//! BMv2 started here, or remote P4Runtime servers (`p4rt`).
//!
//! [`entries`] turns a lab, its mapping onto physical switches
//! ([`turbonet_topo::mapper`]) and its routes into P4Runtime entities for
//! one physical switch; [`session`] keeps a device in step by writing
//! differences (through [`turbonet_p4::Client`]), and [`control`] says
//! what a lab's switch must hold as its routes, links and failures change.
//! [`cpu`] wires the virtual switches' control planes to the pipeline's
//! CPU port.
//!
//! [`soft`] plans a lab onto one soft switch, [`switches`] onto the
//! `[p4rt]` switches (and starts BMv2), [`local`] builds the kernel side
//! of switches that run here (hosts, their ports, cables); the soft switch
//! itself runs as `turbonet softswitch` (`turbonet_softswitch::run`).

pub(crate) mod build;
pub mod control;
pub mod cpu;
pub mod entries;
pub mod local;
mod plane;
pub mod session;
pub mod soft;
pub mod switches;

pub use plane::P4Plane;
