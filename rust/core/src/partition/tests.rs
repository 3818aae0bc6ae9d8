// Tests compare exact flow values and build tiny tables with `as` casts.
#![allow(
    clippy::float_cmp,
    clippy::cast_possible_wrap,
    clippy::many_single_char_names
)]

use proptest::prelude::*;

use super::*;
use crate::error::Error;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore};
use crate::synth::transformer_like;
use crate::table::Columns;

const PRIMAL: u8 = 0;
const TANGENT: u8 = 1;
const CALL: u8 = 2;

fn ids(v: &[NodeId]) -> Vec<u32> {
    v.iter().map(|n| n.0).collect()
}

/// Partitions with both partitioners and checks both results.
fn both(store: &GraphStore) -> (Partition, Partition) {
    let d = partition_default(store, &PartitionOptions::default()).expect("default partition");
    check(store, &d).expect("default partition is valid");
    let m = partition_min_cut(store, &PartitionOptions::default()).expect("min-cut partition");
    check(store, &m).expect("min-cut partition is valid");
    (d, m)
}

/// x -> a = sin(x) -> b = cos(a) (forward output); backward: dx = mul(t, a).
fn sin_cos(extra_flags_a: u32) -> GraphStore {
    sin_cos_x(0, extra_flags_a)
}

fn sin_cos_x(flags_x: u32, extra_flags_a: u32) -> GraphStore {
    let mut c = Columns::new();
    let (sin, cos, mul) = (
        c.intern("aten.sin.default"),
        c.intern("aten.cos.default"),
        c.intern("aten.mul.Tensor"),
    );
    let x = c.push(PRIMAL, 0, &[], 1000, flags_x);
    let t = c.push(TANGENT, 0, &[], 1000, 0);
    let a = c.push(CALL, sin, &[x], 1000, extra_flags_a);
    let b = c.push(CALL, cos, &[a], 1000, 0);
    let dx = c.push(CALL, mul, &[t, a], 1000, 0);
    c.outputs = vec![b as i32, dx as i32];
    c.num_fwd_outputs = 1;
    GraphStore::from_table(&c.view()).unwrap()
}

#[test]
fn min_cut_recomputes_cheap_pointwise() {
    let g = sin_cos(0);
    let (d, m) = both(&g);
    assert_eq!(ids(&d.saved), [2]);
    assert_eq!(d.saved_reason, [SavedReason::ReadByBackward]);
    assert_eq!(ids(&m.saved), [0]);
    assert_eq!(m.saved_reason, [SavedReason::Primal]);
    assert_eq!(ids(&m.recomputed), [2]);
    assert_eq!(m.placement, [3, 2, 3, 1, 2]);
    assert_eq!(m.saved_bytes, 1000);
}

#[test]
fn mutated_primals_are_saved_only_without_an_alternative() {
    // x is overwritten by the function: save sin(x), though it costs more
    // (its cost is scaled by its distance from the backward).
    let (_, m) = both(&sin_cos_x(flags::MUTATED_INPUT, 0));
    assert_eq!(ids(&m.saved), [2]);
    assert!(m.recomputed.is_empty());
    // The backward reads x itself: it must be saved anyway.
    let mut c = Columns::new();
    let (sin, mul) = (c.intern("aten.sin.default"), c.intern("aten.mul.Tensor"));
    let x = c.push(PRIMAL, 0, &[], 1000, flags::MUTATED_INPUT);
    let t = c.push(TANGENT, 0, &[], 1000, 0);
    let a = c.push(CALL, sin, &[x], 1000, 0);
    let dx = c.push(CALL, mul, &[t, x], 1000, 0);
    c.outputs = vec![a as i32, dx as i32];
    c.num_fwd_outputs = 1;
    let g = GraphStore::from_table(&c.view()).unwrap();
    let (_, m) = both(&g);
    assert_eq!(ids(&m.saved), [0]);
    assert_eq!(m.saved_reason, [SavedReason::Primal]);
}

