//! Graded labs (`turbonet lab`): a folder per lab under `labs/` with the
//! lab's scenario (`lab.toml`, whose `[[task]]`s are the tasks), a
//! `README.md` for the student, and a reference solution. [`grade`] runs
//! every task's checks against the running lab and says plainly what is
//! still wrong.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use turbonet_experiment::judge::{
    Observed, Port, SeenEnd, SeenLink, SeenLookup, SeenRoute, verdict,
};
use turbonet_topo::check::{Check, FrameKind};
use turbonet_topo::course::Task;
use turbonet_topo::{Lab, NodeId};

use turbonet_host::kernel::interfaces::PortState;
use turbonet_host::kernel::table::TableRoute;
use turbonet_lab::check::addresses;
use turbonet_lab::error::{Error, Result};
use turbonet_lab::inspect::Running;

/// The scenario file of a lab's folder.
pub const SCENARIO: &str = "lab.toml";

/// How long reachability probes wait for answers, in seconds.
const PROBE_TIMEOUT: f64 = 2.0;

/// How long capture checks watch a link when no graded workload runs.
const QUIET_WINDOW: Duration = Duration::from_secs(2);

/// How long the graded workloads may run before they are stopped.
const WORKLOADS_TIMEOUT: Duration = Duration::from_secs(300);

/// One graded lab on disk.
#[derive(Debug, Clone, Serialize)]
pub struct CourseLab {
    /// Its folder's name: what `lab start` takes.
    pub name: String,
    /// The first heading of its README (its name without one).
    pub title: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its tasks.
    pub tasks: Vec<Task>,
    /// The running lab's name (`[lab] name` of its scenario).
    pub lab: String,
}

impl CourseLab {
    /// Its scenario file.
    pub fn scenario(&self) -> PathBuf {
        self.dir.join(SCENARIO)
    }

    /// Points for every task.
    pub fn points(&self) -> u32 {
        self.tasks.iter().map(|t| t.points).sum()
    }
}

/// Where the labs are once [`fix_labs_dir`] said so.
static LABS_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Where the Debian package installs the bundled labs.
pub const INSTALLED_LABS: &str = "/usr/share/turbonet/labs";

/// Where the labs are: `$TURBONET_LABS`, else `labs` in the current
/// directory, else the installed package's (as [`fix_labs_dir`] found
/// them, if it was called).
pub fn labs_dir() -> PathBuf {
    LABS_DIR.get().cloned().unwrap_or_else(|| {
        if let Some(dir) = std::env::var_os("TURBONET_LABS") {
            return PathBuf::from(dir);
        }
        let here = PathBuf::from("labs");
        if !here.is_dir() && Path::new(INSTALLED_LABS).is_dir() {
            return PathBuf::from(INSTALLED_LABS);
        }
        here
    })
}

/// Fixes where the labs are for the rest of this process, as an absolute
/// path resolved from the current directory now (a service that later
/// works from `/` still finds them); returns it.
pub fn fix_labs_dir() -> PathBuf {
    let dir = labs_dir();
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    LABS_DIR.get_or_init(|| dir).clone()
}

/// Every lab under `dir` (a folder with a `lab.toml`), by name.
pub fn list(dir: &Path) -> Result<Vec<CourseLab>> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Error::NotFound(format!(
            "no labs at {} ({e}): run from the directory that has `labs/`, set TURBONET_LABS, or install the turbonet package (labs in {INSTALLED_LABS})",
            dir.display()
        ))
    })?;
    let mut names: Vec<String> = entries
        .filter_map(std::result::Result::ok)
        .filter(|e| e.path().join(SCENARIO).is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names.iter().map(|n| load(dir, n)).collect()
}

/// Lab `name` under `dir`, its scenario validated.
pub fn find(dir: &Path, name: &str) -> Result<CourseLab> {
    // A folder's name, never a path out of `dir`.
    let plain = !name.is_empty() && !name.starts_with('.') && !name.contains('/');
    if plain && dir.join(name).join(SCENARIO).is_file() {
        return load(dir, name);
    }
    let known: Vec<String> = list(dir)?.into_iter().map(|l| l.name).collect();
    Err(Error::NotFound(format!(
        "no lab `{name}` in {}{}; labs: {}",
        dir.display(),
        turbonet_topo::suggest::did_you_mean(name, known.iter().map(String::as_str)),
        if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        }
    )))
}

