//! The one way into Rust (after polars' `enter_polars`): every binding call
//! that does real work runs its core closure through [`enter`], which
//!
//! 1. releases the GIL (`Python::detach`), so other Python threads run while
//!    Rust works;
//! 2. catches a panic (`std::panic::catch_unwind`), so a bug in aotgrad
//!    surfaces as `aotgrad.errors.InternalError` instead of aborting the
//!    interpreter or raising pyo3's `PanicException` (a `BaseException`);
//! 3. maps the core's `Error` to its Python exception (`crate::errors`).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::prelude::*;

use crate::errors::{to_pyerr, InternalError};

/// Runs `f` without the GIL; maps its error or panic to a Python exception.
pub fn enter<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    // `Send` is what `Python::detach`'s `Ungil` bound means on stable
    // (and what it needs of the whole result type, not just of `T`).
    F: FnOnce() -> aotgrad_core::Result<T> + Send,
    T: Send,
{
    // AssertUnwindSafe: on a panic nothing `f` touched is used again; the
    // error is reported and the partial result dropped.
    match py.detach(move || catch_unwind(AssertUnwindSafe(f))) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(to_pyerr(py, &e)),
        Err(payload) => Err(InternalError::new_err(format!(
            "aotgrad panicked (this is a bug; please report it): {}",
            panic_message(payload.as_ref())
        ))),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "<non-string panic payload>"
    }
}

/// Panics inside [`enter`], so tests can check that a Rust panic reaches
/// Python as `InternalError` and the interpreter survives.
#[pyfunction]
pub fn _panic_for_tests(py: Python<'_>) -> PyResult<()> {
    enter(py, || -> aotgrad_core::Result<()> {
        panic!("deliberate panic for tests")
    })
}
