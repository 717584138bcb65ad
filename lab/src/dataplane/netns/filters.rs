//! `[[filter]]`s at ports, attached by the lab daemon in the nodes'
//! namespaces, and their pass and drop counters.
//!
//! - **nftables**: the filter's rules become a regular chain `rules` of a
//!   table `tn_<filter>` of the `netdev` family, jumped to from a base
//!   chain on the port's ingress or egress hook that counts every frame it
//!   sees. Every rule whose verdict drops (`drop`, `reject`) gets a
//!   counter in front of its verdict, so the frames dropped are the sum of
//!   those counters and the frames passed the rest. The rules go through
//!   nftables' own front end (`nft`, its JSON interface to read them back):
//!   nft's syntax is the filter's language, and only nft parses it.
//! - **eBPF**: the object is loaded with aya; a `tc` program is attached as
//!   a direct-action classifier on the port's clsact qdisc (netlink, so it
//!   stays attached while the daemon restarts), whose own statistics count
//!   every frame the hook saw and every frame the program dropped
//!   (`TC_ACT_SHOT`); an `xdp` program is attached in driver mode, held by
//!   the daemon, and counted by the veth's XDP statistics.
//!
//! A filter that cannot attach fails the daemon's start, so `up` fails and
//! rolls back with the reason.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;
use serde_json::Value;
use turbonet_topo::{Attach, Filter, FilterKind, Hook, Lab};

use crate::error::{Context, Error, Result};
use crate::names;
use turbonet_host::namespaces;

/// A filter's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FilterCounters {
    /// The filter.
    pub name: String,
    /// Its node and port.
    pub node: String,
    /// ...
    pub port: String,
    /// The link of that port.
    pub link: String,
    /// `ingress` or `egress`.
    pub hook: String,
    /// `nft`, `ebpf-tc` or `ebpf-xdp`.
    pub kind: String,
    /// Frames it saw.
    pub seen: u64,
    /// Frames it dropped.
    pub dropped: u64,
}

impl FilterCounters {
    /// Frames it let through.
    pub fn passed(&self) -> u64 {
        self.seen.saturating_sub(self.dropped)
    }
}

/// One attached filter.
struct Attached {
    spec: Filter,
    node: String,
    link: String,
    ns: OwnedFd,
    how: How,
}

enum How {
    /// An nftables table.
    Nft { table: String },
    /// A tc classifier on the port's clsact qdisc, whose statistics are
    /// read over `netlink` (opened on the first read, in the runtime that
    /// reads them).
    Tc {
        ifindex: u32,
        netlink: Option<rtnetlink::Handle>,
        _ebpf: aya::Ebpf,
    },
    /// An XDP program, attached while `_ebpf` lives.
    Xdp { ifname: String, _ebpf: aya::Ebpf },
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attached")
            .field("filter", &self.spec.name)
            .finish_non_exhaustive()
    }
}

/// A lab's attached filters.
#[derive(Debug, Default)]
pub struct Filters(Vec<Attached>);

/// The nftables table of a filter.
pub fn table_name(filter: &str) -> String {
    format!("tn_{}", filter.replace('-', "_"))
}

/// Where the daemon keeps a lab's eBPF objects: `up` copies them there,
/// so the files the scenario named can change afterwards.
pub fn object_path(dir: &crate::state::LabDir, filter: &str) -> std::path::PathBuf {
    dir.path().join("filters").join(format!("{filter}.o"))
}

/// Runs `nft` with `args` in namespace `ns`, `input` on its standard
/// input; its standard output, or its error message.
fn nft(ns: &OwnedFd, args: &[&str], input: Option<&str>) -> Result<String> {
    let out = namespaces::in_namespace(ns, || {
        let mut child = Command::new("nft")
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            use std::io::Write;
            stdin.write_all(text.as_bytes())?;
        }
        child.wait_with_output()
    })
    .map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Refused(
            "nftables filters need the `nft` program (Debian: apt-get install nftables)".to_owned(),
        ),
        _ => Error::from(e),
    })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Invalid(
            String::from_utf8_lossy(&out.stderr).trim_end().to_owned(),
        ))
    }
}

