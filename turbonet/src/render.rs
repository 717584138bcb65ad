//! Tables for people. (`--json` prints the same data for scripts.)

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};
use turbonet_topo::Lab;
use turbonet_topo::summary::Summary;

use turbonet_lab::state::LabState;

pub(crate) use turbonet_bench::report::count;

/// A table from a header and rows; columns whose header is in `right` are
/// right-aligned (numbers).
pub(crate) fn table<I, R>(header: &[&str], rows: I, right: &[usize]) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    build(header, rows, right).to_string()
}

/// A table of sentences, as [`table`] but no wider than the terminal: the
/// `prose` columns share what the others leave and wrap between words.
pub(crate) fn prose_table<I, R>(
    header: &[&str],
    rows: I,
    right: &[usize],
    prose: &[usize],
) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    fitted(terminal_width(), header, rows, right, prose)
}

/// [`prose_table`] no wider than `total` columns.
fn fitted<I, R>(total: usize, header: &[&str], rows: I, right: &[usize], prose: &[usize]) -> String
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut rows: Vec<Vec<String>> = rows.into_iter().map(|r| r.into_iter().collect()).collect();
    let width = |c: usize| {
        rows.iter()
            .filter_map(|r| r.get(c))
            .flat_map(|cell| cell.lines())
            .chain([header[c]])
            .map(textwrap::core::display_width)
            .max()
            .unwrap_or(0)
    };
    let natural: Vec<usize> = (0..header.len()).map(width).collect();
    // Each column has a space either side; the borders one more than the columns.
    let room = total.saturating_sub(3 * header.len() + 1);
    let fixed: usize = (0..header.len())
        .filter(|c| !prose.contains(c))
        .map(|c| natural[c])
        .sum();
    let widths = share(
        room.saturating_sub(fixed),
        &prose.iter().map(|&c| natural[c]).collect::<Vec<_>>(),
    );
    for (&c, &w) in prose.iter().zip(&widths) {
        if w >= natural[c] {
            continue;
        }
        for cell in rows.iter_mut().filter_map(|r| r.get_mut(c)) {
            *cell = cell
                .lines()
                .flat_map(|line| {
                    textwrap::wrap(
                        line,
                        // Between words only: a link's name (`a--b`) stays whole.
                        textwrap::Options::new(w)
                            .word_separator(textwrap::WordSeparator::AsciiSpace)
                            .subsequent_indent("  "),
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
    }
    build(header, rows, right).to_string()
}

/// `room` shared between columns that want `wants`: each gets what it
/// wants if it fits, the widest are cut to an even share otherwise
/// (never below 12).
fn share(room: usize, wants: &[usize]) -> Vec<usize> {
    let mut widths = wants.to_vec();
    let mut left = room;
    let mut open: Vec<usize> = (0..wants.len()).collect();
    // Columns narrower than an even share keep their width; the rest split
    // what is left.
    loop {
        let even = left / open.len().max(1);
        let (fit, wide): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| wants[i] <= even);
        if fit.is_empty() || wide.is_empty() {
            for &i in &wide {
                widths[i] = even.max(12);
            }
            return widths;
        }
        left -= fit.iter().map(|&i| wants[i]).sum::<usize>();
        open = wide;
    }
}

/// How wide printed tables may be: `$COLUMNS`, else the terminal's width,
/// else 120 (a log or a pipe).
fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| terminal_size::terminal_size().map(|(w, _)| usize::from(w.0)))
        .unwrap_or(120)
        .max(40)
}

fn build<I, R>(header: &[&str], rows: I, right: &[usize]) -> tabled::Table
where
    I: IntoIterator<Item = R>,
    R: IntoIterator<Item = String>,
{
    let mut builder = Builder::default();
    builder.push_record(header.iter().map(std::string::ToString::to_string));
    for row in rows {
        builder.push_record(row);
    }
    let mut table = builder.build();
    table.with(Style::rounded());
    for &col in right {
        table.modify(Columns::one(col), Alignment::right());
    }
    table
}

