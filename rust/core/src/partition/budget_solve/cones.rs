//! Greedy descent by cones ([`Solver::descend_cones`]): from a point over
//! budget, stop saving one saved value at a time and recompute its *cone*
//! (the value and its ancestors up to the values already saved), picking the
//! cone that frees the most bytes per unit of recompute cost.
//!
//! Why cones and not single nodes: in a transformer a saved value is usually
//! reached through a chain (`bmm -> view -> transpose -> clone`); recomputing
//! one link while the next stays saved frees nothing, so a one-node step
//! ([`Solver::descend`]) finds no move. A cone is the smallest set whose
//! recomputation stops holding one saved value.
//!
//! Lazy greedy: a move enters the queue with an optimistic ratio (its value's
//! storage bytes over the cost of the cone it would add), keeps the ratio of
//! its last evaluation, and only the best is evaluated again (a move's ratio
//! rarely improves as others are taken), so a step costs a few evaluations
//! instead of one per move. On small graphs the caller asks for a *thorough*
//! descent: every move is evaluated before the first step and every one is
//! tried for the finishing step (the estimate is optimistic for most moves,
//! not all: a cone can cost less than its nodes' sum, or unsaving a value
//! can free its inputs too). The step
//! that reaches the budget takes the cheapest move that finishes it among those
//! that freed enough when last evaluated; moves whose ratios are within
//! [`BAND`] rank the finer first (fine-grained moves fill the budget exactly: a
//! coarse one overshoots it). Complexity: `O((S + T·r + F) (N + E))` for `S`
//! saved values, `T` steps, `r` re-evaluations per step and `F` finishing moves.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};

use super::{better, Point, Solver};
use crate::ids::NodeId;
use crate::store::NodeKind;

/// A move in the queue: its last-seen ratio (bytes freed per unit of cost) and
/// added cost (smaller first on equal ratios), and the saved value it unsaves.
struct Move {
    ratio: f64,
    added: f64,
    /// Bytes it freed when last evaluated.
    freed: u64,
    value: NodeId,
}

impl Move {
    /// The ratio's band: moves within [`BAND`] of each other rank by added cost
    /// (the finer move first: coarse ones overshoot the budget).
    fn bucket(&self) -> i64 {
        if self.ratio.is_infinite() {
            return i64::MAX;
        }
        #[allow(clippy::cast_possible_truncation)]
        let b = (self.ratio.max(1e-300).ln() / BAND.ln_1p()).floor() as i64;
        b
    }
}

impl PartialEq for Move {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Move {}
impl PartialOrd for Move {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Move {
    fn cmp(&self, other: &Self) -> Ordering {
        self.bucket()
            .cmp(&other.bucket())
            .then(other.added.total_cmp(&self.added))
            .then(other.value.cmp(&self.value))
    }
}

/// Ratios within this relative band rank as equal (see [`Move::bucket`]).
const BAND: f64 = 0.01;

/// The state of one descent: the point reached, what it computes in the
/// backward, and the queue of moves.
struct Descent {
    cur: Point,
    on: Vec<bool>,
    saved: Vec<bool>,
    queued: Vec<bool>,
    heap: BinaryHeap<Move>,
    thorough: bool,
}

impl Solver<'_> {
    /// See the module docs; `None` when no move frees bytes before `target`.
    /// `thorough`: every move enters the queue unrated (each is evaluated once,
    /// and every one is a finishing candidate) instead of with its estimate.
    pub fn descend_cones(&self, start: &Point, target: u64, thorough: bool) -> Option<Point> {
        let n = self.store.len();
        let mut d = Descent {
            cur: start.clone(),
            on: super::computed_in_bw(&start.partition),
            saved: vec![false; n],
            queued: vec![false; n],
            heap: BinaryHeap::new(),
            thorough,
        };
        self.enter(&mut d);
        while d.cur.bytes > target {
            let top = d.heap.pop()?;
            let Some((p, m)) = self.try_cone(&d, top.value) else {
                continue;
            };
            if d.heap.peek().is_some_and(|next| *next > m) {
                d.heap.push(m);
                continue;
            }
            if p.bytes <= target {
                return Some(self.cheapest_finish(&d, target, p));
            }
            for v in self.cone(top.value, &d) {
                d.on[v.index()] = true;
            }
            d.cur = p;
            self.enter(&mut d);
        }
        Some(d.cur)
    }

    /// Marks `d.cur`'s saved values and queues those not queued yet, with their
    /// optimistic ratio (see the module docs).
    fn enter(&self, d: &mut Descent) {
        d.saved.fill(false);
        for v in &d.cur.partition.saved {
            d.saved[v.index()] = true;
        }
        for i in 0..d.cur.partition.saved.len() {
            let s = d.cur.partition.saved[i];
            let root = self.roots[s.index()];
            if d.queued[s.index()] || self.store.kind[root.index()] == NodeKind::Primal {
                continue;
            }
            let cone = self.cone(s, d);
            if cone.is_empty() {
                continue;
            }
            d.queued[s.index()] = true;
            let added: f64 = cone
                .iter()
                .filter(|v| !d.on[v.index()])
                .map(|v| self.cost[v.index()])
                .sum();
            let freed = if d.thorough {
                u64::MAX
            } else {
                self.store.nbytes[root.index()]
            };
            d.heap.push(Move {
                ratio: if d.thorough {
                    f64::INFINITY
                } else {
                    freed as f64 / added.max(1e-9)
                },
                added,
                freed,
                value: s,
            });
        }
    }

    /// The point that also recomputes the cone of saved `s`, and its move, if it
    /// frees bytes and saves only what can be saved.
    fn try_cone(&self, d: &Descent, s: NodeId) -> Option<(Point, Move)> {
        if !d.saved[s.index()] {
            return None;
        }
        let mut with = d.on.clone();
        for v in self.cone(s, d) {
            with[v.index()] = true;
        }
        let p = self.point(|u| with[u.index()]);
        if p.bytes >= d.cur.bytes || !self.savable(&p.partition) {
            return None;
        }
        let added = (p.cost - d.cur.cost).max(1e-9);
        let freed = d.cur.bytes - p.bytes;
        let m = Move {
            ratio: freed as f64 / added,
            added,
            freed,
            value: s,
        };
        Some((p, m))
    }

    /// The best (cheapest) point within `target` among the queued moves that
    /// freed enough when last evaluated (or estimated), or `found`.
    fn cheapest_finish(&self, d: &Descent, target: u64, mut found: Point) -> Point {
        let need = d.cur.bytes - target;
        for m in d.heap.iter().filter(|m| m.freed >= need) {
            if let Some((p, _)) = self.try_cone(d, m.value) {
                if p.bytes <= target && better(&p, &found, target) {
                    found = p;
                }
            }
        }
        found
    }

    /// `s` and every ancestor reached from it through values that `d.cur` does
    /// not save, that may be recomputed.
    fn cone(&self, s: NodeId, d: &Descent) -> Vec<NodeId> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut stack = vec![s];
        while let Some(v) = stack.pop() {
            if !self.is_candidate[v.index()] || !seen.insert(v) {
                continue;
            }
            out.push(v);
            for &a in self.store.args(v) {
                if !d.saved[a.index()] {
                    stack.push(a);
                }
            }
        }
        out
    }
}
