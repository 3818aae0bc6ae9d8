//! The recompute-cost rule table of the memory-budget partitioner: what
//! computing a forward node again in the backward costs, in "bytes moved".
//!
//! There is no FLOP column in the node table, so the cost of recomputing a
//! node is the bytes it moves (`nbytes` of the node plus `nbytes` of each of
//! its arguments, as a memory-bound kernel reads and writes them), times an
//! op-class factor:
//!
//! | class | cost |
//! |---|---|
//! | views, `getitem`, `GET_ATTR` | 1 (metadata only) |
//! | the recomputable allowlist (pointwise, cheap reductions) | 1 × bytes moved |
//! | [`RECOMPUTE_FACTOR`] (normalizations, softmax, gathers, ...) | factor × bytes moved |
//! | any other op that may be recomputed | [`OTHER_FACTOR`] × bytes moved |
//! | compute-intensive, random, impure ops, primals, `MUST_SAVE` | never recomputed ([`super::rules::OpRules::never_recompute`]) |
//!
//! Compute-intensive ops (matmul, convolution, attention) stay never
//! recomputed whatever the budget: a budget that could only be met by
//! recomputing one is reported as unmeetable with the smallest achievable
//! figure. Every cost is at least 1, so recomputing is never free.

use super::rules::{OpClass, OpRules};
use crate::ids::NodeId;
use crate::store::{GraphStore, NodeKind};

/// Factor of ops outside the allowlist that are costlier per byte than a
/// pointwise op (several passes over their input, or scattered reads), by op
/// packet. Sorted (a unit test keeps it sorted).
#[rustfmt::skip]
pub const RECOMPUTE_FACTOR: &[(&str, f64)] = &[
    ("aten._log_softmax", 3.0), ("aten._softmax", 3.0), ("aten.cumsum", 2.0),
    ("aten.embedding", 2.0), ("aten.index_select", 2.0), ("aten.native_batch_norm", 4.0),
    ("aten.native_group_norm", 4.0), ("aten.native_layer_norm", 4.0), ("aten.sort", 8.0),
    ("aten.topk", 8.0),
];

/// Factor of recomputable ops neither in the allowlist nor in [`RECOMPUTE_FACTOR`].
pub const OTHER_FACTOR: f64 = 2.0;

/// The factor of an op name (looked up as is and by packet); `None` for the
/// recomputable allowlist's factor of 1.
fn table_factor(name: &str) -> Option<f64> {
    let packet = name.rsplit_once('.').map_or(name, |(p, _)| p);
    [name, packet].iter().find_map(|key| {
        RECOMPUTE_FACTOR
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| RECOMPUTE_FACTOR[i].1)
    })
}

/// The cost of recomputing every node of `store` (see the module docs); 0 for
/// placeholders. Complexity: `O(N + E)` plus one lookup per interned op.
pub fn recompute_costs(store: &GraphStore, rules: &OpRules) -> Vec<f64> {
    let factors: Vec<f64> = store
        .op_names
        .iter()
        .map(|name| table_factor(name).unwrap_or(f64::NAN))
        .collect();
    store
        .node_ids()
        .map(|v| node_cost(store, rules, &factors, v))
        .collect()
}

fn node_cost(store: &GraphStore, rules: &OpRules, factors: &[f64], v: NodeId) -> f64 {
    match store.kind[v.index()] {
        NodeKind::Primal | NodeKind::Tangent => return 0.0,
        NodeKind::GetAttr => return 1.0,
        NodeKind::Call => {}
    }
    let class = rules.class(store, v);
    if class.has(OpClass::VIEW | OpClass::ALWAYS_RECOMPUTABLE) {
        return 1.0;
    }
    let table = factors[store.op[v.index()].index()];
    let factor = if !table.is_nan() {
        table
    } else if class.has(OpClass::RECOMPUTABLE) {
        1.0
    } else {
        OTHER_FACTOR
    };
    let moved = store.args(v).iter().fold(store.nbytes[v.index()], |s, a| {
        s.saturating_add(store.nbytes[a.index()])
    });
    (factor * moved as f64).max(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_table_is_sorted() {
        assert!(RECOMPUTE_FACTOR.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(table_factor("aten._softmax.default"), Some(3.0));
        assert_eq!(table_factor("aten.mul.Tensor"), None);
    }
}
