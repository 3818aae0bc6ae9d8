"""Jagged ``NestedTensor`` inputs (``torch.nested.nested_tensor(..., layout=torch.jagged)``)
through ``aot_module`` / ``aot_function``, ``backend="aotgrad_eager"`` and
``backend="aotgrad"`` (Inductor, strict), against eager: output values and offsets, the
ragged size (eager's outputs share the input's nested int ``j``: ``out.shape[1] ==
x.shape[1]``), the gradients of parameters and of the nested input (a nested tensor on
the input's offsets), written inputs and their version counters, over batches of other
lengths and batch sizes."""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import aotgrad

ENTRIES = ["aot", "aotgrad_eager", "aotgrad"]
BATCHES = [((2, 3), 0), ((4, 1), 1), ((1, 2, 3), 2)]


def _jagged(lens: tuple[int, ...], seed: int, grad: bool = True, dim: int = 4) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    parts = [torch.randn(n, dim, generator=g) for n in lens]
    return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=grad)


def _compiled(fn: Any, entry: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    if entry == "aot":
        if isinstance(fn, torch.nn.Module):
            return aotgrad.aot_module(fn, aotgrad.nop)
        return aotgrad.aot_function(fn, aotgrad.nop)
    return torch.compile(fn, backend=entry, fullgraph=True, options={"strict": True})


def _record(out: Any, x: torch.Tensor) -> list[Any]:
    """What eager and aotgrad must agree on for one output (values, offsets, whether it
    shares the input's ragged size, requires_grad), in order."""
    outs = out if isinstance(out, (tuple, list)) else [out]
    rows: list[Any] = []
    for o in outs:
        if o.is_nested:
            rows += [o.values().detach(), o.offsets(), o.shape[1] == x.shape[1], o.requires_grad]
        else:
            rows += [o.detach(), o.shape, o.requires_grad]
    return rows


def _loss(out: Any) -> torch.Tensor:
    outs = out if isinstance(out, (tuple, list)) else [out]
    total = torch.zeros(())
    for o in outs:
        if o.requires_grad:
            v = o.values() if o.is_nested else o
            weights = torch.arange(v.numel(), dtype=v.dtype).reshape(v.shape).sin()
            total = total + (v * weights).sum()
    return total


def _run(fn: Any, x: torch.Tensor) -> list[Any]:
    out = fn(x)
    rows = _record(out, x)
    if any(r is True for r in rows[3::4]) or (x.requires_grad and torch.is_grad_enabled()):
        _loss(out).backward()
    if x.is_leaf and x.grad is not None:
        rows += [x.grad.values(), x.grad.offsets(), x.grad.shape[1] == x.shape[1]]
    return rows


def _assert_rows(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        else:
            assert g == w


def _check_module(make: Callable[[], torch.nn.Module], entry: str) -> None:
    torch.manual_seed(0)
    eager = make()
    mod = copy.deepcopy(eager)
    compiled = _compiled(mod, entry)
    for lens, seed in BATCHES:
        _assert_rows(_run(compiled, _jagged(lens, seed)), _run(eager, _jagged(lens, seed)))
    for p, q in zip(mod.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-5)


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(4, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.down = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(self.norm(F.gelu(self.up(x))))


class _Heads(torch.nn.Module):
    """Several outputs: a nested one, its values (a view), a padded dense one."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.proj(x).softmax(-1)
        return y, (x * 2).values(), torch.nested.to_padded_tensor(y.cos(), 0.0)


@pytest.mark.parametrize("entry", ENTRIES)
def test_jagged_mlp_trains_as_eager(entry: str) -> None:
    _check_module(_Mlp, entry)


@pytest.mark.parametrize("entry", ENTRIES)
def test_jagged_several_outputs(entry: str) -> None:
    _check_module(_Heads, entry)


def _returns_input(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x, x.sin() * 3


def _writes_input(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x.cos()


@pytest.mark.parametrize("entry", ["aot", "aotgrad_eager"])
@pytest.mark.parametrize("fn", [_returns_input, _writes_input], ids=["returns", "writes"])
@pytest.mark.parametrize("grad", [False, True], ids=["leaf_no_grad", "clone_of_leaf"])
def test_jagged_input_returned_or_written(entry: str, fn: Any, grad: bool) -> None:
    compiled = _compiled(fn, entry)
    for lens, seed in BATCHES:
        leaves = [_jagged(lens, seed, grad=grad) for _ in range(2)]
        xs = [t.clone() if grad else t for t in leaves]
        got, want = _run(compiled, xs[0]), _run(fn, xs[1])
        _assert_rows(got, want)
        torch.testing.assert_close(xs[0].values(), xs[1].values())
        assert xs[0]._version == xs[1]._version
        if grad:
            torch.testing.assert_close(leaves[0].grad.values(), leaves[1].grad.values())


@pytest.mark.parametrize("entry", ["aot", "aotgrad_eager"])
def test_jagged_no_grad_and_inference(entry: str) -> None:
    torch.manual_seed(0)
    eager = _Mlp()
    compiled = _compiled(copy.deepcopy(eager), entry)
    for context in (torch.no_grad, torch.inference_mode):
        for lens, seed in BATCHES:
            with context():
                got = _record(compiled(_jagged(lens, seed)), _jagged(lens, seed))
                want = _record(eager(_jagged(lens, seed)), _jagged(lens, seed))
            _assert_rows(got[:1] + got[1:2] + got[3:], want[:1] + want[1:2] + want[3:])


SCRIPT = textwrap.dedent(
    """
    import torch, aotgrad
    nt = torch.nested.nested_tensor(
        [torch.randn(2, 4), torch.randn(3, 4)], layout=torch.jagged, requires_grad=True
    )
    f = lambda x: (x * 2).sin()
    ref = f(nt)
    outs = [aotgrad.aot_function(f, aotgrad.nop)(nt)]
    for backend in ("aotgrad_eager", "aotgrad"):
        torch._dynamo.reset()
        outs.append(torch.compile(f, backend=backend)(nt))
    for out in outs:
        assert torch.allclose(out.values(), ref.values()) and out.shape[1] == nt.shape[1]
    print("survived")
    """
)


def test_jagged_input_never_kills_the_process() -> None:
    """(A jagged input aborted the process inside torch's functionalization once.)"""
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "survived" in run.stdout


def test_jagged_lengths_do_not_recompile(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Dynamo, batches of one batch size and other lengths run one compiled graph
    per graph Dynamo makes: the ragged size (a new nested int per batch) is not guarded,
    and the child over the leaves is compiled for dynamic sizes."""
    from torch._dynamo.utils import counters

    import aotgrad.program

    compiled_graphs: list[int] = []
    compile_flat = aotgrad.program.compile_flat

    def counting(*args: Any, **kwargs: Any) -> Any:
        compiled_graphs.append(1)
        return compile_flat(*args, **kwargs)

    monkeypatch.setattr(aotgrad.program, "compile_flat", counting)
    torch.manual_seed(0)
    eager = _Mlp()
    compiled = _compiled(copy.deepcopy(eager), "aotgrad_eager")
    counters.clear()
    lengths = [(2, 3, 4, 1), (4, 1, 1, 1), (1, 2, 3, 5), (5, 5, 2, 2), (3, 3, 3, 3), (2, 7, 1, 9)]
    for seed, lens in enumerate(lengths):
        _assert_rows(_run(compiled, _jagged(lens, seed)), _run(eager, _jagged(lens, seed)))
    dynamo_graphs = counters["stats"]["unique_graphs"]
    assert dynamo_graphs < len(lengths)
    assert len(compiled_graphs) == dynamo_graphs
