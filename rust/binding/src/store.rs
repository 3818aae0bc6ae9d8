//! `aotgrad._rust.GraphStore`: a validated joint graph held by Rust.
//!
//! Built from a Python `NodeTable` (`python/aotgrad/table.py`) whose columns
//! are read zero-copy through the buffer protocol; validation and the build
//! run in the core (`GraphStore::from_table`) with the GIL released.

use aotgrad_core::{printer, verify, GraphStore, TableView};
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::buffer::{Column, Scalar};
use crate::enter::enter;
use crate::errors::table_error;

/// A validated joint forward+backward graph (see `docs/node_table.md`).
#[pyclass(name = "GraphStore", module = "aotgrad._rust", frozen)]
pub struct PyGraphStore {
    inner: GraphStore,
}

impl PyGraphStore {
    /// Wraps a store built by the core (for other binding files).
    pub(crate) fn new(inner: GraphStore) -> Self {
        Self { inner }
    }

    /// The core store, for the other binding files (`partition.rs`, ...).
    pub(crate) fn store(&self) -> &GraphStore {
        &self.inner
    }
}

/// A column of the table, read zero-copy (`crate::buffer`).
fn column<T: Scalar>(
    table: &Bound<'_, PyAny>,
    name: &'static str,
    dtype: &str,
) -> PyResult<Column<T>> {
    let py = table.py();
    let obj = table
        .getattr(name)
        .map_err(|_| table_error(py, name, "the table has no such attribute"))?;
    Column::read(&obj, dtype).map_err(|detail| table_error(py, name, detail))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string())
}

fn int_attr(table: &Bound<'_, PyAny>, name: &'static str) -> PyResult<i64> {
    let py = table.py();
    let value = table
        .getattr(name)
        .map_err(|_| table_error(py, name, "the table has no such attribute"))?;
    value.extract::<i64>().map_err(|_| {
        table_error(
            py,
            name,
            format!("must be an int in the i64 range, got {}", type_name(&value)),
        )
    })
}

/// Native-endian bytes of a column, for `np.frombuffer` on the Python side.
trait NeBytes: Copy {
    const SIZE: usize;
    fn write(self, out: &mut [u8]);
}

