//! The soft switch's device config: which physical ports it has, what each
//! is attached to, how fast an interface port receives, and how its egress
//! queues are shaped.
//!
//! It travels as the `p4_device_config` bytes of the ForwardingPipelineConfig
//! (P4Runtime section 7 leaves their format to the target), as JSON:
//!
//! ```json
//! {"ports": [{"port": 1, "interface": "p1", "line_rate_bps": 1000000000},
//!            {"port": 3, "cable": 4,
//!             "queues": [{"queue": 0, "rate_bps": 10000000000, "limit_bytes": 150000}]},
//!            {"port": 4, "cable": 3}],
//!  "seed": 7}
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::Error;

/// The CPU port of the turbonet pipeline (`CPU_PORT` in `p4/turbonet.p4`):
/// PacketIn and PacketOut travel through it, so no physical port has it.
pub const CPU_PORT: u32 = 255;

/// Physical ports are 9-bit (v1model's `port_t`); 511 is v1model's drop
/// port, so the last usable one is 510.
const MAX_PORT: u32 = 510;

/// Linux interface names are at most 15 bytes (IFNAMSIZ - 1).
const MAX_IFNAME: usize = 15;

/// The soft switch's device config: the `p4_device_config` bytes of its
/// ForwardingPipelineConfig, as JSON. Empty bytes = no ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceConfig {
    /// The physical ports, each at most once.
    pub ports: Vec<PortConfig>,
    /// Seed of the data plane's random draws (loss, one ChaCha8 stream per
    /// virtual egress port and one per virtual ingress port; ECMP hashing
    /// is salted with it too).
    #[serde(default)]
    pub seed: u64,
}

/// One physical port of the soft switch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawPort")]
pub struct PortConfig {
    /// Port number, 1..=510, never [`CPU_PORT`].
    pub port: u32,
    /// What the port is attached to.
    #[serde(flatten)]
    pub attach: Attach,
    /// Shaping of this port's egress queues; a queue not listed is not
    /// shaped (frames leave as soon as they are due).
    #[serde(default)]
    pub queues: Vec<QueueConfig>,
    /// Line rate of an interface port, bits per second: frames it receives
    /// enter the pipeline no faster (each when its last bit has arrived at
    /// this rate). `None`: as fast as they come. Cables have none (their
    /// queues shape them). What the port sends is shaped by its `queues`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_rate_bps: Option<u64>,
    /// Tail-drop limit on the received bytes waiting for the line rate;
    /// `None`: 100 ms worth of the rate, at least 64 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_limit_bytes: Option<u64>,
}

impl PortConfig {
    /// The tail-drop limit of the port's line rate in bytes, if it has a
    /// rate: the configured one, or 100 ms worth of the rate (at least 64
    /// KiB), as for a queue ([`QueueConfig::limit`]).
    pub fn line_limit(&self) -> Option<u64> {
        let rate = self.line_rate_bps?;
        Some(self.line_limit_bytes.unwrap_or_else(|| default_limit(rate)))
    }
}

/// 100 ms worth of `rate_bps`, at least 64 KiB (so a slow link still holds
/// a burst of full-size frames).
fn default_limit(rate_bps: u64) -> u64 {
    (rate_bps / 8 / 10).max(64 * 1024)
}

/// What a physical port is attached to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attach {
    /// A network interface the driver reads and writes frames on:
    /// `{"interface": "p3"}`.
    Interface(String),
    /// A loopback cable to another port of this switch: `{"cable": 4}`.
    /// The other port must be a cable back to this one.
    Cable(u32),
}

/// The shaping of one egress queue of a port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// Queue number (the queue mapper's `queue`).
    pub queue: u32,
    /// Drain rate, bits per second; must be positive.
    pub rate_bps: u64,
    /// Tail-drop limit on the bytes waiting to be serialized; `None`: 100 ms
    /// worth of the rate, at least 64 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
}

impl QueueConfig {
    /// The queue's tail-drop limit in bytes: the configured one, or 100 ms
    /// worth of the rate (at least 64 KiB, so a slow link still holds a
    /// burst of full-size frames).
    pub fn limit(&self) -> u64 {
        self.limit_bytes
            .unwrap_or_else(|| default_limit(self.rate_bps))
    }
}

