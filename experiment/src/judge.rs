//! Whether a check holds, judged on what was measured: an experiment's
//! `[[expect]]` clauses and a graded lab's task checks alike. Measuring
//! needs a live lab (`turbonet run`, `lab check`); judging is pure: a
//! [`Check`] and the [`Observed`] values recorded from the lab give a
//! [`Verdict`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

use serde::Serialize;
use turbonet_topo::NodeId;
use turbonet_topo::check::{Check, FrameKind, Ipv4Net, count_range};
use turbonet_topo::experiment::{Bound, Figure, FigureUnit, Of};
use turbonet_topo::units::{Delay, LossProb};

use turbonet_lab::routes::bgp::BgpReport;
use turbonet_lab::workload::{FlowReport, Report, State};

/// What a check's judgement found.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The check holds.
    pub pass: bool,
    /// What was measured against what was required, in words.
    pub detail: String,
    /// The values it compared (base units: bits per second, seconds, ...).
    pub values: Vec<f64>,
    /// What `detail` is about when it does not say (a figure's workload):
    /// [`Verdict::standalone`] puts it in front.
    pub subject: Option<String>,
}

impl Verdict {
    fn new(pass: bool, detail: String, values: Vec<f64>) -> Verdict {
        Verdict {
            pass,
            detail,
            values,
            subject: None,
        }
    }

    /// The detail, readable without the check beside it.
    pub fn standalone(&self) -> String {
        match &self.subject {
            Some(s) => format!("{s}: {}", self.detail),
            None => self.detail.clone(),
        }
    }
}

/// When BGP converged again after a timeline event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Convergence {
    /// The event's name.
    pub event: String,
    /// When it ran, on the lab's clock.
    pub at: f64,
    /// Seconds until every speaker's FIB held the plan again (`None`: not
    /// within the time watched).
    pub seconds: Option<f64>,
}

/// What `turbonet check` found: probes sent, answered, and failed pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probed {
    /// Probes sent.
    pub probes: usize,
    /// Probes answered.
    pub reachable: usize,
    /// Pairs that failed.
    pub failures: usize,
}

/// A route of a node's table with usable next hops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRoute {
    /// Its destination.
    pub prefix: Ipv4Net,
    /// Its usable next hops, as `via 10.0.0.1 dev eth0` or `dev eth0`.
    pub hops: Vec<String>,
}

/// What a node's longest-prefix lookup of an address gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeenLookup {
    /// No route.
    NoRoute,
    /// A route that discards (its kind: `blackhole`, ...).
    Discard(String),
    /// A route.
    Route {
        /// The route's prefix.
        prefix: Ipv4Net,
        /// Its usable next hops: the gateway, if any, and the port.
        usable: Vec<(Option<Ipv4Addr>, String)>,
        /// The ports of all its next hops.
        ports: Vec<String>,
    },
}

/// A port's state, as a link check reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port {
    /// Set up by its owner.
    pub up: bool,
    /// Its peer is up too.
    pub carrier: bool,
    /// Its MTU.
    pub mtu: u32,
}

/// One end of a link, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenEnd {
    /// The node.
    pub node: String,
    /// Its port on the link.
    pub port: String,
    /// The port's state; `Ok(None)`: the node has no such port any more;
    /// `Err`: why its ports could not be read.
    pub state: Result<Option<Port>, String>,
}

/// A link's ends, as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenLink {
    /// The link's name.
    pub name: String,
    /// Its ends.
    pub ends: Vec<SeenEnd>,
}

/// What was measured of a lab, for the checks to be judged on. A check
/// whose measurement is missing fails, saying it was not measured.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Node names, by [`NodeId`].
    pub nodes: Vec<String>,
    /// Workloads' reports.
    pub workloads: Vec<Report>,
    /// `turbonet check` at the end of a run.
    pub reachability: Option<Probed>,
    /// Re-convergence after timeline events.
    pub convergence: Vec<Convergence>,
    /// (from, to): each address of `to` and whether it answered `from`.
    pub probes: BTreeMap<(NodeId, NodeId), Vec<(Ipv4Addr, bool)>>,
    /// Nodes' routes (or why they could not be read).
    pub routes: BTreeMap<NodeId, Result<Vec<SeenRoute>, String>>,
    /// Nodes' lookups of addresses (or why they failed).
    pub lookups: BTreeMap<(NodeId, Ipv4Addr), Result<SeenLookup, String>>,
    /// Every switch's BGP sessions and convergence (or why they could not
    /// be read).
    pub bgp: Option<Result<BgpReport, String>>,
    /// (node, command): its exit code and output (or why it could not run).
    pub commands: BTreeMap<(NodeId, String), Result<(i32, String), String>>,
    /// Links' ends, in the fabric's order.
    pub links: Vec<SeenLink>,
    /// (link, direction, frames): frames counted (or why not).
    pub captured: BTreeMap<(String, String, FrameKind), Result<u64, String>>,
    /// Filters' counts while the workloads ran: (seen, dropped).
    pub filtered: HashMap<String, (u64, u64)>,
}

