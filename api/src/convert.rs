//! The lab's types on the wire and back. Units cross as units: a rate in
//! bits per second, a delay as a `Duration`, a probability as a number
//! between 0 and 1; what does not fit its type is refused here, before it
//! reaches a link.

use std::time::Duration;

use turbonet_topo::units::{Delay, LossProb, Mtu, QueueLimit, Rate};
use turbonet_topo::{JitterDistribution, LinkParams, Loss};

use crate::bgp::{BgpReport, SessionStatus, SpeakerStatus};
use crate::counters::Shortfall;
use crate::error::{Error, Result};
use crate::events::{About, Change, LoggedEvent, NextHop, RouteChange};
use crate::proto;
use turbonet_routing::bgp::speaker::Counters;

/// `d` as a protobuf duration.
pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A protobuf duration in seconds (negative ones as 0).
pub fn seconds(d: &prost_types::Duration) -> f64 {
    (d.seconds as f64 + f64::from(d.nanos) / 1e9).max(0.0)
}

fn delay_from(d: &prost_types::Duration, what: &str) -> Result<Delay> {
    if d.seconds < 0 || d.nanos < 0 {
        return Err(Error::Invalid(format!(
            "{what}: a duration cannot be negative"
        )));
    }
    let ns = u64::try_from(d.seconds)
        .ok()
        .and_then(|s| s.checked_mul(1_000_000_000))
        .and_then(|s| s.checked_add(d.nanos as u64))
        .ok_or_else(|| Error::Invalid(format!("{what}: too long")))?;
    Ok(Delay(ns))
}

fn probability(p: &proto::Probability, what: &str) -> Result<LossProb> {
    LossProb::new(p.value)
        .ok_or_else(|| Error::Invalid(format!("{what}: {} is not a probability (0 to 1)", p.value)))
}

fn queue_from(q: &proto::QueueLimit, what: &str) -> Result<QueueLimit> {
    match q.limit {
        Some(proto::queue_limit::Limit::Packets(n)) if n > 0 => Ok(QueueLimit::Packets(n)),
        Some(proto::queue_limit::Limit::Bytes(n)) if n > 0 => Ok(QueueLimit::Bytes(n)),
        _ => Err(Error::Invalid(format!(
            "{what}: give a number of packets or bytes above 0"
        ))),
    }
}

fn queue_to(q: QueueLimit) -> proto::QueueLimit {
    proto::QueueLimit {
        limit: Some(match q {
            QueueLimit::Packets(n) => proto::queue_limit::Limit::Packets(n),
            QueueLimit::Bytes(n) => proto::queue_limit::Limit::Bytes(n),
        }),
    }
}

fn jitter_to(j: JitterDistribution) -> proto::JitterDistribution {
    match j {
        JitterDistribution::Uniform => proto::JitterDistribution::Uniform,
        JitterDistribution::Normal => proto::JitterDistribution::Normal,
        JitterDistribution::Pareto => proto::JitterDistribution::Pareto,
        JitterDistribution::ParetoNormal => proto::JitterDistribution::ParetoNormal,
    }
}

/// One direction's counters on the wire, with the machine's shortfalls.
pub fn counters_to_proto(c: &turbonet_injectors::Counters, s: &Shortfall) -> proto::LinkCounters {
    proto::LinkCounters {
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        tx_packets: c.tx_packets,
        tx_bytes: c.tx_bytes,
        dropped_loss: c.dropped_loss,
        dropped_queue: c.dropped_queue,
        corrupted: c.corrupted,
        duplicated: c.duplicated,
        ecn_marked: c.ecn_marked,
        queue_packets: c.queue_packets,
        queue_bytes: c.queue_bytes,
        tx_errors: s.tx_errors,
        socket_drops: s.socket_drops,
        late: s.late,
        max_late_ns: s.max_late_ns,
    }
}

/// [`counters_to_proto`] back: the counters and the shortfalls.
pub fn counters_from_proto(c: &proto::LinkCounters) -> (turbonet_injectors::Counters, Shortfall) {
    let counters = turbonet_injectors::Counters {
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        tx_packets: c.tx_packets,
        tx_bytes: c.tx_bytes,
        dropped_loss: c.dropped_loss,
        dropped_queue: c.dropped_queue,
        corrupted: c.corrupted,
        duplicated: c.duplicated,
        ecn_marked: c.ecn_marked,
        queue_packets: c.queue_packets,
        queue_bytes: c.queue_bytes,
    };
    let shortfall = Shortfall {
        tx_errors: c.tx_errors,
        socket_drops: c.socket_drops,
        late: c.late,
        max_late_ns: c.max_late_ns,
    };
    (counters, shortfall)
}

