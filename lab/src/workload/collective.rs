//! Collective operations over a job, with real bytes over TCP on the
//! fabric, step by step as the algorithm's schedule says
//! (`turbonet_workload::collective`): in each step a rank sends what it
//! sends and receives what it receives, and starts the next step only when
//! both are done, as a collective library does.
//!
//! Every directed pair of ranks that exchanges data gets one connection,
//! opened before the first operation. Each repetition starts on every rank
//! at once (all ranks run in this process: the start is a true barrier)
//! and its time runs to the last rank finishing, which is what nccl-tests
//! times; algorithm and bus bandwidth follow from it with nccl-tests'
//! definitions (`turbonet_workload::figures`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddrV4;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use turbonet_topo::experiment::{Op, WorkloadKind};
use turbonet_workload::collective::{Collective, PairSizes, Schedule};
use turbonet_workload::figures;

use super::sockets::{connect, listen};
use super::{Context, OpReport, add_to_series};
use crate::error::{Error, Result};

/// How much a rank writes or reads at once.
const CHUNK: usize = 256 << 10;

/// One rank's connections: to each rank it sends to, from each it receives
/// from.
#[derive(Debug, Default)]
struct Links {
    to: BTreeMap<usize, TcpStream>,
    from: BTreeMap<usize, TcpStream>,
}

