//! The reference maximum flow: petgraph's Dinic (`petgraph::algo::dinics`),
//! the oracle that the fast solver is property-tested against.
//!
//! Arguments: a validated [`FlowNetwork`].
//! Returns: the maximum flow value, or [`crate::Error::Flow`] when it is
//! unbounded (petgraph itself would return a meaningless value there).
//! Complexity: `O(V² E)`; petgraph's implementation also allocates `O(V)` per
//! augmenting path, so it is quadratic in practice on large sparse networks.
//! Reference: <https://docs.rs/petgraph/0.8.3/petgraph/algo/maximum_flow/fn.dinics.html>.

use petgraph::graph::{DiGraph, NodeIndex};

use super::dinic::unbounded;
use super::network::FlowNetwork;
use crate::error::Result;

/// Maximum flow value computed by petgraph (see the module docs).
pub fn petgraph_max_flow(net: &FlowNetwork) -> Result<f64> {
    if let Some(path) = net.infinite_path() {
        return Err(unbounded(&path));
    }
    let mut g: DiGraph<(), f64, u32> = DiGraph::with_capacity(net.num_nodes(), net.num_edges());
    for _ in 0..net.num_nodes() {
        g.add_node(());
    }
    for (u, v, c) in net.edges() {
        g.add_edge(NodeIndex::new(u as usize), NodeIndex::new(v as usize), c);
    }
    let (value, _) = petgraph::algo::dinics(
        &g,
        NodeIndex::new(net.source() as usize),
        NodeIndex::new(net.sink() as usize),
    );
    Ok(value)
}
