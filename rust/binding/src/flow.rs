//! `aotgrad._rust.min_cut`: a minimum s-t cut over caller-owned edge columns.
//!
//! The columns are read zero-copy through the buffer protocol (numpy arrays,
//! `array.array`, `memoryview`): `src` / `dst` as int64, `capacity` as
//! float64. Validation and the cut run in the core (`flow::min_cut_edges`)
//! with the GIL released; every problem raises `FlowError`.

use aotgrad_core::flow::min_cut_edges;
use aotgrad_core::Error;
use pyo3::buffer::{Element, PyUntypedBuffer};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::enter::enter;
use crate::errors::to_pyerr;

/// A 1-D, C-contiguous, aligned buffer of `T`, held for the call.
struct Column {
    buf: PyUntypedBuffer,
    len: usize,
}

fn flow_error(py: Python<'_>, detail: String) -> PyErr {
    to_pyerr(py, &Error::Flow(detail))
}

impl Column {
    fn get<T: Element>(obj: &Bound<'_, PyAny>, name: &str, dtype: &str) -> PyResult<Self> {
        let py = obj.py();
        let type_name = obj
            .get_type()
            .name()
            .map_or_else(|_| "?".to_string(), |n| n.to_string());
        let buf = PyUntypedBuffer::get(obj).map_err(|_| {
            flow_error(
                py,
                format!("`{name}` must be a buffer of {dtype} (numpy array or array.array), got {type_name}"),
            )
        })?;
        if buf.dimensions() != 1 {
            return Err(flow_error(
                py,
                format!(
                    "`{name}` must be 1-dimensional, got {} dimensions",
                    buf.dimensions()
                ),
            ));
        }
        if buf.item_size() != size_of::<T>() || !T::is_compatible_format(buf.format()) {
            let format = buf.format().to_string_lossy().into_owned();
            return Err(flow_error(
                py,
                format!(
                    "`{name}` has dtype format {format:?} of {} bytes, expected {dtype}",
                    buf.item_size()
                ),
            ));
        }
        if !buf.is_c_contiguous() {
            return Err(flow_error(py, format!("`{name}` is not C-contiguous")));
        }
        let len = buf.item_count();
        if len > 0 && buf.buf_ptr().align_offset(align_of::<T>()) != 0 {
            return Err(flow_error(
                py,
                format!("`{name}` is not aligned for {dtype}"),
            ));
        }
        Ok(Self { buf, len })
    }

    fn slice<T: Element>(&self) -> &[T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `get::<T>` checked that the buffer is 1-D, C-contiguous,
        // aligned and holds `len` items of `T`'s size and format; the exporter
        // keeps the memory alive and unresized while `self.buf` is held, which
        // outlives the borrow. The core reads each element exactly once and
        // validates it, so a concurrent writer (a caller bug) cannot make it
        // misbehave.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr().cast::<T>(), self.len) }
    }
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
    let src = Column::get::<i64>(src, "src", "int64")?;
    let dst = Column::get::<i64>(dst, "dst", "int64")?;
    let cap = Column::get::<f64>(capacity, "capacity", "float64")?;
    let (s, d, c) = (src.slice::<i64>(), dst.slice::<i64>(), cap.slice::<f64>());
    let cut = enter(py, || min_cut_edges(n, s, d, c, source, sink))?;
    let mask = PyBytes::new_with(py, cut.source_side.len(), |out| {
        for (o, &b) in out.iter_mut().zip(&cut.source_side) {
            *o = u8::from(b);
        }
        Ok(())
    })?;
    Ok((cut.value, mask))
}