/// The nft text of a filter's table: its rules as a chain, jumped to from
/// a counting base chain on the port's hook. Adding the table and deleting
/// it first makes loading it again (a restarted daemon) replace it.
fn nft_table(table: &str, port: &str, hook: Hook, rules: &str) -> String {
    format!(
        "add table netdev {table}\ndelete table netdev {table}\n\
         table netdev {table} {{\n\
         \tchain rules {{\n{rules}\n\t}}\n\
         \tchain filter {{\n\
         \t\ttype filter hook {hook} device \"{port}\" priority 0; policy accept;\n\
         \t\tcounter jump rules\n\
         \t}}\n\
         }}\n"
    )
}

/// The verdict statements that drop a frame.
const DROPS: [&str; 2] = ["drop", "reject"];

/// The position of a rule's verdict statement, if it has one.
fn verdict(expr: &[Value]) -> Option<(usize, &str)> {
    expr.iter().enumerate().find_map(|(i, e)| {
        let key = e.as_object()?.keys().next()?;
        [
            "drop", "reject", "accept", "jump", "goto", "return", "continue", "queue",
        ]
        .contains(&key.as_str())
        .then_some((i, key.as_str()))
    })
}

/// The rules of a filter's chain that drop without counting, given a
/// counter in front of their verdict: `replace` commands for `nft -j`.
fn counted_rules(listing: &Value, table: &str) -> Vec<Value> {
    let mut replace = Vec::new();
    for item in listing["nftables"].as_array().into_iter().flatten() {
        let Some(rule) = item.get("rule") else {
            continue;
        };
        if rule["chain"] != "rules" {
            continue;
        }
        let Some(expr) = rule["expr"].as_array() else {
            continue;
        };
        let Some((at, kind)) = verdict(expr) else {
            continue;
        };
        let counted = at > 0 && expr[at - 1].get("counter").is_some();
        if !DROPS.contains(&kind) || counted {
            continue;
        }
        let mut expr = expr.clone();
        expr.insert(
            at,
            serde_json::json!({"counter": {"packets": 0, "bytes": 0}}),
        );
        replace.push(serde_json::json!({"replace": {"rule": {
            "family": "netdev",
            "table": table,
            "chain": "rules",
            "handle": rule["handle"],
            "expr": expr,
        }}}));
    }
    replace
}

/// A filter's counters from its table's listing: the base chain's counter
/// (seen) and the counters in front of dropping verdicts.
fn nft_counters(listing: &Value) -> (u64, u64) {
    let (mut seen, mut dropped) = (0, 0);
    for item in listing["nftables"].as_array().into_iter().flatten() {
        let Some(rule) = item.get("rule") else {
            continue;
        };
        let Some(expr) = rule["expr"].as_array() else {
            continue;
        };
        let packets = |e: &Value| e.get("counter").and_then(|c| c["packets"].as_u64());
        if rule["chain"] == "filter" {
            seen += expr.iter().find_map(packets).unwrap_or(0);
        } else if let Some((at, kind)) = verdict(expr)
            && DROPS.contains(&kind)
            && at > 0
        {
            dropped += packets(&expr[at - 1]).unwrap_or(0);
        }
    }
    (seen, dropped)
}

