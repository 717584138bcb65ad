//! Shard scaling: K flows through K impaired links on K engine shards,
//! one sender thread per flow, all started together; the delivered rate
//! against K times one shard's, with the engine's and the machine's CPU
//! and every lost frame attributed (as in the capacity grid).
//!
//! The lab is a star: s1 with hosts a1..aK and b1..bK; ai--s1 is impaired
//! (a 10 us delay) and carries flow i to bi. Links are dealt to shards by
//! position, so impaired link i is shard i's only link.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use turbonet_lab::error::Result;
use turbonet_lab::progress::Progress;

use super::stages::Path;
use super::traffic::{Blast, Sender};

/// The scaling lab.
pub(crate) const LAB: &str = "tnscale";

/// Frame size of the flows, bytes (the engine's cost is per frame).
const SIZE: usize = 64;

/// The scaling lab's scenario: `flows` impaired sender links and as many
/// plain receiver links, `flows` engine shards.
pub(crate) fn scenario(flows: usize) -> String {
    let mut s = format!(
        "[lab]\nname = \"{LAB}\"\nseed = 1\n{}engine_shards = {flows}\n\
         [topology]\nkind = \"custom\"\n\
         [[topology.nodes]]\nname = \"s1\"\nrole = \"switch\"\n",
        super::engine_line()
    );
    for i in 1..=flows {
        s += &format!(
            "[[topology.nodes]]\nname = \"a{i}\"\nrole = \"host\"\n\
             [[topology.nodes]]\nname = \"b{i}\"\nrole = \"host\"\n"
        );
    }
    for i in 1..=flows {
        s += &format!(
            "[[topology.links]]\na = \"a{i}\"\nb = \"s1\"\ndelay = \"10us\"\n\
             [[topology.links]]\na = \"b{i}\"\nb = \"s1\"\n"
        );
    }
    s
}

/// The table's columns.
pub(crate) const HEADERS: &[&str] = &[
    "shards = flows",
    "kpps",
    "kpps per flow",
    "vs linear",
    "lost",
    "engine CPU us/frame",
    "busiest shard",
    "machine idle",
    "lost at (frames)",
    "unexplained",
];

/// Right-aligned columns of [`HEADERS`].
pub(crate) const NUMERIC: &[usize] = &[0, 1, 2, 3, 4, 5, 6, 7, 9];

/// One row per shard count in `shards`: `frames` frames per flow.
pub(crate) fn scaling(
    frames: u64,
    shards: &[usize],
    progress: &dyn Progress,
) -> Result<Vec<Vec<String>>> {
    let mut rows = Vec::new();
    let mut one_shard_pps = None;
    for &k in shards {
        progress.note(&format!(
            "bench engine: scaling, {k} flows on {k} shards ..."
        ));
        let _lab = crate::UpLab::up(LAB, &scenario(k))?;
        let path = Path {
            lab: LAB,
            senders: (1..=k).map(|i| format!("a{i}")).collect(),
            switch: "s1",
            receivers: (1..=k).map(|i| format!("b{i}")).collect(),
            engine_links: (1..=k).map(|i| format!("a{i}--s1")).collect(),
        };
        // Warm: ARP, caches.
        together(k, frames.min(10_000), Some(50_000))?;
        std::thread::sleep(Duration::from_millis(400));
        let before = path.read()?;
        let blasts = together(k, frames, None)?;
        // The engine publishes its counters every 10 ms, the daemon every
        // 250 ms.
        std::thread::sleep(Duration::from_millis(400));
        let accounting = path.read()?.since(&before);
        let sent: u64 = blasts.iter().map(|b| b.sent).sum();
        let received: u64 = blasts.iter().map(|b| b.received).sum();
        let secs = blasts.iter().map(|b| b.secs).fold(0.0, f64::max);
        let pps = received as f64 / secs;
        let base = *one_shard_pps.get_or_insert(pps / k as f64);
        let unexplained = sent as i64 - received as i64 - accounting.explained() as i64;
        rows.push(vec![
            k.to_string(),
            format!("{:.0}", pps / 1e3),
            format!("{:.0}", pps / k as f64 / 1e3),
            format!("{:.2}", pps / (base * k as f64)),
            format!(
                "{:.1}%",
                100.0 * sent.saturating_sub(received) as f64 / sent.max(1) as f64
            ),
            if received == 0 {
                "-".into()
            } else {
                format!("{:.2}", accounting.engine_cpu / received as f64 * 1e6)
            },
            format!("{:.0}%", accounting.busiest_shard / secs * 100.0),
            format!("{:.0}%", accounting.idle * 100.0),
            accounting.describe(),
            unexplained.to_string(),
        ]);
    }
    Ok(rows)
}

/// Flows a1 -> b1 .. ak -> bk, each `frames` frames of [`SIZE`] bytes from
/// a thread of its own, started together.
fn together(k: usize, frames: u64, pps: Option<u64>) -> Result<Vec<Blast>> {
    let mut senders = Vec::with_capacity(k);
    for i in 1..=k {
        let to = crate::address(LAB, &format!("b{i}"))?;
        let (a, b) = (format!("a{i}"), format!("b{i}"));
        senders.push(Sender::ready(LAB, (&a, &b), to, SIZE)?);
    }
    let start = Arc::new(Barrier::new(k));
    let threads: Vec<_> = senders
        .into_iter()
        .map(|sender| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                sender.blast(frames, pps)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("sender thread"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scaling_lab_puts_one_impaired_link_on_each_shard() {
        for flows in [1, 2, 8] {
            let lab = turbonet_topo::parse("scaling.toml", &scenario(flows)).unwrap();
            assert_eq!(lab.engine_shards, Some(flows as u16));
            let impaired: Vec<String> = lab
                .fabric
                .links
                .iter()
                .filter(|l| l.params.has_impairments())
                .map(|l| l.name.clone())
                .collect();
            let expected: Vec<String> = (1..=flows).map(|i| format!("a{i}--s1")).collect();
            assert_eq!(impaired, expected);
        }
    }
}
