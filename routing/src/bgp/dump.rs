//! A speaker's RIBs as data, for snapshots a verifier compares its
//! predictions with: every neighbour's Adj-RIB-In with the path attributes
//! received (RFC 4271 §3.2), and the Loc-RIB with the routes selected and
//! the next hops the FIB was given.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::attribute::{Origin, PathAttributes, SegmentType};
use super::speaker::Speaker;

/// One speaker's RIBs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RibDump {
    /// The switch.
    pub node: String,
    /// Its AS.
    pub asn: u32,
    /// Its BGP Identifier.
    pub router_id: Ipv4Addr,
    /// Per neighbour, in the plan's order: the routes it sent that passed
    /// the loop check.
    pub adj_rib_in: Vec<AdjRibIn>,
    /// What route selection chose, in prefix order.
    pub loc_rib: Vec<LocRoute>,
}

/// One neighbour's Adj-RIB-In.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdjRibIn {
    /// The neighbour (a switch, or `external <port>`).
    pub peer: String,
    /// Its address on the session.
    pub peer_address: Ipv4Addr,
    /// Its AS.
    pub peer_asn: u32,
    /// The local port the session runs over.
    pub ifname: String,
    /// Its routes, in prefix order.
    pub routes: Vec<Route>,
}

/// A route as received, with its path attributes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Route {
    /// The destination.
    pub prefix: Ipv4Net,
    /// ORIGIN: `igp`, `egp`, `incomplete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
    /// AS_PATH, nearest AS first; an AS_SET is written `{a,b}`.
    pub as_path: Vec<String>,
    /// NEXT_HOP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<Ipv4Addr>,
    /// MULTI_EXIT_DISC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub med: Option<u32>,
    /// LOCAL_PREF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pref: Option<u32>,
}

/// A Loc-RIB entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocRoute {
    /// The destination.
    pub prefix: Ipv4Net,
    /// Originated by this speaker.
    pub local: bool,
    /// The AS_PATH length of the selected route.
    pub as_path_len: usize,
    /// The ECMP set: the neighbour and NEXT_HOP of each route used.
    pub next_hops: Vec<LocHop>,
}

/// One route of an ECMP set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocHop {
    /// The neighbour it came from.
    pub peer: String,
    /// Its NEXT_HOP.
    pub next_hop: Ipv4Addr,
}

fn route(prefix: Ipv4Net, a: &PathAttributes) -> Route {
    Route {
        prefix,
        origin: a.origin,
        as_path: a
            .as_path
            .iter()
            .flat_map(|p| &p.segments)
            .flat_map(|s| match s.kind {
                SegmentType::AsSequence | SegmentType::ConfedSequence => {
                    s.asns.iter().map(ToString::to_string).collect::<Vec<_>>()
                }
                SegmentType::AsSet | SegmentType::ConfedSet => vec![format!(
                    "{{{}}}",
                    s.asns
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                )],
            })
            .collect(),
        next_hop: a.next_hop,
        med: a.med,
        local_pref: a.local_pref,
    }
}

/// The RIBs of `speaker` now.
pub fn rib(speaker: &Speaker) -> RibDump {
    let plan = speaker.plan();
    let rib = speaker.rib();
    let name = |peer: u32| {
        plan.neighbours
            .get(peer as usize)
            .map_or_else(|| format!("peer {peer}"), |n| n.peer_name.clone())
    };
    RibDump {
        node: plan.name.clone(),
        asn: plan.asn,
        router_id: plan.router_id,
        adj_rib_in: plan
            .neighbours
            .iter()
            .enumerate()
            .map(|(i, n)| AdjRibIn {
                peer: n.peer_name.clone(),
                peer_address: n.peer_addr,
                peer_asn: n.peer_asn,
                ifname: n.ifname.clone(),
                routes: rib
                    .adj_rib_in(i as u32)
                    .map(|(p, a)| route(*p, a))
                    .collect(),
            })
            .collect(),
        loc_rib: rib
            .loc_rib()
            .map(|(p, best)| LocRoute {
                prefix: *p,
                local: best.local,
                as_path_len: best.as_path_len,
                next_hops: best
                    .nexthops
                    .iter()
                    .map(|(peer, hop)| LocHop {
                        peer: name(*peer),
                        next_hop: *hop,
                    })
                    .collect(),
            })
            .collect(),
    }
}
