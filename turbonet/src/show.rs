//! What `status`, `show`, `link show`, `events` and `check` print: tables
//! for people, or with `--json` the same data for scripts.

use std::collections::HashSet;
use std::process::ExitCode;
use turbonet_topo::LinkParams;

use anyhow::Result;
use turbonet_bench::report::count;
use turbonet_lab::check;
use turbonet_lab::events::LoggedEvent;
use turbonet_lab::inspect::{LabStatus, LinkRow, LinkShow, NodeRow, RouteRow};
use turbonet_lab::routes::bgp::BgpReport;
use turbonet_lab::state::LabDir;

use crate::render::table;

/// Prints `value` as pretty JSON.
pub(crate) fn json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// `turbonet status`.
pub(crate) fn status(rows: &[LabStatus], json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if rows.is_empty() {
        println!("no lab is up");
    } else {
        println!(
            "{}",
            table(
                &[
                    "lab",
                    "phase",
                    "nodes",
                    "externals",
                    "up in",
                    "daemon",
                    "scenario"
                ],
                rows.iter().map(|r| vec![
                    r.lab.clone(),
                    r.phase.clone(),
                    if r.namespaces_present == r.namespaces {
                        count(r.namespaces)
                    } else {
                        format!("{}/{} present", r.namespaces_present, r.namespaces)
                    },
                    count(r.externals),
                    r.up_seconds
                        .map(|s| format!("{s:.2} s"))
                        .unwrap_or_default(),
                    r.daemon.clone(),
                    r.scenario.clone(),
                ]),
                &[2, 3, 4],
            )
        );
    }
    Ok(())
}

/// `show nodes`.
pub(crate) fn nodes(rows: &[NodeRow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{}",
        table(
            &["node", "role", "namespace", "asn", "loopback", "ports"],
            rows.iter().map(|r| vec![
                r.name.clone(),
                r.role.clone(),
                r.namespace.clone(),
                r.asn.map(|a| a.to_string()).unwrap_or_default(),
                r.loopback.clone().unwrap_or_default(),
                r.ports.to_string(),
            ]),
            &[3, 5],
        )
    );
    Ok(())
}

/// `show links`.
pub(crate) fn links(rows: &[LinkRow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{}",
        table(
            &[
                "link",
                "class",
                "a",
                "interface",
                "address",
                "b",
                "interface",
                "address",
                "mtu"
            ],
            rows.iter().map(|r| vec![
                r.link.clone(),
                r.class.clone(),
                r.a.clone(),
                r.a_ifname.clone(),
                r.a_addr.clone(),
                r.b.clone(),
                r.b_ifname.clone(),
                r.b_addr.clone(),
                r.mtu.map_or_else(|| "-".into(), |m| m.to_string()),
            ]),
            &[8],
        )
    );
    Ok(())
}