#[test]
fn a_call_flagged_free_to_save_is_saved_over_what_reads_it() {
    // x -> a = mul(x) (a written input's new value, saved as the input: free)
    //   -> s = sin(a); the backward reads cos(a). Unflagged, min-cut saves cos(a)
    // (closest to the backward); flagged, it saves a and computes cos in the backward.
    let build = |flags_a: u32| {
        let mut c = Columns::new();
        let (mul, sin, cos) = (
            c.intern("aten.mul.Tensor"),
            c.intern("aten.sin.default"),
            c.intern("aten.cos.default"),
        );
        let x = c.push(PRIMAL, 0, &[], 1000, flags::MUTATED_INPUT);
        let t = c.push(TANGENT, 0, &[], 1000, 0);
        let a = c.push(CALL, mul, &[x], 1000, flags_a);
        let s = c.push(CALL, sin, &[a], 1000, 0);
        let k = c.push(CALL, cos, &[a], 1000, 0);
        let dx = c.push(CALL, mul, &[t, k], 1000, 0);
        c.outputs = vec![s as i32, a as i32, dx as i32];
        c.num_fwd_outputs = 2;
        GraphStore::from_table(&c.view()).unwrap()
    };
    let (_, m) = both(&build(0));
    assert_eq!(ids(&m.saved), [4]);
    let (_, m) = both(&build(flags::STATIC_INPUT));
    assert_eq!(ids(&m.saved), [2]);
}

#[test]
fn tags_and_random_ops() {
    let (_, m) = both(&sin_cos(flags::MUST_SAVE));
    assert_eq!(
        (ids(&m.saved), m.saved_reason),
        (vec![2], vec![SavedReason::MustSave])
    );
    let (_, m) = both(&sin_cos(flags::RANDOM));
    assert_eq!((ids(&m.saved), m.recomputed.len()), (vec![2], 0));
    // MUST_RECOMPUTE: the default partition recomputes too.
    let (d, m) = both(&sin_cos(flags::MUST_RECOMPUTE));
    assert_eq!((ids(&d.saved), ids(&d.recomputed)), (vec![0], vec![2]));
    assert_eq!((ids(&m.saved), ids(&m.recomputed)), (vec![0], vec![2]));
}

/// Columns holding x, w (primals), t (a tangent), s = size(x) (a `SymInt`) and
/// y = mm(x, w); returns them with those rows.
fn mm_and_size() -> (Columns, [u32; 5]) {
    let mut c = Columns::new();
    let (mm, size) = (c.intern("aten.mm.default"), c.intern("aten.sym_size.int"));
    let x = c.push(PRIMAL, 0, &[], 400, 0);
    let w = c.push(PRIMAL, 0, &[], 400, 0);
    let t = c.push(TANGENT, 0, &[], 4000, 0);
    let s = c.push(CALL, size, &[x], 8, flags::SYMINT);
    let y = c.push(CALL, mm, &[x, w], 4000, 0);
    (c, [x, w, t, s, y])
}

/// [`both`] on `c` with one forward output and one gradient output (the rest `None`).
fn both_with_outputs(mut c: Columns, [fwd, grad]: [u32; 2]) -> (Partition, Partition) {
    c.outputs = vec![fwd as i32, grad as i32, -1];
    c.num_fwd_outputs = 1;
    both(&GraphStore::from_table(&c.view()).unwrap())
}

#[test]
fn compute_intensive_ops_are_saved_and_symints_come_last() {
    let (mut c, [_, _, t, s, y]) = mm_and_size();
    let (relu, tb, view) = (
        c.intern("aten.relu.default"),
        c.intern("aten.threshold_backward.default"),
        c.intern("aten.view.default"),
    );
    let z = c.push(CALL, relu, &[y], 4000, 0);
    let dy = c.push(CALL, tb, &[t, y], 4000, 0);
    let dv = c.push(CALL, view, &[dy, s], 4000, flags::VIEW);
    let (d, m) = both_with_outputs(c, [z, dv]);
    for p in [&d, &m] {
        assert_eq!((ids(&p.saved), p.num_saved_symints), (vec![y, s], 1));
        assert_eq!(p.saved_bytes, 4000);
    }
    assert_eq!(
        m.saved_reason,
        [SavedReason::NeverRecompute, SavedReason::SymbolicSize]
    );
}

