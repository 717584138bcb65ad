//! The lab daemon's control API: one JSON request and one JSON response
//! per line, over the Unix socket `/run/turbonet/<lab>/control.sock`
//! (root only: the lab directory is root's).
//!
//! A request/response protocol this small does not need an HTTP/2 stack;
//! when the P4Runtime work brings tonic into the daemon, this module is the
//! one place to move onto gRPC.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::bail;
use crate::error::{Context, Result};
use serde::{Deserialize, Serialize};
use turbonet_topo::units::{Delay, LossProb, QueueLimit, Rate, UnitError};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

use crate::state::LabDir;

/// Path of a lab's control socket.
pub fn socket_path(dir: &LabDir) -> PathBuf {
    dir.path().join("control.sock")
}

/// What a link or node event targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// A link, by name.
    Link(String),
    /// A node, by name: all its links.
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

/// A request to the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// Change some parameters of an impaired link (`key=value` pairs in
    /// scenario syntax).
    LinkSet {
        /// Link name.
        link: String,
        /// Parameters to change.
        params: Vec<(String, String)>,
    },
    /// Back to the scenario's parameters.
    LinkReset {
        /// Link name.
        link: String,
    },
    /// Take a link, or every link of a node, down.
    Fail {
        /// What fails.
        target: Target,
    },
    /// Bring it back and reinstall the routes through it.
    Restore {
        /// What comes back.
        target: Target,
    },
    /// The BGP agents' state (`show bgp`).
    Bgp {
        /// Only this switch.
        node: Option<String>,
    },
    /// Flap a link: down for half the period, up for the other half.
    Flap {
        /// Link name.
        link: String,
        /// Down + up time, scenario syntax (`2s`).
        period: String,
        /// Cycles.
        count: u32,
    },
}

/// The daemon's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Response {
    /// Done; what happened.
    Ok {
        /// One line for the user.
        message: String,
    },
    /// Refused or failed; why, and what would work.
    Error {
        /// One line for the user.
        message: String,
    },
    /// The BGP agents' state.
    Bgp {
        /// Every switch, or the one asked for.
        report: crate::routes::bgp::BgpReport,
    },
}

/// Sends one request to a lab's daemon and waits for the answer.
pub fn call(dir: &LabDir, request: &Request) -> Result<Response> {
    call_within(dir, request, Duration::from_secs(30))
}

/// [`call`], waiting at most `timeout` for the answer.
pub fn call_within(dir: &LabDir, request: &Request, timeout: Duration) -> Result<Response> {
    let path = socket_path(dir);
    let mut stream = UnixStream::connect(&path).with_context(|| {
        format!(
            "cannot reach the lab daemon at {} (is the lab up? `turbonet status`)",
            path.display()
        )
    })?;
    stream.set_read_timeout(Some(timeout))?;
    let mut line = serde_json::to_string(request)?;
    line.push('\n');
    stream.write_all(line.as_bytes())?;
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer)?;
    if answer.is_empty() {
        bail!("the lab daemon closed the connection without answering");
    }
    Ok(serde_json::from_str(&answer)?)
}

/// Sends a change (`link set`, `fail`, ...) to a lab's daemon: what it
/// did, or why it refused ([`crate::Error::Invalid`]).
pub fn change(dir: &LabDir, request: &Request) -> Result<String> {
    match call(dir, request)? {
        Response::Ok { message } => Ok(message),
        Response::Error { message } => Err(crate::Error::Invalid(message)),
        Response::Bgp { .. } => bail!("the lab daemon answered with a BGP report"),
    }
}

/// The BGP agents' state, of every switch or of `node`.
pub fn bgp(dir: &LabDir, node: Option<&str>) -> Result<crate::routes::bgp::BgpReport> {
    let request = Request::Bgp {
        node: node.map(str::to_owned),
    };
    match call(dir, &request)? {
        Response::Bgp { report } => Ok(report),
        Response::Error { message } | Response::Ok { message } => {
            Err(crate::Error::Invalid(message))
        }
    }
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
    fn requests_round_trip_as_json_lines() {
        let r = Request::Fail {
            target: Target::Link("a--b".into()),
        };
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains('\n'));
        assert_eq!(serde_json::from_str::<Request>(&json).unwrap(), r);
    }
}
