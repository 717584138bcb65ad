//! Whole fabrics of speakers ([`Speaker`], one per switch of the plan)
//! wired through an in-memory network on a virtual clock, deterministic:
//! per-message latencies from a seeded ChaCha8, TCP's order kept per
//! connection and direction, connection set-up as SYN / SYN-ACK, staggered
//! starts (a SYN may reach a speaker not started yet, which refuses it).
//! Every speaker's FIB must end up as [`plan::converged`] says, with every
//! link up, with one failed, and once it is restored.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use turbonet_routing::Failures;
use turbonet_routing::bgp::plan::{self, FibDigest};
use turbonet_routing::bgp::speaker::{Input, Output, PeerState, Settle, Speaker, Timers};
use turbonet_topo::{Lab, LinkId};

const FAT_TREE_K4: &str = r#"
[lab]
name = "k4"

[topology]
kind = "fat-tree"
k = 4

[routing]
mode = "bgp"
"#;

/// hpn-bgp.toml's pod: dual-ToR hosts (their /32s follow their ports), two
/// planes, cores.
const HPN: &str = r#"
[lab]
name = "hpnsim"

[topology]
kind = "hpn"
segments = 2
hosts_per_segment = 4
backup_hosts = 1
rails = 2
planes = 2
aggs_per_plane = 2
cores = 2
core_uplinks = 1

[routing]
mode = "bgp"
hold_time = 3
keepalive = 1
connect_retry = 1
"#;

/// Time a speaker takes to handle an input: what reaches it meanwhile
/// joins the batch its flush then covers.
const FLUSH_DELAY: Duration = Duration::from_micros(50);
/// Starts are spread over this much virtual time.
const STAGGER_US: u64 = 1_000;
/// Per-message latency: 50 µs plus up to this.
const JITTER_US: u64 = 450;
/// A phase that has not converged after this much virtual time fails.
const PHASE_LIMIT: Duration = Duration::from_secs(60);
/// After convergence, run this long (past the Hold Time) and check that
/// nothing moves.
const SETTLE: Duration = Duration::from_secs(5);

fn lab(name: &str, text: &str) -> Lab {
    turbonet_topo::parse(name, text).expect("valid scenario")
}

/// A session end: speaker and neighbour index.
type End = (usize, usize);

/// One session end's socket, as a driver holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sock {
    None,
    Connecting(u64),
    Up(u64),
}

#[derive(Debug)]
enum Ev {
    Start(usize),
    /// A connection attempt reaches the far end.
    Syn {
        from: End,
        attempt: u64,
    },
    /// The far end accepted: the connection is up at `to` too.
    SynAck {
        to: End,
        attempt: u64,
        conn: u64,
    },
    /// The far end already has a connection for the session: it dropped
    /// this one.
    Refused {
        to: End,
        attempt: u64,
    },
    Data {
        to: End,
        conn: u64,
        bytes: Vec<u8>,
    },
    Fin {
        to: End,
        conn: u64,
    },
    Flush(usize),
}

impl Ev {
    /// The session end the event is delivered at.
    fn at(&self) -> Option<End> {
        match self {
            Ev::Start(_) | Ev::Flush(_) | Ev::Syn { .. } => None,
            Ev::SynAck { to, .. }
            | Ev::Refused { to, .. }
            | Ev::Data { to, .. }
            | Ev::Fin { to, .. } => Some(*to),
        }
    }

    /// Counts for quiescence: everything but KEEPALIVEs.
    fn busy(&self) -> bool {
        !matches!(self, Ev::Data { bytes, .. } if is_keepalive(bytes))
    }
}

fn is_keepalive(bytes: &[u8]) -> bool {
    bytes.len() == 19 && bytes[18] == 4
}

