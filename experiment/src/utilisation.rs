//! What every link carried over a run: the daemon's per-link counters,
//! sampled as the run goes (it refreshes them every 100 ms), turned
//! into each direction's rate per interval; and where the link engine fell
//! short of its model (frames dropped at its sockets, not transmitted, or
//! late), so a report says when a link's figures are this machine's.

use std::collections::HashMap;

use serde::Serialize;
use turbonet_topo::Lab;

use turbonet_lab::dataplane::plane::{Counted, LinkCounters, Shortfall};

/// Directions kept in a report: those whose peak reached this fraction of
/// the busiest direction's (BGP keepalives and ARP are not load).
const KEEP: f64 = 0.01;

/// One direction of a link over a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectionLoad {
    /// The link.
    pub link: String,
    /// Where its frames come from.
    pub from: String,
    /// Where they go.
    pub to: String,
    /// The link's rate in the scenario, bits per second (`None`: no rate,
    /// the veth's own speed).
    pub rate: Option<f64>,
    /// Bytes it passed over the run (Ethernet frames, as the link's rate
    /// counts them).
    pub bytes: u64,
    /// Its highest rate over one interval, bits per second.
    pub peak: f64,
    /// Its rate in each interval between samples, bits per second.
    pub rates: Vec<f64>,
}

impl DirectionLoad {
    /// Its peak as a fraction of the link's rate.
    pub fn peak_utilisation(&self) -> Option<f64> {
        self.rate.map(|r| self.peak / r)
    }
}

/// Every busy link direction over a run, busiest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Utilisation {
    /// When the counters were read, seconds on the lab's clock: the
    /// intervals run between consecutive samples.
    pub times: Vec<f64>,
    /// Directions that carried load, by bytes, busiest first.
    pub directions: Vec<DirectionLoad>,
    /// Where the link engine fell short over the run, in words.
    pub fidelity: Vec<String>,
    /// What the machine and the link engine spent, second by second.
    pub machine: MachineLoad,
}

/// What the machine and the link engine spent over a run: an emulator
/// needs idle CPU, and a run whose machine had none measured the machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MachineLoad {
    /// End of each window (about a second), seconds on the lab's clock.
    pub times: Vec<f64>,
    /// The machine's idle share of all its CPUs in each window, 0-1.
    pub idle: Vec<f64>,
    /// The busiest engine shard's share of one core in each window.
    pub busiest_shard: Vec<f64>,
    /// The engine's CPU over the run, seconds (every shard).
    pub engine_cpu_seconds: f64,
    /// Frames the engine passed on over the run.
    pub engine_frames: u64,
}

/// A window in which the machine had less idle CPU than this share, or
/// an engine shard used more than [`BUSY_SHARD`] of a core, is one where
/// the machine may have been the bottleneck.
pub const IDLE_FLOOR: f64 = 0.10;
/// See [`IDLE_FLOOR`].
pub const BUSY_SHARD: f64 = 0.90;

impl MachineLoad {
    /// Engine CPU per frame it passed on, microseconds.
    pub fn engine_us_per_frame(&self) -> Option<f64> {
        (self.engine_frames > 0).then(|| self.engine_cpu_seconds / self.engine_frames as f64 * 1e6)
    }

    /// Windows in which the machine had no idle CPU to speak of or an
    /// engine shard was nearly saturated.
    pub fn saturated_windows(&self) -> usize {
        self.idle
            .iter()
            .zip(&self.busiest_shard)
            .filter(|(idle, shard)| **idle < IDLE_FLOOR || **shard > BUSY_SHARD)
            .count()
    }

    /// The machine in a sentence, for a report that has fidelity warnings.
    pub fn describe(&self) -> Option<String> {
        if self.times.is_empty() {
            return None;
        }
        let least_idle = self.idle.iter().copied().fold(1.0, f64::min);
        let busiest = self.busiest_shard.iter().copied().fold(0.0, f64::max);
        let mut s = format!(
            "this machine: CPUs {:.0}% idle at the least, the busiest engine shard at {:.0}% of a core",
            least_idle * 100.0,
            busiest * 100.0
        );
        if let Some(us) = self.engine_us_per_frame() {
            s += &format!(", {us:.1} us of engine CPU per frame");
        }
        let saturated = self.saturated_windows();
        if saturated > 0 {
            s += &format!(
                "; in {saturated} of {} seconds the machine was the bottleneck (under {:.0}% idle or a shard over {:.0}% busy): an emulator needs idle CPU",
                self.times.len(),
                IDLE_FLOOR * 100.0,
                BUSY_SHARD * 100.0
            );
        }
        Some(s)
    }
}

