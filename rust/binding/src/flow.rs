//! `aotgrad._rust.min_cut`: a minimum s-t cut over caller-owned edge columns.
//!
//! The columns are read zero-copy through the buffer protocol (numpy arrays,
//! `array.array`, `memoryview`): `src` / `dst` as int64, `capacity` as
//! float64. Validation and the cut run in the core (`flow::min_cut_edges`)
//! with the GIL released; every problem raises `FlowError`.

use aotgrad_core::flow::min_cut_edges;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::{Column, Scalar};
use crate::enter::enter;
use crate::errors::flow_error;

/// The argument `name` as a column of `T`, read zero-copy (`crate::buffer`).
fn column<T: Scalar>(obj: &Bound<'_, PyAny>, name: &str, dtype: &str) -> PyResult<Column<T>> {
    Column::read(obj, dtype).map_err(|detail| flow_error(obj.py(), format!("`{name}` {detail}")))
}

/// Minimum cut of the network `num_nodes`, edges `src[j] -> dst[j]` with
/// capacity `capacity[j]` (`inf` = uncuttable), between `source` and `sink`.
///
/// Returns `(value, source_side)`: the cut's capacity and a `bytes` of
/// `num_nodes` 0/1 entries, 1 for nodes on the source side (residual
/// reachability from the source after a maximum flow).
#[pyfunction]
pub fn min_cut<'py>(
    py: Python<'py>,
    num_nodes: i64,
    src: &Bound<'py, PyAny>,
    dst: &Bound<'py, PyAny>,
    capacity: &Bound<'py, PyAny>,
    source: i64,
    sink: i64,
) -> PyResult<(f64, Bound<'py, PyBytes>)> {
    let Ok(n) = usize::try_from(num_nodes) else {
        return Err(flow_error(
            py,
            format!("num_nodes is {num_nodes}, must be >= 0"),
        ));
    };
    let src = column::<i64>(src, "src", "int64")?;
    let dst = column::<i64>(dst, "dst", "int64")?;
    let cap = column::<f64>(capacity, "capacity", "float64")?;
    let (s, d, c) = (src.as_slice(), dst.as_slice(), cap.as_slice());
    let cut = enter(py, || min_cut_edges(n, s, d, c, source, sink))?;
    let mask = PyBytes::new_with(py, cut.source_side.len(), |out| {
        for (o, &b) in out.iter_mut().zip(&cut.source_side) {
            *o = u8::from(b);
        }
        Ok(())
    })?;
    Ok((cut.value, mask))
}
