//! The boundary's vocabulary on the module (after pydantic-core's
//! `module_init`): every code defined in the core, exported so that Python
//! builds its enums from it (`python/aotgrad/vocab.py`) instead of mirroring
//! them by hand.
//!
//! ```text
//! __version__          str   the workspace's version
//! FORMAT_VERSION       int   the node-table format (`aotgrad_core::FORMAT_VERSION`)
//! PLACEHOLDER_OP       str   reserved op names of the node table
//! GET_ATTR_OP          str
//! VOCABULARY           dict  {vocabulary: {NAME: code}} (`aotgrad_core::vocab::vocabulary`)
//! SAVED_REASON_LABELS  dict  {NAME: label} of the `saved_reason` vocabulary
//! ```

use aotgrad_core::partition::SavedReason;
use aotgrad_core::table::{GET_ATTR_OP, PLACEHOLDER_OP};
use aotgrad_core::vocab::{screaming_snake, vocabulary};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Adds the version, the format constants and every vocabulary to `m`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // The package's one version: the workspace's (`[workspace.package]`), which
    // maturin also writes into the wheel's metadata.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", aotgrad_core::FORMAT_VERSION)?;
    m.add("PLACEHOLDER_OP", PLACEHOLDER_OP)?;
    m.add("GET_ATTR_OP", GET_ATTR_OP)?;
    let all = PyDict::new(py);
    for v in vocabulary() {
        let codes = PyDict::new(py);
        for (name, code) in v.codes {
            codes.set_item(name, code)?;
        }
        all.set_item(v.name, codes)?;
    }
    m.add("VOCABULARY", all)?;
    let labels = PyDict::new(py);
    for &(name, reason) in SavedReason::VARIANTS {
        labels.set_item(screaming_snake(name), reason.label())?;
    }
    m.add("SAVED_REASON_LABELS", labels)?;
    Ok(())
}
