//! aotgrad's pure-Rust core: the graph store, its verifier and printer, the
//! max-flow min-cut solver, the passes (CSE) and the partitioners. No Python
//! here; the pyo3 binding crate (`rust/binding`) is a thin layer over this crate.

// First: the macros that declare the boundary's codes (used by the modules below).
mod codes;
pub mod vocab;

pub mod alias;
pub mod error;
pub mod ids;
pub mod passes;
pub mod printer;
pub mod store;
pub mod table;
pub mod verify;

pub use error::{Error, Result};
pub use ids::{NodeId, OpId};
pub use store::{flags, GraphStore, NodeKind};
pub use table::{Columns, TableView, FORMAT_VERSION};
pub use verify::verify;
pub mod flow;
pub mod partition;
#[cfg(any(test, feature = "synth"))]
pub mod synth;
