//! `aotgrad._rust.partition_memory_budget` / `memory_frontier` /
//! `recompute_costs` and the `BudgetSolution` they return
//! (`aotgrad_core::partition::budget`).

use aotgrad_core::partition::{self, BudgetSolution, OpRules};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::Column;
use crate::enter::enter;
use crate::errors::partition_error;
use crate::options::{core_options, PyPartitionOptions};
use crate::partition::PyPartition;
use crate::store::PyGraphStore;

/// The memory-budget partition for one budget.
#[pyclass(name = "BudgetSolution", module = "aotgrad._rust", frozen)]
pub struct PyBudgetSolution {
    inner: BudgetSolution,
}

#[pymethods]
impl PyBudgetSolution {
    #[getter]
    fn partition(&self) -> PyPartition {
        PyPartition::from_inner(self.inner.partition.clone())
    }
    #[getter]
    fn budget(&self) -> f64 {
        self.inner.budget
    }
    #[getter]
    fn saved_bytes(&self) -> u64 {
        self.inner.partition.saved_bytes
    }
    /// `saved_bytes` less the saved primal inputs: what the budget limits.
    #[getter]
    fn activation_bytes(&self) -> u64 {
        self.inner.activation_bytes
    }
    #[getter]
    fn recompute_cost(&self) -> f64 {
        self.inner.recompute_cost
    }
    #[getter]
    fn min_cut_bytes(&self) -> u64 {
        self.inner.min_cut_bytes
    }
    #[getter]
    fn min_bytes(&self) -> u64 {
        self.inner.min_bytes
    }
    #[getter]
    fn target_bytes(&self) -> u64 {
        self.inner.target_bytes
    }
    #[getter]
    fn met(&self) -> bool {
        self.inner.met
    }
    #[getter]
    fn exact(&self) -> bool {
        self.inner.exact
    }

    fn __repr__(&self) -> String {
        format!(
            "<BudgetSolution budget={} saved_bytes={} recompute_cost={} met={}>",
            self.inner.budget,
            self.inner.partition.saved_bytes,
            self.inner.recompute_cost,
            self.inner.met
        )
    }
}

/// Reads an optional float64[N] buffer of per-node FLOPs (native byte order;
/// any object with the buffer protocol). Length and values are checked by the
/// core ([`partition::recompute_costs`]).
fn flops_from(flops: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<f64>>> {
    let Some(obj) = flops else { return Ok(None) };
    if obj.is_none() {
        return Ok(None);
    }
    Column::<f64>::read(obj, "float64")
        .map(|column| Some(column.as_slice().to_vec()))
        .map_err(|detail| partition_error(obj.py(), format!("flops {detail}")))
}

/// The memory-budget partition of `store` for `budget` (a fraction of the
/// bytes min-cut saves); `options` as for `partition_min_cut`; `flops` a
/// float64[N] buffer of per-node FLOPs (estimated from byte sizes if `None`).
#[pyfunction]
#[pyo3(signature = (store, budget, options = None, flops = None))]
pub fn partition_memory_budget(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    budget: f64,
    options: Option<&Bound<'_, PyPartitionOptions>>,
    flops: Option<&Bound<'_, PyAny>>,
) -> PyResult<PyBudgetSolution> {
    let o = core_options(py, options)?;
    let f = flops_from(flops)?;
    let s = store.get().store();
    enter(py, || {
        partition::partition_memory_budget(s, &o, budget, f.as_deref())
    })
    .map(|inner| PyBudgetSolution { inner })
}

/// One solution per budget, computed in one pass.
#[pyfunction]
#[pyo3(signature = (store, budgets, options = None, flops = None))]
pub fn memory_frontier(
    py: Python<'_>,
    store: &Bound<'_, PyGraphStore>,
    budgets: Vec<f64>,
    options: Option<&Bound<'_, PyPartitionOptions>>,
    flops: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<PyBudgetSolution>> {
    let o = core_options(py, options)?;
    let f = flops_from(flops)?;
    let s = store.get().store();
    let sols = enter(py, move || {
        partition::memory_frontier(s, &o, &budgets, f.as_deref())
    })?;
    Ok(sols
        .into_iter()
        .map(|inner| PyBudgetSolution { inner })
        .collect())
}

/// float64[N] (native bytes): the recompute cost of each node by the cost
/// table; `flops` as for `partition_memory_budget`, `options` for its cost
/// model (`flops_per_byte`, `fused_factor`, `op_factors`).
#[pyfunction]
#[pyo3(signature = (store, flops = None, options = None))]
pub fn recompute_costs<'py>(
    py: Python<'py>,
    store: &Bound<'py, PyGraphStore>,
    flops: Option<&Bound<'py, PyAny>>,
    options: Option<&Bound<'py, PyPartitionOptions>>,
) -> PyResult<Bound<'py, PyBytes>> {
    let f = flops_from(flops)?;
    let o = core_options(py, options)?;
    let s = store.get().store();
    let costs = enter(py, || {
        partition::recompute_costs(s, &OpRules::new(s), f.as_deref(), &o.cost)
    })?;
    PyBytes::new_with(py, costs.len() * 8, |out| {
        for (chunk, c) in out.chunks_exact_mut(8).zip(&costs) {
            chunk.copy_from_slice(&c.to_ne_bytes());
        }
        Ok(())
    })
}
