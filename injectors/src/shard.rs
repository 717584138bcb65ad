//! What one engine thread carries: the directions of its links, and a
//! timer over their heads so that each pass touches only what is due.
//!
//! Links go to shards by position (link `k` of `n` to shard `k % shards`),
//! and a link's two directions stay together, so whatever the number of
//! shards every direction sees the same frames at the same times, and
//! makes the same drops, marks, corruptions and due times (tested below
//! with 1, 2, 4 and 8 shards).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::direction::{Direction, Marks};

/// The shard that carries link `link` (its position among the engine's
/// links) when there are `shards`.
pub fn shard_of(link: usize, shards: usize) -> usize {
    link % shards.max(1)
}

/// A frame leaving: which of the shard's links and which direction
/// (0: from end a), when it was due, the frame and what was done to it.
#[derive(Debug)]
pub struct Due {
    /// The link's index in the shard.
    pub link: usize,
    /// The direction.
    pub side: usize,
    /// When it was due (it leaves now, at or after this).
    pub at: u64,
    /// The frame.
    pub frame: Vec<u8>,
    /// What the pipeline did to it.
    pub marks: Marks,
}

/// The directions of one shard's links and a min-heap over their heads.
///
/// The heap holds (due, direction) entries; an entry is live only while
/// its due time is the one filed for that direction, so an entry made
/// stale by an earlier frame or by draining is skipped when it surfaces.
#[derive(Debug)]
pub struct Shard {
    directions: Vec<[Direction; 2]>,
    timers: BinaryHeap<Reverse<(u64, usize)>>,
    /// Per direction (`2 * link + side`), the due time of its live entry.
    filed: Vec<u64>,
}

const NONE: u64 = u64::MAX;

impl Shard {
    /// A shard carrying these links' directions.
    pub fn new(directions: Vec<[Direction; 2]>) -> Shard {
        let filed = vec![NONE; 2 * directions.len()];
        Shard {
            directions,
            timers: BinaryHeap::new(),
            filed,
        }
    }

    /// Links carried.
    pub fn len(&self) -> usize {
        self.directions.len()
    }

    /// True when it carries no link.
    pub fn is_empty(&self) -> bool {
        self.directions.is_empty()
    }

    /// Direction `side` of link `link`.
    pub fn direction(&self, link: usize, side: usize) -> &Direction {
        &self.directions[link][side]
    }

    /// Direction `side` of link `link`, to change its parameters or take
    /// its dropped frames. Frames offered must go through
    /// [`Shard::offer`], which keeps the timer.
    pub fn direction_mut(&mut self, link: usize, side: usize) -> &mut Direction {
        &mut self.directions[link][side]
    }

    /// A frame arrives at `now` in direction `side` of link `link`.
    pub fn offer(&mut self, link: usize, side: usize, now: u64, frame: Vec<u8>) {
        let d = &mut self.directions[link][side];
        d.offer(now, frame);
        self.refile(2 * link + side);
    }

    /// Files direction `i`'s head if it is earlier than what is filed.
    fn refile(&mut self, i: usize) {
        let head = self.directions[i / 2][i % 2].next_due().unwrap_or(NONE);
        if head < self.filed[i] {
            self.filed[i] = head;
            self.timers.push(Reverse((head, i)));
        }
    }

    /// The earliest time a frame may be due (perhaps earlier than any is:
    /// a stale entry only wakes the caller early).
    pub fn next_due(&self) -> Option<u64> {
        self.timers.peek().map(|Reverse((at, _))| *at)
    }

