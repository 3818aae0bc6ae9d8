//! The solvers behind [`super::budget`]: a parametric min cut (Lagrangian
//! relaxation of "saved bytes ≤ B, least recompute cost"), a greedy repair
//! of its result, and an exhaustive exact solver for small graphs.
//!
//! **Parametric cut.** For a multiplier `λ ≥ 0`, one min cut minimizes
//! `activation_bytes + λ · recompute_cost` over all valid partitions: the flow
//! network of [`super::partition_min_cut`] ([`super::cut_network`]) with raw
//! byte capacities on `in(v) -> out(v)` (0 for primals and views of them:
//! saving an input holds no new memory; no distance scaling, no fusion
//! doubling), hard bans only (random and impure ops, `MUST_SAVE`:
//! [`Recompute::ComputeIntensive`]; compute-intensive ops may be recomputed at
//! their FLOP cost, and the min-cut heuristics are off), and an extra edge
//! `source -> in(v)` of capacity `λ · cost(v)` that the cut pays exactly when
//! `v` is recomputed. `λ = 0` gives the smallest achievable saved bytes
//! (exact: a minimum cut, unless saved views share a base, which the cut
//! prices once per view); a larger `λ` recomputes less. Each `λ` gives a
//! point on the lower convex hull of the (saved bytes, recompute cost)
//! Pareto frontier; points between hull vertices are not reachable by any `λ`,
//! which is the approximation. Complexity: one max flow per `λ`.
//!
//! **Greedy repair** ([`Solver::repair`]): from a feasible point, stop
//! recomputing the costliest recomputed nodes one at a time while the budget
//! still holds (`O(K · (N + E))` for `K` tries). On graphs with at most
//! [`DESCEND_MAX`] candidates, also a greedy descent ([`Solver::descend`])
//! from the cheapest points over budget, by bytes freed per unit of cost.
//! Both start from everything the point computes in the backward (recomputed
//! or backward-only), so that a step changes one decision only. On graphs of
//! any size, a lazy greedy descent whose step unsaves one saved value and
//! recomputes its cone ([`Solver::descend_cones`], `budget_solve/cones.rs`).
//!
//! **Exact** ([`Solver::exact`]): every subset of the `k` recompute candidates
//! (forward nodes the backward needs that may be recomputed), `O(2^k (N + E))`;
//! used when `k ≤` [`EXACT_MAX`] and by tests as the oracle.
//!
//! Reference: the Lagrangian view of checkpointing is the one of "Checkmate"
//! (Jain et al., `MLSys` 2020); torch's `activation_memory_budget` solves a
//! knapsack over the min-cut's saved values instead.

mod cones;

use super::classify::NodeInfo;
use super::cost::{recompute_costs, CostModel};
use super::cut_network::{self, CutEdges, Edges, INF};
use super::derive::{common_reason, derive_with, Recompute, Traced};
use super::result::{placement, Partition, SavedReason};
use super::rules::OpRules;
use crate::error::{Error, Result};
use crate::flow::dinic::{dinic_bounded, Levels};
use crate::flow::max_source_side;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

/// What the budget solver may recompute: compute-intensive ops too, at their
/// FLOP cost; never random or impure ops, primals or `MUST_SAVE` values.
const POLICY: Recompute = Recompute::ComputeIntensive;

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

/// Ops whose result shares its first argument's storage though the schema
/// does not say so (the table's `VIEW` flag comes from the schema).
const STORAGE_SHARING: &[&str] = &["aten._unsafe_view"];

/// The node whose storage each node's value lives in: itself, or for a view
/// (the `VIEW` flag, the view op table, [`STORAGE_SHARING`], or a `getitem`
/// of a view op such as `split`) the root of its first argument.
/// Complexity: `O(N)` (one pass in topological order).
pub(crate) fn storage_roots(store: &GraphStore, rules: &OpRules) -> Vec<NodeId> {
    let packet = |v: NodeId| {
        let name = store.op_name(v);
        name.rsplit_once('.').map_or(name, |(p, _)| p)
    };
    let shares = |v: NodeId| {
        store.kind[v.index()] == NodeKind::Call
            && (store.has_flag(v, flags::VIEW)
                || rules.is_view(store, v)
                || STORAGE_SHARING.contains(&packet(v)))
    };
    let mut root: Vec<NodeId> = store.node_ids().collect();
    for v in store.node_ids() {
        let Some(&base) = store.args(v).first() else {
            continue;
        };
        let view = shares(v)
            || (store.kind[v.index()] == NodeKind::Call
                && packet(v) == "_operator.getitem"
                && shares(base));
        if view && !store.has_flag(v, flags::SYMINT) && !store.has_flag(base, flags::SYMINT) {
            root[v.index()] = root[base.index()];
        }
    }
    root
}

/// The activation memory a partition holds: the storage of its saved tensors,
/// each storage counted once (a saved view holds its base's storage; views of
/// one base share it), less the storage of primal inputs (memory the caller
/// holds anyway: a saved primal, or a view of one, adds nothing).
pub fn activation_bytes(store: &GraphStore, p: &Partition) -> u64 {
    bytes_held(store, &storage_roots(store, &OpRules::new(store)), p)
}

/// [`activation_bytes`] with the roots computed once. `O(S log S)`.
pub(crate) fn bytes_held(store: &GraphStore, roots: &[NodeId], p: &Partition) -> u64 {
    let split = p.saved.len().saturating_sub(p.num_saved_symints);
    let mut held: Vec<NodeId> = p.saved[..split]
        .iter()
        .filter_map(|v| roots.get(v.index()).copied())
        .filter(|r| store.kind[r.index()] != NodeKind::Primal)
        .collect();
    held.sort_unstable();
    held.dedup();
    held.iter()
        .fold(0u64, |s, r| s.saturating_add(store.nbytes[r.index()]))
}

