//! `aotgrad._rust`: thin pyo3 bindings over `aotgrad-core`. One small file per
//! exposed type; no algorithm code here.

pub mod alias;
pub mod budget;
pub mod buffer;
pub mod enter;
pub mod errors;
pub mod flow;
pub mod options;
pub mod partition;
pub mod store;
pub mod vocab;

use pyo3::prelude::*;

#[pymodule]
fn _rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    vocab::register(m)?;
    errors::register(m)?;
    m.add_class::<store::PyGraphStore>()?;
    m.add_function(wrap_pyfunction!(enter::_panic_for_tests, m)?)?;
    m.add_function(wrap_pyfunction!(flow::min_cut, m)?)?;
    m.add_class::<options::PyPartitionOptions>()?;
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
