//! The solvers behind [`super::budget`]: a parametric min cut (Lagrangian
//! relaxation of "saved bytes ≤ B, least recompute cost"), a greedy repair
//! of its result, and an exhaustive exact solver for small graphs.
//!
//! **Parametric cut.** For a multiplier `λ ≥ 0`, one min cut minimizes
//! `activation_bytes + λ · recompute_cost` over all valid partitions: the flow
//! network of [`super::partition_min_cut`] with raw byte capacities on
//! `in(v) -> out(v)` (0 for primals: saving an input holds no new memory; no
//! distance scaling, no fusion doubling), hard bans only
//! ([`OpRules::never_recompute`]; the min-cut heuristics are off), and an extra
//! edge `source -> in(v)` of capacity `λ · cost(v)` that the cut pays exactly
//! when `v` is recomputed. `λ = 0` gives the smallest achievable saved bytes
//! (exact: a minimum cut); a larger `λ` recomputes less. Each `λ` gives a
//! point on the lower convex hull of the (saved bytes, recompute cost)
//! Pareto frontier; points between hull vertices are not reachable by any `λ`,
//! which is the approximation. Complexity: one max flow per `λ`.
//!
//! **Greedy repair** ([`Solver::repair`]): from a feasible point, stop
//! recomputing the costliest recomputed nodes one at a time while the budget
//! still holds (`O(K · (N + E))` for `K` tries). On graphs with at most
//! [`DESCEND_MAX`] candidates, also a greedy descent ([`Solver::descend`])
//! from the cheapest point over budget, by bytes freed per unit of cost.
//!
//! **Exact** ([`Solver::exact`]): every subset of the `k` recompute candidates
//! (forward nodes the backward needs that may be recomputed), `O(2^k (N + E))`;
//! used when `k ≤` [`EXACT_MAX`] and by tests as the oracle.
//!
//! Reference: the Lagrangian view of checkpointing is the one of "Checkmate"
//! (Jain et al., `MLSys` 2020); torch's `activation_memory_budget` solves a
//! knapsack over the min-cut's saved values instead.

use super::classify::NodeInfo;
use super::cost::recompute_costs;
use super::derive::{common_reason, derive};
use super::result::{Partition, SavedReason};
use super::rules::OpRules;
use crate::error::{Error, Result};
use crate::flow::dinic::{dinic_bounded, Levels};
use crate::flow::{max_source_side, FlowNetwork};
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

const INF: f64 = f64::INFINITY;

/// Candidate counts up to which every subset is evaluated inside the solver.
pub const EXACT_MAX: usize = 14;

/// Candidate counts up to which [`Solver::descend`] refines the parametric cut.
pub const DESCEND_MAX: usize = 96;

/// One evaluated partition: its activation bytes and recompute cost.
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub partition: Partition,
    /// [`activation_bytes`] of the partition.
    pub bytes: u64,
    pub cost: f64,
}

/// The bytes a partition saves beyond its primal inputs: the activation
/// memory it holds (a saved primal is memory the caller holds anyway).
pub fn activation_bytes(store: &GraphStore, p: &Partition) -> u64 {
    let primals = p
        .saved
        .iter()
        .filter(|v| {
            store.kind[v.index()] == NodeKind::Primal && !store.has_flag(**v, flags::SYMINT)
        })
        .fold(0u64, |s, v| s.saturating_add(store.nbytes[v.index()]));
    p.saved_bytes.saturating_sub(primals)
}

/// A graph prepared once for any number of solves.
pub(crate) struct Solver<'a> {
    store: &'a GraphStore,
    rules: OpRules,
    info: NodeInfo,
    pub cost: Vec<f64>,
    /// The edges of the network without the `λ` edges.
    base: (Vec<u32>, Vec<u32>, Vec<f64>),
    /// Nodes that get a `source -> in(v)` edge of capacity `λ · cost(v)`.
    priced: Vec<NodeId>,
    /// Forward nodes the backward needs that may be recomputed.
    pub candidates: Vec<NodeId>,
}

