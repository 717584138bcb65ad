//! TCP and UDP flows between a workload's hosts, on the schedule its seed
//! draws (`turbonet_workload::traffic`): who sends to whom, when each flow
//! starts, from which source port.
//!
//! - **TCP**: each flow connects from its host's address and source port,
//!   sends its bytes (or sends for its duration), and closes; the receiver
//!   counts what arrives and when. A flow's completion time runs from its
//!   start to the receiver's last byte; its retransmissions come from the
//!   sender's `TCP_INFO` once the receiver has everything.
//! - **UDP**: each flow sends numbered datagrams stamped with the daemon's
//!   monotonic clock (the receiver reads the same clock: the one-way delay
//!   is exact), evenly spaced at its rate or with exponential gaps. Loss is
//!   what was sent and never arrived. A `load` sets each flow's rate from
//!   its sender's link rate.
//! - **On/off**: either kind sends only in its on periods (fixed, or
//!   exponential drawn from the flow's seed), silent in between.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_core::SeedableRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinSet;
use turbonet_topo::experiment::{Amount, OnOff, Pacing, WorkloadKind};
use turbonet_workload::traffic::{self, Flow, OnPeriods};

use super::sockets::{self, connect, listen, udp as udp_socket};
use super::{Context, FlowReport, add_to_series};
use crate::error::{Error, Result};

/// How much a TCP sender writes, or a receiver reads, at once.
const CHUNK: usize = 256 << 10;

/// Bytes an on/off TCP flow may have written and the kernel not yet sent:
/// what it sends after an on period ends (with what is in flight).
const ON_OFF_UNSENT: u32 = 32 << 10;

/// The flows of `cx`'s workload, and their reports' first lines.
fn plan(cx: &Context) -> Result<Vec<Flow>> {
    let (pattern, arrivals) = match &cx.workload.kind {
        WorkloadKind::Tcp {
            pattern, arrivals, ..
        }
        | WorkloadKind::Udp {
            pattern, arrivals, ..
        } => (pattern, *arrivals),
        _ => unreachable!("flows of a flow workload"),
    };
    let flows = traffic::schedule(
        cx.workload.ranks.len(),
        pattern,
        arrivals,
        cx.port,
        cx.workload.seed,
    )
    .map_err(|e| Error::Invalid(e.to_string()))?;
    let reports = flows
        .iter()
        .map(|f| FlowReport {
            id: f.id,
            src: cx.host(f.src).to_owned(),
            dst: cx.host(f.dst).to_owned(),
            sport: f.sport,
            dport: f.dport,
            ..FlowReport::default()
        })
        .collect();
    cx.update(|r| r.flows = reports);
    Ok(flows)
}

fn addr(cx: &Context, rank: usize) -> Ipv4Addr {
    cx.workload.ranks[rank].addr
}

/// When an on/off flow may send.
struct Gate {
    periods: OnPeriods,
    begin: Instant,
    /// The current or next on period.
    current: (Instant, Instant),
}

impl Gate {
    /// The gate of flow `id` of `cx`'s workload, from `begin` on (`None`:
    /// the flow sends all the time).
    fn new(cx: &Context, on_off: Option<OnOff>, id: usize, begin: Instant) -> Option<Gate> {
        let mut periods = traffic::on_periods(on_off?, Gate::seed(cx, id));
        let (a, b) = periods.next().expect("on periods never end");
        Some(Gate {
            periods,
            begin,
            current: (begin + a, begin + b),
        })
    }

    /// The seed of flow `id`'s on and off periods.
    fn seed(cx: &Context, id: usize) -> u64 {
        turbonet_topo::seed::for_name(cx.workload.seed, &format!("on-off/{id}"))
    }

    /// The on period that `t` is in, or the next one: it ends after `t`.
    fn at(&mut self, t: Instant) -> (Instant, Instant) {
        while self.current.1 <= t {
            let (a, b) = self.periods.next().expect("on periods never end");
            self.current = (self.begin + a, self.begin + b);
        }
        self.current
    }
}

/// Waits for every task; the first error ends the others.
async fn join_all(mut tasks: JoinSet<Result<()>>) -> Result<()> {
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(e) if e.is_cancelled() => {}
            Err(e) => return Err(Error::Failed(format!("a flow's task died: {e}"))),
        }
    }
    Ok(())
}

