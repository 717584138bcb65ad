//! `[topology]`: the kind of fabric and its parameters, from which the
//! graph of nodes and links is generated. A `custom` topology lists its
//! nodes and links instead ([`custom`]).

mod custom;

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;
use toml::de::DeValue;

use super::params::ParamSpans;
use super::reader::{Keys, Keyword, keyword, missing, read_table};
use crate::chip::{self, Chip};
use crate::diag::Diags;
use crate::generate::{self, Graph, MAX_LINKS, MAX_NODES};
use crate::model::{ClosParams, CoreLayer, Fabric, HpnParams, Role, TopologyKind};

/// The kinds of topology, as `kind` names them. Known before the
/// parameters are read, so that the other keys of `[topology]` and the
/// classes of `[links.<class>]` are checked against the kind even when a
/// parameter is wrong; [`TopologyKind`] holds the parameters once they are
/// all valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `fat-tree`: [`TopologyKind::FatTree`].
    FatTree,
    /// `leaf-spine`: [`TopologyKind::LeafSpine`].
    LeafSpine,
    /// `hpn`: [`TopologyKind::Hpn`].
    Hpn,
    /// `clos`: [`TopologyKind::Clos`].
    Clos,
    /// `custom`: [`TopologyKind::Custom`].
    Custom,
}

impl Kind {
    /// Every kind, in the order the help lists them.
    pub(crate) const ALL: [Kind; 5] = [
        Kind::FatTree,
        Kind::LeafSpine,
        Kind::Clos,
        Kind::Hpn,
        Kind::Custom,
    ];

    /// The name of the kind in scenario files.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::FatTree => "fat-tree",
            Kind::LeafSpine => "leaf-spine",
            Kind::Hpn => "hpn",
            Kind::Clos => "clos",
            Kind::Custom => "custom",
        }
    }

    /// The keys of `[topology]` for this kind, `kind` first.
    fn keys(self) -> &'static [&'static str] {
        match self {
            Kind::FatTree => &["kind", "k", "switch"],
            Kind::LeafSpine => &[
                "kind",
                "spines",
                "leaves",
                "hosts_per_leaf",
                "uplinks",
                "switch",
            ],
            Kind::Hpn => &[
                "kind",
                "pods",
                "segments",
                "hosts_per_segment",
                "backup_hosts",
                "rails",
                "planes",
                "aggs_per_plane",
                "cores",
                "core_uplinks",
                "core",
                "switch",
            ],
            Kind::Clos => &[
                "kind",
                "stages",
                "radix",
                "oversubscription",
                "pods",
                "switch",
            ],
            Kind::Custom => &["kind", "nodes", "links", "switch"],
        }
    }

    /// The roles of its switches, bottom up (the keys of a `switch` table).
    fn switch_roles(self) -> &'static [Role] {
        match self {
            Kind::FatTree => &[Role::Edge, Role::Agg, Role::Core],
            Kind::LeafSpine => &[Role::Leaf, Role::Spine],
            Kind::Hpn => &[Role::Tor, Role::Agg, Role::Core],
            Kind::Clos => &[Role::Leaf, Role::Spine, Role::Core],
            Kind::Custom => &[Role::Switch],
        }
    }

    /// The classes of the links of its fabrics, as `[links.<class>]` names
    /// them.
    pub(crate) fn classes(self) -> &'static [&'static str] {
        match self {
            Kind::FatTree => &["host-edge", "edge-agg", "agg-core"],
            Kind::LeafSpine => &["host-leaf", "leaf-spine"],
            Kind::Hpn => &["host-tor", "tor-agg", "agg-core"],
            Kind::Clos => &["host-leaf", "leaf-spine", "spine-core"],
            Kind::Custom => &["host-switch", "switch-switch"],
        }
    }
}

/// "fat-tree, leaf-spine, hpn, custom", for the help.
fn kind_list() -> String {
    Kind::ALL.map(Kind::name).join(", ")
}

/// `[topology]` (all kinds; `nodes` and `links` are read separately).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    kind: Option<Spanned<String>>,
    k: Option<Spanned<u32>>,
    spines: Option<Spanned<u32>>,
    leaves: Option<Spanned<u32>>,
    hosts_per_leaf: Option<Spanned<u32>>,
    uplinks: Option<Spanned<u32>>,
    pods: Option<Spanned<u32>>,
    segments: Option<Spanned<u32>>,
    hosts_per_segment: Option<Spanned<u32>>,
    backup_hosts: Option<Spanned<u32>>,
    rails: Option<Spanned<u32>>,
    planes: Option<Spanned<u32>>,
    aggs_per_plane: Option<Spanned<u32>>,
    cores: Option<Spanned<u32>>,
    core_uplinks: Option<Spanned<u32>>,
    core: Option<Spanned<String>>,
    switch: Option<Spanned<toml::Value>>,
    stages: Option<Spanned<u32>>,
    radix: Option<Spanned<toml::Value>>,
    oversubscription: Option<Spanned<toml::Value>>,
}