impl Filters {
    /// Attaches every `[[filter]]` of `lab` (eBPF objects from the lab's
    /// directory `dir`).
    pub fn attach(lab: &Lab, dir: &crate::state::LabDir) -> Result<Filters> {
        let mut attached = Vec::new();
        for f in &lab.filters {
            let node = lab.fabric.node(f.node);
            let ns_name = names::node_namespace(&lab.name, &node.name);
            let ns = namespaces::open(&ns_name).with_context(|| format!("opening {ns_name}"))?;
            let ifindex = lab
                .fabric
                .ports(f.node)
                .position(|(_, local, _)| local.ifname == f.port)
                .map(names::port_ifindex)
                .ok_or_else(|| Error::Invalid(format!("{} has no port {}", node.name, f.port)))?;
            let how = match &f.kind {
                FilterKind::Nft { rules } => {
                    let table = table_name(&f.name);
                    nft(
                        &ns,
                        &["-f", "-"],
                        Some(&nft_table(&table, &f.port, f.hook, rules)),
                    )
                    .map_err(|e| {
                        Error::Invalid(format!(
                            "filter {} (nftables, {} port {}): {e}",
                            f.name, node.name, f.port
                        ))
                    })?;
                    let listing: Value = serde_json::from_str(&nft(
                        &ns,
                        &["-j", "list", "table", "netdev", &table],
                        None,
                    )?)?;
                    let replace = counted_rules(&listing, &table);
                    if !replace.is_empty() {
                        let payload = serde_json::json!({ "nftables": replace }).to_string();
                        nft(&ns, &["-j", "-f", "-"], Some(&payload))
                            .with_context(|| format!("filter {}: counting its drops", f.name))?;
                    }
                    How::Nft { table }
                }
                FilterKind::Ebpf {
                    program, attach, ..
                } => {
                    let object = object_path(dir, &f.name);
                    attach_ebpf(&object, program.as_deref(), *attach, f, &ns, ifindex).map_err(
                        |e| {
                            Error::Invalid(format!(
                                "filter {} (eBPF {}, {} port {}): {e}",
                                f.name,
                                match attach {
                                    Attach::Tc => "tc",
                                    Attach::Xdp => "xdp",
                                },
                                node.name,
                                f.port
                            ))
                        },
                    )?
                }
            };
            attached.push(Attached {
                spec: f.clone(),
                node: node.name.clone(),
                link: lab.fabric.link(f.link).name.clone(),
                ns,
                how,
            });
        }
        Ok(Filters(attached))
    }

    /// True without filters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every filter's counters now (a filter that cannot be read counts
    /// nothing).
    pub async fn counters(&mut self) -> Vec<FilterCounters> {
        let mut out = Vec::new();
        for a in &mut self.0 {
            let (kind, (seen, dropped)) = match &mut a.how {
                How::Nft { table } => (
                    "nft",
                    nft(&a.ns, &["-j", "list", "table", "netdev", table], None)
                        .ok()
                        .and_then(|t| serde_json::from_str(&t).ok())
                        .map_or((0, 0), |v: Value| nft_counters(&v)),
                ),
                How::Tc {
                    ifindex, netlink, ..
                } => (
                    "ebpf-tc",
                    // A failed read opens a new socket next time.
                    clsact_stats(&a.ns, netlink, *ifindex)
                        .await
                        .unwrap_or_else(|_| {
                            *netlink = None;
                            (0, 0)
                        }),
                ),
                How::Xdp { ifname, .. } => (
                    "ebpf-xdp",
                    namespaces::in_namespace(&a.ns, || {
                        turbonet_packetio::ethtool::xdp_stats(ifname)
                    })
                    .unwrap_or((0, 0)),
                ),
            };
            out.push(FilterCounters {
                name: a.spec.name.clone(),
                node: a.node.clone(),
                port: a.spec.port.clone(),
                link: a.link.clone(),
                hook: a.spec.hook.to_string(),
                kind: kind.to_owned(),
                seen,
                dropped,
            });
        }
        out
    }
}

