//! The coordinator of a lab's workers (worker 0), as a state machine on a
//! virtual clock: [`Coordinator::handle`] takes what a connection said,
//! [`Coordinator::tick`] what time it is, and both answer with what to
//! tell whom ([`Output`]). [`Coordinator::next_deadline`] says when to tick
//! next. Times are durations since any fixed origin the caller keeps.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A connection, as the caller numbers them. The coordinator's own
/// worker is [`Coordinator::OWN`]; other connections take any other
/// number, never reused.
pub type Conn = u64;

/// What a worker says first: who it is and what it computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The lab's name.
    pub lab: String,
    /// Its part's index (0 is the coordinator's).
    pub index: usize,
    /// How many machines the lab spans.
    pub of: usize,
    /// The turbonet it runs (its version and build).
    pub version: String,
    /// The hash of the partition it computed from the scenario and `of`.
    pub partition: u64,
    /// Its address on the underlay, where its cut links' far ends send.
    pub underlay: IpAddr,
    /// The UDP ports its machine's other labs' cut links use: the kernel
    /// takes a VXLAN device's VNI and port once per machine, so labs over
    /// the same machines each take a port of their own.
    #[serde(default)]
    pub busy_ports: Vec<u16>,
}

/// A link or node failed (`up` false) or restored at one machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Change {
    /// A node (else a link).
    pub node: bool,
    /// Its name.
    pub name: String,
    /// Restored (else failed).
    pub up: bool,
}

/// The coordinator's patience.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// How long every worker has to connect, from the coordinator's start.
    pub rendezvous: Duration,
    /// How often a worker says it is alive.
    pub heartbeat: Duration,
    /// Heartbeats missed in a row before a worker is lost.
    pub missed: u32,
    /// How long a worker has to build its part once told to.
    pub build: Duration,
    /// The lowest UDP port a lab's cut links may take.
    pub first_port: u16,
}

impl Default for Settings {
    /// Two minutes to gather, a heartbeat a second and three missed,
    /// twenty minutes to build (the real HPN pod's part under BGP takes
    /// minutes), ports from 14789 (`turbonet_host::kernel::VXLAN_PORT`:
    /// not VXLAN's 4789, which a machine's own overlay may hold).
    fn default() -> Self {
        Settings {
            rendezvous: Duration::from_secs(120),
            heartbeat: Duration::from_secs(1),
            missed: 3,
            build: Duration::from_secs(1200),
            first_port: 14789,
        }
    }
}

/// What a connection said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Its first message.
    Hello {
        /// The connection.
        conn: Conn,
        /// What it said.
        hello: Hello,
    },
    /// Its worker built its part (or built it again).
    Built {
        /// The connection.
        conn: Conn,
    },
    /// Its worker could not build its part.
    BuildFailed {
        /// The connection.
        conn: Conn,
        /// Why, in the worker's words.
        error: String,
    },
    /// A link or node was failed or restored at its worker's machine:
    /// every other machine is to follow.
    Change {
        /// The connection.
        conn: Conn,
        /// What changed.
        change: Change,
    },
    /// Anything else, a heartbeat included: it is alive.
    Alive {
        /// The connection.
        conn: Conn,
    },
    /// It closed.
    Closed {
        /// The connection.
        conn: Conn,
    },
}

/// What to tell whom.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Refuse connection `conn` with `reason`, and close it.
    Refuse {
        /// The connection.
        conn: Conn,
        /// Why, naming both sides of a disagreement.
        reason: String,
    },
    /// Tell worker `index` to build its part, with every machine's
    /// underlay address (by index) and the lab's UDP port.
    Build {
        /// The worker.
        index: usize,
        /// Every machine's underlay address.
        underlays: Vec<IpAddr>,
        /// The UDP port of the lab's cut links, on every machine.
        port: u16,
    },
    /// Tell worker `to` that machine `peer` is now at `underlay` (it came
    /// back from another machine): its cut links to `peer` send there.
    Repoint {
        /// The worker told.
        to: usize,
        /// The machine that moved.
        peer: usize,
        /// Its new address.
        underlay: IpAddr,
    },
    /// Tell worker `to` to take its cut links to machine `peer` down, or
    /// bring them back up: the carrier VXLAN does not have.
    Carrier {
        /// The worker told.
        to: usize,
        /// The machine at the far end.
        peer: usize,
        /// Up (the far end is back) or down (it is lost).
        up: bool,
    },
    /// Tell worker `to` that a link or node was failed or restored at
    /// another machine: its part follows (every running worker but the
    /// one it happened at is told), so every part knows the same failures.
    /// A worker that has just built its part (again) is told the last state
    /// of every link and node said so far, wherever it was said: a worker
    /// back from a restart learns what changed while it was away.
    Change {
        /// The worker told.
        to: usize,
        /// What changed.
        change: Change,
    },
    /// The lab's phase is now this.
    Phase(Phase),
}

