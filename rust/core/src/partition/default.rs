//! The default partition: the forward computes what the original forward
//! computed, and saves every forward value that the backward reads.
//!
//! Arguments: a store and [`PartitionOptions`] (only `cse` applies: common
//! subexpressions are merged first, see `super::prepass`).
//! Returns: the partition: the backward computes the tangent-derived nodes and
//! the nodes the backward traced (`BACKWARD_REGION`, torch's `partitioner_tag`:
//! the weights' transposes, `cos` of a forward `sin`'s input) that the forward
//! does not need; saved = the forward values those read (`SymInt`s last, as
//! ints); forward = the forward outputs' ancestors plus the saved values (and
//! their ancestors). A graph without the tag saves every non-tangent-derived
//! value the backward reads. Nodes tagged `MUST_RECOMPUTE` are recomputed in the backward (their
//! inputs saved instead), as torch's default partition does for activation
//! checkpointing; so are `SymFloat`s (`SYMINT | NON_TENSOR`), which torch's saves:
//! recomputing one from its sizes is free, and a saved one is a backward input
//! Inductor's FX-graph cache cannot key on. Errors: [`crate::Error::Graph`] if a forward output is
//! tangent-derived.
//! Complexity: `O(N + E)`.
//! Reference: `torch._functorch.partitioners.default_partition`.

use super::classify::NodeInfo;
use super::derive::{common_reason, derive, Traced};
use super::prepass::with_passes;
use super::result::{Partition, SavedReason};
use super::rules::{OpRules, PartitionOptions};
use crate::error::Result;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore};

/// Partitions `store` the way the original program ran (see the module docs).
pub fn partition_default(store: &GraphStore, opts: &PartitionOptions) -> Result<Partition> {
    with_passes(store, opts, partition)
}

fn partition(store: &GraphStore) -> Result<Partition> {
    let rules = OpRules::new(store);
    let info = NodeInfo::new(store)?;
    Ok(derive(
        store,
        &rules,
        &info,
        Traced::Kept,
        |v| rules.must_recompute(v) || is_symfloat(store, v),
        |v| common_reason(store, &rules, v).unwrap_or(SavedReason::ReadByBackward),
    ))
}

/// A `SymFloat`: a symbolic scalar that is not an int (see `docs/node_table.md`).
fn is_symfloat(store: &GraphStore, v: NodeId) -> bool {
    store.has_flag(v, flags::SYMINT) && store.has_flag(v, flags::NON_TENSOR)
}
