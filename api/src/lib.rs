//! turbonet-api: the control API of a running lab
//! (`proto/turbonet/v1/lab.proto`, package `turbonet.v1`). The generated
//! messages and gRPC service ([`proto`]); the values that cross the wire
//! as the lab keeps them ([`events`], [`counters`], [`bgp`] status,
//! [`workload`] reports) and their conversions (units stay typed across
//! the wire); the [`client`] the command line uses, with its own
//! [`Error`]. The lab daemon (`turbonet-lab`) serves it on the lab's Unix
//! socket, [`socket_path`], created root-only.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub mod bgp;
pub mod client;
mod convert;
pub mod counters;
pub mod error;
pub mod events;
pub mod workload;

pub use client::Client;
pub use error::{Error, Kind, Result};

/// What a `fail` or `restore` acts on: a link, or every link of a node,
/// by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A link.
    Link(String),
    /// A node: all its links.
    Node(String),
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Link(l) => write!(f, "link {l}"),
            Target::Node(n) => write!(f, "node {n}"),
        }
    }
}

pub use convert::{
    bgp_from_proto, bgp_to_proto, counters_from_proto, counters_to_proto, duration,
    event_from_proto, event_to_proto, params_from_proto, params_to_proto, seconds,
};

/// The generated `turbonet.v1` messages, client and server.
#[allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    rustdoc::all
)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/turbonet.v1.rs"));
}

/// The encoded `FileDescriptorSet` of the API (for gRPC reflection, or
/// clients that want the schema at run time).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/turbonet_descriptor.bin"));

/// Path of the control socket of the lab whose directory is `lab_dir`.
pub fn socket_path(lab_dir: impl AsRef<Path>) -> PathBuf {
    lab_dir.as_ref().join("control.sock")
}
