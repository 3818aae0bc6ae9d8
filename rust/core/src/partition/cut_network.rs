//! The flow network every cutting partitioner builds: the min cut
//! ([`super::mincut`]) and the memory budget's parametric cut
//! ([`super::budget_solve`]) differ only in what each node's split edge costs
//! and which nodes are banned from recomputation.
//!
//! Arguments: the store, its rules and roles, a ban predicate and the
//! capacity of each node's `in -> out` edge.
//! Returns: the edge list ([`Edges`]) and, per node with a split edge, that
//! edge's index ([`CutEdges::split`]). Node `i` is `2*i` (in) and `2*i + 1`
//! (out); the source is `2N`, the sink `2N + 1`. Only nodes the backward
//! (transitively) needs take part. Edges:
//! - `in(i) -> sink`, infinite, when `i` is tangent-derived, or tagged
//!   `MUST_RECOMPUTE` and not banned (it is computed in the backward);
//! - `out(i) -> sink`, infinite, when `i` is a gradient output not derived
//!   from a tangent (the backward needs its value);
//! - `source -> in(i)`, infinite, when `i` is banned from recomputation;
//! - `in(i) -> out(i)` with the caller's capacity (what saving `i` costs);
//! - `out(i) -> in(u)`, infinite, once per distinct reader `u` the backward needs.
//!
//! Complexity: `O(N + E)`.

use super::classify::NodeInfo;
use super::rules::OpRules;
use crate::error::Result;
use crate::flow::FlowNetwork;
use crate::ids::NodeId;
use crate::store::GraphStore;

pub(crate) const INF: f64 = f64::INFINITY;

/// An edge list, built once and turned into a [`FlowNetwork`].
#[derive(Clone, Default)]
pub(crate) struct Edges {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub cap: Vec<f64>,
}

impl Edges {
    #[inline]
    pub fn push(&mut self, u: u32, v: u32, c: f64) {
        self.src.push(u);
        self.dst.push(v);
        self.cap.push(c);
    }

    /// The network over `2 * nodes + 2` vertices, source `2N`, sink `2N + 1`.
    pub fn network(&self, nodes: usize) -> Result<FlowNetwork> {
        let (source, sink) = (2 * nodes as u32, 2 * nodes as u32 + 1);
        FlowNetwork::from_edges(2 * nodes + 2, &self.src, &self.dst, &self.cap, source, sink)
    }
}

/// The edges and where each split edge is.
pub(crate) struct CutEdges {
    pub edges: Edges,
    /// `(node, index of its in -> out edge)`, in node order.
    pub split: Vec<(NodeId, usize)>,
}

/// Builds the network of the module docs.
pub(crate) fn build(
    store: &GraphStore,
    rules: &OpRules,
    info: &NodeInfo,
    banned: impl Fn(NodeId) -> bool,
    mut save_cap: impl FnMut(NodeId) -> f64,
) -> CutEdges {
    let n = store.len() as u32;
    let (source, sink) = (2 * n, 2 * n + 1);
    let mut e = Edges::default();
    let hint = store.len() * 2 + store.user_idx.len();
    e.src.reserve(hint);
    e.dst.reserve(hint);
    e.cap.reserve(hint);
    let mut split = Vec::new();
    for v in store.node_ids() {
        let i = v.index();
        if !info.needed_by_bw[i] {
            continue;
        }
        let (vin, vout) = (2 * v.0, 2 * v.0 + 1);
        if info.td[i] {
            e.push(vin, sink, INF);
            continue;
        }
        if info.required_bw[i] {
            e.push(vout, sink, INF);
        }
        let ban = banned(v);
        if rules.must_recompute(v) && !ban {
            e.push(vin, sink, INF);
            continue;
        }
        if ban {
            e.push(source, vin, INF);
        }
        split.push((v, e.cap.len()));
        e.push(vin, vout, save_cap(v));
        let users = store.users(v);
        for (k, &u) in users.iter().enumerate() {
            if info.needed_by_bw[u.index()] && (k == 0 || users[k - 1] != u) {
                e.push(vout, 2 * u.0, INF);
            }
        }
    }
    CutEdges { edges: e, split }
}
