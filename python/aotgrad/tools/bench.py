"""``aotgrad bench``: aotgrad against torch's AOT Autograd, side by side, on the same joint graphs.

For each workload (an MLP, transformer stacks of ``--sizes`` blocks, a small
conv net) the joint graph is traced once with aotgrad's tracer, then:

* partition time: aotgrad's ``min_cut_rematerialization_partition`` against
  torch's (``torch._functorch.partitioners``), joint graph in, forward and
  backward GraphModules out, each run on its own copy of the graph (torch's
  changes the graph it is given), interleaved, median of ``--repeats``;
* saved bytes: the tensors each forward graph hands to the backward, summed the
  same way for both, and aotgrad's save-everything (default) partition;
* tracing: aotgrad's trace (metadata pass + joint trace) against the first call
  of torch's ``functorch.compile.aot_function`` with nop compilers and torch's
  default partition, minus that partition's time;

and once, the per-call runtime overhead of a tiny function compiled with nop
compilers by both (microseconds per call, eager alongside).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from .report.collect import copy_graph_module, saved_activation_bytes
from .report.svg import fmt_bytes

DEFAULT_SIZES = "4,16,64"
WORKLOAD_KINDS = ("mlp", "transformer", "conv")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


# ------------------------------------------------------------------ workloads


@dataclass
class Workload:
    """A model as a flat function of (params..., inputs...) → [output]."""

    name: str
    model: nn.Module
    inputs: list[torch.Tensor]

    def __post_init__(self) -> None:
        self.names = [n for n, _ in self.model.named_parameters()]
        self.params = [p.detach().clone().requires_grad_(True) for p in self.model.parameters()]

    def fn(self, params: list[torch.Tensor], *inputs: torch.Tensor) -> torch.Tensor:
        state = dict(zip(self.names, params, strict=True))
        return torch.func.functional_call(self.model, state, tuple(inputs))

    def flat_fn(self, *tensors: torch.Tensor) -> list[torch.Tensor]:
        n = len(self.params)
        return [self.fn(list(tensors[:n]), *tensors[n:])]

    def flat_inputs(self) -> list[torch.Tensor]:
        return [*self.params, *self.inputs]


def mlp(width: int = 256, depth: int = 4, batch: int = 64) -> Workload:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    model = nn.Sequential(*layers, nn.LayerNorm(width), nn.Linear(width, 10))
    return Workload(f"mlp {depth}x{width}", model, [torch.randn(batch, width)])


def transformer(blocks: int, width: int = 64, batch: int = 4, seq: int = 64) -> Workload:
    from .models import transformer_stack

    torch.manual_seed(0)
    return Workload(
        f"transformer {blocks} blocks",
        transformer_stack(blocks, width=width),
        [torch.randn(batch, seq, width)],
    )


def convnet(batch: int = 8, size: int = 32) -> Workload:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1),
        nn.GroupNorm(4, 16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1),
        nn.GroupNorm(4, 32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )
    return Workload("conv net", model, [torch.randn(batch, 3, size, size)])


def workloads(kinds: Sequence[str], sizes: Sequence[int]) -> list[Workload]:
    out: list[Workload] = []
    for kind in kinds:
        if kind == "mlp":
            out.append(mlp())
        elif kind == "transformer":
            out += [transformer(n) for n in sizes]
        elif kind == "conv":
            out.append(convnet())
        else:
            raise ValueError(f"unknown workload {kind!r}: use {', '.join(WORKLOAD_KINDS)}")
    return out


def trace_with_aotgrad(w: Workload) -> Any:
    """aotgrad's joint graph of ``w`` (a ``trace.JointGraph``)."""
    from .. import trace

    fake_mode = trace.make_fake_mode(False)
    fake_args = trace.fakify(fake_mode, w.flat_inputs(), dynamic=False)
    metadata = trace.collect_metadata(w.flat_fn, fake_args, fake_mode)
    return trace.trace_joint(w.flat_fn, fake_args, fake_mode, metadata)


# ------------------------------------------------------------------ measurements


PartitionFn = Callable[..., tuple[fx.GraphModule, fx.GraphModule]]


