//! Node roles shared by the partitioners.
//!
//! Arguments: a store (its invariants hold: topological order, users CSR,
//! `TANGENT_DERIVED`).
//! Returns: per-node roles, or [`Error::Graph`] when a forward output is
//! tangent-derived (the forward would need a backward input).
//! Complexity: `O(N + E)`, three sweeps over the nodes in (reverse) order.

use crate::error::{Error, Result};
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

/// `fw_order` of a node outside the forward.
pub(crate) const NOT_FW: u32 = u32::MAX;

/// `dist_from_bw` of a forward node with no path to the backward.
pub(crate) const FAR: u32 = 1_000_000_000;

/// Roles of the nodes of a joint graph.
#[derive(Clone, Debug)]
pub(crate) struct NodeInfo {
    /// Tangent-derived: a tangent or a reader of a tangent-derived node.
    pub td: Vec<bool>,
    /// An ancestor (inclusive) of a forward output.
    pub required_fw: Vec<bool>,
    /// Tangent-derived or a backward output.
    pub required_bw: Vec<bool>,
    /// An ancestor (inclusive) of a `required_bw` node.
    pub needed_by_bw: Vec<bool>,
    /// Traced by the backward (`BACKWARD_REGION`), a CALL or `GET_ATTR` node,
    /// and not a `required_fw` node: a value only the backward computes.
    pub bw_only: Vec<bool>,
}

impl NodeInfo {
    pub fn new(store: &GraphStore) -> Result<Self> {
        let n = store.len();
        let td: Vec<bool> = store
            .node_ids()
            .map(|v| store.has_flag(v, flags::TANGENT_DERIVED))
            .collect();
        for (j, out) in store.fwd_outputs().iter().enumerate() {
            if let Some(o) = out {
                if td[o.index()] {
                    return Err(Error::Graph {
                        node: Some(o.0),
                        detail: format!(
                            "forward output {j} ({}) is tangent-derived: the forward would read a backward input",
                            store.op_name(*o)
                        ),
                    });
                }
            }
        }
        let required_fw = ancestors(store, store.fwd_outputs().iter().flatten().copied(), n);
        let mut required_bw = td.clone();
        for o in store.bwd_outputs().iter().flatten() {
            required_bw[o.index()] = true;
        }
        let needed_by_bw = ancestors(
            store,
            (0..n as u32).map(NodeId).filter(|v| required_bw[v.index()]),
            n,
        );
        let bw_only = store
            .node_ids()
            .map(|v| {
                store.has_flag(v, flags::BACKWARD_REGION)
                    && matches!(store.kind[v.index()], NodeKind::Call | NodeKind::GetAttr)
                    && !required_fw[v.index()]
            })
            .collect();
        Ok(Self {
            td,
            required_fw,
            required_bw,
            needed_by_bw,
            bw_only,
        })
    }

    /// Position of each forward node among the forward nodes (`NOT_FW` for
    /// others) and the forward nodes in that order.
    pub fn fw_order(&self) -> (Vec<u32>, Vec<NodeId>) {
        let mut order = vec![NOT_FW; self.required_fw.len()];
        let mut nodes = Vec::new();
        for (i, &f) in self.required_fw.iter().enumerate() {
            if f {
                order[i] = nodes.len() as u32;
                nodes.push(NodeId(i as u32));
            }
        }
        (order, nodes)
    }

    /// Distance (in users) from each forward node to the nearest node outside
    /// the forward (`FAR` if none); 0 outside the forward.
    pub fn dist_from_bw(&self, store: &GraphStore) -> Vec<u32> {
        let mut dist = vec![0u32; store.len()];
        for v in store.node_ids().rev() {
            if self.required_fw[v.index()] {
                dist[v.index()] = store
                    .users(v)
                    .iter()
                    .map(|u| dist[u.index()].saturating_add(1))
                    .min()
                    .unwrap_or(FAR)
                    .min(FAR);
            }
        }
        dist
    }
}

/// Marks `roots` and every node they (transitively) read.
fn ancestors(store: &GraphStore, roots: impl Iterator<Item = NodeId>, n: usize) -> Vec<bool> {
    let mut mark = vec![false; n];
    for r in roots {
        mark[r.index()] = true;
    }
    for v in store.node_ids().rev() {
        if mark[v.index()] {
            for a in store.args(v) {
                mark[a.index()] = true;
            }
        }
    }
    mark
}
