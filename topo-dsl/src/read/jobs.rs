//! `[[job]]`: hosts in rank order, for workloads to run over. A job lists
//! its hosts (`hosts = [...]`, in rank order) or selects them (`segment`,
//! `count`, `backup`), and says which of each host's addresses its ranks
//! use (`rail`: HPN hosts have one address per rail NIC).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::reader::{Keys, array_items, fields_of, missing, read_table};
use super::timeline::close_node_names;
use crate::diag::Diags;
use crate::experiment::{Job, Rank};
use crate::model::{Fabric, NodeId, Role};

/// `[[job]]`
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: Option<Spanned<String>>,
    hosts: Option<Spanned<Vec<Spanned<String>>>>,
    segment: Option<Spanned<u32>>,
    rail: Option<Spanned<u32>>,
    count: Option<Spanned<u32>>,
    backup: Option<Spanned<bool>>,
}

/// How a job (or a workload without one) names its hosts: the keys
/// `hosts`, `segment`, `rail`, `count` and `backup`, taken out of the table
/// they are written in.
#[derive(Debug, Default)]
pub(crate) struct RawHosts {
    pub hosts: Option<Spanned<Vec<Spanned<String>>>>,
    pub segment: Option<Spanned<u32>>,
    pub rail: Option<Spanned<u32>>,
    pub count: Option<Spanned<u32>>,
    pub backup: Option<Spanned<bool>>,
}

impl RawHosts {
    /// No host key is written.
    pub(crate) fn is_empty(&self) -> bool {
        self.hosts.is_none()
            && self.segment.is_none()
            && self.rail.is_none()
            && self.count.is_none()
            && self.backup.is_none()
    }
}

const WHAT: &str = "`[[job]]`";

/// The jobs of a scenario as read.
#[derive(Debug, Default)]
pub(crate) struct Jobs {
    /// The valid ones.
    pub valid: Vec<Job>,
    /// Every name declared, valid or not (a workload naming an invalid job
    /// is not reported again).
    pub names: BTreeSet<String>,
}

/// Reads `[[job]]` (`v`, if present). Without a fabric (it had errors)
/// nothing is resolved.
pub(crate) fn read(
    d: &mut Diags<'_>,
    v: Option<&Spanned<DeValue<'_>>>,
    fabric: Option<&Fabric>,
) -> Jobs {
    let Some(v) = v else {
        return Jobs::default();
    };
    let Some(items) = array_items(d, v, "`job`", "[[job]]") else {
        return Jobs::default();
    };
    let mut jobs = Vec::new();
    let mut seen = BTreeSet::new();
    for item in items {
        let Some(s) = read_table::<RawJob>(d, item, WHAT, Keys::new(fields_of::<RawJob>())) else {
            continue;
        };
        let Some(name) = &s.raw.name else {
            missing(d, s.span.clone(), "name", WHAT)
                .label("a job needs a name")
                .help("add e.g. `name = \"train\"`: workloads run over it with `job = \"train\"`");
            continue;
        };
        if !seen.insert(name.get_ref().clone()) {
            d.error(
                Some(name.span()),
                format!("a job named `{}` exists already", name.get_ref()),
            )
            .label("duplicate name")
            .help("job names are unique: rename this one");
            continue;
        }
        let Some(fabric) = fabric else { continue };
        let raw = RawHosts {
            hosts: s.raw.hosts,
            segment: s.raw.segment,
            rail: s.raw.rail,
            count: s.raw.count,
            backup: s.raw.backup,
        };
        if let Some(ranks) = ranks(d, &raw, fabric, s.span.clone(), WHAT, 2) {
            jobs.push(Job {
                name: name.get_ref().clone(),
                ranks,
            });
        }
    }
    Jobs {
        valid: jobs,
        names: seen,
    }
}

