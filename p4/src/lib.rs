//! turbonet-p4: the contract between turbonet and a P4 switch running the
//! turbonet pipeline (`p4/turbonet.p4`), shared by the controller in the
//! lab daemon and by turbonet's own soft switch.
//!
//! - [`p4`] and [`google`]: the P4Runtime v1 messages and gRPC service, for
//!   prost and tonic (below);
//! - [`schema`]: a P4Info loaded from text format and indexed ([`Schema`]);
//!   turbonet's own is p4c's of `turbonet.p4` ([`turbonet_p4info`], with
//!   its BMv2 JSON [`TURBONET_BMV2_JSON`]; `build/PROVENANCE.toml` says
//!   how they were made, `scripts/compile-p4` remakes them);
//! - [`pipeline`]: the turbonet pipeline's tables, fields, actions,
//!   parameters, counters and controller metadata, resolved once by name
//!   in the P4Info a device runs ([`Pipeline`]), so a P4Info that p4c
//!   numbered differently works as well, and what runs it
//!   ([`pipeline::Target`]: the unit of its delays);
//! - [`bytes`]: integers as P4Runtime bytestrings (section 8.3);
//! - [`client`]: a controller's session with one device: arbitration,
//!   pipeline, writes and reads ([`Client`]).
//!
//! turbonet's `p4rt` target drives P4 switches (BMv2 `simple_switch_grpc`,
//! Tofino behind a P4Runtime server) and its `soft` target serves the same
//! protocol; both use this crate.
//!
//! # The P4Runtime messages
//!
//! The `p4/` files under `proto/` are p4lang/p4runtime's, unchanged, at
//! commit ec4eb5ef70dbcbcbf2f8357a4b2b8c2f218845a5 (v1.4.0-rc.5 and 40
//! commits, Apache-2.0): the revision p4c 1.2.5.16 and PI (BMv2's
//! P4Runtime server) were built with, so every field p4c writes into a
//! P4Info (`initial_default_action`, `has_initial_entries`,
//! `PkgInfo.platform_properties`) is known to the text parser, which
//! refuses unknown fields. `google/rpc/` holds `Status` and `Code`.
//!
//! - [`p4::v1`] (`p4/v1/p4runtime.proto`, `p4/v1/p4data.proto`): the
//!   `p4.v1.P4Runtime` service (`Write`, `Read` (server streaming),
//!   `SetForwardingPipelineConfig`, `GetForwardingPipelineConfig`,
//!   `StreamChannel` (bidirectional), `Capabilities`), every entity
//!   (tables, action profiles, counters, meters, registers, packet
//!   replication engine, value sets, digests, externs), arbitration,
//!   packet I/O, digests, idle-timeout notifications, errors, and
//!   `P4Data`. The tonic client is [`p4::v1::p4_runtime_client`], the
//!   server [`p4::v1::p4_runtime_server`].
//! - [`p4::config::v1`] (`p4/config/v1/p4info.proto`, `p4types.proto`):
//!   `P4Info` and the P4 type descriptions it uses.
//! - [`google::rpc`]: `Status` and the canonical `Code` enum.
//!   `google.protobuf.Any` is [`prost_types::Any`].
//!
//! The server trait [`p4::v1::p4_runtime_server::P4Runtime`] has default
//! methods answering `UNIMPLEMENTED`, so a server implements only the RPCs
//! it supports (the specification makes several features optional).
//!
//! # How it is built
//!
//! `build.rs` compiles the files with `protox`, a protobuf compiler written
//! in Rust (no system `protoc` is needed; the well-known types come with
//! it), then generates the code with `tonic-prost-build`. The encoded
//! `FileDescriptorSet` is kept as [`FILE_DESCRIPTOR_SET`].

pub mod bytes;
pub mod client;
mod error;
pub mod pipeline;
pub mod schema;

pub use client::{Client, PacketIo, Token};
pub use error::Error;
pub use pipeline::Pipeline;
pub use schema::{
    ActionInfo, CounterInfo, MatchFieldInfo, ParamInfo, ProfileInfo, Schema, TableInfo,
    parse_p4info, turbonet_p4info,
};

/// Packages `p4.*`.
pub mod p4 {
    /// Package `p4.v1`: the P4Runtime service and its messages.
    #[allow(
        missing_docs,
        missing_debug_implementations,
        clippy::all,
        clippy::pedantic,
        rustdoc::all
    )]
    pub mod v1 {
        include!(concat!(env!("OUT_DIR"), "/p4.v1.rs"));
    }

    /// Packages `p4.config.*`.
    pub mod config {
        /// Package `p4.config.v1`: P4Info and P4 type descriptions.
        #[allow(
            missing_docs,
            missing_debug_implementations,
            clippy::all,
            clippy::pedantic,
            rustdoc::all
        )]
        pub mod v1 {
            include!(concat!(env!("OUT_DIR"), "/p4.config.v1.rs"));
        }
    }
}

/// Packages `google.*`.
pub mod google {
    /// Package `google.rpc`: `Status` and `Code`.
    #[allow(
        missing_docs,
        missing_debug_implementations,
        clippy::all,
        clippy::pedantic,
        rustdoc::all
    )]
    pub mod rpc {
        include!(concat!(env!("OUT_DIR"), "/google.rpc.rs"));
    }
}

/// p4c's BMv2 JSON of `p4/turbonet.p4` (`p4/build/turbonet.json`): the
/// device config `simple_switch_grpc` runs, beside [`turbonet_p4info`].
pub const TURBONET_BMV2_JSON: &[u8] = include_bytes!("../build/turbonet.json");

/// The encoded `google.protobuf.FileDescriptorSet` of every file compiled
/// (imports included), e.g. for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/p4runtime_descriptor.bin"));

/// Election ids and other 128-bit numbers are carried as two 64-bit halves.
impl From<u128> for p4::v1::Uint128 {
    fn from(value: u128) -> Self {
        Self {
            high: (value >> 64) as u64,
            low: value as u64,
        }
    }
}

impl From<p4::v1::Uint128> for u128 {
    fn from(value: p4::v1::Uint128) -> Self {
        (u128::from(value.high) << 64) | u128::from(value.low)
    }
}