/// What one phase (start, failure, restore) took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Phase {
    /// From the phase's start to the last FIB change.
    converged: Duration,
    /// From the phase's start to quiescence (every session up, nothing in
    /// flight but KEEPALIVEs).
    quiet: Duration,
    /// Messages sent.
    messages: u64,
    /// UPDATEs among them.
    updates: u64,
    /// FIB change sets applied.
    fib_sets: u64,
    /// Routes in them.
    fib_routes: u64,
    /// Inputs handled (flushes included).
    inputs: u64,
}

#[derive(Debug)]
struct Net {
    now: Duration,
    seq: u64,
    queue: BTreeMap<(Duration, u64), Ev>,
    speakers: Vec<Speaker>,
    plans: Vec<plan::Speaker>,
    socks: Vec<Vec<Sock>>,
    /// The other end of each session end.
    far: Vec<Vec<Option<End>>>,
    down: BTreeSet<LinkId>,
    /// When the last item on a connection reaches an end: TCP delivers in
    /// order.
    last: BTreeMap<(u64, End), Duration>,
    flush_pending: Vec<bool>,
    /// Events in the queue that are not KEEPALIVEs.
    busy: u64,
    rng: ChaCha8Rng,
    next_id: u64,
    stats: Phase,
    last_fib: Duration,
    /// Each speaker's next deadline, as of its last input.
    deadlines: Vec<Option<Duration>>,
    /// The same, ordered: the next timer of the fabric is the first.
    timers: BTreeSet<(Duration, usize)>,
}

impl Net {
    fn new(lab: &Lab, seed: u64) -> Net {
        Net::settling(lab, seed, Settle::LAB)
    }

