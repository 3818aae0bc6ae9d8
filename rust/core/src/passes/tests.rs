//! Tests of common-subexpression elimination: what merges, what never does,
//! and (proptest) that the deduplicated store verifies, partitions validly,
//! and merges only nodes that compute the same value.

#![allow(clippy::cast_possible_wrap, clippy::many_single_char_names)]

use proptest::prelude::*;

use super::cse::{cse, eliminate, is_identity};
use crate::ids::NodeId;
use crate::partition::{check, partition_default, partition_min_cut, PartitionOptions};
use crate::store::{flags, GraphStore, NodeKind};
use crate::synth::transformer_like;
use crate::table::Columns;
use crate::verify::verify;

const PRIMAL: u8 = 0;
const TANGENT: u8 = 1;
const CALL: u8 = 2;

fn ids(rep: &[NodeId]) -> Vec<u32> {
    rep.iter().map(|n| n.0).collect()
}

/// Two transformer blocks' causal masks: each block builds
/// `ones -> tril -> bitwise_not` and reads it with `masked_fill`; the
/// backward reads both masks. Returns the store.
fn two_masks() -> GraphStore {
    let mut c = Columns::new();
    let (ones, tril, not, fill, mul) = (
        c.intern("aten.ones.default"),
        c.intern("aten.tril.default"),
        c.intern("aten.bitwise_not.default"),
        c.intern("aten.masked_fill.Scalar"),
        c.intern("aten.mul.Tensor"),
    );
    let x = c.push(PRIMAL, 0, &[], 4096, 0); // 0
    let t = c.push(TANGENT, 0, &[], 4096, 0); // 1
    let mut h = x;
    let mut masks = Vec::new();
    for _ in 0..2 {
        let o = c.push_const(CALL, ones, &[], 256, 0, 11); // 2, 6
        let l = c.push_const(CALL, tril, &[o], 256, 0, 12); // 3, 7
        let m = c.push_const(CALL, not, &[l], 256, 0, 13); // 4, 8
        h = c.push_const(CALL, fill, &[h, m], 4096, 0, 14); // 5, 9
        masks.push(m);
    }
    let g1 = c.push_const(CALL, mul, &[t, masks[1]], 4096, 0, 15); // 10
    let g0 = c.push_const(CALL, mul, &[g1, masks[0]], 4096, 0, 15); // 11
    c.outputs = vec![h as i32, g0 as i32];
    c.num_fwd_outputs = 1;
    GraphStore::from_table(&c.view()).expect("valid")
}

#[test]
fn the_duplicated_mask_chain_merges() {
    let g = two_masks();
    let rep = cse(&g);
    assert_eq!(ids(&rep), [0, 1, 2, 3, 4, 5, 2, 3, 4, 9, 10, 11]);
    let d = eliminate(&g, &rep).expect("valid rep");
    verify(&d).expect("deduplicated store verifies");
    assert_eq!(d.args(NodeId(9)), &[NodeId(5), NodeId(4)]);
    assert_eq!(d.args(NodeId(10)), &[NodeId(1), NodeId(4)]);
    for dead in [6, 7, 8] {
        assert!(d.args(NodeId(dead)).is_empty() && d.users(NodeId(dead)).is_empty());
    }
    for opts in [PartitionOptions::default(), PartitionOptions::aggressive()] {
        let m = partition_min_cut(&g, &opts).expect("min-cut");
        check(&g, &m).expect("valid");
        assert_eq!(m.rep, rep);
        assert_eq!(&m.placement[6..9], &[0, 0, 0]);
        let d = partition_default(&g, &opts).expect("default");
        check(&g, &d).expect("valid");
        assert_eq!(&d.placement[6..9], &[0, 0, 0]);
    }
    // Without CSE: the identity map, and both masks in the graphs.
    let off = PartitionOptions {
        cse: false,
        ..PartitionOptions::default()
    };
    let m = partition_min_cut(&g, &off).expect("min-cut");
    check(&g, &m).expect("valid");
    assert!(is_identity(&m.rep));
    assert_ne!(m.placement[8], 0);
}

