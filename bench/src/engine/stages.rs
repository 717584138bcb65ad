//! Where frames went: every frame a blast sent and the receiver did not
//! get is attributed to the stage of the path that dropped it, from the
//! counters each stage keeps, read before and after. And what the machine
//! spent: CPU time of the whole machine and of the engine's threads.
//!
//! The path is h1 -> (veth) -> engine -> (veth) -> s1 -> (veth) -> h2, or
//! without the engine h1 -> s1 -> h2. Each stage counts a lost frame once:
//!
//! - a veth whose peer's backlog is full (`netdev_max_backlog`) drops at
//!   transmit and counts it in the sending end's `tx_dropped` (the same
//!   drop also shows in the softnet and the peer's `rx_dropped`, which are
//!   therefore not added);
//! - the engine's receive socket: `PACKET_STATISTICS` drops;
//! - the engine's model: loss and queue drops; its transmit errors;
//! - the switch's IP layer: discards and no-route;
//! - the receiver's socket buffer: UDP `RcvbufErrors`.

use std::collections::BTreeMap;
use std::fs;

use turbonet_host::{namespaces, process};
use turbonet_lab::dataplane::netns::engine::THREAD_NAME as ENGINE_THREADS;
use turbonet_lab::error::Result;
use turbonet_lab::state::LabDir;

/// One reading of every counter a stage keeps, and the CPU clocks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reading {
    /// Per stage, a count that only grows.
    stages: BTreeMap<&'static str, u64>,
    /// Machine-wide: (busy, all) clock ticks over every CPU.
    cpu: (u64, u64),
    /// The engine threads' time on a CPU, ns, each.
    engine_ns: Vec<u64>,
    /// Softnet backlog drops, machine-wide (shown, not added: the veth's
    /// `tx_dropped` counts the same frames).
    softnet_drops: u64,
    /// Frames the engine sent more than a millisecond late.
    late: u64,
}

/// What happened between two readings.
#[derive(Debug, Clone, Default)]
pub(crate) struct Accounting {
    /// Frames lost at each stage that lost any, in path order.
    pub(crate) stages: Vec<(&'static str, u64)>,
    /// Machine CPU busy, seconds (all CPUs together).
    pub(crate) machine_cpu: f64,
    /// The machine's idle share of its CPUs, 0-1.
    pub(crate) idle: f64,
    /// Engine CPU, seconds (all its threads).
    pub(crate) engine_cpu: f64,
    /// The busiest engine thread's CPU, seconds.
    pub(crate) busiest_shard: f64,
    /// Softnet backlog drops (not added to the stages).
    pub(crate) softnet_drops: u64,
    /// Frames the engine sent more than a millisecond late.
    pub(crate) late: u64,
}

impl Accounting {
    /// Frames the stages account for.
    pub(crate) fn explained(&self) -> u64 {
        self.stages.iter().map(|(_, n)| n).sum()
    }

    /// The stages, `name n` joined, or `-`; the softnet's backlog drops
    /// (the same frames as a veth's) in brackets.
    pub(crate) fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .stages
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        if self.softnet_drops > 0 {
            parts.push(format!("(softnet {})", self.softnet_drops));
        }
        if parts.is_empty() {
            return "-".into();
        }
        parts.join(", ")
    }
}

/// Which lab and nodes the paths cross: each sender through the switch to
/// its receiver, through the engine on the links named.
pub(crate) struct Path<'a> {
    pub(crate) lab: &'a str,
    pub(crate) senders: Vec<String>,
    pub(crate) switch: &'a str,
    pub(crate) receivers: Vec<String>,
    /// The links the engine carries, if any.
    pub(crate) engine_links: Vec<String>,
}