/// One reading of the machine during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadReading {
    /// When, Unix seconds.
    pub at_unix: f64,
    /// Every CPU's clock ticks since boot: (busy, all).
    pub ticks: (u64, u64),
    /// Each engine shard's time on a CPU, ns.
    pub shards_ns: Vec<u64>,
}

/// Collects samples of the daemon's counters during a run.
#[derive(Debug)]
pub struct Sampler {
    epoch: f64,
    first: Option<Counted>,
    last: Option<Counted>,
    /// Per sample: its time on the lab's clock, and every link's bytes
    /// passed per direction, in the order of the first sample's links.
    bytes: Vec<(f64, Vec<[u64; 2]>)>,
    /// The links the userspace engine carries.
    engine_links: Vec<String>,
    /// Readings of the machine.
    load: Vec<LoadReading>,
}

impl Sampler {
    /// A sampler for a lab that came up at `epoch` (Unix seconds, where
    /// its clock starts), its counters at zero then.
    pub fn new(epoch: f64, engine_links: Vec<String>) -> Sampler {
        Sampler {
            epoch,
            first: None,
            last: None,
            bytes: Vec::new(),
            engine_links,
            load: Vec::new(),
        }
    }

    /// Adds a reading of the machine.
    pub fn add_load(&mut self, reading: LoadReading) {
        self.load.push(reading);
    }

    /// The machine's load in windows of at least a second, and the
    /// engine's CPU per frame over the run.
    fn machine(&self, first: &Counted, last: &Counted) -> MachineLoad {
        let mut m = MachineLoad::default();
        let (Some(start), Some(end)) = (self.load.first(), self.load.last()) else {
            return m;
        };
        let shard_ns = |r: &LoadReading, i: usize| r.shards_ns.get(i).copied().unwrap_or(0);
        let mut from = start;
        for r in &self.load[1..] {
            let seconds = r.at_unix - from.at_unix;
            if seconds < 1.0 && !std::ptr::eq(r, end) {
                continue;
            }
            let busy = r.ticks.0.saturating_sub(from.ticks.0) as f64;
            let all = r.ticks.1.saturating_sub(from.ticks.1) as f64;
            m.times.push(r.at_unix - self.epoch);
            m.idle.push(if all > 0.0 { 1.0 - busy / all } else { 1.0 });
            m.busiest_shard.push(
                (0..r.shards_ns.len())
                    .map(|i| shard_ns(r, i).saturating_sub(shard_ns(from, i)) as f64)
                    .fold(0.0, f64::max)
                    / (seconds.max(1e-3) * 1e9),
            );
            from = r;
        }
        m.engine_cpu_seconds = (0..end.shards_ns.len())
            .map(|i| shard_ns(end, i).saturating_sub(shard_ns(start, i)) as f64 / 1e9)
            .sum();
        let frames = |c: &Counted, name: &str| {
            c.links.iter().find(|l| l.link == name).map_or(0, |l| {
                l.directions[0].tx_packets + l.directions[1].tx_packets
            })
        };
        m.engine_frames = self
            .engine_links
            .iter()
            .map(|name| frames(last, name).saturating_sub(frames(first, name)))
            .sum();
        m
    }

    /// Adds `counted` unless it is the reading seen last (the daemon has
    /// not refreshed its counters since).
    pub fn add(&mut self, counted: Counted) {
        if counted.links.is_empty()
            || self
                .last
                .as_ref()
                .is_some_and(|l| l.at_unix >= counted.at_unix)
        {
            return;
        }
        if self.first.is_none() && counted.at_unix > self.epoch {
            // The fabric came up at the epoch with every counter at zero:
            // what a workload that starts and ends before the first
            // reading carried still counts.
            self.bytes.push((0.0, vec![[0, 0]; counted.links.len()]));
        }
        let order = self.first.get_or_insert_with(|| counted.clone());
        let by_name: HashMap<&str, &LinkCounters> =
            counted.links.iter().map(|l| (l.link.as_str(), l)).collect();
        let bytes = order
            .links
            .iter()
            .map(|l| {
                by_name.get(l.link.as_str()).map_or([0, 0], |c| {
                    [c.directions[0].tx_bytes, c.directions[1].tx_bytes]
                })
            })
            .collect();
        self.bytes.push((counted.at_unix - self.epoch, bytes));
        self.last = Some(counted);
    }

