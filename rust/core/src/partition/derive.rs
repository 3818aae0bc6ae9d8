//! From "which forward values does the backward recompute?" to a full
//! [`Partition`]: the one derivation both partitioners share.
//!
//! Arguments: the store, its resolved rules and roles, a predicate `recompute`
//! on non-tangent-derived nodes that the backward needs, and a `reason` for
//! each saved value.
//! Returns: the partition. The backward is walked from the gradient outputs
//! through the arguments: tangent-derived nodes are computed there, and so are
//! the backward-only nodes ([`NodeInfo::bw_only`]) when the partitioner keeps
//! the traced placement ([`Traced::Kept`], the default partition); any other
//! node is recomputed if `recompute` says so and the rules allow it
//! ([`Recompute::forbids`]), saved otherwise (primals are always saved). The forward is everything the forward
//! outputs and the saved values need. So the result is valid by construction,
//! whatever the predicate.
//! Complexity: `O(N + E)`.

use super::classify::NodeInfo;
use super::result::{placement, Partition, SavedReason};
use super::rules::OpRules;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

/// What a partitioner may recompute: the contract [`super::check`] holds a
/// partition to (recorded in [`Partition::recomputes_compute_intensive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Recompute {
    /// Nothing [`OpRules::never_recompute`] bans (default and min-cut).
    Strict,
    /// Compute-intensive ops too, at their FLOP cost (the memory budget);
    /// primals, tangents, random and impure ops and `MUST_SAVE` values stay banned.
    ComputeIntensive,
}

impl Recompute {
    /// The policy a partition was derived under.
    pub fn of(p: &Partition) -> Self {
        if p.recomputes_compute_intensive {
            Self::ComputeIntensive
        } else {
            Self::Strict
        }
    }

    /// Why `n` may not be recomputed under this policy; `None` when it may.
    pub fn forbids(self, store: &GraphStore, rules: &OpRules, n: NodeId) -> Option<&'static str> {
        let why = rules.never_recompute(store, n)?;
        // `never_recompute`'s reasons before "compute-intensive op" hold
        // under every policy.
        let hard = store.kind[n.index()] != NodeKind::Call
            || rules.must_save(n)
            || store.has_flag(n, flags::IMPURE)
            || rules.is_random(store, n);
        (hard || self == Self::Strict).then_some(why)
    }
}

/// Whether the nodes the backward traced ([`NodeInfo::bw_only`]) stay there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Traced {
    /// They are computed in the backward, whatever `recompute` says (the
    /// default partition, as torch's: only forward values are saved).
    Kept,
    /// They are placed by `recompute` like any other node (min-cut, budget).
    Free,
}

/// [`derive_with`] under [`Recompute::Strict`].
pub(crate) fn derive(
    store: &GraphStore,
    rules: &OpRules,
    info: &NodeInfo,
    traced: Traced,
    recompute: impl Fn(NodeId) -> bool,
    reason: impl Fn(NodeId) -> SavedReason,
) -> Partition {
    derive_with(
        store,
        rules,
        info,
        Recompute::Strict,
        traced,
        recompute,
        reason,
    )
}

pub(crate) fn derive_with(
    store: &GraphStore,
    rules: &OpRules,
    info: &NodeInfo,
    policy: Recompute,
    traced: Traced,
    recompute: impl Fn(NodeId) -> bool,
    reason: impl Fn(NodeId) -> SavedReason,
) -> Partition {
    let (in_bw, saved) = backward_closure(store, rules, info, policy, traced, recompute);
    let in_fw = forward_closure(store, &saved);
    let mut p = assemble(store, &in_fw, &in_bw, &saved);
    p.recomputes_compute_intensive = policy == Recompute::ComputeIntensive;
    p.saved_reason = p.saved.iter().map(|&v| reason(v)).collect();
    p
}

/// What the backward needs, walking up from the gradients: a node it computes (a
/// tangent-derived one, one only the backward traced when kept there, or one the policy
/// lets it recompute and `recompute` chooses) brings its arguments; any other is saved.
/// Returns (in the backward, saved), by node index.
fn backward_closure(
    store: &GraphStore,
    rules: &OpRules,
    info: &NodeInfo,
    policy: Recompute,
    traced: Traced,
    recompute: impl Fn(NodeId) -> bool,
) -> (Vec<bool>, Vec<bool>) {
    let n = store.len();
    let mut in_bw = vec![false; n];
    let mut saved = vec![false; n];
    let mut stack: Vec<NodeId> = store.bwd_outputs().iter().flatten().copied().collect();
    while let Some(v) = stack.pop() {
        let i = v.index();
        if in_bw[i] {
            continue;
        }
        in_bw[i] = true;
        let kind = store.kind[i];
        if kind == NodeKind::Tangent {
            continue;
        }
        let computed_here = info.td[i]
            || (traced == Traced::Kept && info.bw_only[i])
            || (kind != NodeKind::Primal
                && policy.forbids(store, rules, v).is_none()
                && recompute(v));
        if computed_here {
            stack.extend_from_slice(store.args(v));
        } else {
            saved[i] = true;
        }
    }
    (in_bw, saved)
}

/// What the forward computes: its outputs, the saved values, and their ancestors.
fn forward_closure(store: &GraphStore, saved: &[bool]) -> Vec<bool> {
    let n = store.len();
    let mut in_fw = vec![false; n];
    let mut stack: Vec<NodeId> = store.fwd_outputs().iter().flatten().copied().collect();
    stack.extend((0..n as u32).map(NodeId).filter(|v| saved[v.index()]));
    while let Some(v) = stack.pop() {
        if !in_fw[v.index()] {
            in_fw[v.index()] = true;
            stack.extend_from_slice(store.args(v));
        }
    }
    in_fw
}

/// The partition of the two closures: placements (primals in the forward, tangents in
/// the backward), saved values (tensors, then `SymInt`s, each in node order) and their
/// bytes, and the calls both graphs compute (recomputed). No reasons yet.
fn assemble(store: &GraphStore, in_fw: &[bool], in_bw: &[bool], saved: &[bool]) -> Partition {
    let mut p = Partition {
        placement: vec![0; store.len()],
        ..Partition::default()
    };
    let mut symints = Vec::new();
    for v in store.node_ids() {
        let i = v.index();
        let kind = store.kind[i];
        let fw = in_fw[i] || kind == NodeKind::Primal;
        let bw = in_bw[i] || kind == NodeKind::Tangent;
        p.placement[i] = (u8::from(fw) * placement::FORWARD) | (u8::from(bw) * placement::BACKWARD);
        if saved[i] {
            if store.has_flag(v, flags::SYMINT) {
                symints.push(v);
            } else {
                p.saved.push(v);
                p.saved_bytes = p.saved_bytes.saturating_add(store.nbytes[i]);
            }
        } else if fw && bw && kind == NodeKind::Call {
            p.recomputed.push(v);
        }
    }
    p.num_saved_symints = symints.len();
    p.saved.extend(symints);
    p
}

/// The reasons every partitioner shares, in precedence order; `None` leaves
/// the choice to the partitioner.
pub(crate) fn common_reason(store: &GraphStore, rules: &OpRules, v: NodeId) -> Option<SavedReason> {
    if rules.must_save(v) {
        Some(SavedReason::MustSave)
    } else if store.kind[v.index()] == NodeKind::Primal {
        Some(SavedReason::Primal)
    } else if store.has_flag(v, flags::SYMINT) {
        Some(SavedReason::SymbolicSize)
    } else {
        None
    }
}
