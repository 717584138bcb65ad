//! turbonet-kernel-engine: the link model of `turbonet-injectors` as a
//! tc-BPF program, for kernels with `sch_fq`.
//!
//! The program (`bpf/link.bpf.c`, compiled by clang when this crate is
//! built) runs at the ingress of a link's ports in the engine namespace.
//! Per direction it makes the userspace model's decisions — loss,
//! duplication, corruption, the rate queue with tail drop and ECN marks,
//! delay and uniform jitter — from the same ChaCha8 stream, then clones the
//! frame to the far port stamped with its due time, where `fq` holds it
//! until then (earliest departure time). The same seed and arrivals give
//! the same decisions in both engines, which the tests prove frame by
//! frame with `BPF_PROG_TEST_RUN`.
//!
//! [`abi`] mirrors the maps and says which parameters the program can
//! honour ([`Params::new`]); [`Program`] loads it and fills the maps.

pub mod abi;
pub mod program;

pub use abi::{HOLD_MAX, Params, RING, State, Trace, Unsupported, Verdict, honours};
pub use program::{Error, Mode, Program};
