//! Max-flow benchmarks: the fast solver (`flow::dinic`, levels from the sink;
//! `dinic_fwd`, levels from the source, as the partitioner runs it) against
//! the oracle (`petgraph::algo::dinics`) on the min-cut networks of synthetic
//! joint graphs and on random sparse networks.
//!
//! `cargo bench -p aotgrad-bench --bench flow`; a summary table with the
//! speedups follows criterion's report. petgraph is only run up to the size
//! where it still finishes in seconds.

use std::time::Duration;

use aotgrad_bench::{human, Summary};
use aotgrad_core::flow::{dinic_with, petgraph_max_flow, FlowNetwork, Levels};
use aotgrad_core::partition::{min_cut_network, PartitionOptions};
use aotgrad_core::synth::transformer_like;
use criterion::{BenchmarkId, Criterion};

/// A random sparse network: `n` nodes, `4n` edges with capacities in
/// `1..=1000`, sources and sinks spread over the graph (node 0 and `n - 1`
/// as terminals).
fn random_network(n: usize, seed: u64) -> FlowNetwork {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let e = 4 * n;
    let (mut src, mut dst, mut cap) = (
        Vec::with_capacity(e),
        Vec::with_capacity(e),
        Vec::with_capacity(e),
    );
    for _ in 0..e {
        src.push((next() % n as u64) as u32);
        dst.push((next() % n as u64) as u32);
        cap.push((next() % 1000 + 1) as f64);
    }
    FlowNetwork::from_edges(n, &src, &dst, &cap, 0, n as u32 - 1).expect("valid network")
}

fn bench_pair(
    c: &mut Criterion,
    summary: &Summary,
    group: &str,
    name: &str,
    net: &FlowNetwork,
    oracle: bool,
) {
    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(2));
    for (label, levels) in [
        ("dinic", Levels::FromSink),
        ("dinic_fwd", Levels::FromSource),
    ] {
        let id = format!("{group}/{label}/{name}");
        g.bench_function(BenchmarkId::new(label, name), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || dinic_with(net, levels)));
        });
    }
    if oracle {
        let id = format!("{group}/petgraph/{name}");
        g.bench_function(BenchmarkId::new("petgraph", name), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || petgraph_max_flow(net)));
        });
    }
    g.finish();
}

fn main() {
    let summary = Summary::new();
    let mut c = Criterion::default().configure_from_args();
    let mut pairs = Vec::new();
    for (size, oracle) in [
        (1_000, true),
        (10_000, true),
        (100_000, false),
        (1_000_000, false),
    ] {
        let store = transformer_like(size, 7);
        let net = min_cut_network(&store, &PartitionOptions::default()).expect("network");
        let name = format!("{}", store.len());
        bench_pair(&mut c, &summary, "partition_network", &name, &net, oracle);
        pairs.push(("partition_network", name, oracle));
    }
    for (size, oracle) in [(1_000, true), (10_000, true), (100_000, false)] {
        let net = random_network(size, 11);
        let name = format!("{size}");
        bench_pair(&mut c, &summary, "random_sparse", &name, &net, oracle);
        pairs.push(("random_sparse", name, oracle));
    }
    c.final_summary();
    println!("\nflow summary (median / min per run)\n{}", summary.table());
    for (group, name, oracle) in pairs {
        let slow = summary.median(&format!("{group}/petgraph/{name}"));
        for label in ["dinic", "dinic_fwd"] {
            let fast = summary.median(&format!("{group}/{label}/{name}"));
            if let (true, Some(f), Some(s)) = (oracle, fast, slow) {
                println!(
                    "{group}/{name}: {label} {} vs petgraph {}: {:.1}x",
                    human(f),
                    human(s),
                    s / f
                );
            }
        }
    }
}
