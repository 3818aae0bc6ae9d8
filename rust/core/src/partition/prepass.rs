//! The passes a partitioner runs on the joint graph before deciding:
//! common-subexpression elimination when [`PartitionOptions::cse`] is on.
//!
//! Arguments: the store, the options, and the partitioner proper (a function
//! of the store it cuts).
//! Returns: the partitioner's result over the same row ids, with
//! [`Partition::rep`] set: the identity without CSE; otherwise merged rows
//! have placement 0 and their readers use the representative instead.
//! Complexity: `O(N + E)` expected on top of the partitioner.

use super::result::Partition;
use super::rules::PartitionOptions;
use crate::error::Result;
use crate::passes::{cse, eliminate, is_identity};
use crate::store::GraphStore;

pub(crate) fn with_passes(
    store: &GraphStore,
    opts: &PartitionOptions,
    partition: impl FnOnce(&GraphStore) -> Result<Partition>,
) -> Result<Partition> {
    let rep = if opts.cse {
        cse(store)
    } else {
        store.node_ids().collect()
    };
    let mut p = if is_identity(&rep) {
        partition(store)?
    } else {
        partition(&eliminate(store, &rep)?)?
    };
    p.rep = rep;
    Ok(p)
}