#[test]
fn symfloats_are_recomputed_from_the_sizes_they_are_made_of() {
    // f = 1 / size(x) is a SymFloat (SYMINT | NON_TENSOR): both partitioners save the
    // size and recompute f in the backward (torch's default partition saves f itself).
    let (mut c, [_, _, t, s, y]) = mm_and_size();
    let (div, mul) = (c.intern("_operator.truediv"), c.intern("aten.mul.Tensor"));
    let f = c.push(CALL, div, &[s], 0, flags::SYMINT | flags::NON_TENSOR);
    let dy = c.push(CALL, mul, &[t, y, f], 4000, 0);
    let (d, m) = both_with_outputs(c, [y, dy]);
    for p in [&d, &m] {
        assert_eq!((ids(&p.saved), p.num_saved_symints), (vec![y, s], 1));
        assert_eq!(
            p.placement[f as usize], 2,
            "f is computed in the backward only"
        );
    }
}

#[test]
fn errors_are_typed() {
    // A forward output that reads a tangent.
    let mut c = Columns::new();
    let add = c.intern("aten.add.Tensor");
    let x = c.push(PRIMAL, 0, &[], 4, 0);
    let t = c.push(TANGENT, 0, &[], 4, 0);
    let y = c.push(CALL, add, &[x, t], 4, 0);
    c.outputs = vec![y as i32];
    c.num_fwd_outputs = 1;
    let g = GraphStore::from_table(&c.view()).unwrap();
    assert!(matches!(
        partition_default(&g, &PartitionOptions::default()),
        Err(Error::Graph { node: Some(2), .. })
    ));
    assert!(matches!(
        partition_min_cut(&g, &PartitionOptions::default()),
        Err(Error::Graph { .. })
    ));

    // A non-tensor primal the backward reads: neither savable nor recomputable.
    let mut c = Columns::new();
    let mul = c.intern("aten.mul.Tensor");
    let x = c.push(PRIMAL, 0, &[], 0, flags::NON_TENSOR);
    let t = c.push(TANGENT, 0, &[], 4, 0);
    let y = c.push(CALL, mul, &[t, x], 4, 0);
    c.outputs = vec![y as i32];
    c.num_fwd_outputs = 0;
    let g = GraphStore::from_table(&c.view()).unwrap();
    let e = partition_min_cut(&g, &PartitionOptions::default()).unwrap_err();
    assert!(
        matches!(&e, Error::Partition(m) if m.contains("%0 placeholder cannot be recomputed")),
        "{e}"
    );
}

#[test]
fn rule_tables_are_sorted_and_resolve_packets() {
    for t in [
        op_tables::RECOMPUTABLE,
        op_tables::COMPUTE_INTENSIVE,
        op_tables::RANDOM,
        op_tables::VIEW,
        op_tables::FUSE_INTO,
        op_tables::ALWAYS_RECOMPUTABLE,
    ] {
        assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    }
    assert!(OpClass::of("aten.mm.default").has(OpClass::COMPUTE_INTENSIVE));
    assert!(
        OpClass::of("aten._scaled_dot_product_cudnn_attention.default")
            .has(OpClass::COMPUTE_INTENSIVE)
    );
    assert!(OpClass::of("aten.add.Tensor").fusible());
    assert!(OpClass::of("_operator.getitem").has(OpClass::ALWAYS_RECOMPUTABLE));
    assert!(OpClass::of("aten.native_dropout.default").has(OpClass::RANDOM));
    assert!(!OpClass::of("aten._softmax.default").fusible());
    assert_eq!(OpClass::of("placeholder"), OpClass::default());
}

