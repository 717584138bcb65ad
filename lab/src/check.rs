//! `turbonet check`: every host reaches every other host.
//!
//! One raw ICMP socket per host, created inside the host's namespace. Echo
//! requests to every address of every other host go out in rounds; replies
//! are matched by identifier and a payload that names the pair, so thousands
//! of probes share a few sockets. Pairs still unanswered are retried each
//! round (the first packets to a neighbour may be dropped while ARP
//! resolves).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::Serialize;
use socket2::Socket;
use turbonet_packetio::icmp;

use crate::error::{Context, Error, Result};
use crate::inspect::Running;
use turbonet_host::namespaces;

const ROUNDS: u32 = 4;

/// One probe: from a host to one address of another host.
struct Probe {
    from: usize,
    to: usize,
    addr: Ipv4Addr,
}

/// A probe that got no answer.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Failure {
    /// The host it was sent from.
    pub from: String,
    /// The host it was for.
    pub to: String,
    /// The address it was sent to.
    pub address: Ipv4Addr,
}

/// What `check` found.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Report {
    /// The lab.
    pub lab: String,
    /// On one machine of a lab over several, which (`machine 1 of 2`):
    /// the hosts probed from are those that run here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<String>,
    /// Hosts probed from.
    pub hosts: usize,
    /// Probes sent (one per host pair and address).
    pub probes: usize,
    /// Probes answered.
    pub reachable: usize,
    /// Hosts probed behind each first switch (`None`: every host).
    pub sample: Option<usize>,
    /// How long it took.
    pub seconds: f64,
    /// Every probe not answered.
    pub failures: Vec<Failure>,
    /// On a lab over several machines, the machines whose workers did not
    /// answer (their hosts' probes are not in the report), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// `turbonet check`: every host pings every address of every other host
/// from its own namespace; unanswered probes are retried in up to 4 rounds
/// within `timeout` seconds.
pub fn check(running: &Running, timeout: f64) -> Result<Report> {
    check_sampled(running, timeout, None)
}

/// [`check`], with `sample`: every host probes every address of `sample`
/// hosts behind each ToR, edge or leaf (each group of hosts that share
/// their first switch: an HPN segment), chosen by the lab's seed, instead
/// of every host; so a fabric of thousands of hosts is checked in every
/// segment in seconds.
pub fn check_sampled(running: &Running, timeout: f64, sample: Option<usize>) -> Result<Report> {
    let lab = &running.lab;
    if lab.target == turbonet_topo::Target::P4rt && !crate::dataplane::p4::switches::local(lab) {
        return Err(Error::Invalid(
            "`check` pings between the hosts' namespaces; on target \"p4rt\" the hosts are the \
             servers cabled to the switches' host ports (`turbonet plan` lists them): ping \
             from those"
                .to_owned(),
        ));
    }
    let hosts: Vec<_> = lab.fabric.hosts().collect();
    let addrs: Vec<Vec<Ipv4Addr>> = hosts.iter().map(|h| addresses(lab, h.id)).collect();
    let targets = targets(lab, &hosts, sample);
    // On one machine of several, from the hosts that run here.
    let placement = running.dir.load()?.and_then(|st| st.placement);
    let span = crate::span::Placement::span_of(placement.as_ref(), lab)?;
    let part = placement.map(|p| format!("machine {} of {}", p.machine, p.machines));
    let probes: Vec<Probe> = (0..hosts.len())
        .filter(|&from| span.runs(hosts[from].id))
        .flat_map(|from| {
            let addrs = &addrs;
            targets(from)
                .into_iter()
                .filter(move |&to| to != from)
                .flat_map(move |to| addrs[to].iter().map(move |&addr| Probe { from, to, addr }))
        })
        .collect();
    let start = Instant::now();
    // The senders here, by the index of their probes.
    let here: Vec<usize> = (0..hosts.len())
        .filter(|&h| span.runs(hosts[h].id))
        .collect();
    let senders: Vec<turbonet_topo::NodeId> = here.iter().map(|&h| hosts[h].id).collect();
    let wanted: Vec<(usize, Ipv4Addr)> = (probes.iter())
        .map(|p| (here.binary_search(&p.from).unwrap_or_default(), p.addr))
        .collect();
    let answered = probe(lab, &senders, &wanted, timeout)?;

    let failures: Vec<Failure> = probes
        .iter()
        .zip(&answered)
        .filter(|(_, ok)| !**ok)
        .map(|(p, _)| Failure {
            from: hosts[p.from].name.clone(),
            to: hosts[p.to].name.clone(),
            address: p.addr,
        })
        .collect();
    Ok(Report {
        lab: lab.name.clone(),
        part,
        hosts: senders.len(),
        probes: probes.len(),
        reachable: probes.len() - failures.len(),
        sample,
        seconds: start.elapsed().as_secs_f64(),
        failures,
        missing: Vec::new(),
    })
}

