//! turbonet-graph: pictures of a fabric. Pure: a [`Fabric`] (and, for a
//! running lab, the [`State`] of its links and nodes) in, SVG or Graphviz
//! text out.
//!
//! The fabric is laid out by tiers, top down: cores, aggregation switches
//! or spines, ToRs, edges or leaves, hosts. Within a tier, pods sit side by
//! side, then planes, then rails. A tier too wide to read is summarised:
//! its switches are grouped by pod, plane and rail (coarser if need be),
//! each group drawn as one box with its count, and the links between two
//! boxes as one line with theirs. A [`Filter`] (a pod, a segment, a plane)
//! narrows the picture to what it names, so a summarised part can be
//! opened up.

mod draw;

use std::collections::{BTreeMap, HashSet};

use turbonet_topo::{Fabric, LinkId, NodeId, Role};

pub use draw::{dot, load_colour, svg};

/// Which part of the fabric to draw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only this pod (and the switches that join it to others).
    pub pod: Option<u32>,
    /// Only this segment (HPN): its ToRs and hosts, and the switches
    /// above its ToRs.
    pub segment: Option<u32>,
    /// Only this plane's switches (and the hosts).
    pub plane: Option<u32>,
}

impl Filter {
    /// True when nothing is filtered out.
    pub fn is_empty(&self) -> bool {
        *self == Filter::default()
    }
}

/// What is known of a running lab: links down, links' load, nodes down.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Links that are down.
    pub links_down: HashSet<LinkId>,
    /// Nodes that are down.
    pub nodes_down: HashSet<NodeId>,
    /// Each link's load: its busier direction's share of its rate (or of
    /// the busiest link's rate when it has none), 0 to 1.
    pub load: BTreeMap<LinkId, f64>,
}

/// One box of the picture: a node, or a group of nodes of one tier.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Its nodes.
    pub members: Vec<NodeId>,
    /// Their role.
    pub role: Role,
    /// Their pod, plane and rail, when they share one.
    pub pod: Option<u32>,
    /// Their plane.
    pub plane: Option<u32>,
    /// Their rail.
    pub rail: Option<u32>,
}

impl Item {
    /// True for a group of nodes (drawn with its count).
    pub fn is_group(&self) -> bool {
        self.members.len() > 1
    }
}

/// A line of the picture: the links between two boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// The upper box (an index into [`Picture::rows`] flattened, see
    /// [`Picture::item`]).
    pub upper: At,
    /// The lower box.
    pub lower: At,
    /// The links it stands for.
    pub links: Vec<LinkId>,
}

/// A fabric laid out by tiers: rows of boxes, top down, and the lines
/// between them.
#[derive(Debug, Clone, PartialEq)]
pub struct Picture {
    /// Rows of boxes, top (cores) first.
    pub rows: Vec<Vec<Item>>,
    /// Lines between boxes of different rows.
    pub edges: Vec<Edge>,
    /// Nodes drawn, and how many the fabric has.
    pub shown: usize,
    /// Links drawn.
    pub links: usize,
    /// True when some row is summarised.
    pub summarised: bool,
}

impl Picture {
    /// The box at `(row, index)`.
    pub fn item(&self, at: At) -> &Item {
        &self.rows[at.0][at.1]
    }
}

/// A box's place: its row and its index in the row.
pub type At = (usize, usize);

/// What a group of nodes shares: pod, plane and rail.
type GroupKey = (Option<u32>, Option<u32>, Option<u32>);

/// Boxes a row holds before it is summarised.
pub const MAX_PER_ROW: usize = 48;

/// The row of a role, top down.
fn row_of(role: Role) -> usize {
    match role {
        Role::Core => 0,
        Role::Agg | Role::Spine => 1,
        Role::Tor | Role::Edge | Role::Leaf | Role::Switch => 2,
        Role::Host => 3,
    }
}

