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
use turbonet_topo::course::{FrameKind, Task, TaskCheck};
use turbonet_topo::{Lab, NodeId};

use turbonet_host::kernel::interfaces::PortState;
use turbonet_host::kernel::table::TableRoute;
use turbonet_lab::check::addresses;
use turbonet_lab::error::{Error, Result};
use turbonet_lab::inspect::Running;
use turbonet_lab::workload::Report;

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
    let checks: Vec<&TaskCheck> = tasks.iter().flat_map(|t| &t.checks).collect();
    let mut found = Found::default();
    found.probe(lab, &checks)?;
    found.measure(running, &checks)?;
    let tasks: Vec<TaskGrade> = tasks
        .into_iter()
        .map(|t| {
            let checks: Vec<CheckResult> = t
                .checks
                .iter()
                .map(|c| {
                    let problem = found.problem(running, c);
                    CheckResult {
                        check: c.describe(|n| lab.fabric.node(n).name.as_str()),
                        ok: problem.is_none(),
                        problem,
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
    for name in checks.filter_map(TaskCheck::graded_workload) {
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

/// A node's routes and its interfaces' names by index.
type Table = (Vec<TableRoute>, HashMap<u32, String>);

/// What the checks need of the lab, read once: probe answers and routing
/// tables.
#[derive(Default)]
struct Found {
    /// (from, address) -> answered.
    answered: HashMap<(NodeId, Ipv4Addr), bool>,
    /// Routing tables by node, read when first needed.
    tables: BTreeMap<NodeId, Result<Table>>,
    /// Ports by node, read when first needed.
    ports: BTreeMap<NodeId, Result<HashMap<String, PortState>>>,
    /// Every switch's sessions, read when first needed.
    bgp: Option<Result<turbonet_lab::routes::bgp::BgpReport>>,
    /// The reports of the workloads the checks name, by name.
    workloads: HashMap<String, Report>,
    /// What each capture check counted, by the check's address.
    captured: HashMap<usize, Result<u64>>,
    /// What each filter counted while the workloads ran: (seen, dropped).
    filtered: HashMap<String, (u64, u64)>,
}

/// A check's identity while grading: its address.
fn key(check: &TaskCheck) -> usize {
    std::ptr::from_ref(check) as usize
}

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

/// Counts the frames of a capture check's kind on its link until `until`.
fn count_frames(running: &Running, check: &TaskCheck, until: Instant) -> Result<u64> {
    let TaskCheck::Capture {
        link,
        direction,
        frames,
        ..
    } = check
    else {
        return Ok(0);
    };
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
    fn probe(&mut self, lab: &Lab, checks: &[&TaskCheck]) -> Result<()> {
        // (from, address): each probed once, however many checks want it.
        let wanted: BTreeSet<(NodeId, Ipv4Addr)> = checks
            .iter()
            .filter_map(|c| match c {
                TaskCheck::Reach { from, to, .. } => Some((*from, *to)),
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
        Ok(())
    }

    /// Runs the graded workloads the checks name while capturing the links
    /// capture checks name and counting what the filters of filter checks
    /// do ([`Found::run_workloads`]).
    fn measure(&mut self, running: &Running, checks: &[&TaskCheck]) -> Result<()> {
        let captures: Vec<&TaskCheck> = checks
            .iter()
            .copied()
            .filter(|c| matches!(c, TaskCheck::Capture { .. }))
            .collect();
        let filters = checks.iter().any(|c| matches!(c, TaskCheck::Filter { .. }));
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
        for (c, n) in captures.iter().zip(counted) {
            self.captured.insert(key(c), n);
        }
        if filters {
            let after = filter_counts(running)?;
            self.filtered = after
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
    fn run_workloads(&mut self, running: &Running, checks: &[&TaskCheck]) -> Result<()> {
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
        self.workloads = reports
            .into_iter()
            .filter(|r| graded.contains(r.name.as_str()) || ran.contains(r.name.as_str()))
            .map(|r| (r.name.clone(), r))
            .collect();
        Ok(())
    }

    /// What is wrong with `check` (`None`: it holds).
    fn problem(&mut self, running: &Running, check: &TaskCheck) -> Option<String> {
        let lab = &running.lab;
        let name = |n: NodeId| lab.fabric.node(n).name.clone();
        match check {
            TaskCheck::Reach {
                from,
                to,
                reachable,
            } => {
                let addrs = addresses(lab, *to);
                let (answered, silent): (Vec<Ipv4Addr>, Vec<Ipv4Addr>) = addrs
                    .iter()
                    .partition(|a| self.answered.get(&(*from, **a)).copied().unwrap_or(false));
                let list = |v: &[Ipv4Addr]| {
                    v.iter()
                        .map(Ipv4Addr::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if *reachable && !silent.is_empty() {
                    Some(format!(
                        "{} does not reach {}: no answer from {}",
                        name(*from),
                        name(*to),
                        list(&silent)
                    ))
                } else if !*reachable && !answered.is_empty() {
                    Some(format!(
                        "{} still reaches {} ({} answered)",
                        name(*from),
                        name(*to),
                        list(&answered)
                    ))
                } else {
                    None
                }
            }
            TaskCheck::Route {
                node,
                prefix,
                present,
                ecmp,
            } => {
                let (table, names) = match self.table(lab, *node) {
                    Ok(t) => t,
                    Err(e) => return Some(e),
                };
                let route = table
                    .iter()
                    .filter(|r| r.prefix == *prefix)
                    .find(|r| r.usable().next().is_some());
                let hops = |r: &TableRoute| {
                    r.usable()
                        .map(|h| match h.via {
                            Some(v) => format!("via {v} dev {}", if_name(names, h.ifindex)),
                            None => format!("dev {}", if_name(names, h.ifindex)),
                        })
                        .collect::<Vec<_>>()
                };
                match (route, present) {
                    (None, true) => Some(format!("{} has no route to {prefix}", name(*node))),
                    (Some(r), false) => Some(format!(
                        "{} still has a route to {prefix} ({})",
                        name(*node),
                        hops(r).join(", ")
                    )),
                    (Some(r), true) => match ecmp {
                        Some(n) if hops(r).len() != *n => Some(format!(
                            "{} reaches {prefix} over {} next hop(s), not {n}: {}",
                            name(*node),
                            hops(r).len(),
                            hops(r).join(", ")
                        )),
                        _ => None,
                    },
                    (None, false) => None,
                }
            }
            TaskCheck::Lookup { node, address, dev } => {
                use turbonet_host::kernel::table::Lookup;
                let node = name(*node);
                let (route, names) = match turbonet_lab::inspect::node_lookup(lab, &node, *address)
                {
                    Ok((Lookup::Route(route), names)) => (route, names),
                    Ok((Lookup::NoRoute, _)) => {
                        return Some(format!("{node} has no route for {address}"));
                    }
                    Ok((Lookup::Discard(kind), _)) => {
                        return Some(format!(
                            "{node} discards packets for {address}: its route is {kind}"
                        ));
                    }
                    Err(e) => return Some(format!("cannot look {address} up on {node}: {e}")),
                };
                if route.usable().next().is_none() {
                    let ports: Vec<String> = route
                        .hops
                        .iter()
                        .map(|h| if_name(&names, h.ifindex))
                        .collect();
                    return Some(format!(
                        "{node}'s route for {address} ({}) leaves by {}, which is down or has \
                         no carrier",
                        route.prefix,
                        ports.join(" and ")
                    ));
                }
                let dev = dev.as_deref()?;
                let wrong: Vec<String> = route
                    .usable()
                    .filter(|h| if_name(&names, h.ifindex) != dev)
                    .map(|h| match h.via {
                        Some(v) => format!("via {v} out of {}", if_name(&names, h.ifindex)),
                        None => format!("out of {}", if_name(&names, h.ifindex)),
                    })
                    .collect();
                (!wrong.is_empty()).then(|| {
                    format!(
                        "{node} sends {address} {} (its route {}), not out of {dev}",
                        wrong.join(" and "),
                        route.prefix
                    )
                })
            }
            TaskCheck::Bgp {
                node,
                peer,
                established,
            } => {
                let report = match self.bgp_report(running) {
                    Ok(r) => r,
                    Err(e) => return Some(e),
                };
                let (node, peer) = (name(*node), name(*peer));
                let state = report
                    .speakers
                    .iter()
                    .find(|s| s.node == node)
                    .and_then(|s| s.sessions.iter().find(|x| x.peer == peer))
                    .map_or("not configured", |x| x.state.as_str());
                match (state == "established", established) {
                    (false, true) => Some(format!(
                        "{node}'s BGP session with {peer} is {state}, not established"
                    )),
                    (true, false) => Some(format!(
                        "{node}'s BGP session with {peer} is still established"
                    )),
                    _ => None,
                }
            }
            TaskCheck::Command {
                node,
                run,
                exit,
                output,
            } => {
                let command = ["sh".to_owned(), "-c".to_owned(), run.clone()];
                match turbonet_lab::exec::exec_captured(running, &name(*node), &command) {
                    Err(e) => Some(format!("`{run}` could not run on {}: {e}", name(*node))),
                    Ok((code, text)) if code != *exit => Some(format!(
                        "`{run}` on {} exited with {code}, not {exit}{}",
                        name(*node),
                        gist(&text)
                    )),
                    Ok((_, text)) => match output {
                        Some(o) if !text.contains(o.as_str()) => {
                            Some(format!("`{run}` on {} did not print {o:?}", name(*node)))
                        }
                        _ => None,
                    },
                }
            }
            TaskCheck::Link { link, up, mtu } => {
                let links: Vec<&turbonet_topo::Link> = match link {
                    Some(n) => lab.fabric.link_by_name(n).into_iter().collect(),
                    None => lab.fabric.links.iter().collect(),
                };
                let mut problems: Vec<String> = Vec::new();
                for l in links {
                    for p in self.link_problems(lab, l, *up, *mtu) {
                        if !problems.contains(&p) {
                            problems.push(p);
                        }
                    }
                }
                (!problems.is_empty()).then(|| problems.join("\n"))
            }
            TaskCheck::Capture {
                link,
                frames,
                min,
                max,
                ..
            } => {
                let n = match self.captured.get(&key(check)) {
                    Some(Ok(n)) => *n,
                    Some(Err(e)) => return Some(format!("cannot capture {link}: {e}")),
                    None => return Some(format!("{link} was not captured")),
                };
                let kind = frames.adjective();
                out_of(n, *min, *max).then(|| {
                    format!(
                        "{link} carried {n} {kind}frames while the workloads ran, not {}",
                        turbonet_topo::course::count_range(*min, *max)
                    )
                })
            }
            TaskCheck::Filter {
                filter,
                counter,
                min,
                max,
            } => {
                let Some(&(seen, dropped)) = self.filtered.get(filter) else {
                    return Some(format!(
                        "filter {filter} is on no link of the lab: it counted nothing"
                    ));
                };
                let n = counter.of(seen, dropped);
                out_of(n, *min, *max).then(|| {
                    format!(
                        "filter {filter} {} {n} frames while the workloads ran, not {}",
                        counter.verb(),
                        turbonet_topo::course::count_range(*min, *max)
                    )
                })
            }
            TaskCheck::Converged { within } => {
                let report = match self.bgp_report(running) {
                    Ok(r) => r,
                    Err(e) => return Some(e),
                };
                let after = if report.since_change.is_some() {
                    "the last fail or restore"
                } else {
                    "the start"
                };
                let behind: Vec<&turbonet_lab::routes::bgp::SpeakerStatus> =
                    report.speakers.iter().filter(|s| !s.converged).collect();
                if let Some(first) = behind.first() {
                    let short = if first.routes < first.expected {
                        format!(
                            "{} has {} of its {} prefixes",
                            first.node, first.routes, first.expected
                        )
                    } else {
                        format!("{} lacks next hops the fabric offers", first.node)
                    };
                    return Some(format!(
                        "BGP has not converged: {} of {} switches do not hold what the fabric \
                         needs yet ({short})",
                        behind.len(),
                        report.speakers.len(),
                    ));
                }
                let limit = within.as_duration().as_secs_f64();
                match report.convergence_time() {
                    Some(t) if t <= limit => None,
                    Some(t) => Some(format!(
                        "BGP converged {t:.2} s after {after}, not within {within}"
                    )),
                    None => Some("BGP has not converged".to_owned()),
                }
            }
            TaskCheck::Figure {
                workload,
                ran,
                algorithm,
                figure,
                of,
                bound,
            } => {
                let report = self.workloads.get(workload);
                if *ran && report.is_none() {
                    return Some(format!(
                        "you have not run a workload named {workload} (`turbonet workload start FILE`)"
                    ));
                }
                if let (Some(r), Some(a)) = (report, algorithm) {
                    let used: BTreeSet<&str> = r.ops.iter().map(|o| o.algorithm.as_str()).collect();
                    if r.kind != "collective" {
                        return Some(format!(
                            "{workload} is a {} workload, not a collective",
                            r.kind
                        ));
                    }
                    if !used.is_empty() && used != BTreeSet::from([a.as_str()]) {
                        return Some(format!(
                            "{workload} used {}, not {a}",
                            used.into_iter().collect::<Vec<_>>().join(" and ")
                        ));
                    }
                }
                if let Some(r) = report
                    && !figure.kinds().contains(&r.kind.as_str())
                {
                    return Some(format!(
                        "{workload} is a {} workload: it reports no {figure}",
                        r.kind
                    ));
                }
                let (holds, message, _) =
                    turbonet_experiment::figure_verdict(report, workload, *figure, *of, *bound);
                (!holds).then(|| format!("{workload}: {message}"))
            }
        }
    }
}

impl Found {
    /// Every switch's sessions and convergence, read once.
    fn bgp_report(
        &mut self,
        running: &Running,
    ) -> std::result::Result<&turbonet_lab::routes::bgp::BgpReport, String> {
        self.bgp
            .get_or_insert_with(|| {
                turbonet_api::Client::connect(&running.dir)
                    .and_then(|mut c| c.bgp(None))
                    .map_err(Into::into)
            })
            .as_ref()
            .map_err(|e| format!("cannot read the lab's BGP state: {e}"))
    }

    /// `node`'s routing table and its ports' names, read once.
    fn table(&mut self, lab: &Lab, node: NodeId) -> std::result::Result<&Table, String> {
        let name = &lab.fabric.node(node).name;
        self.tables
            .entry(node)
            .or_insert_with(|| {
                turbonet_lab::inspect::node_table(lab, name).map(|(_, t, names)| (t, names))
            })
            .as_ref()
            .map_err(|e| format!("cannot read {name}'s routes: {e}"))
    }

    /// What is wrong with `link`'s ports: not up (or not down) as `up`
    /// asks, or an MTU other than `mtu`.
    fn link_problems(
        &mut self,
        lab: &Lab,
        link: &turbonet_topo::Link,
        up: Option<bool>,
        mtu: Option<u32>,
    ) -> Vec<String> {
        let mut problems = Vec::new();
        // (node, port, state) of each end found.
        let mut ends: Vec<(&str, &str, PortState)> = Vec::new();
        for end in &link.ends {
            let node = &lab.fabric.node(end.node).name;
            let ports = self
                .ports
                .entry(end.node)
                .or_insert_with(|| turbonet_lab::inspect::node_ports(lab, node));
            match ports {
                Err(e) => problems.push(format!("cannot read {node}'s ports: {e}")),
                Ok(ports) => match ports.get(&end.ifname) {
                    Some(state) => ends.push((node, &end.ifname, *state)),
                    None => problems.push(format!(
                        "{}: {node} has no port {} any more",
                        link.name, end.ifname
                    )),
                },
            }
        }
        match up {
            Some(true) => {
                let shut: Vec<String> = ends
                    .iter()
                    .filter(|(_, _, s)| !s.up)
                    .map(|(node, port, _)| format!("{}: {node}'s port {port} is down", link.name))
                    .collect();
                if shut.is_empty() {
                    // Both set up, yet no carrier: the peer went away.
                    problems.extend(ends.iter().filter(|(_, _, s)| !s.carrier).map(
                        |(node, port, _)| {
                            format!("{}: {node}'s port {port} has no carrier", link.name)
                        },
                    ));
                } else {
                    problems.extend(shut);
                }
            }
            Some(false) if ends.len() == 2 && ends.iter().all(|(_, _, s)| s.up && s.carrier) => {
                problems.push(format!("{} is still up", link.name));
            }
            _ => {}
        }
        if let Some(want) = mtu {
            problems.extend(ends.iter().filter(|(_, _, s)| s.mtu != want).map(
                |(node, port, s)| {
                    format!(
                        "{}: {node}'s port {port} has MTU {}, not {want}",
                        link.name, s.mtu
                    )
                },
            ));
        }
        problems
    }
}

/// Whether `n` is outside `[min, max]`.
fn out_of(n: u64, min: Option<u64>, max: Option<u64>) -> bool {
    min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m)
}

/// The start of a command's output, for a message: `": ..."`, or nothing.
fn gist(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(2)
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut gist: String = lines.join(" / ");
    if gist.chars().count() > 160 {
        gist = gist.chars().take(157).collect::<String>() + "...";
    }
    format!(": {gist}")
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
    let esc = turbonet_experiment::xml_escape;
    let failures = grade.tasks.iter().filter(|t| t.earned < t.points).count();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" time=\"{:.3}\">\n",
        esc(&grade.lab),
        grade.tasks.len(),
        grade.seconds
    );
    for t in &grade.tasks {
        xml.push_str(&format!(
            "  <testcase classname=\"{}\" name=\"{}: {}\">\n",
            esc(&grade.lab),
            esc(&t.name),
            esc(&t.title)
        ));
        if t.earned < t.points {
            let problems: Vec<&str> = t
                .checks
                .iter()
                .filter_map(|c| c.problem.as_deref())
                .collect();
            xml.push_str(&format!(
                "    <failure message=\"0 of {} points\">{}</failure>\n",
                t.points,
                esc(&problems.join("\n"))
            ));
        }
        xml.push_str("  </testcase>\n");
    }
    xml.push_str("</testsuite>\n");
    xml
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
