//! Topology generators: deterministic node and link lists for fat-tree,
//! leaf-spine and HPN fabrics, before addresses are assigned.

use crate::model::{ClosParams, CoreLayer, HpnParams, LinkClass, LinkParams, Role};

/// Largest fabric a scenario may describe (keeps memory bounded on any input).
pub(crate) const MAX_NODES: u64 = 200_000;
/// Largest number of links a scenario may describe.
pub(crate) const MAX_LINKS: u64 = 1_000_000;

/// Where a switch's ASN comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsnSlot {
    /// Hosts have none.
    None,
    /// `base + offset` (RFC 7938 plan).
    Offset(u64),
    /// Given in the scenario.
    Explicit(u32),
}

/// A node before addressing.
#[derive(Debug, Clone)]
pub(crate) struct GNode {
    pub name: String,
    pub role: Role,
    pub pod: Option<u32>,
    pub segment: Option<u32>,
    pub rail: Option<u32>,
    pub plane: Option<u32>,
    pub backup: bool,
    pub asn: AsnSlot,
}

/// A link before addressing; `a` is the lower-tier end.
#[derive(Debug, Clone)]
pub(crate) struct GLink {
    pub a: u32,
    pub b: u32,
    pub class: LinkClass,
    /// Parameters given on the link itself (custom topologies).
    pub inline: Option<LinkParams>,
}

/// Hosts that share one subnet, and the switches that serve it (one ToR, or
/// every ToR of a dual-ToR set).
#[derive(Debug, Clone, Default)]
pub(crate) struct HostGroup {
    pub switches: Vec<u32>,
    pub hosts: Vec<u32>,
}

/// A generated fabric before addressing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Graph {
    pub nodes: Vec<GNode>,
    pub links: Vec<GLink>,
    pub groups: Vec<HostGroup>,
}

impl Graph {
    fn with_capacity(nodes: u64, links: u64) -> Self {
        Graph {
            nodes: Vec::with_capacity(nodes as usize),
            links: Vec::with_capacity(links as usize),
            groups: Vec::new(),
        }
    }

    fn node(&mut self, name: String, role: Role, asn: AsnSlot) -> &mut GNode {
        self.nodes.push(GNode {
            name,
            role,
            pod: None,
            segment: None,
            rail: None,
            plane: None,
            backup: false,
            asn,
        });
        self.nodes.last_mut().expect("just pushed")
    }

    fn link(&mut self, a: u32, b: u32) {
        let class = LinkClass {
            lower: self.nodes[a as usize].role,
            upper: self.nodes[b as usize].role,
        };
        self.links.push(GLink {
            a,
            b,
            class,
            inline: None,
        });
    }
}

/// Sizes of a fat-tree: (nodes, links).
pub(crate) fn fat_tree_size(k: u64) -> (u64, u64) {
    let half = k / 2;
    let hosts = k * half * half;
    let nodes = k * k + half * half + hosts;
    let links = hosts + k * half * half + k * half * half;
    (nodes, links)
}

/// k-ary fat-tree (Al-Fares et al., SIGCOMM 2008). Node order: for each pod
/// its edge then aggregation switches, then the cores, then the hosts.
pub(crate) fn fat_tree(k: u32) -> Graph {
    let half = k / 2;
    let (n, l) = fat_tree_size(u64::from(k));
    let mut g = Graph::with_capacity(n, l);
    let edge = |p: u32, e: u32| p * k + e;
    let agg = |p: u32, a: u32| p * k + half + a;
    let core = |c: u32| k * k + c;
    let host = |p: u32, e: u32, h: u32| k * k + half * half + (p * half + e) * half + h;
    for p in 0..k {
        for e in 0..half {
            let slot = AsnSlot::Offset(1000 + u64::from(p * half + e));
            g.node(format!("edge{p}-{e}"), Role::Edge, slot).pod = Some(p);
        }
        for a in 0..half {
            let slot = AsnSlot::Offset(1 + u64::from(p));
            g.node(format!("agg{p}-{a}"), Role::Agg, slot).pod = Some(p);
        }
    }
    for c in 0..half * half {
        g.node(format!("core{c}"), Role::Core, AsnSlot::Offset(0));
    }
    for p in 0..k {
        for e in 0..half {
            for h in 0..half {
                g.node(format!("h{p}-{e}-{h}"), Role::Host, AsnSlot::None)
                    .pod = Some(p);
            }
        }
    }
    for p in 0..k {
        for e in 0..half {
            for h in 0..half {
                g.link(host(p, e, h), edge(p, e));
            }
            g.groups.push(HostGroup {
                switches: vec![edge(p, e)],
                hosts: (0..half).map(|h| host(p, e, h)).collect(),
            });
        }
    }
    for p in 0..k {
        for e in 0..half {
            for a in 0..half {
                g.link(edge(p, e), agg(p, a));
            }
        }
    }
    for p in 0..k {
        for i in 0..half {
            for j in 0..half {
                g.link(agg(p, i), core(i * half + j));
            }
        }
    }
    g
}

