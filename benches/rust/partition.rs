//! Partition benchmarks: the default and the min-cut partition of synthetic
//! transformer-shaped joint graphs of 10^3 to 10^6 nodes
//! (`aotgrad_core::synth::transformer_like`). Goal: the 10^6-node min-cut
//! partition in at most 1 s.
//!
//! `cargo bench -p aotgrad-bench --bench partition`; a summary table follows
//! criterion's report.

use std::time::Duration;

use aotgrad_bench::Summary;
use aotgrad_core::partition::{partition_default, partition_min_cut, PartitionOptions};
use aotgrad_core::synth::transformer_like;
use criterion::{BenchmarkId, Criterion};

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

fn bench(c: &mut Criterion, summary: &Summary) {
    let opts = PartitionOptions::default();
    let mut group = c.benchmark_group("partition");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300));
    for size in SIZES {
        let store = transformer_like(size, 7);
        let n = store.len();
        group.measurement_time(Duration::from_secs(if size >= 1_000_000 { 8 } else { 2 }));
        let id = format!("default/{n}");
        group.bench_function(BenchmarkId::new("default", n), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || partition_default(&store, &opts)));
        });
        let id = format!("min_cut/{n}");
        group.bench_function(BenchmarkId::new("min_cut", n), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || partition_min_cut(&store, &opts)));
        });
    }
    group.finish();
}

fn main() {
    let summary = Summary::new();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &summary);
    c.final_summary();
    println!(
        "\npartition summary (median / min per run)\n{}",
        summary.table()
    );
}
