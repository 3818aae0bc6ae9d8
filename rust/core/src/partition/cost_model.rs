//! The machine figures the memory-budget partitioner's cost table prices with
//! ([`CostModel`]) and the op factors it falls back on. Its own module so that
//! the op rules can carry a model without depending on the cost table that
//! reads them (`cost` uses `rules`; `rules` holds a `CostModel`).

use crate::error::{Error, Result};

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

/// The machine figures the cost table prices with: measured by `aotgrad
/// calibrate` (`python/aotgrad/partition/calibrate.py`), defaults otherwise.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// FLOPs worth one byte moved: a matmul's FLOP/s over the memory
    /// bandwidth of a pointwise kernel. The default, 4, is a 2-core CPU's
    /// (`aotgrad calibrate` measured 2-6 there); a GPU's is higher.
    pub flops_per_byte: f64,
    /// Factor of every memory-bound op's bytes moved (see the module docs): a
    /// fusing compiler recomputes such an op inside the backward kernel that
    /// reads it, where reading its inputs mostly replaces reading the saved
    /// value.
    pub fused_factor: f64,
    /// Factors by op packet (`"aten._softmax"`) measured against a pointwise
    /// kernel over the same bytes; they take precedence over
    /// [`RECOMPUTE_FACTOR`]. Sorted by name (`CostModel::new` sorts).
    pub op_factors: Vec<(String, f64)>,
}

impl Default for CostModel {
    fn default() -> Self {
        Self {
            flops_per_byte: 4.0,
            fused_factor: 0.25,
            op_factors: Vec::new(),
        }
    }
}

impl CostModel {
    /// A model from its figures; [`Error::Partition`] unless every figure is
    /// finite and positive.
    pub fn new(
        flops_per_byte: f64,
        fused_factor: f64,
        mut op_factors: Vec<(String, f64)>,
    ) -> Result<Self> {
        let bad = |what: &str, x: f64| {
            Error::Partition(format!("cost model {what} is {x}: must be finite and > 0"))
        };
        for (what, x) in [
            ("flops_per_byte", flops_per_byte),
            ("fused_factor", fused_factor),
        ] {
            if !x.is_finite() || x <= 0.0 {
                return Err(bad(what, x));
            }
        }
        if let Some((name, x)) = op_factors.iter().find(|(_, x)| !x.is_finite() || *x <= 0.0) {
            return Err(bad(&format!("factor of {name}"), *x));
        }
        op_factors.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Self {
            flops_per_byte,
            fused_factor,
            op_factors,
        })
    }

    /// The factor of an op name, calibrated first, then [`RECOMPUTE_FACTOR`].
    pub(super) fn factor(&self, name: &str) -> Option<f64> {
        let packet = name.rsplit_once('.').map_or(name, |(p, _)| p);
        [name, packet]
            .iter()
            .find_map(|key| {
                self.op_factors
                    .binary_search_by(|(k, _)| k.as_str().cmp(key))
                    .ok()
                    .map(|i| self.op_factors[i].1)
            })
            .or_else(|| table_factor(name))
    }
}

/// The factor of an op name (looked up as is and by packet); `None` for the
/// recomputable allowlist's factor of 1.
pub(super) fn table_factor(name: &str) -> Option<f64> {
    let packet = name.rsplit_once('.').map_or(name, |(p, _)| p);
    [name, packet].iter().find_map(|key| {
        RECOMPUTE_FACTOR
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| RECOMPUTE_FACTOR[i].1)
    })
}
