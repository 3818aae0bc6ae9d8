"""Minimum cut: ``aotgrad.flow.min_cut`` (Rust Dinic) against ``networkx.minimum_cut``
(preflow-push, its default) on the same random sparse network, in one process.

    .venv/bin/python benches/flow_vs_networkx.py [--nodes 100000] [--degree 4] [--seed 11]

The network has ``--nodes`` nodes and ``degree * nodes`` edges with random endpoints
and integer capacities in 1..1000; node 0 is the source, the last node the sink.
Prints both times (aotgrad's includes validation and the cut mask; networkx's does
not include building its graph) and the ratio. Goal: ratio >= 100. Asserts both
values are equal (relative 1e-9) and that aotgrad's mask is a cut of that value.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import networkx as nx
import numpy as np

from aotgrad.flow import min_cut

GOAL = 100.0


def random_network(n: int, degree: int, seed: int):
    rng = np.random.default_rng(seed)
    e = degree * n
    src = rng.integers(0, n, e, dtype=np.int64)
    dst = rng.integers(0, n, e, dtype=np.int64)
    cap = rng.integers(1, 1001, e).astype(np.float64)
    return src, dst, cap


def nx_graph(n: int, src, dst, cap) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, v, c in zip(src.tolist(), dst.tolist(), cap.tolist(), strict=True):
        if u == v:
            continue
        if g.has_edge(u, v):
            g[u][v]["capacity"] += c
        else:
            g.add_edge(u, v, capacity=c)
    return g


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--degree", type=int, default=4)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--repeats", type=int, default=5, help="aotgrad runs (median)")
    args = ap.parse_args()

    n = args.nodes
    src, dst, cap = random_network(n, args.degree, args.seed)
    source, sink = 0, n - 1

    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        value, side = min_cut(n, src, dst, cap, source, sink)
        times.append(time.perf_counter() - t0)
    ours = statistics.median(times)

    g = nx_graph(n, src, dst, cap)
    t0 = time.perf_counter()
    expected, _ = nx.minimum_cut(g, source, sink)
    theirs = time.perf_counter() - t0

    crossing = side[src] & ~side[dst] & (src != dst)
    cut = float(cap[crossing].sum())
    print(f"random sparse network: {n} nodes, {len(src)} edges, source {source}, sink {sink}")
    print(
        f"aotgrad.flow.min_cut   {ours * 1e3:10.1f} ms  (median of {args.repeats})  value {value}"
    )
    print(
        f"networkx.minimum_cut   {theirs * 1e3:10.1f} ms  (preflow_push)          value {expected}"
    )
    ratio = theirs / ours
    print(f"ratio {ratio:.0f}x (goal >= {GOAL:.0f}x): {'met' if ratio >= GOAL else 'NOT met'}")
    assert abs(value - expected) <= 1e-9 * max(abs(value), abs(expected)), (value, expected)
    assert abs(cut - value) <= 1e-9 * max(abs(cut), 1.0), (cut, value)
    return 0


if __name__ == "__main__":
    sys.exit(main())