impl Observed {
    fn name(&self, n: NodeId) -> String {
        self.nodes
            .get(n.0 as usize)
            .cloned()
            .unwrap_or_else(|| format!("node {}", n.0))
    }

    fn workload(&self, name: &str) -> Option<&Report> {
        self.workloads.iter().find(|r| r.name == name)
    }
}

/// Whether `check` holds on what was `observed`.
pub fn verdict(check: &Check, observed: &Observed) -> Verdict {
    let fail = |detail: String| Verdict::new(false, detail, vec![]);
    let holds = || Verdict::new(true, check.describe(|n| node_name(observed, n)), vec![]);
    let name = |n: NodeId| observed.name(n);
    // A problem, or none: the check holds.
    let problem = |p: Option<String>| p.map_or_else(holds, fail);
    match check {
        Check::Reachable => match &observed.reachability {
            Some(c) => Verdict::new(
                c.failures == 0,
                format!("{} of {} probes answered", c.reachable, c.probes),
                vec![c.reachable as f64],
            ),
            None => fail("reachability was not checked".to_owned()),
        },
        Check::Reach {
            from,
            to,
            reachable,
        } => {
            let seen = observed.probes.get(&(*from, *to)).map_or(&[][..], |v| v);
            let list = |answered: bool| {
                seen.iter()
                    .filter(|(_, a)| *a == answered)
                    .map(|(addr, _)| addr.to_string())
                    .collect::<Vec<_>>()
            };
            let (answered, silent) = (list(true), list(false));
            problem(if *reachable && !silent.is_empty() {
                Some(format!(
                    "{} does not reach {}: no answer from {}",
                    name(*from),
                    name(*to),
                    silent.join(", ")
                ))
            } else if !*reachable && !answered.is_empty() {
                Some(format!(
                    "{} still reaches {} ({} answered)",
                    name(*from),
                    name(*to),
                    answered.join(", ")
                ))
            } else {
                None
            })
        }
        Check::Route {
            node,
            prefix,
            present,
            ecmp,
        } => {
            let table = match observed.routes.get(node) {
                Some(Ok(t)) => t,
                Some(Err(e)) => return fail(e.clone()),
                None => return fail(format!("{}'s routes were not read", name(*node))),
            };
            let route = table
                .iter()
                .filter(|r| r.prefix == *prefix)
                .find(|r| !r.hops.is_empty());
            problem(match (route, present) {
                (None, true) => Some(format!("{} has no route to {prefix}", name(*node))),
                (Some(r), false) => Some(format!(
                    "{} still has a route to {prefix} ({})",
                    name(*node),
                    r.hops.join(", ")
                )),
                (Some(r), true) => match ecmp {
                    Some(n) if r.hops.len() != *n => Some(format!(
                        "{} reaches {prefix} over {} next hop(s), not {n}: {}",
                        name(*node),
                        r.hops.len(),
                        r.hops.join(", ")
                    )),
                    _ => None,
                },
                (None, false) => None,
            })
        }
        Check::Lookup { node, address, dev } => {
            let seen = observed.lookups.get(&(*node, *address));
            let node = &name(*node);
            let (prefix, usable, ports) = match seen {
                Some(Ok(SeenLookup::Route {
                    prefix,
                    usable,
                    ports,
                })) => (prefix, usable, ports),
                Some(Ok(SeenLookup::NoRoute)) => {
                    return fail(format!("{node} has no route for {address}"));
                }
                Some(Ok(SeenLookup::Discard(kind))) => {
                    return fail(format!(
                        "{node} discards packets for {address}: its route is {kind}"
                    ));
                }
                Some(Err(e)) => return fail(e.clone()),
                None => return fail(format!("{node}'s route for {address} was not looked up")),
            };
            if usable.is_empty() {
                return fail(format!(
                    "{node}'s route for {address} ({prefix}) leaves by {}, which is down or has \
                     no carrier",
                    ports.join(" and ")
                ));
            }
            let Some(dev) = dev.as_deref() else {
                return holds();
            };
            let wrong: Vec<String> = usable
                .iter()
                .filter(|(_, port)| port != dev)
                .map(|(via, port)| match via {
                    Some(v) => format!("via {v} out of {port}"),
                    None => format!("out of {port}"),
                })
                .collect();
            problem((!wrong.is_empty()).then(|| {
                format!(
                    "{node} sends {address} {} (its route {prefix}), not out of {dev}",
                    wrong.join(" and "),
                )
            }))
        }
        Check::Bgp {
            node,
            peer,
            established,
        } => {
            let report = match bgp(observed) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            let (node, peer) = (name(*node), name(*peer));
            let state = report
                .speakers
                .iter()
                .find(|s| s.node == node)
                .and_then(|s| s.sessions.iter().find(|x| x.peer == peer))
                .map_or("not configured", |x| x.state.as_str());
            problem(match (state == "established", established) {
                (false, true) => Some(format!(
                    "{node}'s BGP session with {peer} is {state}, not established"
                )),
                (true, false) => Some(format!(
                    "{node}'s BGP session with {peer} is still established"
                )),
                _ => None,
            })
        }
        Check::Command {
            node,
            run,
            exit,
            output,
        } => problem(match observed.commands.get(&(*node, run.clone())) {
            None => Some(format!("`{run}` did not run on {}", name(*node))),
            Some(Err(e)) => Some(e.clone()),
            Some(Ok((code, text))) if code != exit => Some(format!(
                "`{run}` on {} exited with {code}, not {exit}{}",
                name(*node),
                gist(text)
            )),
            Some(Ok((_, text))) => match output {
                Some(o) if !text.contains(o.as_str()) => {
                    Some(format!("`{run}` on {} did not print {o:?}", name(*node)))
                }
                _ => None,
            },
        }),
        Check::Link { link, up, mtu } => {
            let mut problems: Vec<String> = Vec::new();
            let links = observed
                .links
                .iter()
                .filter(|l| link.as_ref().is_none_or(|n| *n == l.name));
            for l in links {
                for p in link_problems(l, *up, *mtu) {
                    if !problems.contains(&p) {
                        problems.push(p);
                    }
                }
            }
            problem((!problems.is_empty()).then(|| problems.join("\n")))
        }
        Check::Capture {
            link,
            direction,
            frames,
            min,
            max,
        } => {
            let key = (link.clone(), direction.clone(), *frames);
            let n = match observed.captured.get(&key) {
                Some(Ok(n)) => *n,
                Some(Err(e)) => return fail(e.clone()),
                None => return fail(format!("{link} was not captured")),
            };
            let kind = frames.adjective();
            let within = !out_of(n, *min, *max);
            Verdict::new(
                within,
                format!(
                    "{link} carried {n} {kind}frames while the workloads ran, not {}",
                    count_range(*min, *max)
                ),
                vec![n as f64],
            )
            .said_when(within, holds)
        }
        Check::Filter {
            filter,
            counter,
            min,
            max,
        } => {
            let Some(&(seen, dropped)) = observed.filtered.get(filter) else {
                return fail(format!(
                    "filter {filter} is on no link of the lab: it counted nothing"
                ));
            };
            let n = counter.of(seen, dropped);
            let within = !out_of(n, *min, *max);
            Verdict::new(
                within,
                format!(
                    "filter {filter} {} {n} frames while the workloads ran, not {}",
                    counter.verb(),
                    count_range(*min, *max)
                ),
                vec![n as f64],
            )
            .said_when(within, holds)
        }
        Check::Converged {
            within,
            after: Some(after),
        } => converged_after(observed, &after.event, *within),
        Check::Converged {
            within,
            after: None,
        } => {
            let report = match bgp(observed) {
                Ok(r) => r,
                Err(e) => return fail(e),
            };
            converged_since_change(report, *within).map_or_else(holds, |(detail, values)| {
                Verdict::new(false, detail, values)
            })
        }
        Check::Binomial {
            workload,
            p,
            confidence,
        } => {
            let report = observed.workload(workload);
            let Some(r) = report.filter(|r| r.state == State::Done) else {
                return fail(not_done(report, workload));
            };
            let sent: u64 = r.flows.iter().filter_map(|f| f.sent).sum();
            let received: u64 = r.flows.iter().filter_map(|f| f.received).sum();
            let lost = sent.saturating_sub(received);
            let (lo, hi) = turbonet_workload::figures::binomial_interval(sent, *p, *confidence);
            Verdict::new(
                (lo..=hi).contains(&lost),
                format!(
                    "{lost} of {sent} datagrams lost; {} interval for p = {}: {lo} to {hi}",
                    FigureUnit::Fraction.human(*confidence),
                    LossProb(*p)
                ),
                vec![lost as f64 / sent.max(1) as f64],
            )
        }
        Check::Figure {
            workload,
            ran,
            algorithm,
            figure,
            of,
            bound,
        } => {
            let report = observed.workload(workload);
            if *ran && report.is_none() {
                return fail(format!(
                    "you have not run a workload named {workload} (`turbonet workload start FILE`)"
                ));
            }
            if let (Some(r), Some(a)) = (report, algorithm) {
                let used: BTreeSet<&str> = r.ops.iter().map(|o| o.algorithm.as_str()).collect();
                if r.kind != "collective" {
                    return fail(format!(
                        "{workload} is a {} workload, not a collective",
                        r.kind
                    ));
                }
                if !used.is_empty() && used != BTreeSet::from([a.as_str()]) {
                    return fail(format!(
                        "{workload} used {}, not {a}",
                        used.into_iter().collect::<Vec<_>>().join(" and ")
                    ));
                }
            }
            if let Some(r) = report
                && !figure.kinds().contains(&r.kind.as_str())
            {
                return fail(format!(
                    "{workload} is a {} workload: it reports no {figure}",
                    r.kind
                ));
            }
            Verdict {
                subject: Some(workload.clone()),
                ..figure_verdict(report, workload, *figure, *of, *bound)
            }
        }
    }
}