impl<'a> Solver<'a> {
    pub fn new(store: &'a GraphStore) -> Result<Self> {
        let rules = OpRules::new(store);
        let info = NodeInfo::new(store)?;
        let cost = recompute_costs(store, &rules);
        let n = store.len() as u32;
        let (source, sink) = (2 * n, 2 * n + 1);
        let (mut src, mut dst, mut cap) = (Vec::new(), Vec::new(), Vec::new());
        let mut push = |u: u32, v: u32, c: f64| {
            src.push(u);
            dst.push(v);
            cap.push(c);
        };
        let (mut priced, mut candidates) = (Vec::new(), Vec::new());
        for v in store.node_ids() {
            let i = v.index();
            if !info.needed_by_bw[i] {
                continue;
            }
            let (vin, vout) = (2 * v.0, 2 * v.0 + 1);
            if info.td[i] {
                push(vin, sink, INF);
                continue;
            }
            if info.required_bw[i] {
                push(vout, sink, INF);
            }
            let never = rules.never_recompute(store, v).is_some();
            if rules.must_recompute(v) && !never {
                push(vin, sink, INF);
                continue;
            }
            if never {
                push(source, vin, INF);
            } else {
                priced.push(v);
                if store.kind[i] == NodeKind::Call || store.kind[i] == NodeKind::GetAttr {
                    candidates.push(v);
                }
            }
            push(vin, vout, save_cap(store, v));
            let users = store.users(v);
            for (k, &u) in users.iter().enumerate() {
                if info.needed_by_bw[u.index()] && (k == 0 || users[k - 1] != u) {
                    push(vout, 2 * u.0, INF);
                }
            }
        }
        Ok(Self {
            store,
            rules,
            info,
            cost,
            base: (src, dst, cap),
            priced,
            candidates,
        })
    }

    /// The partition minimizing `activation_bytes + λ · recompute_cost` (see the
    /// module docs); [`Error::Partition`] when no partition exists.
    pub fn at(&self, lambda: f64) -> Result<Point> {
        let (mut src, mut dst, mut cap) = self.base.clone();
        let n = self.store.len() as u32;
        if lambda > 0.0 {
            for &v in &self.priced {
                src.push(2 * n);
                dst.push(2 * v.0);
                cap.push(lambda * self.cost[v.index()]);
            }
        }
        let net = FlowNetwork::from_edges(2 * n as usize + 2, &src, &dst, &cap, 2 * n, 2 * n + 1)?;
        if net.infinite_path().is_some() {
            return Err(Error::Partition(
                "a value the backward needs can be neither saved nor recomputed".to_string(),
            ));
        }
        let flow = dinic_bounded(&net, Levels::FromSource);
        let side = max_source_side(&net, &flow);
        Ok(self.point(|v| !side[2 * v.index()]))
    }

    /// The partition that recomputes what `recompute` says (and the rules allow).
    pub fn point(&self, recompute: impl Fn(NodeId) -> bool) -> Point {
        let (store, rules) = (self.store, &self.rules);
        let partition = derive(
            store,
            rules,
            &self.info,
            |v| rules.must_recompute(v) || recompute(v),
            |v| {
                common_reason(store, rules, v).unwrap_or(
                    if rules.never_recompute(store, v).is_some() {
                        SavedReason::NeverRecompute
                    } else {
                        SavedReason::MinCutBoundary
                    },
                )
            },
        );
        let cost = self.cost_of(&partition);
        let bytes = activation_bytes(store, &partition);
        Point {
            partition,
            bytes,
            cost,
        }
    }

    /// The recompute cost of a partition of this store.
    pub fn cost_of(&self, p: &Partition) -> f64 {
        p.recomputed
            .iter()
            .fold(0.0, |s, v| s + self.cost[v.index()])
    }

    /// Whether every saved value of `p` can be saved (a tensor or a `SymInt`).
    pub fn savable(&self, p: &Partition) -> bool {
        p.saved.iter().all(|&v| {
            !self
                .store
                .has_flag(v, flags::NON_TENSOR | flags::MULTI_OUTPUT)
        })
    }

    /// From a point within `target` bytes, stops recomputing its costliest
    /// recomputed nodes one at a time (at most `tries`) while it stays within.
    pub fn repair(&self, start: Point, target: u64, tries: usize) -> Point {
        let mut best = start;
        let mut order: Vec<NodeId> = best
            .partition
            .recomputed
            .iter()
            .copied()
            .filter(|&v| !self.rules.must_recompute(v))
            .collect();
        order.sort_by(|a, b| self.cost[b.index()].total_cmp(&self.cost[a.index()]));
        let mut recompute = vec![false; self.store.len()];
        for &v in &best.partition.recomputed {
            recompute[v.index()] = true;
        }
        for v in order.into_iter().take(tries) {
            recompute[v.index()] = false;
            let p = self.point(|u| recompute[u.index()]);
            if p.bytes <= target && p.cost < best.cost && self.savable(&p.partition) {
                best = p;
            } else {
                recompute[v.index()] = true;
            }
        }
        best
    }