/// [`check_sampled`] of the whole lab: on one machine of a lab over several
/// (whose worker recorded how to reach the others), from this machine's
/// hosts and, through each other machine's worker, from its hosts, at
/// once; a machine whose worker does not answer is said in `missing`.
pub fn check_lab(running: &Running, timeout: f64, sample: Option<usize>) -> Result<Report> {
    let placement = running.dir.load()?.and_then(|st| st.placement);
    let reach = crate::workers::Reach::load(&running.dir);
    let (Some(placement), Some(reach)) = (placement, reach) else {
        return check_sampled(running, timeout, sample);
    };
    let others: Vec<(u32, String)> = (0..placement.machines)
        .filter(|m| *m != placement.machine)
        .filter_map(|m| {
            let at = placement.underlay.get(m as usize)?;
            Some((m, format!("http://{at}:{}", reach.port)))
        })
        .collect();
    let lab = running.lab.name.clone();
    let (here, there) = std::thread::scope(|scope| {
        let here = scope.spawn(|| check_sampled(running, timeout, sample));
        let there = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(|runtime| {
                runtime.block_on(futures::future::join_all(others.iter().map(
                    |(m, endpoint)| {
                        let (lab, token) = (&lab, &reach.token);
                        async move {
                            let said = tokio::time::timeout(
                                Duration::from_secs_f64(timeout * 5.0 + 30.0),
                                crate::workers::part_check(endpoint, token, lab, timeout, sample),
                            )
                            .await
                            .unwrap_or_else(|_| {
                                Err(Error::Failed(format!(
                                    "the worker at {endpoint} did not answer"
                                )))
                            });
                            (*m, said)
                        }
                    },
                )))
            });
        (here.join(), there)
    });
    let mut report = here.map_err(|_| Error::Failed("the check thread panicked".to_owned()))??;
    report.part = Some(format!("all {} machines", placement.machines));
    for (m, said) in there? {
        let theirs = said.and_then(|json| {
            serde_json::from_str::<Report>(&json)
                .map_err(|e| Error::Failed(format!("its report: {e}")))
        });
        match theirs {
            Ok(r) => {
                report.hosts += r.hosts;
                report.probes += r.probes;
                report.reachable += r.reachable;
                report.seconds = report.seconds.max(r.seconds);
                report.failures.extend(r.failures);
            }
            Err(e) => report.missing.push(format!("machine {m}: {e}")),
        }
    }
    Ok(report)
}

/// Every address of `node`'s ports, ascending, once each: what a probe
/// for `node` is sent to.
pub fn addresses(lab: &turbonet_topo::Lab, node: turbonet_topo::NodeId) -> Vec<Ipv4Addr> {
    let mut a: Vec<Ipv4Addr> = lab
        .fabric
        .ports(node)
        .map(|(_, local, _)| local.addr.addr())
        .collect();
    a.sort();
    a.dedup();
    a
}

