//! A lab over several machines as the lab's commands on one of them see
//! it: which machine runs each node, and every machine's part reached
//! through its worker (its lab daemon's API, [`crate::workers::LabProxy`],
//! and the `Parts` service). The commands that read the lab ([`nodes`],
//! [`routes`], [`bgp`], [`link_show`], [`events`]) ask the machine that
//! runs what they are about, or every machine, and add up what they say;
//! on a lab on one machine they are [`crate::inspect`]'s.

use std::collections::HashMap;
use std::time::Duration;

use turbonet_api as api;
use turbonet_api::bgp::BgpReport;
use turbonet_topo::{Lab, LinkParams};

use crate::error::{Error, Result};
use crate::events::LoggedEvent;
use crate::inspect::{LinkShow, NodeRow, RouteRow, Running, SnapshotWritten, read_links};
use crate::span::{Placement, Span};
use crate::workers::Reach;

/// The parts of a lab spread over machines.
#[derive(Debug, Clone)]
pub struct Parts {
    placement: Placement,
    reach: Reach,
    span: Span,
    /// Each cut link's owner, by name.
    owners: HashMap<String, u32>,
    /// The machines of each cut link no link engine carries (each end
    /// shapes its own direction), by name.
    shaped_ends: HashMap<String, [u32; 2]>,
}

impl Parts {
    /// The parts of `running`, if it spans machines and this machine's
    /// worker recorded how to reach the others (`None`: the whole lab is
    /// here, or this machine's part runs on its own).
    pub fn of(running: &Running) -> Result<Option<Parts>> {
        let placement = running.dir.load()?.and_then(|st| st.placement);
        let reach = Reach::load(&running.dir);
        let (Some(placement), Some(reach)) = (placement, reach) else {
            return Ok(None);
        };
        let plan = turbonet_topo::machines::plan(&running.lab, placement.machines)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let span = Span::of(
            &plan,
            placement.machine,
            placement.underlay.clone(),
            placement.port,
        )?;
        let shaped_ends = (plan.cut_links.iter())
            .filter(|c| !c.engine)
            .map(|c| (c.link.clone(), c.machines))
            .collect();
        let owners = (plan.cut_links.into_iter())
            .map(|c| (c.link, c.owner))
            .collect();
        Ok(Some(Parts {
            placement,
            reach,
            span,
            owners,
            shaped_ends,
        }))
    }

    /// Every machine's reading of the links it carries (each link from
    /// the machine that [`Parts::machine_of_link`] names; `only`: that
    /// one), by machine: when its daemon counted them, and their counters.
    pub fn carried_links(
        &self,
        running: &Running,
        only: Option<&str>,
    ) -> Result<Vec<(f64, Vec<LinkShow>)>> {
        let mut readings = Vec::new();
        for (m, said) in self.ask_all(running, |c| {
            read_links(c, only).map_err(|e| api::Error::Failed(e.to_string()))
        }) {
            let (at, links) =
                said.map_err(|e| Error::Failed(format!("machine {m}'s links: {e}")))?;
            let mut carried = Vec::new();
            for link in links {
                if self.machine_of_link(&running.lab, &link.link)? == m {
                    carried.push(link);
                }
            }
            readings.push((at, carried));
        }
        Ok(readings)
    }

    /// This machine's index.
    pub fn here(&self) -> u32 {
        self.placement.machine
    }

    /// How many machines.
    pub fn machines(&self) -> u32 {
        self.placement.machines
    }

    /// The machine that runs node `name`.
    pub fn machine_of(&self, lab: &Lab, name: &str) -> Result<u32> {
        let node = crate::lookup::node(lab, name)?;
        Ok(self.span.share.machine_of(node.id))
    }

    /// The machine that reports link `name` (its name as the lab gives
    /// it): the one that runs both its ends, or for a cut link its owner,
    /// whose link engine carries both directions when one does.
    pub fn machine_of_link(&self, lab: &Lab, name: &str) -> Result<u32> {
        let link = crate::lookup::link(lab, name)?;
        if let Some(&owner) = self.owners.get(&link.name) {
            return Ok(owner);
        }
        Ok(self.span.share.machine_of(link.ends[0].node))
    }

