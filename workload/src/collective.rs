//! Collective operations as step schedules.
//!
//! A [`Collective`] (an operation, an algorithm, the job's ranks and the
//! operation's size as nccl-tests counts it) becomes a [`Schedule`]: steps,
//! each a set of [`Transfer`]s. A rank runs its steps in order; in each it
//! sends what it sends and receives what it receives, and it starts the
//! next step only when both are done — a step's sends depend on the data
//! the previous step brought, as in a real library. Only bytes move: the
//! reduction itself costs nothing here (an optional compute gap between
//! iterations stands for the work).
//!
//! The algorithms, and what each rank sends of an operation of `S` bytes
//! over `n` ranks:
//!
//! | operation      | algorithm          | steps            | bytes sent per rank |
//! |----------------|--------------------|------------------|---------------------|
//! | AllReduce      | ring               | 2(n-1)           | 2(n-1)/n x S        |
//! | AllReduce      | halving-doubling   | 2 log2 n         | 2(n-1)/n x S        |
//! | AllReduce      | tree               | 2 x depth        | S per tree edge, both ways |
//! | ReduceScatter  | ring               | n-1              | (n-1)/n x S         |
//! | AllGather      | ring               | n-1              | (n-1)/n x S         |
//! | Broadcast      | chain (pipelined)  | n-1 + chunks-1   | S (all but the last) |
//! | AllToAll       | pairwise           | n-1              | what it sends others |
//!
//! Ring algorithms split `S` into `n` chunks whose sizes differ by at most
//! one byte. Halving-doubling is Rabenseifner's (reduce-scatter by
//! recursive halving, then all-gather by recursive doubling; Thakur,
//! Rabenseifner and Gropp, "Optimization of Collective Communication
//! Operations in MPICH", 2005). The tree is a binary tree in rank order
//! (rank `r`'s parent is `(r-1)/2`): a reduce towards rank 0 level by
//! level, then a broadcast back down, not pipelined. All-to-all is
//! pairwise exchange: in step `k` rank `r` sends to `r+k` and receives
//! from `r-k`.

use serde::Serialize;

use crate::error::{Error, Result};

pub use turbonet_topo::experiment::{Algorithm, Op};

/// What an all-to-all sends between each pair of ranks: `sizes[from][to]`
/// bytes (the diagonal stays local).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PairSizes(Vec<Vec<u64>>);