/// `[topology]` as read: the kind as soon as it is known, even when the
/// parameters are wrong, so that `[links.<class>]` can still be checked.
#[derive(Debug, Default)]
pub(crate) struct TopologyRead {
    /// `None` when the kind is missing or unknown (reported).
    pub kind: Option<Kind>,
    /// `None` when the section is wrong (reported).
    pub topo: Option<Topo>,
}

/// A valid topology and its generated graph.
#[derive(Debug)]
pub(crate) struct Topo {
    pub kind: TopologyKind,
    pub graph: Graph,
    /// Where the kind is written (else the table): errors about the whole
    /// topology point there.
    pub span: Range<usize>,
    /// Where the inline parameters of each custom link were written,
    /// indexed like `graph.links` (empty for generated topologies).
    pub inline_spans: Vec<ParamSpans>,
    /// The chips of `switch`, by role, and where it is written.
    pub chips: Option<(BTreeMap<Role, Chip>, Range<usize>)>,
}

/// Reads `[topology]` (`v`, if present; every scenario needs one) and
/// generates the graph.
pub(crate) fn read(d: &mut Diags<'_>, v: Option<&Spanned<DeValue<'_>>>) -> TopologyRead {
    let Some(v) = v else {
        d.error(Some(0..0), "missing `[topology]` section")
            .label("expected `[topology]`")
            .help(format!(
                "add `[topology]` with `kind` = one of {}",
                kind_list()
            ));
        return TopologyRead::default();
    };
    let table_span = v.span();
    let Some(table) = v.get_ref().as_table() else {
        d.error(Some(table_span), "`[topology]` must be a table")
            .label("expected a table")
            .help(format!(
                "write `[topology]` with `kind` = one of {}",
                kind_list()
            ));
        return TopologyRead::default();
    };
    let kind = match table.get("kind") {
        None => {
            missing(d, table_span, "kind", "`[topology]`")
                .label("needs a kind")
                .help(format!("valid kinds: {}", kind_list()));
            None
        }
        Some(k) => match k.get_ref().as_str() {
            Some(s) => {
                let kinds = Kind::ALL.map(|k| (k.name(), k));
                let kw = Keyword {
                    what: "topology kind",
                    short: "kind",
                    plural: "kinds",
                };
                keyword(d, s, k.span(), &kinds, kw)
            }
            // Not a string: reported by the typed read of the parameters.
            None => None,
        },
    };
    TopologyRead {
        kind,
        topo: generate(d, v, kind),
    }
}

