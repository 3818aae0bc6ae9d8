"""Joint FX graph → NodeTable → verified Rust GraphStore, stage by stage.

The joint graph of a 64-block transformer (about 7,700 nodes, from
``tests/graphs.py``) is converted ``--repeats`` times; the median of each
stage is printed, then the total. Goal: total < 50 ms in a release build
(``make build``), with ``to_table`` about 20 ms.

    .venv/bin/python benches/table_roundtrip.py [--blocks 64] [--repeats 21]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from aotgrad import _rust  # noqa: E402
from aotgrad.table import NodeTable, to_table  # noqa: E402
from graphs import transformer_joint  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()

    t0 = time.perf_counter()
    joint = transformer_joint(args.blocks)
    trace_s = time.perf_counter() - t0
    n_fwd = joint.num_fwd_outputs
    stages: dict[str, list[float]] = {
        "to_table": [],
        "from_table": [],
        "verify": [],
        "total": [],
        "to_columns (back)": [],
    }
    to_table(joint.gm, num_fwd_outputs=n_fwd)  # warm the per-op caches of torch
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        table, nodes = to_table(joint.gm, num_fwd_outputs=n_fwd)
        t1 = time.perf_counter()
        store = _rust.GraphStore.from_table(table)
        t2 = time.perf_counter()
        store.verify()
        t3 = time.perf_counter()
        NodeTable.from_store(store)
        t4 = time.perf_counter()
        for name, dt in zip(stages, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3), strict=True):
            stages[name].append(dt)

    print(
        f"joint graph of a {args.blocks}-block transformer: {len(nodes)} nodes, "
        f"{len(table.arg_idx)} edges, {len(table.op_names)} ops (traced in {trace_s:.1f} s)"
    )
    print(f"median of {args.repeats} runs:")
    for name, times in stages.items():
        line = f"  {name:18s} {statistics.median(times) * 1e3:8.3f} ms"
        if name == "total":
            line += "   (joint FX graph -> verified store; goal < 50 ms)"
        print(line)
    total = statistics.median(stages["total"]) * 1e3
    return 0 if total < 50 else 1


if __name__ == "__main__":
    sys.exit(main())
