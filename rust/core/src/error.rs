//! The one error type of the core. The binding crate maps each variant to a
//! Python exception under `aotgrad.errors.AotgradError`.

use thiserror::Error;

/// Everything that can go wrong in the core. Messages name the column and the
/// node (or edge) at fault, so the Python exception is actionable on its own.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// A node table that breaks the format contract (`docs/node_table.md`).
    #[error("malformed node table: column `{column}`{}: {detail}", at_node(*node))]
    Table {
        column: &'static str,
        node: Option<u32>,
        detail: String,
    },
    /// A graph that decodes but is not a valid joint graph for the requested pass.
    #[error("invalid graph at node {}: {detail}", at_node_plain(*node))]
    Graph { node: Option<u32>, detail: String },
    /// Bad input to a flow / cut primitive.
    #[error("invalid flow network: {0}")]
    Flow(String),
    /// An alias table (the tracer's facts about inputs and outputs) that
    /// breaks the format contract (`docs/node_table.md`, "The alias table").
    #[error("malformed alias table: column `{column}`{}: {detail}", at_row(*row))]
    Alias {
        column: &'static str,
        row: Option<u32>,
        detail: String,
    },
    /// A partition that cannot satisfy its constraints.
    #[error("partition failed: {0}")]
    Partition(String),
}

fn at_node(node: Option<u32>) -> String {
    node.map_or_else(String::new, |n| format!(" at node {n}"))
}

fn at_row(row: Option<u32>) -> String {
    row.map_or_else(String::new, |n| format!(" at row {n}"))
}

fn at_node_plain(node: Option<u32>) -> String {
    node.map_or_else(|| "-".to_string(), |n| n.to_string())
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn table(column: &'static str, node: Option<u32>, detail: impl Into<String>) -> Self {
        Error::Table {
            column,
            node,
            detail: detail.into(),
        }
    }
}
