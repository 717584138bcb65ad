//! turbonet's userspace P4 switch (the `soft` target): the P4Runtime server
//! and the device state its packet data plane reads.
//!
//! The switch runs the turbonet pipeline (`p4/turbonet.p4`), its tables,
//! actions and counters found by name in the P4Info it is given:
//!
//! - the P4Info it runs is indexed as a [`turbonet_p4::Schema`] and the
//!   pipeline's names resolved in it as a [`turbonet_p4::Pipeline`];
//! - [`Device`] holds the forwarding pipeline, table entries, action
//!   profile members and groups, and counters, and carries packets between
//!   the controller and the data plane;
//! - [`SoftSwitchService`] implements the `p4.v1.P4Runtime` gRPC service
//!   (P4Runtime specification v1.4) over a [`Device`], and [`serve`] runs
//!   it on a TCP port;
//! - [`DeviceConfig`] is the switch's `p4_device_config`: its ports
//!   (network interfaces or loopback cables) and the shaping of their
//!   egress queues, as JSON;
//! - [`Switch`] is the data plane: the turbonet pipeline run natively on
//!   frames, sans-I/O (a driver owns the sockets and the clock).
//!
//! The data plane compiles the tables it reads under
//! [`Device::with_state`] whenever [`Device::generation`] moves, counts in
//! the device's counters, sends packets to the controller with
//! [`Device::packet_in`], and is fed the controller's packets, which a
//! driver takes from [`Device::take_packet_out_receiver`].
//!
//! # Error codes
//!
//! Whole-request errors: another device id is `NOT_FOUND`; Write and
//! SetForwardingPipelineConfig from anyone but the role's primary are
//! `PERMISSION_DENIED`; Write, Read and GetForwardingPipelineConfig before a
//! pipeline is committed are `FAILED_PRECONDITION`. A Write with failed
//! updates is `UNKNOWN` with one `p4.v1.Error` per update in the status
//! details (section 12.3). Per update: unknown table, action profile or
//! counter id, and MODIFY/DELETE of something absent, are `NOT_FOUND`;
//! INSERT of something present is `ALREADY_EXISTS`; a value wider than its
//! bitwidth is `OUT_OF_RANGE` (section 8.3); every other malformed entity
//! (unknown field/action/param id, wrong match kind, missing exact field,
//! LPM or ternary bits outside the prefix or mask, priority rules) is
//! `INVALID_ARGUMENT`; deleting a member or group still in use is
//! `FAILED_PRECONDITION`; a full table or profile is `RESOURCE_EXHAUSTED`;
//! entity types the switch lacks are `UNIMPLEMENTED`. A pipeline config
//! whose device config does not parse or validate is `INVALID_ARGUMENT`,
//! whatever the action (VERIFY included).

mod arbitration;
mod bytes;
mod config;
mod dataplane;
mod device;
mod error;
mod process;
pub mod recording;
mod service;
mod write;

pub use bytes::{canonical_bytes, to_fixed_width};
pub use config::{Attach, CPU_PORT, DeviceConfig, PortConfig, QueueConfig, stands_in_for_bmv2};
pub use dataplane::{Switch, SwitchStats};
pub use device::{
    ActionProfileState, CounterValue, Device, DeviceState, EntryKey, Group, KeyMatch, Pipeline,
    Snapshot, Table,
};
pub use error::{Error, Result};
pub use process::{Listen, run, token_from};

pub use error::P4Error;
pub use service::{API_VERSION, ServerHandle, SoftSwitchService, serve, serve_tcp, serve_unix};

/// The P4Runtime messages this crate speaks, re-exported for callers.
pub use turbonet_p4 as proto;