/// Runs a `tcp` workload.
pub(crate) async fn tcp(cx: &Context) -> Result<()> {
    let WorkloadKind::Tcp {
        amount,
        congestion,
        on_off,
        ..
    } = &cx.workload.kind
    else {
        unreachable!("a tcp workload")
    };
    let flows = plan(cx)?;
    let t0 = cx.now();
    // Which flow an accepted connection is, by its source.
    let by_source: Arc<BTreeMap<SocketAddrV4, usize>> = Arc::new(
        flows
            .iter()
            .map(|f| (SocketAddrV4::new(addr(cx, f.src), f.sport), f.id))
            .collect(),
    );
    let mut tasks = JoinSet::new();
    let receivers: BTreeSet<usize> = flows.iter().map(|f| f.dst).collect();
    for &rank in &receivers {
        let host = cx.workload.ranks[rank].host;
        let listener = listen(cx, host, addr(cx, rank), cx.port).await?;
        let expected = flows.iter().filter(|f| f.dst == rank).count();
        let (cx, by_source) = (cx.clone(), by_source.clone());
        tasks.spawn(async move {
            let mut readers = JoinSet::new();
            for _ in 0..expected {
                let (stream, peer) = listener.accept().await?;
                let std::net::SocketAddr::V4(peer) = peer else {
                    continue;
                };
                let Some(&id) = by_source.get(&peer) else {
                    continue;
                };
                readers.spawn(receive_tcp(cx.clone(), stream, id, t0));
            }
            join_all(readers).await
        });
    }
    for flow in flows {
        let (cx, amount, congestion, on_off) = (cx.clone(), *amount, congestion.clone(), *on_off);
        tasks.spawn(async move { send_tcp(cx, flow, amount, congestion, on_off).await });
    }
    join_all(tasks).await
}

/// Sends one TCP flow.
async fn send_tcp(
    cx: Context,
    flow: Flow,
    amount: Amount,
    congestion: Option<String>,
    on_off: Option<OnOff>,
) -> Result<()> {
    tokio::time::sleep(flow.start).await;
    let start = cx.now();
    cx.update(|r| r.flows[flow.id].start = start);
    let host = cx.workload.ranks[flow.src].host;
    let from = SocketAddrV4::new(addr(&cx, flow.src), flow.sport);
    let to = SocketAddrV4::new(addr(&cx, flow.dst), flow.dport);
    // Off must mean silent: little may wait in the send buffer.
    let unsent = on_off.map(|_| ON_OFF_UNSENT);
    let mut stream = connect(&cx, host, from, to, congestion.as_deref(), unsent).await?;
    let buf = vec![0u8; CHUNK];
    let begin = Instant::now();
    // Bytes still to send, or when to stop.
    let (mut left, end) = match amount {
        Amount::Bytes(b) => (Some(b.0), None),
        Amount::For(d) => (None, Some(begin + d.as_duration())),
    };
    let mut gate = Gate::new(&cx, on_off, flow.id, begin);
    loop {
        let now = Instant::now();
        if left == Some(0) || end.is_some_and(|e| now >= e) {
            break;
        }
        // Until when it may write: the end of its time, or of this on
        // period; an off period is slept through.
        let mut until = end;
        if let Some(g) = gate.as_mut() {
            let (on, off) = g.at(now);
            if now < on {
                let wake = end.map_or(on, |e| on.min(e));
                tokio::time::sleep_until(wake.into()).await;
                continue;
            }
            until = Some(end.map_or(off, |e| off.min(e)));
        }
        let n = left.map_or(CHUNK, |l| l.min(CHUNK as u64) as usize);
        // `write` is cancel-safe: cut short, it wrote nothing.
        let wrote = match until {
            Some(until) => tokio::select! {
                w = stream.write(&buf[..n]) => w?,
                _ = tokio::time::sleep_until(until.into()) => 0,
            },
            None => stream.write(&buf[..n]).await?,
        };
        if let Some(l) = left.as_mut() {
            *l -= wrote as u64;
        }
    }
    stream.shutdown().await?;
    // The receiver closes once it has read everything: then every
    // retransmission the flow needed has happened.
    let mut rest = [0u8; 64];
    while stream.read(&mut rest).await? > 0 {}
    let retransmits = sockets::retransmits(&stream);
    cx.update(|r| r.flows[flow.id].retransmits = retransmits);
    Ok(())
}

/// Receives one TCP flow until its sender closes.
async fn receive_tcp(
    cx: Context,
    mut stream: tokio::net::TcpStream,
    id: usize,
    t0: f64,
) -> Result<()> {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = stream.read(&mut buf).await?;
        let now = cx.now();
        cx.update(|r| {
            let f = &mut r.flows[id];
            if n > 0 {
                f.bytes += n as u64;
                add_to_series(&mut f.series, t0, now, n as u64);
            } else {
                f.done = true;
            }
            f.seconds = now - f.start;
            f.goodput = if f.seconds > 0.0 {
                f.bytes as f64 * 8.0 / f.seconds
            } else {
                0.0
            };
        });
        if n == 0 {
            return Ok(());
        }
    }
}

