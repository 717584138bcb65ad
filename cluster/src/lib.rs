//! turbonet-cluster: one lab over several machines, one turbonet worker
//! on each, worker 0 coordinating ([`Coordinator`]). Pure and sans-I/O:
//! the coordinator is told what its workers said and when (a virtual
//! clock), and answers with what to tell them; the lab crate carries the
//! messages over the underlay and builds the parts.
//!
//! What the coordinator decides:
//!
//! - **Rendezvous.** Workers connect in any order within a time limit;
//!   each says which part it is, of how many, of which lab, what turbonet
//!   it runs and the hash of the partition it computed from the scenario.
//!   One that disagrees with the coordinator on any of these is refused,
//!   naming both sides. When all are there, every worker is told every
//!   machine's underlay address and builds its part.
//! - **Watch.** A worker that stops sending (its heartbeats missed, or its
//!   connection closed) is lost: the lab is degraded, and every other
//!   worker is told to take down its cut links to that machine (VXLAN has
//!   no carrier: this is how the far end learns). A lost worker that comes
//!   back (restarted, the same part) builds its part again, and its cut
//!   links come back up on the other side once it has.

pub mod coordinator;

pub use coordinator::{Change, Conn, Coordinator, Hello, Input, Output, Phase, Settings, Worker};