/// Link parameters on the wire (unset: not set).
pub fn params_to_proto(p: &LinkParams) -> proto::LinkParams {
    let prob = |p: LossProb| proto::Probability { value: p.0 };
    proto::LinkParams {
        rate: p.rate.map(|r| proto::Rate {
            bits_per_second: r.bits_per_sec(),
        }),
        delay: p.delay.map(|d| duration(d.as_duration())),
        jitter: p.jitter.map(|d| duration(d.as_duration())),
        jitter_distribution: p.jitter_distribution.map_or(0, |j| jitter_to(j) as i32),
        reorder: p.reorder,
        loss: p.loss.as_ref().map(|l| proto::Loss {
            model: Some(match l {
                Loss::Bernoulli(p) => proto::loss::Model::Independent(prob(*p)),
                Loss::GilbertElliott { p, r, bad, good } => {
                    proto::loss::Model::GilbertElliott(proto::GilbertElliott {
                        p: Some(prob(*p)),
                        r: Some(prob(*r)),
                        bad: Some(prob(*bad)),
                        good: Some(prob(*good)),
                    })
                }
            }),
        }),
        corrupt: p.corrupt.map(prob),
        duplicate: p.duplicate.map(prob),
        queue: p.queue.map(queue_to),
        ecn: p.ecn.map(queue_to),
        mtu: p.mtu.map(|m| u32::from(m.0)),
    }
}

/// Link parameters from the wire, each value checked against its type
/// (whether they make sense together is [`LinkParams::check`]'s).
pub fn params_from_proto(p: &proto::LinkParams) -> Result<LinkParams> {
    let rate = p
        .rate
        .as_ref()
        .map(|r| {
            if r.bits_per_second == 0 {
                Err(Error::Invalid("rate: must be above 0".to_owned()))
            } else {
                Ok(Rate(r.bits_per_second))
            }
        })
        .transpose()?;
    let jitter_distribution = match proto::JitterDistribution::try_from(p.jitter_distribution) {
        Ok(proto::JitterDistribution::Unspecified) => None,
        Ok(proto::JitterDistribution::Uniform) => Some(JitterDistribution::Uniform),
        Ok(proto::JitterDistribution::Normal) => Some(JitterDistribution::Normal),
        Ok(proto::JitterDistribution::Pareto) => Some(JitterDistribution::Pareto),
        Ok(proto::JitterDistribution::ParetoNormal) => Some(JitterDistribution::ParetoNormal),
        Err(_) => {
            return Err(Error::Invalid(format!(
                "jitter_distribution: unknown value {}",
                p.jitter_distribution
            )));
        }
    };
    let loss = p
        .loss
        .as_ref()
        .map(|l| match &l.model {
            Some(proto::loss::Model::Independent(q)) => {
                Ok(Loss::Bernoulli(probability(q, "loss")?))
            }
            Some(proto::loss::Model::GilbertElliott(g)) => {
                let get = |q: &Option<proto::Probability>, what: &str, default: f64| match q {
                    Some(q) => probability(q, what),
                    None => Ok(LossProb(default)),
                };
                Ok(Loss::GilbertElliott {
                    p: get(&g.p, "loss.p", 0.0)?,
                    r: get(&g.r, "loss.r", 1.0)?,
                    bad: get(&g.bad, "loss.bad", 1.0)?,
                    good: get(&g.good, "loss.good", 0.0)?,
                })
            }
            None => Err(Error::Invalid(
                "loss: give an independent probability or a Gilbert-Elliott chain".to_owned(),
            )),
        })
        .transpose()?;
    let mtu = p
        .mtu
        .map(|m| {
            u16::try_from(m)
                .ok()
                .and_then(Mtu::new)
                .ok_or_else(|| Error::Invalid(format!("mtu: {m} is not an MTU (68 to 65535)")))
        })
        .transpose()?;
    Ok(LinkParams {
        rate,
        delay: p
            .delay
            .as_ref()
            .map(|d| delay_from(d, "delay"))
            .transpose()?,
        jitter: p
            .jitter
            .as_ref()
            .map(|d| delay_from(d, "jitter"))
            .transpose()?,
        jitter_distribution,
        reorder: p.reorder,
        loss,
        corrupt: p
            .corrupt
            .as_ref()
            .map(|q| probability(q, "corrupt"))
            .transpose()?,
        duplicate: p
            .duplicate
            .as_ref()
            .map(|q| probability(q, "duplicate"))
            .transpose()?,
        queue: p
            .queue
            .as_ref()
            .map(|q| queue_from(q, "queue"))
            .transpose()?,
        ecn: p.ecn.as_ref().map(|q| queue_from(q, "ecn")).transpose()?,
        mtu,
    })
}

