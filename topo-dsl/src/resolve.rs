//! Parse -> resolve: parses the TOML, hands every section to its reader
//! ([`crate::read`]) in the order they depend on each other, and builds
//! the validated [`Lab`]. All errors are collected; a section that depends
//! on a broken one is skipped rather than reported twice.

use std::collections::BTreeMap;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::diag::{Diags, ScenarioErrors, choices_help};
use crate::model::{Lab, RoutingConfig, RoutingMode};
use crate::plan;
use crate::read::{
    addressing, check, expect, externals, filters, jobs, lab, links, metrics, mgmt, p4rt, routing,
    taps, tasks, timeline, topology, workloads,
};

/// The sections of a scenario file.
const TOP_KEYS: &[&str] = &[
    "lab",
    "topology",
    "routing",
    "addressing",
    "links",
    "external",
    "timeline",
    "p4rt",
    "job",
    "workload",
    "expect",
    "mgmt",
    "metrics",
    "capture",
    "mirror",
    "filter",
    "task",
    "faults",
];

/// The TOML of `text`, or its syntax errors.
fn parse_toml<'i>(d: &mut Diags<'_>, text: &'i str) -> Option<Spanned<DeTable<'i>>> {
    let (root, syntax) = DeTable::parse_recoverable(text);
    for e in &syntax {
        let span = e.span().unwrap_or(0..0);
        d.error(
            Some(span),
            format!("invalid TOML: {}", e.message().trim_end()),
        )
        .label("here")
        .help("see https://toml.io for the syntax");
    }
    syntax.is_empty().then_some(root)
}

/// Entry point behind [`crate::parse_workloads`]: `[[job]]` and
/// `[[workload]]` tables read against a lab (whose jobs they may use).
pub(crate) fn parse_workloads(
    origin: &str,
    text: &str,
    lab: &Lab,
) -> Result<Vec<crate::experiment::Workload>, ScenarioErrors> {
    const KEYS: &[&str] = &["job", "workload"];
    let mut d = Diags::new(text);
    let Some(root) = parse_toml(&mut d, text) else {
        return Err(d.finish(origin).expect_err("errors were recorded"));
    };
    let mut sections: BTreeMap<&str, &Spanned<DeValue<'_>>> = BTreeMap::new();
    for (key, value) in root.get_ref() {
        let name: &str = key.get_ref();
        if KEYS.contains(&name) {
            sections.insert(name, value);
        } else {
            d.error(Some(key.span()), format!("unknown section `{name}`"))
                .label("not a workload's")
                .help(choices_help(name, "sections", KEYS));
        }
    }
    let mut jobs = jobs::read(&mut d, sections.get("job").copied(), Some(&lab.fabric));
    for job in &lab.jobs {
        if jobs.names.insert(job.name.clone()) {
            jobs.valid.push(job.clone());
        }
    }
    let (workloads, _) = workloads::read(
        &mut d,
        sections.get("workload").copied(),
        Some(&lab.fabric),
        &jobs,
        lab.seed,
    );
    if workloads.is_empty() && d.count() == 0 {
        d.error(Some(0..0), "no `[[workload]]` to start")
            .label("empty")
            .help("a file of `[[workload]]` tables (and the `[[job]]`s they run over)");
    }
    d.finish(origin).map(|()| workloads)
}

/// Entry point behind [`crate::parse`].
pub(crate) fn parse(origin: &str, text: &str) -> Result<Lab, ScenarioErrors> {
    let mut d = Diags::new(text);
    let Some(root) = parse_toml(&mut d, text) else {
        return Err(d.finish(origin).expect_err("errors were recorded"));
    };
    let lab = resolve(&mut d, root.get_ref());
    match (d.finish(origin), lab) {
        (Ok(()), Some(lab)) => Ok(lab),
        (Err(e), _) => Err(e),
        (Ok(()), None) => {
            // Every path that returns None records an error first; this is a
            // safety net so a bug never turns into a panic.
            let mut d = Diags::new(text);
            d.error(None, "the scenario could not be resolved");
            Err(d.finish(origin).expect_err("an error was recorded"))
        }
    }
}

