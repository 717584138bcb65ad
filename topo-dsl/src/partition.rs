//! The partitioner both planners share: places the vertices of a graph on
//! parts of given shares — virtual switches on physical switches (the P4
//! mapper, [`crate::mapper`]), a lab's nodes on machines
//! ([`crate::machines`]) — keeping groups of vertices (atoms) together,
//! every part within a balance bound in every dimension, and few links
//! between parts. Pure: the same problem gives the same placement.
//!
//! # Algorithm
//!
//! A part's **bound** in a dimension is its share of that dimension's total
//! weight, [`BALANCE_SLACK`] above. A part is as **full** as its fullest
//! dimension, each measured against the part's share of the total.
//!
//! 1. **Greedy**: atoms are placed heaviest first (each dimension counted
//!    as a fraction of its total, summed), each on the part it has the most
//!    links to among the parts within bound, ties to the least full, then
//!    to the first.
//! 2. **Hierarchy**: an atom no part has room for, and that splits into
//!    smaller atoms (a pod into its segments), is given the fewest least
//!    full parts whose room together holds it, and its smaller atoms are
//!    placed there the same way, so what belongs together spreads over as
//!    few parts as it must. An atom that does not split goes to a part
//!    with room anywhere, or, when none has room, to the part it fills
//!    least.
//! 3. **Refinement** (Kernighan-Lin style): pieces move one at a time, in
//!    order, to the part where more of their links end, whenever that
//!    keeps the part within bound (and, with [`Problem::keep_parts`],
//!    leaves the piece's part something), until nothing moves. Every move
//!    cuts fewer links, so this ends.

/// How far above its share of the weight the partitioner loads a part.
pub const BALANCE_SLACK: f64 = 0.05;

/// Vertices placed together: whole when a part has room for them, else
/// split into [`Atom::children`] (when it has some).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Atom {
    /// Every vertex of the atom, its children's included.
    pub vertices: Vec<usize>,
    /// The smaller atoms it splits into (empty: it never splits).
    pub children: Vec<Atom>,
}

impl Atom {
    /// An atom that never splits.
    pub fn whole(vertices: Vec<usize>) -> Atom {
        Atom {
            vertices,
            children: Vec::new(),
        }
    }

    /// An atom that splits into `children` when no part has room for it.
    pub fn of(children: Vec<Atom>) -> Atom {
        Atom {
            vertices: children.iter().flat_map(|c| c.vertices.clone()).collect(),
            children,
        }
    }
}

/// What to partition.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// Balance dimensions (e.g. namespaces, devices, engine load).
    pub dimensions: usize,
    /// Weight of every vertex in every dimension, vertex by vertex:
    /// `weights[v * dimensions + d]`.
    pub weights: Vec<f64>,
    /// Every vertex's neighbours, one entry per link. Links to vertices in
    /// no atom are not counted.
    pub neighbours: Vec<Vec<usize>>,
    /// The atoms; a vertex in none of them is not placed.
    pub atoms: Vec<Atom>,
    /// What refinement moves, each a set of vertices moved together (a
    /// subset of one atom, so that atoms that must stay whole do).
    pub pieces: Vec<Vec<usize>>,
    /// True when refinement never moves the last piece off a part, so
    /// that every part the greedy step used keeps something (a machine runs
    /// a worker either way; a physical switch left empty needs no cables).
    pub keep_parts: bool,
}

impl Problem {
    /// The weight of `vertices` in every dimension.
    fn weight(&self, vertices: &[usize]) -> Vec<f64> {
        let mut w = vec![0.0; self.dimensions];
        for &v in vertices {
            let own = &self.weights[v * self.dimensions..(v + 1) * self.dimensions];
            for (sum, x) in w.iter_mut().zip(own) {
                *sum += x;
            }
        }
        w
    }
}

/// Places `problem`'s atoms on parts with capacities `shares` (any
/// positive numbers: a part's bound is `share / sum(shares)` of every
/// dimension's total). Returns every vertex's part (`None`: in no atom).
pub fn partition(problem: &Problem, shares: &[f64]) -> Vec<Option<usize>> {
    let mut state = State::new(problem, shares);
    if shares.len() == 1 {
        for atom in &problem.atoms {
            state.assign(&atom.vertices, &problem.weight(&atom.vertices), 0);
        }
        return state.place;
    }
    let all: Vec<usize> = (0..shares.len()).collect();
    let atoms: Vec<&Atom> = problem.atoms.iter().collect();
    state.greedy(&atoms, &all);
    let mut piece_of = vec![usize::MAX; problem.neighbours.len()];
    for (i, piece) in problem.pieces.iter().enumerate() {
        for &v in piece {
            piece_of[v] = i;
        }
    }
    let weights: Vec<Vec<f64>> = problem.pieces.iter().map(|p| problem.weight(p)).collect();
    if problem.keep_parts {
        state.fill_empty_parts(&piece_of, &weights);
    }
    state.refine(&piece_of, &weights);
    state.place
}