/// Where the lab stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "phase")]
pub enum Phase {
    /// Waiting for these workers to connect.
    Gathering {
        /// Their indexes.
        missing: Vec<usize>,
    },
    /// Waiting for these workers to build their parts the first time.
    Building {
        /// Their indexes.
        waiting: Vec<usize>,
    },
    /// Every worker has built its part and is alive.
    Running,
    /// These workers are lost (or building their parts again); the rest
    /// run, their cut links to them down.
    Degraded {
        /// Their indexes.
        lost: Vec<usize>,
    },
    /// Given up.
    Failed {
        /// Why.
        reason: String,
    },
}

/// What the coordinator knows of one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// Its connection (`None`: not connected, yet or any more).
    pub conn: Option<Conn>,
    /// Its underlay address, as it last said.
    pub underlay: Option<IpAddr>,
    /// When it was last heard.
    pub last_seen: Duration,
    /// It has built its part since it last connected.
    pub built: bool,
    /// When it was told to build, if it has not built since.
    building_since: Option<Duration>,
    /// The other workers were told to take its cut links down.
    carrier_down: bool,
}

impl Worker {
    fn absent() -> Worker {
        Worker {
            conn: None,
            underlay: None,
            last_seen: Duration::ZERO,
            built: false,
            building_since: None,
            carrier_down: false,
        }
    }

    /// Connected, and built since it connected.
    fn running(&self) -> bool {
        self.conn.is_some() && self.built
    }
}

/// The coordinator of a lab's workers.
#[derive(Debug)]
pub struct Coordinator {
    own: Hello,
    settings: Settings,
    started: Duration,
    workers: Vec<Worker>,
    /// Which worker each connection is.
    conns: HashMap<Conn, usize>,
    /// Every worker has connected once: the parts were handed out.
    gathered: bool,
    /// Every worker has built its part once.
    built_once: bool,
    failed: Option<String>,
    /// The phase last said.
    said: Option<Phase>,
    /// The lab's UDP port, once gathered.
    port: Option<u16>,
    /// Each worker's busy ports, as it last said.
    busy: Vec<Vec<u16>>,
    /// Whether each link and node (a node: `true`, and its name) was last
    /// said to be up: an entry a name said (the workers' daemons say only
    /// the lab's links and nodes).
    states: BTreeMap<(bool, String), bool>,
}

impl Coordinator {
    /// The connection of the coordinator's own worker.
    pub const OWN: Conn = 0;

    /// A coordinator that is worker `own.index` (0) of `own.of`, started
    /// at `now`; what to tell first (a lab on one machine builds at once).
    pub fn new(own: Hello, settings: Settings, now: Duration) -> (Coordinator, Vec<Output>) {
        let mut workers = vec![Worker::absent(); own.of.max(1)];
        let mut busy = vec![Vec::new(); workers.len()];
        busy[0].clone_from(&own.busy_ports);
        workers[0] = Worker {
            conn: Some(Self::OWN),
            underlay: Some(own.underlay),
            last_seen: now,
            ..Worker::absent()
        };
        let mut coordinator = Coordinator {
            own,
            settings,
            started: now,
            workers,
            conns: HashMap::from([(Self::OWN, 0)]),
            gathered: false,
            built_once: false,
            failed: None,
            said: None,
            port: None,
            busy,
            states: BTreeMap::new(),
        };
        let mut out = Vec::new();
        coordinator.gather_if_all_here(now, &mut out);
        coordinator.say_phase(&mut out);
        (coordinator, out)
    }

    /// Every worker, by index.
    pub fn workers(&self) -> &[Worker] {
        &self.workers
    }

