//! `[[topology.nodes]]` and `[[topology.links]]` of a `custom` topology:
//! named switches and hosts, and the links between them with their inline
//! parameters.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::check_size;
use crate::diag::Diags;
use crate::generate::{self, AsnSlot, GNode, Graph, MAX_LINKS, MAX_NODES};
use crate::model::{LinkParams, Role};
use crate::read::lab::check_name_chars;
use crate::read::params::{ParamSpans, read_params, with_link_params};
use crate::read::reader::{Keys, Keyword, array_items, fields_of, keyword, missing, read_table};
use crate::suggest;

/// `[[topology.nodes]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Option<Spanned<String>>,
    role: Option<Spanned<String>>,
    asn: Option<Spanned<u32>>,
}

with_link_params! {
    /// `[[topology.links]]`
    struct RawCustomLink {
        a: Option<Spanned<String>>,
        b: Option<Spanned<String>>,
    }
}

const ROLES: &[(&str, Role)] = &[("switch", Role::Switch), ("host", Role::Host)];

/// Reads the nodes and links of a custom topology (`extra`: the `nodes`
/// and `links` of `[topology]`, at `span`) into a graph, with where the
/// inline parameters of each link were written. `None` on any error
/// (reported).
pub(super) fn read(
    d: &mut Diags<'_>,
    extra: &BTreeMap<&str, &Spanned<DeValue<'_>>>,
    span: Range<usize>,
) -> Option<(Graph, Vec<ParamSpans>)> {
    let errors_before = d.count();
    let mut graph = Graph::default();
    let mut by_name: HashMap<String, (u32, Range<usize>)> = HashMap::new();
    let Some(nodes) = extra.get("nodes") else {
        d.error(Some(span), "a `custom` topology needs `[[topology.nodes]]`")
            .label("no nodes")
            .help("add nodes with `[[topology.nodes]]`, `name = \"r1\"`, `role = \"switch\"` (or \"host\")");
        return None;
    };
    let node_items = array_items(d, nodes, "`topology.nodes`", "[[topology.nodes]]")?;
    let mut switch_index = 0u64;
    for item in node_items {
        let keys = Keys::new(fields_of::<RawNode>());
        let Some(n) = read_table::<RawNode>(d, item, "`[[topology.nodes]]`", keys) else {
            continue;
        };
        let Some(name) = n.raw.name else {
            missing(d, n.span, "name", "`[[topology.nodes]]`")
                .label("node needs a name")
                .help("add e.g. `name = \"r1\"`");
            continue;
        };
        let role = match &n.raw.role {
            None => Role::Switch,
            Some(r) => {
                let kw = Keyword {
                    what: "role",
                    short: "role",
                    plural: "roles of custom nodes",
                };
                match keyword(d, r.get_ref(), r.span(), ROLES, kw) {
                    Some(role) => role,
                    None => continue,
                }
            }
        };
        let text = name.get_ref();
        if let Err(why) = check_node_name(text) {
            d.error(Some(name.span()), format!("invalid node name `{text}`: {why}"))
                .label("invalid name")
                .help("a node name is 1-40 bytes of a-z, 0-9 and -, starting with a letter or digit, without `--`");
            continue;
        }
        if let Some((_, first)) = by_name.get(text.as_str()) {
            let (line, _) = d.line_col(first.start);
            d.error(Some(name.span()), format!("duplicate node name `{text}`"))
                .label("defined again here")
                .help(format!(
                    "node names must be unique; `{text}` is first defined at line {line}"
                ));
            continue;
        }
        let asn = match (&n.raw.asn, role) {
            (Some(a), Role::Host) => {
                d.error(Some(a.span()), "a host has no ASN")
                    .label("hosts do not run BGP")
                    .help("remove `asn`, or make the node a switch with `role = \"switch\"`");
                continue;
            }
            (Some(a), _) => AsnSlot::Explicit(*a.get_ref()),
            (None, Role::Host) => AsnSlot::None,
            (None, _) => {
                switch_index += 1;
                AsnSlot::Offset(1000 + switch_index - 1)
            }
        };
        by_name.insert(text.clone(), (graph.nodes.len() as u32, name.span()));
        graph.push_node(GNode {
            name: text.clone(),
            role,
            pod: None,
            segment: None,
            rail: None,
            plane: None,
            backup: false,
            asn,
        });
    }
    let names: Vec<&str> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut links = Vec::new();
    if let Some(ls) = extra.get("links") {
        for item in array_items(d, ls, "`topology.links`", "[[topology.links]]").unwrap_or_default()
        {
            let keys = Keys::new(fields_of::<RawCustomLink>()).extra(&["loss"]);
            let Some(mut l) = read_table::<RawCustomLink>(d, item, "`[[topology.links]]`", keys)
            else {
                continue;
            };
            let (params, spans) =
                read_params(d, &l.raw.take_params(), l.extra.get("loss").copied());
            let end = |d: &mut Diags<'_>, v: &Option<Spanned<String>>, key: &str| -> Option<u32> {
                let Some(v) = v else {
                    missing(d, l.span.clone(), key, "`[[topology.links]]`")
                        .label("link needs both ends")
                        .help("a link is `{ a = \"r1\", b = \"r2\" }` with two node names");
                    return None;
                };
                let name = v.get_ref();
                match by_name.get(name.as_str()) {
                    Some((id, _)) => Some(*id),
                    None => {
                        let declared = if names.is_empty() {
                            "no nodes are declared".to_owned()
                        } else if names.len() <= 8 {
                            format!("declared nodes: {}", names.join(", "))
                        } else {
                            format!(
                                "declared nodes: {}, ... ({} in all)",
                                names[..8].join(", "),
                                names.len()
                            )
                        };
                        let help = match suggest::best_guess(name, names.iter().copied()) {
                            Some(g) => format!("did you mean `{g}`? {declared}"),
                            None => {
                                format!("{declared}; nodes are declared with `[[topology.nodes]]`")
                            }
                        };
                        d.error(Some(v.span()), format!("unknown node `{name}` in link"))
                            .label("no such node")
                            .help(help);
                        None
                    }
                }
            };
            let a = end(d, &l.raw.a, "a");
            let b = end(d, &l.raw.b, "b");
            let (Some(a), Some(b)) = (a, b) else { continue };
            let (Some(a_span), Some(b_span)) = (l.raw.a.as_ref(), l.raw.b.as_ref()) else {
                continue;
            };
            if a == b {
                d.error(Some(b_span.span()), "a link cannot join a node to itself")
                    .label("same node as `a`")
                    .help("use two different node names");
                continue;
            }
            let (ra, rb) = (graph.nodes[a as usize].role, graph.nodes[b as usize].role);
            if ra == Role::Host && rb == Role::Host {
                d.error(
                    Some(a_span.span().start..b_span.span().end),
                    "a link cannot join two hosts",
                )
                .label("both ends are hosts")
                .help("hosts attach to switches; add a switch between them");
                continue;
            }
            let (lo, hi) = if rb == Role::Host { (b, a) } else { (a, b) };
            links.push((lo, hi, params, spans));
        }
    }
    if links.len() as u64 > MAX_LINKS || graph.nodes.len() as u64 > MAX_NODES {
        check_size(d, graph.nodes.len() as u64, links.len() as u64, &span);
    }
    if d.count() > errors_before {
        return None;
    }
    // One host subnet per switch that has hosts; a host attached to several
    // switches gets one address in each of their subnets.
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    let mut seen: HashSet<(u32, u32)> = HashSet::new();
    let mut inline_spans = Vec::with_capacity(links.len());
    for (lo, hi, params, spans) in links {
        inline_spans.push(spans);
        if graph.nodes[lo as usize].role == Role::Host && seen.insert((hi, lo)) {
            groups.entry(hi).or_default().push(lo);
        }
        let inline = (params != LinkParams::default()).then_some(params);
        graph.push_link(lo, hi, inline);
    }
    graph.groups = groups
        .into_iter()
        .map(|(s, hosts)| generate::HostGroup {
            switches: vec![s],
            hosts,
        })
        .collect();
    Some((graph, inline_spans))
}

/// A node name: also part of the names of its links (`a--b`).
fn check_node_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("it is empty".into());
    }
    if name.len() > 40 {
        return Err(format!("it is {} bytes long, the limit is 40", name.len()));
    }
    check_name_chars(name)?;
    if name.contains("--") {
        return Err("`--` separates the ends of link names".into());
    }
    Ok(())
}
