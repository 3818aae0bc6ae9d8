//! Shared pieces of the fuzz targets: the op vocabulary, options from bytes,
//! and [`exercise`], the property every decoded store must satisfy.

use aotgrad_core::partition::{check, partition_default, partition_min_cut, PartitionOptions};
use aotgrad_core::{verify, Error, GraphStore};
use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// Op names the rule tables know (plus the two reserved names, ids 0 and 1).
pub const OPS: [&str; 16] = [
    "placeholder",
    "get_attr",
    "aten.mm.default",
    "aten.add.Tensor",
    "aten.mul.Tensor",
    "aten.sum.dim_IntList",
    "aten.view.default",
    "aten._softmax.default",
    "aten.native_dropout.default",
    "_operator.getitem",
    "aten.cat.default",
    "aten.relu.default",
    "aten.t.default",
    "aten.zeros.default",
    "aten.copy_.default",
    "aten.sym_size.int",
];

/// Partition options drawn from the input (every switch, small thresholds).
pub fn options(u: &mut Unstructured<'_>) -> Result<PartitionOptions> {
    let b: [bool; 8] = u.arbitrary()?;
    if !b[7] {
        return Ok(PartitionOptions::default());
    }
    Ok(PartitionOptions {
        ban_if_not_in_allowlist: b[0],
        ban_if_reduction: b[1],
        ban_if_materialized_backward: b[2],
        ban_if_used_far_apart: b[3],
        ban_if_long_fusible_chains: b[4],
        long_chain: u.int_in_range(0..=200)?,
        max_dist_from_bw: if b[5] { 1000 } else { u.int_in_range(0..=8)? },
        recompute_views: b[5],
        cse: b[6],
    })
}

/// The property: a decoded store verifies and round-trips; each partitioner
/// returns either a typed error or a partition that passes
/// [`check`], the same partition on a second run.
pub fn exercise(store: &GraphStore, opts: &PartitionOptions) {
    verify(store).expect("a decoded store verifies");
    let back = GraphStore::from_table(&store.to_columns().view()).expect("round trip decodes");
    assert_eq!(&back, store, "round trip");
    for (name, part) in [
        ("default", partition_default as fn(&_, &_) -> _),
        ("min_cut", partition_min_cut),
    ] {
        match part(store, opts) {
            Ok(p) => {
                if let Err(e) = check(store, &p) {
                    panic!("{name}: invalid partition: {e}");
                }
                let again = part(store, opts).expect("second run succeeds");
                assert_eq!(p, again, "{name}: not deterministic");
            }
            Err(Error::Graph { .. } | Error::Partition(_)) => {}
            Err(e) => panic!("{name}: unexpected error kind: {e}"),
        }
    }
}