    /// Where the lab stands.
    pub fn phase(&self) -> Phase {
        if let Some(reason) = &self.failed {
            return Phase::Failed {
                reason: reason.clone(),
            };
        }
        let indexes = |keep: &dyn Fn(&Worker) -> bool| -> Vec<usize> {
            (0..self.workers.len())
                .filter(|i| keep(&self.workers[*i]))
                .collect()
        };
        if !self.gathered {
            return Phase::Gathering {
                missing: indexes(&|w| w.conn.is_none()),
            };
        }
        if !self.built_once {
            return Phase::Building {
                waiting: indexes(&|w| !w.running()),
            };
        }
        let lost = indexes(&|w| !w.running());
        if lost.is_empty() {
            Phase::Running
        } else {
            Phase::Degraded { lost }
        }
    }

    /// When [`Coordinator::tick`] has something to do next, if ever.
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.failed.is_some() {
            return None;
        }
        let mut next: Option<Duration> = None;
        let mut consider = |at: Duration| next = Some(next.map_or(at, |n| n.min(at)));
        if !self.gathered {
            consider(self.started + self.settings.rendezvous);
        }
        for w in self.workers.iter().skip(1).filter(|w| w.conn.is_some()) {
            consider(w.last_seen + self.silence());
            if let Some(since) = w.building_since {
                consider(since + self.settings.build);
            }
        }
        next
    }

    /// How long a worker may stay silent.
    fn silence(&self) -> Duration {
        self.settings.heartbeat * self.settings.missed
    }

    /// What time it is: workers silent too long are lost, a rendezvous or
    /// a build that took too long fails.
    pub fn tick(&mut self, now: Duration) -> Vec<Output> {
        let mut out = Vec::new();
        if self.failed.is_some() {
            return out;
        }
        if !self.gathered && now >= self.started + self.settings.rendezvous {
            let missing: Vec<usize> = (1..self.workers.len())
                .filter(|i| self.workers[*i].conn.is_none())
                .collect();
            self.fail(
                format!(
                    "{} did not connect within {} s",
                    workers_named(&missing),
                    self.settings.rendezvous.as_secs()
                ),
                &mut out,
            );
            return out;
        }
        for index in 1..self.workers.len() {
            let w = &self.workers[index];
            let Some(conn) = w.conn else { continue };
            if now >= w.last_seen + self.silence() {
                let reason = format!(
                    "worker {index} was silent for {} s",
                    (now - w.last_seen).as_secs()
                );
                self.lose(index, now, &mut out);
                out.push(Output::Refuse { conn, reason });
            } else if let Some(since) = w.building_since
                && now >= since + self.settings.build
            {
                let reason = format!(
                    "worker {index} did not build its part within {} s",
                    self.settings.build.as_secs()
                );
                if !self.built_once {
                    self.fail(reason, &mut out);
                    return out;
                }
                self.lose(index, now, &mut out);
                out.push(Output::Refuse { conn, reason });
            }
        }
        self.say_phase(&mut out);
        out
    }

    /// What a connection said at `now`.
    pub fn handle(&mut self, now: Duration, input: Input) -> Vec<Output> {
        let mut out = Vec::new();
        match input {
            Input::Hello { conn, hello } => self.hello(now, conn, hello, &mut out),
            Input::Built { conn } => {
                if let Some(index) = self.known(conn, &mut out) {
                    self.built(index, now, &mut out);
                }
            }
            Input::BuildFailed { conn, error } => {
                if let Some(index) = self.known(conn, &mut out) {
                    let reason = format!("worker {index} could not build its part: {error}");
                    if self.built_once {
                        self.lose(index, now, &mut out);
                        out.push(Output::Refuse { conn, reason });
                    } else {
                        self.fail(reason, &mut out);
                    }
                }
            }
            Input::Alive { conn } => {
                if let Some(index) = self.known(conn, &mut out) {
                    self.workers[index].last_seen = now;
                }
            }
            Input::Change { conn, change } => {
                if let Some(index) = self.known(conn, &mut out) {
                    self.workers[index].last_seen = now;
                    self.states
                        .insert((change.node, change.name.clone()), change.up);
                    for to in (0..self.workers.len()).filter(|&w| w != index) {
                        if self.workers[to].running() {
                            let change = change.clone();
                            out.push(Output::Change { to, change });
                        }
                    }
                }
            }
            Input::Closed { conn } => {
                if let Some(index) = self.conns.get(&conn).copied() {
                    self.lose(index, now, &mut out);
                }
            }
        }
        self.say_phase(&mut out);
        out
    }

    /// The worker of a connection that said hello; one that did not is
    /// refused.
    fn known(&mut self, conn: Conn, out: &mut Vec<Output>) -> Option<usize> {
        let index = self.conns.get(&conn).copied();
        if index.is_none() {
            out.push(Output::Refuse {
                conn,
                reason: "a worker says hello first".to_owned(),
            });
        }
        index
    }

    fn hello(&mut self, now: Duration, conn: Conn, hello: Hello, out: &mut Vec<Output>) {
        if let Err(reason) = self.admit(conn, &hello) {
            out.push(Output::Refuse { conn, reason });
            return;
        }
        let index = hello.index;
        let moved = self.workers[index]
            .underlay
            .is_some_and(|before| before != hello.underlay);
        let w = &mut self.workers[index];
        w.conn = Some(conn);
        w.underlay = Some(hello.underlay);
        w.last_seen = now;
        w.built = false;
        self.conns.insert(conn, index);
        self.busy[index] = hello.busy_ports;
        if !self.gathered {
            self.gather_if_all_here(now, out);
            return;
        }
        // Back after it was lost: the others send to where it is now, and
        // it builds its part again, its cut links to the machines still
        // lost down.
        if moved {
            for to in self.others(index) {
                out.push(Output::Repoint {
                    to,
                    peer: index,
                    underlay: hello.underlay,
                });
            }
        }
        self.tell_to_build(index, now, out);
        for peer in (0..self.workers.len()).filter(|p| *p != index) {
            if self.workers[peer].carrier_down {
                out.push(Output::Carrier {
                    to: index,
                    peer,
                    up: false,
                });
            }
        }
    }

    /// Whether `hello` on `conn` is one of this lab's workers, agreeing
    /// with the coordinator; why not.
    fn admit(&self, conn: Conn, hello: &Hello) -> Result<(), String> {
        let own = &self.own;
        let m = self.workers.len();
        if let Some(reason) = &self.failed {
            return Err(format!("lab {} failed: {reason}", own.lab));
        }
        if self.conns.contains_key(&conn) {
            return Err(format!(
                "worker {} said hello twice on one connection",
                hello.index
            ));
        }
        if hello.lab != own.lab {
            return Err(format!(
                "this is the coordinator of lab {}; the worker belongs to lab {}",
                own.lab, hello.lab
            ));
        }
        if hello.of != m {
            return Err(format!(
                "worker {} splits lab {} over {} machines, the coordinator over {m}",
                hello.index, own.lab, hello.of
            ));
        }
        if hello.index == 0 || hello.index >= m {
            return Err(format!(
                "there is no worker {} of lab {}: the coordinator is 0 and the workers are 1 to {}",
                hello.index,
                own.lab,
                m - 1
            ));
        }
        if hello.version != own.version {
            return Err(format!(
                "worker {} runs turbonet {}, the coordinator {}: run the same turbonet on every machine",
                hello.index, hello.version, own.version
            ));
        }
        if hello.partition != own.partition {
            return Err(format!(
                "worker {} computed partition {:016x}, the coordinator {:016x}: they read different \
                 scenarios",
                hello.index, hello.partition, own.partition
            ));
        }
        if let Some(port) = self.port
            && hello.busy_ports.contains(&port)
        {
            return Err(format!(
                "UDP port {port}, lab {}'s, is taken on worker {}'s machine (at {}) by another lab",
                own.lab, hello.index, hello.underlay
            ));
        }
        let w = &self.workers[hello.index];
        if w.conn.is_some() {
            let mut reason = format!(
                "worker {} (at {}) is connected already",
                hello.index, hello.underlay
            );
            if let Some(at) = w.underlay {
                let _ = write!(reason, " from {at}");
            }
            return Err(reason);
        }
        Ok(())
    }

    /// Hands the parts out once every worker is here.
    fn gather_if_all_here(&mut self, now: Duration, out: &mut Vec<Output>) {
        if self.gathered || self.workers.iter().any(|w| w.conn.is_none()) {
            return;
        }
        let busy: std::collections::BTreeSet<u16> = self.busy.iter().flatten().copied().collect();
        let Some(port) = (self.settings.first_port..=u16::MAX).find(|p| !busy.contains(p)) else {
            self.fail(
                format!(
                    "every UDP port from {} up is taken by other labs on the machines",
                    self.settings.first_port
                ),
                out,
            );
            return;
        };
        self.port = Some(port);
        self.gathered = true;
        for index in 0..self.workers.len() {
            self.tell_to_build(index, now, out);
        }
    }

    /// Tells worker `index` to build its part (once gathered: every
    /// worker has said where it is, and the port is chosen).
    fn tell_to_build(&mut self, index: usize, now: Duration, out: &mut Vec<Output>) {
        let underlays = self
            .workers
            .iter()
            .map(|w| {
                w.underlay
                    .expect("every worker said hello before any builds")
            })
            .collect();
        self.workers[index].building_since = Some(now);
        out.push(Output::Build {
            index,
            underlays,
            port: self
                .port
                .expect("the port is chosen before any worker builds"),
        });
    }

    fn built(&mut self, index: usize, now: Duration, out: &mut Vec<Output>) {
        let w = &mut self.workers[index];
        if w.building_since.is_none() {
            return;
        }
        w.built = true;
        w.building_since = None;
        w.last_seen = now;
        self.mirror_carrier(index, true, out);
        // What changed while it was not running (a failure and a restore
        // alike: a part kept over a restart may hold a failure since
        // undone), said the same for a part built anew.
        for ((node, name), up) in &self.states {
            let change = Change {
                node: *node,
                name: name.clone(),
                up: *up,
            };
            out.push(Output::Change { to: index, change });
        }
        if !self.built_once && self.workers.iter().all(Worker::running) {
            self.built_once = true;
        }
    }

    /// Worker `index` is gone: every other worker takes its cut links to
    /// it down.
    fn lose(&mut self, index: usize, now: Duration, out: &mut Vec<Output>) {
        if index == 0 {
            return;
        }
        let w = &mut self.workers[index];
        let Some(conn) = w.conn.take() else { return };
        self.conns.remove(&conn);
        w.built = false;
        w.building_since = None;
        w.last_seen = now;
        if self.gathered {
            self.mirror_carrier(index, false, out);
        }
        // Before, nothing was handed out: it is only missing again.
    }

    /// Tells every other connected worker that its cut links to machine
    /// `index` are up or down, unless they were told so last.
    fn mirror_carrier(&mut self, index: usize, up: bool, out: &mut Vec<Output>) {
        let w = &mut self.workers[index];
        if w.carrier_down != up {
            return;
        }
        w.carrier_down = !up;
        for to in self.others(index) {
            out.push(Output::Carrier {
                to,
                peer: index,
                up,
            });
        }
    }

    /// The connected workers other than `index`, ascending.
    fn others(&self, index: usize) -> Vec<usize> {
        (0..self.workers.len())
            .filter(|to| *to != index && self.workers[*to].conn.is_some())
            .collect()
    }

    fn fail(&mut self, reason: String, out: &mut Vec<Output>) {
        self.failed = Some(reason);
        self.say_phase(out);
    }

    /// Says the phase if it is not the one last said.
    fn say_phase(&mut self, out: &mut Vec<Output>) {
        let phase = self.phase();
        if self.said.as_ref() != Some(&phase) {
            self.said = Some(phase.clone());
            out.push(Output::Phase(phase));
        }
    }
}

/// "worker 2", "workers 2 and 3", "workers 1, 2 and 3".
fn workers_named(indexes: &[usize]) -> String {
    let names: Vec<String> = indexes.iter().map(ToString::to_string).collect();
    match names.as_slice() {
        [] => "no worker".to_owned(),
        [one] => format!("worker {one}"),
        [rest @ .., last] => format!("workers {} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_are_named_as_a_sentence_would() {
        assert_eq!(workers_named(&[2]), "worker 2");
        assert_eq!(workers_named(&[2, 3]), "workers 2 and 3");
        assert_eq!(workers_named(&[1, 2, 3]), "workers 1, 2 and 3");
    }
}
