"""Helpers shared by the benchmark scripts in ``benches/`` (not part of the package)."""

from __future__ import annotations

import json
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

ROOT = Path(__file__).resolve().parent.parent


def import_aotgrad() -> tuple[Any, str | None]:
    """``(aotgrad, None)``, or ``(None, traceback)`` when the package does not import yet."""
    try:
        import aotgrad
        import aotgrad.partition
    except Exception:
        return None, traceback.format_exc()
    return aotgrad, None


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float], Any]:
    """Median seconds over ``repeats`` calls, all the times, and the last result."""
    times = []
    out = None
    for _ in range(repeats):
        t, out = timed(fn)
        times.append(t)
    return statistics.median(times), times, out


def value_nbytes(val: Any) -> int:
    """Bytes of a tensor value (fake or real; numel * itemsize); 0 for anything else."""
    if isinstance(val, torch.Tensor):
        return int(val.numel()) * val.element_size()
    return 0


def saved_activations(fw: fx.GraphModule, num_fwd_outputs: int) -> list[fx.Node]:
    """The forward graph's outputs beyond the first ``num_fwd_outputs``: what is saved."""
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    return [o for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]


def saved_activation_bytes(fw: fx.GraphModule, num_fwd_outputs: int) -> int:
    """Sum of nbytes of the saved values that are tensors (``node.meta["val"]``)."""
    return sum(value_nbytes(n.meta.get("val")) for n in saved_activations(fw, num_fwd_outputs))


def _is_view(node: fx.Node) -> bool:
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return False
    return any(
        r.alias_info is not None and not r.alias_info.is_write for r in target._schema.returns
    )


def _alias_root(node: fx.Node) -> fx.Node:
    """Follow view ops back to the node whose storage ``node`` aliases."""
    while _is_view(node) and node.args and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return node


def saved_storage_bytes(fw: fx.GraphModule, num_fwd_outputs: int) -> dict[str, int]:
    """Memory the saved values keep alive, counting each aliased base once.

    ``saved_activation_bytes`` counts a saved view (``t(weight)``) as a tensor of its
    own; here a saved view counts as its base, each base once, and bases that are
    graph inputs (parameters, already alive) are reported apart from activations.
    """
    roots: dict[fx.Node, int] = {}
    for n in saved_activations(fw, num_fwd_outputs):
        if isinstance(n.meta.get("val"), torch.Tensor):
            root = _alias_root(n)
            roots.setdefault(root, value_nbytes(root.meta.get("val")))
    inputs = sum(b for r, b in roots.items() if r.op == "placeholder")
    return {"activations": sum(roots.values()) - inputs, "inputs": inputs}


def graph_size(gm: fx.GraphModule) -> int:
    return len(gm.graph.nodes)


def environment() -> dict[str, Any]:
    """The machine and versions a figure was measured on (``aotgrad.tools.bench.environment``)."""
    from aotgrad.tools.bench import environment as describe

    return describe()


def write_json(path: str | None, obj: Any) -> None:
    if not path:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(obj, indent=2, default=str) + "\n")
    print(f"wrote {p}")


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
