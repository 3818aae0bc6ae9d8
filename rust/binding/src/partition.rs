//! `aotgrad._rust.partition_default` / `partition_min_cut` and the
//! `Partition` result they return (`docs/node_table.md`, "The partition
//! result"). Columns come back as `bytes` in native byte order, ready for
//! `np.frombuffer`.

use aotgrad_core::partition::{self, Partition, PartitionOptions};
use aotgrad_core::{Error, GraphStore, NodeId};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::enter::enter;
use crate::options::{core_options, PyPartitionOptions};
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

/// The default partition: save every forward value the backward reads.
/// `options` is checked; of its fields only `cse` applies.
#[pyfunction]
#[pyo3(signature = (store, options = None))]
pub fn partition_default(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyPartitionOptions>>,
) -> PyResult<PyPartition> {
    run(py, store, options, partition::partition_default)
}

/// Min-cut rematerialization with `options` (torch's defaults if `None`).
#[pyfunction]
#[pyo3(signature = (store, options = None))]
pub fn partition_min_cut(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyPartitionOptions>>,
) -> PyResult<PyPartition> {
    run(py, store, options, partition::partition_min_cut)
}

/// Converts `options` to the core's, then runs `partitioner` on `store` through [`enter`].
fn run(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    options: Option<&Bound<'_, PyPartitionOptions>>,
    partitioner: fn(&GraphStore, &PartitionOptions) -> Result<Partition, Error>,
) -> PyResult<PyPartition> {
    let o = core_options(py, options)?;
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
