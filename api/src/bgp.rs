//! What `show bgp` and `up` see of the fabric's routing: sessions and speakers, as the daemon reports them.

use std::net::Ipv4Addr;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use turbonet_routing::bgp::plan::{self, FibDigest};
use turbonet_routing::bgp::speaker::{Counters, PeerState, Status};

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
    /// `connect`, `idle`, `idle (passive)` or `port down`.
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
    /// Its sessions (none in a summary).
    pub sessions: Vec<SessionStatus>,
    /// Of its sessions, how many are established.
    pub sessions_up: usize,
    /// How many sessions it has.
    pub sessions_total: usize,
    /// A built-in speaker's work since it started.
    #[serde(default)]
    pub counters: Option<Counters>,
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
    /// The built-in speakers' counters, summed.
    pub fn counters(&self) -> Counters {
        let mut sum = Counters::default();
        for c in self.speakers.iter().filter_map(|s| s.counters) {
            sum += c;
        }
        sum
    }

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

    /// Routes in every switch's FIB.
    pub fn routes(&self) -> usize {
        self.speakers.iter().map(|s| s.routes).sum()
    }

    /// A built-in speakers' counter per FIB route (`None` without
    /// built-in speakers or routes): how much work each route cost.
    pub fn per_route(&self, counter: impl Fn(&Counters) -> u64) -> Option<f64> {
        let n = self.total(counter)?;
        let routes = self.routes();
        (routes > 0).then(|| n as f64 / routes as f64)
    }

    /// A built-in speakers' counter, summed (`None` without built-in
    /// speakers).
    pub fn total(&self, counter: impl Fn(&Counters) -> u64) -> Option<u64> {
        let counters: Vec<&Counters> = (self.speakers.iter())
            .filter_map(|s| s.counters.as_ref())
            .collect();
        (!counters.is_empty()).then(|| counters.into_iter().map(counter).sum())
    }

    /// Sessions up, of all sessions.
    pub fn sessions(&self) -> (usize, usize) {
        self.speakers.iter().fold((0, 0), |(up, all), s| {
            (up + s.sessions_up, all + s.sessions_total)
        })
    }
}

/// A built-in speaker's status as `show bgp` reports it: `status` is what
/// it published last, `expected` its FIB once converged (`None`: not
/// computed yet), `since_epoch` when the last fail or restore happened and
/// `now` the time, both on the speakers' clock. A `summary` counts the
/// sessions without listing them.
pub fn builtin_status(
    speaker: &plan::Speaker,
    status: &Status,
    expected: Option<FibDigest>,
    since_epoch: Duration,
    now: Duration,
    summary: bool,
) -> SpeakerStatus {
    let converged = expected.is_some_and(|e| status.converged(&e));
    let sessions = if summary {
        Vec::new()
    } else {
        speaker
            .neighbours
            .iter()
            .zip(&status.neighbours)
            .map(|(neighbour, n)| SessionStatus {
                peer: neighbour.peer_name.clone(),
                peer_addr: neighbour.peer_addr,
                peer_asn: neighbour.peer_asn,
                ifname: neighbour.ifname.clone(),
                state: n.state.to_string(),
                since: Some(now.saturating_sub(n.since).as_secs_f64()),
                received: Some(n.received),
                last_error: n.last_error.clone(),
            })
            .collect()
    };
    SpeakerStatus {
        node: speaker.name.clone(),
        agent: turbonet_topo::Agent::Builtin.to_string(),
        asn: speaker.asn,
        router_id: speaker.router_id,
        routes: status.routes,
        expected: expected.map_or(0, |d| d.routes),
        converged,
        // It converged with its last change (a plan that arrives later,
        // as after a `fail`, may find it converged already).
        converged_at: converged
            .then(|| status.last_change.saturating_sub(since_epoch).as_secs_f64()),
        sessions,
        sessions_up: status
            .neighbours
            .iter()
            .filter(|n| n.state == PeerState::Established)
            .count(),
        sessions_total: status.neighbours.len(),
        counters: Some(status.counters),
    }
}
