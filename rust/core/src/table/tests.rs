//! Unit and property tests of table ingest: valid tables round-trip, and
//! every single-field corruption is rejected naming the corrupted column.

#![allow(clippy::cast_possible_wrap, clippy::many_single_char_names)]

use proptest::prelude::*;

use super::{Columns, TableView};
use crate::error::Error;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};
use crate::verify::verify;

/// x, w: primals; t: tangent; c: `get_attr`; y = mm(x, w); g = mm(t, w); s = add(y, c).
fn tiny() -> Columns {
    let mut c = Columns::new();
    let mm = c.intern("aten.mm.default");
    let add = c.intern("aten.add.Tensor");
    let x = c.push(0, 0, &[], 32, 0);
    let w = c.push(0, 0, &[], 32, 0);
    let t = c.push(1, 0, &[], 32, 0);
    let k = c.push(3, 1, &[], 4, 0);
    let y = c.push(2, mm, &[x, w], 32, flags::RANDOM);
    let g = c.push(2, mm, &[t, w], 32, 0);
    let s = c.push(2, add, &[y, k], 32, 0);
    c.region[4] = 0;
    c.outputs = vec![s as i32, -1, g as i32];
    c.num_fwd_outputs = 2;
    c
}

fn column_of(c: &Columns) -> (&'static str, Option<u32>) {
    match GraphStore::from_table(&c.view()) {
        Err(Error::Table { column, node, .. }) => (column, node),
        other => panic!("expected a table error, got {other:?}"),
    }
}

#[test]
fn tiny_table_builds_a_verified_store() {
    let s = GraphStore::from_table(&tiny().view()).expect("valid");
    verify(&s).expect("verified");
    assert_eq!(s.len(), 7);
    assert_eq!(s.kind[3], NodeKind::GetAttr);
    assert_eq!(s.args(NodeId(4)), &[NodeId(0), NodeId(1)]);
    assert_eq!(s.users(NodeId(1)), &[NodeId(4), NodeId(5)]);
    assert_eq!(s.outputs, vec![Some(NodeId(6)), None, Some(NodeId(5))]);
    let derived: Vec<bool> = s
        .node_ids()
        .map(|n| s.has_flag(n, flags::TANGENT_DERIVED))
        .collect();
    assert_eq!(derived, [false, false, true, false, false, true, false]);
    assert_eq!(s.op_name(NodeId(6)), "aten.add.Tensor");
    assert_eq!(
        s.const_hash,
        [0, 1, 2, 3, 4, 5, 6],
        "push gives each row its id"
    );
}

#[test]
fn tangent_derived_input_bit_is_ignored() {
    let mut c = tiny();
    c.flags[0] |= flags::TANGENT_DERIVED;
    c.flags[5] &= !flags::TANGENT_DERIVED;
    let s = GraphStore::from_table(&c.view()).expect("valid");
    assert!(!s.has_flag(NodeId(0), flags::TANGENT_DERIVED));
    assert!(s.has_flag(NodeId(5), flags::TANGENT_DERIVED));
}

#[test]
fn round_trip_is_exact() {
    let s = GraphStore::from_table(&tiny().view()).expect("valid");
    let c = s.to_columns();
    let again = GraphStore::from_table(&c.view()).expect("valid");
    assert_eq!(s, again);
    assert_eq!(c, again.to_columns());
}

#[test]
fn empty_table_is_valid() {
    let s = GraphStore::from_table(&Columns::new().view()).expect("valid");
    assert!(s.is_empty());
    verify(&s).expect("verified");
}

#[test]
fn messages_name_column_and_node() {
    let mut c = tiny();
    c.arg_idx[1] = 4; // %4 reads itself
    let e = GraphStore::from_table(&c.view()).expect_err("cycle");
    assert_eq!(
        e.to_string(),
        "malformed node table: column `arg_idx` at node 4: argument 1 is %4, which is not \
         before %4 (a forward reference or a cycle)"
    );
    let mut c = tiny();
    c.kind.push(2);
    assert_eq!(column_of(&c), ("kind", None));
    let mut c = tiny();
    c.op[2] = 2; // a tangent with a call op
    assert_eq!(column_of(&c), ("op", Some(2)));
    let mut c = tiny();
    c.op[5] = 0; // a call named "placeholder"
    assert_eq!(column_of(&c), ("op", Some(5)));
    let mut c = tiny();
    c.kind[4] = 0; // a primal with arguments and a call op
    assert_eq!(column_of(&c), ("op", Some(4)));
    let mut c = tiny();
    c.op_names[2] = "placeholder".into();
    c.kind[4] = 0; // now a placeholder with arguments
    assert_eq!(column_of(&c), ("arg_idx", Some(4)));
}

/// A valid random table: `spec` gives per node (kind selector, op selector,
/// argument picks, nbytes, flags, region).
type NodeSpec = (u8, u8, Vec<u32>, u64, u32, i32);

fn build(spec: &[NodeSpec], outs: &[i32], fwd: usize) -> Columns {
    let mut c = Columns::new();
    let ops =
        ["aten.mm.default", "aten.add.Tensor", "_operator.getitem"].map(|name| c.intern(name));
    for (i, (ksel, osel, picks, nbytes, f, region)) in spec.iter().enumerate() {
        let kind = if i == 0 { ksel % 2 } else { ksel % 4 };
        let (op, args): (u32, Vec<u32>) = match kind {
            0 | 1 => (0, vec![]),
            3 => (1, vec![]),
            _ => (
                ops[*osel as usize % ops.len()],
                picks.iter().map(|p| p % i as u32).collect(),
            ),
        };
        // Any u64 is a valid const_hash: derive one from the other fields.
        let hash = nbytes.rotate_left(17) ^ u64::from(*f);
        c.push_const(kind, op, &args, *nbytes, f & flags::KNOWN_INPUT, hash);
        *c.region.last_mut().expect("pushed") = region.rem_euclid(4) - 1;
    }
    let n = c.len() as i32;
    c.outputs = outs
        .iter()
        .map(|o| if n == 0 { -1 } else { o.rem_euclid(n + 1) - 1 })
        .collect();
    c.num_fwd_outputs = (fwd % (c.outputs.len() + 1)) as i64;
    c
}