    /// From a point over `target` bytes, adds to what it recomputes the
    /// candidate that frees the most bytes per unit of cost, until it is within
    /// `target` (or no candidate frees bytes). `O(k² (N + E))` for `k`
    /// candidates; `None` when it ends over `target`.
    pub fn descend(&self, start: &Point, target: u64) -> Option<Point> {
        let mut on = vec![false; self.store.len()];
        for &v in &start.partition.recomputed {
            on[v.index()] = true;
        }
        let mut cur = start.clone();
        while cur.bytes > target {
            let mut best: Option<(f64, NodeId, Point)> = None;
            for &v in &self.candidates {
                if on[v.index()] {
                    continue;
                }
                on[v.index()] = true;
                let p = self.point(|u| on[u.index()]);
                on[v.index()] = false;
                if p.bytes >= cur.bytes || !self.savable(&p.partition) {
                    continue;
                }
                let ratio = (cur.bytes - p.bytes) as f64 / (p.cost - cur.cost).max(1e-9);
                if best.as_ref().is_none_or(|b| ratio > b.0) {
                    best = Some((ratio, v, p));
                }
            }
            let (_, v, p) = best?;
            on[v.index()] = true;
            cur = p;
        }
        Some(cur)
    }

    /// Every subset of the candidates (at most 20 of them, else `None`):
    /// `(saved_bytes, recompute_cost, mask)` of each subset whose saved values
    /// can all be saved. `O(2^k (N + E))`.
    pub fn enumerate(&self) -> Option<Vec<(u64, f64, u32)>> {
        let k = self.candidates.len();
        if k > 20 {
            return None;
        }
        let mut out = Vec::new();
        for mask in 0u32..(1u32 << k) {
            let p = self.of_mask(mask);
            if self.savable(&p.partition) {
                out.push((p.bytes, p.cost, mask));
            }
        }
        Some(out)
    }

    /// The partition recomputing the candidates in `mask` (bit `j`: candidate `j`).
    pub fn of_mask(&self, mask: u32) -> Point {
        let mut on = vec![false; self.store.len()];
        for (j, v) in self.candidates.iter().enumerate() {
            on[v.index()] = mask >> j & 1 == 1;
        }
        self.point(|v| on[v.index()])
    }

    #[cfg(test)]
    /// The exact optimum for `target` bytes over [`Self::enumerate`]'s subsets
    /// (see [`better`]), or `None` above 20 candidates.
    pub fn exact(&self, target: u64) -> Option<Point> {
        let all = self.enumerate()?;
        let best = pick(&all, target)?;
        Some(self.of_mask(best))
    }
}

/// The mask of the best `(saved, cost, mask)` entry for `target` (see [`better`]).
pub(crate) fn pick(all: &[(u64, f64, u32)], target: u64) -> Option<u32> {
    let key =
        |&(s, c, _): &(u64, f64, u32)| (s > target, if s <= target { c } else { s as f64 }, s, c);
    all.iter()
        .min_by(|a, b| {
            let (ka, kb) = (key(a), key(b));
            ka.0.cmp(&kb.0)
                .then(ka.1.total_cmp(&kb.1))
                .then(ka.2.cmp(&kb.2))
                .then(ka.3.total_cmp(&kb.3))
        })
        .map(|e| e.2)
}

/// Whether `a` is a better answer than `b` for a budget of `target` bytes.
pub(crate) fn better(a: &Point, b: &Point, target: u64) -> bool {
    let (sa, sb) = (a.bytes, b.bytes);
    match (sa <= target, sb <= target) {
        (true, false) => true,
        (false, true) => false,
        (true, true) => a.cost.total_cmp(&b.cost).then(sa.cmp(&sb)).is_lt(),
        (false, false) => sa.cmp(&sb).then(a.cost.total_cmp(&b.cost)).is_lt(),
    }
}

/// The capacity of `in(v) -> out(v)`: the bytes saving `v` holds.
fn save_cap(store: &GraphStore, v: NodeId) -> f64 {
    if store.has_flag(v, flags::SYMINT) {
        return 1.0;
    }
    if store.has_flag(v, flags::NON_TENSOR | flags::MULTI_OUTPUT) {
        return INF;
    }
    if store.kind[v.index()] == NodeKind::Primal {
        return 0.0;
    }
    store.nbytes[v.index()] as f64
}