#[test]
fn impure_random_and_different_constants_never_merge() {
    let mut c = Columns::new();
    let (sum, rand, empty, copy, add) = (
        c.intern("aten.sum.dim_IntList"),
        c.intern("aten.rand_like.default"),
        c.intern("aten.empty.memory_format"),
        c.intern("aten.copy_.default"),
        c.intern("aten.add.Tensor"),
    );
    let x = c.push(PRIMAL, 0, &[], 64, 0); // 0
    let a = c.push_const(CALL, sum, &[x], 8, 0, 1); // 1
    let b = c.push_const(CALL, sum, &[x], 8, 0, 2); // 2: sum(x, [1]) vs sum(x, [0])
    let r1 = c.push_const(CALL, rand, &[x], 64, 0, 3); // 3
    let r2 = c.push_const(CALL, rand, &[x], 64, 0, 3); // 4: random by op table
    let f1 = c.push_const(CALL, add, &[x, x], 64, flags::RANDOM, 4); // 5
    let f2 = c.push_const(CALL, add, &[x, x], 64, flags::RANDOM, 4); // 6: random by flag
    let e1 = c.push_const(CALL, empty, &[], 64, 0, 5); // 7
    let e2 = c.push_const(CALL, empty, &[], 64, 0, 5); // 8: nondeterministic
    let p1 = c.push_const(CALL, add, &[x, x], 64, 0, 6); // 9
    let _ = c.push_const(CALL, copy, &[x, p1], 64, flags::IMPURE, 7); // 10
    let p2 = c.push_const(CALL, add, &[x, x], 64, 0, 6); // 11: after a mutation
    let p3 = c.push_const(CALL, add, &[x, x], 64, 0, 6); // 12: merges with 11
    let w1 = c.push_const(CALL, add, &[x, x], 32, 0, 6); // 13: other nbytes
    let all = [a, b, r1, r2, f1, f2, e1, e2, p2, p3, w1];
    c.outputs = all.iter().map(|&v| v as i32).collect();
    c.num_fwd_outputs = all.len() as i64;
    let g = GraphStore::from_table(&c.view()).expect("valid");
    // Every node is an output here, so no node may merge at all...
    assert!(is_identity(&cse(&g)));
    // ...and with one output reading them all, only 12 -> 11 does.
    let mut c2 = c.clone();
    let cat = c2.intern("aten.cat.default");
    let out = c2.push(CALL, cat, &all, 1024, 0);
    c2.outputs = vec![out as i32];
    c2.num_fwd_outputs = 1;
    let g = GraphStore::from_table(&c2.view()).expect("valid");
    let rep = cse(&g);
    let merged: Vec<(u32, u32)> = rep
        .iter()
        .enumerate()
        .filter(|(i, r)| r.index() != *i)
        .map(|(i, r)| (i as u32, r.0))
        .collect();
    assert_eq!(merged, [(p3, p2)]);
}

#[test]
fn values_sharing_an_output_storage_are_left_alone() {
    let mut c = Columns::new();
    let (clone, view, neg) = (
        c.intern("aten.clone.default"),
        c.intern("aten.view.default"),
        c.intern("aten.neg.default"),
    );
    let x = c.push(PRIMAL, 0, &[], 64, 0);
    let a = c.push_const(CALL, clone, &[x], 64, 0, 1); // 1: output
    let b = c.push_const(CALL, clone, &[x], 64, 0, 1); // 2: its view is an output
    let bv = c.push_const(CALL, view, &[b], 64, flags::VIEW, 2); // 3
    let n1 = c.push_const(CALL, neg, &[x], 64, 0, 3); // 4
    let n2 = c.push_const(CALL, neg, &[x], 64, 0, 3); // 5: merges into 4
    let s = c.push_const(CALL, clone, &[n2], 64, 0, 4); // 6
    c.outputs = vec![a as i32, bv as i32, s as i32, n1 as i32];
    c.num_fwd_outputs = 4;
    let g = GraphStore::from_table(&c.view()).expect("valid");
    // n1 is an output: n2 may not merge into it either.
    assert!(is_identity(&cse(&g)));
    c.outputs.pop();
    c.num_fwd_outputs = 3;
    let g = GraphStore::from_table(&c.view()).expect("valid");
    assert_eq!(ids(&cse(&g)), [0, 1, 2, 3, 4, 4, 6]);
}

