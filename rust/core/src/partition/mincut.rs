//! Min-cut rematerialization: save the cheapest set of forward values from
//! which the backward can recompute everything else it needs.
//!
//! Arguments: a store and [`PartitionOptions`] (with `cse`, common
//! subexpressions are merged first, see `super::prepass`).
//! Returns: the partition, or [`Error::Graph`] (a tangent-derived forward
//! output) / [`Error::Partition`] (a value the backward needs can be neither
//! saved nor recomputed; the message shows the chain of constraints).
//!
//! The flow network ([`super::cut_network`], shared with the memory budget)
//! has two nodes per graph node `i`, `2*i` (in) and `2*i + 1` (out), joined
//! by an edge whose capacity is the cost of saving `i`; then a source `2N`
//! and a sink `2N + 1`. Only nodes the backward (transitively) needs take
//! part. Edges:
//! - `out(i) -> in(u)`, infinite, for each reader `u` (data dependencies);
//! - `source -> in(i)`, infinite, when `i` is banned from recomputation
//!   ([`super::bans`]: primals, never-recompute ops, heuristics);
//! - `in(i) -> sink`, infinite, when `i` is tangent-derived or tagged
//!   `MUST_RECOMPUTE` (it is computed in the backward);
//! - `out(i) -> sink`, infinite, when `i` is a gradient output not derived
//!   from a tangent (the backward needs its value).
//!
//! The cost of saving `i`: 1 for a `SymInt`; infinite for a non-tensor or a
//! tuple (its `getitem`s are saved instead); 0 for a primal flagged
//! `STATIC_INPUT` (a parameter: torch's `treat_parameters_as_free_to_save`, so
//! a weight's transpose is recomputed in the backward, not saved), and 0 for a
//! call flagged so (a written input's new value the runtime saves as a view of
//! the input, where eager's backward reads the input); otherwise `nbytes` scaled by
//! `1.1^clamp(dist_from_bw, 1, 100)` (prefer saving values close to the
//! backward), doubled when every reader could fuse it (prefer saving values
//! that are materialized anyway). A primal flagged `MUTATED_INPUT` costs
//! its bytes plus a penalty larger than all other finite capacities
//! together, so the cut saves it only when every alternative is infinite
//! (the runtime would have to copy it; among such cuts, the fewest mutated
//! inputs, then the fewest bytes). A minimum cut saves the nodes whose in-node
//! is on the source side and out-node on the sink side. Among tied minimum
//! cuts it takes the one closest to the sink ([`crate::flow::max_source_side`]
//! after [`crate::flow::dinic`]), as torch does through networkx, so the two
//! save the same values. The partition is then
//! derived ([`super::derive`]) so it is valid by construction.
//!
//! Complexity: `O(N + E)` to build, plus the max flow (Dinic's `O(V² E)`
//! bound; near-linear on these layered networks in practice).
//! Reference: `torch._functorch.partitioners.solve_min_cut`; the idea is from
//! "Min-cut optimal(*) recomputation (i.e. activation checkpointing) with
//! `AOTAutograd`" (H. He, 2022).

use super::bans::{compute_bans, Ban, BanInput};
use super::classify::NodeInfo;
use super::cut_network::{self, CutEdges, INF};
use super::derive::{common_reason, derive, Traced};
use super::prepass::with_passes;
use super::result::{Partition, SavedReason};
use super::rules::{OpRules, PartitionOptions};
use crate::error::{Error, Result};
use crate::flow::dinic::{dinic_bounded, Levels};
use crate::flow::{max_source_side, FlowNetwork};
use crate::ids::NodeId;
use crate::passes::{cse, eliminate, is_identity};
use crate::store::{flags, GraphStore, NodeKind};

/// Partitions `store` by min-cut rematerialization (see the module docs).
pub fn partition_min_cut(store: &GraphStore, opts: &PartitionOptions) -> Result<Partition> {
    with_passes(store, opts, |s| cut(s, opts))
}

fn cut(store: &GraphStore, opts: &PartitionOptions) -> Result<Partition> {
    let p = prepare(store, opts)?;
    if let Some(path) = p.net.infinite_path() {
        return Err(explain_infinite_path(store, &p.bans, &path));
    }
    let flow = dinic_bounded(&p.net, Levels::FromSource);
    let source_side = max_source_side(&p.net, &flow);
    let (rules, bans) = (&p.rules, &p.bans);
    Ok(derive(
        store,
        rules,
        &p.info,
        Traced::Free,
        |v| !source_side[2 * v.index()],
        |v| {
            common_reason(store, rules, v).unwrap_or(match bans[v.index()] {
                Ban::Op => SavedReason::NeverRecompute,
                _ => SavedReason::MinCutBoundary,
            })
        },
    ))
}