    /// A fabric whose speakers let changes settle as `settle` says.
    fn settling(lab: &Lab, seed: u64, settle: Settle) -> Net {
        let plans = plan::speakers(&lab.fabric);
        let timers = Timers {
            settle,
            ..Timers::from(&lab.routing.timers)
        };
        let speakers: Vec<Speaker> = plans
            .iter()
            .map(|p| Speaker::new(p.clone(), timers))
            .collect();
        let far = plans
            .iter()
            .map(|s| {
                s.neighbours
                    .iter()
                    .map(|n| {
                        let j = plans.iter().position(|p| Some(p.node) == n.peer)?;
                        let m = plans[j].neighbours.iter().position(|b| b.link == n.link)?;
                        Some((j, m))
                    })
                    .collect()
            })
            .collect();
        Net {
            now: Duration::ZERO,
            seq: 0,
            queue: BTreeMap::new(),
            socks: plans
                .iter()
                .map(|p| vec![Sock::None; p.neighbours.len()])
                .collect(),
            far,
            down: BTreeSet::new(),
            last: BTreeMap::new(),
            flush_pending: vec![false; plans.len()],
            busy: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_id: 0,
            stats: Phase::default(),
            last_fib: Duration::ZERO,
            deadlines: vec![None; plans.len()],
            timers: BTreeSet::new(),
            speakers,
            plans,
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn latency(&mut self) -> Duration {
        Duration::from_micros(50 + self.rng.next_u64() % JITTER_US)
    }

    fn schedule(&mut self, at: Duration, ev: Ev) {
        if ev.busy() {
            self.busy += 1;
        }
        self.queue.insert((at, self.seq), ev);
        self.seq += 1;
    }

    /// Sends `ev` on connection `conn` towards `to`, after whatever the
    /// connection carries that way already.
    fn send_on(&mut self, conn: u64, to: End, ev: Ev) {
        let lat = self.latency();
        let at = self
            .last
            .get(&(conn, to))
            .map_or(self.now + lat, |&last| (self.now + lat).max(last));
        self.last.insert((conn, to), at);
        self.schedule(at, ev);
    }

    fn link_up(&self, (i, n): End) -> bool {
        self.plans[i].neighbours[n]
            .link
            .is_none_or(|l| !self.down.contains(&l))
    }

    fn input(&mut self, i: usize, input: Input) {
        self.stats.inputs += 1;
        let outs = self.speakers[i].handle(self.now, input);
        self.apply(i, outs);
    }

    /// Carries out speaker `i`'s outputs, as a driver would.
    fn apply(&mut self, i: usize, outs: Vec<Output>) {
        for o in outs {
            match o {
                Output::Connect { peer: n, .. } => {
                    let attempt = self.id();
                    self.socks[i][n] = Sock::Connecting(attempt);
                    // Over a link that is down the SYN is lost; the
                    // ConnectRetry timer abandons the attempt.
                    if self.far[i][n].is_some() && self.link_up((i, n)) {
                        let at = self.now + self.latency();
                        self.schedule(
                            at,
                            Ev::Syn {
                                from: (i, n),
                                attempt,
                            },
                        );
                    }
                }
                Output::Send { peer: n, bytes } => {
                    let Sock::Up(conn) = self.socks[i][n] else {
                        panic!(
                            "{} sent to neighbour {n} without a connection",
                            self.plans[i].name
                        );
                    };
                    // One write may carry many messages.
                    let mut at = 0;
                    while at + 19 <= bytes.len() {
                        self.stats.messages += 1;
                        if bytes[at + 18] == 2 {
                            self.stats.updates += 1;
                        }
                        let len = usize::from(u16::from_be_bytes([bytes[at + 16], bytes[at + 17]]));
                        assert!(len >= 19, "a message shorter than its header");
                        at += len;
                    }
                    if let Some(to) = self.far[i][n]
                        && self.link_up((i, n))
                    {
                        self.send_on(conn, to, Ev::Data { to, conn, bytes });
                    }
                }
                Output::Close { peer: n } => {
                    if let Sock::Up(conn) = self.socks[i][n]
                        && let Some(to) = self.far[i][n]
                        && self.link_up((i, n))
                    {
                        self.send_on(conn, to, Ev::Fin { to, conn });
                    }
                    self.socks[i][n] = Sock::None;
                }
                Output::Fib(routes) => {
                    assert!(!routes.is_empty(), "empty FIB change set");
                    self.stats.fib_sets += 1;
                    self.stats.fib_routes += routes.len() as u64;
                    self.last_fib = self.now;
                }
                // The simulated speakers send their own KEEPALIVEs.
                Output::Keepalives { .. } | Output::Event(_) => {}
            }
        }
        let deadline = self.speakers[i].next_deadline();
        if deadline != self.deadlines[i] {
            if let Some(d) = self.deadlines[i] {
                self.timers.remove(&(d, i));
            }
            if let Some(d) = deadline {
                self.timers.insert((d, i));
            }
            self.deadlines[i] = deadline;
        }
        if let Some(at) = self.speakers[i].flush_at()
            && !self.flush_pending[i]
        {
            self.flush_pending[i] = true;
            self.schedule(at.max(self.now + FLUSH_DELAY), Ev::Flush(i));
        }
    }

    fn deliver(&mut self, ev: Ev) {
        if ev.busy() {
            self.busy -= 1;
        }
        if let Some(end) = ev.at()
            && !self.link_up(end)
        {
            return;
        }
        match ev {
            Ev::Start(i) => self.input(i, Input::Start),
            Ev::Flush(i) => {
                self.flush_pending[i] = false;
                self.stats.inputs += 1;
                let outs = self.speakers[i].flush(self.now);
                self.apply(i, outs);
            }
            Ev::Syn { from, attempt } => {
                let Some((j, m)) = self.far[from.0][from.1] else {
                    return;
                };
                if !self.link_up((j, m)) {
                    return;
                }
                if matches!(self.socks[j][m], Sock::Up(_)) {
                    // The far end keeps the connection it has.
                    let at = self.now + self.latency();
                    self.schedule(at, Ev::Refused { to: from, attempt });
                    return;
                }
                let conn = self.id();
                self.socks[j][m] = Sock::Up(conn);
                // The SYN-ACK goes first on the connection back.
                self.send_on(
                    conn,
                    from,
                    Ev::SynAck {
                        to: from,
                        attempt,
                        conn,
                    },
                );
                self.input(j, Input::Connected { peer: m });
            }
            Ev::SynAck {
                to: (i, n),
                attempt,
                conn,
            } => {
                if self.socks[i][n] == Sock::Connecting(attempt) {
                    self.socks[i][n] = Sock::Up(conn);
                    self.input(i, Input::Connected { peer: n });
                } else if let Some(to) = self.far[i][n] {
                    // Abandoned meanwhile: reset the far end.
                    self.send_on(conn, to, Ev::Fin { to, conn });
                }
            }
            Ev::Refused {
                to: (i, n),
                attempt,
            } => {
                if self.socks[i][n] == Sock::Connecting(attempt) {
                    self.socks[i][n] = Sock::None;
                    self.input(i, Input::ConnectFailed { peer: n });
                }
            }
            Ev::Data {
                to: (i, n),
                conn,
                bytes,
            } => {
                if self.socks[i][n] == Sock::Up(conn) {
                    self.input(
                        i,
                        Input::Bytes {
                            peer: n,
                            data: bytes,
                        },
                    );
                }
            }
            Ev::Fin { to: (i, n), conn } => {
                if self.socks[i][n] == Sock::Up(conn) {
                    self.socks[i][n] = Sock::None;
                    self.input(i, Input::Closed { peer: n });
                }
            }
        }
    }

    /// Runs the next event or the next timers.
    fn step(&mut self) {
        let next_ev = self.queue.keys().next().map(|k| k.0);
        let next_timer = self.timers.first().map(|&(t, _)| t);
        let timer_first = match (next_ev, next_timer) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(e), Some(t)) => t <= e,
        };
        match next_ev {
            _ if timer_first => {
                let t = next_timer.expect("a timer");
                self.now = self.now.max(t);
                // One entry per speaker: in speaker order, as before.
                let mut due: Vec<usize> = self
                    .timers
                    .iter()
                    .take_while(|&&(d, _)| d <= self.now)
                    .map(|&(_, i)| i)
                    .collect();
                due.sort_unstable();
                for i in due {
                    self.input(i, Input::Tick);
                }
            }
            Some(_) => {
                let ((at, _), ev) = self.queue.pop_first().expect("an event");
                self.now = self.now.max(at);
                self.deliver(ev);
            }
            None => panic!("nothing left to run: no timers at all"),
        }
    }

