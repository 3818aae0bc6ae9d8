"""Partitioning (and tracing) speed and saved memory: aotgrad against torch, same graph.

For transformer stacks of ``--blocks`` blocks (``aotgrad.tools.models.transformer_stack``):

1. the joint graph is traced ONCE with aotgrad's tracer;
2. end-to-end partitioning (joint FX graph in, forward and backward GraphModules
   out) is timed, median of ``--repeats`` runs, for aotgrad's
   ``min_cut_rematerialization_partition`` and torch's
   ``torch._functorch.partitioners.min_cut_rematerialization_partition`` — each run
   on its own copy of the joint graph (torch's DCEs/CSEs it in place; copying is
   not timed);
3. saved activation bytes of each: the forward module's outputs beyond
   ``num_fwd_outputs`` that are tensors, summed the same way for both;
4. tracing: aotgrad's trace (``collect_metadata`` + ``trace_joint``) against the
   first call of torch's ``functorch.compile.aot_function`` with nop compilers and
   torch's (cheap) default partition; also both first calls end to end.

    .venv/bin/python benches/partition_vs_torch.py --blocks 4,16,64 --json /tmp/part.json

Goals: partitioning >= 20x faster than torch's and saved bytes <= torch's at every
size; tracing ratio (aotgrad / torch) <= 1.0.
"""

from __future__ import annotations

import argparse
import gc
import logging
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from aotgrad.tools import bench
from aotgrad.tools.bench import timed_partition
from aotgrad.tools.report.collect import copy_graph_module

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    environment,
    format_table,
    graph_size,
    import_aotgrad,
    saved_activation_bytes,
    saved_activations,
    saved_storage_bytes,
    timed,
    write_json,
)

MB = 1024 * 1024
SPEEDUP_GOAL = 20.0
TRACE_RATIO_GOAL = 1.0


# The model, its trace and graph copies are aotgrad.tools.bench's (shared with `aotgrad bench`).


def Workload(n_blocks: int, width: int, batch: int, seq: int, aotgrad: Any) -> bench.Workload:
    """A transformer stack as a flat function of (params..., x) → [y]."""
    return bench.transformer(n_blocks, width=width, batch=batch, seq=seq)


def trace_with_aotgrad(aotgrad: Any, w: bench.Workload) -> Any:
    return bench.trace_with_aotgrad(w)


# ------------------------------------------------------------------ partitioning


PartitionFn = Callable[..., tuple[fx.GraphModule, fx.GraphModule]]