#[test]
fn synth_graphs_partition_validly_and_min_cut_saves_less() {
    for (size, seed) in [(100, 1), (1000, 2), (5000, 3), (20_000, 4)] {
        let g = transformer_like(size, seed);
        assert!(
            g.len() >= size && g.len() < size + 200,
            "{} nodes for {size}",
            g.len()
        );
        crate::verify(&g).expect("synth graphs verify");
        let (d, m) = both(&g);
        assert!(
            m.saved_bytes <= d.saved_bytes,
            "{} > {}",
            m.saved_bytes,
            d.saved_bytes
        );
        assert!(!m.recomputed.is_empty());
        let a = partition_min_cut(&g, &PartitionOptions::aggressive()).unwrap();
        check(&g, &a).unwrap();
        assert_eq!(
            m,
            partition_min_cut(&g, &PartitionOptions::default()).unwrap(),
            "deterministic"
        );
    }
}

/// A random joint-graph-shaped table: primals, forward calls, tangents,
/// backward calls that read tangent-derived values, random flags and tags.
#[allow(
    clippy::too_many_lines,
    reason = "one proptest strategy: the shape of a joint graph, read top to bottom"
)]
fn arb_joint() -> impl Strategy<Value = GraphStore> {
    let ops = [
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
    ];
    // (flag, log2 of 1 / its probability)
    let flag_bits = [
        (flags::RANDOM, 3),
        (flags::IMPURE, 4),
        (flags::COMPUTE_INTENSIVE, 3),
        (flags::SYMINT, 3),
        (flags::MUST_SAVE, 3),
        (flags::MUST_RECOMPUTE, 2),
        (flags::NON_TENSOR, 6),
        (flags::MULTI_OUTPUT, 6),
    ];
    let node = (
        0..ops.len(),
        prop::collection::vec(any::<u32>(), 0..4),
        0u64..5000,
        any::<u64>(),
        -1i32..3,
    );
    (
        1usize..5,
        prop::collection::vec(node.clone(), 0..30),
        1usize..3,
        prop::collection::vec(node, 0..30),
        any::<u64>(),
    )
        .prop_map(move |(np, fwd, nt, bwd, out_seed)| {
            let mut c = Columns::new();
            let op_ids: Vec<u32> = ops.iter().map(|o| c.intern(o)).collect();
            // Every other primal is mutated in place.
            let mut fw_nodes: Vec<u32> = (0..np)
                .map(|k| c.push(PRIMAL, 0, &[], 64, (k as u32 % 2) * flags::MUTATED_INPUT))
                .collect();
            let push = |c: &mut Columns,
                        (op, args, nbytes, fbits, region): (usize, Vec<u32>, u64, u64, i32),
                        pool: &[u32],
                        must: Option<u32>| {
                let mut a: Vec<u32> = args
                    .iter()
                    .map(|r| pool[*r as usize % pool.len()])
                    .collect();
                a.extend(must);
                let f = flag_bits
                    .iter()
                    .enumerate()
                    .filter(|(k, (_, w))| fbits >> (6 * k) & ((1 << w) - 1) == 0)
                    .fold(0, |f, (_, (b, _))| f | b);
                let id = c.push_const(CALL, op_ids[op], &a, nbytes, f, fbits >> 61);
                c.region[id as usize] = region;
                id
            };
            for n in fwd {
                let id = push(&mut c, n, &fw_nodes.clone(), None);
                fw_nodes.push(id);
            }
            let mut td: Vec<u32> = (0..nt).map(|_| c.push(TANGENT, 0, &[], 64, 0)).collect();
            for (k, n) in bwd.into_iter().enumerate() {
                let must = td[k % td.len()];
                let id = push(&mut c, n, &fw_nodes, Some(must));
                td.push(id);
            }
            let all = c.len() as u64;
            let pick = |k: u64| ((out_seed >> (k % 60)).wrapping_mul(k + 7) % all) as u32;
            let nf = 1 + (out_seed % 3) as usize;
            c.outputs = (0..nf)
                .map(|k| fw_nodes[(pick(k as u64) as usize) % fw_nodes.len()] as i32)
                .collect();
            c.outputs.extend((0..np as u64).map(|k| {
                if out_seed >> k & 1 == 1 {
                    -1
                } else {
                    pick(k + 9) as i32
                }
            }));
            c.num_fwd_outputs = nf as i64;
            GraphStore::from_table(&c.view()).expect("generated table is valid")
        })
}