/// A port as written, before exactly one attachment is checked: serde's
/// own message for a flattened enum ("no variant of enum Attach found in
/// flattened data") would not say which keys are expected.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    port: u32,
    interface: Option<String>,
    cable: Option<u32>,
    #[serde(default)]
    queues: Vec<QueueConfig>,
    line_rate_bps: Option<u64>,
    line_limit_bytes: Option<u64>,
}

impl TryFrom<RawPort> for PortConfig {
    type Error = String;

    fn try_from(raw: RawPort) -> Result<Self, String> {
        let attach = match (raw.interface, raw.cable) {
            (Some(name), None) => Attach::Interface(name),
            (None, Some(peer)) => Attach::Cable(peer),
            (None, None) => {
                return Err(format!(
                    "port {}: give \"interface\" (a network interface) or \"cable\" (the port \
                     its loopback cable goes to)",
                    raw.port
                ));
            }
            (Some(_), Some(_)) => {
                return Err(format!(
                    "port {}: \"interface\" and \"cable\" exclude each other",
                    raw.port
                ));
            }
        };
        Ok(Self {
            port: raw.port,
            attach,
            queues: raw.queues,
            line_rate_bps: raw.line_rate_bps,
            line_limit_bytes: raw.line_limit_bytes,
        })
    }
}

/// Whether a `p4_device_config` is p4c's BMv2 JSON of turbonet's pipeline
/// ([`turbonet_p4::TURBONET_BMV2_JSON`]), what a controller sends BMv2:
/// the soft switch then stands in for BMv2, with the ports it was started
/// with (BMv2's `-i PORT@IFACE`) and BMv2's clock for the delays the
/// controller writes (microseconds, [`turbonet_p4::pipeline::Target`]).
pub fn stands_in_for_bmv2(device_config: &[u8]) -> bool {
    device_config == turbonet_p4::TURBONET_BMV2_JSON
}

fn invalid(msg: String) -> Error {
    Error::InvalidDeviceConfig(msg)
}

