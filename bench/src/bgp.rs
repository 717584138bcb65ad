//! `turbonet bench --bgp`: BGP convergence and agent density, measured on
//! real labs as a user would bring them up.
//!
//! Convergence: for each scenario and agent, the time from the agents'
//! start until every switch's FIB is what the BGP plan says (`up` waits
//! for exactly that), then the time from a `fail` until every FIB is the
//! plan's around the failure again, for a link and for a switch.
//!
//! Density: the lab daemon's CPU (over a 10 s window at steady state, only
//! keepalives flowing) and resident memory while it holds 80, 320 and
//! 1,000 built-in agents; the FRR daemons of a lab, summed, for comparison.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use turbonet_lab::bail;
use turbonet_lab::error::{Context, Result};

use crate::measure;
use crate::report::{Report, count};
use turbonet_api::{Client, Target};
use turbonet_lab::progress::Progress;
use turbonet_lab::routes::bgp::BgpReport;
use turbonet_lab::state::{LabDir, LabState};
use turbonet_routing::bgp::speaker::Counters;

/// The convergence cases: bundled scenario, lab name stem.
const SCENARIOS: &[(&str, &str)] = &[
    ("fat-tree-k4.toml", "k4"),
    ("fat-tree-k8.toml", "k8"),
    ("hpn.toml", "hpn"),
];

/// `bench --bgp` (`density`: the density table instead).
pub fn bench(density: bool, agents: &[String], progress: &dyn Progress) -> Result<Report> {
    let dir = PathBuf::from("scenarios");
    if !dir.is_dir() {
        bail!("`bench --bgp` needs the bundled ./scenarios; run it from the turbonet checkout");
    }
    if density {
        return bench_density(&dir, progress);
    }
    let kinds = agents
        .iter()
        .map(|a| {
            turbonet_topo::Agent::from_name(a)
                .with_context(|| format!("--agents: unknown agent `{a}` (builtin, frr or bird)"))
        })
        .collect::<Result<Vec<_>>>()?;
    if let Some(why) = kinds
        .iter()
        .find_map(|&k| turbonet_lab::routes::routers::missing(k))
    {
        bail!("{why}");
    }
    let mut out = Report::default();
    let mut rows = Vec::new();
    for (file, stem) in SCENARIOS {
        for agent in agents {
            let name = format!("bb{stem}{}", &agent[..1]);
            let text = std::fs::read_to_string(dir.join(file))?;
            let path = write_lab(
                &name,
                &bgp_text(&text, &name, &format!("agent = \"{agent}\"")),
            )?;
            progress.note(&format!("bench bgp: {stem} with {agent} agents ..."));
            let result = convergence(&path, &name);
            let _ = measure(&["down", &name]);
            let (switches, sessions, up, link, switch) = result?;
            rows.push(vec![
                stem.to_string(),
                agent.clone(),
                count(switches),
                count(sessions),
                format!("{:.3}", up),
                format!("{:.3}", link),
                format!("{:.3}", switch),
            ]);
        }
    }
    out.table(
        &[
            "lab",
            "agent",
            "switches",
            "sessions",
            "up s",
            "link fail s",
            "switch fail s",
        ],
        rows,
        &[2, 3, 4, 5, 6],
    );
    out.text("up s: agents started -> every FIB as the BGP plan says; fail s: `fail` -> every FIB as the plan \
         says around the failure (an edge/ToR uplink; a core switch). FRR and BIRD FIBs are read from \
         the kernel every 10 ms.".to_owned());
    Ok(out)
}