    fn sessions_up(&self) -> bool {
        self.speakers.iter().all(|s| {
            (0..s.plan().neighbours.len()).all(|n| {
                matches!(
                    s.peer_state(n),
                    Some(PeerState::Established | PeerState::PortDown)
                )
            })
        })
    }

    /// Runs until every session whose port is up is Established and
    /// nothing but KEEPALIVEs is in flight; what the phase took.
    fn run_until_quiet(&mut self) -> Phase {
        let start = self.now;
        self.stats = Phase::default();
        self.last_fib = start;
        while self.busy > 0 || !self.sessions_up() {
            assert!(
                self.now < start + PHASE_LIMIT,
                "no convergence after {PHASE_LIMIT:?}: {} busy, sessions {:?}",
                self.busy,
                self.speakers
                    .iter()
                    .map(|s| (0..s.plan().neighbours.len())
                        .map(|n| s.peer_state(n))
                        .collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            );
            self.step();
        }
        Phase {
            converged: self.last_fib - start,
            quiet: self.now - start,
            ..self.stats
        }
    }

    /// Runs [`SETTLE`] more: keepalives only, no FIB change, nothing goes
    /// down.
    fn settle(&mut self) {
        let until = self.now + SETTLE;
        let fib_sets = self.stats.fib_sets;
        while self.now < until {
            self.step();
        }
        assert_eq!(self.stats.fib_sets, fib_sets, "the FIB moved while idle");
        assert!(self.sessions_up(), "a session went down while idle");
        assert_eq!(self.busy, 0);
    }

    fn check(&self, failures: &Failures, what: &str) {
        let expected = plan::converged(&self.plans, failures);
        for (s, fib) in self.speakers.iter().zip(&expected) {
            assert_eq!(s.installed(), fib, "{what}: {}'s FIB", s.plan().name);
            assert_eq!(s.digest(), FibDigest::of(fib));
            assert!(s.status(self.now).converged(&FibDigest::of(fib)));
        }
    }

    /// Both ends of session end `end`'s link go down (or up).
    fn set_link(&mut self, (i, n): End, up: bool) -> LinkId {
        let link = self.plans[i].neighbours[n].link.expect("a fabric link");
        let (j, m) = self.far[i][n].expect("a peer in the fabric");
        if up {
            self.down.remove(&link);
        } else {
            // The network drops the connection first: nothing sent on it
            // arrives any more.
            self.down.insert(link);
        }
        for (s, k) in [(i, n), (j, m)] {
            let ifname = self.plans[s].neighbours[k].ifname.clone();
            self.input(s, Input::Port { ifname, up });
        }
        link
    }
}

/// The numbers of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    speakers: usize,
    sessions: usize,
    routes: usize,
    phases: Vec<Phase>,
    /// Digest of every FIB at the end.
    fibs: Vec<FibDigest>,
}