impl PairSizes {
    /// `sizes[from][to]` for `ranks` ranks.
    pub fn new(ranks: usize, sizes: Vec<Vec<u64>>) -> Result<PairSizes> {
        if sizes.len() != ranks || sizes.iter().any(|row| row.len() != ranks) {
            let found = format!(
                "{} rows of {}",
                sizes.len(),
                sizes
                    .iter()
                    .map(|r| r.len().to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            );
            return Err(Error::BadSizes { ranks, found });
        }
        Ok(PairSizes(sizes))
    }

    /// Every rank sends `bytes / ranks` to every rank (nccl-tests'
    /// all-to-all of `bytes` per rank).
    pub fn uniform(ranks: usize, bytes: u64) -> PairSizes {
        PairSizes(vec![chunks(bytes, ranks); ranks])
    }

    /// An expert-parallel dispatch of `bytes` per rank whose destinations
    /// are skewed as in a mixture-of-experts layer: destination `e` gets a
    /// share proportional to `1 / (k + 1)^exponent`, where `k` is `e`'s
    /// place in a popularity order drawn from `seed` (the same hot experts
    /// for every sender). Exponent 0 is uniform. What a rank sends itself
    /// stays local. Row sums are exactly `bytes`.
    pub fn skewed(ranks: usize, bytes: u64, exponent: f64, seed: u64) -> PairSizes {
        use rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::from_seed(turbonet_topo::seed::chacha_key(seed));
        // Fisher-Yates: place[e] is e's popularity rank.
        let mut order: Vec<usize> = (0..ranks).collect();
        for i in (1..ranks).rev() {
            order.swap(i, crate::traffic::below(&mut rng, i + 1));
        }
        let mut place = vec![0; ranks];
        for (k, &e) in order.iter().enumerate() {
            place[e] = k;
        }
        let weight: Vec<f64> = place
            .iter()
            .map(|&k| 1.0 / ((k + 1) as f64).powf(exponent))
            .collect();
        let total: f64 = weight.iter().sum();
        let mut row: Vec<u64> = weight
            .iter()
            .map(|w| (bytes as f64 * w / total).floor() as u64)
            .collect();
        // What flooring left goes to the most popular, one byte each.
        let short = bytes - row.iter().sum::<u64>();
        for i in 0..short as usize {
            row[order[i % ranks]] += 1;
        }
        PairSizes(vec![row; ranks])
    }

    /// Bytes from `from` to `to`.
    pub fn get(&self, from: usize, to: usize) -> u64 {
        self.0[from][to]
    }

    /// The sizes the other way (an expert-parallel combine returns what the
    /// dispatch sent).
    pub fn transposed(&self) -> PairSizes {
        let n = self.0.len();
        PairSizes(
            (0..n)
                .map(|from| (0..n).map(|to| self.0[to][from]).collect())
                .collect(),
        )
    }

    /// The largest row sum: the buffer size nccl-tests would report.
    pub fn per_rank(&self) -> u64 {
        self.0.iter().map(|r| r.iter().sum()).max().unwrap_or(0)
    }
}

/// A collective operation over a job's ranks, valid by construction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Collective {
    op: Op,
    algorithm: Algorithm,
    ranks: usize,
    bytes: u64,
    root: usize,
    chunks: usize,
    sizes: Option<PairSizes>,
}

