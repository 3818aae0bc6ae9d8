//! The partition result (`docs/node_table.md`, "The partition result").

use crate::ids::NodeId;

/// Bits of [`Partition::placement`].
pub mod placement {
    crate::codes::codes! { u8;
        /// The node is computed in (or is an input of) the forward graph.
        FORWARD = 1;
        /// The node is present in the backward graph: a placeholder if saved or a
        /// tangent, computed (or recomputed) there otherwise.
        BACKWARD = 2;
    }
}

crate::codes::coded_enum! {
    /// Why a value is saved for the backward (the `saved_reason` column).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum SavedReason {
        /// The backward reads it (default partition).
        ReadByBackward = 0,
        /// It lies on the min-cut boundary.
        MinCutBoundary = 1,
        /// Checkpoint tag `MUST_SAVE` / `PREFER_SAVE` (or a region boundary).
        MustSave = 2,
        /// An op that is never recomputed (compute-intensive, random, impure,
        /// outside the recomputable allowlist).
        NeverRecompute = 3,
        /// A primal input.
        Primal = 4,
        /// A `SymInt` (saved as an int).
        SymbolicSize = 5,
    }
}

/// A forward/backward split of a joint graph.
///
/// Invariants (checked by [`super::check`], on the store with `rep` applied):
/// the forward never reads a tangent-derived node; every argument of a node computed in the backward is
/// saved, a tangent, or computed in the backward; saved values are computed in
/// the forward; ops that may never be recomputed are not (compute-intensive
/// ops may be when [`Self::recomputes_compute_intensive`] is set).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Partition {
    /// One [`placement`] bit set per node.
    pub placement: Vec<u8>,
    /// Saved node ids: tensors first (in node order), then `SymInt`s (in node order).
    pub saved: Vec<NodeId>,
    /// One reason per saved value.
    pub saved_reason: Vec<SavedReason>,
    /// CALL nodes computed in both the forward and the backward, in node order.
    pub recomputed: Vec<NodeId>,
    /// Sum of `nbytes` over the saved tensors (`SymInt`s excluded).
    pub saved_bytes: u64,
    /// Number of `SymInt`s at the end of `saved`.
    pub num_saved_symints: usize,
    /// The representative of each node ([`crate::passes::cse`]): `rep[i] == i`
    /// unless node `i` computes the same value as the earlier node `rep[i]`,
    /// which then stands in for it (node `i` has placement 0; readers of `i`
    /// read `rep[i]`). The identity when CSE is off.
    pub rep: Vec<NodeId>,
    /// Whether the partitioner was allowed to recompute compute-intensive ops
    /// (the memory-budget partitioner, which prices them by their FLOPs); the
    /// others never recompute them. [`super::check`] applies the same rule.
    pub recomputes_compute_intensive: bool,
}

impl SavedReason {
    /// How reports and logs name the reason (`aotgrad._rust.SAVED_REASON_LABELS`).
    pub fn label(self) -> &'static str {
        match self {
            Self::ReadByBackward => "read by backward",
            Self::MinCutBoundary => "min-cut boundary",
            Self::MustSave => "must-save tag",
            Self::NeverRecompute => "never-recompute op",
            Self::Primal => "primal input",
            Self::SymbolicSize => "symbolic size",
        }
    }
}

impl Partition {
    #[inline]
    pub fn in_forward(&self, n: NodeId) -> bool {
        self.placement[n.index()] & placement::FORWARD != 0
    }

    #[inline]
    pub fn in_backward(&self, n: NodeId) -> bool {
        self.placement[n.index()] & placement::BACKWARD != 0
    }

    /// The `saved_reason` column as bytes.
    pub fn saved_reason_bytes(&self) -> Vec<u8> {
        self.saved_reason.iter().map(|r| *r as u8).collect()
    }
}