#[test]
fn tuples_merge_with_their_getitems_and_outputs_follow() {
    let mut c = Columns::new();
    let (ln, get, mul) = (
        c.intern("aten.native_layer_norm.default"),
        c.intern("_operator.getitem"),
        c.intern("aten.mul.Tensor"),
    );
    let x = c.push(PRIMAL, 0, &[], 64, 0);
    let t = c.push(TANGENT, 0, &[], 64, 0);
    let mut outs = Vec::new();
    for _ in 0..2 {
        let tup = c.push_const(CALL, ln, &[x], 96, flags::MULTI_OUTPUT, 1);
        let y = c.push_const(CALL, get, &[tup], 64, 0, 2);
        let r = c.push_const(CALL, get, &[tup], 8, 0, 3);
        outs.push((y, r));
    }
    let g = c.push_const(CALL, mul, &[t, outs[1].1], 64, 0, 4);
    c.outputs = vec![outs[0].0 as i32, g as i32];
    c.num_fwd_outputs = 1;
    let s = GraphStore::from_table(&c.view()).expect("valid");
    let rep = cse(&s);
    // The first block's values share the output's storage (getitem aliases
    // its tuple): nothing of it may merge; the second block stays too.
    assert!(is_identity(&rep));
    c.outputs[0] = -1;
    let s = GraphStore::from_table(&c.view()).expect("valid");
    let rep = cse(&s);
    assert_eq!(ids(&rep), [0, 1, 2, 3, 4, 2, 3, 4, 8]);
    let d = eliminate(&s, &rep).expect("valid rep");
    verify(&d).expect("verifies");
    assert_eq!(d.args(NodeId(8)), &[NodeId(1), NodeId(4)]);
}

#[test]
fn eliminate_rejects_bad_maps() {
    let g = two_masks();
    let n = g.len() as u32;
    let mut rep: Vec<NodeId> = (0..n).map(NodeId).collect();
    assert!(eliminate(&g, &rep[1..]).is_err());
    rep[3] = NodeId(4);
    assert!(
        eliminate(&g, &rep).is_err(),
        "representative after the node"
    );
    let mut rep: Vec<NodeId> = (0..n).map(NodeId).collect();
    rep[1] = NodeId(0);
    assert!(eliminate(&g, &rep).is_err(), "a tangent merged");
    let mut rep = cse(&g);
    rep[8] = NodeId(7);
    assert!(eliminate(&g, &rep).is_err(), "a merged representative");
    // A map that eliminate accepts but that merges different values.
    let mut rep = cse(&g);
    rep[9] = NodeId(5);
    let mut p = partition_min_cut(&g, &PartitionOptions::default()).expect("min-cut");
    p.rep = rep;
    p.placement[9] = 0;
    assert!(check(&g, &p).is_err());
}