/// The ranks `raw` names: its `hosts` in their order, or the hosts of the
/// fabric (of one `segment`, without backup hosts unless `backup`), the
/// first `count`; each on its `rail`-th address. `None` when something is
/// wrong (reported).
pub(crate) fn ranks(
    d: &mut Diags<'_>,
    raw: &RawHosts,
    fabric: &Fabric,
    span: Range<usize>,
    what: &str,
    min: usize,
) -> Option<Vec<Rank>> {
    let rail = raw.rail.as_ref().map_or(0, |r| *r.get_ref());
    let mut ok = true;
    let hosts: Vec<NodeId> = match &raw.hosts {
        Some(list) => {
            let selectors = [
                ("segment", raw.segment.as_ref().map(Spanned::span)),
                ("backup", raw.backup.as_ref().map(Spanned::span)),
            ];
            for (key, at) in selectors {
                if let Some(at) = at {
                    d.error(
                        Some(at),
                        format!("`{key}` selects hosts, but `hosts` lists them already"),
                    )
                    .label("conflicts with `hosts`")
                    .help(format!("remove `{key}` or `hosts`"));
                    ok = false;
                }
            }
            let mut ids = Vec::new();
            for h in list.get_ref() {
                match fabric.node_by_name(h.get_ref()) {
                    Some(n) if n.role == Role::Host => {
                        if ids.contains(&n.id) {
                            d.error(
                                Some(h.span()),
                                format!("host `{}` is listed twice", h.get_ref()),
                            )
                            .label("listed before")
                            .help("a host is one rank of a job: list it once");
                            ok = false;
                        }
                        ids.push(n.id);
                    }
                    Some(n) => {
                        d.error(
                            Some(h.span()),
                            format!("`{}` is a switch ({}), not a host", h.get_ref(), n.role),
                        )
                        .label("not a host")
                        .help(format!(
                            "workloads run on hosts; hosts here look like `{}`",
                            fabric.hosts().next().map_or("h0", |n| n.name.as_str())
                        ));
                        ok = false;
                    }
                    None => {
                        d.error(Some(h.span()), format!("no host named `{}`", h.get_ref()))
                            .label("unknown host")
                            .help(close_node_names(h.get_ref(), fabric));
                        ok = false;
                    }
                }
            }
            ids
        }
        None => {
            let segment = raw.segment.as_ref().map(|s| *s.get_ref());
            let backup = raw.backup.as_ref().is_some_and(|b| *b.get_ref());
            let ids: Vec<NodeId> = fabric
                .hosts()
                .filter(|n| segment.is_none_or(|s| n.segment.or(n.pod) == Some(s)))
                .filter(|n| backup || !n.backup)
                .map(|n| n.id)
                .collect();
            if let (Some(s), true) = (&raw.segment, ids.is_empty()) {
                let mut have: Vec<u32> =
                    fabric.hosts().filter_map(|n| n.segment.or(n.pod)).collect();
                have.sort_unstable();
                have.dedup();
                let help = match (have.first(), have.last()) {
                    (Some(a), Some(b)) => format!("segments (pods) here are {a} to {b}"),
                    _ => "this fabric's hosts belong to no segment or pod".to_owned(),
                };
                d.error(
                    Some(s.span()),
                    format!("no hosts in segment {}", s.get_ref()),
                )
                .label("empty selection")
                .help(help);
                ok = false;
            }
            ids
        }
    };
    let hosts = match &raw.count {
        Some(c) if (*c.get_ref() as usize) > hosts.len() => {
            d.error(
                Some(c.span()),
                format!(
                    "`count` asks for {} hosts, the selection has {}",
                    c.get_ref(),
                    hosts.len()
                ),
            )
            .label("too many")
            .help(format!("at most `count = {}`", hosts.len()));
            return None;
        }
        Some(c) => hosts[..*c.get_ref() as usize].to_vec(),
        None => hosts,
    };
    if !ok {
        return None;
    }
    if hosts.len() < min {
        d.error(
            Some(raw.hosts.as_ref().map_or(span, Spanned::span)),
            format!(
                "{what} needs at least {min} host{}, found {}",
                if min == 1 { "" } else { "s" },
                hosts.len()
            ),
        )
        .label("too few hosts")
        .help("list more hosts, or select a larger set");
        return None;
    }
    let mut ranks = Vec::with_capacity(hosts.len());
    for host in hosts {
        let addrs = addresses(fabric, host);
        match addrs.get(rail as usize) {
            Some(&addr) => ranks.push(Rank { host, rail, addr }),
            None => {
                let r = raw.rail.as_ref().expect("rail 0 always exists");
                d.error(
                    Some(r.span()),
                    format!(
                        "host `{}` has no rail {rail}: it has {} address{}",
                        fabric.node(host).name,
                        addrs.len(),
                        if addrs.len() == 1 { "" } else { "es" }
                    ),
                )
                .label("no such rail")
                .help(format!(
                    "rails here are 0 to {}",
                    addrs.len().saturating_sub(1)
                ));
                return None;
            }
        }
    }
    Some(ranks)
}

/// A host's distinct port addresses in port order: one per rail (the two
/// ports of an HPN rail NIC share their address).
pub(crate) fn addresses(fabric: &Fabric, host: NodeId) -> Vec<Ipv4Addr> {
    let mut addrs: Vec<Ipv4Addr> = Vec::new();
    for (_, local, _) in fabric.ports(host) {
        let a = local.addr.addr();
        if !addrs.contains(&a) {
            addrs.push(a);
        }
    }
    addrs
}