/// Starts the fabric, fails the link of `fail` (a session end chosen by
/// the caller), restores it, and with `host_port` also fails and restores
/// a host link of that speaker; checks the FIBs after each phase.
fn run(lab: &Lab, seed: u64, fail: End, host_port: Option<usize>) -> Run {
    let mut net = Net::new(lab, seed);
    for i in 0..net.speakers.len() {
        let at = Duration::from_micros(net.rng.next_u64() % STAGGER_US);
        net.schedule(at, Ev::Start(i));
    }
    let mut phases = Vec::new();
    phases.push(net.run_until_quiet());
    net.check(&Failures::default(), "all up");
    net.settle();

    let mut failures = Failures::default();
    let link = net.set_link(fail, false);
    failures.links.insert(link);
    phases.push(net.run_until_quiet());
    net.check(&failures, "link down");
    net.settle();

    net.set_link(fail, true);
    phases.push(net.run_until_quiet());
    net.check(&Failures::default(), "link restored");
    net.settle();

    if let Some(i) = host_port {
        let (ifname, link) = net.plans[i].host_ports[0].clone();
        let mut failures = Failures::default();
        failures.links.insert(link);
        net.input(
            i,
            Input::Port {
                ifname: ifname.clone(),
                up: false,
            },
        );
        phases.push(net.run_until_quiet());
        net.check(&failures, "host link down");
        net.input(i, Input::Port { ifname, up: true });
        phases.push(net.run_until_quiet());
        net.check(&Failures::default(), "host link restored");
    }
    Run {
        speakers: net.speakers.len(),
        sessions: net.plans.iter().map(|p| p.neighbours.len()).sum::<usize>() / 2,
        routes: net.speakers.iter().map(|s| s.installed().len()).sum(),
        phases,
        fibs: net.speakers.iter().map(Speaker::digest).collect(),
    }
}

fn report(what: &str, seed: u64, run: &Run, wall: Duration) {
    println!(
        "{what} seed {seed}: {} speakers, {} sessions, {} routes, {wall:.2?} wall",
        run.speakers, run.sessions, run.routes
    );
    for (name, p) in ["start", "link down", "restore", "host down", "host up"]
        .iter()
        .zip(&run.phases)
    {
        println!(
            "  {name:>9}: FIB converged at {:.3?}, quiet at {:.3?}; {} messages ({} UPDATEs), {} FIB sets / {} routes, {} inputs",
            p.converged, p.quiet, p.messages, p.updates, p.fib_sets, p.fib_routes, p.inputs
        );
    }
}