/// Lays `fabric` out: the nodes `filter` keeps, a row per tier, rows wider
/// than `max_per_row` summarised.
pub fn layout(fabric: &Fabric, filter: &Filter, max_per_row: usize) -> Picture {
    let keep = kept(fabric, filter);
    let mut by_row: Vec<Vec<NodeId>> = vec![Vec::new(); 4];
    for n in fabric.nodes.iter().filter(|n| keep[n.id.0 as usize]) {
        by_row[row_of(n.role)].push(n.id);
    }
    let mut summarised = false;
    let rows: Vec<Vec<Item>> = by_row
        .into_iter()
        .map(|ids| {
            let items = group(fabric, &ids, max_per_row.max(1));
            summarised |= items.len() < ids.len();
            items
        })
        .filter(|r| !r.is_empty())
        .collect();
    // Which box holds each node.
    let mut at: Vec<Option<At>> = vec![None; fabric.nodes.len()];
    for (r, row) in rows.iter().enumerate() {
        for (i, item) in row.iter().enumerate() {
            for m in &item.members {
                at[m.0 as usize] = Some((r, i));
            }
        }
    }
    let mut edges: BTreeMap<(At, At), Vec<LinkId>> = BTreeMap::new();
    let mut links = 0;
    for l in &fabric.links {
        let (Some(a), Some(b)) = (at[l.ends[0].node.0 as usize], at[l.ends[1].node.0 as usize])
        else {
            continue;
        };
        if a == b {
            continue;
        }
        links += 1;
        let (upper, lower) = if a.0 <= b.0 { (a, b) } else { (b, a) };
        edges.entry((upper, lower)).or_default().push(l.id);
    }
    Picture {
        shown: keep.iter().filter(|k| **k).count(),
        rows,
        edges: edges
            .into_iter()
            .map(|((upper, lower), links)| Edge {
                upper,
                lower,
                links,
            })
            .collect(),
        links,
        summarised,
    }
}

/// Which nodes `filter` keeps: those it names, and the switches next to
/// them that belong to no narrower part (the cores that join a pod to the
/// others, the aggregation switches above a segment).
fn kept(fabric: &Fabric, filter: &Filter) -> Vec<bool> {
    let named = |n: &turbonet_topo::Node| {
        filter.pod.is_none_or(|p| n.pod == Some(p))
            && filter.segment.is_none_or(|s| n.segment == Some(s))
            && filter.plane.is_none_or(|p| n.plane.is_none_or(|q| q == p))
    };
    let mut keep: Vec<bool> = fabric.nodes.iter().map(named).collect();
    if filter.is_empty() {
        return keep;
    }
    let core: Vec<NodeId> = fabric
        .nodes
        .iter()
        .filter(|n| keep[n.id.0 as usize])
        .map(|n| n.id)
        .collect();
    for id in core {
        let node = fabric.node(id);
        for &l in &node.links {
            let Some((_, far)) = fabric.link(l).ends_from(id) else {
                continue;
            };
            let peer = fabric.node(far.node);
            let above = row_of(peer.role) < row_of(node.role);
            let outside_segment = filter.segment.is_some() && peer.segment.is_none();
            let outside_pod =
                filter.segment.is_none() && filter.pod.is_some() && peer.pod.is_none();
            let plane_ok = filter
                .plane
                .is_none_or(|p| peer.plane.is_none_or(|q| q == p));
            if above && plane_ok && (outside_segment || outside_pod) {
                keep[far.node.0 as usize] = true;
            }
        }
    }
    keep
}