fn load(dir: &Path, name: &str) -> Result<CourseLab> {
    let folder = dir.join(name);
    let (lab, _) = turbonet_lab::up::load(&folder.join(SCENARIO))?;
    let title = std::fs::read_to_string(folder.join("README.md"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("# ").map(|h| h.trim().to_owned()))
        })
        .unwrap_or_else(|| name.to_owned());
    Ok(CourseLab {
        name: name.to_owned(),
        title,
        dir: folder,
        tasks: lab.tasks,
        lab: lab.name,
    })
}

/// One check of a task, as found.
#[derive(Debug, Clone, Serialize)]
pub struct CheckResult {
    /// What it requires.
    pub check: String,
    /// Whether it holds.
    pub ok: bool,
    /// What is wrong, said plainly (when it does not hold).
    pub problem: Option<String>,
}

/// One task, graded.
#[derive(Debug, Clone, Serialize)]
pub struct TaskGrade {
    /// Its name.
    pub name: String,
    /// What it asks.
    pub title: String,
    /// What it is worth.
    pub points: u32,
    /// What it scored: all its points when every check holds, else none.
    pub earned: u32,
    /// Each check.
    pub checks: Vec<CheckResult>,
}

/// A lab, graded.
#[derive(Debug, Clone, Serialize)]
pub struct Grade {
    /// The running lab.
    pub lab: String,
    /// Every task graded, in file order.
    pub tasks: Vec<TaskGrade>,
    /// Points scored.
    pub earned: u32,
    /// Points possible.
    pub points: u32,
    /// How long grading took.
    pub seconds: f64,
}

/// Grades the running lab's tasks (only task `only` if given).
pub fn grade(running: &Running, only: Option<&str>) -> Result<Grade> {
    let start = Instant::now();
    let lab = &running.lab;
    if lab.tasks.is_empty() {
        return Err(Error::Invalid(format!(
            "lab {} has no tasks: its scenario has no `[[task]]`",
            lab.name
        )));
    }
    let tasks: Vec<&Task> = match only {
        None => lab.tasks.iter().collect(),
        Some(name) => vec![task(lab, name)?],
    };
    let checks: Vec<&Check> = tasks.iter().flat_map(|t| &t.checks).collect();
    let mut found = Found::default();
    found.observed.nodes = lab.fabric.nodes.iter().map(|n| n.name.clone()).collect();
    found.probe(lab, &checks)?;
    found.measure(running, &checks)?;
    found.record(running, &checks);
    let observed = found.observed;
    let tasks: Vec<TaskGrade> = tasks
        .into_iter()
        .map(|t| {
            let checks: Vec<CheckResult> = t
                .checks
                .iter()
                .map(|c| {
                    let judged = verdict(c, &observed);
                    CheckResult {
                        check: c.describe(|n| lab.fabric.node(n).name.as_str()),
                        ok: judged.pass,
                        problem: (!judged.pass).then(|| judged.standalone()),
                    }
                })
                .collect();
            let earned = if checks.iter().all(|c| c.ok) {
                t.points
            } else {
                0
            };
            TaskGrade {
                name: t.name.clone(),
                title: t.title.clone(),
                points: t.points,
                earned,
                checks,
            }
        })
        .collect();
    Ok(Grade {
        lab: lab.name.clone(),
        earned: tasks.iter().map(|t| t.earned).sum(),
        points: tasks.iter().map(|t| t.points).sum(),
        tasks,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// The graded workloads `lab check` runs for task `only` (every task if
/// `None`), in the order first named.
pub fn graded_workloads<'a>(lab: &'a Lab, only: Option<&str>) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    let checks = lab
        .tasks
        .iter()
        .filter(|t| only.is_none_or(|o| t.name == o))
        .flat_map(|t| &t.checks);
    for name in checks.filter_map(Check::graded_workload) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Task `name` of `lab`, or what the tasks are.
pub fn task<'a>(lab: &'a Lab, name: &str) -> Result<&'a Task> {
    lab.tasks.iter().find(|t| t.name == name).ok_or_else(|| {
        let names: Vec<&str> = lab.tasks.iter().map(|t| t.name.as_str()).collect();
        Error::NotFound(format!(
            "lab {} has no task `{name}`{}; tasks: {}",
            lab.name,
            turbonet_topo::suggest::did_you_mean(name, names.iter().copied()),
            names.join(", ")
        ))
    })
}