/// Reads the parameters of `kind` (`None` when it is missing or unknown:
/// the keys are then checked against those of every kind) and generates
/// the graph.
fn generate(d: &mut Diags<'_>, v: &Spanned<DeValue<'_>>, kind: Option<Kind>) -> Option<Topo> {
    let table_span = v.span();
    let all: Vec<&str> = Kind::ALL.iter().flat_map(|k| k.keys()).copied().collect();
    let (allowed, reason): (&[&str], String) = match kind {
        Some(k) => (
            k.keys(),
            format!("is not a parameter of `{}` topologies", k.name()),
        ),
        None => (&all, String::new()),
    };
    let keys = Keys::new(allowed)
        .extra(&["nodes", "links"])
        .foreign(&all, &reason);
    let s = read_table::<RawTopology>(d, v, "`[topology]`", keys)?;
    let kind = kind?;
    let name = kind.name();
    let t = &s.raw;
    let span = t
        .kind
        .as_ref()
        .map_or(table_span.clone(), toml::Spanned::span);
    let chips = read_chips(d, t.switch.as_ref(), kind);
    let mut ok = chips.is_some() || t.switch.is_none();
    let mut get = |d: &mut Diags<'_>,
                   v: &Option<Spanned<u32>>,
                   key: &str,
                   default: Option<u32>,
                   min: u32,
                   max: u32|
     -> u32 {
        match v {
            None => match default {
                Some(x) => x,
                None => {
                    ok = false;
                    d.error(
                        Some(span.clone()),
                        format!("missing `{key}` for a `{name}` topology"),
                    )
                    .label(format!("`{name}` needs `{key}`"))
                    .help(format!("`{name}` takes: {}", allowed[1..].join(", ")));
                    0
                }
            },
            Some(x) => {
                let val = *x.get_ref();
                if val < min || val > max {
                    ok = false;
                    d.error(
                        Some(x.span()),
                        format!("`{key}` must be from {min} to {max}, found {val}"),
                    )
                    .label("out of range");
                }
                val
            }
        }
    };
    let mut inline_spans = Vec::new();
    let (tkind, graph) = match kind {
        Kind::FatTree => {
            let k = get(d, &t.k, "k", None, 2, 64);
            if ok && k % 2 != 0 {
                ok = false;
                let k_span = t.k.as_ref().map(toml::Spanned::span);
                d.error(k_span, format!("`k` must be even, found {k}"))
                    .label("odd k")
                    .help(format!(
                        "a k-ary fat-tree splits each switch's k ports half down, half up; try k = {} or k = {}",
                        k - 1,
                        k + 1
                    ));
            }
            if !ok {
                return None;
            }
            (TopologyKind::FatTree { k }, generate::fat_tree(k))
        }
        Kind::LeafSpine => {
            let spines = get(d, &t.spines, "spines", None, 1, u32::MAX);
            let leaves = get(d, &t.leaves, "leaves", None, 1, u32::MAX);
            let hosts_per_leaf = get(d, &t.hosts_per_leaf, "hosts_per_leaf", None, 0, u32::MAX);
            let uplinks = get(d, &t.uplinks, "uplinks", Some(1), 1, u32::MAX);
            if !ok {
                return None;
            }
            let (n, l) = generate::leaf_spine_size(
                spines.into(),
                leaves.into(),
                hosts_per_leaf.into(),
                uplinks.into(),
            );
            if !check_size(d, n, l, &span) {
                return None;
            }
            (
                TopologyKind::LeafSpine {
                    spines,
                    leaves,
                    hosts_per_leaf,
                    uplinks,
                },
                generate::leaf_spine(spines, leaves, hosts_per_leaf, uplinks),
            )
        }
        Kind::Hpn => {
            let core = match &t.core {
                None => None,
                Some(c) => {
                    let layers = [CoreLayer::PerPlane, CoreLayer::Shared].map(|l| (l.name(), l));
                    let kw = Keyword {
                        what: "core layer",
                        short: "core",
                        plural: "core layers",
                    };
                    keyword(d, c.get_ref(), c.span(), &layers, kw)
                }
            };
            let p = HpnParams {
                pods: get(d, &t.pods, "pods", Some(1), 1, u32::MAX),
                segments: get(d, &t.segments, "segments", None, 1, u32::MAX),
                hosts_per_segment: get(
                    d,
                    &t.hosts_per_segment,
                    "hosts_per_segment",
                    None,
                    1,
                    u32::MAX,
                ),
                backup_hosts: get(d, &t.backup_hosts, "backup_hosts", Some(0), 0, u32::MAX),
                rails: get(d, &t.rails, "rails", None, 1, u32::MAX),
                planes: get(d, &t.planes, "planes", Some(2), 1, u32::MAX),
                aggs_per_plane: get(d, &t.aggs_per_plane, "aggs_per_plane", None, 1, u32::MAX),
                cores: get(d, &t.cores, "cores", Some(0), 0, u32::MAX),
                core_uplinks: get(d, &t.core_uplinks, "core_uplinks", Some(0), 0, u32::MAX),
                core: core.unwrap_or_default(),
            };
            ok &= core.is_some() || t.core.is_none();
            let at =
                |v: &Option<Spanned<u32>>| v.as_ref().map_or(span.clone(), toml::Spanned::span);
            if ok && p.core == CoreLayer::PerPlane && !p.cores.is_multiple_of(p.planes) {
                ok = false;
                d.error(
                    Some(at(&t.cores)),
                    format!(
                        "`cores` must be a multiple of `planes` ({}) when the planes continue through the core, found {}",
                        p.planes, p.cores
                    ),
                )
                .label("cores do not split into planes")
                .help(format!(
                    "each plane gets `cores / planes` core switches; try cores = {} or {}, or set `core = \"shared\"` for one core layer serving every plane",
                    (u64::from(p.cores) / u64::from(p.planes)).max(1) * u64::from(p.planes),
                    (u64::from(p.cores) / u64::from(p.planes) + 1) * u64::from(p.planes)
                ));
            }
            let reach = p.cores_per_plane();
            if ok && p.cores > 0 && (p.core_uplinks == 0 || p.core_uplinks > reach) {
                ok = false;
                let (bound, why) = match p.core {
                    CoreLayer::PerPlane => (
                        format!("the cores of one plane ({reach})"),
                        "each aggregation switch has `core_uplinks` links, each to a different core of its plane",
                    ),
                    CoreLayer::Shared => (
                        format!("`cores` ({reach})"),
                        "each aggregation switch has `core_uplinks` links, each to a different core",
                    ),
                };
                d.error(
                    Some(at(&t.core_uplinks)),
                    format!(
                        "`core_uplinks` must be from 1 to {bound} when there are cores, found {}",
                        p.core_uplinks
                    ),
                )
                .label("invalid core_uplinks")
                .help(why);
            }
            if ok && p.cores == 0 && p.core_uplinks > 0 {
                ok = false;
                d.error(
                    Some(at(&t.core_uplinks)),
                    "`core_uplinks` is set but there are no cores",
                )
                .label("no cores to link to")
                .help("set `cores` to the number of core switches, or remove `core_uplinks`");
            }
            if ok && p.pods > 1 && p.cores == 0 {
                ok = false;
                d.error(
                    Some(at(&t.pods)),
                    format!("{} pods but no core layer to join them", p.pods),
                )
                .label("pods need cores")
                .help("set `cores` and `core_uplinks`: the core layer joins the pods");
            }
            // Aggregation ASNs (base + 1 + pod*planes + plane) stay below
            // the ToRs' (base + 1000 + index).
            if ok && u64::from(p.pods) * u64::from(p.planes) > 999 {
                ok = false;
                d.error(
                    Some(at(&t.pods)),
                    format!(
                        "{} pods x {} planes is more than the ASN plan's 999 aggregation groups",
                        p.pods, p.planes
                    ),
                )
                .label("too many pods")
                .help("each pod's plane is one ASN between base + 1 and base + 999");
            }
            if !ok {
                return None;
            }
            let (n, l) = generate::hpn_size(&p);
            if !check_size(d, n, l, &span) {
                return None;
            }
            (TopologyKind::Hpn(p), generate::hpn(&p))
        }
        Kind::Clos => {
            let stages = get(d, &t.stages, "stages", None, 3, 5);
            let pods = t.pods.as_ref().map(|p| *p.get_ref());
            if !ok {
                return None;
            }
            let p = read_clos(d, t, stages, pods, &span)?;
            let (n, l) = generate::clos_size(&p);
            if !check_size(d, n, l, &span) {
                return None;
            }
            (TopologyKind::Clos(p), generate::clos(&p))
        }
        Kind::Custom => {
            let (graph, spans) = custom::read(d, &s.extra, span.clone())?;
            inline_spans = spans;
            (TopologyKind::Custom, graph)
        }
    };
    Some(Topo {
        kind: tkind,
        graph,
        span,
        inline_spans,
        chips,
    })
}

