//! `[[capture]]` and `[[mirror]]`: links tapped while the lab runs.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::links::close_link_names;
use super::reader::{Keys, array_items, fields_of, missing, read_table};
use super::timeline::close_node_names;
use crate::diag::Diags;
use crate::model::{Capture, Fabric, Link, Mirror, Target};

/// `[[capture]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapture {
    link: Option<Spanned<String>>,
    direction: Option<Spanned<String>>,
    file: Option<Spanned<String>>,
    snaplen: Option<Spanned<i64>>,
}

/// `[[mirror]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMirror {
    link: Option<Spanned<String>>,
    direction: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    port: Option<Spanned<String>>,
    truncate: Option<Spanned<i64>>,
}

/// What every tap's table names: a link and its directions.
trait TapKeys: serde::de::DeserializeOwned {
    fn link(&self) -> Option<&Spanned<String>>;
    fn direction(&self) -> Option<&Spanned<String>>;
}

impl TapKeys for RawCapture {
    fn link(&self) -> Option<&Spanned<String>> {
        self.link.as_ref()
    }
    fn direction(&self) -> Option<&Spanned<String>> {
        self.direction.as_ref()
    }
}

impl TapKeys for RawMirror {
    fn link(&self) -> Option<&Spanned<String>> {
        self.link.as_ref()
    }
    fn direction(&self) -> Option<&Spanned<String>> {
        self.direction.as_ref()
    }
}

/// A tap's table read up to its link and directions (`None`: invalid,
/// reported, or the fabric is not known).
struct Tapped<'f, T> {
    raw: T,
    span: Range<usize>,
    link: &'f Link,
    directions: [bool; 2],
}

/// Reads every table of `[[NAME]]` (`v`) up to its link and directions.
fn tap_tables<'f, T: TapKeys>(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&'f Fabric>,
    target: Option<Target>,
    name: &str,
) -> Vec<(Tapped<'f, T>, &'f Fabric)> {
    let what = format!("`[[{name}]]`");
    let Some(v) = v else {
        return Vec::new();
    };
    let Some(items) = array_items(d, v, &format!("`{name}`"), &format!("[[{name}]]")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for item in items {
        let Some(s) = read_table::<T>(d, item, &what, Keys::new(fields_of::<T>())) else {
            continue;
        };
        if !on_netns(d, target, s.span.clone(), &what) {
            continue;
        }
        let Some(fabric) = fabric else { continue };
        let Some(link) = link(d, s.raw.link(), fabric, s.span.clone(), &what) else {
            continue;
        };
        let Some(directions) = directions(d, s.raw.direction(), link, fabric) else {
            continue;
        };
        out.push((
            Tapped {
                raw: s.raw,
                span: s.span,
                link,
                directions,
            },
            fabric,
        ));
    }
    out
}

/// The shortest frame a mirror may truncate to: an Ethernet header.
const MIN_TRUNCATE: i64 = 14;

/// The link a tap names; `None` when missing or unknown (reported).
fn link<'f>(
    d: &mut Diags<'_>,
    name: Option<&Spanned<String>>,
    fabric: &'f Fabric,
    span: Range<usize>,
    what: &str,
) -> Option<&'f Link> {
    let Some(name) = name else {
        missing(d, span, "link", what).label("which link?").help(
            "add e.g. `link = \"edge0-0--agg0-0\"` (`turbonet validate --json` lists the links)",
        );
        return None;
    };
    let found = fabric.link_by_name(name.get_ref());
    if found.is_none() {
        d.error(
            Some(name.span()),
            format!("no link named `{}`", name.get_ref()),
        )
        .label("unknown link")
        .help(close_link_names(name.get_ref(), fabric));
    }
    found
}

/// The directions of `link` a tap names (`a-b`, `b-a`, `both`; default
/// both); `None` when invalid (reported).
fn directions(
    d: &mut Diags<'_>,
    direction: Option<&Spanned<String>>,
    link: &Link,
    fabric: &Fabric,
) -> Option<[bool; 2]> {
    let Some(direction) = direction else {
        return Some([true, true]);
    };
    match crate::model::link_directions(direction.get_ref()) {
        Some(d) => Some(d),
        None => {
            let other = direction.get_ref();
            let (a, b) = (
                &fabric.node(link.ends[0].node).name,
                &fabric.node(link.ends[1].node).name,
            );
            d.error(Some(direction.span()), format!("unknown direction `{other}`"))
                .label("unknown direction")
                .help(format!(
                    "valid directions: `a-b` (frames from {a} to {b}, the link's first node to its second), `b-a`, `both`"
                ));
            None
        }
    }
}

