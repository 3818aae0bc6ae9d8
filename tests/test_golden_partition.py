"""Golden tests of the partition: the forward and backward graphs of three small functions,
printed, against checked-in text under ``tests/golden/``.

A change in what is saved, recomputed or where an op runs shows up as a diff of these
files in review. ``make golden`` (``AOTGRAD_REGEN_GOLDEN=1``) rewrites them; the test
fails otherwise whenever the printed graphs differ.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.fx as fx
from torch.utils.checkpoint import checkpoint

import aotgrad

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("AOTGRAD_REGEN_GOLDEN") == "1"


def mlp_relu(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w1) @ w2


def checkpointed_chain(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    def chain(y: torch.Tensor) -> torch.Tensor:
        return (y.sin() * 2).cos().exp()

    return checkpoint(chain, x @ w, use_reentrant=False).sum(1)


def matmul_softmax(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.softmax(q @ k.t(), dim=-1) @ v


def _inputs(*shapes: tuple[int, ...]) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(*s, generator=g, requires_grad=True) for s in shapes]


CASES: dict[str, tuple[Callable[..., torch.Tensor], list[tuple[int, ...]]]] = {
    "mlp_relu": (mlp_relu, [(4, 8), (8, 16), (16, 2)]),
    "checkpointed_chain": (checkpointed_chain, [(4, 8), (8, 8)]),
    "matmul_softmax": (matmul_softmax, [(4, 8), (6, 8), (6, 3)]),
}

# Stack-trace comments name files and lines of this checkout, and checkpoint region ids
# are counted per process: neither is part of the partition.
_SOURCE_COMMENT = re.compile(r"^\s*# (File: |No stacktrace found)")
_NO_STACK = " No stacktrace found for following nodes"
_REGION_ID = re.compile(r"ac_graph_id: \d+")


def _printed(gm: fx.GraphModule) -> str:
    text = gm.print_readable(print_output=False)
    lines = [
        _REGION_ID.sub("ac_graph_id: <region>", ln.replace(_NO_STACK, "").rstrip())
        for ln in text.splitlines()
        if not _SOURCE_COMMENT.match(ln)
    ]
    return "\n".join(ln for ln in lines if ln) + "\n"


def _saved(fw: fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    outs = list(fw.graph.output_node().args[0])[num_fwd_outputs:]  # type: ignore[arg-type]
    return [o.name if isinstance(o, fx.Node) else repr(o) for o in outs]


def _render(name: str) -> str:
    fn, shapes = CASES[name]
    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    compiled(*_inputs(*shapes)).sum().backward()
    (artifact,) = compiled.artifacts
    assert artifact.training and artifact.backward is not None
    saved = _saved(artifact.forward, artifact.layout.num_fwd_outputs)
    return (
        f"# {name}: saved for backward: {', '.join(saved) or '(nothing)'}\n"
        f"# ---- forward\n{_printed(artifact.forward)}"
        f"# ---- backward\n{_printed(artifact.backward)}"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_partition_matches_golden(name: str) -> None:
    got = _render(name)
    path = GOLDEN / f"partition_{name}.txt"
    if REGEN:
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        return
    assert path.exists(), f"{path} is missing: run `make golden` and review the new file"
    want = path.read_text()
    assert got == want, (
        f"the partition of {name} changed; if intended, run `make golden` and commit "
        f"{path.relative_to(Path(__file__).parent.parent)} (review the diff)"
    )
