// Tests compare exact flow values and build tiny tables with `as` casts.
#![allow(
    clippy::float_cmp,
    clippy::cast_possible_wrap,
    clippy::many_single_char_names
)]

use proptest::prelude::*;

use super::*;
use crate::error::Error;

/// Relative equality to 1e-9 (exact for zeros and infinities).
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn net(n: usize, edges: &[(u32, u32, f64)], s: u32, t: u32) -> FlowNetwork {
    let src: Vec<u32> = edges.iter().map(|e| e.0).collect();
    let dst: Vec<u32> = edges.iter().map(|e| e.1).collect();
    let cap: Vec<f64> = edges.iter().map(|e| e.2).collect();
    FlowNetwork::from_edges(n, &src, &dst, &cap, s, t).expect("valid network")
}

fn flow_err(r: Result<FlowNetwork, Error>) -> String {
    match r {
        Err(Error::Flow(m)) => m,
        other => panic!("expected a flow error, got {other:?}"),
    }
}

#[test]
fn clrs_example() {
    let g = net(
        6,
        &[
            (0, 1, 16.0),
            (0, 2, 13.0),
            (1, 2, 10.0),
            (1, 3, 12.0),
            (2, 1, 4.0),
            (2, 4, 14.0),
            (3, 2, 9.0),
            (3, 5, 20.0),
            (4, 3, 7.0),
            (4, 5, 4.0),
        ],
        0,
        5,
    );
    let cut = min_cut(&g).unwrap();
    assert_eq!(cut.value, 23.0);
    assert_eq!(dinic(&g).unwrap().value, 23.0);
    assert_eq!(petgraph_max_flow(&g).unwrap(), 23.0);
    assert_eq!(cut.source_side, [true, true, true, false, true, false]);
}

#[test]
fn infinite_edges_are_never_cut() {
    // 0 -inf-> 1 -3-> 3, 0 -2-> 2 -inf-> 3, 1 -inf-> 2
    let g = net(
        4,
        &[
            (0, 1, f64::INFINITY),
            (1, 3, 3.0),
            (0, 2, 2.0),
            (2, 3, f64::INFINITY),
            (1, 2, f64::INFINITY),
        ],
        0,
        3,
    );
    // every cut separating 0 from 3 without an infinite edge needs... 1 and 2 on
    // the source side (0->1 inf, 1->2 inf) and then 2->3 inf crosses: unbounded.
    let e = dinic(&g).unwrap_err();
    assert!(
        matches!(e, Error::Flow(ref m) if m.contains("unbounded") && m.contains("0 -> 1 -> 2 -> 3")),
        "{e}"
    );
    assert!(petgraph_max_flow(&g).is_err());

    let g = net(
        4,
        &[
            (0, 1, f64::INFINITY),
            (1, 3, 3.0),
            (0, 2, 2.0),
            (2, 3, f64::INFINITY),
        ],
        0,
        3,
    );
    let cut = min_cut(&g).unwrap();
    assert_eq!(cut.value, 5.0);
    assert_eq!(cut.source_side, [true, true, false, false]);
}

#[test]
fn disconnected_and_empty() {
    let g = net(3, &[(0, 1, 5.0)], 0, 2);
    let cut = min_cut(&g).unwrap();
    assert_eq!(cut.value, 0.0);
    assert_eq!(cut.source_side, [true, true, false]);
    let g = net(2, &[], 1, 0);
    assert_eq!(min_cut(&g).unwrap().source_side, [false, true]);
}

#[test]
fn validation_names_the_edge() {
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64, 1],
        &[1i64],
        &[1.0, 1.0],
        0,
        2,
    ));
    assert!(m.contains("differ in length"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64, 1],
        &[1i64, 7],
        &[1.0, 1.0],
        0,
        2,
    ));
    assert!(m.contains("edge 1: dst is 7"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64, -1],
        &[1i64, 2],
        &[1.0, 1.0],
        0,
        2,
    ));
    assert!(m.contains("edge 1: src is -1"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64, 1],
        &[1i64, 2],
        &[1.0, -2.0],
        0,
        2,
    ));
    assert!(m.contains("edge 1 (1 -> 2): capacity -2"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64],
        &[1i64],
        &[f64::NAN],
        0,
        2,
    ));
    assert!(m.contains("edge 0 (0 -> 1): capacity NaN"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(3, &[0i64], &[1i64], &[1.0], 2, 2));
    assert!(m.contains("source and sink are the same node 2"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(3, &[0i64], &[1i64], &[1.0], 0, 3));
    assert!(m.contains("sink is 3"), "{m}");
    let m = flow_err(FlowNetwork::from_edges(
        3,
        &[0i64, 1],
        &[1i64, 2],
        &[f64::MAX, f64::MAX],
        0,
        2,
    ));
    assert!(m.contains("overflows"), "{m}");
}

/// A random network: `n` nodes, edges with capacities that are zero, small
/// integers, arbitrary reals, or infinite.
fn arb_network() -> impl Strategy<Value = (usize, Vec<(u32, u32, f64)>, u32, u32)> {
    (2usize..40).prop_flat_map(|n| {
        let cap = prop_oneof![
            1 => Just(0.0),
            4 => (1u32..20).prop_map(f64::from),
            4 => 0.0f64..1e6,
            1 => Just(f64::INFINITY),
        ];
        let edge = (0..n as u32, 0..n as u32, cap);
        (
            Just(n),
            prop::collection::vec(edge, 0..(4 * n)),
            0..n as u32,
            0..n as u32,
        )
            .prop_filter("source != sink", |(_, _, s, t)| s != t)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// The fast solver agrees with petgraph, and its cuts are minimum cuts:
    /// their capacity equals the flow value (weak duality makes both optimal).
    #[test]
    fn dinic_matches_petgraph((n, edges, s, t) in arb_network()) {
        let g = net(n, &edges, s, t);
        match (dinic(&g), petgraph_max_flow(&g)) {
            (Ok(fast), Ok(oracle)) => {
                prop_assert!(close(fast.value, oracle), "dinic {} petgraph {}", fast.value, oracle);
                let cut = cut::cut_of_flow(&g, &fast);
                prop_assert!(close(cut.value, fast.value), "cut {} flow {}", cut.value, fast.value);
                prop_assert!(cut.source_side[s as usize] && !cut.source_side[t as usize]);
                prop_assert!(fast.residual.iter().all(|&r| r >= 0.0));
                // Labelling from the source gives the same value and cut.
                let other = dinic_with(&g, Levels::FromSource).unwrap();
                prop_assert!(close(other.value, fast.value), "from source {} from sink {}", other.value, fast.value);
                prop_assert_eq!(&cut::cut_of_flow(&g, &other).source_side, &cut.source_side);
                // The largest source side is a minimum cut too, and contains the smallest.
                let big = max_source_side(&g, &fast);
                prop_assert!(close(g.cut_value(&big), fast.value), "max side {} flow {}", g.cut_value(&big), fast.value);
                prop_assert!(big[s as usize] && !big[t as usize]);
                prop_assert!(cut.source_side.iter().zip(&big).all(|(&a, &b)| !a || b));
            }
            (Err(_), Err(_)) => prop_assert!(g.infinite_path().is_some()),
            (a, b) => prop_assert!(false, "disagree: {:?} vs {:?}", a.map(|f| f.value), b),
        }
    }
}
