//! Peak resident memory of partitioning a large synthetic joint graph.
//!
//! `cargo run --release -p aotgrad-bench --example peak_rss -- [NODES] [MAX_MIB]`
//! builds `synth::transformer_like(NODES)` (default 10^6) through the node
//! table, round-trips it through `GraphStore::from_table`, runs both
//! partitioners and `check`, and prints the peak RSS (`VmHWM`) after each
//! stage. With `MAX_MIB` it exits non-zero when the peak exceeds that bound.
//! Linux only (reads `/proc/self/status`).

use std::time::Instant;

use aotgrad_core::partition::{check, partition_default, partition_min_cut, PartitionOptions};
use aotgrad_core::synth::transformer_like;
use aotgrad_core::GraphStore;

fn peak_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn stage(name: &str, t: Instant) {
    println!(
        "{name:<28} {:>8.2} s   peak RSS {:>8.1} MiB",
        t.elapsed().as_secs_f64(),
        peak_mib()
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let max_mib: Option<f64> = args.next().and_then(|a| a.parse().ok());
    stage("start", Instant::now());
    let t = Instant::now();
    let g = transformer_like(nodes, 0);
    println!("nodes {}  edges {}", g.len(), g.arg_idx.len());
    stage("synth (through the table)", t);
    let t = Instant::now();
    let cols = g.to_columns();
    let g2 = GraphStore::from_table(&cols.view()).expect("valid table");
    drop(cols);
    assert_eq!(g2.len(), g.len());
    drop(g2);
    stage("to_columns + from_table", t);
    let opts = PartitionOptions::default();
    let t = Instant::now();
    let d = partition_default(&g, &opts).expect("default partition");
    check(&g, &d).expect("valid default partition");
    drop(d);
    stage("default + check", t);
    let t = Instant::now();
    let m = partition_min_cut(&g, &opts).expect("min-cut partition");
    check(&g, &m).expect("valid min-cut partition");
    println!("saved {} values, {} bytes", m.saved.len(), m.saved_bytes);
    stage("min-cut + check", t);
    let peak = peak_mib();
    if let Some(max) = max_mib {
        if peak > max {
            eprintln!("peak RSS {peak:.1} MiB exceeds the bound {max} MiB");
            std::process::exit(1);
        }
        println!("peak RSS {peak:.1} MiB within the bound {max} MiB");
    }
}
