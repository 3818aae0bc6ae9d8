//! The Python exception hierarchy of `aotgrad._rust`, and the one conversion
//! from the core's error enum to `PyErr` (one exception class per variant).
//!
//! ```text
//! AotgradError(Exception)
//! ├── TableError      Error::Table, Error::Alias (attributes: column, node/row)
//! ├── GraphError      Error::Graph      (attribute: node)
//! ├── FlowError       Error::Flow
//! ├── PartitionError  Error::Partition
//! └── InternalError   a Rust panic, caught at the boundary (a bug in aotgrad)
//! ```

use aotgrad_core::Error;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    aotgrad._rust,
    AotgradError,
    PyException,
    "Base class of every error aotgrad raises."
);
create_exception!(
    aotgrad._rust,
    TableError,
    AotgradError,
    "A node table that breaks the format contract (docs/node_table.md). \
     Attributes: `column` (str) and `node` (int or None)."
);
create_exception!(
    aotgrad._rust,
    GraphError,
    AotgradError,
    "A graph that is not a valid joint graph. Attribute: `node` (int or None)."
);
create_exception!(
    aotgrad._rust,
    FlowError,
    AotgradError,
    "Bad input to a max-flow / min-cut primitive."
);
create_exception!(
    aotgrad._rust,
    PartitionError,
    AotgradError,
    "A partition that cannot satisfy its constraints."
);
create_exception!(
    aotgrad._rust,
    InternalError,
    AotgradError,
    "A bug in aotgrad: Rust code panicked. Please report it with the message."
);

/// The core's error on its way to Python (a newtype: neither `Error` nor
/// `PyErr` belongs to this crate). `?` converts it in `PyResult` functions.
#[derive(Debug)]
pub struct CoreError(pub Error);

impl From<Error> for CoreError {
    fn from(e: Error) -> Self {
        CoreError(e)
    }
}

impl From<CoreError> for PyErr {
    fn from(e: CoreError) -> PyErr {
        Python::attach(|py| to_pyerr(py, &e.0))
    }
}

/// Maps a core error to its exception, with its structured fields set as
/// attributes so that callers need not parse the message.
pub fn to_pyerr(py: Python<'_>, e: &Error) -> PyErr {
    let message = e.to_string();
    // Setting an attribute on a fresh exception instance cannot fail in
    // practice; if it did, the exception would still carry its message.
    match e {
        Error::Table { column, node, .. } => {
            let err = TableError::new_err(message);
            let _ = err.value(py).setattr("column", *column);
            let _ = err.value(py).setattr("node", *node);
            err
        }
        Error::Graph { node, .. } => {
            let err = GraphError::new_err(message);
            let _ = err.value(py).setattr("node", *node);
            err
        }
        Error::Alias { column, row, .. } => {
            let err = TableError::new_err(message);
            let _ = err.value(py).setattr("column", *column);
            let _ = err.value(py).setattr("node", *row);
            err
        }
        Error::Flow(_) => FlowError::new_err(message),
        Error::Partition(_) => PartitionError::new_err(message),
    }
}

/// A `TableError` raised by the binding itself (a column of the wrong type,
/// a missing attribute), with the same attributes as a core one.
pub fn table_error(py: Python<'_>, column: &'static str, detail: impl Into<String>) -> PyErr {
    to_pyerr(py, &Error::table(column, None, detail))
}

/// A `FlowError` raised by the binding itself (an argument of the wrong type).
pub fn flow_error(py: Python<'_>, detail: impl Into<String>) -> PyErr {
    to_pyerr(py, &Error::Flow(detail.into()))
}

/// A `PartitionError` raised by the binding itself (a bad option or argument).
pub fn partition_error(py: Python<'_>, detail: impl Into<String>) -> PyErr {
    to_pyerr(py, &Error::Partition(detail.into()))
}

/// Registers the exception classes on the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("AotgradError", py.get_type::<AotgradError>())?;
    m.add("TableError", py.get_type::<TableError>())?;
    m.add("GraphError", py.get_type::<GraphError>())?;
    m.add("FlowError", py.get_type::<FlowError>())?;
    m.add("PartitionError", py.get_type::<PartitionError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}