fn arb_options() -> impl Strategy<Value = PartitionOptions> {
    (any::<[bool; 7]>(), 1u32..200, 0u32..8).prop_map(|(b, long_chain, max_dist)| {
        PartitionOptions {
            ban_if_not_in_allowlist: b[0],
            ban_if_reduction: b[1],
            ban_if_materialized_backward: b[2],
            ban_if_used_far_apart: b[3],
            ban_if_long_fusible_chains: b[4],
            long_chain,
            max_dist_from_bw: if b[5] { 1000 } else { max_dist },
            recompute_views: b[5],
            cse: b[6],
            cost: CostModel::default(),
        }
    })
}

/// Every partition either is valid or is a typed error; tagged nodes the
/// backward reads are recomputed (`MUST_RECOMPUTE`) or saved (`MUST_SAVE`).
fn check_all(g: &GraphStore, opts: &PartitionOptions) -> Result<(), TestCaseError> {
    let rules = OpRules::new(g);
    let d = partition_default(g, opts).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(check(g, &d), Ok(()));
    match partition_min_cut(g, opts) {
        Ok(m) => {
            prop_assert_eq!(check(g, &m), Ok(()));
            for v in g.node_ids() {
                if m.in_backward(v) && rules.must_recompute(v) {
                    prop_assert!(!m.saved.contains(&v), "{v} must be recomputed");
                }
            }
        }
        Err(e) => prop_assert!(matches!(e, Error::Partition(_)), "{e}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn random_joint_graphs(g in arb_joint(), opts in arb_options()) {
        check_all(&g, &opts)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_synth_graphs(size in 50usize..3000, seed in any::<u64>(), opts in arb_options()) {
        let g = transformer_like(size, seed);
        check_all(&g, &opts)?;
        prop_assert!(partition_min_cut(&g, &opts).is_ok());
    }
}

/// x -> a = sin(x) (forward output); backward: c = cos(x) traced there
/// (`bw_flags`), dx = mul(t, c).
fn sin_then_cos_in_backward(bw_flags: u32) -> GraphStore {
    let mut c = Columns::new();
    let (sin, cos, mul) = (
        c.intern("aten.sin.default"),
        c.intern("aten.cos.default"),
        c.intern("aten.mul.Tensor"),
    );
    let x = c.push(PRIMAL, 0, &[], 1000, 0);
    let t = c.push(TANGENT, 0, &[], 1000, 0);
    let a = c.push(CALL, sin, &[x], 1000, 0);
    let cx = c.push(CALL, cos, &[x], 1000, bw_flags);
    let dx = c.push(CALL, mul, &[t, cx], 1000, bw_flags);
    c.outputs = vec![a as i32, dx as i32];
    c.num_fwd_outputs = 1;
    GraphStore::from_table(&c.view()).unwrap()
}

#[test]
fn default_partition_computes_what_the_backward_traced_there() {
    // Traced by the backward: cos(x) runs there and x is saved, as torch's
    // default partition does.
    let (d, _) = both(&sin_then_cos_in_backward(flags::BACKWARD_REGION));
    assert_eq!(ids(&d.saved), [0]);
    assert_eq!(d.saved_reason, [SavedReason::Primal]);
    assert_eq!(d.placement, [3, 2, 1, 2, 2]);
    assert!(d.recomputed.is_empty());
    // Without the tag every value the backward reads is computed in the forward.
    let (d, _) = both(&sin_then_cos_in_backward(0));
    assert_eq!(ids(&d.saved), [3]);
    assert_eq!(d.placement, [1, 2, 1, 3, 2]);
}