/// Sizes of a leaf-spine fabric: (nodes, links).
pub(crate) fn leaf_spine_size(
    spines: u64,
    leaves: u64,
    hosts_per_leaf: u64,
    uplinks: u64,
) -> (u64, u64) {
    let hosts = leaves.saturating_mul(hosts_per_leaf);
    (
        spines.saturating_add(leaves).saturating_add(hosts),
        hosts.saturating_add(leaves.saturating_mul(spines).saturating_mul(uplinks)),
    )
}

/// Two-tier Clos. Node order: leaves, spines, hosts.
pub(crate) fn leaf_spine(spines: u32, leaves: u32, hosts_per_leaf: u32, uplinks: u32) -> Graph {
    let (n, l) = leaf_spine_size(
        spines.into(),
        leaves.into(),
        hosts_per_leaf.into(),
        uplinks.into(),
    );
    let mut g = Graph::with_capacity(n, l);
    let leaf = |i: u32| i;
    let spine = |i: u32| leaves + i;
    let host = |l: u32, i: u32| leaves + spines + l * hosts_per_leaf + i;
    for i in 0..leaves {
        g.node(
            format!("leaf{i}"),
            Role::Leaf,
            AsnSlot::Offset(1000 + u64::from(i)),
        );
    }
    for i in 0..spines {
        g.node(format!("spine{i}"), Role::Spine, AsnSlot::Offset(0));
    }
    for l in 0..leaves {
        for i in 0..hosts_per_leaf {
            g.node(format!("h{l}-{i}"), Role::Host, AsnSlot::None);
        }
    }
    for l in 0..leaves {
        for i in 0..hosts_per_leaf {
            g.link(host(l, i), leaf(l));
        }
        if hosts_per_leaf > 0 {
            g.groups.push(HostGroup {
                switches: vec![leaf(l)],
                hosts: (0..hosts_per_leaf).map(|i| host(l, i)).collect(),
            });
        }
    }
    for l in 0..leaves {
        for s in 0..spines {
            for _ in 0..uplinks {
                g.link(leaf(l), spine(s));
            }
        }
    }
    g
}

/// Sizes of a Clos fabric: (nodes, links).
pub(crate) fn clos_size(p: &ClosParams) -> (u64, u64) {
    let s = p.shape();
    let m = |a: u64, b: u32| a.saturating_mul(u64::from(b));
    let leaves = m(u64::from(s.pods), s.leaves);
    let spines = m(u64::from(s.pods), s.spines);
    let cores = m(u64::from(s.spines), s.cores_per_plane);
    let hosts = m(leaves, s.hosts_per_leaf);
    let nodes = hosts
        .saturating_add(leaves)
        .saturating_add(spines)
        .saturating_add(cores);
    let links = hosts
        .saturating_add(m(leaves, s.spines))
        .saturating_add(m(spines, s.cores_per_plane));
    (nodes, links)
}

