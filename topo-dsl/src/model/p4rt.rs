//! The `[p4rt]` section: the P4Runtime switches a `p4rt` lab runs on.

use serde::Serialize;

use crate::units::Rate;

/// `[p4rt]`: the programmable switches a `p4rt` lab runs on, and the
/// pipeline they get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct P4rtConfig {
    /// The switches, in file order (at least one).
    pub switches: Vec<P4rtSwitch>,
    /// Text-format P4Info of the compiled pipeline, as written (relative
    /// paths are relative to the scenario file); `None`: turbonet's own.
    pub p4info: Option<String>,
    /// The target's compiled artifact (BMv2 JSON, Tofino binary), as
    /// written; `None`: empty.
    pub device_config: Option<String>,
    /// Egress queues per physical port (default 8: v1model's priority
    /// queues, which the pipeline's 3-bit queue addresses).
    pub queues: u32,
}

/// One programmable switch of a `p4rt` lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct P4rtSwitch {
    /// Name in the mapping (`s1`).
    pub name: String,
    /// Physical ports.
    pub ports: u32,
    /// Port speed.
    pub speed: Rate,
    /// Where its P4Runtime server is.
    pub device: P4rtDevice,
    /// P4Runtime device id.
    pub device_id: u64,
    /// Election id turbonet's controller uses (the daemon uses the next).
    pub election_id: u64,
    /// The file holding the token its P4Runtime server requires (sent as
    /// `authorization: Bearer TOKEN`), relative to the scenario.
    pub token_file: Option<String>,
}

/// Where a `p4rt` switch's P4Runtime server is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum P4rtDevice {
    /// A running server at `host:port` (a Tofino's, a BMv2 someone started).
    Address(String),
    /// BMv2's `simple_switch_grpc`, started by `up` on this machine.
    Bmv2,
}
