//! The partition validity checker. Tests run it after every partition.
//!
//! Arguments: a store and a partition of it.
//! Returns: `Ok(())`, or [`Error::Partition`] naming the first node at fault:
//! - the representative map ([`Partition::rep`]) only merges nodes that
//!   compute the same value (`crate::passes::cse`'s rules), and merged nodes
//!   have placement 0; every check below is then made on the store with the
//!   map applied (`crate::passes::eliminate`), which is what the partitioner cut;
//! - shapes: one placement and one representative per node; ids in range; `saved` in the stable order
//!   (tensors, then `SymInt`s, each ascending, no repeats); one reason per saved
//!   value; `saved_bytes` and `num_saved_symints` agree with `saved`;
//! - the forward never holds a tangent or a tangent-derived node, and every
//!   argument of a forward node is in the forward;
//! - saved values are in both graphs and are neither tangents nor
//!   tangent-derived;
//! - every node computed in the backward (present there, not saved, not a
//!   tangent) is a CALL or `GET_ATTR` node whose arguments are all present in
//!   the backward (saved, tangents, or computed there);
//! - `recomputed` is exactly the CALL nodes computed in both graphs, and none
//!   of them is an op that may never be recomputed ([`OpRules::never_recompute`];
//!   compute-intensive ops are allowed when the partition says it may
//!   recompute them, [`Partition::recomputes_compute_intensive`]: the
//!   memory-budget partitioner's contract);
//! - forward outputs are in the forward, gradient outputs in the backward.
//!
//! Complexity: `O(N + E)`.

use super::derive::Recompute;
use super::result::{placement, Partition};
use super::rules::OpRules;
use crate::error::{Error, Result};
use crate::ids::NodeId;
use crate::passes::cse::check_rep;
use crate::passes::{eliminate, is_identity};
use crate::store::{flags, GraphStore, NodeKind};

fn fail(store: &GraphStore, v: NodeId, what: &str) -> Error {
    Error::Partition(format!("{v} ({}): {what}", store.op_name(v)))
}

/// Checks that `p` is a valid partition of `store` (see the module docs).
pub fn check(store: &GraphStore, p: &Partition) -> Result<()> {
    check_shapes(store, p)?;
    if is_identity(&p.rep) {
        return check_graph(store, p);
    }
    check_rep(store, &p.rep)?;
    if let Some(v) = store
        .node_ids()
        .find(|v| p.rep[v.index()] != *v && p.placement[v.index()] != 0)
    {
        return Err(fail(store, v, "merged into its representative but placed"));
    }
    let deduped = eliminate(store, &p.rep).map_err(|e| Error::Partition(e.to_string()))?;
    check_graph(&deduped, p)
}

fn check_graph(store: &GraphStore, p: &Partition) -> Result<()> {
    let mut saved = vec![false; store.len()];
    for &v in &p.saved {
        saved[v.index()] = true;
    }
    let rules = OpRules::new(store);
    let policy = Recompute::of(p);
    let mut recomputed = p.recomputed.iter().copied().peekable();
    for v in store.node_ids() {
        let computed_in_bw = check_placement(store, p, v, saved[v.index()])?;
        let is_recomputed =
            computed_in_bw && p.in_forward(v) && store.kind[v.index()] == NodeKind::Call;
        if is_recomputed {
            if recomputed.next_if_eq(&v).is_none() {
                return Err(fail(
                    store,
                    v,
                    "computed in both graphs but missing from `recomputed`",
                ));
            }
            if let Some(why) = policy.forbids(store, &rules, v) {
                return Err(fail(store, v, &format!("recomputed, but it is a {why}")));
            }
        } else if recomputed.next_if_eq(&v).is_some() {
            return Err(fail(
                store,
                v,
                "listed in `recomputed` but not computed in both graphs",
            ));
        }
    }
    check_graph_outputs(store, p)
}

