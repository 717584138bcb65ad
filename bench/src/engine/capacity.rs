//! The capacity grid: how many frames a second the engine delivers, by
//! number of impaired links, frame size and engine shards, beside a plain
//! veth path in the same run; what each delivered frame cost in CPU; and
//! every lost frame attributed to the stage that dropped it.
//!
//! The lab is h1 -- s1 -- h2 with h1's link impaired (a 10 us delay) and
//! `links - 1` more impaired links to idle hosts on s1, so that the cost
//! of links that carry nothing shows.

use std::time::Duration;

use turbonet_lab::error::Result;
use turbonet_lab::progress::Progress;

use super::stages::{Accounting, Path};
use super::traffic::{self, Blast};
use crate::report::count;

/// The grid's lab.
pub(crate) const LAB: &str = "tncap";

/// Frame sizes measured, bytes (FCS included).
pub(crate) const SIZES: [usize; 3] = [64, 512, 1500];

/// The capacity lab's scenario: `links` impaired links (h1's and
/// `links - 1` idle ones), or none when `links` is 0 (the plain path);
/// `shards` engine threads.
pub(crate) fn scenario(links: usize, shards: Option<usize>) -> String {
    let mut s = format!(
        "[lab]\nname = \"{LAB}\"\nseed = 1\n{}",
        super::engine_line()
    );
    if let Some(k) = shards {
        s += &format!("engine_shards = {k}\n");
    }
    s += "[topology]\nkind = \"custom\"\n\
          [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n\
          [[topology.nodes]]\nname = \"h1\"\nrole = \"host\"\n\
          [[topology.nodes]]\nname = \"h2\"\nrole = \"host\"\n";
    for i in 1..links {
        s += &format!("[[topology.nodes]]\nname = \"x{i}\"\nrole = \"host\"\n");
    }
    let impaired = "delay = \"10us\"\n";
    s += "[[topology.links]]\na = \"h1\"\nb = \"s1\"\n";
    if links > 0 {
        s += impaired;
    }
    s += "[[topology.links]]\na = \"h2\"\nb = \"s1\"\n";
    for i in 1..links {
        s += &format!("[[topology.links]]\na = \"x{i}\"\nb = \"s1\"\n{impaired}");
    }
    s
}

/// One measured cell.
pub(crate) struct Cell {
    pub(crate) blast: Blast,
    pub(crate) size: usize,
    pub(crate) accounting: Accounting,
}

impl Cell {
    /// Frames lost that no stage counted (what the grid must show is 0).
    pub(crate) fn unexplained(&self) -> i64 {
        let lost = self.blast.sent as i64 - self.blast.received as i64;
        lost - self.accounting.explained() as i64
    }

    /// A row: path, links, shards, size, then the measurements.
    fn row(&self, path: &str, links: usize, shards: &str) -> Vec<String> {
        let b = &self.blast;
        let per_frame = |cpu: f64| {
            if b.received == 0 {
                "-".to_owned()
            } else {
                format!("{:.2}", cpu / b.received as f64 * 1e6)
            }
        };
        vec![
            path.to_owned(),
            if links == 0 { "-".into() } else { count(links) },
            shards.to_owned(),
            self.size.to_string(),
            format!("{:.0}", b.pps() / 1e3),
            format!("{:.2}", b.pps() * self.size as f64 * 8.0 / 1e9),
            format!(
                "{:.1}%",
                100.0 * (b.sent - b.received.min(b.sent)) as f64 / b.sent.max(1) as f64
            ),
            per_frame(self.accounting.machine_cpu),
            if links == 0 {
                "-".into()
            } else {
                per_frame(self.accounting.engine_cpu)
            },
            if links == 0 {
                "-".into()
            } else {
                format!("{:.0}%", self.accounting.busiest_shard / b.secs * 100.0)
            },
            format!("{:.0}%", self.accounting.idle * 100.0),
            self.accounting.describe(),
            self.unexplained().to_string(),
        ]
    }
}

/// The grid's columns.
pub(crate) const HEADERS: &[&str] = &[
    "path",
    "impaired links",
    "shards",
    "frame B",
    "kpps",
    "Gbit/s",
    "lost",
    "machine CPU us/frame",
    "engine CPU us/frame",
    "busiest shard",
    "machine idle",
    "lost at (frames)",
    "unexplained",
];

/// Right-aligned columns of [`HEADERS`].
pub(crate) const NUMERIC: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12];

/// Blasts `frames` frames of each size through the lab `LAB` that is up,
/// reading every stage's counters around each blast.
fn measure(frames: u64, engine_link: bool) -> Result<Vec<Cell>> {
    let h2 = crate::address(LAB, "h2")?;
    let path = Path::bench(LAB, engine_link);
    let mut cells = Vec::new();
    for size in SIZES {
        // Warm the path (ARP) and let counters settle before reading.
        traffic::blast(LAB, ("h1", "h2"), h2, 1_000, size, Some(100_000))?;
        std::thread::sleep(Duration::from_millis(400));
        let before = path.read()?;
        let blast = traffic::blast(LAB, ("h1", "h2"), h2, frames, size, None)?;
        // The engine publishes its counters every 10 ms, the daemon every
        // 250 ms.
        std::thread::sleep(Duration::from_millis(400));
        let accounting = path.read()?.since(&before);
        cells.push(Cell {
            blast,
            size,
            accounting,
        });
    }
    Ok(cells)
}

/// The grid: the plain path, then every link count and shard count.
pub(crate) fn grid(
    frames: u64,
    links: &[usize],
    shards: &[Option<usize>],
    progress: &dyn Progress,
) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    progress.note("bench engine: capacity, plain veth ...");
    {
        let _lab = crate::UpLab::up(LAB, &scenario(0, None))?;
        for cell in measure(frames, false)? {
            rows.push(cell.row("plain veth", 0, "-"));
        }
    }
    for &n in links {
        for &k in shards {
            let label = k.map_or("default".to_owned(), |k| k.to_string());
            progress.note(&format!(
                "bench engine: capacity, {n} impaired links, {label} shards ..."
            ));
            let _lab = crate::UpLab::up(LAB, &scenario(n, k))?;
            for cell in measure(frames, true)? {
                rows.push(cell.row("engine", n, &label));
            }
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_scenarios_read() {
        for (links, shards) in [(0, None), (1, Some(1)), (16, Some(2))] {
            let lab = turbonet_topo::parse("grid.toml", &scenario(links, shards))
                .unwrap_or_else(|e| panic!("{links} links: {e:?}"));
            let impaired = lab
                .fabric
                .links
                .iter()
                .filter(|l| l.params.has_impairments())
                .count();
            assert_eq!(impaired, links);
        }
    }
}
