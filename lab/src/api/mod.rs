//! The control API of a running lab (`proto/turbonet/v1/lab.proto`,
//! package `turbonet.v1`): the generated messages and gRPC service
//! ([`proto`]), conversions between them and the lab's own types (units
//! stay typed across the wire), and the [`client`] the command line uses.
//! The daemon serves it ([`crate::daemon`]) on the lab's Unix socket,
//! [`socket_path`], created root-only.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::state::LabDir;

pub mod client;
mod convert;

pub use client::Client;

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

/// Path of a lab's control socket.
pub fn socket_path(dir: &LabDir) -> PathBuf {
    dir.path().join("control.sock")
}