/// A scenario's text renamed to `name`, in BGP mode with `routing` added.
fn bgp_text(text: &str, name: &str, routing: &str) -> String {
    let mut out = String::new();
    let mut renamed = false;
    for line in text.lines() {
        if !renamed && line.starts_with("name = ") {
            out.push_str(&format!("name = \"{name}\"\n"));
            renamed = true;
        } else if line.starts_with("mode = ") {
            out.push_str(&format!("mode = \"bgp\"\n{routing}\n"));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn write_lab(name: &str, text: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join("turbonet-bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The lab's BGP report, sessions counted.
fn report(dir: &LabDir) -> Result<BgpReport> {
    Ok(Client::connect(dir)?.bgp_summary(Duration::from_secs(60))?)
}

/// A change `change` asks of the lab.
#[derive(Debug, Clone, Copy)]
enum Change {
    Fail,
    Restore,
}

/// Fails or restores `target` and waits until the fabric has
/// re-converged; returns the re-convergence time.
fn change(dir: &LabDir, change: Change, target: Target, within: Duration) -> Result<f64> {
    let request = format!("{change:?} {target}");
    let mut client = Client::connect(dir)?;
    match change {
        Change::Fail => client.fail(&target)?,
        Change::Restore => client.restore(&target)?,
    };
    let started = Instant::now();
    loop {
        let report = client.bgp_summary(Duration::from_secs(60))?;
        if let (true, Some(t)) = (report.converged(), report.convergence_time()) {
            return Ok(t);
        }
        if started.elapsed() >= within {
            bail!("no re-convergence within {within:?} after {request:?}");
        }
        std::thread::sleep(turbonet_lab::up::poll_interval(started.elapsed()));
    }
}

/// Up, a link failure and a switch failure (each restored): switches,
/// sessions, and the three convergence times.
fn convergence(path: &std::path::Path, name: &str) -> Result<(usize, usize, f64, f64, f64)> {
    measure(&["up", "--quiet", &path.display().to_string()])?;
    let dir = LabDir::of(name);
    let lab = dir.saved_lab()?;
    let up = report(&dir)?;
    let up_time = up
        .convergence_time()
        .context("up returned before BGP converged")?;
    let fabric = &lab.fabric;
    let link = fabric
        .links
        .iter()
        .find(|l| l.ends.iter().all(|e| fabric.node(e.node).role.is_switch()))
        .context("no switch-switch link")?
        .name
        .clone();
    let core = fabric
        .nodes
        .iter()
        .find(|n| {
            matches!(
                n.role,
                turbonet_topo::Role::Core | turbonet_topo::Role::Spine
            )
        })
        .context("no core or spine switch")?
        .name
        .clone();
    // Each re-convergence may take as long as `up` allows: a minute, and
    // a second more per four switches.
    let within = Duration::from_secs(60 + fabric.switches().count() as u64 / 4);
    let link_time = change(&dir, Change::Fail, Target::Link(link.clone()), within)?;
    change(&dir, Change::Restore, Target::Link(link), within)?;
    let switch_time = change(&dir, Change::Fail, Target::Node(core.clone()), within)?;
    change(&dir, Change::Restore, Target::Node(core), within)?;
    let sessions: usize = plan_sessions(&lab);
    Ok((
        fabric.switches().count(),
        sessions,
        up_time,
        link_time,
        switch_time,
    ))
}

/// Sessions of the fabric (each counted once).
fn plan_sessions(lab: &turbonet_topo::Lab) -> usize {
    turbonet_routing::bgp::plan::speakers(&lab.fabric)
        .iter()
        .map(|s| s.neighbours.len())
        .sum::<usize>()
        / 2
}

/// CPU seconds (user + system) of `pid`.
fn cpu_seconds(pid: u32) -> Result<f64> {
    Ok(turbonet_host::process::cpu_seconds(pid)?)
}

/// Resident memory of `pid`, MiB.
pub(crate) fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .context("no VmRSS")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib / 1024.0)
}

/// `counter` of the built-in speakers, summed, per FIB route (`-` for
/// other agents).
fn per_route(report: &BgpReport, counter: impl Fn(&Counters) -> u64) -> String {
    report
        .per_route(counter)
        .map_or_else(|| "-".into(), |n| format!("{n:.2}"))
}

/// CPU share of one core and resident memory of `pids` together, over
/// `window` at steady state.
fn sample(pids: &[u32], window: Duration) -> Result<(f64, f64)> {
    let before: f64 = pids.iter().map(|&p| cpu_seconds(p)).sum::<Result<f64>>()?;
    std::thread::sleep(window);
    let after: f64 = pids.iter().map(|&p| cpu_seconds(p)).sum::<Result<f64>>()?;
    let rss: f64 = pids.iter().map(|&p| rss_mib(p)).sum::<Result<f64>>()?;
    Ok((100.0 * (after - before) / window.as_secs_f64(), rss))
}

/// The slowest answer to `status` and `show bgp` (every switch), in
/// seconds: at steady state, and while the fabric re-converges after a
/// core or spine switch of `lab` fails (restored after).
fn api_latency(dir: &LabDir, lab: &turbonet_topo::Lab) -> Result<(f64, f64)> {
    let mut client = Client::connect(dir)?;
    let slowest = |client: &mut Client| -> Result<f64> {
        let mut worst = 0.0f64;
        for _ in 0..10 {
            let t = Instant::now();
            client.status()?;
            worst = worst.max(t.elapsed().as_secs_f64());
            let t = Instant::now();
            client.bgp(None)?;
            worst = worst.max(t.elapsed().as_secs_f64());
        }
        Ok(worst)
    };
    let steady = slowest(&mut client)?;
    let core = lab
        .fabric
        .nodes
        .iter()
        .find(|n| {
            matches!(
                n.role,
                turbonet_topo::Role::Core | turbonet_topo::Role::Spine
            )
        })
        .context("no core or spine switch")?
        .name
        .clone();
    // The failure from another client, while this one asks.
    let failing = {
        let (dir, core) = (dir.clone(), core.clone());
        std::thread::spawn(move || Client::connect(&dir)?.fail(&Target::Node(core)))
    };
    let busy = slowest(&mut client);
    failing
        .join()
        .map_err(|_| turbonet_lab::err!("the failing client panicked"))??;
    client.restore(&Target::Node(core))?;
    Ok((steady, busy?))
}

/// The density table.
fn bench_density(dir: &std::path::Path, progress: &dyn Progress) -> Result<Report> {
    let mut out = Report::default();
    let k8 = std::fs::read_to_string(dir.join("fat-tree-k8.toml"))?;
    let k16 = std::fs::read_to_string(dir.join("fat-tree-k16.toml"))?;
    let leaf_spine = "[lab]\nname = \"x\"\n\n[topology]\nkind = \"leaf-spine\"\nspines = 4\n\
                      leaves = 996\nhosts_per_leaf = 1\nuplinks = 1\n\n[routing]\nmode = \"static\"\n";
    let cases = [
        ("bdk8", &k8[..], "builtin"),
        ("bdk16", &k16[..], "builtin"),
        ("bdls", leaf_spine, "builtin"),
        ("bdk8f", &k8[..], "frr"),
    ];
    let window = Duration::from_secs(10);
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for (name, text, agent) in cases {
        if agent != "builtin"
            && turbonet_lab::routes::routers::missing(turbonet_topo::Agent::Frr).is_some()
        {
            continue;
        }
        let scenario = bgp_text(text, name, &format!("agent = \"{agent}\""));
        let path = write_lab(name, &scenario)?;
        // Its counts, for the row of a lab that fails to come up.
        let planned =
            turbonet_topo::parse(name, &scenario).map_err(|e| turbonet_lab::err!("{e}"))?;
        progress.note(&format!("bench bgp density: {name} ({agent}) ..."));
        let result = (|| -> Result<Vec<String>> {
            let up = measure(&["up", "--quiet", &path.display().to_string()])?;
            let dir = LabDir::of(name);
            let lab = dir.saved_lab()?;
            let state: LabState = dir.load()?.context("lab state")?;
            let report = report(&dir)?;
            let routes = report.routes();
            // Settle: the first keepalive rounds and route installs done.
            std::thread::sleep(Duration::from_secs(3));
            let (pids, what) = if agent == "builtin" {
                // The daemon proper (the supervisor only waits on it), and
                // the processes its speakers run in, if several.
                let daemon = Client::connect(&dir)?.status()?.daemon_pid;
                let shards = crate::fabric::bgp_shards(daemon);
                let what = match shards.len() {
                    0 => "turbonet daemon".to_owned(),
                    n => format!("turbonet daemon, {n} shards"),
                };
                ([vec![daemon], shards].concat(), what)
            } else {
                (
                    state.routers.iter().map(|r| r.pid).collect(),
                    format!("{} FRR processes", state.routers.len()),
                )
            };
            let (cpu, rss) = sample(&pids, window)?;
            let events = crate::events_mib(&dir).map_or("-".into(), |e| format!("{e:.1}"));
            let (steady, busy) = api_latency(&dir, &lab)?;
            Ok(vec![
                count(lab.fabric.switches().count()),
                agent.to_owned(),
                count(plan_sessions(&lab)),
                count(routes),
                format!("{:.1}", up.seconds),
                format!("{:.2}", report.convergence_time().unwrap_or(f64::NAN)),
                per_route(&report, |c| c.set_changes),
                per_route(&report, |c| c.fib_writes),
                per_route(&report, |c| c.fib_requests),
                (report.total(|c| c.hold_expiries)).map_or("-".into(), |n| count(n as usize)),
                what,
                format!("{cpu:.1}"),
                format!("{rss:.0}"),
                events,
                format!("{:.1}", steady * 1e3),
                format!("{:.1}", busy * 1e3),
            ])
        })();
        let _ = measure(&["down", name]);
        // A lab that fails keeps the rows measured before and after it.
        rows.push(result.unwrap_or_else(|e| {
            failures.push(format!("{name}: {e}"));
            let mut row = vec![
                count(planned.fabric.switches().count()),
                agent.to_owned(),
                count(plan_sessions(&planned)),
            ];
            row.extend(["-", "-", "-", "-", "-", "-", "-", "failed (below)"].map(str::to_owned));
            row.extend(["-"; 5].map(str::to_owned));
            row
        }));
    }
    out.table(
        &[
            "agents",
            "agent",
            "sessions",
            "FIB routes",
            "up s",
            "converged s",
            "set changes / route",
            "FIB writes / route",
            "FIB requests / route",
            "Hold expiries",
            "measured",
            "CPU % of a core",
            "RSS MiB",
            "events MiB",
            "API ms steady",
            "API ms re-converging",
        ],
        rows,
        &[0, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15],
    );
    out.text(format!(
        "set changes / route: next-hop set changes the built-in speakers decided until \
         converged, per FIB route; FIB writes / route: those handed to the kernel (changes \
         merged while a write was in flight count once); FIB requests / route: what the kernel \
         was asked to write them (routes, nexthop objects and groups; a group changed in \
         place is one request for all its routes); Hold expiries: sessions lost until \
         converged because a neighbour was silent for the Hold time (a speaker that could not \
         keep up); events MiB: the lab's event log \
         (events.jsonl) after the steady-state sample. steady state: CPU over {} s after convergence, keepalives every 1 s (hold 3 s); agents: \
         fat-tree k=8, k=16, leaf-spine 4 x 996. API ms: the slowest of 20 `status` and `show \
         bgp` calls (every switch), at steady state, and in the second after a core or spine \
         switch fails (the fabric re-converging)",
        window.as_secs()
    ));
    for failure in failures {
        out.text(failure);
    }
    Ok(out)
}