    /// The machines whose daemons carry link `name`'s parameters: the one
    /// with both its ends; a cut link's owner, when its link engine
    /// carries both directions; or both of a cut link's machines, each
    /// shaping its own direction.
    pub fn machines_of_link(&self, lab: &Lab, name: &str) -> Result<Vec<u32>> {
        let link = crate::lookup::link(lab, name)?;
        Ok(match self.shaped_ends.get(&link.name) {
            Some(&[a, b]) => vec![a, b],
            None => vec![self.machine_of_link(lab, name)?],
        })
    }

    /// Machine `m`'s underlay address.
    pub fn underlay(&self, m: u32) -> Result<std::net::Ipv4Addr> {
        self.placement
            .underlay
            .get(m as usize)
            .copied()
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "machine {m}: the lab spans machines 0 to {}",
                    self.machines().saturating_sub(1)
                ))
            })
    }

    /// Where machine `m`'s worker listens (`http://ADDR:PORT`).
    pub fn endpoint(&self, m: u32) -> Result<String> {
        Ok(format!("http://{}:{}", self.underlay(m)?, self.reach.port))
    }

    /// A client of machine `m`'s lab daemon: this machine's over its
    /// socket, another's through its worker.
    pub fn client(&self, running: &Running, m: u32) -> Result<api::Client> {
        self.client_in(&running.dir, m)
    }

    /// [`Parts::client`], this machine's daemon being in `dir`.
    fn client_in(&self, dir: &crate::state::LabDir, m: u32) -> Result<api::Client> {
        if m == self.here() {
            return Ok(api::Client::connect(dir)?);
        }
        api::Client::remote(&self.endpoint(m)?, &self.reach.token)
            .map_err(|e| Error::Failed(format!("machine {m}: {e}")))
    }

    /// Node `node`'s routes, read on the machine that runs it.
    pub fn routes(&self, running: &Running, node: &str) -> Result<(String, Vec<RouteRow>)> {
        let m = self.machine_of(&running.lab, node)?;
        if m == self.here() {
            return crate::inspect::routes(&running.lab, node);
        }
        let endpoint = self.endpoint(m)?;
        let json = on_runtime(crate::workers::part_routes(
            &endpoint,
            &self.reach.token,
            &running.lab.name,
            node,
        ))??;
        serde_json::from_str(&json).map_err(|e| Error::Failed(format!("machine {m}'s routes: {e}")))
    }

    /// Every machine's answer to `ask`, by machine index, asked of them
    /// all at once.
    pub fn ask_all<T: Send>(
        &self,
        running: &Running,
        ask: impl Fn(&mut api::Client) -> api::Result<T> + Sync,
    ) -> Vec<(u32, Result<T>)> {
        std::thread::scope(|scope| {
            let asks: Vec<_> = (0..self.machines())
                .map(|m| {
                    let ask = &ask;
                    scope.spawn(move || {
                        let said = self
                            .client(running, m)
                            .and_then(|mut c| ask(&mut c).map_err(Error::from));
                        (m, said)
                    })
                })
                .collect();
            asks.into_iter()
                .zip(0..)
                .map(|(ask, m)| {
                    ask.join().unwrap_or_else(|_| {
                        (
                            m,
                            Err(Error::Failed("the thread asking it panicked".into())),
                        )
                    })
                })
                .collect()
        })
    }
}

/// Runs `future` on a runtime of its own (the commands are blocking).
fn on_runtime<T>(future: impl std::future::Future<Output = T>) -> Result<T> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), future)
            .await
            .map_err(|_| Error::Failed("the worker did not answer within 30 s".to_owned()))
    })
}

/// `show nodes [NODE]` of a running lab: on a lab over several machines,
/// each with the machine that runs it.
pub fn nodes(running: &Running, only: Option<&str>) -> Result<Vec<NodeRow>> {
    let mut rows = crate::inspect::nodes(&running.lab, only)?;
    if let Some(parts) = Parts::of(running)? {
        for row in &mut rows {
            row.machine = Some(parts.machine_of(&running.lab, &row.name)?);
        }
    }
    Ok(rows)
}

/// `show routes NODE` where the node runs: here, or through its machine's
/// worker on a lab over several machines.
pub fn routes(running: &Running, node: &str) -> Result<(String, Vec<RouteRow>)> {
    match Parts::of(running)? {
        Some(parts) => parts.routes(running, node),
        None => crate::inspect::routes(&running.lab, node),
    }
}