/// `show routes NODE`: the table read in namespace `ns`.
pub(crate) fn routes(ns: &str, rows: &[RouteRow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    println!(
        "{}",
        table(
            &["prefix", "next hops", "protocol"],
            rows.iter()
                .map(|r| vec![r.prefix.clone(), r.nexthops.join("\n"), r.protocol.clone()]),
            &[],
        )
    );
    println!("{} routes in {ns}", rows.len());
    Ok(())
}

/// `show bgp [NODE]`; `dir` is the lab's, for hints on FRR and BIRD.
pub(crate) fn bgp(
    report: &BgpReport,
    node: Option<&str>,
    dir: &LabDir,
    json: bool,
) -> Result<ExitCode> {
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let (Some(_), [speaker]) = (node, report.speakers.as_slice()) {
        println!(
            "{}: AS {}, router id {}, agent {}, {}/{} routes, {}",
            speaker.node,
            speaker.asn,
            speaker.router_id,
            speaker.agent,
            speaker.routes,
            speaker.expected,
            if speaker.converged {
                "converged"
            } else {
                "converging"
            }
        );
        if speaker.sessions.is_empty() {
            match turbonet_topo::Agent::from_name(&speaker.agent) {
                Some(agent @ (turbonet_topo::Agent::Frr | turbonet_topo::Agent::Bird)) => println!(
                    "{} did not say how its sessions are; ask it: {}",
                    speaker.agent,
                    turbonet_lab::routes::routers::shell_hint(dir, &speaker.node, agent)
                ),
                _ => println!("{} has no BGP sessions", speaker.node),
            }
            return Ok(ExitCode::SUCCESS);
        }
        println!(
            "{}",
            table(
                &[
                    "peer",
                    "address",
                    "AS",
                    "port",
                    "state",
                    "for",
                    "prefixes",
                    "last error"
                ],
                speaker.sessions.iter().map(|s| {
                    vec![
                        s.peer.clone(),
                        s.peer_addr.to_string(),
                        s.peer_asn.to_string(),
                        s.ifname.clone(),
                        s.state.clone(),
                        s.since.map_or_else(|| "-".to_owned(), format_duration),
                        s.received.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                        s.last_error.clone().unwrap_or_default(),
                    ]
                }),
                &[2, 5, 6],
            )
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}",
        table(
            &[
                "switch",
                "agent",
                "AS",
                "router id",
                "sessions",
                "routes",
                "converged"
            ],
            report.speakers.iter().map(|s| {
                let up = s
                    .sessions
                    .iter()
                    .filter(|x| x.state == "established")
                    .count();
                vec![
                    s.node.clone(),
                    s.agent.clone(),
                    s.asn.to_string(),
                    s.router_id.to_string(),
                    if s.sessions.is_empty() {
                        "-".to_owned()
                    } else {
                        format!("{up}/{}", s.sessions.len())
                    },
                    format!("{}/{}", s.routes, s.expected),
                    match (s.converged, s.converged_at) {
                        (true, Some(t)) => format!("yes, at {t:.3} s"),
                        (true, None) => "yes".to_owned(),
                        (false, _) => "no".to_owned(),
                    },
                ]
            }),
            &[2, 4, 5],
        )
    );
    let converged = report.speakers.iter().filter(|s| s.converged).count();
    let (up, all) = report.sessions();
    println!(
        "{converged}/{} switches converged{}{}",
        report.speakers.len(),
        match (report.convergence_time(), report.since_change) {
            (Some(t), Some(_)) => format!(" {t:.3} s after the last fail/restore"),
            (Some(t), None) => format!(" {t:.3} s after the agents started"),
            _ => String::new(),
        },
        if all > 0 {
            format!("; {up}/{all} sessions established")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// `12.3s`, `4m05s`, `2h10m`.
fn format_duration(seconds: f64) -> String {
    let s = seconds as u64;
    match s {
        0..60 => format!("{seconds:.1}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `link show [LINK]`.
pub(crate) fn link_show(rows: &[LinkShow], as_json: bool) -> Result<()> {
    if as_json {
        return json(&rows);
    }
    // Every parameter set, as `key=value`; one `link set` changed is
    // marked `*`.
    fn parameters(now: &LinkParams, scenario: &LinkParams) -> String {
        let before = scenario.pairs();
        let cells: Vec<String> = now
            .pairs()
            .into_iter()
            .map(|(k, v)| {
                let same = before.iter().any(|(bk, bv)| *bk == k && *bv == v);
                format!("{k}={v}{}", if same { "" } else { "*" })
            })
            .collect();
        if cells.is_empty() {
            "-".to_owned()
        } else {
            cells.join(" ")
        }
    }
    let mut changed = false;
    println!(
        "{}",
        table(
            &["link", "state", "engine", "why", "parameters"],
            rows.iter().map(|r| {
                changed |= r.params != r.scenario;
                vec![
                    r.link.clone(),
                    if r.down { "DOWN" } else { "up" }.to_owned(),
                    r.engine.clone(),
                    r.why.clone(),
                    parameters(&r.params, &r.scenario),
                ]
            }),
            &[],
        )
    );
    if changed {
        println!("* set at run time; `turbonet link reset LINK` restores the scenario's");
    }
    let directions: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| {
            r.directions.iter().map(move |d| {
                let c = &d.counters;
                vec![
                    r.link.clone(),
                    format!("{} -> {}", d.from, d.to),
                    count(c.rx_packets as usize),
                    count(c.tx_packets as usize),
                    count(c.tx_bytes as usize),
                    count(c.dropped_loss as usize),
                    count(c.dropped_queue as usize),
                    count(c.corrupted as usize),
                    count(c.duplicated as usize),
                    count(c.ecn_marked as usize),
                    count(c.queue_packets as usize),
                ]
            })
        })
        .collect();
    if !directions.is_empty() {
        println!(
            "{}",
            table(
                &[
                    "link",
                    "direction",
                    "in",
                    "out",
                    "out bytes",
                    "lost",
                    "queue drops",
                    "corrupted",
                    "duplicated",
                    "ecn",
                    "queued",
                ],
                directions,
                &[2, 3, 4, 5, 6, 7, 8, 9, 10],
            )
        );
    }
    let filters: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|r| &r.filters)
        .map(|f| {
            vec![
                f.name.clone(),
                f.link.clone(),
                format!("{} {}", f.node, f.port),
                f.hook.clone(),
                f.kind.clone(),
                count(f.seen as usize),
                count(f.passed() as usize),
                count(f.dropped as usize),
            ]
        })
        .collect();
    if !filters.is_empty() {
        println!(
            "{}",
            table(
                &[
                    "filter", "link", "at", "hook", "kind", "seen", "passed", "dropped"
                ],
                filters,
                &[5, 6, 7],
            )
        );
    }
    let mut short = 0;
    for r in rows {
        for d in &r.directions {
            if let Some(why) = d.shortfall.describe(d.counters.tx_packets) {
                println!("warning: {} {} -> {}: {why}", r.link, d.from, d.to);
                short += 1;
            }
        }
    }
    if short > 0 {
        println!(
            "warning: {}",
            turbonet_lab::dataplane::plane::Shortfall::CONSEQUENCE
        );
    }
    Ok(())
}

/// `turbonet events`.
pub(crate) fn events(events: &[LoggedEvent], as_json: bool) -> Result<()> {
    if as_json {
        json(&events)
    } else if events.is_empty() {
        println!("no events yet");
        Ok(())
    } else {
        println!(
            "{}",
            table(
                &["t (s)", "source", "event", "result"],
                events.iter().map(|e| vec![
                    format!("{:.3}", e.t),
                    e.source.clone(),
                    e.event.clone(),
                    e.result.clone(),
                ]),
                &[0],
            )
        );
        Ok(())
    }
}

/// One event of `turbonet events --follow`, as it happens: a line of
/// text, or of JSON (JSON Lines) with `--json`.
pub(crate) fn event_line(e: &LoggedEvent, as_json: bool) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if as_json {
        serde_json::to_writer(&mut out, e)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "{:>10.3}  {:<8}  {}  {}",
            e.t, e.source, e.event, e.result
        )?;
    }
    out.flush()?;
    Ok(())
}

/// What `down` says of a lab it removed.
pub(crate) fn removed(lab: &str, namespaces: usize, processes: usize, seconds: f64) -> String {
    let stopped = match processes {
        0 => String::new(),
        1 => ", 1 process still running in them stopped,".to_owned(),
        n => format!(", {n} processes still running in them stopped,"),
    };
    format!("lab {lab} is down: {namespaces} namespaces removed{stopped} in {seconds:.2} s")
}

/// `turbonet mpirun --show`: the command line as a shell would take it,
/// where it runs, and its hostfile.
pub(crate) fn mpirun(prepared: &turbonet_lab::mpi::Prepared) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let env: Vec<String> = prepared
        .env
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_quote(v)))
        .collect();
    let argv: Vec<String> = prepared.argv.iter().map(|a| shell_quote(a)).collect();
    writeln!(
        out,
        "ip netns exec {} env {} \\\n  {}",
        prepared.namespace,
        env.join(" "),
        argv.join(" ")
    )?;
    writeln!(
        out,
        "# each host's ranks send their data on its fabric ports (with --job, the job's rail): \
         turbonet's agent sets OMPI_MCA_btl_tcp_if_include on each host"
    )?;
    writeln!(out, "# {}:", prepared.hostfile.display())?;
    for line in std::fs::read_to_string(&prepared.hostfile)?.lines() {
        writeln!(out, "#   {line}")?;
    }
    Ok(())
}