impl Verdict {
    /// This verdict, or when `pass` the one `holds` gives (a count's
    /// detail says what it is not, which only a failure needs).
    fn said_when(self, pass: bool, holds: impl FnOnce() -> Verdict) -> Verdict {
        if pass {
            Verdict {
                values: self.values,
                ..holds()
            }
        } else {
            self
        }
    }
}

/// A node's name for [`Check::describe`].
fn node_name(observed: &Observed, n: NodeId) -> &str {
    observed.nodes.get(n.0 as usize).map_or("?", String::as_str)
}

/// The BGP report, or why there is none.
fn bgp(observed: &Observed) -> Result<&BgpReport, String> {
    match &observed.bgp {
        Some(Ok(r)) => Ok(r),
        Some(Err(e)) => Err(e.clone()),
        None => Err("the lab's BGP state was not read".to_owned()),
    }
}

/// Whether BGP converged within `within` of the timeline event `event`.
fn converged_after(observed: &Observed, event: &str, within: Delay) -> Verdict {
    let within_s = within.as_duration().as_secs_f64();
    match observed.convergence.iter().find(|c| c.event == event) {
        Some(Convergence {
            seconds: Some(s), ..
        }) => Verdict::new(
            *s <= within_s,
            format!("BGP converged {s:.2} s after `{event}` (at most {within})"),
            vec![*s],
        ),
        _ => Verdict::new(
            false,
            format!("BGP had not converged {within} after `{event}`"),
            vec![],
        ),
    }
}

