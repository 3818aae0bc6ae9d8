//! `aotgrad._rust.PartitionOptions`: the partitioners' options as a typed
//! object, built by keyword from Python (`PartitionOptions(cse=False)`), each
//! field torch's default (`aotgrad_core::partition::PartitionOptions`) unless
//! given. The partitioner functions take it (or `None`: the defaults).

use std::collections::BTreeMap;

use aotgrad_core::partition::{CostModel, PartitionOptions};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt};

use crate::errors::{partition_error, to_pyerr};

/// The options of `partition_default` / `partition_min_cut` /
/// `partition_memory_budget` / `memory_frontier` / `recompute_costs` (see
/// [`PartitionOptions`] and [`CostModel`] for what each field means).
#[pyclass(name = "PartitionOptions", module = "aotgrad._rust", get_all, set_all)]
#[derive(Clone, Debug)]
#[allow(clippy::struct_excessive_bools)] // the core's fields, one for one
pub struct PyPartitionOptions {
    ban_if_not_in_allowlist: bool,
    ban_if_reduction: bool,
    ban_if_materialized_backward: bool,
    ban_if_used_far_apart: bool,
    ban_if_long_fusible_chains: bool,
    long_chain: u32,
    max_dist_from_bw: u32,
    recompute_views: bool,
    cse: bool,
    flops_per_byte: f64,
    fused_factor: f64,
    /// Recompute-cost factors by op packet name (`"aten._softmax"`).
    op_factors: BTreeMap<String, f64>,
}

impl From<PartitionOptions> for PyPartitionOptions {
    fn from(o: PartitionOptions) -> Self {
        Self {
            ban_if_not_in_allowlist: o.ban_if_not_in_allowlist,
            ban_if_reduction: o.ban_if_reduction,
            ban_if_materialized_backward: o.ban_if_materialized_backward,
            ban_if_used_far_apart: o.ban_if_used_far_apart,
            ban_if_long_fusible_chains: o.ban_if_long_fusible_chains,
            long_chain: o.long_chain,
            max_dist_from_bw: o.max_dist_from_bw,
            recompute_views: o.recompute_views,
            cse: o.cse,
            flops_per_byte: o.cost.flops_per_byte,
            fused_factor: o.cost.fused_factor,
            op_factors: o.cost.op_factors.into_iter().collect(),
        }
    }
}

impl PyPartitionOptions {
    /// The core's options; `Error::Partition` if the cost model is invalid.
    pub(crate) fn to_core(&self) -> aotgrad_core::Result<PartitionOptions> {
        let op_factors = self
            .op_factors
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        Ok(PartitionOptions {
            ban_if_not_in_allowlist: self.ban_if_not_in_allowlist,
            ban_if_reduction: self.ban_if_reduction,
            ban_if_materialized_backward: self.ban_if_materialized_backward,
            ban_if_used_far_apart: self.ban_if_used_far_apart,
            ban_if_long_fusible_chains: self.ban_if_long_fusible_chains,
            long_chain: self.long_chain,
            max_dist_from_bw: self.max_dist_from_bw,
            recompute_views: self.recompute_views,
            cse: self.cse,
            cost: CostModel::new(self.flops_per_byte, self.fused_factor, op_factors)?,
        })
    }
}

/// The core's options from an optional `PartitionOptions` (the defaults for
/// `None`); a `PartitionError` if its cost model is invalid.
pub(crate) fn core_options(
    py: Python<'_>,
    options: Option<&Bound<'_, PyPartitionOptions>>,
) -> PyResult<PartitionOptions> {
    match options {
        None => Ok(PartitionOptions::default()),
        Some(o) => o.borrow().to_core().map_err(|e| to_pyerr(py, &e)),
    }
}

/// The fields' names, sorted: the class's data descriptors.
fn fields(this: &Bound<'_, PyPartitionOptions>) -> PyResult<Vec<String>> {
    let mut names = Vec::new();
    let attributes = this.get_type().getattr("__dict__")?.call_method0("items")?;
    for item in attributes.try_iter()? {
        let (name, value): (String, Bound<'_, PyAny>) = item?.extract()?;
        if value.get_type().name()? == "getset_descriptor" {
            names.push(name);
        }
    }
    names.sort_unstable();
    Ok(names)
}

/// What a field of the type of `current` accepts, for an error message.
fn expected(current: &Bound<'_, PyAny>) -> &'static str {
    if current.is_instance_of::<PyBool>() {
        "a bool"
    } else if current.is_instance_of::<PyInt>() {
        "an int in 0..2**32"
    } else if current.is_instance_of::<PyFloat>() {
        "a float"
    } else {
        "a dict of op names to floats"
    }
}

#[pymethods]
impl PyPartitionOptions {
    /// Torch's defaults, with the given fields set; a `PartitionError` names
    /// an unknown field, a value of the wrong type, or an invalid cost model.
    #[new]
    #[pyo3(signature = (**options))]
    fn new(py: Python<'_>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Py<Self>> {
        let this = Bound::new(py, Self::from(PartitionOptions::default()))?;
        if let Some(options) = options {
            let known = fields(&this)?;
            for (key, value) in options.iter() {
                let name: String = key.extract()?;
                if !known.contains(&name) {
                    return Err(partition_error(
                        py,
                        format!(
                            "unknown partition option `{name}` (known: {})",
                            known.join(", ")
                        ),
                    ));
                }
                let current = this.getattr(name.as_str())?;
                this.setattr(name.as_str(), &value).map_err(|_| {
                    partition_error(
                        py,
                        format!(
                            "partition option `{name}` must be {}, got {}",
                            expected(&current),
                            value.repr().map_or_else(|_| "?".into(), |r| r.to_string())
                        ),
                    )
                })?;
            }
        }
        core_options(py, Some(&this))?;
        Ok(this.unbind())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let parts = fields(slf)?
            .into_iter()
            .map(|name| Ok(format!("{name}={}", slf.getattr(name.as_str())?.repr()?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!("PartitionOptions({})", parts.join(", ")))
    }
}
