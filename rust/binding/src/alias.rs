//! `aotgrad._rust.classify_aliases`: the alias table (the tracer's facts
//! about a function's inputs and outputs, `docs/node_table.md`) → one verdict
//! per input and per output. The columns are short (one row per flat input
//! or output), so they cross as Python lists of ints.

use aotgrad_core::alias::{classify, AliasFacts};
use pyo3::prelude::*;

use crate::enter::enter;

/// `(input_verdicts, output_verdicts, output_source, intermediate_bases)`,
/// each a list of ints (verdict codes as in `aotgrad_core::alias::rules`).
type Verdicts = (Vec<u8>, Vec<u8>, Vec<i32>, Vec<u32>);

/// Validates the alias table and classifies every row; a malformed table
/// raises `TableError` naming the column and row.
#[pyfunction]
pub fn classify_aliases(
    py: Python<'_>,
    input_flags: Vec<u32>,
    input_storage: Vec<i32>,
    output_flags: Vec<u32>,
    output_input: Vec<i32>,
    output_base: Vec<i32>,
    output_base_output: Vec<i32>,
) -> PyResult<Verdicts> {
    enter(py, move || {
        let facts = AliasFacts::new(
            input_flags,
            input_storage,
            output_flags,
            output_input,
            output_base,
            output_base_output,
        )?;
        let c = classify(&facts);
        Ok((
            c.inputs.iter().map(|&v| v as u8).collect(),
            c.outputs.iter().map(|&v| v as u8).collect(),
            c.output_source,
            c.intermediate_bases,
        ))
    })
}
