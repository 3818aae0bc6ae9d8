//! Table ingest benchmarks: `GraphStore::from_table` (validate + build the
//! users CSR) and `verify` on synthetic transformer-like joint graphs
//! (`aotgrad_core::synth`), from 8,000 to 10^6 nodes.
//!
//! `cargo bench -p aotgrad-bench --bench ingest`. Goals: an 8,000-node table
//! to a verified store well under 1 ms; 10^6 nodes in tens of ms.

use std::time::Duration;

use aotgrad_bench::{human, Summary};
use aotgrad_core::synth::transformer_like;
use aotgrad_core::{verify, GraphStore};
use criterion::{BenchmarkId, Criterion};

fn main() {
    let summary = Summary::new();
    let mut c = Criterion::default().configure_from_args();
    let mut sizes = Vec::new();
    for target in [8_000, 100_000, 1_000_000] {
        let columns = transformer_like(target, 3).to_columns();
        let view = columns.view();
        let name = format!("{}", columns.len());
        let mut g = c.benchmark_group("ingest");
        g.sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(2));
        let id = format!("from_table/{name}");
        g.bench_function(BenchmarkId::new("from_table", &name), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || GraphStore::from_table(&view)));
        });
        let store = GraphStore::from_table(&view).expect("synth tables are valid");
        let id = format!("verify/{name}");
        g.bench_function(BenchmarkId::new("verify", &name), |b| {
            b.iter_custom(|iters| summary.time(&id, iters, || verify(&store)));
        });
        let id = format!("from_table+verify/{name}");
        g.bench_function(BenchmarkId::new("from_table+verify", &name), |b| {
            b.iter_custom(|iters| {
                summary.time(&id, iters, || {
                    GraphStore::from_table(&view).and_then(|s| verify(&s).map(|()| s))
                })
            });
        });
        g.finish();
        sizes.push((name, columns.arg_idx.len()));
    }
    c.final_summary();
    println!(
        "\ningest summary (median / min per run)\n{}",
        summary.table()
    );
    for (name, edges) in sizes {
        if let Some(t) = summary.median(&format!("from_table+verify/{name}")) {
            println!(
                "{name} nodes, {edges} edges: table -> verified store in {} ({:.1} ns/node)",
                human(t),
                t * 1e9 / name.parse::<f64>().unwrap_or(1.0)
            );
        }
    }
}
