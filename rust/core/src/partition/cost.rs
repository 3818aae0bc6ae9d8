//! The recompute-cost rule table of the memory-budget partitioner: what
//! computing a forward node again in the backward costs, in "bytes moved".
//!
//! A kernel's time is about `bytes moved / bandwidth + FLOPs / peak`; in units
//! of bytes that is `bytes moved + FLOPs / FLOPS_PER_BYTE` ([`FLOPS_PER_BYTE`]
//! is the machine balance). Bytes moved are `nbytes` of the node plus `nbytes`
//! of each of its arguments (a kernel reads and writes them once), times an
//! op-class factor:
//!
//! | class | cost |
//! |---|---|
//! | views, `getitem`, `GET_ATTR` | 1 (metadata only) |
//! | the recomputable allowlist (pointwise, cheap reductions) | 1 × bytes moved |
//! | [`RECOMPUTE_FACTOR`] (normalizations, softmax, gathers, ...) | factor × bytes moved |
//! | compute-intensive (matmul, convolution, attention) | bytes moved + FLOPs / [`FLOPS_PER_BYTE`] |
//! | any other op that may be recomputed | [`OTHER_FACTOR`] × bytes moved |
//! | random, impure ops, primals, `MUST_SAVE` | never recomputed (`derive::Recompute::forbids`) |
//!
//! FLOPs come from shapes: the caller passes one figure per node (the Python
//! layer counts them from each node's fake tensors with torch's FLOP formulas,
//! `torch.utils.flop_counter`, the ones torch's own memory budget uses). The
//! node table has no shapes, so without that column (or for a
//! compute-intensive node it gives 0 for) the FLOPs are estimated from the
//! byte sizes ([`estimate_flops`]): exact for a matmul of 4-byte elements
//! (`m·k`, `k·n`, `m·n` elements give `2·m·k·n = 2·√(m·k · k·n · m·n)`),
//! a lower bound for batched matmuls and convolutions.
//! Every cost is at least 1, so recomputing is never free.

use super::rules::{OpClass, OpRules};
use crate::error::{Error, Result};
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

/// FLOPs worth one byte moved: peak FLOP/s over memory bandwidth (about 10 on
/// a CPU core, 20 for fp32 on a GPU without tensor cores, more with them).
pub const FLOPS_PER_BYTE: f64 = 16.0;

/// Element size [`estimate_flops`] assumes.
const ESTIMATE_ELEM_BYTES: f64 = 4.0;

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
/// placeholders. `flops`, when given, holds one FLOP count per node (from
/// shapes). Errors: [`Error::Partition`] when `flops` has the wrong length or
/// a negative or non-finite entry.
/// Complexity: `O(N + E)` plus one lookup per interned op.
pub fn recompute_costs(
    store: &GraphStore,
    rules: &OpRules,
    flops: Option<&[f64]>,
) -> Result<Vec<f64>> {
    if let Some(f) = flops {
        if f.len() != store.len() {
            return Err(Error::Partition(format!(
                "flops has {} entries for {} nodes",
                f.len(),
                store.len()
            )));
        }
        if let Some(i) = f.iter().position(|x| !x.is_finite() || *x < 0.0) {
            return Err(Error::Partition(format!(
                "flops of %{i} is {}: must be finite and >= 0",
                f[i]
            )));
        }
    }
    let factors: Vec<f64> = store
        .op_names
        .iter()
        .map(|name| table_factor(name).unwrap_or(f64::NAN))
        .collect();
    Ok(store
        .node_ids()
        .map(|v| {
            let given = flops.map_or(0.0, |f| f[v.index()]);
            node_cost(store, rules, &factors, v, given)
        })
        .collect())
}

fn node_cost(store: &GraphStore, rules: &OpRules, factors: &[f64], v: NodeId, flops: f64) -> f64 {
    match store.kind[v.index()] {
        NodeKind::Primal | NodeKind::Tangent => return 0.0,
        NodeKind::GetAttr => return 1.0,
        NodeKind::Call => {}
    }
    let class = rules.class(store, v);
    if class.has(OpClass::VIEW | OpClass::ALWAYS_RECOMPUTABLE) {
        return 1.0;
    }
    let moved = store.args(v).iter().fold(store.nbytes[v.index()], |s, a| {
        s.saturating_add(store.nbytes[a.index()])
    }) as f64;
    if rules.is_compute_intensive(store, v) {
        let flops = if flops > 0.0 {
            flops
        } else {
            estimate_flops(store, v)
        };
        return (moved + flops / FLOPS_PER_BYTE).max(1.0);
    }
    let table = factors[store.op[v.index()].index()];
    let factor = if !table.is_nan() {
        table
    } else if class.has(OpClass::RECOMPUTABLE) {
        1.0
    } else {
        OTHER_FACTOR
    };
    (factor * moved).max(1.0)
}

/// FLOPs of a compute-intensive node from byte sizes alone: `2·√(A·B·O)` in
/// elements of 4 bytes (`ESTIMATE_ELEM_BYTES`), for its two largest arguments
/// `A`, `B` and its output `O` (exact for `mm` and `addmm`; see the module docs).
pub fn estimate_flops(store: &GraphStore, v: NodeId) -> f64 {
    let (mut a, mut b) = (0.0f64, 0.0f64);
    for x in store.args(v) {
        let s = store.nbytes[x.index()] as f64;
        if s > a {
            (a, b) = (s, a);
        } else if s > b {
            b = s;
        }
    }
    let o = store.nbytes[v.index()] as f64;
    2.0 * (a * b * o).sqrt() / ESTIMATE_ELEM_BYTES.powf(1.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Columns;

    #[test]
    fn factor_table_is_sorted() {
        assert!(RECOMPUTE_FACTOR.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(table_factor("aten._softmax.default"), Some(3.0));
        assert_eq!(table_factor("aten.mul.Tensor"), None);
    }

    /// `mm` of `[32, 16] x [16, 8]` fp32: 2·32·16·8 FLOPs, from the byte
    /// sizes alone or from the caller's column.
    #[test]
    fn matmul_is_priced_by_flops() {
        let mut cols = Columns::new();
        let mm = cols.intern("aten.mm.default");
        let lhs = cols.push(0, 0, &[], 32 * 16 * 4, 0);
        let rhs = cols.push(0, 0, &[], 16 * 8 * 4, 0);
        let out = cols.push(2, mm, &[lhs, rhs], 32 * 8 * 4, 0);
        cols.outputs = vec![2];
        cols.num_fwd_outputs = 1;
        let g = GraphStore::from_table(&cols.view()).unwrap();
        let rules = OpRules::new(&g);
        let flops = 2.0 * 32.0 * 16.0 * 8.0;
        assert!((estimate_flops(&g, NodeId(out)) - flops).abs() < 1e-6);
        let moved = f64::from((32 * 16 + 16 * 8 + 32 * 8) * 4);
        let want = moved + flops / FLOPS_PER_BYTE;
        let est = recompute_costs(&g, &rules, None).unwrap();
        assert!((est[2] - want).abs() < 1e-6);
        let given = recompute_costs(&g, &rules, Some(&[0.0, 0.0, 1.6e6])).unwrap();
        assert!((given[2] - (moved + 1e5)).abs() < 1e-6);
        assert!(recompute_costs(&g, &rules, Some(&[0.0; 2])).is_err());
        assert!(recompute_costs(&g, &rules, Some(&[0.0, f64::NAN, 0.0])).is_err());
    }
}