/// `word` as a POSIX shell reads it back: as is when it is made of safe
/// characters, else in single quotes.
fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `turbonet check`: the verdict, and the first unanswered probes.
pub(crate) fn check(report: &check::Report, as_json: bool) -> Result<()> {
    if as_json {
        return json(report);
    }

    let verdict = if report.failures.is_empty() {
        "ok"
    } else {
        "FAILED"
    };
    println!(
        "check {verdict}: {}/{} probes answered between {} hosts of lab {}{} in {:.2} s",
        count(report.reachable),
        count(report.probes),
        count(report.hosts),
        report.lab,
        report.sample.map_or(String::new(), |k| format!(
            " ({k} sampled behind every ToR, edge or leaf)"
        )),
        report.seconds
    );
    if !report.failures.is_empty() {
        let shown = report.failures.iter().take(20);
        println!(
            "{}",
            table(
                &["from", "to", "address"],
                shown.map(|f| vec![f.from.clone(), f.to.clone(), f.address.to_string()]),
                &[],
            )
        );
        if report.failures.len() > 20 {
            println!(
                "... and {} more (--json lists all)",
                report.failures.len() - 20
            );
        }
        let unreachable: HashSet<&str> = report.failures.iter().map(|f| f.to.as_str()).collect();
        println!(
            "{} hosts could not be reached from somewhere",
            unreachable.len()
        );
    }
    Ok(())
}