/// Pings: each of `probes` is (an index into `senders`, an address), sent
/// from that node's namespace in up to 4 rounds within `timeout` seconds.
/// Whether each was answered.
pub fn probe(
    lab: &turbonet_topo::Lab,
    senders: &[turbonet_topo::NodeId],
    probes: &[(usize, Ipv4Addr)],
    timeout: f64,
) -> Result<Vec<bool>> {
    crate::limits::raise_fd_limit(senders.len() + 256, "probes (a socket per sending node)")?;
    let name = |i: usize| lab.fabric.node(senders[i]).name.as_str();
    let sockets = (0..senders.len())
        .map(|i| {
            let ns_name = crate::names::node_namespace(&lab.name, name(i));
            let ns = namespaces::open(&ns_name)
                .with_context(|| format!("opening namespace {ns_name}"))?;
            namespaces::in_namespace(&ns, icmp::socket)
                .with_context(|| format!("ICMP socket in {}", name(i)))
        })
        .collect::<Result<Vec<_>>>()?;

    let ident = (std::process::id() & 0xffff) as u16;
    let mut answered = vec![false; probes.len()];
    let wait = Duration::from_secs_f64(timeout.max(0.05));
    let mut per_sender: Vec<Vec<usize>> = vec![Vec::new(); senders.len()];
    for (i, (from, _)) in probes.iter().enumerate() {
        per_sender[*from].push(i);
    }
    let mut send_errors = 0usize;
    for round in 0..ROUNDS {
        for (sender, list) in per_sender.iter().enumerate() {
            for chunk in list.chunks(128) {
                for &i in chunk.iter().filter(|&&i| !answered[i]) {
                    let packet = icmp::echo_request(ident, round as u16, i as u32);
                    let to = SocketAddrV4::new(probes[i].1, 0);
                    // A full send buffer is a lost probe; the next round retries.
                    if let Err(e) = sockets[sender].send_to(&packet, &to.into()) {
                        tracing::debug!("probe from {}: {e}", name(sender));
                        send_errors += 1;
                    }
                }
                // Replies come back to the sender: keep its buffer drained.
                drain(&sockets[sender..=sender], ident, &mut answered);
            }
        }
        // Wait for stragglers: later rounds wait longer.
        let round_end = Instant::now() + wait.mul_f64(f64::from(round + 1) / f64::from(ROUNDS));
        while Instant::now() < round_end && answered.iter().any(|a| !a) {
            wait_readable(
                &sockets,
                round_end.saturating_duration_since(Instant::now()),
            )?;
            drain(&sockets, ident, &mut answered);
        }
        tracing::info!(
            round,
            send_errors,
            answered = answered.iter().filter(|a| **a).count(),
            "round done"
        );
        if answered.iter().all(|a| *a) {
            break;
        }
    }
    Ok(answered)
}

/// Which hosts (indices into `hosts`) each host probes: every host, or
/// `sample` of each group of hosts sharing their first switch, picked by
/// the lab's seed and the prober.
fn targets<'a>(
    lab: &'a turbonet_topo::Lab,
    hosts: &'a [&'a turbonet_topo::Node],
    sample: Option<usize>,
) -> impl Fn(usize) -> Vec<usize> + 'a {
    let mut groups: std::collections::BTreeMap<Option<turbonet_topo::NodeId>, Vec<usize>> =
        std::collections::BTreeMap::new();
    if sample.is_some() {
        for (i, h) in hosts.iter().enumerate() {
            let first = lab
                .fabric
                .ports(h.id)
                .next()
                .map(|(_, _, remote)| remote.node);
            groups.entry(first).or_default().push(i);
        }
    }
    move |from| match sample {
        None => (0..hosts.len()).collect(),
        Some(k) => {
            let start = turbonet_topo::seed::for_name(lab.seed, &hosts[from].name) as usize;
            groups
                .values()
                .flat_map(|members| {
                    (0..k.min(members.len())).map(move |j| members[(start + j) % members.len()])
                })
                .collect()
        }
    }
}

/// Reads every pending reply on every socket and marks its probe answered.
fn drain(sockets: &[Socket], ident: u16, answered: &mut [bool]) {
    for socket in sockets {
        icmp::drain(socket, ident, |probe| {
            if let Some(a) = answered.get_mut(probe as usize) {
                *a = true;
            }
        });
    }
}

fn wait_readable(sockets: &[Socket], timeout: Duration) -> Result<()> {
    let mut fds: Vec<PollFd<'_>> = sockets
        .iter()
        .map(|s| PollFd::new(s.as_fd(), PollFlags::POLLIN))
        .collect();
    let ms = timeout.as_millis().clamp(1, 1000) as u16;
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