/// What the checks need of the lab, measured once.
#[derive(Default)]
struct Found {
    /// (from, address) -> answered.
    answered: HashMap<(NodeId, Ipv4Addr), bool>,
    /// Ports by node, read when first needed.
    ports: BTreeMap<NodeId, std::result::Result<HashMap<String, PortState>, String>>,
    /// What the checks are judged on.
    observed: Observed,
}

/// A capture check's measurement: its link, direction and frames.
type Captured = (String, String, FrameKind);

/// Every filter's counters now, summed by name: (seen, dropped).
fn filter_counts(running: &Running) -> Result<HashMap<String, (u64, u64)>> {
    let mut counts: HashMap<String, (u64, u64)> = HashMap::new();
    for link in turbonet_lab::inspect::link_show(running, None)? {
        for f in link.filters {
            let c = counts.entry(f.name).or_default();
            c.0 += f.seen;
            c.1 += f.dropped;
        }
    }
    Ok(counts)
}

/// How long the graded workloads `names` of `lab` are planned to run,
/// with a second to spare; `None` when one of them has no set length (a
/// transfer of so many bytes, a collective).
fn planned(lab: &Lab, names: &BTreeSet<&str>) -> Option<Duration> {
    let mut longest = Duration::ZERO;
    for w in lab
        .workloads
        .iter()
        .filter(|w| names.contains(w.name.as_str()))
    {
        longest = longest.max(w.start.as_duration() + w.length()?);
    }
    Some(longest + Duration::from_secs(1))
}

/// Whether a captured frame is of `kind`.
fn frame_is(kind: FrameKind, frame: &turbonet_lab::capture::Frame<'_>) -> bool {
    let note = frame.note.as_deref().unwrap_or("");
    let data = frame.data;
    // The IPv4 header, behind one 802.1Q tag at most.
    let ip = match data.get(12..14) {
        Some([0x08, 0x00]) => data.get(14..),
        Some([0x81, 0x00]) if data.get(16..18) == Some(&[0x08, 0x00]) => data.get(18..),
        _ => None,
    };
    let protocol = ip.and_then(|h| h.get(9)).copied();
    match kind {
        FrameKind::Any => true,
        FrameKind::Tcp => protocol == Some(6),
        FrameKind::Udp => protocol == Some(17),
        FrameKind::Icmp => protocol == Some(1),
        FrameKind::EcnMarked => {
            note.contains("ecn-marked") || ip.and_then(|h| h.get(1)).is_some_and(|t| t & 3 == 3)
        }
        FrameKind::Dropped => note.starts_with("dropped"),
    }
}

/// Counts the frames of a kind on a link until `until`.
fn count_frames(running: &Running, what: &Captured, until: Instant) -> Result<u64> {
    let (link, direction, frames) = what;
    let options = turbonet_lab::capture::Options {
        link: link.clone(),
        direction: direction.clone(),
        snaplen: 128,
        count: 0,
        duration: Some(until.saturating_duration_since(Instant::now())),
    };
    let mut n = 0;
    turbonet_lab::capture::capture(running, &options, None, |f| {
        if frame_is(*frames, f) {
            n += 1;
        }
        Ok(())
    })?;
    Ok(n)
}

