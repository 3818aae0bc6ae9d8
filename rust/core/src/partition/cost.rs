//! The recompute-cost rule table of the memory-budget partitioner: what
//! computing a forward node again in the backward costs, in "bytes moved".
//!
//! A kernel's time is about `bytes moved / bandwidth + FLOPs / peak`; in units
//! of bytes that is `bytes moved + FLOPs / flops_per_byte`, where
//! [`CostModel::flops_per_byte`] is the machine balance (a matmul's FLOP/s over
//! the memory bandwidth): measured on the machine at hand by `aotgrad
//! calibrate`, a default otherwise. Bytes moved are `nbytes` of the node plus
//! `nbytes` of each of its arguments (a kernel reads and writes them once),
//! times an op-class factor:
//!
//! | class | cost |
//! |---|---|
//! | views, `getitem`, `GET_ATTR` | 1 (metadata only) |
//! | the recomputable allowlist (pointwise, cheap reductions) | `fused` × bytes moved |
//! | [`RECOMPUTE_FACTOR`] (normalizations, softmax, gathers, ...), or the model's calibrated [`CostModel::op_factors`] | `fused` × factor × bytes moved |
//! | compute-intensive (matmul, convolution, attention) | bytes moved + FLOPs / `flops_per_byte` |
//! | any other op that may be recomputed | `fused` × [`OTHER_FACTOR`] × bytes moved |
//!
//! `fused` is [`CostModel::fused_factor`]: a fusing compiler recomputes a
//! memory-bound op inside the backward kernel that reads its result, where
//! reading the op's inputs mostly replaces reading the saved value, so it
//! moves a fraction of the bytes it would move alone (torch's budget prices
//! such ops at nothing; 1 prices them as unfused kernels).
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

pub use super::cost_model::{CostModel, OTHER_FACTOR, RECOMPUTE_FACTOR};
use super::rules::{OpClass, OpRules};
use crate::error::{Error, Result};
use crate::ids::NodeId;
use crate::store::{GraphStore, NodeKind};

/// Element size [`estimate_flops`] assumes.
const ESTIMATE_ELEM_BYTES: f64 = 4.0;

/// The cost of recomputing every node of `store` (see the module docs) under
/// `model`; 0 for placeholders. `flops`, when given, holds one FLOP count per
/// node (from shapes). Errors: [`Error::Partition`] when `flops` has the wrong
/// length or a negative or non-finite entry.
/// Complexity: `O(N + E)` plus one lookup per interned op.
pub fn recompute_costs(
    store: &GraphStore,
    rules: &OpRules,
    flops: Option<&[f64]>,
    model: &CostModel,
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
        .map(|name| model.factor(name).unwrap_or(f64::NAN))
        .collect();
    Ok(store
        .node_ids()
        .map(|v| {
            let given = flops.map_or(0.0, |f| f[v.index()]);
            node_cost(store, rules, model, &factors, v, given)
        })
        .collect())
}

fn node_cost(
    store: &GraphStore,
    rules: &OpRules,
    model: &CostModel,
    factors: &[f64],
    v: NodeId,
    flops: f64,
) -> f64 {
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
        return (moved + flops / model.flops_per_byte).max(1.0);
    }
    let table = factors[store.op[v.index()].index()];
    let factor = if !table.is_nan() {
        table
    } else if class.has(OpClass::RECOMPUTABLE) {
        1.0
    } else {
        OTHER_FACTOR
    };
    (model.fused_factor * factor * moved).max(1.0)
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
    use super::super::cost_model::table_factor;
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
        let m = CostModel::new(16.0, 1.0, Vec::new()).unwrap();
        let want = moved + flops / 16.0;
        let est = recompute_costs(&g, &rules, None, &m).unwrap();
        assert!((est[2] - want).abs() < 1e-6);
        let given = recompute_costs(&g, &rules, Some(&[0.0, 0.0, 1.6e6]), &m).unwrap();
        assert!((given[2] - (moved + 1e5)).abs() < 1e-6);
        assert!(recompute_costs(&g, &rules, Some(&[0.0; 2]), &m).is_err());
        assert!(recompute_costs(&g, &rules, Some(&[0.0, f64::NAN, 0.0]), &m).is_err());
        // a calibrated machine balance prices the same FLOPs differently
        let m4 = CostModel::new(4.0, 1.0, Vec::new()).unwrap();
        let est = recompute_costs(&g, &rules, None, &m4).unwrap();
        assert!((est[2] - (moved + flops / 4.0)).abs() < 1e-6);
    }

    #[test]
    fn calibrated_factors_take_precedence() {
        let m = CostModel::new(
            4.0,
            0.5,
            vec![("aten.sort".into(), 2.0), ("aten._softmax".into(), 1.5)],
        )
        .unwrap();
        assert_eq!(m.factor("aten._softmax.default"), Some(1.5));
        assert_eq!(m.factor("aten.sort.stable"), Some(2.0));
        assert_eq!(m.factor("aten.native_layer_norm.default"), Some(4.0));
        assert_eq!(m.factor("aten.mul.Tensor"), None);
        assert!(CostModel::new(0.0, 1.0, Vec::new()).is_err());
        assert!(CostModel::new(4.0, f64::NAN, Vec::new()).is_err());
        assert!(CostModel::new(4.0, 1.0, vec![("aten.sort".into(), -1.0)]).is_err());
    }
}