/// `turbonet link show [LINK]`: on a lab over several machines, each link
/// as the machine that carries it reports it (the one with both its ends,
/// or a cut link's owner).
pub fn link_show(running: &Running, only: Option<&str>) -> Result<Vec<LinkShow>> {
    let Some(parts) = Parts::of(running)? else {
        return crate::inspect::link_show(running, only);
    };
    let mut links: Vec<LinkShow> = (parts.carried_links(running, only)?.into_iter())
        .flat_map(|(_, links)| links)
        .collect();
    // In the lab's link order, as on one machine.
    let order: HashMap<&str, usize> = (running.lab.fabric.links.iter())
        .enumerate()
        .map(|(i, l)| (l.name.as_str(), i))
        .collect();
    links.sort_by_key(|l| order.get(l.link.as_str()).copied().unwrap_or(usize::MAX));
    Ok(links)
}

/// `show bgp [NODE]`: the lab's speakers (or `node`'s), from every machine
/// that runs them on a lab over several.
pub fn bgp(running: &Running, node: Option<&str>) -> Result<BgpReport> {
    let Some(parts) = Parts::of(running)? else {
        return Ok(api::Client::connect(&running.dir)?.bgp(node)?);
    };
    if let Some(node) = node {
        let m = parts.machine_of(&running.lab, node)?;
        return parts
            .client(running, m)?
            .bgp(Some(node))
            .map_err(|e| Error::Failed(format!("machine {m}: {e}")));
    }
    let mut merged: Option<BgpReport> = None;
    for (m, said) in parts.ask_all(running, |c| c.bgp(None)) {
        let report = said.map_err(|e| Error::Failed(format!("machine {m}'s speakers: {e}")))?;
        merged = Some(match merged {
            None => report,
            Some(mut all) => {
                all.elapsed = all.elapsed.max(report.elapsed);
                all.since_change = match (all.since_change, report.since_change) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                all.speakers.extend(report.speakers);
                all
            }
        });
    }
    let mut report = merged.ok_or_else(|| Error::Failed("no machine answered".to_owned()))?;
    let order: HashMap<&str, usize> = (running.lab.fabric.nodes.iter())
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    report
        .speakers
        .sort_by_key(|s| order.get(s.node.as_str()).copied().unwrap_or(usize::MAX));
    Ok(report)
}

/// `turbonet link set LINK` (`patch`) or `link reset LINK` (`None`): on
/// a lab over several machines, made by every machine that carries the
/// link ([`Parts::machines_of_link`]), each saying what it did.
pub fn set_link(running: &Running, link: &str, patch: Option<&LinkParams>) -> Result<String> {
    let set = |c: &mut api::Client| match patch {
        Some(patch) => c.set_link(link, patch),
        None => c.reset_link(link),
    };
    let Some(parts) = Parts::of(running)? else {
        return Ok(set(&mut api::Client::connect(&running.dir)?)?);
    };
    let mut said = Vec::new();
    for m in parts.machines_of_link(&running.lab, link)? {
        let done = parts
            .client(running, m)
            .and_then(|mut c| set(&mut c).map_err(Error::from))
            .map_err(|e| Error::Failed(format!("machine {m}: {e}")))?;
        said.push(format!("machine {m}: {done}"));
    }
    Ok(said.join("\n"))
}

/// `turbonet snapshot DIR`: on a lab over several machines, one snapshot
/// of every part: each switch's forwarding table, RIBs and router
/// configuration from the machine that runs it, the rest (the fabric,
/// its failures) as this machine's daemon says it.
pub fn snapshot(running: &Running, dir: &std::path::Path) -> Result<SnapshotWritten> {
    let Some(parts) = Parts::of(running)? else {
        return crate::inspect::snapshot(running, dir);
    };
    let mut all = None;
    let mut files = Vec::new();
    let mut parts_said = Vec::new();
    for (m, said) in parts.ask_all(running, api::Client::snapshot) {
        let response = said.map_err(|e| Error::Failed(format!("machine {m}'s snapshot: {e}")))?;
        let value: serde_json::Value = serde_json::from_str(&response.json)?;
        files.extend(response.files);
        if m == parts.here() {
            all = Some(value.clone());
        }
        parts_said.push((m, value));
    }
    // This machine's view of the whole, each switch's tables and
    // configuration from the machine that runs it.
    let mut value = all.ok_or_else(|| Error::Failed("this machine did not answer".to_owned()))?;
    for key in ["fib", "rib", "configs"] {
        let mut merged = serde_json::Map::new();
        for (m, part) in &parts_said {
            for (switch, entry) in part[key].as_object().into_iter().flatten() {
                if parts.machine_of(&running.lab, switch)? == *m {
                    merged.insert(switch.clone(), entry.clone());
                }
            }
        }
        value[key] = serde_json::Value::Object(merged);
    }
    crate::inspect::write_snapshot(
        dir,
        &api::proto::SnapshotResponse {
            json: serde_json::to_string_pretty(&value)?,
            files,
        },
    )
}