impl Found {
    /// Sends every reachability check's probes at once.
    fn probe(&mut self, lab: &Lab, checks: &[&Check]) -> Result<()> {
        // (from, address): each probed once, however many checks want it.
        let wanted: BTreeSet<(NodeId, Ipv4Addr)> = checks
            .iter()
            .filter_map(|c| match c {
                Check::Reach { from, to, .. } => Some((*from, *to)),
                _ => None,
            })
            .flat_map(|(from, to)| addresses(lab, to).into_iter().map(move |a| (from, a)))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let senders: Vec<NodeId> = wanted
            .iter()
            .map(|(from, _)| *from)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let probes: Vec<(usize, Ipv4Addr)> = wanted
            .iter()
            .map(|(from, addr)| (senders.binary_search(from).expect("a sender"), *addr))
            .collect();
        let answered = turbonet_lab::check::probe(lab, &senders, &probes, PROBE_TIMEOUT)?;
        self.answered = wanted.into_iter().zip(answered).collect();
        for c in checks {
            if let Check::Reach { from, to, .. } = c {
                let seen = addresses(lab, *to)
                    .into_iter()
                    .map(|a| (a, self.answered.get(&(*from, a)).copied().unwrap_or(false)))
                    .collect();
                self.observed.probes.insert((*from, *to), seen);
            }
        }
        Ok(())
    }