/// Most ports a Clos switch may have.
const MAX_RADIX: u32 = 1024;

/// The radix and oversubscription of a Clos with `stages` stages, and
/// its pods: every tier below the top splits its radix into whole
/// downlinks and uplinks.
fn read_clos(
    d: &mut Diags<'_>,
    t: &RawTopology,
    stages: u32,
    pods: Option<u32>,
    span: &Range<usize>,
) -> Option<ClosParams> {
    let at =
        |v: &Option<Spanned<toml::Value>>| v.as_ref().map_or(span.clone(), toml::Spanned::span);
    if stages != 3 && stages != 5 {
        let s = t.stages.as_ref().map_or(span.clone(), toml::Spanned::span);
        d.error(Some(s), format!("`stages` must be 3 or 5, found {stages}"))
            .label("3 or 5")
            .help("3 stages: leaves and spines; 5 stages: pods of leaves and spines under a core tier");
        return None;
    }
    let tiers = (stages / 2 + 1) as usize;
    let names = ["leaf", "spine", "core"];
    // One value for every tier, or one per tier, bottom first.
    let per_tier = |d: &mut Diags<'_>,
                    v: &Spanned<toml::Value>,
                    key: &str,
                    n: usize|
     -> Option<Vec<toml::Value>> {
        match v.get_ref() {
            toml::Value::Array(a) if a.len() == n => Some(a.clone()),
            toml::Value::Array(a) => {
                d.error(
                    Some(v.span()),
                    format!(
                        "`{key}` lists {} values; a {stages}-stage Clos needs {n} ({})",
                        a.len(),
                        names[..n].join(", ")
                    ),
                )
                .label(format!("{n} values"))
                .help(format!(
                    "give one value for every tier, or one per tier, bottom first: {}",
                    names[..n].join(", ")
                ));
                None
            }
            one => Some(vec![one.clone(); n]),
        }
    };
    let Some(radix_v) = &t.radix else {
        d.error(Some(span.clone()), "missing `radix` for a `clos` topology")
            .label("`clos` needs `radix`")
            .help("the ports of every switch (`radix = 32`), or per tier bottom first (`radix = [32, 32, 64]`)");
        return None;
    };
    let mut radix = [0u32; 3];
    for (i, v) in per_tier(d, radix_v, "radix", tiers)?.iter().enumerate() {
        match v.as_integer().and_then(|r| u32::try_from(r).ok()) {
            Some(r) if (2..=MAX_RADIX).contains(&r) => radix[i] = r,
            _ => {
                d.error(
                    Some(radix_v.span()),
                    format!("the {} radix must be a whole number of ports from 2 to {MAX_RADIX}, found {v}", names[i]),
                )
                .label("invalid radix");
                return None;
            }
        }
    }
    let mut oversubscription = [[1u32, 1]; 2];
    if let Some(v) = &t.oversubscription {
        for (i, o) in per_tier(d, v, "oversubscription", tiers - 1)?
            .iter()
            .enumerate()
        {
            let ratio = o.as_str().and_then(|s| {
                let (down, up) = s.split_once(':')?;
                Some([
                    down.trim().parse::<u32>().ok()?,
                    up.trim().parse::<u32>().ok()?,
                ])
            });
            match ratio {
                Some([down, up]) if down > 0 && up > 0 => oversubscription[i] = [down, up],
                _ => {
                    d.error(
                        Some(v.span()),
                        format!(
                            "the {} oversubscription must be `DOWN:UP`, found {o}",
                            names[i]
                        ),
                    )
                    .label("invalid ratio")
                    .help("whole numbers above 0, downlinks to uplinks: \"3:1\", \"1:1\"");
                    return None;
                }
            }
        }
    }
    let mut ok = true;
    for i in 0..tiers - 1 {
        let [down, up] = oversubscription[i];
        let parts = down + up;
        if !radix[i].is_multiple_of(parts) {
            ok = false;
            let lower = radix[i] / parts * parts;
            d.error(
                Some(if t.oversubscription.is_some() {
                    at(&t.oversubscription)
                } else {
                    at(&t.radix)
                }),
                format!(
                    "a {} radix of {} cannot split {down}:{up} into whole ports: it is not a multiple of {parts}",
                    names[i], radix[i]
                ),
            )
            .label("radix and oversubscription disagree")
            .help(format!(
                "use a {} radix that is a multiple of {parts} ({}{}), or another ratio",
                names[i],
                if lower > 0 { format!("{lower} or ") } else { String::new() },
                lower + parts
            ));
        }
    }
    if !ok {
        return None;
    }
    let pods = match (stages, pods) {
        (3, Some(_)) => {
            let s = t.pods.as_ref().map_or(span.clone(), toml::Spanned::span);
            d.error(Some(s), "`pods` is for 5-stage Clos fabrics")
                .label("a 3-stage Clos has no pods")
                .help("set `stages = 5`, or remove `pods`");
            return None;
        }
        (3, None) => 1,
        (_, None) => radix[2],
        (_, Some(p)) if (1..=radix[2]).contains(&p) => p,
        (_, Some(p)) => {
            let s = t.pods.as_ref().map_or(span.clone(), toml::Spanned::span);
            d.error(
                Some(s),
                format!(
                    "`pods` must be from 1 to the core radix ({}), found {p}",
                    radix[2]
                ),
            )
            .label("too many pods")
            .help("every core switch has one port to each pod");
            return None;
        }
    };
    Some(ClosParams {
        stages,
        radix,
        oversubscription,
        pods,
    })
}