impl DeviceConfig {
    /// The config as the JSON bytes [`DeviceConfig::from_bytes`] reads.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Plain structs of strings and integers: serialization cannot fail.
        serde_json::to_vec(self).expect("a DeviceConfig serializes")
    }

    /// Parses and validates a device config. Empty bytes are the empty
    /// config (no ports), and so is p4c's BMv2 JSON of turbonet's pipeline
    /// (see [`stands_in_for_bmv2`]). Checks: ports in 1..=510 and not [`CPU_PORT`],
    /// each port once, interface names non-empty, at most 15 bytes and
    /// used once, every cable's other port present and cabled back (and
    /// not to itself), queues listed once per port with a positive rate and
    /// limit, line rates (and their limits) positive and on interface ports
    /// only, a line limit only with a line rate.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        if bytes.is_empty() || stands_in_for_bmv2(bytes) {
            return Ok(Self::default());
        }
        let config: Self = serde_json::from_slice(bytes)?;
        config.validate()?;
        Ok(config)
    }

    /// The checks of [`DeviceConfig::from_bytes`].
    pub fn validate(&self) -> Result<(), Error> {
        let mut by_port: BTreeMap<u32, &PortConfig> = BTreeMap::new();
        let mut names = BTreeSet::new();
        for p in &self.ports {
            if p.port == 0 || p.port > MAX_PORT {
                return Err(invalid(format!(
                    "port {} is out of range: ports are 1..={MAX_PORT}",
                    p.port
                )));
            }
            if p.port == CPU_PORT {
                return Err(invalid(format!(
                    "port {CPU_PORT} is the CPU port (PacketIn/PacketOut); use another number"
                )));
            }
            if by_port.insert(p.port, p).is_some() {
                return Err(invalid(format!("port {} is listed twice", p.port)));
            }
            if let Attach::Interface(name) = &p.attach {
                if name.is_empty() || name.len() > MAX_IFNAME {
                    return Err(invalid(format!(
                        "port {}: interface name {name:?} must be 1..={MAX_IFNAME} bytes",
                        p.port
                    )));
                }
                if !names.insert(name.as_str()) {
                    return Err(invalid(format!(
                        "port {}: interface {name:?} is attached to another port too",
                        p.port
                    )));
                }
            }
            if p.line_rate_bps == Some(0) {
                return Err(invalid(format!(
                    "port {}: line_rate_bps must be positive (leave it out for no line rate)",
                    p.port
                )));
            }
            if p.line_limit_bytes == Some(0) {
                return Err(invalid(format!(
                    "port {}: line_limit_bytes must be positive",
                    p.port
                )));
            }
            if p.line_limit_bytes.is_some() && p.line_rate_bps.is_none() {
                return Err(invalid(format!(
                    "port {}: line_limit_bytes needs line_rate_bps (the rate the limit is \
                     drained at)",
                    p.port
                )));
            }
            if p.line_rate_bps.is_some() && matches!(p.attach, Attach::Cable(_)) {
                return Err(invalid(format!(
                    "port {}: a cable has no line rate (shape its queues instead)",
                    p.port
                )));
            }
            let mut queues = BTreeSet::new();
            for q in &p.queues {
                if !queues.insert(q.queue) {
                    return Err(invalid(format!(
                        "port {}: queue {} is listed twice",
                        p.port, q.queue
                    )));
                }
                if q.rate_bps == 0 {
                    return Err(invalid(format!(
                        "port {} queue {}: rate_bps must be positive (leave the queue out \
                         for no shaping)",
                        p.port, q.queue
                    )));
                }
                if q.limit_bytes == Some(0) {
                    return Err(invalid(format!(
                        "port {} queue {}: limit_bytes must be positive",
                        p.port, q.queue
                    )));
                }
            }
        }
        for p in &self.ports {
            let Attach::Cable(peer) = p.attach else {
                continue;
            };
            if peer == p.port {
                return Err(invalid(format!(
                    "port {}: a cable goes to another port, not to itself",
                    p.port
                )));
            }
            match by_port.get(&peer).map(|q| &q.attach) {
                None => {
                    return Err(invalid(format!(
                        "port {}: its cable goes to port {peer}, which is not configured \
                         (add {{\"port\": {peer}, \"cable\": {}}})",
                        p.port, p.port
                    )));
                }
                Some(Attach::Cable(back)) if *back == p.port => {}
                Some(other) => {
                    let what = match other {
                        Attach::Interface(name) => format!("interface {name:?}"),
                        Attach::Cable(back) => format!("a cable to port {back}"),
                    };
                    return Err(invalid(format!(
                        "port {}: its cable goes to port {peer}, but port {peer} is {what}, \
                         not a cable back to port {}",
                        p.port, p.port
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<DeviceConfig, String> {
        DeviceConfig::from_bytes(json.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn empty_bytes_are_no_ports() {
        assert_eq!(
            DeviceConfig::from_bytes(b"").unwrap(),
            DeviceConfig::default()
        );
    }

    #[test]
    fn json_both_ways() {
        let json = r#"{"ports":[{"port":1,"interface":"p1","line_rate_bps":1000000},{"port":3,"cable":4,"queues":[{"queue":2,"rate_bps":1000000,"limit_bytes":3000}]},{"port":4,"cable":3}],"seed":9}"#;
        let config = parse(json).unwrap();
        assert_eq!(
            config,
            DeviceConfig {
                ports: vec![
                    PortConfig {
                        port: 1,
                        attach: Attach::Interface("p1".into()),
                        queues: vec![],
                        line_rate_bps: Some(1_000_000),
                        line_limit_bytes: None,
                    },
                    PortConfig {
                        port: 3,
                        attach: Attach::Cable(4),
                        queues: vec![QueueConfig {
                            queue: 2,
                            rate_bps: 1_000_000,
                            limit_bytes: Some(3000),
                        }],
                        line_rate_bps: None,
                        line_limit_bytes: None,
                    },
                    PortConfig {
                        port: 4,
                        attach: Attach::Cable(3),
                        queues: vec![],
                        line_rate_bps: None,
                        line_limit_bytes: None,
                    },
                ],
                seed: 9,
            }
        );
        assert_eq!(
            DeviceConfig::from_bytes(&config.to_bytes()).unwrap(),
            config
        );
        let text = String::from_utf8(config.to_bytes()).unwrap();
        assert!(
            text.contains(r#"{"port":1,"interface":"p1","queues":[],"line_rate_bps":1000000}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"{"port":4,"cable":3,"queues":[]}"#),
            "{text}"
        );
        assert_eq!(parse(r#"{"ports":[]}"#).unwrap().seed, 0);
    }

    #[test]
    fn default_limit_is_100ms_of_the_rate_at_least_64k() {
        let q = |rate_bps| QueueConfig {
            queue: 0,
            rate_bps,
            limit_bytes: None,
        };
        assert_eq!(q(10_000_000_000).limit(), 125_000_000);
        assert_eq!(q(1_000_000).limit(), 65_536);
        let line = |line_rate_bps, line_limit_bytes| PortConfig {
            port: 1,
            attach: Attach::Interface("p1".into()),
            queues: vec![],
            line_rate_bps,
            line_limit_bytes,
        };
        assert_eq!(
            line(Some(10_000_000_000), None).line_limit(),
            Some(125_000_000)
        );
        assert_eq!(line(Some(1_000_000), None).line_limit(), Some(65_536));
        assert_eq!(line(Some(1_000_000), Some(3_000)).line_limit(), Some(3_000));
        assert_eq!(line(None, None).line_limit(), None);
    }

    #[test]
    fn malformed_json_names_the_problem() {
        for (json, what) in [
            ("soft", "expected"),
            (r#"{"ports":[],"bogus":1}"#, "unknown field `bogus`"),
            (r#"{"ports":[{"port":1}]}"#, r#"port 1: give "interface""#),
            (
                r#"{"ports":[{"port":1,"interface":"p1","speed":3}]}"#,
                "unknown field `speed`, expected one of `port`, `interface`, `cable`, `queues`, \
                 `line_rate_bps`, `line_limit_bytes`",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"p1","cable":2}]}"#,
                "exclude each other",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"p1","queues":[{"queue":0}]}]}"#,
                "rate_bps",
            ),
        ] {
            let err = parse(json).expect_err(json);
            assert!(err.starts_with("device config"), "{json}: {err}");
            assert!(err.contains(what), "{json}: {err}");
        }
    }

    #[test]
    fn invalid_configs_name_the_problem() {
        for (json, what) in [
            (
                r#"{"ports":[{"port":0,"interface":"a"}]}"#,
                "port 0 is out of range",
            ),
            (
                r#"{"ports":[{"port":511,"interface":"a"}]}"#,
                "out of range",
            ),
            (r#"{"ports":[{"port":255,"interface":"a"}]}"#, "CPU port"),
            (
                r#"{"ports":[{"port":1,"interface":"a"},{"port":1,"interface":"b"}]}"#,
                "port 1 is listed twice",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a"},{"port":2,"interface":"a"}]}"#,
                "another port",
            ),
            (r#"{"ports":[{"port":1,"interface":""}]}"#, "interface name"),
            (
                r#"{"ports":[{"port":1,"interface":"a-very-long-name"}]}"#,
                "interface name",
            ),
            (
                r#"{"ports":[{"port":3,"cable":4}]}"#,
                "port 3: its cable goes to port 4, which is not configured",
            ),
            (
                r#"{"ports":[{"port":3,"cable":4},{"port":4,"interface":"p4"}]}"#,
                "not a cable back",
            ),
            (
                r#"{"ports":[{"port":3,"cable":4},{"port":4,"cable":5},{"port":5,"cable":4}]}"#,
                "port 4 is a cable to port 5",
            ),
            (r#"{"ports":[{"port":3,"cable":3}]}"#, "itself"),
            (
                r#"{"ports":[{"port":1,"interface":"a","queues":[{"queue":0,"rate_bps":0}]}]}"#,
                "rate_bps must be positive",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a","queues":[{"queue":0,"rate_bps":1,"limit_bytes":0}]}]}"#,
                "limit_bytes",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a","queues":[{"queue":0,"rate_bps":1},{"queue":0,"rate_bps":2}]}]}"#,
                "queue 0 is listed twice",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a","line_rate_bps":0}]}"#,
                "port 1: line_rate_bps must be positive",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a","line_rate_bps":1,"line_limit_bytes":0}]}"#,
                "line_limit_bytes must be positive",
            ),
            (
                r#"{"ports":[{"port":1,"interface":"a","line_limit_bytes":9000}]}"#,
                "line_limit_bytes needs line_rate_bps",
            ),
            (
                r#"{"ports":[{"port":3,"cable":4,"line_rate_bps":1},{"port":4,"cable":3}]}"#,
                "port 3: a cable has no line rate",
            ),
        ] {
            let err = parse(json).expect_err(json);
            assert!(err.starts_with("invalid device config"), "{json}: {err}");
            assert!(err.contains(what), "{json}: {err}");
        }
    }
}