/// How often the daemon reads the filters' counters.
pub const POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads the filters' counters every [`POLL`] into `out` until the daemon
/// stops, and writes an event when a filter begins to drop frames and when
/// [`POLL`] passes without another drop.
pub async fn poll(
    mut filters: Filters,
    out: std::sync::Arc<std::sync::Mutex<Vec<FilterCounters>>>,
    events: crate::events::Events,
) {
    use crate::events::About;
    // Per filter: its drops when last read, and the burst in progress
    // (when it began, its drops so far).
    let mut last: Vec<(u64, Option<(f64, u64)>)> = Vec::new();
    let mut tick = tokio::time::interval(POLL);
    loop {
        tick.tick().await;
        let now = filters.counters().await;
        last.resize(now.len(), (0, None));
        let t = events.now();
        for (c, (before, burst)) in now.iter().zip(last.iter_mut()) {
            let new = c.dropped.saturating_sub(*before);
            *before = c.dropped;
            let about = || About {
                node: Some(c.node.clone()),
                link: Some(c.link.clone()),
                cause: Some(format!("filter {}", c.name)),
                ..About::default()
            };
            match (burst.as_mut(), new) {
                (None, 0) => {}
                (None, n) => {
                    *burst = Some((t, n));
                    events.write_about(
                        "filter",
                        "drops-begin",
                        &format!(
                            "filter {} at {} {}: dropping frames",
                            c.name, c.node, c.port
                        ),
                        Ok(()),
                        about(),
                    );
                }
                (Some((_, total)), n @ 1..) => *total += n,
                (Some(&mut (since, total)), 0) => {
                    *burst = None;
                    events.write_about(
                        "filter",
                        "drops-end",
                        &format!(
                            "filter {} at {} {}: {total} frames dropped over {:.1} s",
                            c.name,
                            c.node,
                            c.port,
                            (t - since).max(0.0)
                        ),
                        Ok(()),
                        About {
                            value: Some(total),
                            unit: Some("frames".to_owned()),
                            since: Some(since),
                            ..about()
                        },
                    );
                }
            }
        }
        if let Ok(mut o) = out.lock() {
            *o = now;
        }
    }
}

/// Loads an eBPF object and attaches its program to a port in `ns`.
fn attach_ebpf(
    object: &Path,
    program: Option<&str>,
    attach: Attach,
    f: &Filter,
    ns: &OwnedFd,
    ifindex: u32,
) -> Result<How> {
    use aya::programs::tc::{self, NlOptions, SchedClassifier, TcAttachOptions, TcAttachType};
    use aya::programs::{Xdp, XdpMode};
    let mut ebpf = aya::Ebpf::load_file(object)
        .map_err(|e| Error::Invalid(format!("loading {}: {e}", object.display())))?;
    let names: Vec<String> = ebpf.programs().map(|(n, _)| n.to_owned()).collect();
    let name = match program {
        Some(p) => p.to_owned(),
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(Error::Invalid(format!(
                "the object has {} programs ({}): name one with `program = \"...\"`",
                names.len(),
                names.join(", ")
            )));
        }
    };
    let prog = ebpf.program_mut(&name).ok_or_else(|| {
        Error::Invalid(format!(
            "no program `{name}` in the object (it has: {})",
            names.join(", ")
        ))
    })?;
    let port = f.port.clone();
    match attach {
        Attach::Tc => {
            let classifier: &mut SchedClassifier = prog.try_into().map_err(|e| {
                Error::Invalid(format!("program `{name}` is not a tc classifier: {e}"))
            })?;
            classifier
                .load()
                .map_err(|e| Error::Invalid(format!("the kernel refused `{name}`: {e}")))?;
            let kind = match f.hook {
                Hook::Ingress => TcAttachType::Ingress,
                Hook::Egress => TcAttachType::Egress,
            };
            namespaces::in_namespace(ns, || {
                // A restarted daemon finds its predecessor's filter there.
                let _ = tc::qdisc_detach_program(&port, kind, &name);
                match tc::qdisc_add_clsact(&port) {
                    Ok(()) | Err(tc::TcError::AlreadyAttached) => {}
                    Err(tc::TcError::NetlinkError(e)) if e.raw_os_error() == Some(libc::EEXIST) => {
                    }
                    Err(e) => return Err(std::io::Error::other(e)),
                }
                classifier
                    .attach_with_options(
                        &port,
                        kind,
                        TcAttachOptions::Netlink(NlOptions::default()),
                    )
                    .map(drop)
                    .map_err(std::io::Error::other)
            })?;
            // Held for nothing but its fds: the classifier stays attached
            // through netlink once loaded.
            Ok(How::Tc {
                ifindex,
                netlink: None,
                _ebpf: ebpf,
            })
        }
        Attach::Xdp => {
            let xdp: &mut Xdp = prog.try_into().map_err(|e| {
                Error::Invalid(format!("program `{name}` is not an XDP program: {e}"))
            })?;
            xdp.load()
                .map_err(|e| Error::Invalid(format!("the kernel refused `{name}`: {e}")))?;
            namespaces::in_namespace(ns, || {
                xdp.attach(&port, XdpMode::Driver)
                    .map(drop)
                    .map_err(std::io::Error::other)
            })?;
            Ok(How::Xdp {
                ifname: port,
                _ebpf: ebpf,
            })
        }
    }
}