def run_partitions(fns: dict[str, PartitionFn], joint: Any, repeats: int) -> dict[str, Any]:
    """Each partitioner ``repeats`` times on fresh copies of the joint graph, interleaved
    (so that load from other processes hits both alike): median seconds, saved bytes."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, tuple[fx.GraphModule, fx.GraphModule]] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            gm = copy_graph_module(joint.gm)
            gc.collect()
            t, last[name] = timed(
                lambda gm=gm, fn=fn: fn(
                    gm, joint.joint_inputs, num_fwd_outputs=joint.num_fwd_outputs
                )
            )
            times[name].append(t)
    out = {}
    for name in fns:
        fw, bw = last[name]
        saved = saved_activations(fw, joint.num_fwd_outputs)
        ts = sorted(times[name])
        out[name] = {
            "median_s": statistics.median(ts),
            "min_s": ts[0],
            "times_s": times[name],
            "saved_bytes": saved_activation_bytes(fw, joint.num_fwd_outputs),
            "saved_storage": saved_storage_bytes(fw, joint.num_fwd_outputs),
            "saved_values": len(saved),
            "saved_tensors": sum(isinstance(n.meta.get("val"), torch.Tensor) for n in saved),
            "fw_nodes": graph_size(fw),
            "bw_nodes": graph_size(bw),
        }
    return out


# ------------------------------------------------------------------ tracing


def trace_times(aotgrad: Any, w: bench.Workload, repeats: int) -> dict[str, Any]:
    """aotgrad's trace alone, and both first calls end to end (fresh function each time)."""
    from functorch.compile import aot_function, nop
    from torch._functorch.partitioners import default_partition

    ours_trace_t: list[float] = []
    ours_first: list[float] = []
    ours_parts: list[dict[str, float]] = []
    torch_first: list[float] = []
    torch_part: list[float] = []
    for _ in range(repeats):  # interleaved, so that load from elsewhere hits all alike
        gc.collect()
        t, _ = timed(lambda: trace_with_aotgrad(aotgrad, w))
        ours_trace_t.append(t)

        gc.collect()
        f = aotgrad.aot_function(
            w.fn, aotgrad.nop, aotgrad.nop, partition_fn=aotgrad.partition.default_partition
        )
        t, _ = timed(lambda f=f: f(w.params, *w.inputs))
        ours_first.append(t)
        ours_parts.append(dict(f.artifacts[0].timings))

        gc.collect()
        box: list[float] = []
        g = aot_function(w.fn, nop, nop, partition_fn=timed_partition(default_partition, box))
        t, _ = timed(lambda g=g: g(w.params, *w.inputs))
        torch_first.append(t)
        torch_part.append(sum(box))

    def med(xs: list[float]) -> float:
        return statistics.median(xs)

    ours_trace = med(ours_trace_t)
    ours_first_m = med(ours_first)
    ours_partition = med([p.get("partition", 0.0) for p in ours_parts])
    torch_first_m = med(torch_first)
    torch_partition = med(torch_part)
    return {
        "aotgrad_trace_s": ours_trace,
        "aotgrad_first_call_s": ours_first_m,
        "aotgrad_first_call_timings": ours_parts[len(ours_parts) // 2],
        "aotgrad_first_call_minus_partition_s": ours_first_m - ours_partition,
        "torch_first_call_s": torch_first_m,
        "torch_default_partition_s": torch_partition,
        "ratio_trace_vs_torch_first_call": ours_trace / torch_first_m,
        "ratio_first_call": ours_first_m / torch_first_m,
        "ratio_first_call_minus_partition": (ours_first_m - ours_partition)
        / max(1e-9, torch_first_m - torch_partition),
    }


# ------------------------------------------------------------------ correctness


def check_grads(aotgrad: Any, w: bench.Workload) -> dict[str, Any]:
    """aotgrad's min-cut partition, run: output and parameter grads equal eager's?"""

    def run(f: Callable[..., torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        params = [p.detach().clone().requires_grad_(True) for p in w.params]
        out = f(params, *w.inputs)
        cot = torch.randn(out.shape, generator=torch.Generator().manual_seed(0))
        grads = torch.autograd.grad(out, params, cot)
        return out.detach(), list(grads)

    ref_out, ref_grads = run(w.fn)
    compiled = aotgrad.aot_function(
        w.fn,
        aotgrad.nop,
        aotgrad.nop,
        partition_fn=aotgrad.partition.min_cut_rematerialization_partition,
    )
    out, grads = run(compiled)
    err = max(
        [(out - ref_out).abs().max().item()]
        + [(g - r).abs().max().item() for g, r in zip(grads, ref_grads, strict=True)]
    )
    try:
        torch.testing.assert_close(out, ref_out, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(grads, ref_grads, atol=1e-4, rtol=1e-4)
        ok = True
    except AssertionError:
        ok = False
    return {"ok": ok, "max_abs_err": err}


# ------------------------------------------------------------------ main


def bench_size(aotgrad: Any, n: int, args: argparse.Namespace) -> dict[str, Any]:
    from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_min_cut

    w = Workload(n, args.width, args.batch, args.seq, aotgrad)
    t_trace, joint = timed(lambda: trace_with_aotgrad(aotgrad, w))
    nodes = graph_size(joint.gm)
    print(f"\n[{n} blocks] joint graph: {nodes} nodes, traced in {t_trace:.2f}s", flush=True)
    repeats = args.repeats

    res = run_partitions(
        {
            "aotgrad": aotgrad.partition.min_cut_rematerialization_partition,
            "torch": torch_min_cut,
        },
        joint,
        repeats,
    )
    ours, theirs = res["aotgrad"], res["torch"]
    # The Rust partitioner's own account of what it saved (must agree with the fw module).
    result = aotgrad.partition.partition_joint(
        copy_graph_module(joint.gm), num_fwd_outputs=joint.num_fwd_outputs, kind="min_cut"
    )
    ours["rust_saved_bytes"] = int(result.saved_bytes)
    ours["recomputed"] = len(result.recomputed)
    for name, r in res.items():
        print(
            f"  {name:8s} min-cut {r['median_s'] * 1e3:9.1f} ms (min {r['min_s'] * 1e3:.1f})  "
            f"saved {r['saved_bytes'] / MB:.3f} MB ({r['saved_values']} values)",
            flush=True,
        )

    row: dict[str, Any] = {
        "blocks": n,
        "nodes": nodes,
        "aotgrad": ours,
        "torch": theirs,
        "speedup": theirs["median_s"] / ours["median_s"],
        "saved_ratio": ours["saved_bytes"] / max(1, theirs["saved_bytes"]),
    }
    if not args.no_trace:
        row["trace"] = trace_times(aotgrad, w, args.trace_repeats)
        tr = row["trace"]
        print(
            f"  trace: aotgrad {tr['aotgrad_trace_s']:.2f}s vs torch first call "
            f"{tr['torch_first_call_s']:.2f}s (ratio {tr['ratio_trace_vs_torch_first_call']:.2f});"
            f" first calls {tr['aotgrad_first_call_s']:.2f}s vs {tr['torch_first_call_s']:.2f}s "
            f"(ratio {tr['ratio_first_call']:.2f})",
            flush=True,
        )
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--blocks", default="4,16,64", help="comma-separated block counts")
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5, help="partition runs (median)")
    p.add_argument("--trace-repeats", type=int, default=3, help="tracing runs (median)")
    p.add_argument("--no-trace", action="store_true", help="skip the tracing comparison")
    p.add_argument(
        "--no-check", action="store_true", help="skip the grads-vs-eager check (smallest size)"
    )
    p.add_argument("--json", default=None, help="write a JSON report here")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)

    aotgrad, err = import_aotgrad()
    if aotgrad is None:
        print("aotgrad does not import:\n" + (err or ""))
        return 2
    import aotgrad.tools.models

    # Warm both stacks up (imports, dispatcher caches) on a tiny model, untimed.
    warm = Workload(1, args.width, 2, 8, aotgrad)
    trace_times(aotgrad, warm, 1)

    blocks = [int(b) for b in args.blocks.split(",") if b]
    check = None
    if not args.no_check:
        check = check_grads(
            aotgrad, Workload(min(blocks), args.width, args.batch, args.seq, aotgrad)
        )
        print(
            f"correctness ({min(blocks)} blocks, aotgrad min-cut vs eager): "
            f"{'ok' if check['ok'] else 'WRONG'} (max abs err {check['max_abs_err']:.2e})"
        )
    rows = [bench_size(aotgrad, b, args) for b in blocks]

    headers = [
        "blocks",
        "nodes",
        "aotgrad ms",
        "torch ms",
        "speedup",
        "aotgrad saved MB",
        "torch saved MB",
        "aotgrad act MB*",
        "torch act MB*",
    ]
    table = [
        [
            r["blocks"],
            r["nodes"],
            f"{r['aotgrad']['median_s'] * 1e3:.1f}",
            f"{r['torch']['median_s'] * 1e3:.1f}",
            f"{r['speedup']:.1f}x",
            f"{r['aotgrad']['saved_bytes'] / MB:.3f}",
            f"{r['torch']['saved_bytes'] / MB:.3f}",
            f"{r['aotgrad']['saved_storage']['activations'] / MB:.3f}",
            f"{r['torch']['saved_storage']['activations'] / MB:.3f}",
        ]
        for r in rows
    ]
    print("\npartitioning (joint graph in -> fw/bw GraphModules out, median)")
    print(format_table(headers, table))
    print(
        "saved MB: sum of nbytes of the saved tensors (the goal's measure); "
        "act MB*: saved views counted as their base, each base once, graph inputs left out"
    )
    if not args.no_trace:
        print(
            "\ntracing (aotgrad trace vs torch aot_function first call, nop compilers, "
            "default partition)"
        )
        print(
            format_table(
                [
                    "blocks",
                    "aotgrad trace s",
                    "torch 1st call s",
                    "ratio",
                    "aotgrad 1st call s",
                    "ratio 1st calls",
                ],
                [
                    [
                        r["blocks"],
                        f"{r['trace']['aotgrad_trace_s']:.2f}",
                        f"{r['trace']['torch_first_call_s']:.2f}",
                        f"{r['trace']['ratio_trace_vs_torch_first_call']:.2f}",
                        f"{r['trace']['aotgrad_first_call_s']:.2f}",
                        f"{r['trace']['ratio_first_call']:.2f}",
                    ]
                    for r in rows
                ],
            )
        )

    goals = []
    for r in rows:
        goals.append(
            (f"{r['blocks']} blocks: speedup >= {SPEEDUP_GOAL:.0f}x", r["speedup"] >= SPEEDUP_GOAL)
        )
        goals.append(
            (
                f"{r['blocks']} blocks: saved bytes <= torch's",
                r["aotgrad"]["saved_bytes"] <= r["torch"]["saved_bytes"],
            )
        )
        goals.append(
            (
                f"{r['blocks']} blocks: Rust saved_bytes == fw module's",
                r["aotgrad"]["rust_saved_bytes"] == r["aotgrad"]["saved_bytes"],
            )
        )
        if "trace" in r:
            goals.append(
                (
                    f"{r['blocks']} blocks: trace ratio <= {TRACE_RATIO_GOAL}",
                    r["trace"]["ratio_trace_vs_torch_first_call"] <= TRACE_RATIO_GOAL,
                )
            )
    if check is not None:
        goals.append(
            (f"{min(blocks)} blocks: aotgrad min-cut grads equal eager's", bool(check["ok"]))
        )
    print("\ngoals")
    for text, ok in goals:
        print(f"  [{'ok' if ok else 'MISS'}] {text}")

    write_json(
        args.json,
        {
            "environment": environment(),
            "args": vars(args),
            "rows": rows,
            "goals": [{"goal": t, "met": ok} for t, ok in goals],
            "check": check,
            "timestamp": time.time(),
        },
    )
    return 0 if all(ok for _, ok in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