/// A folded Clos of 3 stages (leaves `leaf<i>`, spines `spine<j>`, hosts
/// `h<i>-<h>`, like `leaf-spine`) or 5 stages: pods of leaves
/// `leaf<p>-<i>` and spines `spine<p>-<j>`, every leaf linked to every
/// spine of its pod, and a core tier in planes, one per spine index: spine
/// `j` of every pod links to every core `core<j>-<c>` of plane `j`. Hosts
/// `h<p>-<i>-<h>`. Node order: leaves, spines, cores, hosts; leaves and
/// spines pod by pod.
pub(crate) fn clos(p: &ClosParams) -> Graph {
    let (n, l) = clos_size(p);
    let mut g = Graph::with_capacity(n, l);
    let s = p.shape();
    let five = p.stages == 5;
    let leaves = s.pods * s.leaves;
    let spines = s.pods * s.spines;
    let leaf = |q: u32, i: u32| q * s.leaves + i;
    let spine = |q: u32, j: u32| leaves + q * s.spines + j;
    let core = |j: u32, c: u32| leaves + spines + j * s.cores_per_plane + c;
    let host = |q: u32, i: u32, h: u32| {
        leaves + spines + s.spines * s.cores_per_plane + (q * s.leaves + i) * s.hosts_per_leaf + h
    };
    for q in 0..s.pods {
        for i in 0..s.leaves {
            let name = if five {
                format!("leaf{q}-{i}")
            } else {
                format!("leaf{i}")
            };
            let slot = AsnSlot::Offset(1000 + u64::from(leaf(q, i)));
            let node = g.node(name, Role::Leaf, slot);
            node.pod = five.then_some(q);
        }
    }
    for q in 0..s.pods {
        for j in 0..s.spines {
            let (name, slot) = if five {
                (format!("spine{q}-{j}"), AsnSlot::Offset(1 + u64::from(q)))
            } else {
                (format!("spine{j}"), AsnSlot::Offset(0))
            };
            let node = g.node(name, Role::Spine, slot);
            node.pod = five.then_some(q);
        }
    }
    for j in 0..s.spines {
        for c in 0..s.cores_per_plane {
            g.node(format!("core{j}-{c}"), Role::Core, AsnSlot::Offset(0))
                .plane = Some(j);
        }
    }
    for q in 0..s.pods {
        for i in 0..s.leaves {
            for h in 0..s.hosts_per_leaf {
                let name = if five {
                    format!("h{q}-{i}-{h}")
                } else {
                    format!("h{i}-{h}")
                };
                g.node(name, Role::Host, AsnSlot::None).pod = five.then_some(q);
            }
        }
    }
    for q in 0..s.pods {
        for i in 0..s.leaves {
            for h in 0..s.hosts_per_leaf {
                g.link(host(q, i, h), leaf(q, i));
            }
            if s.hosts_per_leaf > 0 {
                g.groups.push(HostGroup {
                    switches: vec![leaf(q, i)],
                    hosts: (0..s.hosts_per_leaf).map(|h| host(q, i, h)).collect(),
                });
            }
        }
    }
    for q in 0..s.pods {
        for i in 0..s.leaves {
            for j in 0..s.spines {
                g.link(leaf(q, i), spine(q, j));
            }
        }
    }
    for q in 0..s.pods {
        for j in 0..s.spines {
            for c in 0..s.cores_per_plane {
                g.link(spine(q, j), core(j, c));
            }
        }
    }
    g
}

/// Sizes of an HPN fabric: (nodes, links).
pub(crate) fn hpn_size(p: &HpnParams) -> (u64, u64) {
    // Saturating: absurd parameters must fail the size check, not overflow.
    let m = |a: u64, b: u32| a.saturating_mul(u64::from(b));
    let segments = m(u64::from(p.pods), p.segments);
    let hosts =
        (u64::from(p.hosts_per_segment) + u64::from(p.backup_hosts)).saturating_mul(segments);
    let tors = m(m(segments, p.rails), p.planes);
    let aggs = m(m(u64::from(p.pods), p.planes), p.aggs_per_plane);
    let nodes = hosts
        .saturating_add(tors)
        .saturating_add(aggs)
        .saturating_add(u64::from(p.cores));
    let links = m(m(hosts, p.rails), p.planes)
        .saturating_add(m(tors, p.aggs_per_plane))
        .saturating_add(m(aggs, p.core_uplinks));
    (nodes, links)
}