#[test]
fn fat_tree_k4_converges_around_a_failed_link_and_back() {
    let lab = lab("fat-tree-k4.toml", FAT_TREE_K4);
    // edge0-0's first uplink (to an aggregation switch).
    let fail = (0, 0);
    let t = Instant::now();
    let first = run(&lab, 1, fail, None);
    report("fat-tree k=4", 1, &first, t.elapsed());
    assert_eq!(first.speakers, 20);
    assert_eq!(first.sessions, 32);
    // The same seed, the same run, to the message.
    assert_eq!(run(&lab, 1, fail, None), first);
    // Other seeds: other orders, the same FIBs.
    for seed in 2..6 {
        let t = Instant::now();
        let other = run(&lab, seed, fail, None);
        report("fat-tree k=4", seed, &other, t.elapsed());
        assert_eq!(other.fibs, first.fibs);
    }
}

#[test]
fn hpn_converges_around_failed_links_and_moves_a_host() {
    let lab = lab("hpn.toml", HPN);
    let plans = plan::speakers(&lab.fabric);
    // A ToR with a dual-homed host: its /32 moves to the other ToR.
    let tor = plans
        .iter()
        .position(|p| p.originate.iter().any(|o| o.port.is_some()))
        .expect("a ToR with a dual-homed host");
    let fail = (tor, 0);
    let t = Instant::now();
    let first = run(&lab, 7, fail, Some(tor));
    report("hpn", 7, &first, t.elapsed());
    assert_eq!(run(&lab, 7, fail, Some(tor)), first);
    for seed in [8, 9, 10] {
        let t = Instant::now();
        let other = run(&lab, seed, fail, Some(tor));
        report("hpn", seed, &other, t.elapsed());
        assert_eq!(other.fibs, first.fibs);
    }
}

/// The CPU cost of converging a k=16 fabric (320 speakers) from a cold
/// start, for profiling: `cargo test --release -p turbonet-routing --test
/// bgp_sim -- --ignored --nocapture`.
#[test]
#[ignore = "seconds of CPU: run by hand to profile"]
fn fat_tree_k16_cold_start() {
    let lab = lab("k16.toml", &FAT_TREE_K4.replace("k = 4", "k = 16"));
    let t = Instant::now();
    let first = run(&lab, 1, (0, 0), None);
    report("fat-tree k=16", 1, &first, t.elapsed());
}

/// The CPU cost of converging a leaf-spine of 1,000 speakers (4 spines,
/// 996 leaves): each spine has 996 sessions and sends every leaf's prefix
/// to every other leaf. `cargo test --release -p turbonet-routing --test
/// bgp_sim -- --ignored --nocapture`.
#[test]
#[ignore = "seconds of CPU: run by hand to profile"]
fn leaf_spine_1000_cold_start() {
    let text = "[lab]\nname = \"ls\"\n\n[topology]\nkind = \"leaf-spine\"\nspines = 4\n\
                leaves = 996\nhosts_per_leaf = 1\nuplinks = 1\n\n[routing]\nmode = \"bgp\"\n";
    let lab = lab("ls1000.toml", text);
    let t = Instant::now();
    let first = run(&lab, 1, (0, 0), None);
    report("leaf-spine 4x996", 1, &first, t.elapsed());
}

