//! Partitioners: split a joint forward+backward graph into a forward and a
//! backward graph, choosing which forward values to save and which to
//! recompute.
//!
//! - [`partition_default`]: save every forward value the backward reads.
//! - [`partition_min_cut`]: min-cut rematerialization (torch.compile's policy).
//! - [`check`]: the validity checker, run by tests after every partition.
//!
//! Policy lives in [`rules`] (tables keyed by op, and [`PartitionOptions`]);
//! both partitioners first merge common subexpressions (`prepass`, unless
//! `PartitionOptions::cse` is off) and derive their result the same way
//! (`derive`), so each one only decides what to recompute.

mod bans;
mod check;
mod classify;
mod cut_network;
mod default;
mod derive;
mod mincut;
pub mod op_tables;
mod prepass;
pub mod result;
pub mod rules;
#[cfg(test)]
mod tests;

pub use check::check;
pub use default::partition_default;
pub use mincut::{min_cut_network, partition_min_cut};
pub use result::{placement, Partition, SavedReason};
pub use rules::{OpClass, OpRules, PartitionOptions};
mod budget;
mod budget_solve;
pub mod cost;
mod cost_model;
pub use budget::{memory_frontier, partition_memory_budget, BudgetSolution};
pub use budget_solve::{activation_bytes, EXACT_MAX};
pub use cost::{recompute_costs, CostModel};
#[cfg(test)]
mod budget_tests;