impl Collective {
    /// `op` with `algorithm` (or the operation's default) over `ranks`
    /// ranks, of `bytes` as nccl-tests counts an operation's size: the
    /// buffer for AllReduce and Broadcast, the whole (input for
    /// ReduceScatter, output for AllGather) for the two halves, each
    /// rank's send buffer for AllToAll.
    pub fn new(
        op: Op,
        algorithm: Option<Algorithm>,
        ranks: usize,
        bytes: u64,
    ) -> Result<Collective> {
        let algorithm = algorithm.unwrap_or(op.algorithms()[0]);
        if !op.algorithms().contains(&algorithm) {
            return Err(Error::NoSuchAlgorithm {
                op: op.name(),
                algorithm: algorithm.name(),
                valid: op
                    .algorithms()
                    .iter()
                    .map(|a| a.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if ranks < 2 {
            return Err(Error::TooFewRanks(ranks));
        }
        if algorithm == Algorithm::HalvingDoubling && !ranks.is_power_of_two() {
            return Err(Error::NotPowerOfTwo(ranks));
        }
        Ok(Collective {
            op,
            algorithm,
            ranks,
            bytes,
            root: 0,
            chunks: ranks,
            sizes: None,
        })
    }

    /// A broadcast from `root` (rank 0 unless set).
    pub fn with_root(mut self, root: usize) -> Result<Collective> {
        if root >= self.ranks {
            return Err(Error::NoSuchRoot {
                root,
                ranks: self.ranks,
            });
        }
        self.root = root;
        Ok(self)
    }

    /// An all-to-all with these per-pair sizes instead of uniform ones;
    /// its size becomes their largest row.
    pub fn with_sizes(mut self, sizes: PairSizes) -> Result<Collective> {
        if sizes.0.len() != self.ranks {
            return Err(Error::BadSizes {
                ranks: self.ranks,
                found: format!("{} rows", sizes.0.len()),
            });
        }
        self.bytes = sizes.per_rank();
        self.sizes = Some(sizes);
        Ok(self)
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.op
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The job's ranks.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The operation's size, as nccl-tests counts it.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Its steps.
    pub fn schedule(&self) -> Schedule {
        let n = self.ranks;
        let steps = match (self.op, self.algorithm) {
            (Op::AllReduce, Algorithm::Ring) => {
                let chunk = chunks(self.bytes, n);
                let mut steps = ring_steps(n, &chunk, 0);
                steps.extend(ring_steps(n, &chunk, 1));
                steps
            }
            (Op::ReduceScatter, _) => ring_steps(n, &chunks(self.bytes, n), 0),
            (Op::AllGather, _) => ring_steps(n, &chunks(self.bytes, n), 1),
            (Op::AllReduce, Algorithm::HalvingDoubling) => halving_doubling(n, self.bytes),
            (Op::AllReduce, _) => tree(n, self.bytes),
            (Op::Broadcast, _) => chain(n, self.root, &chunks(self.bytes, self.chunks)),
            (Op::AllToAll, _) => {
                let uniform;
                let sizes = match &self.sizes {
                    Some(s) => s,
                    None => {
                        uniform = PairSizes::uniform(n, self.bytes);
                        &uniform
                    }
                };
                pairwise(n, sizes)
            }
        };
        Schedule { ranks: n, steps }
    }
}

/// One rank sending bytes to another in a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Transfer {
    /// The sender.
    pub from: usize,
    /// The receiver.
    pub to: usize,
    /// How much.
    pub bytes: u64,
}

/// The transfers of one step.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Step {
    /// What moves, in rank order of the sender.
    pub transfers: Vec<Transfer>,
}

/// A collective's steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    /// The job's ranks.
    pub ranks: usize,
    /// The steps, in order.
    pub steps: Vec<Step>,
}

impl Schedule {
    /// Bytes `rank` sends over the whole operation.
    pub fn sent_by(&self, rank: usize) -> u64 {
        self.transfers()
            .filter(|t| t.from == rank)
            .map(|t| t.bytes)
            .sum()
    }

    /// Bytes `rank` receives over the whole operation.
    pub fn received_by(&self, rank: usize) -> u64 {
        self.transfers()
            .filter(|t| t.to == rank)
            .map(|t| t.bytes)
            .sum()
    }

    /// Every transfer, step by step.
    pub fn transfers(&self) -> impl Iterator<Item = &Transfer> {
        self.steps.iter().flat_map(|s| &s.transfers)
    }

    /// What `rank` sends and receives in step `step`.
    pub fn of_rank(&self, step: usize, rank: usize) -> (Vec<Transfer>, Vec<Transfer>) {
        let s = &self.steps[step].transfers;
        (
            s.iter().filter(|t| t.from == rank).copied().collect(),
            s.iter().filter(|t| t.to == rank).copied().collect(),
        )
    }
}

/// `bytes` split into `n` parts whose sizes differ by at most one, the
/// larger first.
fn chunks(bytes: u64, n: usize) -> Vec<u64> {
    let n64 = n as u64;
    (0..n64)
        .map(|i| bytes / n64 + u64::from(i < bytes % n64))
        .collect()
}

/// One pass around the ring: `n - 1` steps in which rank `r` sends chunk
/// `(r + offset - k) mod n` to `r + 1`. With offset 0 this is a
/// reduce-scatter, after which rank `r` owns chunk `r + 1`; with offset 1
/// it is the all-gather that starts from there (a lone all-gather numbers
/// each rank's share the same way).
fn ring_steps(n: usize, chunk: &[u64], offset: usize) -> Vec<Step> {
    (0..n - 1)
        .map(|k| Step {
            transfers: (0..n)
                .map(|r| Transfer {
                    from: r,
                    to: (r + 1) % n,
                    bytes: chunk[(r + offset + n - k) % n],
                })
                .collect(),
        })
        .collect()
}

/// Rabenseifner's AllReduce over `n = 2^m` ranks: in reduce-scatter step
/// `i` each rank exchanges half of its current segment with the rank whose
/// bit `m-1-i` differs, keeping the lower half if its bit is clear; the
/// all-gather retraces the steps backwards, sending the segment it has.
fn halving_doubling(n: usize, bytes: u64) -> Vec<Step> {
    let m = n.trailing_zeros() as usize;
    // Each rank's segment [lo, hi) of the buffer, after each halving.
    let mut segments: Vec<Vec<(u64, u64)>> = vec![vec![(0, bytes); n]];
    let mut scatter = Vec::with_capacity(m);
    for i in 0..m {
        let bit = n >> (i + 1);
        let current = segments.last().expect("starts with one").clone();
        let mut next = current.clone();
        let mut step = Step::default();
        for r in 0..n {
            let (lo, hi) = current[r];
            let mid = lo + (hi - lo).div_ceil(2);
            let (keep, give) = if r & bit == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            next[r] = keep;
            step.transfers.push(Transfer {
                from: r,
                to: r ^ bit,
                bytes: give.1 - give.0,
            });
        }
        segments.push(next);
        scatter.push(step);
    }
    let mut gather = Vec::with_capacity(m);
    for i in (0..m).rev() {
        let bit = n >> (i + 1);
        let have = &segments[i + 1];
        gather.push(Step {
            transfers: (0..n)
                .map(|r| Transfer {
                    from: r,
                    to: r ^ bit,
                    bytes: have[r].1 - have[r].0,
                })
                .collect(),
        });
    }
    scatter.extend(gather);
    scatter
}

/// Depth of rank `r` in the binary tree in rank order.
fn depth(r: usize) -> usize {
    (usize::BITS - (r + 1).leading_zeros() - 1) as usize
}

/// A reduce to rank 0 up a binary tree, deepest level first, then a
/// broadcast back down, whole buffers.
fn tree(n: usize, bytes: u64) -> Vec<Step> {
    let deepest = depth(n - 1);
    let level = |d: usize, up: bool| Step {
        transfers: (1..n)
            .filter(|&r| depth(r) == d)
            .map(|r| {
                let parent = (r - 1) / 2;
                let (from, to) = if up { (r, parent) } else { (parent, r) };
                Transfer { from, to, bytes }
            })
            .collect(),
    };
    let mut steps: Vec<Step> = (1..=deepest).rev().map(|d| level(d, true)).collect();
    steps.extend((1..=deepest).map(|d| level(d, false)));
    steps
}

/// A pipelined chain from `root` through the ranks in order: in step `t`
/// the rank at position `p` passes chunk `t - p` on.
fn chain(n: usize, root: usize, chunk: &[u64]) -> Vec<Step> {
    let c = chunk.len();
    (0..n - 1 + c - 1)
        .map(|t| Step {
            transfers: (0..n - 1)
                .filter(|&p| t >= p && t - p < c)
                .map(|p| Transfer {
                    from: (root + p) % n,
                    to: (root + p + 1) % n,
                    bytes: chunk[t - p],
                })
                .collect(),
        })
        .collect()
}

/// Pairwise exchange: in step `k` (1 to n-1) rank `r` sends its block for
/// `r + k` there.
fn pairwise(n: usize, sizes: &PairSizes) -> Vec<Step> {
    (1..n)
        .map(|k| Step {
            transfers: (0..n)
                .map(|r| {
                    let to = (r + k) % n;
                    Transfer {
                        from: r,
                        to,
                        bytes: sizes.get(r, to),
                    }
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(c: &Collective) -> Vec<u64> {
        let s = c.schedule();
        (0..c.ranks()).map(|r| s.sent_by(r)).collect()
    }

    #[test]
    fn ring_allreduce_sends_2_n_minus_1_over_n_of_the_buffer() {
        for n in [2, 3, 4, 8, 16] {
            let bytes = 1 << 20;
            let c = Collective::new(Op::AllReduce, None, n, bytes).unwrap();
            let s = c.schedule();
            assert_eq!(s.steps.len(), 2 * (n - 1));
            let want = 2 * (n as u64 - 1) * bytes / n as u64;
            for (r, got) in sent(&c).into_iter().enumerate() {
                assert!(got.abs_diff(want) <= 2 * n as u64, "n={n} rank {r}: {got}");
                // What a rank receives is what its left neighbour sends
                // (chunks differ by a byte at most).
                assert!(s.received_by(r).abs_diff(got) <= 2 * n as u64);
            }
        }
    }

    #[test]
    fn ring_chunks_are_each_sent_once_per_pass_and_cover_the_buffer() {
        // Over a reduce-scatter pass, each chunk leaves n-1 ranks once.
        let (n, bytes) = (5, 1003);
        let c = Collective::new(Op::ReduceScatter, None, n, bytes).unwrap();
        let total: u64 = c.schedule().transfers().map(|t| t.bytes).sum();
        assert_eq!(total, (n as u64 - 1) * bytes);
        assert_eq!(chunks(1003, 5), vec![201, 201, 201, 200, 200]);
    }

    #[test]
    fn in_a_ring_step_each_rank_forwards_what_it_received_the_step_before() {
        // Reduce-scatter: what r sends in step k+1 is the chunk r-1 sent it
        // in step k (it adds its own part and passes it on).
        let n = 4;
        let chunk: Vec<u64> = (0..n as u64).map(|i| 100 + i).collect();
        let steps = ring_steps(n, &chunk, 0);
        for k in 0..n - 2 {
            for r in 0..n {
                let from_left = steps[k].transfers[(r + n - 1) % n].bytes;
                assert_eq!(steps[k + 1].transfers[r].bytes, from_left);
            }
        }
    }

    #[test]
    fn halving_doubling_moves_what_the_ring_moves_in_log_steps() {
        for n in [2, 4, 8, 16] {
            let bytes = 3 << 16;
            let c =
                Collective::new(Op::AllReduce, Some(Algorithm::HalvingDoubling), n, bytes).unwrap();
            let s = c.schedule();
            assert_eq!(s.steps.len(), 2 * n.trailing_zeros() as usize);
            let want = 2 * (n as u64 - 1) * bytes / n as u64;
            for got in sent(&c) {
                assert!(got.abs_diff(want) <= 2 * n as u64, "n={n}: {got} vs {want}");
            }
            // Partners exchange: every transfer is answered in its step.
            for step in &s.steps {
                for t in &step.transfers {
                    assert!(
                        step.transfers
                            .iter()
                            .any(|u| u.from == t.to && u.to == t.from)
                    );
                }
            }
        }
        assert_eq!(
            Collective::new(Op::AllReduce, Some(Algorithm::HalvingDoubling), 6, 1),
            Err(Error::NotPowerOfTwo(6))
        );
    }

    #[test]
    fn a_tree_reduces_up_then_broadcasts_down() {
        let c = Collective::new(Op::AllReduce, Some(Algorithm::Tree), 6, 10).unwrap();
        let s = c.schedule();
        // Depth 2: ranks 3,4,5 -> 1,2; 1,2 -> 0; then back.
        assert_eq!(s.steps.len(), 4);
        let pairs = |i: usize| -> Vec<(usize, usize)> {
            s.steps[i]
                .transfers
                .iter()
                .map(|t| (t.from, t.to))
                .collect()
        };
        assert_eq!(pairs(0), vec![(3, 1), (4, 1), (5, 2)]);
        assert_eq!(pairs(1), vec![(1, 0), (2, 0)]);
        assert_eq!(pairs(2), vec![(0, 1), (0, 2)]);
        assert_eq!(pairs(3), vec![(1, 3), (1, 4), (2, 5)]);
        assert_eq!(s.received_by(0), 20);
    }

    #[test]
    fn a_chain_broadcast_passes_every_chunk_down_the_chain() {
        let c = Collective::new(Op::Broadcast, None, 4, 400)
            .unwrap()
            .with_root(2)
            .unwrap();
        let s = c.schedule();
        assert_eq!(s.steps.len(), 4 - 1 + 4 - 1);
        // Every rank but the root receives the whole buffer; the last in
        // the chain (rank 1) sends nothing.
        for r in [0, 1, 3] {
            assert_eq!(s.received_by(r), 400);
        }
        assert_eq!(s.received_by(2), 0);
        assert_eq!(s.sent_by(1), 0);
        assert_eq!(
            s.steps[0].transfers,
            vec![Transfer {
                from: 2,
                to: 3,
                bytes: 100
            }]
        );
        assert!(c.clone().with_root(4).is_err());
    }

    #[test]
    fn pairwise_all_to_all_sends_each_block_once() {
        let n = 4;
        let c = Collective::new(Op::AllToAll, None, n, 4000).unwrap();
        let s = c.schedule();
        assert_eq!(s.steps.len(), n - 1);
        for r in 0..n {
            assert_eq!(s.sent_by(r), 3000);
            let mut peers: Vec<usize> = s
                .transfers()
                .filter(|t| t.from == r)
                .map(|t| t.to)
                .collect();
            peers.sort_unstable();
            assert_eq!(peers, (0..n).filter(|&p| p != r).collect::<Vec<_>>());
        }
    }

    #[test]
    fn skewed_sizes_go_where_they_say_and_transpose_for_the_combine() {
        let sizes = PairSizes::new(3, vec![vec![0, 5, 1], vec![2, 0, 7], vec![3, 4, 0]]).unwrap();
        let c = Collective::new(Op::AllToAll, None, 3, 0)
            .unwrap()
            .with_sizes(sizes.clone())
            .unwrap();
        assert_eq!(c.bytes(), 9);
        let s = c.schedule();
        assert_eq!(s.sent_by(1), 9);
        assert_eq!(s.received_by(2), 8);
        assert_eq!(sizes.transposed().get(1, 0), 5);
        assert!(PairSizes::new(3, vec![vec![0; 3]; 2]).is_err());
    }

    #[test]
    fn skewed_dispatch_sends_most_to_the_hot_experts_and_sums_to_the_buffer() {
        let sizes = PairSizes::skewed(8, 1 << 20, 1.2, 42);
        for from in 0..8 {
            assert_eq!((0..8).map(|to| sizes.get(from, to)).sum::<u64>(), 1 << 20);
        }
        let row: Vec<u64> = (0..8).map(|to| sizes.get(0, to)).collect();
        let (max, min) = (*row.iter().max().unwrap(), *row.iter().min().unwrap());
        // Zipf 1.2 over 8: the first place gets 8^1.2 = 12x the last.
        assert!(max > 10 * min, "{row:?}");
        assert_eq!(sizes, PairSizes::skewed(8, 1 << 20, 1.2, 42));
        assert_ne!(sizes, PairSizes::skewed(8, 1 << 20, 1.2, 43));
        let uniform = PairSizes::skewed(4, 400, 0.0, 1);
        assert_eq!(uniform, PairSizes::uniform(4, 400));
    }

    #[test]
    fn a_bad_description_says_what_is_valid() {
        let e = Collective::new(Op::Broadcast, Some(Algorithm::Ring), 4, 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "broadcast has no ring algorithm (valid: chain)"
        );
        assert_eq!(
            Collective::new(Op::AllReduce, None, 1, 1),
            Err(Error::TooFewRanks(1))
        );
        assert_eq!(Op::from_name("all-to-all"), Some(Op::AllToAll));
        assert_eq!(
            Algorithm::from_name("halving-doubling"),
            Some(Algorithm::HalvingDoubling)
        );
    }
}