/// A graph prepared once for any number of solves.
pub(crate) struct Solver<'a> {
    store: &'a GraphStore,
    rules: OpRules,
    info: NodeInfo,
    /// [`storage_roots`].
    roots: Vec<NodeId>,
    pub cost: Vec<f64>,
    /// The edges of the network without the `λ` edges.
    base: Edges,
    /// Nodes that get a `source -> in(v)` edge of capacity `λ · cost(v)`.
    priced: Vec<NodeId>,
    /// Forward nodes the backward needs that may be recomputed.
    pub candidates: Vec<NodeId>,
    /// Per node: one of [`Self::candidates`].
    is_candidate: Vec<bool>,
}

impl<'a> Solver<'a> {
    /// Prepares `store`; `flops` and `model` as for [`recompute_costs`].
    pub fn new(store: &'a GraphStore, flops: Option<&[f64]>, model: &CostModel) -> Result<Self> {
        let rules = OpRules::new(store);
        let info = NodeInfo::new(store)?;
        let cost = recompute_costs(store, &rules, flops, model)?;
        let roots = storage_roots(store, &rules);
        let banned = |v: NodeId| POLICY.forbids(store, &rules, v).is_some();
        let CutEdges { edges, split } =
            cut_network::build(store, &rules, &info, banned, |v| save_cap(store, &roots, v));
        let priced: Vec<NodeId> = split
            .iter()
            .map(|&(v, _)| v)
            .filter(|&v| !banned(v))
            .collect();
        let candidates: Vec<NodeId> = priced
            .iter()
            .copied()
            .filter(|v| matches!(store.kind[v.index()], NodeKind::Call | NodeKind::GetAttr))
            .collect();
        let mut is_candidate = vec![false; store.len()];
        for v in &candidates {
            is_candidate[v.index()] = true;
        }
        Ok(Self {
            store,
            rules,
            info,
            is_candidate,
            roots,
            cost,
            base: edges,
            priced,
            candidates,
        })
    }

    /// The partition minimizing `activation_bytes + λ · recompute_cost` (see the
    /// module docs); [`Error::Partition`] when no partition exists.
    pub fn at(&self, lambda: f64) -> Result<Point> {
        let mut edges = self.base.clone();
        let n = self.store.len() as u32;
        if lambda > 0.0 {
            for &v in &self.priced {
                edges.push(2 * n, 2 * v.0, lambda * self.cost[v.index()]);
            }
        }
        let net = edges.network(self.store.len())?;
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
        let partition = derive_with(
            store,
            rules,
            &self.info,
            POLICY,
            Traced::Free,
            |v| rules.must_recompute(v) || recompute(v),
            |v| {
                common_reason(store, rules, v).unwrap_or(
                    if POLICY.forbids(store, rules, v).is_some() {
                        SavedReason::NeverRecompute
                    } else {
                        SavedReason::MinCutBoundary
                    },
                )
            },
        );
        let cost = self.cost_of(&partition);
        let bytes = bytes_held(store, &self.roots, &partition);
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
        let mut recompute = computed_in_bw(&best.partition);
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
    /// `target` (or no candidate frees bytes); a step that one candidate can
    /// finish takes the cheapest such candidate instead. `O(k² (N + E))` for
    /// `k` candidates; `None` when it ends over `target`.
    pub fn descend(&self, start: &Point, target: u64) -> Option<Point> {
        let mut on = computed_in_bw(&start.partition);
        let mut cur = start.clone();
        while cur.bytes > target {
            let mut best: Option<(f64, NodeId, Point)> = None;
            let mut finish: Option<Point> = None;
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
                if p.bytes <= target && finish.as_ref().is_none_or(|f| better(&p, f, target)) {
                    finish = Some(p.clone());
                }
                let ratio = (cur.bytes - p.bytes) as f64 / (p.cost - cur.cost).max(1e-9);
                if best.as_ref().is_none_or(|b| ratio > b.0) {
                    best = Some((ratio, v, p));
                }
            }
            if finish.is_some() {
                return finish;
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

/// Per node: computed in the backward (recomputed, or needed there only), the
/// predicate that [`Solver::point`] turns back into the same partition.
fn computed_in_bw(p: &Partition) -> Vec<bool> {
    let mut on: Vec<bool> = (0..p.placement.len())
        .map(|i| p.placement[i] & placement::BACKWARD != 0)
        .collect();
    for v in &p.saved {
        on[v.index()] = false;
    }
    on
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

/// The capacity of `in(v) -> out(v)`: the bytes saving `v` holds. 0 for a
/// primal or a view of one; a view of another value costs its own bytes (a
/// cut cannot price shared storage once: the exact solver and the reported
/// figures do, [`activation_bytes`]).
fn save_cap(store: &GraphStore, roots: &[NodeId], v: NodeId) -> f64 {
    // A SymFloat (SYMINT | NON_TENSOR) is never saved: it is recomputed from the sizes
    // it is made of (saved as ints), as torch's min-cut does.
    if store.has_flag(v, flags::NON_TENSOR | flags::MULTI_OUTPUT) {
        return INF;
    }
    if store.has_flag(v, flags::SYMINT) {
        return 1.0;
    }
    if store.kind[roots[v.index()].index()] == NodeKind::Primal {
        return 0.0;
    }
    store.nbytes[v.index()] as f64
}