/// A logged event on the wire.
pub fn event_to_proto(seq: u64, e: &LoggedEvent) -> proto::Event {
    let secs = |s: f64| duration(Duration::from_secs_f64(s.max(0.0)));
    let text = |s: &Option<String>| s.clone().unwrap_or_default();
    let a = &e.about;
    proto::Event {
        seq,
        t: Some(secs(e.t)),
        unix: e.unix,
        source: e.source.clone(),
        kind: e.kind.clone(),
        event: e.event.clone(),
        result: e.result.clone(),
        node: text(&a.node),
        link: text(&a.link),
        from: text(&a.from),
        to: text(&a.to),
        peer: text(&a.peer),
        workload: text(&a.workload),
        cause: text(&a.cause),
        value: a.value,
        threshold: a.threshold,
        unit: text(&a.unit),
        since: a.since.map(secs),
        routes: a
            .routes
            .iter()
            .map(|r| proto::RouteChange {
                prefixes: r.prefixes.iter().map(ToString::to_string).collect(),
                change: r.change.name().to_owned(),
                next_hops: r
                    .next_hops
                    .iter()
                    .map(|h| proto::NextHop {
                        gateway: h.gateway.map(|g| g.to_string()).unwrap_or_default(),
                        ifname: h.ifname.clone(),
                        node: text(&h.node),
                    })
                    .collect(),
                protocol: r.protocol.clone(),
            })
            .collect(),
    }
}

/// An event from the wire (what it is about that does not parse is left
/// out).
pub fn event_from_proto(e: proto::Event) -> LoggedEvent {
    let some = |s: String| (!s.is_empty()).then_some(s);
    LoggedEvent {
        t: e.t.as_ref().map_or(0.0, seconds),
        unix: e.unix,
        source: e.source,
        kind: e.kind,
        event: e.event,
        result: e.result,
        about: About {
            node: some(e.node),
            link: some(e.link),
            from: some(e.from),
            to: some(e.to),
            peer: some(e.peer),
            workload: some(e.workload),
            cause: some(e.cause),
            value: e.value,
            threshold: e.threshold,
            unit: some(e.unit),
            since: e.since.as_ref().map(seconds),
            routes: e
                .routes
                .into_iter()
                .filter_map(|r| {
                    Some(RouteChange {
                        prefixes: r
                            .prefixes
                            .iter()
                            .map(|p| p.parse())
                            .collect::<Result<_, _>>()
                            .ok()?,
                        change: match r.change.as_str() {
                            "added" => Change::Added,
                            "withdrawn" => Change::Withdrawn,
                            _ => Change::Changed,
                        },
                        next_hops: r
                            .next_hops
                            .into_iter()
                            .map(|h| NextHop {
                                gateway: h.gateway.parse().ok(),
                                ifname: h.ifname,
                                node: some(h.node),
                            })
                            .collect(),
                        protocol: r.protocol,
                    })
                })
                .collect(),
        },
        machine: None,
    }
}