    /// What the samples show, for `lab`'s links.
    pub fn finish(self, lab: &Lab) -> Utilisation {
        let (Some(first), Some(last)) = (self.first.as_ref(), self.last.as_ref()) else {
            return Utilisation::default();
        };
        let machine = self.machine(first, last);
        let fabric = &lab.fabric;
        let times: Vec<f64> = self.bytes.iter().map(|(t, _)| *t).collect();
        let mut directions = Vec::new();
        for (i, l) in first.links.iter().enumerate() {
            let Some(link) = fabric.links.iter().find(|k| k.name == l.link) else {
                continue;
            };
            for d in 0..2 {
                let rates: Vec<f64> = self
                    .bytes
                    .windows(2)
                    .map(|w| {
                        let (t0, b0) = (w[0].0, w[0].1[i][d]);
                        let (t1, b1) = (w[1].0, w[1].1[i][d]);
                        b1.saturating_sub(b0) as f64 * 8.0 / (t1 - t0).max(1e-3)
                    })
                    .collect();
                let bytes = match (self.bytes.first(), self.bytes.last()) {
                    (Some(a), Some(b)) => b.1[i][d].saturating_sub(a.1[i][d]),
                    _ => 0,
                };
                directions.push(DirectionLoad {
                    link: l.link.clone(),
                    from: fabric.node(link.ends[d].node).name.clone(),
                    to: fabric.node(link.ends[1 - d].node).name.clone(),
                    rate: link.params.rate.map(|r| r.bits_per_sec() as f64),
                    bytes,
                    peak: rates.iter().copied().fold(0.0, f64::max),
                    rates,
                });
            }
        }
        let busiest = directions.iter().map(|d| d.peak).fold(0.0, f64::max);
        directions.retain(|d| d.bytes > 0 && d.peak >= busiest * KEEP);
        directions.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.link.cmp(&b.link)));
        Utilisation {
            times,
            directions,
            fidelity: fidelity(&first.links, &last.links, lab),
            machine,
        }
    }
}