/// The memory and CPU of converging the real HPN pod cut to a few
/// segments (`TURBONET_SIM_SEGMENTS`, default 2), for profiling the RIBs:
/// `cargo test --release -p turbonet-routing --test bgp_sim -- --ignored
/// --nocapture hpn_pod`.
#[test]
#[ignore = "minutes of CPU: run by hand to profile"]
fn hpn_pod_segments_cold_start() {
    let segments: usize = std::env::var("TURBONET_SIM_SEGMENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../scenarios/hpn-pod.toml"
    ))
    .expect("the bundled pod")
    .replace("segments = 15", &format!("segments = {segments}"));
    let lab = lab("hpn-pod.toml", &text);
    let t = Instant::now();
    let mut net = Net::new(&lab, 1);
    for i in 0..net.speakers.len() {
        let at = Duration::from_micros(net.rng.next_u64() % STAGGER_US);
        net.schedule(at, Ev::Start(i));
    }
    let phase = net.run_until_quiet();
    net.check(&Failures::default(), "all up");
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find(|l| l.starts_with("VmHWM"))
        .unwrap_or("VmHWM: ?");
    let adj_in: usize = net
        .speakers
        .iter()
        .map(|s| {
            let status = s.status(net.now);
            status.neighbours.iter().map(|n| n.received).sum::<usize>()
        })
        .sum();
    println!(
        "hpn pod, {segments} segments: {} speakers, {} routes, {adj_in} Adj-RIB-In routes; \
         {:.2?} wall, converged at {:.3?} virtual, {} messages; {hwm}",
        net.speakers.len(),
        net.speakers
            .iter()
            .map(|s| s.installed().len())
            .sum::<usize>(),
        t.elapsed(),
        phase.converged,
        phase.messages,
    );
}

const LEAF_SPINE_60: &str = "[lab]\nname = \"ls\"\n\n[topology]\nkind = \"leaf-spine\"\n\
                             spines = 4\nleaves = 60\nhosts_per_leaf = 1\nuplinks = 1\n\n\
                             [routing]\nmode = \"bgp\"\n";

/// A cold start of `lab` with `settle`: the phase's counts and the final
/// routes.
fn cold_start(lab: &Lab, seed: u64, settle: Settle) -> (Phase, usize) {
    let mut net = Net::settling(lab, seed, settle);
    for i in 0..net.speakers.len() {
        let at = Duration::from_micros(net.rng.next_u64() % STAGGER_US);
        net.schedule(at, Ev::Start(i));
    }
    let phase = net.run_until_quiet();
    net.check(&Failures::default(), "all up");
    let routes = net.speakers.iter().map(|s| s.installed().len()).sum();
    // The speakers count what the network saw.
    let counted = net.speakers.iter().fold((0, 0), |(u, c), s| {
        let counters = s.status(net.now).counters;
        (u + counters.updates_sent, c + counters.set_changes)
    });
    assert_eq!(counted, (phase.updates, phase.fib_routes));
    (phase, routes)
}

/// The redundant work of a converging fabric, counted: while UPDATEs
/// arrive, a prefix's ECMP set grows a neighbour at a time, and without a
/// settle wait every step is installed and advertised. With the lab's
/// settle wait the set changes fall by a third or more (to at most 1.75 a
/// route), with no more UPDATEs than without it.
#[test]
fn converging_fabrics_install_each_route_about_once() {
    let k8 = FAT_TREE_K4.replace("k = 4", "k = 8");
    for (name, text) in [
        ("leaf-spine 4x60", LEAF_SPINE_60),
        ("fat-tree k=8", &k8[..]),
    ] {
        let lab = lab(name, text);
        for seed in 1..=3 {
            let (eager, routes) = cold_start(&lab, seed, Settle::NONE);
            let (settled, same) = cold_start(&lab, seed, Settle::LAB);
            assert_eq!(same, routes);
            let per_route = |p: &Phase| p.fib_routes as f64 / routes as f64;
            println!(
                "{name} seed {seed}: {routes} routes; set changes a route {:.2} settled, {:.2} \
                 eager; UPDATEs {} settled, {} eager; converged at {:.3?} settled, {:.3?} eager",
                per_route(&settled),
                per_route(&eager),
                settled.updates,
                eager.updates,
                settled.converged,
                eager.converged
            );
            // What is left is mostly sessions that come up a ConnectRetry
            // later (a SYN to a speaker not started yet): 1.5-1.7 here.
            assert!(
                per_route(&settled) <= 1.75 && per_route(&settled) <= 0.7 * per_route(&eager),
                "{name} seed {seed}: {:.2} set changes a route ({:.2} eager)",
                per_route(&settled),
                per_route(&eager)
            );
            assert!(settled.updates <= eager.updates, "{name} seed {seed}");
        }
    }
}
