//! Graph-to-graph passes over a [`crate::GraphStore`], run before partitioning.
//!
//! - [`cse`]: common-subexpression elimination; [`eliminate`] applies its
//!   representative map, giving the store the partitioners cut.

pub mod cse;
#[cfg(test)]
mod tests;

pub use cse::{cse, eliminate, is_identity};