    /// Runs the graded workloads the checks name while capturing the links
    /// capture checks name and counting what the filters of filter checks
    /// do ([`Found::run_workloads`]).
    fn measure(&mut self, running: &Running, checks: &[&Check]) -> Result<()> {
        let captures: Vec<Captured> = checks
            .iter()
            .filter_map(|c| match c {
                Check::Capture {
                    link,
                    direction,
                    frames,
                    ..
                } => Some((link.clone(), direction.clone(), *frames)),
                _ => None,
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let filters = checks.iter().any(|c| matches!(c, Check::Filter { .. }));
        if captures.is_empty() && !filters {
            return self.run_workloads(running, checks);
        }
        let graded: BTreeSet<&str> = checks.iter().filter_map(|c| c.graded_workload()).collect();
        let window = if graded.is_empty() {
            QUIET_WINDOW
        } else if let Some(w) = planned(&running.lab, &graded) {
            w
        } else {
            return Err(Error::Invalid(format!(
                "lab {}: a capture or filter check measures while the graded workloads run, \
                 and those ({}) must each run for a set `duration`",
                running.lab.name,
                graded.iter().copied().collect::<Vec<_>>().join(", ")
            )));
        };
        let before = if filters {
            filter_counts(running)?
        } else {
            HashMap::new()
        };
        let until = Instant::now() + window;
        let counted = std::thread::scope(|s| {
            // Every capture started before the workloads are.
            #[allow(clippy::needless_collect)]
            let handles: Vec<_> = captures
                .iter()
                .map(|c| s.spawn(move || count_frames(running, c, until)))
                .collect();
            let ran = self.run_workloads(running, checks);
            // Without workloads, the window is the captures' own.
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            let counted: Vec<Result<u64>> = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::Failed("a capture failed".to_owned())))
                })
                .collect();
            ran.map(|()| counted)
        })?;
        for (c, n) in captures.into_iter().zip(counted) {
            let n = n.map_err(|e| format!("cannot capture {}: {e}", c.0));
            self.observed.captured.insert(c, n);
        }
        if filters {
            let after = filter_counts(running)?;
            self.observed.filtered = after
                .into_iter()
                .map(|(name, (seen, dropped))| {
                    let (s0, d0) = before.get(&name).copied().unwrap_or_default();
                    (name, (seen.saturating_sub(s0), dropped.saturating_sub(d0)))
                })
                .collect();
        }
        Ok(())
    }

    /// Runs the graded workloads the checks name, together (each as the
    /// lab's file has it, its `start` after now), waits for them to end,
    /// and keeps their reports with those of the workloads the student ran.
    fn run_workloads(&mut self, running: &Running, checks: &[&Check]) -> Result<()> {
        let graded: BTreeSet<&str> = checks.iter().filter_map(|c| c.graded_workload()).collect();
        let ran: BTreeSet<&str> = checks
            .iter()
            .filter_map(|c| c.students_workload())
            .collect();
        if graded.is_empty() && ran.is_empty() {
            return Ok(());
        }
        let mut client = turbonet_api::Client::connect(&running.dir)?;
        for name in &graded {
            // One left running by a check that was interrupted starts
            // over; any other failure to start is the one to tell.
            if let Err(e) = client.start_workload(Some(name), "", "") {
                client.stop_workload(name).map_err(|_| e)?;
                client.start_workload(Some(name), "", "")?;
            }
        }
        let deadline = Instant::now() + WORKLOADS_TIMEOUT;
        let reports = loop {
            let reports = client.workloads()?;
            let over = |name: &&str| reports.iter().any(|r| r.name == *name && r.state.is_over());
            if graded.iter().all(over) {
                break reports;
            }
            if Instant::now() > deadline {
                for name in graded.iter().filter(|n| !over(n)) {
                    client.stop_workload(name)?;
                }
                break client.workloads()?;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        self.observed.workloads = reports
            .into_iter()
            .filter(|r| graded.contains(r.name.as_str()) || ran.contains(r.name.as_str()))
            .collect();
        Ok(())
    }

    /// Reads what the other checks are judged on: routes, lookups, BGP,
    /// commands' outcomes, ports; each once, however many checks want it.
    fn record(&mut self, running: &Running, checks: &[&Check]) {
        let lab = &running.lab;
        let name = |n: NodeId| lab.fabric.node(n).name.clone();
        let mut links: BTreeSet<usize> = BTreeSet::new();
        for check in checks {
            match check {
                Check::Route { node, .. } if !self.observed.routes.contains_key(node) => {
                    let routes = turbonet_lab::inspect::node_table(lab, &name(*node))
                        .map(|(_, table, names)| seen_routes(&table, &names))
                        .map_err(|e| format!("cannot read {}'s routes: {e}", name(*node)));
                    self.observed.routes.insert(*node, routes);
                }
                Check::Lookup { node, address, .. } => {
                    (self.observed.lookups.entry((*node, *address)))
                        .or_insert_with(|| lookup(lab, &name(*node), *address));
                }
                Check::Bgp { .. } | Check::Converged { .. } if self.observed.bgp.is_none() => {
                    let report = turbonet_api::Client::connect(&running.dir)
                        .and_then(|mut c| c.bgp(None))
                        .map_err(|e| format!("cannot read the lab's BGP state: {e}"));
                    self.observed.bgp = Some(report);
                }
                Check::Command { node, run, .. } => {
                    let command = ["sh".to_owned(), "-c".to_owned(), run.clone()];
                    let outcome =
                        turbonet_lab::exec::exec_captured(running, &name(*node), &command)
                            .map_err(|e| format!("`{run}` could not run on {}: {e}", name(*node)));
                    self.observed.commands.insert((*node, run.clone()), outcome);
                }
                Check::Link { link, .. } => {
                    let all = lab.fabric.links.iter().enumerate();
                    links.extend(
                        all.filter(|(_, l)| link.as_ref().is_none_or(|n| *n == l.name))
                            .map(|(i, _)| i),
                    );
                }
                _ => {}
            }
        }
        for i in links {
            let link = &lab.fabric.links[i];
            let ends = link
                .ends
                .iter()
                .map(|end| {
                    let node = &lab.fabric.node(end.node).name;
                    let ports = self.ports.entry(end.node).or_insert_with(|| {
                        turbonet_lab::inspect::node_ports(lab, node)
                            .map_err(|e| format!("cannot read {node}'s ports: {e}"))
                    });
                    let state = ports.as_ref().map_err(Clone::clone).map(|ports| {
                        ports.get(&end.ifname).map(|s| Port {
                            up: s.up,
                            carrier: s.carrier,
                            mtu: s.mtu,
                        })
                    });
                    SeenEnd {
                        node: node.clone(),
                        port: end.ifname.clone(),
                        state,
                    }
                })
                .collect();
            self.observed.links.push(SeenLink {
                name: link.name.clone(),
                ends,
            });
        }
    }
}

/// A node's routes with usable next hops, each said as `via A dev D`.
fn seen_routes(table: &[TableRoute], names: &HashMap<u32, String>) -> Vec<SeenRoute> {
    table
        .iter()
        .map(|r| SeenRoute {
            prefix: r.prefix,
            hops: r
                .usable()
                .map(|h| match h.via {
                    Some(v) => format!("via {v} dev {}", if_name(names, h.ifindex)),
                    None => format!("dev {}", if_name(names, h.ifindex)),
                })
                .collect(),
        })
        .collect()
}

/// What `node`'s lookup of `address` gives.
fn lookup(lab: &Lab, node: &str, address: Ipv4Addr) -> std::result::Result<SeenLookup, String> {
    use turbonet_host::kernel::table::Lookup;
    match turbonet_lab::inspect::node_lookup(lab, node, address) {
        Ok((Lookup::Route(route), names)) => Ok(SeenLookup::Route {
            prefix: route.prefix,
            usable: route
                .usable()
                .map(|h| (h.via, if_name(&names, h.ifindex)))
                .collect(),
            ports: route
                .hops
                .iter()
                .map(|h| if_name(&names, h.ifindex))
                .collect(),
        }),
        Ok((Lookup::NoRoute, _)) => Ok(SeenLookup::NoRoute),
        Ok((Lookup::Discard(kind), _)) => Ok(SeenLookup::Discard(kind.to_owned())),
        Err(e) => Err(format!("cannot look {address} up on {node}: {e}")),
    }
}

fn if_name(names: &HashMap<u32, String>, index: u32) -> String {
    names
        .get(&index)
        .cloned()
        .unwrap_or_else(|| format!("if{index}"))
}

/// A grade as JUnit XML: a test suite per lab, a test case per task (its
/// problems as the failure).
pub fn junit(grade: &Grade) -> String {
    use turbonet_experiment::junit::{Case, Outcome, Suite};
    let cases = (grade.tasks.iter())
        .map(|t| Case {
            name: format!("{}: {}", t.name, t.title),
            outcome: if t.earned < t.points {
                let problems: Vec<&str> = (t.checks.iter())
                    .filter_map(|c| c.problem.as_deref())
                    .collect();
                Outcome::Failed(
                    format!("0 of {} points", t.points),
                    Some(problems.join("\n")),
                )
            } else {
                Outcome::Passed(None)
            },
        })
        .collect();
    turbonet_experiment::junit::write(&Suite {
        name: &grade.lab,
        classname: &grade.lab,
        time: grade.seconds,
        wrapped: false,
        cases,
    })
}

/// Where the seed of a lab's faults is kept (so `reset` makes the same).
fn seed_path(running: &Running) -> PathBuf {
    running.dir.path().join("faults-seed")
}

/// Makes the faults of `seed` (`[faults]`) in the running lab, once its
/// fabric is up, and records the seed: how many were made. A fault whose
/// command fails is an error of the lab, said with the command's output.
pub fn seed_faults(running: &Running, seed: u64) -> Result<usize> {
    let Some(faults) = &running.lab.faults else {
        return Ok(0);
    };
    let chosen = faults.chosen(seed);
    for fault in &chosen {
        let node = &running.lab.fabric.node(fault.node).name;
        let command = ["sh".to_owned(), "-c".to_owned(), fault.run.clone()];
        let (code, output) = turbonet_lab::exec::exec_captured(running, node, &command)?;
        if code != 0 {
            return Err(Error::Failed(format!(
                "the lab's fault `{}` (`{}` on {node}) exited with {code}: {}",
                fault.name,
                fault.run,
                output.trim()
            )));
        }
    }
    std::fs::write(seed_path(running), seed.to_string())?;
    Ok(chosen.len())
}

/// The seed the running lab's faults were made with, if any.
pub fn faults_seed(running: &Running) -> Option<u64> {
    std::fs::read_to_string(seed_path(running))
        .ok()?
        .trim()
        .parse()
        .ok()
}