macro_rules! ne_bytes {
    ($($t:ty),*) => {$(
        impl NeBytes for $t {
            const SIZE: usize = size_of::<$t>();
            fn write(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
ne_bytes!(u8, u32, u64, i32);

fn to_bytes<'py, T: NeBytes>(py: Python<'py>, values: &[T]) -> PyResult<Bound<'py, PyBytes>> {
    PyBytes::new_with(py, values.len() * T::SIZE, |out| {
        for (chunk, v) in out.chunks_exact_mut(T::SIZE).zip(values) {
            v.write(chunk);
        }
        Ok(())
    })
}

#[pymethods]
impl PyGraphStore {
    /// Validates a `NodeTable` and builds the store. Raises `TableError`
    /// naming the column (and node) of the first problem found.
    #[staticmethod]
    fn from_table(py: Python<'_>, table: &Bound<'_, PyAny>) -> PyResult<Self> {
        let version = int_attr(table, "version")?;
        let num_fwd_outputs = int_attr(table, "num_fwd_outputs")?;
        let kind = column::<u8>(table, "kind", "uint8")?;
        let op = column::<u32>(table, "op", "uint32")?;
        let arg_ptr = column::<u32>(table, "arg_ptr", "uint32")?;
        let arg_idx = column::<u32>(table, "arg_idx", "uint32")?;
        let nbytes = column::<u64>(table, "nbytes", "uint64")?;
        let const_hash = column::<u64>(table, "const_hash", "uint64")?;
        let flags = column::<u32>(table, "flags", "uint32")?;
        let region = column::<i32>(table, "region", "int32")?;
        let outputs = column::<i32>(table, "outputs", "int32")?;
        let names = table
            .getattr("op_names")
            .map_err(|_| table_error(py, "op_names", "the table has no such attribute"))?;
        let op_names: Vec<String> = names.extract().map_err(|_| {
            table_error(
                py,
                "op_names",
                format!("must be a list of str, got {}", type_name(&names)),
            )
        })?;
        let view = TableView {
            version,
            kind: kind.as_slice(),
            op: op.as_slice(),
            arg_ptr: arg_ptr.as_slice(),
            arg_idx: arg_idx.as_slice(),
            nbytes: nbytes.as_slice(),
            const_hash: const_hash.as_slice(),
            flags: flags.as_slice(),
            region: region.as_slice(),
            outputs: outputs.as_slice(),
            num_fwd_outputs,
            op_names: &op_names,
        };
        enter(py, || GraphStore::from_table(&view)).map(Self::new)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "<GraphStore nodes={} edges={} outputs={} fwd_outputs={}>",
            self.inner.len(),
            self.inner.arg_idx.len(),
            self.inner.outputs.len(),
            self.inner.num_fwd_outputs
        )
    }

    /// Number of forward outputs (the first entries of the outputs).
    #[getter]
    fn num_fwd_outputs(&self) -> usize {
        self.inner.num_fwd_outputs
    }

    /// Re-checks every store invariant; raises `GraphError` if one is broken.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        enter(py, || verify(self.store()))
    }

    /// The nodes within `radius` of `node`, `node` marked with `==>`.
    #[pyo3(signature = (node, radius = 3))]
    fn render(&self, py: Python<'_>, node: usize, radius: usize) -> PyResult<String> {
        enter(py, || {
            Ok(printer::render_window(self.store(), node, radius))
        })
    }

    /// The whole graph as text, one node per line, then the outputs.
    fn render_graph(&self, py: Python<'_>) -> PyResult<String> {
        enter(py, || Ok(printer::render_graph(&self.inner)))
    }

    /// Argument node ids of `node`, in argument order.
    fn args(&self, node: usize) -> PyResult<Vec<u32>> {
        self.check_node(node)?;
        Ok(self
            .inner
            .args(aotgrad_core::NodeId(node as u32))
            .iter()
            .map(|a| a.0)
            .collect())
    }

    /// Reader node ids of `node`, once per argument slot, ascending.
    fn users(&self, node: usize) -> PyResult<Vec<u32>> {
        self.check_node(node)?;
        Ok(self
            .inner
            .users(aotgrad_core::NodeId(node as u32))
            .iter()
            .map(|a| a.0)
            .collect())
    }

    /// `bytes` of length N: 1 where the node is a tangent or reads one
    /// (the `TANGENT_DERIVED` flag), else 0.
    fn tangent_derived<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bit = aotgrad_core::flags::TANGENT_DERIVED;
        let mask: Vec<u8> = self
            .inner
            .flags
            .iter()
            .map(|f| u8::from(f & bit != 0))
            .collect();
        to_bytes(py, &mask)
    }

    /// The store as table columns: a dict of native-endian `bytes` per
    /// column (`np.frombuffer(d["op"], np.uint32)`), plus `version`,
    /// `num_fwd_outputs` and `op_names`. `flags` carry `TANGENT_DERIVED`.
    fn to_columns<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = enter(py, || Ok(self.inner.to_columns()))?;
        let d = PyDict::new(py);
        d.set_item("version", c.version)?;
        d.set_item("kind", to_bytes(py, &c.kind)?)?;
        d.set_item("op", to_bytes(py, &c.op)?)?;
        d.set_item("arg_ptr", to_bytes(py, &c.arg_ptr)?)?;
        d.set_item("arg_idx", to_bytes(py, &c.arg_idx)?)?;
        d.set_item("nbytes", to_bytes(py, &c.nbytes)?)?;
        d.set_item("const_hash", to_bytes(py, &c.const_hash)?)?;
        d.set_item("flags", to_bytes(py, &c.flags)?)?;
        d.set_item("region", to_bytes(py, &c.region)?)?;
        d.set_item("outputs", to_bytes(py, &c.outputs)?)?;
        d.set_item("num_fwd_outputs", c.num_fwd_outputs)?;
        d.set_item("op_names", c.op_names)?;
        Ok(d)
    }
}

impl PyGraphStore {
    fn check_node(&self, node: usize) -> PyResult<()> {
        if node < self.inner.len() {
            Ok(())
        } else {
            Err(PyIndexError::new_err(format!(
                "node {node} out of range for a graph of {} nodes",
                self.inner.len()
            )))
        }
    }
}