/// A BGP report on the wire.
pub fn bgp_to_proto(r: &BgpReport) -> proto::BgpReport {
    let secs = |s: f64| duration(Duration::from_secs_f64(s.max(0.0)));
    proto::BgpReport {
        elapsed: Some(secs(r.elapsed)),
        since_change: r.since_change.map(secs),
        speakers: r
            .speakers
            .iter()
            .map(|s| proto::BgpSpeaker {
                node: s.node.clone(),
                agent: s.agent.clone(),
                asn: s.asn,
                router_id: s.router_id.to_string(),
                routes: s.routes as u32,
                expected: s.expected as u32,
                converged: s.converged,
                converged_at: s.converged_at.map(secs),
                sessions_up: s.sessions_up as u32,
                sessions_total: s.sessions_total as u32,
                counters: s.counters.map(|c| proto::BgpCounters {
                    flushes: c.flushes,
                    set_changes: c.set_changes,
                    fib_writes: c.fib_writes,
                    fib_requests: c.fib_requests,
                    updates_sent: c.updates_sent,
                    hold_expiries: c.hold_expiries,
                }),
                sessions: s
                    .sessions
                    .iter()
                    .map(|x| proto::BgpSession {
                        peer: x.peer.clone(),
                        peer_address: x.peer_addr.to_string(),
                        peer_asn: x.peer_asn,
                        ifname: x.ifname.clone(),
                        state: x.state.clone(),
                        since: x.since.map(secs),
                        received: x.received.map(|n| n as u32),
                        last_error: x.last_error.clone().unwrap_or_default(),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// A BGP report from the wire.
pub fn bgp_from_proto(r: &proto::BgpReport) -> BgpReport {
    BgpReport {
        elapsed: r.elapsed.as_ref().map_or(0.0, seconds),
        since_change: r.since_change.as_ref().map(seconds),
        speakers: r
            .speakers
            .iter()
            .map(|s| SpeakerStatus {
                node: s.node.clone(),
                agent: s.agent.clone(),
                asn: s.asn,
                router_id: s
                    .router_id
                    .parse()
                    .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                routes: s.routes as usize,
                expected: s.expected as usize,
                converged: s.converged,
                converged_at: s.converged_at.as_ref().map(seconds),
                sessions_up: s.sessions_up as usize,
                sessions_total: s.sessions_total as usize,
                counters: s.counters.as_ref().map(|c| Counters {
                    flushes: c.flushes,
                    set_changes: c.set_changes,
                    fib_writes: c.fib_writes,
                    fib_requests: c.fib_requests,
                    updates_sent: c.updates_sent,
                    hold_expiries: c.hold_expiries,
                }),
                sessions: s
                    .sessions
                    .iter()
                    .map(|x| SessionStatus {
                        peer: x.peer.clone(),
                        peer_addr: x
                            .peer_address
                            .parse()
                            .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                        peer_asn: x.peer_asn,
                        ifname: x.ifname.clone(),
                        state: x.state.clone(),
                        since: x.since.as_ref().map(seconds),
                        received: x.received.map(|n| n as usize),
                        last_error: (!x.last_error.is_empty()).then(|| x.last_error.clone()),
                    })
                    .collect(),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_parameter_round_trips_through_the_wire() {
        let lab = turbonet_topo::parse(
            "t.toml",
            "[lab]\nname = \"t\"\n[topology]\nkind = \"custom\"\n\
             [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n\
             [[topology.nodes]]\nname = \"h1\"\nrole = \"host\"\n\
             [[topology.links]]\na = \"h1\"\nb = \"s1\"\nrate = \"10mbit\"\ndelay = \"5ms\"\n\
             jitter = \"1ms\"\njitter_distribution = \"pareto\"\nreorder = true\n\
             loss = { p = \"1%\", r = \"25%\" }\ncorrupt = \"0.01%\"\nduplicate = \"0.02%\"\n\
             queue = \"100p\"\necn = \"30p\"\nmtu = 9000\n",
        )
        .unwrap();
        let params = &lab.fabric.links[0].params;
        let back = params_from_proto(&params_to_proto(params)).unwrap();
        assert_eq!(&back, params);
        assert_eq!(
            params_from_proto(&proto::LinkParams::default()).unwrap(),
            LinkParams::default()
        );
    }

    #[test]
    fn values_outside_their_type_are_refused_by_name() {
        let bad = proto::LinkParams {
            loss: Some(proto::Loss {
                model: Some(proto::loss::Model::Independent(proto::Probability {
                    value: 1.5,
                })),
            }),
            ..Default::default()
        };
        let e = params_from_proto(&bad).unwrap_err();
        assert!(e.to_string().contains("loss"), "{e}");
        assert_eq!(e.kind(), crate::error::Kind::Invalid);
        let bad = proto::LinkParams {
            mtu: Some(20),
            ..Default::default()
        };
        assert!(
            params_from_proto(&bad)
                .unwrap_err()
                .to_string()
                .contains("mtu")
        );
        let bad = proto::LinkParams {
            delay: Some(prost_types::Duration {
                seconds: -1,
                nanos: 0,
            }),
            ..Default::default()
        };
        assert!(params_from_proto(&bad).is_err());
    }
}