/// Alibaba HPN (SIGCOMM 2024): dual-ToR rails, planes kept apart up to
/// the core (or meeting there, with [`CoreLayer::Shared`]), pods joined by
/// the core. Segments are numbered across pods. Node order: ToRs (pod,
/// segment, rail, plane), aggregation switches (pod, plane, index), cores
/// (plane, index), hosts (segment, index).
pub(crate) fn hpn(p: &HpnParams) -> Graph {
    let (n, l) = hpn_size(p);
    let mut g = Graph::with_capacity(n, l);
    let per_segment = p.hosts_per_segment + p.backup_hosts;
    let segments = p.pods * p.segments;
    let ntors = segments * p.rails * p.planes;
    let naggs = p.pods * p.planes * p.aggs_per_plane;
    let per_plane = p.cores_per_plane();
    let tor = |s: u32, r: u32, pl: u32| (s * p.rails + r) * p.planes + pl;
    let agg = |q: u32, pl: u32, i: u32| ntors + (q * p.planes + pl) * p.aggs_per_plane + i;
    let core = |c: u32| ntors + naggs + c;
    let host = |s: u32, i: u32| ntors + naggs + p.cores + s * per_segment + i;
    for s in 0..segments {
        for r in 0..p.rails {
            for pl in 0..p.planes {
                let slot = AsnSlot::Offset(1000 + u64::from(tor(s, r, pl)));
                let node = g.node(format!("tor{s}-r{r}p{pl}"), Role::Tor, slot);
                node.pod = Some(s / p.segments);
                node.segment = Some(s);
                node.rail = Some(r);
                node.plane = Some(pl);
            }
        }
    }
    for q in 0..p.pods {
        for pl in 0..p.planes {
            for i in 0..p.aggs_per_plane {
                let slot = AsnSlot::Offset(1 + u64::from(q * p.planes + pl));
                let name = if p.pods == 1 {
                    format!("agg{pl}-{i}")
                } else {
                    format!("pod{q}-agg{pl}-{i}")
                };
                let node = g.node(name, Role::Agg, slot);
                node.pod = Some(q);
                node.plane = Some(pl);
            }
        }
    }
    for c in 0..p.cores {
        match p.core {
            CoreLayer::PerPlane => {
                let pl = c / per_plane;
                g.node(
                    format!("core{pl}-{}", c % per_plane),
                    Role::Core,
                    AsnSlot::Offset(0),
                )
                .plane = Some(pl);
            }
            CoreLayer::Shared => {
                g.node(format!("core{c}"), Role::Core, AsnSlot::Offset(0));
            }
        }
    }
    for s in 0..segments {
        for i in 0..per_segment {
            let node = g.node(format!("h{s}-{i}"), Role::Host, AsnSlot::None);
            node.pod = Some(s / p.segments);
            node.segment = Some(s);
            node.backup = i >= p.hosts_per_segment;
        }
    }
    for s in 0..segments {
        for i in 0..per_segment {
            for r in 0..p.rails {
                for pl in 0..p.planes {
                    g.link(host(s, i), tor(s, r, pl));
                }
            }
        }
        for r in 0..p.rails {
            g.groups.push(HostGroup {
                switches: (0..p.planes).map(|pl| tor(s, r, pl)).collect(),
                hosts: (0..per_segment).map(|i| host(s, i)).collect(),
            });
        }
    }
    // Every ToR has one uplink to every aggregation switch of its pod's
    // plane.
    for t in 0..ntors {
        let (pl, q) = (t % p.planes, t / (p.rails * p.planes) / p.segments);
        for i in 0..p.aggs_per_plane {
            g.link(t, agg(q, pl, i));
        }
    }
    // Uplink `j` of aggregation switch `i` goes to core `(i*u + j) % C` of
    // the cores it may reach: its plane's (`C` per plane), or with a shared
    // core layer every core, counted on across the planes so that the
    // planes spread over all of them. The same `i` in every pod reaches
    // the same cores: the core layer joins the pods.
    if p.cores > 0 {
        for q in 0..p.pods {
            for pl in 0..p.planes {
                for i in 0..p.aggs_per_plane {
                    for j in 0..p.core_uplinks {
                        let c = match p.core {
                            CoreLayer::PerPlane => {
                                pl * per_plane
                                    + ((u64::from(i) * u64::from(p.core_uplinks) + u64::from(j))
                                        % u64::from(per_plane))
                                        as u32
                            }
                            CoreLayer::Shared => {
                                ((u64::from(pl * p.aggs_per_plane + i) * u64::from(p.core_uplinks)
                                    + u64::from(j))
                                    % u64::from(p.cores)) as u32
                            }
                        };
                        g.link(agg(q, pl, i), core(c));
                    }
                }
            }
        }
    }
    g
}