/// What `turbonet watch` shows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WatchOptions {
    /// At most this many directions.
    pub top: usize,
    /// Idle directions too.
    pub all: bool,
    /// JSON Lines instead of tables.
    pub json: bool,
}

/// `turbonet watch`: a reading every `interval` seconds, `count` times (or
/// until Ctrl-C); on a terminal each table replaces the one before.
pub(crate) fn watch(
    running: &turbonet_lab::inspect::Running,
    interval: f64,
    count: Option<u64>,
    options: &WatchOptions,
) -> Result<()> {
    use std::io::{IsTerminal, Write};
    let mut watcher = turbonet_lab::watch::Watcher::new(running)?;
    let in_place = !options.json && std::io::stdout().is_terminal();
    let period = std::time::Duration::from_secs_f64(interval);
    // The first reading only starts the count.
    watcher.read()?;
    let mut shown = 0u64;
    while count.is_none_or(|c| shown < c) {
        std::thread::sleep(period);
        let Some(frame) = watcher.read()? else {
            continue;
        };
        shown += 1;
        let mut out = std::io::stdout().lock();
        if options.json {
            serde_json::to_writer(&mut out, &frame)?;
            writeln!(out)?;
        } else {
            if in_place {
                // Home, and clear the screen: the new table replaces the old.
                write!(out, "\x1b[H\x1b[2J")?;
            } else if shown > 1 {
                writeln!(out)?;
            }
            writeln!(out, "{}", watch_table(&frame, options))?;
        }
        out.flush()?;
    }
    Ok(())
}