/// Receives the datagrams of every flow to one host until `stopped`:
/// counts them into the report (every 20 ms, not a lock per datagram) and
/// returns each flow's one-way delays, nanoseconds.
async fn receive_udp(
    cx: Context,
    socket: tokio::net::UdpSocket,
    mut stopped: tokio::sync::watch::Receiver<bool>,
    flows: usize,
    t0: f64,
) -> Result<Vec<Vec<u64>>> {
    let mut delays = vec![Vec::new(); flows];
    // Datagrams and bytes per flow since the report was last updated.
    let mut pending = vec![(0u64, 0u64); flows];
    let mut flushed = Instant::now();
    let flush = |pending: &mut Vec<(u64, u64)>| {
        let now = cx.now();
        cx.update(|r| {
            for (f, (count, bytes)) in r.flows.iter_mut().zip(pending.iter_mut()) {
                if *count > 0 {
                    f.bytes += *bytes;
                    *f.received.get_or_insert(0) += *count;
                    add_to_series(&mut f.series, t0, now, *bytes);
                    (*count, *bytes) = (0, 0);
                }
            }
        });
    };
    let mut buf = vec![0u8; 65_536];
    loop {
        let n = tokio::select! {
            n = socket.recv(&mut buf) => n?,
            _ = stopped.changed() => break,
        };
        let now_ns = mono_ns();
        if n < HEADER {
            continue;
        }
        let id = u32::from_be_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
        let sent = u64::from_be_bytes(buf[12..20].try_into().expect("8 bytes"));
        if id >= flows {
            continue;
        }
        delays[id].push(now_ns.saturating_sub(sent));
        pending[id].0 += 1;
        pending[id].1 += n as u64;
        if flushed.elapsed() > Duration::from_millis(20) {
            flush(&mut pending);
            flushed = Instant::now();
        }
    }
    flush(&mut pending);
    Ok(delays)
}