/// `static`, `controller`, or `bgp (builtin; 2 frr, 1 bird)`.
pub(crate) fn routing_name(lab: &Lab) -> String {
    use turbonet_topo::{Agent, RoutingMode};
    if lab.routing.mode != RoutingMode::Bgp {
        return lab.routing.mode.to_string();
    }
    let mut counts = std::collections::HashMap::new();
    for node in lab.fabric.switches() {
        *counts
            .entry(lab.routing.agent_of(node.id))
            .or_insert(0usize) += 1;
    }
    let default = lab.routing.agent;
    let others: Vec<String> = Agent::ALL
        .iter()
        .filter(|&&a| a != default)
        .filter_map(|a| counts.get(a).map(|n| format!("{n} {a}")))
        .collect();
    if others.is_empty() {
        format!("bgp ({default})")
    } else {
        format!("bgp ({default}; {})", others.join(", "))
    }
}

/// The `validate` summary.
pub(crate) fn summary(lab: &Lab, summary: &Summary) -> String {
    let mut out = format!(
        "lab {}: {} fabric, target {}, routing {}, seed {}\n",
        lab.name,
        kind_name(lab),
        lab.target,
        routing_name(lab),
        lab.seed
    );
    let asn_of = |role| {
        summary
            .asns
            .iter()
            .find(|a| a.role == role)
            .map(|a| {
                if a.first == a.last {
                    a.first.to_string()
                } else {
                    format!("{}-{} ({} distinct)", a.first, a.last, a.distinct)
                }
            })
            .unwrap_or_default()
    };
    out.push_str(&table(
        &["role", "nodes", "asn"],
        summary
            .nodes_by_role
            .iter()
            .map(|r| vec![r.role.to_string(), count(r.count), asn_of(r.role)])
            .chain([vec!["total".into(), count(summary.nodes), String::new()]]),
        &[1],
    ));
    out.push('\n');
    if summary.rate_scale > 1 {
        out.push_str(&format!(
            "rates, queues and ECN thresholds run {}x slower than declared (rate_scale): the \
             rates below are in force\n",
            summary.rate_scale
        ));
    }
    out.push_str(&table(
        &["link class", "links", "rate"],
        summary
            .links_by_class
            .iter()
            .map(|c| {
                vec![
                    c.class.clone(),
                    count(c.count),
                    c.rate.map_or_else(|| "-".into(), |r| r.to_string()),
                ]
            })
            .chain([vec!["total".into(), count(summary.links), String::new()]]),
        &[1],
    ));
    out.push('\n');
    let mut ranges = Vec::new();
    if let Some(r) = &summary.loopbacks {
        ranges.push(vec![
            "loopbacks /32".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if let Some(r) = &summary.fabric_addrs {
        ranges.push(vec![
            "fabric links /31".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if let Some(r) = &summary.host_subnets {
        ranges.push(vec![
            "host subnets".into(),
            format!("{} - {}", r.first, r.last),
            count(r.count),
        ]);
    }
    if !ranges.is_empty() {
        out.push_str(&table(&["addresses", "range", "count"], ranges, &[2]));
        out.push('\n');
    }
    if !summary.chips.is_empty() {
        use turbonet_topo::units::Rate;
        out.push_str(&table(
            &["tier", "switches", "chip", "ports used", "bandwidth used"],
            summary.chips.iter().map(|c| {
                vec![
                    c.role.to_string(),
                    count(c.switches),
                    c.chip.to_string(),
                    format!("{} of {}", c.ports, c.chip.ports),
                    format!(
                        "{} of {}",
                        Rate::from_bits_per_sec(c.bandwidth),
                        Rate::from_bits_per_sec(c.chip.capacity())
                    ),
                ]
            }),
            &[1, 3, 4],
        ));
        out.push('\n');
    }
    if summary.pods.len() > 1 {
        out.push_str(&table(
            &["pod", "switches", "hosts", "host subnets", "asn"],
            summary.pods.iter().map(|p| {
                vec![
                    p.pod.to_string(),
                    count(p.switches),
                    count(p.hosts),
                    p.host_subnets.as_ref().map_or_else(
                        || "-".into(),
                        |r| format!("{} - {} ({})", r.first, r.last, r.count),
                    ),
                    p.asns.map_or_else(
                        || "-".into(),
                        |[lo, hi]| {
                            if lo == hi {
                                lo.to_string()
                            } else {
                                format!("{lo}-{hi}")
                            }
                        },
                    ),
                ]
            }),
            &[0, 1, 2],
        ));
        out.push('\n');
    }
    if !summary.oversubscription.is_empty() {
        out.push_str(&table(
            &[
                "tier",
                "switches",
                "down / switch",
                "up / switch",
                "oversubscription",
            ],
            summary.oversubscription.iter().map(|o| {
                let (down, up) = match o.basis {
                    turbonet_topo::summary::CapacityBasis::Rate => (
                        turbonet_topo::units::Rate::from_bits_per_sec(
                            o.down / o.switches.max(1) as u64,
                        )
                        .to_string(),
                        turbonet_topo::units::Rate::from_bits_per_sec(
                            o.up / o.switches.max(1) as u64,
                        )
                        .to_string(),
                    ),
                    turbonet_topo::summary::CapacityBasis::Ports => (
                        ports(o.down_ports / o.switches.max(1)),
                        ports(o.up_ports / o.switches.max(1)),
                    ),
                };
                vec![
                    o.role.to_string(),
                    count(o.switches),
                    down,
                    up,
                    o.ratio.map_or_else(|| "-".into(), |r| format!("{r:.3}:1")),
                ]
            }),
            &[1, 2, 3, 4],
        ));
        out.push('\n');
    }
    out
}

/// "1 port", "15 ports".
fn ports(n: usize) -> String {
    match n {
        1 => "1 port".to_owned(),
        n => format!("{n} ports"),
    }
}

fn kind_name(lab: &Lab) -> &'static str {
    match lab.fabric.kind {
        turbonet_topo::TopologyKind::FatTree { .. } => "fat-tree",
        turbonet_topo::TopologyKind::LeafSpine { .. } => "leaf-spine",
        turbonet_topo::TopologyKind::Hpn { .. } => "hpn",
        turbonet_topo::TopologyKind::Clos(_) => "clos",
        turbonet_topo::TopologyKind::Custom => "custom",
    }
}

/// The table `up` prints when the fabric is ready.
pub(crate) fn up_summary(lab: &Lab, state: &LabState) -> String {
    let mut out = format!("lab {} is up and routed\n", lab.name);
    out.push_str(&table(
        &["phase", "seconds", "result"],
        state.timings.iter().map(|t| {
            vec![
                t.phase.clone(),
                format!("{:.2}", t.seconds),
                t.detail.clone(),
            ]
        }),
        &[1],
    ));
    let host = lab.fabric.hosts().next().map(|h| h.name.clone());
    out.push_str("\nnext:\n");
    out.push_str("  turbonet status | show nodes | show links | show routes NODE\n");
    if lab.routing.mode == turbonet_topo::RoutingMode::Bgp {
        out.push_str("  turbonet show bgp [SWITCH]   # sessions, routes, convergence\n");
    }
    if let Some(host) = host {
        out.push_str(&format!("  turbonet exec {host} -- ip route\n"));
    }
    out.push_str("  turbonet watch          # every link's rates, live\n");
    out.push_str(&format!(
        "  turbonet check          # every host pings every host\n  turbonet down {}\n",
        lab.name
    ));
    if let Some(m) = lab.metrics {
        out.push_str(&format!(
            "metrics: http://{}:{}/metrics{}\n",
            m.address,
            m.port,
            if lab.mgmt.is_some() {
                format!(" (from the nodes: http://mgmt:{}/metrics)", m.port)
            } else {
                String::new()
            }
        ));
    }
    out
}

/// A benchmark's report: its lines and tables, in order.
pub(crate) fn report(report: &turbonet_bench::report::Report) -> String {
    use turbonet_bench::report::Item;
    let mut out = String::new();
    for item in &report.items {
        match item {
            Item::Text(text) => out.push_str(text),
            Item::Table(t) => out.push_str(&table(
                &t.header.iter().map(String::as_str).collect::<Vec<_>>(),
                t.rows.iter().cloned(),
                &t.right,
            )),
        }
        out.push('\n');
    }
    out
}

/// The human report: switch summaries, table estimates, cables, host ports,
/// and with `ports` every virtual port.
pub(crate) fn plan(
    lab: &Lab,
    target: &str,
    config: &turbonet_topo::mapper::MapConfig,
    m: &turbonet_topo::mapper::Mapping,
    ports: bool,
) -> String {
    let f = &lab.fabric;
    let nsw = config.switches.len();
    let mut out = format!(
        "lab {}: {} virtual switches, {} hosts, {} virtual links on {} physical switch{} \
         (target {target}, {} queues per port, links without rate count as {})\n",
        lab.name,
        count(f.switches().count()),
        count(f.hosts().count()),
        count(f.links.len()),
        nsw,
        if nsw == 1 { "" } else { "es" },
        m.queues,
        m.default_rate,
    );
    out.push_str(&table(
        &[
            "switch",
            "virtual switches",
            "ports used",
            "free",
            "loopback pairs",
            "inter-switch",
            "host",
            "queues used",
            "busiest port",
            "total load",
        ],
        m.switches.iter().zip(&config.switches).map(|(s, spec)| {
            vec![
                spec.to_string(),
                count(s.virtual_switches as usize),
                format!("{}/{}", s.ports_used, s.ports),
                s.ports_free.to_string(),
                s.loopback_pairs.to_string(),
                s.inter_switch_ports.to_string(),
                s.host_ports.to_string(),
                count(s.queues_used as usize),
                format!("{} in {} queues", s.max_port_load, s.max_port_queues),
                s.total_load.to_string(),
            ]
        }),
        &[1, 2, 3, 4, 5, 6, 7, 8, 9],
    ));
    out.push('\n');
    out.push_str(&table(
        &[
            "switch",
            "port-mapper entries",
            "LPM entries (est.)",
            "ECMP groups (est.)",
        ],
        m.switches.iter().map(|s| {
            vec![
                s.name.clone(),
                count(s.tables.port_mapper as usize),
                count(s.tables.lpm as usize),
                count(s.tables.ecmp_groups as usize),
            ]
        }),
        &[1, 2, 3],
    ));
    out.push('\n');
    if m.inter_switch_links > 0 {
        out.push_str(&format!(
            "{} virtual links cross physical switches\n",
            count(m.inter_switch_links as usize)
        ));
    }
    if !m.cables.is_empty() {
        if target == "soft" {
            out.push_str(&format!(
                "\ncables ({}, emulated inside the soft switch):\n",
                m.cables.len()
            ));
        } else {
            out.push_str(&format!("\ncables to connect ({}):\n", m.cables.len()));
        }
        out.push_str(&table(
            &["#", "kind", "from", "to", "virtual links", "load"],
            m.cables.iter().enumerate().map(|(i, c)| {
                vec![
                    (i + 1).to_string(),
                    c.kind.to_string(),
                    c.a.to_string(),
                    c.b.to_string(),
                    c.virtual_links.to_string(),
                    c.load.to_string(),
                ]
            }),
            &[0, 4],
        ));
        out.push('\n');
    }
    if !m.host_ports.is_empty() {
        out.push_str(&format!(
            "\nhost-facing ports ({}): cable the hosts' NICs here, one tag per host link\n",
            m.host_ports.len()
        ));
        out.push_str(&table(
            &["port", "host links", "load", "hosts"],
            m.host_ports.iter().map(|h| {
                let hosts = match h.hosts.as_slice() {
                    [] => String::new(),
                    [one] => one.clone(),
                    [first, .., last] => format!("{first} .. {last}"),
                };
                vec![
                    h.port.to_string(),
                    h.host_links.to_string(),
                    h.load.to_string(),
                    hosts,
                ]
            }),
            &[1],
        ));
        out.push('\n');
    }
    if ports {
        out.push_str(&format!("\nvirtual ports ({}):\n", count(m.ports.len())));
        out.push_str(&table(
            &[
                "virtual switch",
                "virtual port",
                "virtual link",
                "switch",
                "port",
                "tag",
                "queue",
                "shaping rate",
            ],
            m.ports.iter().map(|p| {
                vec![
                    p.virtual_switch.clone(),
                    p.virtual_port.clone(),
                    p.link.clone(),
                    p.switch.clone(),
                    p.port.to_string(),
                    p.tag.to_string(),
                    p.queue.to_string(),
                    if p.default_rate {
                        format!("{} (default)", p.rate)
                    } else {
                        p.rate.to_string()
                    },
                ]
            }),
            &[4, 5, 6],
        ));
        out.push('\n');
    } else {
        out.push_str(&format!(
            "\n{} virtual ports mapped; pass --ports to list each one's physical port, tag, \
             queue and shaping rate (or --json)\n",
            count(m.ports.len())
        ));
    }
    out
}

/// `lab list`: every graded lab.
pub(crate) fn course_labs(labs: &[turbonet_course::CourseLab]) -> String {
    if labs.is_empty() {
        return "no labs".to_owned();
    }
    let rows = labs.iter().map(|l| {
        [
            l.name.clone(),
            l.title.clone(),
            l.tasks.len().to_string(),
            l.points().to_string(),
        ]
    });
    let mut out = table(&["lab", "title", "tasks", "points"], rows, &[2, 3]);
    out.push_str("\nstart one: turbonet lab start NAME");
    out
}

/// What `lab start` and `lab reset` print once the fabric is up.
pub(crate) fn course_started(course: &turbonet_course::CourseLab, lab: &Lab) -> String {
    format!(
        "lab {} is up: {} ({} task{}, {} point{})\n\
         the tasks: {}\n\
         next:\n  turbonet lab tasks              # what to do\n  \
         turbonet exec NODE -- CMD        # work on a node (e.g. `ip route`)\n  \
         turbonet lab check [TASK]        # your score, and what is still wrong\n  \
         turbonet lab hint TASK\n  turbonet lab reset | stop",
        lab.name,
        course.title,
        course.tasks.len(),
        if course.tasks.len() == 1 { "" } else { "s" },
        course.points(),
        if course.points() == 1 { "" } else { "s" },
        course.dir.join("README.md").display(),
    )
}

/// `lab tasks`: each task of the running `lab`, its points and what it
/// checks.
pub(crate) fn course_tasks(course: &turbonet_course::CourseLab, lab: &Lab) -> String {
    let name = |n: turbonet_topo::NodeId| lab.fabric.node(n).name.as_str();
    let rows = lab.tasks.iter().map(|t| {
        [
            t.name.clone(),
            t.points.to_string(),
            t.title.clone(),
            t.checks
                .iter()
                .map(|c| c.describe(name))
                .collect::<Vec<_>>()
                .join("\n"),
        ]
    });
    format!(
        "{}: {}\n{}",
        course.name,
        course.title,
        prose_table(&["task", "points", "asks", "checks"], rows, &[1], &[2, 3])
    )
}

/// `lab check`: a score per task, the total, and what is still wrong.
pub(crate) fn grade(grade: &turbonet_course::Grade) -> String {
    let rows = grade.tasks.iter().map(|t| {
        let problems: Vec<&str> = t
            .checks
            .iter()
            .filter_map(|c| c.problem.as_deref())
            .collect();
        [
            t.name.clone(),
            format!("{}/{}", t.earned, t.points),
            if problems.is_empty() {
                "done".to_owned()
            } else {
                problems.join("\n")
            },
        ]
    });
    let mut out = prose_table(&["task", "score", "what is still wrong"], rows, &[1], &[2]);
    out.push_str(&format!(
        "\nlab {}: {} of {} points{}",
        grade.lab,
        grade.earned,
        grade.points,
        if grade.earned == grade.points {
            " — every task done"
        } else {
            ""
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_that_fit_keep_their_width_and_the_widest_share_the_rest() {
        assert_eq!(share(100, &[30, 40]), vec![30, 40]);
        // 20 fits an even share of 60; the other gets what is left.
        assert_eq!(share(60, &[20, 90]), vec![20, 40]);
        assert_eq!(share(60, &[80, 90]), vec![30, 30]);
        // Never narrower than 12, however small the terminal.
        assert_eq!(share(10, &[50]), vec![12]);
    }

    #[test]
    fn prose_wraps_between_words_and_indents_what_it_carries_over() {
        let out = fitted(
            40,
            &["task", "what is still wrong"],
            [[
                "mtu".to_owned(),
                "leaf2--spine1: leaf2's port spine1 has MTU 1500, not 9000\nsecond".to_owned(),
            ]],
            &[],
            &[1],
        );
        assert!(out.lines().all(|l| l.chars().count() <= 40), "{out}");
        assert!(out.contains("│ leaf2--spine1: leaf2's port"), "{out}");
        assert!(out.contains("│   spine1 has MTU 1500, not  │"), "{out}");
        assert!(out.contains("│ second"), "{out}");
    }
}