/// Reads `switch`: one chip for every switch (`"51.2t"`, `"128x400g"`),
/// or a table of chips by switch role (`{ tor = "51.2t", core = "64x800g" }`).
fn read_chips(
    d: &mut Diags<'_>,
    v: Option<&Spanned<toml::Value>>,
    kind: Kind,
) -> Option<(BTreeMap<Role, Chip>, Range<usize>)> {
    let v = v?;
    let span = v.span();
    let roles = kind.switch_roles();
    let role_names = || {
        roles
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let syntax = "write PORTSxSPEED (`128x400g`) or a capacity of 400G ports (`51.2t`)";
    let parse = |d: &mut Diags<'_>, text: &str, what: String| -> Option<Chip> {
        text.parse::<Chip>()
            .map_err(|e| {
                d.error(
                    Some(span.clone()),
                    format!("invalid switch chip {what}: {e}"),
                )
                .label("invalid chip")
                .help(syntax);
            })
            .ok()
    };
    let mut chips = BTreeMap::new();
    match v.get_ref() {
        toml::Value::String(text) => {
            let chip = parse(d, text, format!("`{text}`"))?;
            for &role in roles {
                chips.insert(role, chip);
            }
        }
        toml::Value::Table(table) => {
            let mut ok = true;
            for (key, value) in table {
                let Some(&role) = roles.iter().find(|r| r.as_str() == key) else {
                    d.error(
                        Some(span.clone()),
                        format!(
                            "`{key}` is not a switch role of `{}` topologies",
                            kind.name()
                        ),
                    )
                    .label("unknown role")
                    .help(format!("its switch roles: {}", role_names()));
                    ok = false;
                    continue;
                };
                let Some(text) = value.as_str() else {
                    d.error(
                        Some(span.clone()),
                        format!("the chip of `{key}` must be a string"),
                    )
                    .label("expected a string")
                    .help(syntax);
                    ok = false;
                    continue;
                };
                match parse(d, text, format!("`{text}` for `{key}`")) {
                    Some(chip) => {
                        chips.insert(role, chip);
                    }
                    None => ok = false,
                }
            }
            if !ok {
                return None;
            }
        }
        _ => {
            d.error(
                Some(span.clone()),
                "`switch` must be a chip or a table of chips by role",
            )
            .label("expected a string or a table")
            .help(format!(
                "{syntax}; or by role ({}): `{{ tor = \"51.2t\" }}`",
                role_names()
            ));
            return None;
        }
    }
    Some((chips, span))
}