/// A partition under way.
struct State<'a> {
    problem: &'a Problem,
    shares: &'a [f64],
    /// Every dimension's total weight.
    total: Vec<f64>,
    /// Every vertex's part.
    place: Vec<Option<usize>>,
    /// Load of every part in every dimension, part by part.
    load: Vec<f64>,
    /// Bound of every part in every dimension, part by part.
    bound: Vec<f64>,
}

impl<'a> State<'a> {
    fn new(problem: &'a Problem, shares: &'a [f64]) -> State<'a> {
        let dims = problem.dimensions;
        let mut total = vec![0.0; dims];
        for atom in &problem.atoms {
            for (t, w) in total.iter_mut().zip(problem.weight(&atom.vertices)) {
                *t += w;
            }
        }
        let sum: f64 = shares.iter().sum();
        let bound = shares
            .iter()
            .flat_map(|s| {
                total
                    .iter()
                    .map(move |t| t * s / sum * (1.0 + BALANCE_SLACK) + 1e-9)
            })
            .collect();
        State {
            problem,
            shares,
            place: vec![None; problem.neighbours.len()],
            load: vec![0.0; shares.len() * dims],
            bound,
            total,
        }
    }

    fn dims(&self) -> usize {
        self.problem.dimensions
    }

    /// True when part `p` stays within bound with `w` more.
    fn fits(&self, p: usize, w: &[f64]) -> bool {
        let d = self.dims();
        w.iter()
            .enumerate()
            .all(|(i, x)| self.load[p * d + i] + x <= self.bound[p * d + i])
    }

    /// How full part `p` would be with `w` more: its fullest dimension,
    /// against the part's share of that dimension's total.
    fn fullness(&self, p: usize, w: &[f64]) -> f64 {
        let d = self.dims();
        (0..d)
            .filter(|&i| self.total[i] > 0.0)
            .map(|i| (self.load[p * d + i] + w[i]) / self.shares[p] / self.total[i])
            .fold(0.0, f64::max)
    }

    /// Weight as a single number: every dimension as a fraction of its
    /// total, summed.
    fn heaviness(&self, w: &[f64]) -> f64 {
        w.iter()
            .zip(&self.total)
            .filter(|(_, t)| **t > 0.0)
            .map(|(x, t)| x / t)
            .sum()
    }

    fn assign(&mut self, vertices: &[usize], w: &[f64], p: usize) {
        for &v in vertices {
            self.place[v] = Some(p);
        }
        let d = self.dims();
        for (i, x) in w.iter().enumerate() {
            self.load[p * d + i] += x;
        }
    }

    /// Links from `vertices` to each part, counting only vertices placed
    /// and not in `vertices` itself (`inside`).
    fn links_to_parts(&self, vertices: &[usize], inside: impl Fn(usize) -> bool) -> Vec<i64> {
        let mut conn = vec![0i64; self.shares.len()];
        for &v in vertices {
            for &peer in &self.problem.neighbours[v] {
                if let Some(p) = self.place[peer]
                    && !inside(peer)
                {
                    conn[p] += 1;
                }
            }
        }
        conn
    }

    /// The part of `candidates` within bound with `w` more that `conn`
    /// links to most, ties to the least full, then to the first.
    fn best(&self, conn: &[i64], w: &[f64], candidates: &[usize]) -> Option<usize> {
        let zero = vec![0.0; self.dims()];
        let mut best: Option<usize> = None;
        for &p in candidates.iter().filter(|&&p| self.fits(p, w)) {
            let better = best.is_none_or(|b| {
                conn[p] > conn[b]
                    || (conn[p] == conn[b] && self.fullness(p, &zero) < self.fullness(b, &zero))
            });
            if better {
                best = Some(p);
            }
        }
        best
    }

    /// The fewest least full parts of `group` whose room together holds
    /// `w` (all of them when even that is not enough), in part order.
    fn room_for(&self, w: &[f64], group: &[usize]) -> Vec<usize> {
        let zero = vec![0.0; self.dims()];
        let mut by_fullness = group.to_vec();
        by_fullness.sort_by(|&x, &y| {
            self.fullness(x, &zero)
                .total_cmp(&self.fullness(y, &zero))
                .then(x.cmp(&y))
        });
        let d = self.dims();
        let mut room = vec![0.0; d];
        let mut chosen = Vec::new();
        for p in by_fullness {
            chosen.push(p);
            for (i, r) in room.iter_mut().enumerate() {
                *r += (self.bound[p * d + i] - self.load[p * d + i]).max(0.0);
            }
            if room.iter().zip(w).all(|(r, x)| x <= r) {
                break;
            }
        }
        chosen.sort_unstable();
        chosen
    }

    /// Places `atoms` on the parts of `group`, heaviest first.
    fn greedy(&mut self, atoms: &[&Atom], group: &[usize]) {
        let mut order: Vec<(f64, &Atom, Vec<f64>)> = atoms
            .iter()
            .map(|a| {
                let w = self.problem.weight(&a.vertices);
                (self.heaviness(&w), *a, w)
            })
            .collect();
        // Stable: atoms of equal weight keep their order.
        order.sort_by(|x, y| y.0.total_cmp(&x.0));
        let all: Vec<usize> = (0..self.shares.len()).collect();
        for (_, atom, w) in order {
            let conn = self.links_to_parts(&atom.vertices, |_| false);
            if let Some(p) = self.best(&conn, &w, group) {
                self.assign(&atom.vertices, &w, p);
            } else if !atom.children.is_empty() {
                let parts = self.room_for(&w, group);
                let children: Vec<&Atom> = atom.children.iter().collect();
                self.greedy(&children, &parts);
            } else if let Some(p) = self.best(&conn, &w, &all) {
                self.assign(&atom.vertices, &w, p);
            } else {
                let p = (0..self.shares.len())
                    .min_by(|&x, &y| self.fullness(x, &w).total_cmp(&self.fullness(y, &w)))
                    .expect("at least one part");
                self.assign(&atom.vertices, &w, p);
            }
        }
    }

    /// The part of piece `i` (`None`: not placed).
    fn part_of_piece(&self, i: usize) -> Option<usize> {
        self.problem.pieces[i].first().and_then(|&v| self.place[v])
    }

    /// How many pieces every part holds.
    fn pieces_per_part(&self) -> Vec<usize> {
        let mut count = vec![0; self.shares.len()];
        for i in 0..self.problem.pieces.len() {
            if let Some(p) = self.part_of_piece(i) {
                count[p] += 1;
            }
        }
        count
    }

    /// Links from piece `i` to each part, its own vertices left out
    /// (`piece_of`: every vertex's piece).
    fn piece_links(&self, i: usize, piece_of: &[usize]) -> Vec<i64> {
        self.links_to_parts(&self.problem.pieces[i], |v| piece_of[v] == i)
    }

    /// Moves piece `i`, weighing `w`, from part `from` to part `to`.
    fn move_piece(&mut self, i: usize, w: &[f64], from: usize, to: usize) {
        for &v in &self.problem.pieces[i] {
            self.place[v] = Some(to);
        }
        let d = self.dims();
        for (k, x) in w.iter().enumerate() {
            self.load[from * d + k] -= x;
            self.load[to * d + k] += x;
        }
    }

    /// Gives every empty part a piece of a part that has several: the
    /// piece whose move cuts the fewest more links (ties to the lightest,
    /// then the first).
    fn fill_empty_parts(&mut self, piece_of: &[usize], weights: &[Vec<f64>]) {
        for empty in 0..self.shares.len() {
            let count = self.pieces_per_part();
            if count[empty] > 0 {
                continue;
            }
            let mut best: Option<(i64, f64, usize, usize)> = None;
            for (i, w) in weights.iter().enumerate() {
                let Some(cur) = self.part_of_piece(i).filter(|&p| count[p] > 1) else {
                    continue;
                };
                let conn = self.piece_links(i, piece_of);
                let cost = conn[cur] - conn[empty];
                let weight = self.heaviness(w);
                if best.is_none_or(|(c, w, _, _)| cost < c || (cost == c && weight < w)) {
                    best = Some((cost, weight, i, cur));
                }
            }
            let Some((_, _, i, from)) = best else {
                return;
            };
            self.move_piece(i, &weights[i], from, empty);
        }
    }

    /// Moves pieces to where more of their links end, within bound, until
    /// nothing moves ([`Problem::keep_parts`]: never a part's last piece).
    fn refine(&mut self, piece_of: &[usize], weights: &[Vec<f64>]) {
        let mut count = self.pieces_per_part();
        loop {
            let mut moved = false;
            for (i, w) in weights.iter().enumerate() {
                let Some(cur) = self.part_of_piece(i) else {
                    continue;
                };
                if self.problem.keep_parts && count[cur] == 1 {
                    continue;
                }
                let conn = self.piece_links(i, piece_of);
                let mut best = cur;
                for p in 0..self.shares.len() {
                    if p != cur && self.fits(p, w) && conn[p] - conn[cur] > conn[best] - conn[cur] {
                        best = p;
                    }
                }
                if best != cur {
                    self.move_piece(i, w, cur, best);
                    count[cur] -= 1;
                    count[best] += 1;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two triangles joined by one link, one dimension, every vertex
    /// weighing 1.
    fn two_triangles() -> Problem {
        let edges = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (2, 3)];
        let mut neighbours = vec![Vec::new(); 6];
        for (a, b) in edges {
            neighbours[a].push(b);
            neighbours[b].push(a);
        }
        Problem {
            dimensions: 1,
            weights: vec![1.0; 6],
            neighbours,
            atoms: (0..6).map(|v| Atom::whole(vec![v])).collect(),
            pieces: (0..6).map(|v| vec![v]).collect(),
            keep_parts: false,
        }
    }

    #[test]
    fn two_triangles_are_cut_at_their_bridge() {
        let place = partition(&two_triangles(), &[1.0, 1.0]);
        let parts: Vec<usize> = place.into_iter().map(Option::unwrap).collect();
        assert_eq!(parts[0], parts[1]);
        assert_eq!(parts[1], parts[2]);
        assert_eq!(parts[3], parts[4]);
        assert_eq!(parts[4], parts[5]);
        assert_ne!(parts[0], parts[3]);
    }

    #[test]
    fn one_part_takes_every_atom_and_leaves_the_rest() {
        let mut problem = two_triangles();
        problem.atoms.pop();
        let place = partition(&problem, &[1.0]);
        assert_eq!(place[..5], [Some(0); 5]);
        assert_eq!(place[5], None);
    }

    #[test]
    fn an_atom_too_heavy_for_a_part_splits_over_the_fewest_parts() {
        // Vertices 0-3 in a group that splits into pairs; 4 and 5 alone.
        // On three parts, the group takes two of them, the singles the third.
        let mut problem = two_triangles();
        problem.atoms = vec![
            Atom::of(vec![Atom::whole(vec![0, 1]), Atom::whole(vec![2, 3])]),
            Atom::whole(vec![4]),
            Atom::whole(vec![5]),
        ];
        problem.pieces = vec![vec![0, 1], vec![2, 3], vec![4], vec![5]];
        let place = partition(&problem, &[1.0, 1.0, 1.0]);
        assert_eq!(place[0], place[1]);
        assert_eq!(place[2], place[3]);
        assert_ne!(place[0], place[2]);
        assert_eq!(place[4], place[5]);
        assert!(place[4] != place[0] && place[4] != place[2]);
    }

    #[test]
    fn every_dimension_is_balanced() {
        // Two atoms weigh in the first dimension, two in the second, and
        // nothing links them: each part takes one of each.
        let problem = Problem {
            dimensions: 2,
            weights: vec![1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0],
            neighbours: vec![Vec::new(); 4],
            atoms: (0..4).map(|v| Atom::whole(vec![v])).collect(),
            pieces: (0..4).map(|v| vec![v]).collect(),
            keep_parts: false,
        };
        let place = partition(&problem, &[1.0, 1.0]);
        assert_ne!(place[0], place[1]);
        assert_ne!(place[2], place[3]);
    }

    #[test]
    fn kept_parts_get_a_piece_each() {
        // A heavy vertex 0 takes a part of its own; 1 and 2, linked to it
        // and to each other, fit one other part, leaving the third empty
        // unless every part must be kept.
        let mut problem = Problem {
            dimensions: 1,
            weights: vec![2.0, 0.5, 0.5],
            neighbours: vec![vec![1, 2], vec![0, 2], vec![0, 1]],
            atoms: (0..3).map(|v| Atom::whole(vec![v])).collect(),
            pieces: (0..3).map(|v| vec![v]).collect(),
            keep_parts: false,
        };
        let shares = [1.0, 1.0, 1.0];
        let used = |place: Vec<Option<usize>>| {
            let mut parts: Vec<usize> = place.into_iter().map(Option::unwrap).collect();
            parts.sort_unstable();
            parts.dedup();
            parts.len()
        };
        assert_eq!(used(partition(&problem, &shares)), 2);
        problem.keep_parts = true;
        assert_eq!(used(partition(&problem, &shares)), 3);
    }
}
