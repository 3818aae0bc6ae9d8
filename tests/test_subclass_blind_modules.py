"""Blind checks over tensor subclasses beyond single programs: a subclass without the flatten
protocol, modules with subclass parameters and buffers over several steps, compiled
outputs fed back as inputs, and a double backward (see ``subclass_blind_harness``)."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.two_tensor import TwoTensor

import aotgrad
from aotgrad.errors import UnsupportedError
from subclass_blind_harness import (
    ENTRIES,
    _assert_same,
    _backward,
    _flat,
    _nested,
    _out_record,
    check_program,
    compiled,
    mk,
    registry,
)

XFAIL: dict[tuple[str, str], str] = {}

PROGRAMS, program = registry()


# ----------------------------------------------------------------------------- programs


# A __torch_dispatch__ subclass without the flatten protocol (refusal allowed)


class _NoFlatten(torch.Tensor):
    @staticmethod
    def __new__(cls, elem):
        return torch.Tensor._make_wrapper_subclass(cls, elem.shape, dtype=elem.dtype)

    def __init__(self, elem):
        self.elem = elem

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def un(t):
            return t.elem if isinstance(t, _NoFlatten) else t

        args = torch.utils._pytree.tree_map(un, args)
        kwargs = torch.utils._pytree.tree_map(un, kwargs or {})
        out = func(*args, **kwargs)
        return torch.utils._pytree.tree_map(
            lambda t: _NoFlatten(t) if isinstance(t, torch.Tensor) else t, out
        )


def _no_flatten() -> tuple[list[Any], list[Any]]:
    torch.manual_seed(0)
    return [_NoFlatten(torch.randn(3))], []


@program(_no_flatten, refusal_ok=True, entries=["aot_function"])
def d_no_flatten(x):
    return (x * 2).elem


# ----------------------------------------------------------------------------- tests


CASES = [(n, e) for n, p in PROGRAMS.items() for e in p.entries]


@pytest.mark.parametrize(("name", "entry"), CASES)
def test_program(name: str, entry: str, request: pytest.FixtureRequest) -> None:
    if (name, entry) in XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL[(name, entry)]))
    check_program(PROGRAMS, name, entry)


# ----------------------------------------------------------------------------- modules


class _TwoLinear(torch.nn.Module):
    def __init__(self, nested: bool) -> None:
        super().__init__()

        def p(*shape: int) -> torch.Tensor:
            t = TwoTensor(torch.randn(*shape), torch.randn(*shape))
            return TwoTensor(t, t * 0.5) if nested else t

        self.weight = torch.nn.Parameter(p(4, 5))
        self.bias = torch.nn.Parameter(p(4))
        self.scale = torch.nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias).tanh() * self.scale.detach()


class _NestedBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(4, 8)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.norm(F.gelu(self.up(x)))
        return h.softmax(-1), torch.nested.to_padded_tensor(h, 0.0)


def _module_input(kind: str, step: int) -> torch.Tensor:
    torch.manual_seed(100 + step)
    if kind == "nested_block":
        return _nested(((2, 3), (4, 1, 2), (3,))[step], False)
    x = TwoTensor(torch.randn(3, 5), torch.randn(3, 5))
    return TwoTensor(x, x * 2) if kind == "nested" else x


def _module_step(mod: Any, x: torch.Tensor, ctx: Any) -> list[Any]:
    with ctx():
        out = mod(x)
    outs = list(out) if isinstance(out, tuple) else [out]
    rec = [_out_record(o, [x]) for o in outs]
    rec.append(_backward(outs, []))
    return rec


class _WithBuffer(torch.nn.Module):
    """A TwoTensor buffer written in forward (a running statistic) and a TwoTensor param."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(TwoTensor(torch.randn(4, 5), torch.randn(4, 5)))
        self.register_buffer("running", TwoTensor(torch.zeros(4), torch.zeros(4)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(x, self.weight)
        with torch.no_grad():
            self.running.mul_(0.9).add_(y.mean(0) * 0.1)
        return y * self.running


MODULES = {"flat": lambda: _TwoLinear(False), "nested": lambda: _TwoLinear(True)}
MODULES["buffer"] = _WithBuffer
MODULES["nested_block"] = _NestedBlock
MODULE_XFAIL: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("entry", ["aot_module", "aotgrad_eager"])
@pytest.mark.parametrize("kind", list(MODULES))
def test_module(kind: str, entry: str, request: pytest.FixtureRequest) -> None:
    """Three steps (the last under no_grad) with an SGD update between, params' grads."""
    if (kind, entry) in MODULE_XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=MODULE_XFAIL[(kind, entry)]))
    torch.manual_seed(0)
    eager = MODULES[kind]()
    mod = copy.deepcopy(eager)
    torch._dynamo.reset()
    if entry == "aot_module":
        comp = aotgrad.aot_module(mod, aotgrad.nop)
    else:
        comp = torch.compile(mod, backend=entry, fullgraph=True, options={"strict": True})
    for step, ctx in enumerate([contextlib.nullcontext, contextlib.nullcontext, torch.no_grad]):
        want = _module_step(eager, _module_input(kind, step), ctx)
        got = _module_step(comp, _module_input(kind, step), ctx)
        _assert_same(got, want, f"step {step}")
        for b, c in zip(mod.buffers(), eager.buffers(), strict=True):
            _assert_same(_flat(b), _flat(c), f"buffer at step {step}")
        for (name, p), q in zip(mod.named_parameters(), eager.parameters(), strict=True):
            _assert_same(
                _flat(p.grad) if p.grad is not None else None,
                _flat(q.grad) if q.grad is not None else None,
                name,
            )
            with torch.no_grad():
                for t in (p, q):
                    if t.grad is not None:
                        t.sub_(0.1 * t.grad)
                        t.grad = None


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", ["two", "nested"])
def test_chained_calls(kind: str, entry: str) -> None:
    """A compiled output fed back as the next call's input, then one backward."""

    def fn(x):
        return (x * x).sin() + x

    comp = compiled(fn, entry)
    rows = []
    for f in (fn, comp):
        args, leaves = mk("T" if kind == "two" else "N")()
        out = f(f(args[0]))
        rows.append([_out_record(out, args), _backward([out], []), _flat(leaves[0].grad)])
    _assert_same(rows[1], rows[0])


@pytest.mark.parametrize("entry", ENTRIES)
def test_double_backward(entry: str, request: pytest.FixtureRequest) -> None:
    """A gradient penalty: eager's values, or aotgrad's refusal (as for plain tensors;
    it gave the leaf no gradient, silently)."""

    def fn(x):
        return (x * x * x).sum()

    comp = compiled(fn, entry)
    rows = []
    for f in (fn, comp):
        (leaf,) = mk("T")()[1]
        try:
            (g,) = torch.autograd.grad(f(leaf), leaf, create_graph=True)
            g.sum().backward()
        except UnsupportedError:
            return
        rows.append(_flat(leaf.grad) if leaf.grad is not None else None)
    _assert_same(rows[1], rows[0])