/// Runs a `collective` workload.
pub(crate) async fn run(cx: &Context) -> Result<()> {
    let WorkloadKind::Collective {
        op,
        algorithm,
        sizes,
        iterations,
        warmup,
        gap,
        root,
        skew,
    } = &cx.workload.kind
    else {
        unreachable!("a collective workload")
    };
    let n = cx.workload.ranks.len();
    let invalid = |e: turbonet_workload::Error| Error::Invalid(e.to_string());
    let schedules: Vec<(u64, Schedule, &'static str)> = sizes
        .iter()
        .map(|size| {
            let mut c = Collective::new(*op, *algorithm, n, size.0).map_err(invalid)?;
            if *op == Op::Broadcast {
                c = c.with_root(*root).map_err(invalid)?;
            }
            if let (Op::AllToAll, Some(exponent)) = (op, skew) {
                c = c
                    .with_sizes(PairSizes::skewed(n, size.0, *exponent, cx.workload.seed))
                    .map_err(invalid)?;
            }
            Ok((c.bytes(), c.schedule(), c.algorithm().name()))
        })
        .collect::<Result<_>>()?;
    let pairs: BTreeSet<(usize, usize)> = schedules
        .iter()
        .flat_map(|(_, s, _)| s.transfers().map(|t| (t.from, t.to)))
        .filter(|(a, b)| a != b)
        .collect();
    let links = Arc::new(open(cx, &pairs).await?);
    let t0 = cx.now();
    cx.update(|r| {
        r.ops = schedules
            .iter()
            .map(|(bytes, _, algorithm)| OpReport {
                op: op.name().to_owned(),
                algorithm: (*algorithm).to_owned(),
                bytes: *bytes,
                ranks: n,
                ..OpReport::default()
            })
            .collect();
    });
    for (i, (bytes, schedule, _)) in schedules.iter().enumerate() {
        let schedule = Arc::new(schedule.clone());
        let mut slowest = (0.0, 0, 0);
        for rep in 0..warmup + iterations {
            if rep > 0 && !gap.is_zero() {
                tokio::time::sleep(gap.as_duration()).await;
            }
            let (time, steps) = once(cx, &links, &schedule, t0).await?;
            if rep < *warmup {
                continue;
            }
            // The slowest step: from the last rank finishing the step
            // before to the last rank finishing it.
            let mut before = 0.0;
            for (k, ends) in steps.iter().enumerate() {
                let (rank, end) = ends
                    .iter()
                    .copied()
                    .enumerate()
                    .fold((0, 0.0), |a, (r, e)| if e > a.1 { (r, e) } else { a });
                if end - before > slowest.0 {
                    slowest = (end - before, k, rank);
                }
                before = end;
            }
            cx.update(|r| {
                let o = &mut r.ops[i];
                o.times.push(time);
                o.time = o.times.iter().sum::<f64>() / o.times.len() as f64;
                let bw = figures::bandwidth(*op, n, *bytes, o.time);
                o.algbw = bw.algbw * 8.0;
                o.busbw = bw.busbw * 8.0;
                o.slowest_step_time = slowest.0;
                o.slowest_step = slowest.1;
                o.slowest_rank = slowest.2;
            });
        }
        let host = cx.host(slowest.2).to_owned();
        cx.update(|r| r.ops[i].slowest_host = host);
    }
    Ok(())
}

/// Opens one connection per directed pair: each rank listens on its
/// address, each sender connects and says which rank it is.
async fn open(cx: &Context, pairs: &BTreeSet<(usize, usize)>) -> Result<Vec<Links>> {
    let n = cx.workload.ranks.len();
    let mut listeners = Vec::with_capacity(n);
    for rank in &cx.workload.ranks {
        listeners.push(Some(listen(cx, rank.host, rank.addr, cx.port).await?));
    }
    let mut accepting = JoinSet::new();
    for (to, listener) in listeners.iter_mut().enumerate() {
        let expected = pairs.iter().filter(|(_, b)| *b == to).count();
        let listener = listener.take().expect("each listener once");
        accepting.spawn(async move {
            let mut from = BTreeMap::new();
            for _ in 0..expected {
                let (mut s, _) = listener.accept().await?;
                let rank = s.read_u32().await? as usize;
                from.insert(rank, s);
            }
            Ok::<_, Error>((to, from))
        });
    }
    let mut links: Vec<Links> = (0..n).map(|_| Links::default()).collect();
    for &(a, b) in pairs {
        let (ra, rb) = (cx.workload.ranks[a], cx.workload.ranks[b]);
        let mut s = connect(
            cx,
            ra.host,
            SocketAddrV4::new(ra.addr, 0),
            SocketAddrV4::new(rb.addr, cx.port),
            None,
            None,
        )
        .await?;
        s.write_u32(a as u32).await?;
        links[a].to.insert(b, s);
    }
    while let Some(done) = accepting.join_next().await {
        let (to, from) = done.map_err(|e| Error::Failed(format!("accepting: {e}")))??;
        links[to].from = from;
    }
    Ok(links)
}

/// One repetition on every rank at once: its time (seconds) and when each
/// rank finished each step (seconds from the start), `[step][rank]`.
async fn once(
    cx: &Context,
    links: &Arc<Vec<Links>>,
    schedule: &Arc<Schedule>,
    t0: f64,
) -> Result<(f64, Vec<Vec<f64>>)> {
    let n = links.len();
    let start = Instant::now();
    let mut ranks = JoinSet::new();
    for rank in 0..n {
        let (cx, links, schedule) = (cx.clone(), links.clone(), schedule.clone());
        ranks.spawn(async move {
            let ends = rank_steps(&cx, rank, &links[rank], &schedule, start, t0).await?;
            Ok::<_, Error>((rank, ends))
        });
    }
    let mut steps = vec![vec![0.0; n]; schedule.steps.len()];
    while let Some(done) = ranks.join_next().await {
        let (rank, ends) = done.map_err(|e| Error::Failed(format!("a rank's task: {e}")))??;
        for (k, e) in ends.into_iter().enumerate() {
            steps[k][rank] = e;
        }
    }
    Ok((start.elapsed().as_secs_f64(), steps))
}

/// What one rank does in one repetition: each step's sends and receives
/// together, the next step once both are done. Returns when it finished
/// each step (seconds from `start`).
async fn rank_steps(
    cx: &Context,
    rank: usize,
    links: &Links,
    schedule: &Schedule,
    start: Instant,
    t0: f64,
) -> Result<Vec<f64>> {
    let mut ends = Vec::with_capacity(schedule.steps.len());
    for step in 0..schedule.steps.len() {
        let (sends, receives) = schedule.of_rank(step, rank);
        let sending = sends
            .iter()
            .filter(|t| t.to != rank)
            .map(|t| send(&links.to[&t.to], t.bytes));
        let receiving = receives
            .iter()
            .filter(|t| t.from != rank)
            .map(|t| receive(cx, &links.from[&t.from], t.bytes, t0));
        let (sent, received) = tokio::join!(
            futures::future::try_join_all(sending),
            futures::future::try_join_all(receiving)
        );
        sent?;
        received?;
        ends.push(start.elapsed().as_secs_f64());
    }
    Ok(ends)
}

/// Writes `bytes` on a connection this rank sends on.
async fn send(stream: &TcpStream, bytes: u64) -> Result<()> {
    static ZEROS: [u8; CHUNK] = [0; CHUNK];
    let mut left = bytes;
    while left > 0 {
        stream.writable().await?;
        let n = left.min(CHUNK as u64) as usize;
        match stream.try_write(&ZEROS[..n]) {
            Ok(w) => left -= w as u64,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads `bytes` from a connection this rank receives on, adding them to
/// the job's throughput series.
async fn receive(cx: &Context, stream: &TcpStream, bytes: u64, t0: f64) -> Result<()> {
    thread_local! {
        /// Where received bytes go (they are not looked at). One per
        /// thread, borrowed only inside a non-blocking read: the receives
        /// that share a thread never hold it at once.
        static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; CHUNK]);
    }
    let mut left = bytes;
    let mut pending = 0u64;
    let mut flushed = Instant::now();
    while left > 0 {
        stream.readable().await?;
        let n = left.min(CHUNK as u64) as usize;
        match SCRATCH.with_borrow_mut(|buf| stream.try_read(&mut buf[..n])) {
            Ok(0) => {
                return Err(Error::Failed(
                    "a peer closed its connection in the middle of an operation".to_owned(),
                ));
            }
            Ok(r) => {
                left -= r as u64;
                pending += r as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        // The series in steps of its resolution, not a lock per read.
        if flushed.elapsed() > Duration::from_millis(20) || left == 0 {
            let now = cx.now();
            cx.update(|r| add_to_series(&mut r.series, t0, now, pending));
            pending = 0;
            flushed = Instant::now();
        }
    }
    Ok(())
}