/// Reads the sections in dependency order: the fabric is generated from
/// `[topology]` with the pools of `[addressing]`, the ASNs of `[routing]`
/// and the parameters of `[links]`; `[routing.agents]`, `[[external]]` and
/// `[[timeline]]` then name its nodes and links; `[p4rt]` depends on the
/// target of `[lab]`.
fn resolve(d: &mut Diags<'_>, root: &DeTable<'_>) -> Option<Lab> {
    let mut sections: BTreeMap<&str, &Spanned<DeValue<'_>>> = BTreeMap::new();
    for (key, value) in root {
        let name: &str = key.get_ref();
        if TOP_KEYS.contains(&name) {
            sections.insert(name, value);
        } else {
            d.error(Some(key.span()), format!("unknown section `{name}`"))
                .label("unknown section")
                .help(choices_help(name, "sections", TOP_KEYS));
        }
    }
    let section = |name: &str| sections.get(name).copied();

    let lab = lab::read(d, section("lab"));
    let routing = routing::read(d, section("routing"));
    let pools = addressing::read(d, section("addressing"));
    let topology = topology::read(d, section("topology"));
    let link_cfg = links::read(d, section("links"), topology.kind);

    // Build the fabric.
    let mut fabric = match (topology.topo, &pools) {
        (Some(t), Some(pools)) => {
            let params = |class| link_cfg.params_of(class);
            let fabric = plan::build(
                d,
                t.graph,
                t.kind,
                pools,
                &routing.asn_base,
                t.span,
                &params,
            );
            fabric.and_then(|mut f| {
                link_cfg.apply(d, &mut f, &t.inline_spans);
                if let Some((chips, span)) = t.chips {
                    if !topology::check_chips(d, &f, &chips, &span) {
                        return None;
                    }
                    f.chips = chips;
                }
                // Chips are checked against the rates as declared; what
                // runs is divided by the lab's scale.
                let scale = lab.as_ref().and_then(|l| l.rate_scale).unwrap_or(1);
                if scale > 1 {
                    for link in &mut f.links {
                        link.params = link.params.scaled(scale);
                    }
                    f.rate_scale = scale;
                }
                Some(f)
            })
        }
        _ => None,
    };

    // [routing.agents], now that the nodes are known.
    let agents = fabric.as_ref().and_then(|f| routing.resolve_agents(d, f));

    externals::read(
        d,
        section("external"),
        fabric.as_mut(),
        pools.as_ref(),
        &routing,
    );
    let timeline = timeline::read(d, section("timeline"), fabric.as_ref());
    let jobs = jobs::read(d, section("job"), fabric.as_ref());
    let seed = lab.as_ref().map_or(1, |l| l.seed);
    let (mut workloads, declared) =
        workloads::read(d, section("workload"), fabric.as_ref(), &jobs, seed);
    let mgmt = mgmt::read(
        d,
        section("mgmt"),
        pools.as_ref(),
        fabric.as_ref().map(|f| f.nodes.len()),
    );

    let metrics = metrics::read(d, section("metrics"));

    // [p4rt], against the target.
    let target = lab.as_ref().and_then(|l| l.target);
    let captures = taps::read_captures(d, section("capture"), fabric.as_ref(), target);
    let mirrors = taps::read_mirrors(d, section("mirror"), fabric.as_ref(), target);
    let filters = filters::read(d, section("filter"), fabric.as_ref(), target);
    let filter_names: Vec<String> = filters.iter().map(|f| f.name.clone()).collect();
    let checks = check::Context {
        fabric: fabric.as_ref(),
        timeline: &timeline,
        filters: &filter_names,
        bgp: routing.mode == Some(RoutingMode::Bgp),
        workloads: &workloads,
        declared: &declared,
    };
    let expects = expect::read(d, section("expect"), &checks);
    let tasks = tasks::read(d, section("task"), &checks);
    // The workloads tasks grade are run by `lab check`.
    for w in &mut workloads {
        w.graded = (tasks.iter().flat_map(|t| &t.checks))
            .any(|c| c.graded_workload() == Some(w.name.as_str()));
    }
    let faults = tasks::read_faults(d, section("faults"), fabric.as_ref());
    let p4rt = p4rt::read(
        d,
        section("p4rt"),
        target,
        section("lab").map(Spanned::span),
    );

    let lab = lab?;
    lab.rate_scale?;
    Some(Lab {
        name: lab.name?,
        seed: lab.seed,
        target: lab.target?,
        engine: lab.engine?,
        engine_shards: lab.engine_shards?,
        routing: RoutingConfig {
            mode: routing.mode?,
            agent: routing.agent?,
            agents: agents?,
            timers: routing.timers?,
            nexthop_compat: routing.nexthop_compat,
        },
        fabric: fabric?,
        timeline,
        p4rt: p4rt?,
        jobs: jobs.valid,
        workloads,
        expects,
        mgmt: mgmt?,
        metrics: metrics?,
        captures,
        mirrors,
        filters,
        tasks,
        faults,
    })
}
