//! The graph store: a joint graph held as flat arenas with CSR adjacency.
//!
//! Built from a validated node table (`crate::table`), never mutated in place
//! by passes: a pass reads the store and returns its own result type.

use crate::ids::{NodeId, OpId};

crate::codes::coded_enum! {
    /// Node kinds, as encoded in the table's `kind` column.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum NodeKind {
        /// A forward input (`primals_*`, parameters, buffers, user inputs).
        Primal = 0,
        /// A backward input (`tangents_*`).
        Tangent = 1,
        /// A `call_function` node.
        Call = 2,
        /// A `get_attr` node (a constant held by the graph module).
        GetAttr = 3,
    }
}

/// Per-node flag bits (`docs/node_table.md`).
pub mod flags {
    crate::codes::codes! { u32;
        SYMBOLIC_SIZE = 1 << 0;
        RANDOM = 1 << 1;
        VIEW = 1 << 2;
        IMPURE = 1 << 3;
        COMPUTE_INTENSIVE = 1 << 4;
        /// A tangent or a node reading a tangent-derived one: computed by Rust,
        /// ignored on input.
        TANGENT_DERIVED = 1 << 5;
        SYMINT = 1 << 6;
        MUST_SAVE = 1 << 7;
        MUST_RECOMPUTE = 1 << 8;
        NON_TENSOR = 1 << 9;
        MULTI_OUTPUT = 1 << 10;
        /// A primal the function overwrites in place, or that eager's backward does
        /// not read (meaningful on `PRIMAL` rows only): the runtime must copy it to
        /// save it, or a write after the call would reach the gradient where eager's
        /// does not see it, so min-cut avoids saving it.
        MUTATED_INPUT = 1 << 11;
        /// Saving it costs no memory: a primal that lives for the whole training step
        /// anyway (a parameter or buffer), or a call whose value the runtime saves as a
        /// view of an input it writes that value into.
        STATIC_INPUT = 1 << 12;
        /// A node the backward traced: after the joint's last node traced by the
        /// forward (torch's `partitioner_tag`). The default partition computes such
        /// a node in the backward, where it was traced, unless the forward needs it.
        BACKWARD_REGION = 1 << 13;
    }
    /// Bits a table may carry on input (`TANGENT_DERIVED` is computed, not read).
    pub const KNOWN_INPUT: u32 = (1 << 14) - 1;
}

/// A joint forward+backward graph in topological order.
///
/// Invariants (established by `GraphStore::from_table`, checked by
/// `crate::verify`): every argument id is smaller than its reader's id;
/// `users` is the exact transpose of `args`; `TANGENT_DERIVED` is set exactly
/// on tangents and on nodes reading a tangent-derived node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GraphStore {
    pub kind: Vec<NodeKind>,
    pub op: Vec<OpId>,
    pub op_names: Vec<String>,
    /// CSR: the arguments of node `i` are `arg_idx[arg_ptr[i]..arg_ptr[i+1]]`.
    pub arg_ptr: Vec<u32>,
    pub arg_idx: Vec<NodeId>,
    /// CSR transpose of the arguments (each reader once per argument slot).
    pub user_ptr: Vec<u32>,
    pub user_idx: Vec<NodeId>,
    pub nbytes: Vec<u64>,
    /// Hash of a CALL node's target and constant (non-node) arguments: two
    /// CALL nodes with the same op, `const_hash` and arguments compute the
    /// same value if the op is pure ([`crate::passes::cse`]).
    pub const_hash: Vec<u64>,
    pub flags: Vec<u32>,
    pub region: Vec<i32>,
    /// Graph outputs in order; `None` for a non-node output.
    pub outputs: Vec<Option<NodeId>>,
    pub num_fwd_outputs: usize,
}

impl GraphStore {
    #[inline]
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    #[inline]
    pub fn args(&self, n: NodeId) -> &[NodeId] {
        let i = n.index();
        &self.arg_idx[self.arg_ptr[i] as usize..self.arg_ptr[i + 1] as usize]
    }

    #[inline]
    pub fn users(&self, n: NodeId) -> &[NodeId] {
        let i = n.index();
        &self.user_idx[self.user_ptr[i] as usize..self.user_ptr[i + 1] as usize]
    }

    #[inline]
    pub fn has_flag(&self, n: NodeId, bit: u32) -> bool {
        self.flags[n.index()] & bit != 0
    }

    #[inline]
    pub fn op_name(&self, n: NodeId) -> &str {
        &self.op_names[self.op[n.index()].index()]
    }

    pub fn node_ids(&self) -> impl DoubleEndedIterator<Item = NodeId> + ExactSizeIterator {
        (0..self.len() as u32).map(NodeId)
    }

    pub fn fwd_outputs(&self) -> &[Option<NodeId>] {
        &self.outputs[..self.num_fwd_outputs]
    }

    pub fn bwd_outputs(&self) -> &[Option<NodeId>] {
        &self.outputs[self.num_fwd_outputs..]
    }
}
