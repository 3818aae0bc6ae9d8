//! `aotgrad._rust.partition_default` / `partition_min_cut` and the
//! `Partition` result they return (`docs/node_table.md`, "The partition
//! result"). Columns come back as `bytes` in native byte order, ready for
//! `np.frombuffer`.

use aotgrad_core::partition::{self, CostModel, Partition, PartitionOptions};
use aotgrad_core::{Error, GraphStore, NodeId};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::enter::enter;
use crate::errors::to_pyerr;
use crate::store::PyGraphStore;

/// A partition of a joint graph (see `docs/node_table.md`).
#[pyclass(name = "Partition", module = "aotgrad._rust", frozen)]
pub struct PyPartition {
    inner: Partition,
}

fn ids_bytes<'py>(py: Python<'py>, ids: &[NodeId]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, ids.len() * 4, |out| {
        for (chunk, id) in out.chunks_exact_mut(4).zip(ids) {
            chunk.copy_from_slice(&id.0.to_ne_bytes());
        }
        Ok(())
    })
}

#[pymethods]
impl PyPartition {
    /// uint8[N]: bit 0 in the forward, bit 1 in the backward.
    #[getter]
    fn placement<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.placement)
    }

    /// uint32[S]: saved node ids, tensors first, then `SymInt`s.
    #[getter]
    fn saved<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        ids_bytes(py, &self.inner.saved)
    }

    /// uint8[S]: why each value is saved (`docs/node_table.md`).
    #[getter]
    fn saved_reason<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.saved_reason_bytes())
    }

    /// uint32[R]: CALL nodes computed in both graphs.
    #[getter]
    fn recomputed<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        ids_bytes(py, &self.inner.recomputed)
    }

    /// Sum of `nbytes` over the saved tensors.
    #[getter]
    fn saved_bytes(&self) -> u64 {
        self.inner.saved_bytes
    }

    /// Number of `SymInt`s at the end of `saved`.
    #[getter]
    fn num_saved_symints(&self) -> usize {
        self.inner.num_saved_symints
    }

    /// uint32[N]: the representative of each node (itself unless CSE merged
    /// it into an earlier node that computes the same value).
    #[getter]
    fn rep<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        ids_bytes(py, &self.inner.rep)
    }

    fn __repr__(&self) -> String {
        format!(
            "<Partition saved={} recomputed={} saved_bytes={}>",
            self.inner.saved.len(),
            self.inner.recomputed.len(),
            self.inner.saved_bytes
        )
    }
}

const OPTION_NAMES: &str = "ban_if_not_in_allowlist, ban_if_reduction, \
    ban_if_materialized_backward, ban_if_used_far_apart, ban_if_long_fusible_chains, \
    long_chain, max_dist_from_bw, recompute_views, cse, flops_per_byte, fused_factor, \
    op_factors";

/// Reads a `{name: value}` dict of [`PartitionOptions`] fields over the defaults.
fn options(py: Python<'_>, dict: Option<&Bound<'_, PyDict>>) -> PyResult<PartitionOptions> {
    let mut o = PartitionOptions::default();
    let Some(dict) = dict else { return Ok(o) };
    let d = &o.cost;
    let mut cost = (d.flops_per_byte, d.fused_factor, d.op_factors.clone());
    let bad = |detail: String| to_pyerr(py, &Error::Partition(detail));
    for (key, value) in dict.iter() {
        let name: String = key
            .extract()
            .map_err(|_| bad("partition option names must be str".to_string()))?;
        let as_bool = || {
            value
                .extract::<bool>()
                .map_err(|_| bad(format!("partition option `{name}` must be a bool")))
        };
        let as_u32 = || {
            value.extract::<u32>().map_err(|_| {
                bad(format!(
                    "partition option `{name}` must be an int in 0..2**32"
                ))
            })
        };
        let as_f64 = || {
            value
                .extract::<f64>()
                .map_err(|_| bad(format!("partition option `{name}` must be a float")))
        };
        match name.as_str() {
            "flops_per_byte" => cost.0 = as_f64()?,
            "fused_factor" => cost.1 = as_f64()?,
            "op_factors" => {
                cost.2 = value.extract::<Vec<(String, f64)>>().or_else(|_| {
                    value
                        .cast::<PyDict>()
                        .map_err(|_| bad("partition option `op_factors` must be a dict".into()))?
                        .iter()
                        .map(|(k, v)| Ok((k.extract::<String>()?, v.extract::<f64>()?)))
                        .collect::<PyResult<Vec<_>>>()
                        .map_err(|_| {
                            bad("partition option `op_factors` maps op names to floats".into())
                        })
                })?;
            }
            "ban_if_not_in_allowlist" => o.ban_if_not_in_allowlist = as_bool()?,
            "ban_if_reduction" => o.ban_if_reduction = as_bool()?,
            "ban_if_materialized_backward" => o.ban_if_materialized_backward = as_bool()?,
            "ban_if_used_far_apart" => o.ban_if_used_far_apart = as_bool()?,
            "ban_if_long_fusible_chains" => o.ban_if_long_fusible_chains = as_bool()?,
            "recompute_views" => o.recompute_views = as_bool()?,
            "cse" => o.cse = as_bool()?,
            "long_chain" => o.long_chain = as_u32()?,
            "max_dist_from_bw" => o.max_dist_from_bw = as_u32()?,
            _ => {
                return Err(bad(format!(
                    "unknown partition option `{name}` (known: {OPTION_NAMES})"
                )))
            }
        }
    }
    o.cost = CostModel::new(cost.0, cost.1, cost.2).map_err(|e| to_pyerr(py, &e))?;
    Ok(o)
}

/// The default partition: save every forward value the backward reads.
/// `options` is checked; of its fields only `cse` applies.
#[pyfunction]
#[pyo3(signature = (store, options = None))]
pub fn partition_default(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyPartition> {
    run(py, store, options, partition::partition_default)
}

/// Min-cut rematerialization with `options` (a dict of `PartitionOptions`
/// fields; torch's defaults where absent).
#[pyfunction]
#[pyo3(signature = (store, options = None))]
pub fn partition_min_cut(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<PyPartition> {
    run(py, store, options, partition::partition_min_cut)
}

/// Parses `options`, then runs `partitioner` on `store` through [`enter`].
fn run(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyDict>>,
    partitioner: fn(&GraphStore, &PartitionOptions) -> Result<Partition, Error>,
) -> PyResult<PyPartition> {
    let o = self::options(py, options)?;
    let s = store.get().store();
    enter(py, || partitioner(s, &o)).map(|inner| PyPartition { inner })
}

/// Checks `partition` against `store`; raises `PartitionError` naming the
/// first node at fault.
#[pyfunction]
pub fn check_partition(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    partition: &Bound<'_, PyPartition>,
) -> PyResult<()> {
    let (s, p) = (store.get().store(), &partition.get().inner);
    enter(py, || partition::check(s, p))
}

impl PyPartition {
    /// Wraps a core partition (for the other binding files).
    pub(crate) fn from_inner(inner: Partition) -> Self {
        Self { inner }
    }
}

/// [`options`] for the other binding files.
pub(crate) fn options_from(
    py: Python<'_>,
    dict: Option<&Bound<'_, PyDict>>,
) -> PyResult<PartitionOptions> {
    options(py, dict)
}