/// A random joint graph with few distinct ops and `const_hash`es, so that
/// duplicates (and near-duplicates) are common: a third of the nodes copy an
/// earlier node's row, and a copy's readers may mirror the original's.
#[allow(
    clippy::too_many_lines,
    reason = "one proptest strategy: the shape of a joint graph, read top to bottom"
)]
fn arb_dup_joint() -> impl Strategy<Value = GraphStore> {
    let ops = [
        "aten.add.Tensor",
        "aten.mul.Tensor",
        "aten.ones.default",
        "aten.rand_like.default",
        "aten.view.default",
        "_operator.getitem",
        "aten.mm.default",
    ];
    // (op, argument picks, const_hash, flag selector, size, copy selector)
    let node = (
        0..ops.len(),
        prop::collection::vec(any::<u32>(), 0..3),
        0u64..3,
        0u32..16,
        0u64..2,
        any::<u32>(),
    );
    (
        1usize..4,
        prop::collection::vec(node.clone(), 1..40),
        prop::collection::vec(node, 0..30),
        any::<u64>(),
    )
        .prop_map(move |(np, fwd, bwd, seed)| {
            let mut c = Columns::new();
            let op_ids: Vec<u32> = ops.iter().map(|o| c.intern(o)).collect();
            let bits = [flags::IMPURE, flags::VIEW, flags::MUST_SAVE, flags::RANDOM];
            let mut pool: Vec<u32> = (0..np).map(|_| c.push(PRIMAL, 0, &[], 64, 0)).collect();
            let t = c.push(TANGENT, 0, &[], 64, 0);
            let mut rows: Vec<(u32, Vec<u32>, u64, u32, u64)> = Vec::new();
            let mut add = |c: &mut Columns,
                           (op, picks, hash, f, size, copy): NodeSpec,
                           pool: &[u32],
                           extra: Option<u32>| {
                let row = if copy % 3 == 0 && !rows.is_empty() && extra.is_none() {
                    rows[copy as usize / 3 % rows.len()].clone()
                } else {
                    let mut args: Vec<u32> = picks
                        .iter()
                        .map(|p| pool[*p as usize % pool.len()])
                        .collect();
                    args.extend(extra);
                    // Rare flags: each of the 4 bits with probability 1/16.
                    let fl = bits
                        .iter()
                        .enumerate()
                        .filter(|(k, _)| f == *k as u32)
                        .fold(0, |acc, (_, b)| acc | b);
                    (op_ids[op], args, hash, fl, 64 + size)
                };
                rows.push(row.clone());
                let (op, args, hash, fl, nbytes) = row;
                c.push_const(CALL, op, &args, nbytes, fl, hash)
            };
            for n in fwd {
                let id = add(&mut c, n, &pool, None);
                pool.push(id);
            }
            let fw = pool.clone();
            let mut td = vec![t];
            for (k, n) in bwd.into_iter().enumerate() {
                let id = add(&mut c, n, &fw, Some(td[k % td.len()]));
                td.push(id);
            }
            let pick = |k: u64, from: &[u32]| {
                from[((seed >> (k % 50)) as usize + k as usize) % from.len()]
            };
            c.outputs = vec![pick(1, &fw[np..]) as i32];
            c.outputs
                .extend((0..np as u64).map(|k| pick(k + 3, &td) as i32));
            c.num_fwd_outputs = 1;
            GraphStore::from_table(&c.view()).expect("generated table is valid")
        })
}

type NodeSpec = (usize, Vec<u32>, u64, u32, u64, u32);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn cse_preserves_values_and_partitions_stay_valid(g in arb_dup_joint()) {
        let rep = cse(&g);
        for v in g.node_ids() {
            let r = rep[v.index()];
            prop_assert!(r <= v && rep[r.index()] == r);
            if r != v {
                let (i, j) = (r.index(), v.index());
                prop_assert_eq!(g.kind[j], NodeKind::Call);
                prop_assert_eq!(g.op[i], g.op[j]);
                prop_assert_eq!(g.const_hash[i], g.const_hash[j]);
                prop_assert_eq!(g.nbytes[i], g.nbytes[j]);
                prop_assert!(!g.has_flag(v, flags::IMPURE | flags::RANDOM));
                prop_assert!(g.op_name(v) != "aten.rand_like.default");
                let (ra, va): (Vec<NodeId>, Vec<NodeId>) = (
                    g.args(r).iter().map(|a| rep[a.index()]).collect(),
                    g.args(v).iter().map(|a| rep[a.index()]).collect(),
                );
                prop_assert_eq!(ra, va);
                prop_assert!(g.outputs.iter().all(|o| *o != Some(v) && *o != Some(r)));
            }
        }
        let d = eliminate(&g, &rep).expect("cse gives a valid map");
        prop_assert_eq!(verify(&d), Ok(()));
        for v in g.node_ids() {
            if rep[v.index()] != v {
                prop_assert!(d.args(v).is_empty() && d.users(v).is_empty());
            }
        }
        let dp = partition_default(&g, &PartitionOptions::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(check(&g, &dp), Ok(()));
        if let Ok(m) = partition_min_cut(&g, &PartitionOptions::default()) {
            prop_assert_eq!(check(&g, &m), Ok(()));
            prop_assert_eq!(&m.rep, &rep);
            let off = PartitionOptions { cse: false, ..PartitionOptions::default() };
            if let Ok(m0) = partition_min_cut(&g, &off) {
                prop_assert_eq!(check(&g, &m0), Ok(()));
            }
        }
    }

    #[test]
    fn cse_on_synth_graphs_is_valid(size in 50usize..2000, seed in any::<u64>()) {
        let g = transformer_like(size, seed);
        let rep = cse(&g);
        let d = eliminate(&g, &rep).expect("valid");
        prop_assert_eq!(verify(&d), Ok(()));
        let m = partition_min_cut(&g, &PartitionOptions::default())
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(check(&g, &m), Ok(()));
    }
}
