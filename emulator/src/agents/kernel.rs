//! The kernel tables of switches run by FRR or BIRD: read, and watched
//! until they hold what the plan says.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ipnet::Ipv4Net;
use rtnetlink::packet_route::route::RouteProtocol;
use turbonet_routing::bgp::plan;

use crate::{fabric, netns};

/// Polls the kernel tables of FRR and BIRD switches every 10 ms until
/// each matches its expected FIB, recording when it first did (seconds
/// after `epoch`), for at most two minutes.
pub(super) async fn watch_routers(
    mut routers: Vec<(usize, String, plan::FibDigest)>,
    known: BTreeSet<Ipv4Net>,
    epoch: Instant,
    observed: Rc<RefCell<HashMap<usize, f64>>>,
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
            let fib = kernel_fib_of(handle).await;
            if fib.is_ok_and(|fib| {
                plan::FibDigest::of(fib.iter().filter(|(p, _)| known.contains(p))) == expected
            }) {
                observed
                    .borrow_mut()
                    .insert(i, epoch.elapsed().as_secs_f64());
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
    kernel_fib_of(&namespace_handle(ns_name)?).await
}

/// An rtnetlink handle inside a namespace.
fn namespace_handle(ns_name: &str) -> Result<rtnetlink::Handle> {
    let ns = netns::open(ns_name).with_context(|| format!("opening {ns_name}"))?;
    fabric::connect(netns::in_namespace(&ns, netns::route_socket)?)
}

/// [`kernel_fib`] through an open handle.
async fn kernel_fib_of(handle: &rtnetlink::Handle) -> Result<plan::Fib> {
    use futures::TryStreamExt;
    use rtnetlink::packet_route::route::{RouteAddress, RouteAttribute};
    let mut routes = handle
        .route()
        .get(rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new().build())
        .execute();
    let mut fib = plan::Fib::new();
    while let Some(route) = routes.try_next().await? {
        if !matches!(
            route.header.protocol,
            RouteProtocol::Bgp | RouteProtocol::Bird
        ) {
            continue;
        }
        let mut destination = Ipv4Addr::UNSPECIFIED;
        let mut hops = BTreeSet::new();
        for attribute in &route.attributes {
            match attribute {
                RouteAttribute::Destination(RouteAddress::Inet(d)) => destination = *d,
                RouteAttribute::Gateway(RouteAddress::Inet(g)) => {
                    hops.insert(*g);
                }
                RouteAttribute::MultiPath(nexthops) => {
                    for nh in nexthops {
                        for a in &nh.attributes {
                            if let RouteAttribute::Gateway(RouteAddress::Inet(g)) = a {
                                hops.insert(*g);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        if let Ok(prefix) = Ipv4Net::new(destination, route.header.destination_prefix_length) {
            fib.entry(prefix).or_default().extend(hops);
        }
    }
    Ok(fib)
}
