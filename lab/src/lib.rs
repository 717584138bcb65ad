//! turbonet-lab: everything a `turbonet` command does, as a library. The
//! `turbonet` binary parses arguments, calls in here and prints.
//!
//! A lab is a scenario (`turbonet-topo`) brought up on a data plane: this
//! machine's kernel (the `netns` target) or P4 switches (the `soft` and
//! `p4rt` targets), with routes from a route source (`static`,
//! `controller`, `bgp`, or `manual`: the user's), and kept running by a
//! per-lab daemon.
//!
//! What it asks of the machine (the kernel's network side, namespaces,
//! processes) goes through `turbonet-host`; what crosses its control API
//! (the protocol, events, counters, BGP status, workload reports) is
//! `turbonet-api`'s.
//!
//! Layers, lowest first (a module uses only those above it in this list):
//!
//! - [`error`], [`names`], [`lookup`], [`hostnames`], [`topology`],
//!   [`pcapng`], [`carrier`], [`span`]: the error type, how turbonet names
//!   what it creates, finding what users name, how programs in a lab find
//!   nodes by name, the fabric as data for tools outside turbonet, captures
//!   as files, how each link is carried, and which part of a lab over
//!   several machines runs here;
//! - [`state`], [`limits`], [`progress`]: a lab's directory and its record
//!   of ownership; the machine-wide limits every lab that is up shares; how
//!   long commands report as they go;
//! - [`events`]: what happened, on one clock;
//! - [`dataplane`]: the targets' builders and run-time control;
//! - [`routes`]: route sources, the BGP agents among them;
//! - [`workload`]: workloads (flows, collectives, commands) run in the
//!   hosts' namespaces;
//! - [`daemon`], [`workers`]: the per-lab daemon, serving the control API
//!   (`turbonet-api`); a lab over several machines on the wire (the
//!   coordinator's service, a worker's attendance);
//! - the verbs: [`up`], [`down`], [`inspect`] (with [`parts`]: a lab over
//!   several machines read from any of them), [`check`], [`exec`] (with
//!   [`mpi`]), [`plan`], [`watch`] (with [`graph`]), [`capture`],
//!   [`serve`] (labs for a group's members without root);
//! - [`worker`]: `turbonet worker`, this machine's part of a lab over
//!   several, built and taken down as the coordinator says.
//!
//! Above it, each in a crate of its own: experiments (`turbonet-experiment`),
//! graded labs (`turbonet-course`), the web view (`turbonet-ui`) and the
//! benchmarks (`turbonet-bench`).
//!
//! Nothing here prints: results come back as values, progress through
//! [`progress::Progress`], and the daemon logs with `tracing`.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod capture;
pub mod carrier;
pub mod check;
pub mod daemon;
pub mod dataplane;
pub mod down;
pub mod error;
pub mod events;
pub mod exec;
pub mod graph;
pub mod hostnames;
pub mod inspect;

pub mod limits;
pub mod lookup;
pub mod mpi;
pub mod names;
pub mod parts;
pub mod pcapng;
pub mod plan;
pub mod progress;
pub mod routes;
pub mod serve;
pub mod span;
pub mod state;

pub mod topology;
pub mod up;
pub mod watch;
pub mod worker;
pub mod workers;
pub mod workload;

pub use error::{Error, Result};