/// The captures and mirrors may run on this target only.
fn on_netns(d: &mut Diags<'_>, target: Option<Target>, span: Range<usize>, what: &str) -> bool {
    match target {
        Some(Target::Netns) | None => true,
        Some(t) => {
            d.error(Some(span), format!("{what} needs target `netns`, not `{t}`"))
                .label("not on this target")
                .help("captures and mirrors tap links in the link engine of the netns target; remove the table or use `target = \"netns\"`");
            false
        }
    }
}

/// A positive integer key no larger than `max`; `None` when invalid
/// (reported).
fn bytes(d: &mut Diags<'_>, v: &Spanned<i64>, key: &str, min: i64, max: i64) -> Option<u32> {
    let n = *v.get_ref();
    if (min..=max).contains(&n) {
        return u32::try_from(n).ok();
    }
    d.error(
        Some(v.span()),
        format!("invalid `{key}` {n}: write a number of bytes from {min} to {max}"),
    )
    .label("out of range")
    .help(format!("e.g. `{key} = 128` keeps the headers"));
    None
}

/// Reads `[[capture]]` (`v`, if present) for `fabric` (when valid).
pub(crate) fn read_captures(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
    target: Option<Target>,
) -> Vec<Capture> {
    let mut out = Vec::new();
    let mut files = BTreeSet::new();
    for (t, _) in tap_tables::<RawCapture>(d, v, fabric, target, "capture") {
        let snaplen = match &t.raw.snaplen {
            None => Some(65_535),
            Some(n) => bytes(d, n, "snaplen", MIN_TRUNCATE, 65_535),
        };
        let Some(snaplen) = snaplen else { continue };
        let (file, file_span) = match &t.raw.file {
            Some(f) => (f.get_ref().clone(), f.span()),
            None => (
                format!("{}.pcapng", t.link.name.replace(':', "_")),
                t.span.clone(),
            ),
        };
        if file.trim().is_empty() {
            d.error(Some(file_span), "empty `file` in `[[capture]]`")
                .label("no file name")
                .help("e.g. `file = \"edge.pcapng\"` (relative to where `turbonet up` or `run` writes)");
            continue;
        }
        if !files.insert(file.clone()) {
            d.error(Some(file_span), format!("two captures write `{file}`"))
                .label("written twice")
                .help("give each `[[capture]]` its own `file`");
            continue;
        }
        out.push(Capture {
            link: t.link.id,
            directions: t.directions,
            file,
            snaplen,
        });
    }
    out
}

/// Reads `[[mirror]]` (`v`, if present) for `fabric` (when valid).
pub(crate) fn read_mirrors(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
    target: Option<Target>,
) -> Vec<Mirror> {
    const WHAT: &str = "`[[mirror]]`";
    let mut out: Vec<Mirror> = Vec::new();
    for (t, fabric) in tap_tables::<RawMirror>(d, v, fabric, target, "mirror") {
        let Some(to) = &t.raw.to else {
            missing(d, t.span.clone(), "to", WHAT)
                .label("copies go where?")
                .help("add e.g. `to = \"h0-0-1\"`: the node whose port receives the copies (a monitor runs there)");
            continue;
        };
        let Some(node) = fabric.node_by_name(to.get_ref()) else {
            d.error(Some(to.span()), format!("no node named `{}`", to.get_ref()))
                .label("unknown node")
                .help(close_node_names(to.get_ref(), fabric));
            continue;
        };
        let taken = out.iter().filter(|m| m.to == node.id).count();
        let (port, port_span) = match &t.raw.port {
            Some(p) => (p.get_ref().clone(), p.span()),
            None => (format!("mirror{taken}"), to.span()),
        };
        let clash = fabric
            .ports(node.id)
            .any(|(_, local, _)| local.ifname == port)
            || port == "mgmt0"
            || port == "lo"
            || out.iter().any(|m| m.to == node.id && m.port == port);
        let valid_name = !port.is_empty()
            && port.len() <= 15
            && port
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if !valid_name {
            d.error(Some(port_span), format!("invalid port name `{port}`"))
                .label("not an interface name")
                .help("1 to 15 letters, digits, `-`, `_` or `.`, e.g. `port = \"mirror0\"`");
            continue;
        }
        if clash {
            d.error(
                Some(port_span),
                format!("{} already has an interface `{port}`", node.name),
            )
            .label("name taken")
            .help("give the mirror's port another name, e.g. `port = \"span0\"`");
            continue;
        }
        let truncate = match &t.raw.truncate {
            None => None,
            Some(n) => match bytes(d, n, "truncate", MIN_TRUNCATE, 65_535) {
                Some(n) => Some(n),
                None => continue,
            },
        };
        out.push(Mirror {
            link: t.link.id,
            directions: t.directions,
            to: node.id,
            port,
            truncate,
        });
    }
    out
}
