//! What `show bgp` and `up` see of the fabric's routing.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// One session as `show bgp` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SessionStatus {
    /// The peer switch.
    pub peer: String,
    /// Its address on the link.
    pub peer_addr: Ipv4Addr,
    /// Its AS.
    pub peer_asn: u32,
    /// The local interface.
    pub ifname: String,
    /// `established`, `open` (connected, OPEN exchange under way),
    /// `connect`, `idle` or `port down`.
    pub state: String,
    /// Seconds in that state.
    pub since: Option<f64>,
    /// Prefixes received from the peer and kept.
    pub received: Option<usize>,
    /// Why the session last went down.
    pub last_error: Option<String>,
}

/// One switch's routing as `show bgp` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeakerStatus {
    /// The switch.
    pub node: String,
    /// `builtin`, `frr` or `bird`.
    pub agent: String,
    /// Its AS.
    pub asn: u32,
    /// Its BGP Identifier.
    pub router_id: Ipv4Addr,
    /// Prefixes in its FIB from BGP.
    pub routes: usize,
    /// Prefixes its FIB holds once converged.
    pub expected: usize,
    /// Its FIB is what the plan says (every prefix, every ECMP next hop).
    pub converged: bool,
    /// Seconds after the agents started (or after the last fail/restore)
    /// at which its FIB became what the plan says.
    pub converged_at: Option<f64>,
    /// Its sessions (built-in agents only).
    pub sessions: Vec<SessionStatus>,
}

/// The fabric's routing as `show bgp` and `up` see it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BgpReport {
    /// Seconds since the agents started.
    pub elapsed: f64,
    /// Seconds since the last fail or restore, if any.
    pub since_change: Option<f64>,
    /// Every switch (or the one asked for).
    pub speakers: Vec<SpeakerStatus>,
}

impl BgpReport {
    /// Every switch converged.
    pub fn converged(&self) -> bool {
        self.speakers.iter().all(|s| s.converged)
    }

    /// When the last switch converged, if all have.
    pub fn convergence_time(&self) -> Option<f64> {
        self.speakers
            .iter()
            .map(|s| s.converged_at)
            .try_fold(0.0f64, |max, t| t.map(|t| max.max(t)))
    }

    /// Sessions up, of all sessions.
    pub fn sessions(&self) -> (usize, usize) {
        let all = self.speakers.iter().flat_map(|s| &s.sessions);
        let up = all.clone().filter(|s| s.state == "established").count();
        (up, all.count())
    }
}
