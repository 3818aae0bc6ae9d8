//! `aotgrad._rust`: thin pyo3 bindings over `aotgrad-core`. One small file per
//! exposed type; no algorithm code here.

use pyo3::prelude::*;

#[pymodule]
fn _rust(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("FORMAT_VERSION", 1u32)?;
    Ok(())
}