fn table() -> impl Strategy<Value = Columns> {
    let node = (
        any::<u8>(),
        any::<u8>(),
        prop::collection::vec(any::<u32>(), 0..4),
        any::<u64>(),
        any::<u32>(),
        any::<i32>(),
    );
    (
        prop::collection::vec(node, 0..40),
        prop::collection::vec(any::<i32>(), 0..6),
        any::<usize>(),
    )
        .prop_map(|(spec, outs, fwd)| build(&spec, &outs, fwd))
}

/// Applies corruption `what` at position `at`; returns the column that must
/// be blamed, or `None` if this corruption does not apply to the table.
#[allow(
    clippy::too_many_lines,
    reason = "one match arm per corruption, each a few lines"
)]
fn corrupt(c: &mut Columns, what: u8, at: usize, val: u32) -> Option<&'static str> {
    let n = c.len();
    let pick = |len: usize| (len > 0).then(|| at % len);
    Some(match what % 18 {
        0 => {
            c.version = i64::from(val).max(3);
            "version"
        }
        1 => {
            c.kind[pick(n)?] = 4 + (val % 252) as u8;
            "kind"
        }
        2 => {
            c.op[pick(n)?] = c.op_names.len() as u32 + val % 1000;
            "op"
        }
        3 => {
            c.arg_ptr[0] = 1 + val % 10;
            "arg_ptr"
        }
        4 => {
            let k = pick(n)?;
            c.arg_ptr[k] = c.arg_ptr[k + 1] + 1;
            "arg_ptr"
        }
        5 => {
            let j = pick(c.arg_idx.len())?;
            let reader = c.arg_ptr.partition_point(|&p| p as usize <= j) - 1;
            c.arg_idx[j] = reader as u32 + val % 5;
            "arg_idx"
        }
        6 => {
            c.flags[pick(n)?] |= 1 << (14 + val % 18);
            "flags"
        }
        7 => {
            c.region[pick(n)?] = -2 - (val % 100) as i32;
            "region"
        }
        8 => {
            let j = pick(c.outputs.len())?;
            c.outputs[j] = if val % 2 == 0 {
                n as i32 + (val % 9) as i32
            } else {
                -2 - (val % 9) as i32
            };
            "outputs"
        }
        9 => {
            c.num_fwd_outputs = if val % 2 == 0 {
                c.outputs.len() as i64 + 1
            } else {
                -1
            };
            "num_fwd_outputs"
        }
        // wrong lengths
        10 => {
            c.kind.push(2);
            "kind"
        }
        11 => {
            if c.op.pop().is_none() {
                c.op.push(0);
            }
            "op"
        }
        12 => {
            c.arg_ptr.push(c.arg_idx.len() as u32);
            "arg_ptr"
        }
        13 => {
            if c.arg_idx.pop().is_none() {
                c.arg_idx.push(0);
            }
            "arg_idx"
        }
        14 => {
            c.nbytes.push(0);
            "nbytes"
        }
        15 => {
            c.flags.pop()?;
            "flags"
        }
        16 => {
            if c.const_hash.pop().is_none() {
                c.const_hash.push(7);
            }
            "const_hash"
        }
        _ => {
            c.region.push(-1);
            "region"
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_tables_round_trip(c in table()) {
        let s = GraphStore::from_table(&c.view()).expect("valid by construction");
        verify(&s).expect("verified");
        let back = s.to_columns();
        let mut expect = c.clone();
        expect.flags = s.flags.clone();
        prop_assert_eq!(&back, &expect);
        prop_assert_eq!(GraphStore::from_table(&back.view()).expect("valid"), s);
    }

    #[test]
    fn single_field_corruptions_are_rejected(
        c in table(), what in any::<u8>(), at in any::<usize>(), val in any::<u32>()
    ) {
        let mut bad = c.clone();
        if let Some(column) = corrupt(&mut bad, what, at, val) {
            match GraphStore::from_table(&bad.view()) {
                Err(Error::Table { column: got, .. }) => prop_assert_eq!(got, column),
                other => prop_assert!(false, "corruption of `{}` gave {:?}", column, other),
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        kind in prop::collection::vec(any::<u8>(), 0..8),
        op in prop::collection::vec(0u32..6, 0..8),
        arg_ptr in prop::collection::vec(0u32..10, 0..9),
        arg_idx in prop::collection::vec(0u32..10, 0..10),
        outputs in prop::collection::vec(-2i32..9, 0..4),
        fwd in -1i64..5,
    ) {
        let names = vec!["placeholder".to_string(), "get_attr".into(), "aten.mul.Tensor".into()];
        let n = kind.len();
        let (nbytes, fl, region) = (vec![1u64; n], vec![0u32; n], vec![-1i32; n]);
        let hashes = vec![0u64; n];
        let view = TableView {
            version: super::FORMAT_VERSION, kind: &kind, op: &op, arg_ptr: &arg_ptr,
            arg_idx: &arg_idx, nbytes: &nbytes, const_hash: &hashes, flags: &fl,
            region: &region, outputs: &outputs,
            num_fwd_outputs: fwd, op_names: &names,
        };
        if let Ok(s) = GraphStore::from_table(&view) {
            verify(&s).expect("an accepted table gives a verified store");
        }
    }
}
