//! The control API of a running lab (`proto/turbonet/v1/lab.proto`,
//! package `turbonet.v1`): the generated messages and gRPC service
//! ([`proto`]), conversions between them and the lab's own types (units
//! stay typed across the wire), and the [`client`] the command line uses.
//! The daemon serves it ([`crate::daemon`]) on the lab's Unix socket,
//! [`socket_path`], created root-only.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate, UnitError};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

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

/// Link parameters in scenario syntax, a `(key, value)` pair per
/// parameter set (what [`parse_patch`] reads back).
pub fn params_to_pairs(p: &LinkParams) -> Vec<(String, String)> {
    let pair = |k: &str, v: Option<String>| v.map(|v| (k.to_owned(), v));
    [
        pair("rate", p.rate.map(|v| v.to_string())),
        pair("delay", p.delay.map(|v| v.to_string())),
        pair("jitter", p.jitter.map(|v| v.to_string())),
        pair(
            "jitter-distribution",
            p.jitter_distribution.map(|v| v.to_string()),
        ),
        pair("reorder", p.reorder.map(|v| v.to_string())),
        pair("loss", p.loss.as_ref().map(ToString::to_string)),
        pair("corrupt", p.corrupt.map(|v| v.to_string())),
        pair("duplicate", p.duplicate.map(|v| v.to_string())),
        pair("queue", p.queue.map(|v| v.to_string())),
        pair("ecn", p.ecn.map(|v| v.to_string())),
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub use convert::{
    bgp_from_proto, bgp_to_proto, duration, event_to_proto, params_from_proto, params_to_proto,
    seconds,
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

/// Parses `key=value` parameters (scenario syntax) into a patch. `mtu`
/// cannot change at run time.
pub fn parse_patch(params: &[(String, String)]) -> Result<LinkParams, String> {
    /// Parses one value, with the unit error's hint ("did you mean `gbit`?").
    fn value<T: std::str::FromStr<Err = UnitError>>(
        key: &str,
        value: &str,
    ) -> Result<Option<T>, String> {
        value.parse::<T>().map(Some).map_err(|e| match e.hint() {
            Some(hint) => format!("--{key} {value}: {}; {hint}", e.message()),
            None => format!("--{key} {value}: {}", e.message()),
        })
    }
    let mut p = LinkParams::default();
    for (key, v) in params {
        match key.as_str() {
            "rate" => p.rate = value::<Rate>(key, v)?,
            "delay" => p.delay = value::<Delay>(key, v)?,
            "jitter" => p.jitter = value::<Delay>(key, v)?,
            "jitter-distribution" => p.jitter_distribution = value::<JitterDistribution>(key, v)?,
            "reorder" => {
                p.reorder = Some(
                    v.parse::<bool>()
                        .map_err(|_| format!("--reorder {v}: write true or false"))?,
                );
            }
            "loss" => p.loss = value::<Loss>(key, v)?,
            "corrupt" => p.corrupt = value::<LossProb>(key, v)?,
            "duplicate" => p.duplicate = value::<LossProb>(key, v)?,
            "queue" => p.queue = value::<QueueLimit>(key, v)?,
            "ecn" => p.ecn = value::<QueueLimit>(key, v)?,
            "mtu" => return Err("mtu cannot change at run time; set it in the scenario".into()),
            other => {
                return Err(format!(
                    "unknown link parameter `{other}`; valid: rate, delay, jitter, jitter-distribution, \
                     reorder, loss, corrupt, duplicate, queue, ecn"
                ));
            }
        }
    }
    if params.is_empty() {
        return Err("nothing to set; give at least one parameter, e.g. --delay 5ms".into());
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn patches_parse_in_scenario_syntax() {
        let p =
            parse_patch(&[kv("delay", "5ms"), kv("loss", "0.1%"), kv("rate", "10gbit")]).unwrap();
        assert_eq!(p.delay.unwrap().to_string(), "5ms");
        assert_eq!(p.rate.unwrap().to_string(), "10gbit");
        assert!(p.jitter.is_none());
    }

    #[test]
    fn bad_patches_say_what_is_wrong() {
        assert!(
            parse_patch(&[kv("delay", "-5ms")])
                .unwrap_err()
                .contains("--delay -5ms")
        );
        assert!(
            parse_patch(&[kv("loss", "150%")])
                .unwrap_err()
                .contains("100%")
        );
        assert!(
            parse_patch(&[kv("rate", "10gbps")])
                .unwrap_err()
                .contains("gbit")
        );
        assert!(
            parse_patch(&[kv("colour", "red")])
                .unwrap_err()
                .contains("valid")
        );
        assert!(parse_patch(&[kv("mtu", "9000")]).is_err());
        assert!(parse_patch(&[]).is_err());
    }

    #[test]
    fn parameters_round_trip_through_their_scenario_syntax() {
        let p = parse_patch(&[
            kv("rate", "10gbit"),
            kv("delay", "5ms"),
            kv("jitter", "1ms"),
            kv("jitter-distribution", "pareto"),
            kv("reorder", "true"),
            kv("loss", "{ p = \"1%\", r = \"25%\" }"),
            kv("corrupt", "0.01%"),
            kv("duplicate", "1e-6"),
            kv("queue", "100p"),
            kv("ecn", "64KiB"),
        ])
        .unwrap();
        assert_eq!(parse_patch(&params_to_pairs(&p)).unwrap(), p);
    }
}