/// `turbonet events [--follow]`: every event so far, in order, handed to
/// `each`; with `follow`, then each new one as it happens, until `each`
/// returns `false`. On a lab over several machines, every machine's, as
/// one log ([`merged_events`], [`follow_events`]).
pub fn events(
    running: &Running,
    follow: bool,
    mut each: impl FnMut(LoggedEvent) -> bool,
) -> Result<()> {
    match Parts::of(running)? {
        None => crate::inspect::events(running, follow, each),
        Some(parts) if follow => follow_events(&parts, running, each),
        Some(parts) => {
            for e in merged_events(&parts, running)? {
                if !each(e) {
                    break;
                }
            }
            Ok(())
        }
    }
}

/// The lab's events from every machine, as one log: in the order they
/// happened (by Unix time), each with its machine, its `t` counted from
/// the earliest machine's start. A machine that does not answer is an
/// error naming it.
pub fn merged_events(parts: &Parts, running: &Running) -> Result<Vec<LoggedEvent>> {
    let mut all = Vec::new();
    for (m, said) in parts.ask_all(running, |c| {
        let mut events = Vec::new();
        c.events(false, |e| {
            events.push(e);
            true
        })?;
        Ok(events)
    }) {
        let events = said.map_err(|e| Error::Failed(format!("machine {m}'s events: {e}")))?;
        all.extend(events.into_iter().map(|mut e| {
            e.machine = Some(m);
            e
        }));
    }
    let origin = all
        .iter()
        .map(|e| e.unix - e.t)
        .fold(f64::INFINITY, f64::min);
    for e in &mut all {
        e.t = e.unix - origin;
    }
    all.sort_by(|a, b| a.unix.total_cmp(&b.unix));
    Ok(all)
}

/// Follows every machine's events: those so far merged as [`events`]
/// merges them ([`merged_events`]), then each new one as it arrives here, with its machine,
/// until `each` says stop or every machine's stream ends.
pub fn follow_events(
    parts: &Parts,
    running: &Running,
    mut each: impl FnMut(LoggedEvent) -> bool,
) -> Result<()> {
    let so_far = merged_events(parts, running)?;
    let mut origin = so_far.first().map(|e| e.unix - e.t);
    // A machine's stream gives its log from the start: what was handed out
    // already is skipped, by count (the log only grows).
    let mut seen = vec![0usize; parts.machines() as usize];
    for e in so_far {
        if let Some(n) = e.machine.and_then(|m| seen.get_mut(m as usize)) {
            *n += 1;
        }
        if !each(e) {
            return Ok(());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel::<(u32, Result<LoggedEvent>)>();
    for m in 0..parts.machines() {
        let (tx, parts, dir) = (tx.clone(), parts.clone(), running.dir.clone());
        let mut skip = seen[m as usize];
        // Not joined: a stream ends only with its daemon, or with the
        // process once `each` says stop.
        std::thread::spawn(move || {
            let said = parts.client_in(&dir, m).and_then(|mut c| {
                c.events(true, |e| {
                    if skip > 0 {
                        skip -= 1;
                        return true;
                    }
                    tx.send((m, Ok(e))).is_ok()
                })
                .map_err(Error::from)
            });
            if let Err(e) = said {
                let _ = tx.send((m, Err(e)));
            }
        });
    }
    drop(tx);
    for (m, said) in rx {
        let mut e = said.map_err(|e| Error::Failed(format!("machine {m}'s events: {e}")))?;
        let o = *origin.get_or_insert(e.unix - e.t);
        e.t = e.unix - o;
        e.machine = Some(m);
        if !each(e) {
            break;
        }
    }
    Ok(())
}
