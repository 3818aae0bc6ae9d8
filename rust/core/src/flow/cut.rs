//! Minimum s-t cut from a maximum flow.
//!
//! Arguments: a validated [`FlowNetwork`].
//! Returns: the cut's capacity and its source side, the nodes reachable from
//! the source in the residual graph of a maximum flow (the unique minimal
//! source side among all minimum cuts).
//! Complexity: that of [`dinic`] plus `O(V + E)` for the reachability sweep.
//! Reference: the max-flow min-cut theorem (Ford and Fulkerson, 1956).

use super::dinic::{dinic, MaxFlow};
use super::network::FlowNetwork;
use crate::error::Result;

/// A minimum s-t cut.
#[derive(Clone, Debug, PartialEq)]
pub struct MinCut {
    /// The sum of the capacities of the edges from the source side to the
    /// sink side (equal to the maximum flow value up to `f64` rounding).
    pub value: f64,
    /// One entry per node: `true` for the source side.
    pub source_side: Vec<bool>,
}

/// Computes a minimum cut (see the module docs).
pub fn min_cut(net: &FlowNetwork) -> Result<MinCut> {
    let flow = dinic(net)?;
    Ok(cut_of_flow(net, &flow))
}

/// Builds a network from edge columns and computes its minimum cut; the
/// validation rules are [`FlowNetwork::from_edges`]'s.
pub fn min_cut_edges<I: Copy + Into<i64>>(
    num_nodes: usize,
    src: &[I],
    dst: &[I],
    capacity: &[f64],
    source: I,
    sink: I,
) -> Result<MinCut> {
    let net = FlowNetwork::from_edges(num_nodes, src, dst, capacity, source, sink)?;
    min_cut(&net)
}

/// The source side of the residual graph of `flow`, and its cut value.
pub fn cut_of_flow(net: &FlowNetwork, flow: &MaxFlow) -> MinCut {
    let source_side = residual_reachable(net, &flow.residual);
    let value = net.cut_value(&source_side);
    MinCut { value, source_side }
}

/// The largest source side among all minimum cuts: every node that cannot
/// reach the sink in the residual graph of `flow` (networkx's `minimum_cut`
/// convention, hence torch's partitioner's). Where minimum cuts tie, it cuts
/// as close to the sink as possible.
///
/// Complexity: `O(V + E)`.
pub fn max_source_side(net: &FlowNetwork, flow: &MaxFlow) -> Vec<bool> {
    let (head, rev) = (net.head(), net.rev());
    let mut reaches_sink = vec![false; net.num_nodes()];
    let mut stack = vec![net.sink()];
    reaches_sink[net.sink() as usize] = true;
    while let Some(v) = stack.pop() {
        for a in net.arcs(v) {
            // `a` is v -> w; w reaches v through the paired arc w -> v.
            let w = head[a];
            if flow.residual[rev[a] as usize] > 0.0 && !reaches_sink[w as usize] {
                reaches_sink[w as usize] = true;
                stack.push(w);
            }
        }
    }
    reaches_sink.iter().map(|&r| !r).collect()
}

/// Nodes reachable from the source over arcs with positive residual capacity.
pub(crate) fn residual_reachable(net: &FlowNetwork, residual: &[f64]) -> Vec<bool> {
    let head = net.head();
    let mut seen = vec![false; net.num_nodes()];
    let mut stack = vec![net.source()];
    seen[net.source() as usize] = true;
    while let Some(v) = stack.pop() {
        for a in net.arcs(v) {
            let w = head[a];
            if residual[a] > 0.0 && !seen[w as usize] {
                seen[w as usize] = true;
                stack.push(w);
            }
        }
    }
    seen
}
