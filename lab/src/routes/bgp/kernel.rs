//! Switches run by FRR or BIRD: their kernel tables, read and watched until
//! they hold what the plan says, and their sessions, asked of the daemons.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::bgp::plan::{self, Neighbour, Speaker};
use turbonet_routing::intern::Interner;

use super::BgpView;
use turbonet_api::bgp::SessionStatus;

use turbonet_host::namespaces;

/// Polls the kernel tables of FRR and BIRD switches every 10 ms until
/// each matches its expected FIB of plan `generation`, recording in `view`
/// when it first did (seconds after `epoch`), for at most two minutes.
pub(super) async fn watch_routers(
    mut routers: Vec<(usize, String, plan::FibDigest)>,
    view: Arc<BgpView>,
    generation: u64,
    epoch: Instant,
) {
    let deadline = epoch + Duration::from_secs(120);
    let mut handles = HashMap::new();
    while !routers.is_empty() && Instant::now() < deadline {
        let mut waiting = Vec::new();
        for (i, ns, expected) in routers {
            let handle = match handles.entry(i) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => match namespace_handle(&ns) {
                    Ok(h) => e.insert(h),
                    Err(_) => return,
                },
            };
            let fib = kernel_fib_of(&handle.0, &handle.1).await;
            if fib.is_ok_and(|fib| {
                plan::FibDigest::of(fib.iter().filter(|(p, _)| view.known.contains(p))) == expected
            }) {
                view.observe(i, generation, epoch.elapsed().as_secs_f64());
            } else {
                waiting.push((i, ns, expected));
            }
        }
        routers = waiting;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The routes routing daemons installed in a namespace's main table
/// (protocol bgp, as FRR's zebra and the built-in agents install them, or
/// bird): next hops by prefix.
pub(super) async fn kernel_fib(ns_name: &str) -> Result<plan::Fib> {
    let (ns, handle) = namespace_handle(ns_name)?;
    kernel_fib_of(&ns, &handle).await
}

/// A namespace, and an rtnetlink handle inside it.
fn namespace_handle(ns_name: &str) -> Result<(std::os::fd::OwnedFd, rtnetlink::Handle)> {
    let ns = namespaces::open(ns_name).with_context(|| format!("opening {ns_name}"))?;
    let handle =
        turbonet_host::kernel::connect(namespaces::in_namespace(&ns, namespaces::route_socket)?)?;
    Ok((ns, handle))
}

/// [`kernel_fib`] through an open handle into namespace `ns`.
async fn kernel_fib_of(ns: &std::os::fd::OwnedFd, handle: &rtnetlink::Handle) -> Result<plan::Fib> {
    let mut hops: BTreeMap<Ipv4Net, BTreeSet<Ipv4Addr>> = BTreeMap::new();
    for route in turbonet_host::kernel::table::read_table(handle, ns).await? {
        if matches!(route.protocol, RouteProtocol::Bgp | RouteProtocol::Bird) {
            hops.entry(route.prefix)
                .or_default()
                .extend(route.usable().filter_map(|h| h.via));
        }
    }
    let mut sets = Interner::default();
    Ok(hops
        .into_iter()
        .map(|(prefix, set)| (prefix, sets.intern(&Vec::from_iter(set))))
        .collect())
}

/// The sessions of an FRR or BIRD switch, as its daemon reports them
/// (`vtysh ... show bgp summary json`, `birdc show protocols`), matched to
/// the plan's neighbours by address (FRR) or protocol name (BIRD). Empty
/// when the daemon does not answer within a second.
pub(super) async fn router_sessions(
    lab: &str,
    speaker: &Speaker,
    kind: turbonet_topo::Agent,
) -> Vec<SessionStatus> {
    use turbonet_topo::Agent;
    let dir = crate::routes::routers::router_dir(&crate::state::LabDir::of(lab), &speaker.name);
    let mut command = match kind {
        Agent::Frr => {
            let mut c = tokio::process::Command::new("vtysh");
            c.arg("--vty_socket")
                .arg(&dir)
                .args(["-c", "show bgp ipv4 unicast summary json"]);
            c
        }
        Agent::Bird => {
            let mut c = tokio::process::Command::new("birdc");
            c.arg("-s")
                .arg(dir.join("bird.ctl"))
                .args(["show", "protocols"]);
            c
        }
        Agent::Builtin => return Vec::new(),
    };
    command.kill_on_drop(true);
    let Ok(Ok(out)) = tokio::time::timeout(Duration::from_secs(1), command.output()).await else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let session =
        |n: &Neighbour, state: String, since: Option<f64>, received: Option<usize>| SessionStatus {
            peer: n.peer_name.clone(),
            peer_addr: n.peer_addr,
            peer_asn: n.peer_asn,
            ifname: n.ifname.clone(),
            state,
            since,
            received,
            last_error: None,
        };
    match kind {
        Agent::Frr => {
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else {
                return Vec::new();
            };
            let peers = &json["peers"];
            speaker
                .neighbours
                .iter()
                .map(|n| {
                    let p = &peers[n.peer_addr.to_string()];
                    let state = p["state"].as_str().unwrap_or("unknown").to_lowercase();
                    let since = (state == "established")
                        .then(|| p["peerUptimeMsec"].as_f64().map(|ms| ms / 1000.0))
                        .flatten();
                    let received = p["pfxRcd"].as_u64().map(|n| n as usize);
                    session(n, state, since, received)
                })
                .collect()
        }
        _ => speaker
            .neighbours
            .iter()
            .map(|n| {
                let name = turbonet_routing::bgp::config::bird_symbol(n);
                let line = text
                    .lines()
                    .find(|l| l.split_whitespace().next() == Some(name.as_str()));
                // Name Proto Table State Since Info...
                let state = line
                    .map(|l| l.split_whitespace().skip(5).collect::<Vec<_>>().join(" "))
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "unknown".to_owned())
                    .to_lowercase();
                session(n, state, None, None)
            })
            .collect(),
    }
}