/// Custom topologies are assembled by the resolver through these.
impl Graph {
    pub(crate) fn push_node(&mut self, node: GNode) {
        self.nodes.push(node);
    }

    pub(crate) fn push_link(&mut self, a: u32, b: u32, inline: Option<LinkParams>) {
        self.link(a, b);
        if let Some(l) = self.links.last_mut() {
            l.inline = inline;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    #[test]
    fn fat_tree_counts() {
        for k in [2u32, 4, 6, 8] {
            let g = fat_tree(k);
            let (n, l) = fat_tree_size(k.into());
            assert_eq!(g.nodes.len() as u64, n);
            assert_eq!(g.links.len() as u64, l);
            assert_eq!(g.groups.len() as u32, k * k / 2);
        }
    }

    #[test]
    fn a_five_stage_clos_of_radix_k_is_a_k_ary_fat_tree_and_every_port_is_used() {
        for k in [4u32, 6, 8] {
            let p = ClosParams {
                stages: 5,
                radix: [k; 3],
                oversubscription: [[1, 1]; 2],
                pods: k,
            };
            let g = clos(&p);
            assert_eq!(clos_size(&p), fat_tree_size(k.into()));
            assert_eq!((g.nodes.len() as u64, g.links.len() as u64), clos_size(&p));
            let mut ports = vec![0u32; g.nodes.len()];
            for l in &g.links {
                ports[l.a as usize] += 1;
                ports[l.b as usize] += 1;
            }
            for (n, used) in g.nodes.iter().zip(ports) {
                let want = if n.role == Role::Host { 1 } else { k };
                assert_eq!(used, want, "{}", n.name);
            }
        }
        // 3 stages, 3:1 at the leaves: 12 hosts and 4 spines per leaf,
        // 16 leaves.
        let p = ClosParams {
            stages: 3,
            radix: [16; 3],
            oversubscription: [[3, 1], [1, 1]],
            pods: 1,
        };
        let s = p.shape();
        assert_eq!((s.hosts_per_leaf, s.spines, s.leaves), (12, 4, 16));
        let g = clos(&p);
        assert_eq!((g.nodes.len() as u64, g.links.len() as u64), clos_size(&p));
    }

    #[test]
    fn hpn_counts() {
        for (pods, core) in [
            (1, CoreLayer::PerPlane),
            (3, CoreLayer::PerPlane),
            (1, CoreLayer::Shared),
            (3, CoreLayer::Shared),
        ] {
            let p = HpnParams {
                pods,
                core,
                segments: 2,
                hosts_per_segment: 4,
                backup_hosts: 1,
                rails: 2,
                planes: 2,
                aggs_per_plane: 2,
                cores: 4,
                core_uplinks: 2,
            };
            let g = hpn(&p);
            let (n, l) = hpn_size(&p);
            assert_eq!(g.nodes.len() as u64, n);
            assert_eq!(g.links.len() as u64, l);
            assert_eq!(g.groups.len() as u32, 4 * pods);
            let names: std::collections::HashSet<&str> =
                g.nodes.iter().map(|n| n.name.as_str()).collect();
            assert_eq!(names.len(), g.nodes.len(), "names are unique");
            // Planes meet at the core only when it is shared.
            let mut planes_at: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
            for link in g.links.iter().filter(|l| l.class.upper == Role::Core) {
                let agg = &g.nodes[link.a as usize];
                planes_at
                    .entry(link.b)
                    .or_default()
                    .insert(agg.plane.unwrap());
            }
            assert_eq!(planes_at.len(), 4, "every core is used");
            let mixed = planes_at.values().any(|p| p.len() > 1);
            assert_eq!(mixed, core == CoreLayer::Shared, "{core:?}");
            // A ToR's uplinks stay in its pod and plane.
            for link in g.links.iter().filter(|l| l.class.lower == Role::Tor) {
                let (tor, agg) = (&g.nodes[link.a as usize], &g.nodes[link.b as usize]);
                assert_eq!((tor.pod, tor.plane), (agg.pod, agg.plane));
            }
        }
    }
}