/// One row's boxes: every node when they fit, else groups by pod, plane
/// and rail, or coarser, until they fit.
fn group(fabric: &Fabric, ids: &[NodeId], max: usize) -> Vec<Item> {
    let mut ids = ids.to_vec();
    ids.sort_by_key(|&id| {
        let n = fabric.node(id);
        (n.pod, n.plane, n.rail, n.segment, id)
    });
    if ids.len() <= max {
        return ids
            .into_iter()
            .map(|id| {
                let n = fabric.node(id);
                Item {
                    members: vec![id],
                    role: n.role,
                    pod: n.pod,
                    plane: n.plane,
                    rail: n.rail,
                }
            })
            .collect();
    }
    type Key = fn(&turbonet_topo::Node) -> GroupKey;
    let keys: [Key; 4] = [
        |n| (n.pod, n.plane, n.rail),
        |n| (n.pod, n.plane, None),
        |n| (n.pod, None, None),
        |_| (None, None, None),
    ];
    for (k, key) in keys.iter().enumerate() {
        let mut groups: BTreeMap<GroupKey, Vec<NodeId>> = BTreeMap::new();
        for &id in &ids {
            groups.entry(key(fabric.node(id))).or_default().push(id);
        }
        if groups.len() <= max || k == keys.len() - 1 {
            return groups
                .into_iter()
                .map(|((pod, plane, rail), members)| Item {
                    role: fabric.node(members[0]).role,
                    members,
                    pod,
                    plane,
                    rail,
                })
                .collect();
        }
    }
    unreachable!("the last key makes one group")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(text: &str) -> turbonet_topo::Lab {
        turbonet_topo::parse("t.toml", text).expect("valid scenario")
    }

    const HPN: &str = "[lab]\nname = \"g\"\n[topology]\nkind = \"hpn\"\npods = 2\nsegments = 3\n\
                       hosts_per_segment = 4\nrails = 4\naggs_per_plane = 4\ncores = 4\n\
                       core_uplinks = 2\n";

    #[test]
    fn a_small_fabric_is_drawn_node_by_node_tier_by_tier() {
        let lab = lab(HPN);
        let p = layout(&lab.fabric, &Filter::default(), MAX_PER_ROW);
        assert!(!p.summarised);
        assert_eq!(p.shown, lab.fabric.nodes.len());
        assert_eq!(p.links, lab.fabric.links.len());
        let roles: Vec<Role> = p.rows.iter().map(|r| r[0].role).collect();
        assert_eq!(roles, [Role::Core, Role::Agg, Role::Tor, Role::Host]);
        // Every line joins two rows, the upper first.
        assert!(p.edges.iter().all(|e| e.upper.0 < e.lower.0));
    }

    #[test]
    fn a_wide_tier_is_summarised_by_pod_plane_and_rail_and_a_filter_opens_it() {
        let lab = lab(HPN);
        let p = layout(&lab.fabric, &Filter::default(), 8);
        assert!(p.summarised);
        // 48 ToRs: 2 pods x 2 planes x 4 rails = 16 groups, too many; by
        // pod and plane, 4 groups of 12.
        let tors = &p.rows[2];
        assert_eq!(tors.len(), 4);
        assert!(
            tors.iter()
                .all(|t| t.members.len() == 12 && t.rail.is_none())
        );
        // Every link is still drawn, in some line.
        let drawn: usize = p.edges.iter().map(|e| e.links.len()).sum();
        assert_eq!(drawn, lab.fabric.links.len());
        // One segment: its 8 ToRs and 4 hosts one by one, the aggregation
        // switches of its pod above them, no cores.
        let one = Filter {
            segment: Some(4),
            ..Filter::default()
        };
        let p = layout(&lab.fabric, &one, 8);
        let count = |role| {
            p.rows
                .iter()
                .flatten()
                .filter(|i| i.role == role)
                .map(|i| i.members.len())
                .sum::<usize>()
        };
        assert_eq!(
            [
                count(Role::Tor),
                count(Role::Host),
                count(Role::Agg),
                count(Role::Core)
            ],
            [8, 4, 8, 0]
        );
        let agg = lab.fabric.node(p.rows[0][0].members[0]);
        assert_eq!(agg.pod, Some(1), "segment 4 is in pod 1");
    }

    #[test]
    fn a_pod_keeps_the_cores_that_join_it_and_a_plane_only_its_switches() {
        let lab = lab(HPN);
        let pod = Filter {
            pod: Some(0),
            ..Filter::default()
        };
        let p = layout(&lab.fabric, &pod, MAX_PER_ROW);
        assert_eq!(p.rows[0].len(), 4, "every core joins pod 0 to pod 1");
        assert!(
            p.rows
                .iter()
                .flatten()
                .all(|i| i.role == Role::Core || i.pod == Some(0))
        );
        let plane = Filter {
            plane: Some(1),
            ..Filter::default()
        };
        let p = layout(&lab.fabric, &plane, MAX_PER_ROW);
        assert!(
            p.rows
                .iter()
                .flatten()
                .all(|i| i.role == Role::Host || i.plane == Some(1))
        );
    }
}
