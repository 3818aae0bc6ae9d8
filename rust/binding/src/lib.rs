//! `aotgrad._rust`: thin pyo3 bindings over `aotgrad-core`. One small file per
//! exposed type; no algorithm code here.

pub mod alias;
pub mod budget;
pub mod buffer;
pub mod enter;
pub mod errors;
pub mod flow;
pub mod partition;
pub mod store;

use pyo3::prelude::*;

#[pymodule]
fn _rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The package's one version: the workspace's (`[workspace.package]`), which
    // maturin also writes into the wheel's metadata.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", aotgrad_core::FORMAT_VERSION)?;
    errors::register(m)?;
    m.add_class::<store::PyGraphStore>()?;
    m.add_function(wrap_pyfunction!(enter::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(flow::min_cut, m)?)?;
    m.add_class::<partition::PyPartition>()?;
    m.add_function(wrap_pyfunction!(partition::partition_default, m)?)?;
    m.add_function(wrap_pyfunction!(partition::partition_min_cut, m)?)?;
    m.add_function(wrap_pyfunction!(partition::check_partition, m)?)?;
    m.add_function(wrap_pyfunction!(alias::classify_aliases, m)?)?;
    m.add_class::<budget::PyBudgetSolution>()?;
    m.add_function(wrap_pyfunction!(budget::partition_memory_budget, m)?)?;
    m.add_function(wrap_pyfunction!(budget::memory_frontier, m)?)?;
    m.add_function(wrap_pyfunction!(budget::recompute_costs, m)?)?;
    Ok(())
}
