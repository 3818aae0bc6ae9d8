//! Maximum flow and minimum cut.
//!
//! - [`network`]: the validated CSR network type ([`FlowNetwork`]).
//! - [`dinic`]: the fast solver (Dinic with current arcs, exact with infinite
//!   capacities).
//! - [`oracle`]: petgraph's solver, the reference the fast one is tested
//!   against (`tests`, and `benches/rust/partition.rs` measures both).
//! - [`cut`]: the minimum cut read off the residual graph.

pub mod cut;
pub mod dinic;
pub mod network;
pub mod oracle;
#[cfg(test)]
mod tests;

pub use cut::{max_source_side, min_cut, min_cut_edges, MinCut};
pub use dinic::{dinic, dinic_with, Levels, MaxFlow};
pub use network::FlowNetwork;
pub use oracle::petgraph_max_flow;