fn watch_table(frame: &turbonet_lab::watch::Frame, options: &WatchOptions) -> String {
    use turbonet_topo::experiment::FigureUnit;
    let shown: Vec<&turbonet_lab::watch::DirectionRate> = frame
        .directions
        .iter()
        .filter(|d| options.all || d.is_active())
        .take(options.top)
        .collect();
    let per_second = |v: f64| {
        if v == 0.0 {
            String::new()
        } else if v >= 100.0 {
            format!("{v:.0}/s")
        } else {
            format!("{v:.1}/s")
        }
    };
    let mut text = format!(
        "lab {} at {:.1} s: {} links, {} down; rates over the last {:.1} s, busiest first",
        frame.lab, frame.t, frame.links, frame.down, frame.interval
    );
    if shown.is_empty() {
        text.push_str("\nno traffic (--all shows every direction)");
        return text;
    }
    let hidden = frame
        .directions
        .iter()
        .filter(|d| options.all || d.is_active())
        .count()
        - shown.len();
    text.push('\n');
    text.push_str(&table(
        &[
            "link",
            "direction",
            "state",
            "rate",
            "of link",
            "frames",
            "loss",
            "queue drops",
            "ecn",
            "queue",
        ],
        shown.iter().map(|d| {
            vec![
                d.link.clone(),
                format!("{} -> {}", d.from, d.to),
                if d.down { "DOWN" } else { "up" }.to_owned(),
                if d.bits_per_second > 0.0 {
                    FigureUnit::Rate.human(d.bits_per_second)
                } else {
                    String::new()
                },
                d.utilisation
                    .filter(|_| d.bits_per_second > 0.0)
                    .map(|u| format!("{:.0}%", u * 100.0))
                    .unwrap_or_default(),
                per_second(d.frames_per_second),
                per_second(d.loss_per_second),
                per_second(d.queue_drops_per_second),
                per_second(d.ecn_per_second),
                if d.queue_packets > 0 {
                    format!("{} p", d.queue_packets)
                } else {
                    String::new()
                },
            ]
        }),
        &[3, 4, 5, 6, 7, 8, 9],
    ));
    if hidden > 0 {
        text.push_str(&format!("\n{hidden} more (--top N shows more)"));
    }
    text
}

/// What `turbonet snapshot` says it wrote.
pub(crate) fn snapshot_written(w: &turbonet_lab::inspect::SnapshotWritten) -> String {
    let mut parts = vec![format!(
        "{} switches' forwarding tables ({} routes)",
        count(w.fibs),
        count(w.routes)
    )];
    if w.ribs > 0 {
        parts.push(format!(
            "{} agents' RIBs ({} routes received)",
            count(w.ribs),
            count(w.received)
        ));
    }
    if w.configs > 0 {
        parts.push(format!("{} configuration files", count(w.configs)));
    }
    parts.push(match w.down {
        0 => "nothing down".to_owned(),
        1 => "1 link or node down".to_owned(),
        n => format!("{} links or nodes down", count(n)),
    });
    format!(
        "snapshot written to {}: {}\n  {}",
        w.dir.display(),
        parts.join(", "),
        w.dir.join("snapshot.json").display()
    )
}

/// `turbonet capture`: a line per frame, or pcapng to a file or standard
/// output; the summary on standard error (standard output may be the
/// capture). Exits 130 on Ctrl-C, as a shell would.
pub(crate) fn capture(
    running: &turbonet_lab::inspect::Running,
    options: &turbonet_lab::capture::Options,
    write: Option<&std::path::Path>,
) -> Result<ExitCode> {
    use std::io::Write;
    let to_stdout = write.is_some_and(|p| p.as_os_str() == "-");
    let pcap: Option<Box<dyn Write>> = match write {
        None => None,
        Some(_) if to_stdout => Some(Box::new(std::io::stdout())),
        Some(path) => Some(Box::new(std::io::BufWriter::new(
            std::fs::File::create(path)
                .map_err(|e| turbonet_lab::capture::output_error(path, &e))?,
        ))),
    };
    if !to_stdout {
        eprintln!(
            "capturing {} ({}){}; Ctrl-C stops",
            options.link,
            options.direction,
            write.map_or_else(String::new, |p| format!(" into {}", p.display()))
        );
    }
    let print = write.is_none();
    let summary = turbonet_lab::capture::capture(running, options, pcap, |f| {
        if print {
            let mut out = std::io::stdout().lock();
            writeln!(
                out,
                "{:>10.6}  {} -> {}  {:>5}  {}{}",
                f.t,
                f.from,
                f.to,
                f.original_len,
                turbonet_lab::capture::describe(f.data),
                f.note
                    .as_ref()
                    .map_or_else(String::new, |n| format!("  [{n}]"))
            )?;
        }
        Ok(())
    })?;
    eprintln!("{}", summary.line());
    Ok(if summary.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}
