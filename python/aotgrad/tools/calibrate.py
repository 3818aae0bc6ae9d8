"""The memory-budget cost table, measured on the machine at hand (``aotgrad calibrate``).

The budget partitioner prices recomputation with a :class:`CostModel` (Rust:
``rust/core/src/partition/cost.rs``): FLOPs worth one byte moved (a matmul's FLOP/s
over the bandwidth of a pointwise kernel), the share of its bytes a memory-bound op
moves when a fusing compiler recomputes it inside a backward kernel, and per-op
factors (an op's time against a pointwise kernel over the same bytes).
``aotgrad calibrate`` times those kernels here with torch (fp32, the default device)
and writes them to :func:`~aotgrad.partition.calibration.calibration_path`;
:mod:`aotgrad.partition.calibration` reads that file once per process and the budget
partitioner uses it unless the caller passes its own figures (``flops_per_byte=``,
``fused_factor=``, ``op_factors=`` options).
``fused_factor`` is not measured (it depends on the compiler): the file keeps the
default unless ``--fused-factor`` is given.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..partition.calibration import DEFAULT_FUSED_FACTOR, FORMAT, calibration_path, forget


def _seconds(fn: Callable[[], Any], repeats: int) -> float:
    """The least seconds of ``repeats`` calls of ``fn`` after one warm-up call: the
    kernel's own time (a shared machine's other processes only ever add to it)."""
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def _bandwidth(n: int, repeats: int) -> float:
    """Bytes per second of ``add`` over ``n`` fp32 elements (two reads, one write)."""
    a, b, c = torch.randn(n), torch.randn(n), torch.empty(n)
    return 3 * 4 * n / _seconds(lambda: torch.add(a, b, out=c), repeats)


def _matmul_rate(repeats: int) -> float:
    """The best FLOP/s of ``mm`` over a few fp32 shapes of transformer layers."""
    rates = []
    for m, k, n in ((256, 64, 256), (256, 256, 256), (1024, 256, 1024), (512, 512, 512)):
        a, b = torch.randn(m, k), torch.randn(k, n)
        rates.append(2 * m * k * n / _seconds(lambda a=a, b=b: torch.mm(a, b), repeats))
    return max(rates)


def _op_factors(repeats: int) -> dict[str, float]:
    """Each op's time over the time a pointwise kernel (``add``, same input) takes to
    move the bytes the op moves."""
    rows, cols = 16384, 256  # 16 MB: memory-bound, well above timer and scheduler noise
    x = torch.randn(rows, cols)
    w, b = torch.randn(cols), torch.randn(cols)
    idx = torch.randint(0, rows, (rows,))
    x4 = x.view(256, 64, 16, 16)
    ops: dict[str, tuple[Callable[[], Any], int]] = {
        "aten._softmax": (lambda: torch.ops.aten._softmax(x, -1, False), 2),
        "aten._log_softmax": (lambda: torch.ops.aten._log_softmax(x, -1, False), 2),
        "aten.native_layer_norm": (
            lambda: torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5),
            2,
        ),
        "aten.native_batch_norm": (
            lambda: torch.ops.aten.native_batch_norm(x4, None, None, None, None, True, 0.1, 1e-5),
            2,
        ),
        "aten.native_group_norm": (
            lambda: torch.ops.aten.native_group_norm(x4, None, None, 256, 64, 256, 4, 1e-5),
            2,
        ),
        "aten.cumsum": (lambda: torch.ops.aten.cumsum(x, -1), 2),
        "aten.sort": (lambda: torch.ops.aten.sort(x, -1), 3),
        "aten.topk": (lambda: torch.ops.aten.topk(x, 8, -1), 1),
        "aten.index_select": (lambda: torch.ops.aten.index_select(x, 0, idx), 2),
        "aten.embedding": (lambda: torch.ops.aten.embedding(x, idx), 2),
    }
    y = torch.empty_like(x)
    add = _seconds(lambda: torch.add(x, x, out=y), repeats) / 3  # per pass over x
    return {
        name: max(round(_seconds(fn, repeats) / (passes * add), 3), 0.05)
        for name, (fn, passes) in ops.items()
    }


def measure(repeats: int = 20, fused_factor: float = DEFAULT_FUSED_FACTOR) -> dict[str, Any]:
    """The cost model of this machine (single process, torch's current thread count)."""
    bandwidth = _bandwidth(1 << 22, repeats)
    rate = _matmul_rate(repeats)
    return {
        "format": FORMAT,
        "flops_per_byte": round(rate / bandwidth, 3),
        "fused_factor": fused_factor,
        "op_factors": _op_factors(repeats),
        "measured": {
            "matmul_flops_per_s": rate,
            "pointwise_bytes_per_s": bandwidth,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        },
    }


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repeats", type=int, default=20, help="timings per kernel (the least is kept)")
    p.add_argument(
        "--fused-factor",
        type=float,
        default=DEFAULT_FUSED_FACTOR,
        help="bytes share of a memory-bound op recomputed by a fusing compiler",
    )
    p.add_argument("--output", default=None, help=f"where to write (default {calibration_path()})")
    p.add_argument("--print-only", action="store_true", help="print the figures, write nothing")


def run(args: argparse.Namespace) -> int:
    figures = measure(args.repeats, args.fused_factor)
    text = json.dumps(figures, indent=2, sort_keys=True)
    print(text)
    if not args.print_only:
        path = Path(args.output) if args.output else calibration_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
        forget()
        print(f"written to {path}")
    return 0