/// The flow network [`partition_min_cut`] cuts (see the module docs), for
/// inspection and benchmarks: `2*i` / `2*i + 1` are node `i`'s in / out,
/// `2N` the source and `2N + 1` the sink (built on the CSE'd store if
/// `opts.cse`).
pub fn min_cut_network(store: &GraphStore, opts: &PartitionOptions) -> Result<FlowNetwork> {
    if opts.cse {
        let rep = cse(store);
        if !is_identity(&rep) {
            return Ok(prepare(&eliminate(store, &rep)?, opts)?.net);
        }
    }
    Ok(prepare(store, opts)?.net)
}

struct Prepared {
    rules: OpRules,
    info: NodeInfo,
    bans: Vec<Ban>,
    net: FlowNetwork,
}

fn prepare(store: &GraphStore, opts: &PartitionOptions) -> Result<Prepared> {
    let rules = OpRules::new(store);
    let info = NodeInfo::new(store)?;
    let (fw_order, fw_nodes) = info.fw_order();
    let dist = info.dist_from_bw(store);
    let bans = compute_bans(&BanInput {
        store,
        rules: &rules,
        info: &info,
        fw_order: &fw_order,
        fw_nodes: &fw_nodes,
        dist: &dist,
        opts,
    });
    let scale: Vec<f64> = (0..=100).map(|k| 1.1f64.powi(k)).collect();
    let CutEdges { mut edges, split } = cut_network::build(
        store,
        &rules,
        &info,
        |v| bans[v.index()] != Ban::None,
        |v| save_cost(store, &rules, v, dist[v.index()], &scale),
    );
    // The split edges of mutated primals, penalized once all are known.
    let mutated: Vec<usize> = split
        .iter()
        .filter(|(v, _)| {
            store.kind[v.index()] == NodeKind::Primal && store.has_flag(*v, flags::MUTATED_INPUT)
        })
        .map(|&(_, k)| k)
        .collect();
    penalize(&mut edges.cap, &mutated);
    let net = edges.network(store.len())?;
    Ok(Prepared {
        rules,
        info,
        bans,
        net,
    })
}

/// Adds to each edge in `edges` a penalty above the sum of all finite
/// capacities, so that a cut through `k` of them costs more than any cut
/// through fewer: the cut minimizes their number first, then its capacity.
fn penalize(cap: &mut [f64], edges: &[usize]) {
    if edges.is_empty() {
        return;
    }
    let penalty = cap.iter().filter(|c| c.is_finite()).sum::<f64>() + 1.0;
    for &k in edges {
        cap[k] += penalty;
    }
}

/// The capacity of `in(v) -> out(v)`: what saving `v` costs.
fn save_cost(store: &GraphStore, rules: &OpRules, v: NodeId, dist: u32, scale: &[f64]) -> f64 {
    // A SymFloat (SYMINT | NON_TENSOR) is never saved: it is recomputed from the sizes
    // it is made of (saved as ints), as torch's min-cut does.
    if store.has_flag(v, flags::NON_TENSOR | flags::MULTI_OUTPUT) {
        return INF;
    }
    if store.has_flag(v, flags::SYMINT) {
        return 1.0;
    }
    if store.has_flag(v, flags::STATIC_INPUT) {
        // a parameter is alive all step: saving it is free (torch does the same); so is a
        // written input's new value that the runtime saves as a view of the input
        return 0.0;
    }
    let bytes = (store.nbytes[v.index()] as f64 * scale[dist.clamp(1, 100) as usize]).floor();
    let materialized = store.kind[v.index()] == NodeKind::Primal
        || !store
            .users(v)
            .iter()
            .all(|&u| rules.is_fusible(store, v, u));
    if materialized {
        bytes
    } else {
        bytes * 2.0
    }
}

/// A [`Error::Partition`] showing why each node on an infinite path can be
/// neither saved nor recomputed.
fn explain_infinite_path(store: &GraphStore, bans: &[Ban], path: &[u32]) -> Error {
    let n = store.len() as u32;
    let mut steps = Vec::new();
    for w in path.windows(2) {
        let (from, to) = (w[0], w[1]);
        let step = if from == 2 * n {
            let v = NodeId(to / 2);
            format!(
                "{v} {} cannot be recomputed ({:?} ban)",
                store.op_name(v),
                bans[v.index()]
            )
        } else if to == 2 * n + 1 {
            let v = NodeId(from / 2);
            format!("{v} {} is needed by the backward", store.op_name(v))
        } else if from / 2 == to / 2 {
            let v = NodeId(from / 2);
            format!("{v} {} cannot be saved (not a tensor)", store.op_name(v))
        } else {
            let (reader, read) = (NodeId(to / 2), NodeId(from / 2));
            format!("{reader} {} reads {read}", store.op_name(reader))
        };
        steps.push(step);
    }
    Error::Partition(format!(
        "a value the backward needs can be neither saved nor recomputed: {}",
        steps.join("; ")
    ))
}