    /// Every frame due by `now`, direction by direction in the order
    /// their heads fell due, each direction's in its own order.
    pub fn pop_due(&mut self, now: u64, mut leave: impl FnMut(Due)) {
        while let Some(&Reverse((at, i))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            if self.filed[i] != at {
                continue;
            }
            self.filed[i] = NONE;
            let (link, side) = (i / 2, i % 2);
            while let Some((at, frame, marks)) = self.directions[link][side].pop_due_marked(now) {
                leave(Due {
                    link,
                    side,
                    at,
                    frame,
                    marks,
                });
            }
            self.refile(i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Impairment;
    use crate::units::{Delay, LossProb, QueueLimit, Rate};
    use turbonet_topo::{JitterDistribution, Loss};

    /// What every direction did: each frame out (due, bytes, marks) in
    /// order, and the counters.
    type Outcome = Vec<(Vec<(u64, Vec<u8>, Marks)>, String)>;

    fn impairment(k: usize) -> Impairment {
        let mut imp = Impairment {
            delay: Delay::from_micros(10 + 7 * k as u64),
            loss: Some(Loss::Bernoulli(LossProb::new(0.02).expect("p"))),
            corrupt: Some(LossProb::new(0.05).expect("p")),
            duplicate: Some(LossProb::new(0.03).expect("p")),
            ..Impairment::default()
        };
        if k % 2 == 1 {
            imp.rate = Some(Rate::from_mbit(100));
            imp.queue = QueueLimit::Packets(8);
            imp.ecn = Some(QueueLimit::Packets(3));
        }
        if k.is_multiple_of(3) {
            imp.jitter = Some(crate::Jitter {
                amount: Delay::from_micros(20),
                distribution: JitterDistribution::Uniform,
                reorder: k.is_multiple_of(6),
            });
        }
        imp
    }

    /// An ECT(0) IPv4 frame of `len` bytes numbered `n`.
    fn frame(n: u32, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[15] = 0b10;
        f[len - 4..].copy_from_slice(&n.to_be_bytes());
        f
    }

    /// Runs the same arrivals over `links` links through `shards` shards
    /// and collects what every direction did.
    fn run(links: usize, shards: usize) -> Outcome {
        let mut cores: Vec<Shard> = (0..shards)
            .map(|s| {
                Shard::new(
                    (0..links)
                        .filter(|k| shard_of(*k, shards) == s)
                        .map(|k| {
                            [0, 1].map(|d| {
                                Direction::new(
                                    impairment(k),
                                    crate::direction_seed(7, &format!("l{k}"), d),
                                )
                            })
                        })
                        .collect(),
                )
            })
            .collect();
        // Position of each link within its shard.
        let local: Vec<usize> = (0..links).map(|k| k / shards).collect();
        let mut out: Vec<Vec<(u64, Vec<u8>, Marks)>> = vec![Vec::new(); 2 * links];
        let mut now = 0u64;
        for n in 0..20_000u32 {
            // Arrivals a few microseconds apart, spread over the links.
            now += 1_000 + u64::from(n % 7) * 900;
            let k = (n as usize * 7 + n as usize / 3) % links;
            let side = (n as usize / 5) % 2;
            let len = 64 + (n as usize * 37) % 1400;
            cores[shard_of(k, shards)].offer(local[k], side, now, frame(n, len));
            // Every shard polls at its own times; what leaves must not
            // depend on it.
            if n.is_multiple_of(3 + shards as u32) {
                for (s, core) in cores.iter_mut().enumerate() {
                    core.pop_due(now, |d| {
                        let k = d.link * shards + s;
                        out[2 * k + d.side].push((d.at, d.frame, d.marks));
                    });
                }
            }
        }
        for (s, core) in cores.iter_mut().enumerate() {
            core.pop_due(u64::MAX, |d| {
                let k = d.link * shards + s;
                out[2 * k + d.side].push((d.at, d.frame, d.marks));
            });
        }
        out.into_iter()
            .enumerate()
            .map(|(i, frames)| {
                let (k, side) = (i / 2, i % 2);
                let core = &cores[shard_of(k, shards)];
                let counters = format!("{:?}", core.direction(local[k], side).counters());
                (frames, counters)
            })
            .collect()
    }

    #[test]
    fn any_number_of_shards_makes_the_same_decisions() {
        let one = run(12, 1);
        let dropped: usize = one
            .iter()
            .map(|(_, c)| usize::from(c.contains("dropped_loss: 0")))
            .sum();
        assert!(dropped < one.len(), "the trace exercises loss");
        assert!(
            one.iter()
                .any(|(f, _)| f.iter().any(|(_, _, m)| m.ecn_marked))
        );
        assert!(
            one.iter()
                .any(|(f, _)| f.iter().any(|(_, _, m)| m.duplicate))
        );
        for shards in [2, 4, 8] {
            let other = run(12, shards);
            for (i, (a, b)) in one.iter().zip(&other).enumerate() {
                assert_eq!(a.1, b.1, "{shards} shards: counters of direction {i}");
                assert_eq!(
                    a.0.len(),
                    b.0.len(),
                    "{shards} shards: frames of direction {i}"
                );
                assert!(a.0 == b.0, "{shards} shards: direction {i} differs");
            }
        }
    }

    #[test]
    fn only_what_is_due_leaves_and_in_due_order() {
        let imp = |us| Impairment {
            delay: Delay::from_micros(us),
            ..Impairment::default()
        };
        let mut shard = Shard::new(vec![
            [Direction::new(imp(50), 1), Direction::new(imp(5), 2)],
            [Direction::new(imp(20), 3), Direction::new(imp(1), 4)],
        ]);
        shard.offer(0, 0, 0, frame(1, 64));
        shard.offer(0, 1, 0, frame(2, 64));
        shard.offer(1, 0, 0, frame(3, 64));
        assert_eq!(shard.next_due(), Some(5_000));
        let mut left = Vec::new();
        shard.pop_due(20_000, |d| left.push((d.link, d.side, d.at)));
        assert_eq!(left, vec![(0, 1, 5_000), (1, 0, 20_000)]);
        assert_eq!(shard.next_due(), Some(50_000));
        shard.pop_due(49_999, |_| panic!("nothing is due"));
    }
}