/// What is wrong with BGP's convergence since the last fail or restore
/// (or the start), with the time it took if it is known; `None`: it
/// converged within `within`.
fn converged_since_change(report: &BgpReport, within: Delay) -> Option<(String, Vec<f64>)> {
    let after = if report.since_change.is_some() {
        "the last fail or restore"
    } else {
        "the start"
    };
    let behind: Vec<_> = report.speakers.iter().filter(|s| !s.converged).collect();
    if let Some(first) = behind.first() {
        let short = if first.routes < first.expected {
            format!(
                "{} has {} of its {} prefixes",
                first.node, first.routes, first.expected
            )
        } else {
            format!("{} lacks next hops the fabric offers", first.node)
        };
        return Some((
            format!(
                "BGP has not converged: {} of {} switches do not hold what the fabric \
                 needs yet ({short})",
                behind.len(),
                report.speakers.len(),
            ),
            vec![],
        ));
    }
    let limit = within.as_duration().as_secs_f64();
    match report.convergence_time() {
        Some(t) if t <= limit => None,
        Some(t) => Some((
            format!("BGP converged {t:.2} s after {after}, not within {within}"),
            vec![t],
        )),
        None => Some(("BGP has not converged".to_owned(), vec![])),
    }
}

/// What is wrong with `link`'s ports: not up (or not down) as `up` asks,
/// or an MTU other than `mtu`.
fn link_problems(link: &SeenLink, up: Option<bool>, mtu: Option<u32>) -> Vec<String> {
    let mut problems = Vec::new();
    // (node, port, state) of each end found.
    let mut ends: Vec<(&str, &str, Port)> = Vec::new();
    for end in &link.ends {
        match &end.state {
            Err(e) => problems.push(e.clone()),
            Ok(Some(state)) => ends.push((&end.node, &end.port, *state)),
            Ok(None) => problems.push(format!(
                "{}: {} has no port {} any more",
                link.name, end.node, end.port
            )),
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
                    |(node, port, _)| format!("{}: {node}'s port {port} has no carrier", link.name),
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
        problems.extend(
            ends.iter()
                .filter(|(_, _, s)| s.mtu != want)
                .map(|(node, port, s)| {
                    format!(
                        "{}: {node}'s port {port} has MTU {}, not {want}",
                        link.name, s.mtu
                    )
                }),
        );
    }
    problems
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

/// All of `flows`' bytes over the span from the first start to the last
/// byte received, bits per second.
fn aggregate_goodput(flows: &[FlowReport]) -> Option<f64> {
    let first = flows.iter().map(|f| f.start).reduce(f64::min)?;
    let last = flows.iter().map(|f| f.start + f.seconds).reduce(f64::max)?;
    let bytes: u64 = flows.iter().map(|f| f.bytes).sum();
    (last > first).then(|| bytes as f64 * 8.0 / (last - first))
}

/// The values of `figure` in a workload's report, and what each is (for
/// the message): a size, a flow, a rank.
pub fn values(report: &Report, figure: Figure) -> Vec<(f64, String)> {
    let size = |b: u64| turbonet_topo::units::Bytes(b).to_string();
    let flow = |f: &FlowReport| format!("flow {} {}->{}", f.id, f.src, f.dst);
    match figure {
        Figure::Busbw => report
            .ops
            .iter()
            .map(|o| (o.busbw, size(o.bytes)))
            .collect(),
        Figure::Algbw => report
            .ops
            .iter()
            .map(|o| (o.algbw, size(o.bytes)))
            .collect(),
        Figure::Time => report.ops.iter().map(|o| (o.time, size(o.bytes))).collect(),
        Figure::Goodput => report.flows.iter().map(|f| (f.goodput, flow(f))).collect(),
        Figure::Fct => report.flows.iter().map(|f| (f.seconds, flow(f))).collect(),
        Figure::Retransmits => report
            .flows
            .iter()
            .filter_map(|f| f.retransmits.map(|r| (r as f64, flow(f))))
            .collect(),
        Figure::Loss => report
            .flows
            .iter()
            .filter_map(|f| f.loss.map(|l| (l, flow(f))))
            .collect(),
        Figure::Delay => report
            .flows
            .iter()
            .filter_map(|f| f.delay.map(|d| (d, flow(f))))
            .collect(),
        Figure::Exit => report
            .commands
            .iter()
            .filter_map(|c| {
                c.exit
                    .map(|e| (f64::from(e), format!("rank {} ({})", c.rank, c.host)))
            })
            .collect(),
    }
}

/// Whether `workload`'s `figure` (`of` its values) lies in `bound`.
fn figure_verdict(
    report: Option<&Report>,
    workload: &str,
    figure: Figure,
    of: Of,
    bound: Bound,
) -> Verdict {
    let Some(r) = report.filter(|r| r.state == State::Done) else {
        return Verdict::new(false, not_done(report, workload), vec![]);
    };
    let unit = figure.unit();
    let all = values(r, figure);
    if all.is_empty() {
        return Verdict::new(false, format!("{workload} reported no {figure}"), vec![]);
    }
    let nums: Vec<f64> = all.iter().map(|(x, _)| *x).collect();
    let agg = match of {
        Of::Each => None,
        Of::Mean => Some(nums.iter().sum::<f64>() / nums.len() as f64),
        Of::Min => nums.iter().copied().reduce(f64::min),
        Of::Max => nums.iter().copied().reduce(f64::max),
        // Goodputs over different spans do not add up: the total is every
        // byte over the span from the first start to the last byte.
        Of::Total if figure == Figure::Goodput => aggregate_goodput(&r.flows),
        Of::Total => Some(nums.iter().sum()),
    };
    let holds = |x: f64| bound.holds(x);
    let range = bound.describe(unit);
    // One value (one flow, one size): said as it is.
    if let ([(x, what)], None) = (all.as_slice(), agg) {
        return Verdict::new(
            holds(*x),
            format!("{figure} {} ({what}; expected {range})", unit.human(*x)),
            vec![*x],
        );
    }
    match agg {
        Some(x) => Verdict::new(
            holds(x),
            format!(
                "{} {figure} {} (expected {range})",
                of.name(),
                unit.human(x)
            ),
            vec![x],
        ),
        None => {
            let bad: Vec<String> = all
                .iter()
                .filter(|(x, _)| !holds(*x))
                .map(|(x, what)| format!("{what}: {}", unit.human(*x)))
                .collect();
            let (lo, hi) = nums
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let detail = if bad.is_empty() {
                let noun = match r.kind.as_str() {
                    "collective" => "sizes",
                    "exec" => "ranks",
                    _ => "flows",
                };
                format!(
                    "{figure} {} to {} over {} {noun} (expected {range})",
                    unit.human(lo),
                    unit.human(hi),
                    nums.len(),
                )
            } else {
                format!(
                    "{} of {} outside {range}: {}",
                    bad.len(),
                    nums.len(),
                    bad.join(", ")
                )
            };
            Verdict::new(bad.is_empty(), detail, nums)
        }
    }
}

/// Why a workload has no figures: it did not run, or did not finish.
fn not_done(report: Option<&Report>, name: &str) -> String {
    match report {
        None => format!("workload {name} did not run"),
        Some(r) => format!(
            "workload {name} {}{}",
            r.state.name(),
            r.message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_lab::routes::bgp::{SessionStatus, SpeakerStatus};
    use turbonet_lab::workload::OpReport;
    use turbonet_topo::check::{After, FilterCounter};

    fn report(name: &str, kind: &str, flows: Vec<FlowReport>, ops: Vec<OpReport>) -> Report {
        Report {
            name: name.into(),
            kind: kind.into(),
            job: "j".into(),
            seed: 1,
            state: State::Done,
            message: None,
            started: Some(0.0),
            ended: Some(1.0),
            flows,
            ops,
            series: vec![],
            commands: vec![],
            warnings: vec![],
        }
    }

    fn flow(id: usize, goodput: f64, start: f64, seconds: f64, bytes: u64) -> FlowReport {
        FlowReport {
            id,
            src: "h0".into(),
            dst: "h1".into(),
            goodput,
            start,
            seconds,
            bytes,
            ..FlowReport::default()
        }
    }

    fn op(bytes: u64, busbw: f64) -> OpReport {
        OpReport {
            op: "all-reduce".into(),
            algorithm: "ring".into(),
            bytes,
            busbw,
            ..OpReport::default()
        }
    }

    fn figure(workload: &str, figure: Figure, of: Of, min: Option<f64>, max: Option<f64>) -> Check {
        Check::Figure {
            workload: workload.into(),
            ran: false,
            algorithm: None,
            figure,
            of,
            bound: Bound { min, max },
        }
    }

    fn with_workloads(workloads: Vec<Report>) -> Observed {
        Observed {
            nodes: vec!["h0".into(), "h1".into(), "s0".into()],
            workloads,
            ..Observed::default()
        }
    }

    fn bulk() -> Observed {
        // Two flows of 1 Gbit/s and 3 Gbit/s over one second each, side by
        // side: 4 Gbit/s together.
        with_workloads(vec![report(
            "bulk",
            "tcp",
            vec![
                flow(0, 1e9, 0.0, 1.0, 125_000_000),
                flow(1, 3e9, 0.0, 1.0, 375_000_000),
            ],
            vec![],
        )])
    }

    #[test]
    fn figure_bounds_each_value_or_an_aggregate() {
        let seen = bulk();
        let each = verdict(
            &figure("bulk", Figure::Goodput, Of::Each, Some(2e9), None),
            &seen,
        );
        assert!(!each.pass);
        assert_eq!(
            each.detail,
            "1 of 2 outside >= 2.00 Gbit/s: flow 0 h0->h1: 1.00 Gbit/s"
        );
        assert_eq!(each.values, [1e9, 3e9]);
        assert_eq!(
            each.standalone(),
            "bulk: 1 of 2 outside >= 2.00 Gbit/s: flow 0 h0->h1: 1.00 Gbit/s"
        );
        let mean = verdict(
            &figure("bulk", Figure::Goodput, Of::Mean, Some(2e9), None),
            &seen,
        );
        assert!(mean.pass);
        assert_eq!(
            mean.detail,
            "mean goodput 2.00 Gbit/s (expected >= 2.00 Gbit/s)"
        );
        let min = verdict(
            &figure("bulk", Figure::Goodput, Of::Min, Some(2e9), None),
            &seen,
        );
        assert!(!min.pass && min.values == [1e9]);
        let max = verdict(
            &figure("bulk", Figure::Goodput, Of::Max, None, Some(2e9)),
            &seen,
        );
        assert!(!max.pass && max.values == [3e9]);
        // A total of goodputs is every byte over the whole span.
        let total = verdict(
            &figure("bulk", Figure::Goodput, Of::Total, Some(4e9), Some(4e9)),
            &seen,
        );
        assert!(total.pass, "{}", total.detail);
        assert_eq!(total.values, [4e9]);
        let within = verdict(
            &figure("bulk", Figure::Goodput, Of::Each, Some(5e8), Some(4e9)),
            &seen,
        );
        assert!(within.pass);
        assert_eq!(
            within.detail,
            "goodput 1.00 Gbit/s to 3.00 Gbit/s over 2 flows (expected in [500 Mbit/s, 4.00 Gbit/s])"
        );
    }

    #[test]
    fn one_value_is_said_as_it_is_and_a_missing_workload_fails() {
        let seen = with_workloads(vec![report(
            "ring",
            "collective",
            vec![],
            vec![op(1 << 20, 5e8)],
        )]);
        let v = verdict(
            &figure("ring", Figure::Busbw, Of::Each, Some(1e9), None),
            &seen,
        );
        assert!(!v.pass);
        assert_eq!(v.detail, "busbw 500 Mbit/s (1MiB; expected >= 1.00 Gbit/s)");
        let gone = verdict(
            &figure("other", Figure::Busbw, Of::Each, Some(1e9), None),
            &seen,
        );
        assert_eq!(
            (gone.pass, gone.detail.as_str()),
            (false, "workload other did not run")
        );
        let none = verdict(
            &figure("ring", Figure::Time, Of::Mean, None, Some(1.0)),
            &seen,
        );
        assert_eq!(none.detail, "mean time 0.00 ns (expected <= 1.00 s)");
    }

    #[test]
    fn the_students_workload_must_have_run_with_its_algorithm() {
        let seen = with_workloads(vec![report(
            "ring",
            "collective",
            vec![],
            vec![op(1024, 1e9)],
        )]);
        let students = |name: &str, algorithm: &str| Check::Figure {
            workload: name.into(),
            ran: true,
            algorithm: Some(algorithm.into()),
            figure: Figure::Busbw,
            of: Of::Each,
            bound: Bound {
                min: Some(1.0),
                max: None,
            },
        };
        let missing = verdict(&students("tree", "tree"), &seen);
        assert!(
            missing
                .detail
                .starts_with("you have not run a workload named tree")
        );
        let wrong = verdict(&students("ring", "tree"), &seen);
        assert_eq!(wrong.standalone(), "ring used ring, not tree");
        assert!(verdict(&students("ring", "ring"), &seen).pass);
    }

    #[test]
    fn binomial_loss_lies_in_its_interval() {
        let lossy = |received: u64| {
            with_workloads(vec![report(
                "udp",
                "udp",
                vec![FlowReport {
                    sent: Some(10_000),
                    received: Some(received),
                    ..FlowReport::default()
                }],
                vec![],
            )])
        };
        let check = Check::Binomial {
            workload: "udp".into(),
            p: 0.01,
            confidence: 0.99,
        };
        let ok = verdict(&check, &lossy(9_900));
        assert!(ok.pass, "{}", ok.detail);
        assert!(
            ok.detail
                .starts_with("100 of 10000 datagrams lost; 99.0% interval for p = "),
            "{}",
            ok.detail
        );
        assert!(!verdict(&check, &lossy(9_000)).pass);
    }

    #[test]
    fn convergence_after_an_event_or_since_the_last_change() {
        let after = Check::Converged {
            within: Delay::from_secs(2),
            after: Some(After {
                index: 0,
                event: "cut".into(),
            }),
        };
        let mut seen = with_workloads(vec![]);
        seen.convergence = vec![Convergence {
            event: "cut".into(),
            at: 5.0,
            seconds: Some(1.5),
        }];
        let v = verdict(&after, &seen);
        assert!(v.pass);
        assert_eq!(v.detail, "BGP converged 1.50 s after `cut` (at most 2s)");
        seen.convergence[0].seconds = None;
        assert_eq!(
            verdict(&after, &seen).detail,
            "BGP had not converged 2s after `cut`"
        );

        let since = Check::Converged {
            within: Delay::from_secs(2),
            after: None,
        };
        assert_eq!(
            verdict(&since, &seen).detail,
            "the lab's BGP state was not read"
        );
        seen.bgp = Some(Ok(bgp(Some(3.0), "established")));
        let slow = verdict(&since, &seen);
        assert_eq!(
            slow.detail,
            "BGP converged 3.00 s after the last fail or restore, not within 2s"
        );
        seen.bgp = Some(Ok(bgp(Some(1.0), "established")));
        assert!(verdict(&since, &seen).pass);
    }

    fn bgp(converged_at: Option<f64>, state: &str) -> BgpReport {
        BgpReport {
            elapsed: 10.0,
            since_change: Some(4.0),
            speakers: vec![SpeakerStatus {
                node: "s0".into(),
                agent: "builtin".into(),
                asn: 65000,
                router_id: Ipv4Addr::new(10, 0, 0, 1),
                routes: 4,
                expected: 4,
                converged: converged_at.is_some(),
                converged_at,
                sessions: vec![SessionStatus {
                    peer: "h1".into(),
                    peer_addr: Ipv4Addr::new(10, 0, 0, 2),
                    peer_asn: 65001,
                    ifname: "eth0".into(),
                    state: state.into(),
                    since: None,
                    received: None,
                    last_error: None,
                }],
                sessions_up: 1,
                sessions_total: 1,
                counters: None,
            }],
        }
    }

    #[test]
    fn bgp_sessions_must_be_as_asked() {
        let mut seen = with_workloads(vec![]);
        seen.bgp = Some(Ok(bgp(Some(1.0), "active")));
        let up = Check::Bgp {
            node: NodeId(2),
            peer: NodeId(1),
            established: true,
        };
        assert_eq!(
            verdict(&up, &seen).detail,
            "s0's BGP session with h1 is active, not established"
        );
        seen.bgp = Some(Ok(bgp(Some(1.0), "established")));
        let v = verdict(&up, &seen);
        assert!(v.pass);
        assert_eq!(v.detail, "s0's BGP session with h1 is established");
    }

    #[test]
    fn reach_needs_every_address_to_answer_or_none() {
        let mut seen = with_workloads(vec![]);
        let (a, b) = (Ipv4Addr::new(10, 0, 1, 2), Ipv4Addr::new(10, 0, 2, 2));
        seen.probes
            .insert((NodeId(0), NodeId(1)), vec![(a, true), (b, false)]);
        let reach = |reachable| Check::Reach {
            from: NodeId(0),
            to: NodeId(1),
            reachable,
        };
        assert_eq!(
            verdict(&reach(true), &seen).detail,
            "h0 does not reach h1: no answer from 10.0.2.2"
        );
        assert_eq!(
            verdict(&reach(false), &seen).detail,
            "h0 still reaches h1 (10.0.1.2 answered)"
        );
        seen.reachability = Some(Probed {
            probes: 6,
            reachable: 6,
            failures: 0,
        });
        let all = verdict(&Check::Reachable, &seen);
        assert_eq!(
            (all.pass, all.detail.as_str()),
            (true, "6 of 6 probes answered")
        );
    }

    #[test]
    fn routes_count_their_usable_next_hops() {
        let mut seen = with_workloads(vec![]);
        let prefix: Ipv4Net = "10.0.1.0/24".parse().unwrap();
        seen.routes.insert(
            NodeId(2),
            Ok(vec![SeenRoute {
                prefix,
                hops: vec![
                    "via 10.0.0.1 dev eth0".into(),
                    "via 10.0.0.5 dev eth1".into(),
                ],
            }]),
        );
        let route = |present, ecmp| Check::Route {
            node: NodeId(2),
            prefix,
            present,
            ecmp,
        };
        assert!(verdict(&route(true, Some(2)), &seen).pass);
        assert_eq!(
            verdict(&route(true, Some(4)), &seen).detail,
            "s0 reaches 10.0.1.0/24 over 2 next hop(s), not 4: via 10.0.0.1 dev eth0, via 10.0.0.5 dev eth1"
        );
        assert!(
            verdict(&route(false, None), &seen)
                .detail
                .starts_with("s0 still has a route")
        );
        seen.routes
            .insert(NodeId(2), Err("cannot read s0's routes: gone".into()));
        assert_eq!(
            verdict(&route(true, None), &seen).detail,
            "cannot read s0's routes: gone"
        );
    }

    #[test]
    fn lookups_leave_by_the_port_asked() {
        let mut seen = with_workloads(vec![]);
        let address = Ipv4Addr::new(10, 0, 1, 2);
        seen.lookups.insert(
            (NodeId(2), address),
            Ok(SeenLookup::Route {
                prefix: "10.0.1.0/24".parse().unwrap(),
                usable: vec![(Some(Ipv4Addr::new(10, 0, 0, 1)), "eth0".into())],
                ports: vec!["eth0".into()],
            }),
        );
        let lookup = |dev: &str| Check::Lookup {
            node: NodeId(2),
            address,
            dev: Some(dev.into()),
        };
        assert!(verdict(&lookup("eth0"), &seen).pass);
        assert_eq!(
            verdict(&lookup("eth1"), &seen).detail,
            "s0 sends 10.0.1.2 via 10.0.0.1 out of eth0 (its route 10.0.1.0/24), not out of eth1"
        );
    }

    #[test]
    fn captures_and_filters_count_within_their_range() {
        let mut seen = with_workloads(vec![]);
        let key = ("h0--s0".to_owned(), "both".to_owned(), FrameKind::EcnMarked);
        seen.captured.insert(key, Ok(0));
        let capture = |min, max| Check::Capture {
            link: "h0--s0".into(),
            direction: "both".into(),
            frames: FrameKind::EcnMarked,
            min,
            max,
        };
        assert_eq!(
            verdict(&capture(Some(1), None), &seen).detail,
            "h0--s0 carried 0 ecn-marked frames while the workloads ran, not at least 1"
        );
        assert!(verdict(&capture(None, Some(0)), &seen).pass);
        seen.filtered.insert("sav".into(), (100, 40));
        let filter = |counter, min, max| Check::Filter {
            filter: "sav".into(),
            counter,
            min,
            max,
        };
        assert!(verdict(&filter(FilterCounter::Dropped, Some(40), Some(40)), &seen).pass);
        assert_eq!(
            verdict(&filter(FilterCounter::Passed, None, Some(10)), &seen).detail,
            "filter sav passed 60 frames while the workloads ran, not at most 10"
        );
        let elsewhere = Check::Filter {
            filter: "other".into(),
            counter: FilterCounter::Seen,
            min: Some(1),
            max: None,
        };
        assert!(!verdict(&elsewhere, &seen).pass);
    }

    #[test]
    fn commands_and_links_say_what_is_wrong() {
        let mut seen = with_workloads(vec![]);
        seen.commands.insert(
            (NodeId(0), "ping x".into()),
            Ok((1, "\n100% loss\n".into())),
        );
        let command = Check::Command {
            node: NodeId(0),
            run: "ping x".into(),
            exit: 0,
            output: None,
        };
        assert_eq!(
            verdict(&command, &seen).detail,
            "`ping x` on h0 exited with 1, not 0: 100% loss"
        );
        let port = |up, mtu| {
            Ok(Some(Port {
                up,
                carrier: up,
                mtu,
            }))
        };
        seen.links.push(SeenLink {
            name: "h0--s0".into(),
            ends: vec![
                SeenEnd {
                    node: "h0".into(),
                    port: "eth0".into(),
                    state: port(true, 1500),
                },
                SeenEnd {
                    node: "s0".into(),
                    port: "eth1".into(),
                    state: port(false, 9000),
                },
            ],
        });
        let link = Check::Link {
            link: None,
            up: Some(true),
            mtu: Some(9000),
        };
        assert_eq!(
            verdict(&link, &seen).detail,
            "h0--s0: s0's port eth1 is down\nh0--s0: h0's port eth0 has MTU 1500, not 9000"
        );
    }
}