impl<'a> Path<'a> {
    /// h1 -> s1 -> h2 of a bench lab `lab`, through the engine on h1--s1
    /// when `engine`.
    pub(crate) fn bench(lab: &'a str, engine: bool) -> Path<'a> {
        Path {
            lab,
            senders: vec!["h1".into()],
            switch: "s1",
            receivers: vec!["h2".into()],
            engine_links: if engine {
                vec!["h1--s1".into()]
            } else {
                Vec::new()
            },
        }
    }

    /// Reads every counter now.
    pub(crate) fn read(&self) -> Result<Reading> {
        let mut r = Reading::default();
        let node = |n: &str| turbonet_lab::names::node_namespace(self.lab, n);
        let over = |nodes: &[String], read: &dyn Fn(&str) -> Result<u64>| -> Result<u64> {
            nodes.iter().map(|n| read(&node(n))).sum()
        };
        r.stages.insert(
            "sender socket",
            over(&self.senders, &|ns| snmp(ns, "Udp", "SndbufErrors"))?,
        );
        r.stages
            .insert("sender veth", over(&self.senders, &dev_tx_drops)?);
        r.stages
            .insert("switch IP", ip_discards(&node(self.switch))?);
        r.stages
            .insert("switch veth", dev_tx_drops(&node(self.switch))?);
        r.stages.insert(
            "receiver buffer",
            over(&self.receivers, &|ns| snmp(ns, "Udp", "RcvbufErrors"))?,
        );
        if !self.engine_links.is_empty() {
            let ns = turbonet_lab::names::engine_namespace(self.lab);
            r.stages.insert("engine veth", dev_tx_drops(&ns)?);
            let mut client = turbonet_api::Client::connect(LabDir::of(self.lab))?;
            let (mut socket, mut model, mut tx) = (0, 0, 0);
            for link in &self.engine_links {
                let dirs = client
                    .links(Some(link))?
                    .into_iter()
                    .flat_map(|l| l.directions)
                    .filter_map(|d| d.counters);
                for c in dirs {
                    socket += c.socket_drops;
                    model += c.dropped_loss + c.dropped_queue;
                    tx += c.tx_errors;
                    r.late += c.late;
                }
            }
            r.stages.insert("engine socket", socket);
            r.stages.insert("engine model", model);
            r.stages.insert("engine transmit", tx);
            r.engine_ns = engine_threads_ns(self.lab)?;
        }
        r.cpu = process::machine_ticks()?;
        r.softnet_drops = softnet_drops()?;
        Ok(r)
    }
}

/// The stages in the order a frame crosses them.
const ORDER: &[&str] = &[
    "sender socket",
    "sender veth",
    "engine socket",
    "engine model",
    "engine transmit",
    "engine veth",
    "switch IP",
    "switch veth",
    "receiver buffer",
];

impl Reading {
    /// What grew from `before` to `self`.
    pub(crate) fn since(&self, before: &Reading) -> Accounting {
        let stages = ORDER
            .iter()
            .filter_map(|&s| {
                let n = self.stages.get(s)?.saturating_sub(*before.stages.get(s)?);
                (n > 0).then_some((s, n))
            })
            .collect();
        let tick = 1.0 / process::clock_ticks_per_second();
        let busy = self.cpu.0.saturating_sub(before.cpu.0) as f64;
        let all = self.cpu.1.saturating_sub(before.cpu.1) as f64;
        let shards: Vec<f64> = self
            .engine_ns
            .iter()
            .zip(before.engine_ns.iter().chain(std::iter::repeat(&0)))
            .map(|(a, b)| a.saturating_sub(*b) as f64 / 1e9)
            .collect();
        Accounting {
            stages,
            machine_cpu: busy * tick,
            idle: if all > 0.0 { 1.0 - busy / all } else { 0.0 },
            engine_cpu: shards.iter().sum(),
            busiest_shard: shards.iter().copied().fold(0.0, f64::max),
            softnet_drops: self.softnet_drops.saturating_sub(before.softnet_drops),
            late: self.late.saturating_sub(before.late),
        }
    }
}

/// Reads `path` (under `/proc/thread-self/net`) inside namespace `ns`.
fn net_file(ns: &str, path: &str) -> Result<String> {
    let fd = namespaces::open(ns)?;
    let path = format!("/proc/thread-self/net/{path}");
    Ok(namespaces::in_namespace(&fd, || fs::read_to_string(&path))?)
}

/// A counter of `/proc/net/snmp` (`Udp`, `RcvbufErrors`) in `ns`.
fn snmp(ns: &str, table: &str, field: &str) -> Result<u64> {
    let text = net_file(ns, "snmp")?;
    Ok(snmp_field(&text, table, field).unwrap_or(0))
}

/// The switch's IP layer: frames it discarded or had no route for.
fn ip_discards(ns: &str) -> Result<u64> {
    let text = net_file(ns, "snmp")?;
    Ok(["InDiscards", "OutDiscards", "OutNoRoutes", "InAddrErrors"]
        .iter()
        .filter_map(|f| snmp_field(&text, "Ip", f))
        .sum())
}

/// `field` of table `table` in `/proc/net/snmp`'s text: a line of names
/// then a line of values, both starting `Table:`.
fn snmp_field(text: &str, table: &str, field: &str) -> Option<u64> {
    let prefix = format!("{table}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let names = lines.next()?;
    let values = lines.next()?;
    let i = names.split_whitespace().position(|n| n == field)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// Transmit drops over every interface of `ns` (`/proc/net/dev`).
fn dev_tx_drops(ns: &str) -> Result<u64> {
    let text = net_file(ns, "dev")?;
    Ok(text.lines().skip(2).filter_map(tx_drop_column).sum())
}

/// The transmit `drop` column of one `/proc/net/dev` line: after the name,
/// 8 receive columns, then bytes, packets, errs, drop.
fn tx_drop_column(line: &str) -> Option<u64> {
    let (_, counters) = line.split_once(':')?;
    counters.split_whitespace().nth(11)?.parse().ok()
}

/// Softnet backlog drops over every CPU (`/proc/net/softnet_stat`, hex,
/// the second column).
fn softnet_drops() -> Result<u64> {
    let text = fs::read_to_string("/proc/net/softnet_stat")?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum())
}

/// Time on a CPU (ns) of each of the lab daemon's engine threads.
fn engine_threads_ns(lab: &str) -> Result<Vec<u64>> {
    let pid = turbonet_api::Client::connect(LabDir::of(lab))?
        .status()?
        .daemon_pid;
    Ok(process::threads_cpu_ns(pid, ENGINE_THREADS)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snmp_fields_are_found_by_name() {
        let text = "Ip: Forwarding InDiscards\nIp: 1 7\nUdp: InDatagrams RcvbufErrors\nUdp: 10 3\n";
        assert_eq!(snmp_field(text, "Udp", "RcvbufErrors"), Some(3));
        assert_eq!(snmp_field(text, "Ip", "InDiscards"), Some(7));
        assert_eq!(snmp_field(text, "Udp", "Nope"), None);
    }

    #[test]
    fn the_transmit_drop_column_is_the_twelfth() {
        let line = "  eth0: 100 2 0 5 0 0 0 0 200 4 0 9 0 0 0 0";
        assert_eq!(tx_drop_column(line), Some(9));
    }
}
