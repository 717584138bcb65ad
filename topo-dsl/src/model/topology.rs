//! The topology family a fabric was generated from: fat-tree, leaf-spine,
//! HPN, Clos, custom, and their parameters.

use std::fmt;

use serde::Serialize;

/// The topology family a fabric was generated from, with its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TopologyKind {
    /// k-ary fat-tree (Al-Fares).
    FatTree {
        /// Switch radix, even, >= 2.
        k: u32,
    },
    /// Two-tier Clos.
    LeafSpine {
        /// Spine switches.
        spines: u32,
        /// Leaf switches.
        leaves: u32,
        /// Hosts under each leaf.
        hosts_per_leaf: u32,
        /// Parallel links between every leaf and every spine.
        uplinks: u32,
    },
    /// Alibaba HPN (SIGCOMM 2024): pods of dual-ToR segments on separate
    /// planes, joined by a core layer.
    Hpn(HpnParams),
    /// A folded Clos of 3 or 5 stages, sized from its switches' radix.
    Clos(ClosParams),
    /// Explicit nodes and links.
    Custom,
}

/// A folded Clos built from switches of a given radix: 3 stages (leaves
/// and spines) or 5 (leaves and spines in pods, and a core tier in planes,
/// as RFC 7938 describes). Every switch below the top splits its ports
/// into downlinks and uplinks by its tier's oversubscription; a top-tier
/// switch has only downlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosParams {
    /// 3 or 5.
    pub stages: u32,
    /// Ports per switch, bottom tier first (`stages / 2 + 1` tiers).
    pub radix: [u32; 3],
    /// Downlinks and uplinks of each tier below the top, e.g. `[3, 1]` for
    /// 3:1 (`[1, 1]` when not oversubscribed).
    pub oversubscription: [[u32; 2]; 2],
    /// Pods (5 stages), at most the core tier's radix.
    pub pods: u32,
}

impl ClosParams {
    /// Switch tiers: 2 or 3.
    pub fn tiers(&self) -> usize {
        (self.stages / 2 + 1) as usize
    }

    /// Downlinks and uplinks of a switch of tier `t` (0: leaves).
    pub fn split(&self, t: usize) -> (u32, u32) {
        if t + 1 >= self.tiers() {
            return (self.radix[t], 0);
        }
        let [down, up] = self.oversubscription[t];
        let unit = self.radix[t] / (down + up);
        (unit * down, unit * up)
    }

    /// Hosts per leaf, leaves and spines per pod (the whole fabric with 3
    /// stages), core switches per plane (one plane per spine of a pod).
    pub fn shape(&self) -> ClosShape {
        let (hosts_per_leaf, leaf_up) = self.split(0);
        match self.stages {
            3 => ClosShape {
                hosts_per_leaf,
                leaves: self.split(1).0,
                spines: leaf_up,
                cores_per_plane: 0,
                pods: 1,
            },
            _ => {
                let (spine_down, spine_up) = self.split(1);
                ClosShape {
                    hosts_per_leaf,
                    leaves: spine_down,
                    spines: leaf_up,
                    cores_per_plane: spine_up,
                    pods: self.pods,
                }
            }
        }
    }
}

/// The counts that follow from [`ClosParams`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClosShape {
    /// Hosts under each leaf.
    pub hosts_per_leaf: u32,
    /// Leaves per pod (all of them with 3 stages).
    pub leaves: u32,
    /// Spines per pod (all of them with 3 stages); also the planes of the
    /// core tier.
    pub spines: u32,
    /// Core switches per plane (5 stages; 0 with 3).
    pub cores_per_plane: u32,
    /// Pods (1 with 3 stages).
    pub pods: u32,
}

/// The parameters of an HPN fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HpnParams {
    /// Pods, joined by the core layer.
    pub pods: u32,
    /// Segments in each pod.
    pub segments: u32,
    /// Active hosts per segment.
    pub hosts_per_segment: u32,
    /// Backup hosts per segment (connected, not counted in oversubscription).
    pub backup_hosts: u32,
    /// Rail NICs per host.
    pub rails: u32,
    /// Physically separate planes (ports per NIC).
    pub planes: u32,
    /// Aggregation switches in each plane of each pod.
    pub aggs_per_plane: u32,
    /// Core switches, all planes together.
    pub cores: u32,
    /// Uplinks from every aggregation switch to the core layer.
    pub core_uplinks: u32,
    /// Whether the planes stay apart in the core layer.
    pub core: CoreLayer,
}

impl HpnParams {
    /// Core switches an aggregation switch can reach: its plane's, or
    /// every core when the core layer is shared.
    pub fn cores_per_plane(&self) -> u32 {
        match self.core {
            CoreLayer::PerPlane => self.cores / self.planes.max(1),
            CoreLayer::Shared => self.cores,
        }
    }
}

/// How an HPN core layer meets the planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CoreLayer {
    /// The planes continue through the core (HPN's design): the core
    /// switches are split into one group per plane, and a plane's
    /// aggregation switches link only to its group.
    #[default]
    PerPlane,
    /// Every core switch serves every plane (traffic can change planes at
    /// the core).
    Shared,
}

impl CoreLayer {
    /// The name in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            CoreLayer::PerPlane => "per-plane",
            CoreLayer::Shared => "shared",
        }
    }
}

impl fmt::Display for CoreLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