/// Node `v`'s placement: tangents and what derives from them stay out of the forward,
/// a forward node reads forward nodes, a saved value is in both graphs, and a node the
/// backward computes (returned: whether it does) reads what the backward has.
fn check_placement(store: &GraphStore, p: &Partition, v: NodeId, saved: bool) -> Result<bool> {
    let (fw, bw) = (p.in_forward(v), p.in_backward(v));
    let kind = store.kind[v.index()];
    let tangent_like = store.has_flag(v, flags::TANGENT_DERIVED) || kind == NodeKind::Tangent;
    if fw && tangent_like {
        return Err(fail(store, v, "tangent-derived node placed in the forward"));
    }
    if fw {
        if let Some(a) = store.args(v).iter().find(|a| !p.in_forward(**a)) {
            return Err(fail(
                store,
                v,
                &format!("forward node reads {a}, which is not in the forward"),
            ));
        }
    }
    if saved && !(fw && bw) {
        return Err(fail(
            store,
            v,
            "saved value missing from the forward or the backward",
        ));
    }
    if saved && tangent_like {
        return Err(fail(store, v, "a tangent or tangent-derived node is saved"));
    }
    let computed_in_bw = bw && !saved && kind != NodeKind::Tangent;
    if computed_in_bw {
        if kind == NodeKind::Primal {
            return Err(fail(store, v, "primal read by the backward but not saved"));
        }
        if let Some(a) = store.args(v).iter().find(|a| !p.in_backward(**a)) {
            return Err(fail(
                store,
                v,
                &format!("backward node reads {a}, which is neither saved, a tangent, nor in the backward"),
            ));
        }
    }
    Ok(computed_in_bw)
}

/// Forward outputs are computed in the forward, gradients are available in the backward.
fn check_graph_outputs(store: &GraphStore, p: &Partition) -> Result<()> {
    for (j, o) in store.outputs.iter().enumerate() {
        let Some(o) = *o else { continue };
        let (ok, which) = if j < store.num_fwd_outputs {
            (
                p.in_forward(o),
                "forward output not computed in the forward",
            )
        } else {
            (
                p.in_backward(o),
                "gradient output not available in the backward",
            )
        };
        if !ok {
            return Err(fail(store, o, which));
        }
    }
    Ok(())
}

fn check_shapes(store: &GraphStore, p: &Partition) -> Result<()> {
    check_lengths(store, p)?;
    let tensors = check_saved_groups(store, p)?;
    if p.recomputed.windows(2).any(|w| w[0] >= w[1]) {
        return Err(Error::Partition(
            "recomputed nodes are not in ascending node order".to_string(),
        ));
    }
    let bytes = tensors
        .iter()
        .fold(0u64, |s, v| s.saturating_add(store.nbytes[v.index()]));
    if bytes != p.saved_bytes {
        return Err(Error::Partition(format!(
            "saved_bytes is {} but the saved tensors hold {bytes}",
            p.saved_bytes
        )));
    }
    Ok(())
}

/// One placement and one representative per node, known placement bits, one reason per
/// saved value, node ids in range.
fn check_lengths(store: &GraphStore, p: &Partition) -> Result<()> {
    let n = store.len();
    let bad = |what: String| Err(Error::Partition(what));
    if p.placement.len() != n {
        return bad(format!(
            "placement has {} entries for {n} nodes",
            p.placement.len()
        ));
    }
    if p.rep.len() != n {
        return bad(format!("rep has {} entries for {n} nodes", p.rep.len()));
    }
    if let Some(i) = p
        .placement
        .iter()
        .position(|&b| b & !(placement::FORWARD | placement::BACKWARD) != 0)
    {
        return bad(format!("placement of %{i} has unknown bits"));
    }
    if p.saved_reason.len() != p.saved.len() {
        return bad(format!(
            "{} saved values but {} reasons",
            p.saved.len(),
            p.saved_reason.len()
        ));
    }
    if let Some(v) = p.saved.iter().chain(&p.recomputed).find(|v| v.index() >= n) {
        return bad(format!("node id {v} out of range (N = {n})"));
    }
    Ok(())
}

/// The saved values: tensors, then `num_saved_symints` `SymInt`s, each group in ascending
/// node order. Returns the tensors.
fn check_saved_groups<'p>(store: &GraphStore, p: &'p Partition) -> Result<&'p [NodeId]> {
    let Some(split) = p.saved.len().checked_sub(p.num_saved_symints) else {
        return Err(Error::Partition(
            "num_saved_symints exceeds len(saved)".to_string(),
        ));
    };
    let (tensors, symints) = p.saved.split_at(split);
    for (group, want_symint) in [(tensors, false), (symints, true)] {
        if group.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::Partition(
                "saved values are not in ascending node order within their group".to_string(),
            ));
        }
        if let Some(v) = group
            .iter()
            .find(|&&v| store.has_flag(v, flags::SYMINT) != want_symint)
        {
            return Err(fail(
                store,
                *v,
                "saved in the wrong group (tensors first, then SymInts)",
            ));
        }
    }
    Ok(tensors)
}