/// Checks every switch of `fabric` against the chip of its role: its
/// ports (after break-out) and its bandwidth. One error per role, naming
/// its first switch that does not fit and how many others do not.
pub(crate) fn check_chips(
    d: &mut Diags<'_>,
    fabric: &Fabric,
    chips: &BTreeMap<Role, Chip>,
    span: &Range<usize>,
) -> bool {
    let mut ok = true;
    for (&role, chip) in chips {
        let mut misfits = fabric
            .switches()
            .filter(|n| n.role == role)
            .map(|n| (n, chip::demand(fabric, n.id, chip)))
            .filter(|(_, need)| !need.fits(chip));
        let Some((first, need)) = misfits.next() else {
            continue;
        };
        ok = false;
        let others = misfits.count();
        let links: Vec<String> = need
            .links
            .iter()
            .map(|g| match g.rate {
                Some(rate) => format!("{} x {rate} in {} ports", g.count, g.ports),
                None => format!("{} links without a rate, a port each", g.count),
            })
            .collect();
        let what = match need.too_fast {
            Some(rate) => format!("a {rate} link, faster than its {} ports", chip.speed),
            None => format!(
                "{} ports and {} ({})",
                need.ports,
                crate::units::Rate::from_bits_per_sec(need.bandwidth),
                links.join(", ")
            ),
        };
        let also = match others {
            0 => String::new(),
            n => format!(" (and {n} other {role} switches)"),
        };
        d.error(
            Some(span.clone()),
            format!(
                "switch {}{also} does not fit its chip {chip}: it needs {what}; the chip has {} ports of {}, {}",
                first.name,
                chip.ports,
                chip.speed,
                crate::units::Rate::from_bits_per_sec(chip.capacity())
            ),
        )
        .label(format!("{role} chip too small"))
        .help("give the role a larger chip, or fewer or slower links (`[links.<class>] rate`)");
    }
    ok
}

/// Reports a generated topology beyond what turbonet handles; false when
/// it did.
fn check_size(d: &mut Diags<'_>, nodes: u64, links: u64, span: &Range<usize>) -> bool {
    if nodes > MAX_NODES || links > MAX_LINKS {
        d.error(
            Some(span.clone()),
            format!("topology too large: {nodes} nodes and {links} links"),
        )
        .label("too large")
        .help(format!(
            "turbonet handles at most {MAX_NODES} nodes and {MAX_LINKS} links per lab"
        ));
        return false;
    }
    true
}