/// The link engine's shortfalls from `before` to `after`, per direction,
/// in words.
fn fidelity(before: &[LinkCounters], after: &[LinkCounters], lab: &Lab) -> Vec<String> {
    let mut out = Vec::new();
    for a in after {
        let b = before.iter().find(|b| b.link == a.link);
        let Some(link) = lab.fabric.links.iter().find(|k| k.name == a.link) else {
            continue;
        };
        for d in 0..2 {
            let zero = Shortfall::default();
            let since = a.shortfall[d].since(b.map_or(&zero, |b| &b.shortfall[d]));
            let frames = a.directions[d]
                .tx_packets
                .saturating_sub(b.map_or(0, |b| b.directions[d].tx_packets));
            if let Some(why) = since.describe(frames) {
                out.push(format!(
                    "link {} {} -> {}: {why}",
                    a.link,
                    lab.fabric.node(link.ends[d].node).name,
                    lab.fabric.node(link.ends[1 - d].node).name
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use turbonet_injectors::Counters;

    const DUO: &str = r#"
[lab]
name = "duo"
[topology]
kind = "custom"
[[topology.nodes]]
name = "s1"
role = "switch"
[[topology.nodes]]
name = "h1"
role = "host"
[[topology.nodes]]
name = "h2"
role = "host"
[[topology.links]]
a = "h1"
b = "s1"
rate = "100mbit"
[[topology.links]]
a = "h2"
b = "s1"
[routing]
mode = "static"
"#;

    /// The daemon's counters at `t` seconds: `bytes[link][direction]`
    /// passed, with `late` frames on h1's link towards s1.
    fn counted(t: f64, bytes: [[u64; 2]; 2], late: u64) -> Counted {
        let link = |name: &str, b: [u64; 2], late: u64| LinkCounters {
            link: name.to_owned(),
            directions: b.map(|bytes| Counters {
                tx_bytes: bytes,
                tx_packets: bytes / 1000,
                ..Counters::default()
            }),
            shortfall: [
                Shortfall {
                    late,
                    max_late_ns: late * 1_000_000,
                    ..Shortfall::default()
                },
                Shortfall::default(),
            ],
        };
        Counted {
            at_unix: 1000.0 + t,
            links: vec![link("h1--s1", bytes[0], late), link("h2--s1", bytes[1], 0)],
        }
    }

    #[test]
    fn the_machine_s_load_is_told_per_second_and_a_saturated_second_is_the_bottleneck() {
        let lab = turbonet_topo::parse("duo.toml", DUO).unwrap();
        let mut s = Sampler::new(1000.0, vec!["h1--s1".to_owned()]);
        s.add(counted(0.0, [[0, 0], [0, 0]], 0));
        s.add(counted(2.0, [[4_000_000, 0], [0, 0]], 0));
        let reading = |t: f64, busy: u64, all: u64, shards: [u64; 2]| LoadReading {
            at_unix: 1000.0 + t,
            ticks: (busy, all),
            shards_ns: shards.to_vec(),
        };
        // Two shards; a reading every half second; the second second
        // has shard 1 at 95% of a core and the CPUs 5% idle.
        s.add_load(reading(0.0, 0, 0, [0, 0]));
        s.add_load(reading(0.5, 50, 100, [100_000_000, 0]));
        s.add_load(reading(1.0, 100, 200, [200_000_000, 0]));
        s.add_load(reading(1.5, 195, 300, [200_000_000, 475_000_000]));
        s.add_load(reading(2.0, 290, 400, [300_000_000, 950_000_000]));
        let m = s.finish(&lab).machine;
        assert_eq!(m.times, vec![1.0, 2.0]);
        assert!((m.idle[0] - 0.5).abs() < 1e-9 && (m.idle[1] - 0.05).abs() < 1e-9);
        assert!((m.busiest_shard[0] - 0.2).abs() < 1e-9);
        assert!((m.busiest_shard[1] - 0.95).abs() < 1e-9);
        assert_eq!(m.saturated_windows(), 1);
        // 4,000 frames out of h1's link, 1.25 s of engine CPU.
        assert_eq!(m.engine_frames, 4_000);
        assert!((m.engine_cpu_seconds - 1.25).abs() < 1e-9);
        let said = m.describe().unwrap();
        assert!(said.contains("5% idle at the least"), "{said}");
        assert!(said.contains("95% of a core"), "{said}");
        assert!(said.contains("312.5 us of engine CPU per frame"), "{said}");
        assert!(
            said.contains("in 1 of 2 seconds the machine was the bottleneck"),
            "{said}"
        );
    }

    #[test]
    fn a_workload_over_before_the_first_reading_still_counts_from_zero() {
        let lab = turbonet_topo::parse("duo.toml", DUO).unwrap();
        let mut s = Sampler::new(1000.0, Vec::new());
        s.add(counted(0.2, [[1_000_000, 0], [0, 0]], 0));
        s.add(counted(0.3, [[1_000_000, 0], [0, 0]], 0));
        let u = s.finish(&lab);
        assert_eq!(u.times.len(), 3);
        assert_eq!(u.times[0], 0.0);
        assert_eq!(u.directions.len(), 1, "{:?}", u.directions);
        assert_eq!(u.directions[0].bytes, 1_000_000);
    }

    #[test]
    fn rates_per_interval_busiest_first_and_the_engine_s_shortfalls_over_the_run() {
        let lab = turbonet_topo::parse("duo.toml", DUO).unwrap();
        let mut s = Sampler::new(1000.0, Vec::new());
        s.add(counted(0.0, [[1_000, 0], [0, 0]], 5));
        // A reading seen already adds nothing.
        s.add(counted(0.0, [[9_999_999, 0], [0, 0]], 5));
        s.add(counted(0.1, [[501_000, 10], [0, 400_000]], 5));
        s.add(counted(0.2, [[1_001_000, 20], [0, 400_000]], 500));
        let u = s.finish(&lab);
        assert_eq!(u.times.len(), 3);
        // h1 -> s1 at 40 Mbit/s (500 kB per 100 ms), then h2's link once;
        // the acks back are below a hundredth of the busiest: not load.
        let names: Vec<_> = u
            .directions
            .iter()
            .map(|d| format!("{} -> {}", d.from, d.to))
            .collect();
        assert_eq!(names, ["h1 -> s1", "s1 -> h2"]);
        let h1 = &u.directions[0];
        assert_eq!(h1.bytes, 1_000_000);
        assert!((h1.peak - 40e6).abs() < 1.0, "{}", h1.peak);
        assert_eq!(
            h1.peak_utilisation().map(|x| (x * 100.0).round()),
            Some(40.0)
        );
        assert_eq!(u.directions[1].rate, None);
        // 495 late of the 1000 frames passed during the run.
        assert_eq!(u.fidelity.len(), 1, "{:?}", u.fidelity);
        assert!(
            u.fidelity[0].starts_with(
                "link h1--s1 h1 -> s1: 495 of 1000 frames (50%) left more than 1 ms late"
            ),
            "{:?}",
            u.fidelity
        );
    }

    #[test]
    fn rare_late_frames_are_not_a_shortfall_but_any_socket_drop_is() {
        let late = Shortfall {
            late: 9,
            max_late_ns: 2_000_000,
            ..Shortfall::default()
        };
        assert_eq!(late.describe(1000), None);
        assert!(late.describe(900).is_some());
        let dropped = Shortfall {
            socket_drops: 1,
            ..Shortfall::default()
        };
        assert_eq!(
            dropped.describe(1_000_000).as_deref(),
            Some("1 frames dropped at the engine's socket before it read them")
        );
    }
}