def partition_times(fns: dict[str, PartitionFn], joint: Any, repeats: int) -> dict[str, Any]:
    """Each partitioner ``repeats`` times on fresh copies of the joint graph, interleaved
    (so that load from other processes hits all alike): median seconds, saved bytes."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    last: dict[str, tuple[fx.GraphModule, fx.GraphModule]] = {}
    nfo = joint.num_fwd_outputs
    for _ in range(repeats):
        for name, fn in fns.items():
            gm = copy_graph_module(joint.gm)
            gc.collect()
            t, last[name] = timed(
                lambda gm=gm, fn=fn: fn(gm, joint.joint_inputs, num_fwd_outputs=nfo)
            )
            times[name].append(t)
    out = {}
    for name in fns:
        fw, bw = last[name]
        nbytes, count = saved_activation_bytes(fw, nfo)
        out[name] = {
            "median_s": statistics.median(times[name]),
            "times_s": times[name],
            "saved_bytes": nbytes,
            "saved_tensors": count,
            "fw_nodes": len(fw.graph.nodes),
            "bw_nodes": len(bw.graph.nodes),
        }
    return out


def timed_partition(fn: Callable[..., Any], box: list[float]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        t, out = timed(lambda: fn(*args, **kwargs))
        box.append(t)
        return out

    return wrapped


def trace_times(w: Workload, repeats: int) -> dict[str, float]:
    """aotgrad's trace alone against torch's first ``aot_function`` call (nop compilers,
    default partition) without its partition time; medians, interleaved."""
    from functorch.compile import aot_function, nop
    from torch._functorch.partitioners import default_partition

    ours, theirs, theirs_part = [], [], []
    for _ in range(repeats):
        gc.collect()
        ours.append(timed(lambda: trace_with_aotgrad(w))[0])
        gc.collect()
        box: list[float] = []
        g = aot_function(w.fn, nop, nop, partition_fn=timed_partition(default_partition, box))
        theirs.append(timed(lambda g=g: g(w.params, *w.inputs))[0])
        theirs_part.append(sum(box))
    torch_trace = statistics.median(t - p for t, p in zip(theirs, theirs_part, strict=True))
    aotgrad_trace = statistics.median(ours)
    return {
        "aotgrad_trace_s": aotgrad_trace,
        "torch_first_call_s": statistics.median(theirs),
        "torch_trace_s": torch_trace,
        "ratio": aotgrad_trace / max(torch_trace, 1e-9),
    }


def _tiny(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y + 1).relu()


def per_call_us(f: Callable[..., Any], args: Sequence[Any], calls: int, repeats: int = 5) -> float:
    """Median over ``repeats`` of the mean microseconds per call of ``f(*args)``."""
    for _ in range(min(100, calls)):
        f(*args)
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            f(*args)
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def call_overhead(calls: int) -> dict[str, float]:
    """Per-call time of a tiny function (4-element tensors, x requires grad), nop compilers."""
    from functorch.compile import aot_function as torch_aot_function
    from functorch.compile import nop as torch_nop

    from .. import aot_function, nop

    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    ours = per_call_us(aot_function(_tiny, nop), (x, y), calls)
    theirs = per_call_us(torch_aot_function(_tiny, torch_nop), (x, y), calls)
    eager = per_call_us(_tiny, (x, y), calls)
    return {"aotgrad_us": ours, "torch_us": theirs, "eager_us": eager, "ratio": ours / theirs}


def bench_workload(w: Workload, repeats: int, trace_repeats: int) -> dict[str, Any]:
    from torch._functorch.partitioners import min_cut_rematerialization_partition as torch_mc

    from ..partition import min_cut_rematerialization_partition, partition_joint

    t_trace, joint = timed(lambda: trace_with_aotgrad(w))
    parts = partition_times(
        {"aotgrad": min_cut_rematerialization_partition, "torch": torch_mc}, joint, repeats
    )
    save_all = partition_joint(
        joint.gm, num_fwd_outputs=joint.num_fwd_outputs, kind="default"
    ).saved_bytes
    row: dict[str, Any] = {
        "workload": w.name,
        "nodes": len(joint.gm.graph.nodes),
        "partition": parts,
        "speedup": parts["torch"]["median_s"] / parts["aotgrad"]["median_s"],
        "save_all_bytes": int(save_all),
        "first_trace_s": t_trace,
    }
    if trace_repeats > 0:
        row["trace"] = trace_times(w, trace_repeats)
    return row


def environment() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
    }


def run_bench(
    kinds: Sequence[str],
    sizes: Sequence[int],
    *,
    repeats: int = 3,
    trace_repeats: int = 1,
    calls: int = 5000,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """All measurements as one JSON-able dict."""
    warnings.filterwarnings("ignore")
    # Warm both stacks up (imports, dispatcher caches) on a tiny model, untimed.
    trace_times(transformer(1, batch=2, seq=8), 1)
    rows = []
    for w in workloads(kinds, sizes):
        if progress:
            progress(f"{w.name} ...")
        rows.append(bench_workload(w, repeats, trace_repeats))
    result: dict[str, Any] = {"environment": environment(), "workloads": rows}
    if calls > 0:
        if progress:
            progress("per-call overhead ...")
        result["call_overhead"] = call_overhead(calls)
    return result


# ------------------------------------------------------------------ output


Table = tuple[str, list[str], list[list[str]]]


def _partition_table(rows: list[dict[str, Any]]) -> Table:
    """Partition time and saved bytes per workload, aotgrad's and torch's side by side."""
    part = [
        [
            r["workload"],
            f"{r['nodes']:,}",
            f"{r['partition']['aotgrad']['median_s'] * 1e3:.1f}",
            f"{r['partition']['torch']['median_s'] * 1e3:.1f}",
            f"{r['speedup']:.0f}x",
            fmt_bytes(r["partition"]["aotgrad"]["saved_bytes"]),
            fmt_bytes(r["partition"]["torch"]["saved_bytes"]),
            f"{r['partition']['aotgrad']['saved_bytes'] / max(1, r['partition']['torch']['saved_bytes']):.3f}",
            fmt_bytes(r["save_all_bytes"]),
        ]
        for r in rows
    ]
    return (
        "Partitioning: joint graph in, forward and backward graphs out (median)",
        [
            "workload",
            "joint nodes",
            "aotgrad ms",
            "torch ms",
            "speedup",
            "aotgrad saved",
            "torch saved",
            "saved ratio",
            "save-all saved",
        ],
        part,
    )


def _trace_table(traced: list[dict[str, Any]]) -> Table:
    """Tracing time of the workloads that measured it."""
    return (
        "Tracing: aotgrad trace vs torch aot_function first call minus partition (nop)",
        ["workload", "aotgrad s", "torch s", "ratio"],
        [
            [
                r["workload"],
                f"{r['trace']['aotgrad_trace_s']:.3f}",
                f"{r['trace']['torch_trace_s']:.3f}",
                f"{r['trace']['ratio']:.2f}",
            ]
            for r in traced
        ],
    )


def _overhead_table(c: dict[str, float]) -> Table:
    """Per-call overhead of the tiny function, one row."""
    return (
        "Per-call overhead: tiny function, nop compilers, x requires grad (µs per call)",
        ["aotgrad", "torch aot_function", "eager", "ratio"],
        [
            [
                f"{c['aotgrad_us']:.1f}",
                f"{c['torch_us']:.1f}",
                f"{c['eager_us']:.1f}",
                f"{c['ratio']:.2f}",
            ]
        ],
    )


def _tables(result: dict[str, Any]) -> list[Table]:
    """(title, headers, rows) of each table there is data for, in order."""
    rows = result["workloads"]
    tables = [_partition_table(rows)]
    traced = [r for r in rows if "trace" in r]
    if traced:
        tables.append(_trace_table(traced))
    if "call_overhead" in result:
        tables.append(_overhead_table(result["call_overhead"]))
    return tables


def format_text(result: dict[str, Any]) -> str:
    out = []
    for title, headers, rows in _tables(result):
        cells = [headers, *rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
        lines = [
            "  ".join(
                c.rjust(w) if i else c.ljust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
            for r in cells
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        out.append(f"{title}\n" + "\n".join(lines))
    return "\n\n".join(out)


def format_markdown(result: dict[str, Any]) -> str:
    out = []
    for title, headers, rows in _tables(result):
        align = ["---"] + ["---:"] * (len(headers) - 1)
        lines = [f"| {' | '.join(r)} |" for r in (headers, align, *rows)]
        out.append(f"**{title}**\n\n" + "\n".join(lines))
    env = result["environment"]
    out.append(
        f"_torch {env['torch']}, Python {env['python']}, {env['cpus']} CPUs, "
        f"{env['threads']} threads._"
    )
    return "\n\n".join(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        help=f"transformer stack sizes in blocks (default {DEFAULT_SIZES}; 256 blocks, a "
        "40,000-node joint graph, adds about 5 minutes on 2 cores)",
    )
    p.add_argument(
        "--workloads",
        default=",".join(WORKLOAD_KINDS),
        help="comma-separated subset of mlp,transformer,conv",
    )
    p.add_argument("--repeats", type=int, default=3, help="partition runs per workload (median)")
    p.add_argument("--trace-repeats", type=int, default=1, help="tracing runs (0: skip)")
    p.add_argument("--calls", type=int, default=5000, help="calls for the overhead (0: skip)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("-o", "--output", default=None, help="write the table here as well")


def run(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    kinds = [k.strip() for k in args.workloads.split(",") if k.strip()]
    for k in kinds:
        if k not in WORKLOAD_KINDS:
            print(
                f"aotgrad bench: unknown workload {k!r} (use {', '.join(WORKLOAD_KINDS)})",
                file=sys.stderr,
            )
            return 2

    def progress(msg: str) -> None:
        print(f"  {msg}", file=sys.stderr, flush=True)

    result = run_bench(
        kinds,
        sizes,
        repeats=args.repeats,
        trace_repeats=args.trace_repeats,
        calls=args.calls,
        progress=progress,
    )
    text = {
        "json": lambda r: json.dumps(r, indent=2),
        "markdown": format_markdown,
        "text": format_text,
    }[args.format](result)
    print(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text + "\n")
    return 0