/// The frames a port's clsact qdisc saw and dropped.
async fn clsact_stats(
    ns: &OwnedFd,
    netlink: &mut Option<rtnetlink::Handle>,
    ifindex: u32,
) -> Result<(u64, u64)> {
    use futures::TryStreamExt;
    use rtnetlink::packet_route::tc::TcAttribute;
    let handle = match netlink {
        Some(h) => h,
        None => netlink.insert(turbonet_host::kernel::connect(namespaces::in_namespace(
            ns,
            namespaces::route_socket,
        )?)?),
    };
    let mut qdiscs = handle.qdisc().get().index(ifindex as i32).execute();
    while let Some(q) = qdiscs.try_next().await? {
        let clsact = q
            .attributes
            .iter()
            .any(|a| matches!(a, TcAttribute::Kind(k) if k == "clsact"));
        if q.header.index != ifindex as i32 || !clsact {
            continue;
        }
        for a in &q.attributes {
            if let TcAttribute::Stats(s) = a {
                return Ok((u64::from(s.packets), u64::from(s.drops)));
            }
        }
    }
    Ok((0, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `nft -j list table` says of a filter's table (nftables 1.0).
    fn listing(counted: bool) -> Value {
        let counter = |n: u64| serde_json::json!({"counter": {"packets": n, "bytes": n * 100}});
        let mut drop_rule = vec![
            serde_json::json!({"match": {"op": "!=", "left": {"payload": {"protocol": "ip", "field": "saddr"}}, "right": "10.128.0.2"}}),
        ];
        if counted {
            drop_rule.push(counter(7));
        }
        drop_rule.push(serde_json::json!({"drop": null}));
        serde_json::json!({"nftables": [
            {"metainfo": {"version": "1.0.6"}},
            {"table": {"family": "netdev", "name": "tn_sav", "handle": 1}},
            {"chain": {"family": "netdev", "table": "tn_sav", "name": "rules", "handle": 1}},
            {"rule": {"family": "netdev", "table": "tn_sav", "chain": "rules", "handle": 3, "expr": drop_rule}},
            {"rule": {"family": "netdev", "table": "tn_sav", "chain": "rules", "handle": 4, "expr": [
                {"match": {"op": "==", "left": {"meta": {"key": "l4proto"}}, "right": "udp"}},
                {"accept": null}]}},
            {"rule": {"family": "netdev", "table": "tn_sav", "chain": "filter", "handle": 5, "expr": [
                counter(10), {"jump": {"target": "rules"}}]}},
        ]})
    }

    #[test]
    fn dropping_rules_get_a_counter_before_their_verdict_once() {
        let replace = counted_rules(&listing(false), "tn_sav");
        assert_eq!(replace.len(), 1, "{replace:?}");
        let rule = &replace[0]["replace"]["rule"];
        assert_eq!(rule["handle"], 3);
        let expr = rule["expr"].as_array().unwrap();
        assert!(expr[1].get("counter").is_some() && expr[2].get("drop").is_some());
        assert!(counted_rules(&listing(true), "tn_sav").is_empty());
    }

    #[test]
    fn a_filter_saw_what_its_base_chain_counted_and_dropped_what_its_drops_did() {
        assert_eq!(nft_counters(&listing(true)), (10, 7));
        let text = nft_table(
            "tn_sav",
            "h0-0-0",
            Hook::Egress,
            "ip saddr != 10.128.0.2 drop",
        );
        assert!(
            text.contains("type filter hook egress device \"h0-0-0\""),
            "{text}"
        );
        assert!(text.starts_with("add table netdev tn_sav\ndelete table netdev tn_sav\n"));
    }
}