/// Nanoseconds on the daemon's monotonic clock (from its first use).
fn mono_ns() -> u64 {
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Header of a datagram: flow, sequence, send time.
const HEADER: usize = turbonet_topo::experiment::UDP_HEADER as usize;

/// Datagrams found at once behind schedule, above which a sender is said to
/// have fallen behind (its rate was this machine's, not the flow's).
const BEHIND: u64 = 64;

/// Datagrams a sender sends at most before it lets the other tasks run.
const MAX_BURST: u64 = 256;

/// Runs a `udp` workload.
pub(crate) async fn udp(cx: &Context) -> Result<()> {
    let WorkloadKind::Udp {
        rate,
        size,
        duration,
        pacing,
        on_off,
        ..
    } = &cx.workload.kind
    else {
        unreachable!("a udp workload")
    };
    let flows = plan(cx)?;
    let t0 = cx.now();
    let receivers: BTreeSet<usize> = flows.iter().map(|f| f.dst).collect();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut receiving = JoinSet::new();
    let mut drops_before = Vec::new();
    for &rank in &receivers {
        let host = cx.workload.ranks[rank].host;
        if !drops_before.iter().any(|&(h, _)| h == host) {
            drops_before.push((host, sockets::udp_receive_drops(cx, host).await?));
        }
        let socket = udp_socket(cx, host, SocketAddrV4::new(addr(cx, rank), cx.port)).await?;
        let (cx, stopped) = (cx.clone(), stopped.clone());
        receiving.spawn(receive_udp(cx, socket, stopped, flows.len(), t0));
    }
    let mut sending = JoinSet::new();
    let mut sent_by = BTreeMap::<usize, usize>::new();
    for f in &flows {
        *sent_by.entry(f.src).or_default() += 1;
    }
    for flow in flows.iter().copied() {
        let cx = cx.clone();
        let sent_by_src = sent_by[&flow.src];
        let capacity = cx.workload.ranks[flow.src].capacity(&cx.lab.fabric);
        let rate = rate.per_flow(capacity, sent_by_src, *size);
        let (size, duration, pacing, on_off) = (*size, *duration, *pacing, *on_off);
        sending.spawn(async move {
            tokio::time::sleep(flow.start).await;
            let host = cx.workload.ranks[flow.src].host;
            let from = SocketAddrV4::new(addr(&cx, flow.src), flow.sport);
            let to = SocketAddrV4::new(addr(&cx, flow.dst), flow.dport);
            let socket = udp_socket(&cx, host, from).await?;
            socket.connect(to).await?;
            let start = cx.now();
            cx.update(|r| r.flows[flow.id].start = start);
            let per_second = rate.bits_per_sec() as f64 / (f64::from(size) * 8.0);
            let seed = turbonet_topo::seed::for_name(cx.workload.seed, &format!("udp/{}", flow.id));
            let mut rng = ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed));
            let mut gap = || match pacing {
                Pacing::Constant => 1.0 / per_second,
                Pacing::Poisson => {
                    -(1.0 - turbonet_workload::traffic::unit(&mut rng)).ln() / per_second
                }
            };
            let begin = Instant::now();
            let end = begin + duration.as_duration();
            let mut gate = Gate::new(&cx, on_off, flow.id, begin);
            // Off periods are skipped: the next datagram is due when the
            // next on period begins.
            let mut gated = |due: Instant| match gate.as_mut() {
                Some(g) => due.max(g.at(due).0),
                None => due,
            };
            let mut due = begin;
            let mut buf = vec![0u8; size as usize];
            buf[0..4].copy_from_slice(&(flow.id as u32).to_be_bytes());
            let (mut seq, mut failed, mut behind) = (0u64, 0u64, 0u64);
            while due < end {
                let now = Instant::now();
                if now >= end {
                    // Behind its schedule at the end of its time: what is
                    // still due is not sent (the warning below says so).
                    break;
                }
                let mut burst = 0;
                while due <= now && due < end && burst < MAX_BURST {
                    buf[4..12].copy_from_slice(&seq.to_be_bytes());
                    buf[12..20].copy_from_slice(&mono_ns().to_be_bytes());
                    // A full socket buffer drops here, not in the fabric.
                    if socket.try_send(&buf).is_err() {
                        failed += 1;
                    }
                    seq += 1;
                    burst += 1;
                    due = gated(due + Duration::from_secs_f64(gap()));
                }
                if burst > BEHIND {
                    behind += 1;
                }
                if due <= Instant::now() {
                    // Still behind: let the other flows and the receivers
                    // on these threads run before the next burst.
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep_until(due.min(end).into()).await;
                }
            }
            let sending = match on_off {
                Some(o) => traffic::on_time(o, Gate::seed(&cx, flow.id), duration.as_duration()),
                None => duration.as_duration(),
            };
            let scheduled = (sending.as_secs_f64() * per_second) as u64;
            cx.update(|r| {
                let f = &mut r.flows[flow.id];
                f.sent = Some(seq);
                if failed > 0 {
                    r.warnings.push(format!(
                        "flow {} ({} -> {}): {failed} of {seq} datagrams could not be sent (the sender's socket was full): this machine dropped them, not the fabric",
                        flow.id, r.flows[flow.id].src, r.flows[flow.id].dst
                    ));
                }
                if behind > 0 {
                    r.warnings.push(format!(
                        "flow {}: the sender fell behind its schedule {behind} times (more than {BEHIND} datagrams due at once) and sent {seq} of {scheduled} datagrams: its rate was this machine's",
                        flow.id
                    ));
                }
            });
            Ok(())
        });
    }
    join_all(sending).await?;
    // What is still in flight: the fabric's delays are far below this.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _ = stop.send(true);
    let mut delays = vec![Vec::new(); flows.len()];
    while let Some(done) = receiving.join_next().await {
        let theirs = done.map_err(|e| Error::Failed(format!("a receiver's task died: {e}")))??;
        for (all, more) in delays.iter_mut().zip(theirs) {
            all.extend(more);
        }
    }
    let mut dropped = Vec::new();
    for (host, before) in drops_before {
        let after = sockets::udp_receive_drops(cx, host).await?;
        if after > before {
            dropped.push((cx.lab.fabric.node(host).name.clone(), after - before));
        }
    }
    cx.update(|r| {
        // First: it explains the loss figures.
        for (i, (host, n)) in dropped.into_iter().enumerate() {
            r.warnings.insert(i, format!(
                "{host}: {n} datagrams were dropped at full receive buffers (RcvbufErrors): this machine dropped them, not the fabric, and the loss figures count them"
            ));
        }
        for (f, mut d) in r.flows.iter_mut().zip(delays) {
            let sent = f.sent.unwrap_or(0);
            let received = f.received.unwrap_or(0);
            f.received = Some(received);
            f.loss = Some(if sent == 0 {
                0.0
            } else {
                sent.saturating_sub(received) as f64 / sent as f64
            });
            if !d.is_empty() {
                d.sort_unstable();
                f.delay = Some(d.iter().sum::<u64>() as f64 / d.len() as f64 / 1e9);
                f.delay_p99 = Some(d[(d.len() * 99 / 100).min(d.len() - 1)] as f64 / 1e9);
            }
            f.seconds = duration.as_nanos() as f64 / 1e9;
            f.goodput = f.bytes as f64 * 8.0 / f.seconds.max(1e-9);
            f.done = true;
        }
    });
    Ok(())
}
