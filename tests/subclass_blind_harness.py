"""Shared parts of the blind programs over tensor subclasses (``TwoTensor``, jagged
``NestedTensor``): input makers, the records of a call (outputs, inputs after, gradients),
their comparison, and the program registry each ``test_subclass_blind_*`` module fills."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nested._internal.nested_tensor import NestedTensor
from torch.testing._internal.subclasses import WrapperSubclass
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import aotgrad
from aotgrad.errors import UnsupportedError

ENTRIES = ["aot_function", "aotgrad_eager"]


def _two(shape: tuple[int, ...], grad: bool) -> torch.Tensor:
    return TwoTensor(torch.randn(*shape), torch.randn(*shape)).requires_grad_(grad)


def _nested(lens: tuple[int, ...], grad: bool) -> torch.Tensor:
    parts = [torch.randn(n, 4) for n in lens]
    return torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=grad)


def mk(*specs: Any, seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    """A maker of (args, leaves). Spec kinds: T TwoTensor, W WrapperSubclass, N nested,
    S nested sharing one offsets tensor with the other S, P plain; suffix c: a clone of a
    leaf that requires grad, 0: no grad, none: a leaf that requires grad."""

    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        args: list[Any] = []
        leaves: list[Any] = []
        offsets = torch.tensor([0, 2, 5, 6])
        for spec in specs:
            kind, shape = (spec, None) if isinstance(spec, str) else spec
            grad = not kind.endswith("0")
            if kind[0] == "T":
                t = _two(shape or (3, 4), grad)
            elif kind[0] == "W":
                t = WrapperSubclass(torch.randn(*(shape or (3, 4)))).requires_grad_(grad)
            elif kind[0] == "N":
                t = _nested(shape or (2, 3), grad)
            elif kind[0] == "S":
                v = torch.randn(6, 4)
                t = torch.nested.nested_tensor_from_jagged(v, offsets).detach().requires_grad_(grad)
            else:
                t = torch.randn(*(shape or (4,))).requires_grad_(grad)
            if grad:
                leaves.append(t)
            args.append(t.clone() if kind.endswith("c") else t)
        return args, leaves

    return make


def _dims(t: torch.Tensor, sizes: Any = None) -> list[Any]:
    return [d if isinstance(d, int) else "nested" for d in (t.shape if sizes is None else sizes)]


def _flat(t: Any) -> list[Any]:
    """A value's plain tensors and structure (types, shapes, strides per level)."""
    if not isinstance(t, torch.Tensor):
        return [t]
    if isinstance(t, NestedTensor):
        return ["NT", t._ragged_idx, _dims(t), *_flat(t._values.detach()), t._offsets]
    if is_traceable_wrapper_subclass(t):
        attrs, _ = t.__tensor_flatten__()
        out: list[Any] = [type(t).__name__, tuple(t.shape), _dims(t, t.stride())]
        for a in attrs:
            out += _flat(getattr(t, a).detach())
        return out
    return [type(t).__name__, t.dtype, tuple(t.shape), t.detach().clone()]


def _nested_ints(o: torch.Tensor, args: list[Any]) -> list[Any]:
    """For each nested dim of o: which nested args' ragged size it equals."""
    rows = []
    for d in o.shape:
        if not isinstance(d, int):
            rows.append([i for i, a in enumerate(args) if a.is_nested and d == a.shape[1]])
    return rows


def _out_record(o: Any, args: list[Any]) -> list[Any]:
    if not isinstance(o, torch.Tensor):
        return [o]
    tensors = [a if isinstance(a, torch.Tensor) else None for a in args]
    return [
        *_flat(o),
        ("requires_grad", o.requires_grad, "is_leaf", o.is_leaf, "no_fn", o.grad_fn is None),
        ("is", [i for i, a in enumerate(tensors) if o is a]),
        ("base", [i for i, a in enumerate(tensors) if a is not None and o._base is a]),
        ("nested_ints", _nested_ints(o, args)),
    ]


def _out_relations(outs: list[Any]) -> list[Any]:
    """Which outputs are each other, or the base of each other, or share a version counter."""
    ts = [o for o in outs if isinstance(o, torch.Tensor)]
    return [
        ([j for j, p in enumerate(ts) if p is o], [j for j, p in enumerate(ts) if o._base is p])
        for o in ts
    ]


def _in_record(a: Any) -> list[Any]:
    if not isinstance(a, torch.Tensor):
        return [a]
    state = (a._version, a.requires_grad, a.is_leaf, a.grad_fn is None, _dims(a, a.stride()))
    return [*_flat(a), ("version/rg/leaf/no_fn/stride", state)]


def _term(v: torch.Tensor) -> torch.Tensor:
    p = v.values() if v.is_nested else v
    w = torch.arange(p.numel(), dtype=p.dtype).reshape(p.shape).sin() + 1.5
    return (p * p * w).sum()


def _backward(outs: list[Any], args: list[Any]) -> Any:
    """Backward over the outputs and the non-leaf inputs' later uses; the error type if any."""
    vals = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    vals += [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad and not a.is_leaf]
    vals = [v for v in vals if v.dtype.is_floating_point]
    if not vals:
        return None
    try:
        total = sum((_term(v) for v in vals[1:]), _term(vals[0]))
        total.backward()
    except Exception as e:
        return ("backward raised", type(e).__name__)
    return None


def _run(call: Callable[..., Any], make: Callable[..., Any], ctx: Any, post: Any) -> list[Any]:
    args, leaves = make()
    try:
        with ctx():
            out = call(*args)
    except Exception as e:
        return ["raised", type(e), [_in_record(a) for a in args]]
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if post is not None:  # the caller's own use of the outputs before the records
        post(outs, args)
    rec: list[Any] = [[_out_record(o, args) for o in outs], [_in_record(a) for a in args]]
    rec.append(_out_relations(outs))
    rec.append(_backward(outs, args))
    rec.append([_flat(leaf.grad) if leaf.grad is not None else None for leaf in leaves])
    return rec


def _assert_same(got: Any, want: Any, path: str = "") -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), (path, got, want)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True, msg=path)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (path, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{path}/{i}")
    else:
        assert got == want, (path, got, want)


@dataclass
class Program:
    fn: Callable[..., Any]
    makes: tuple[Callable[..., Any], ...]
    ctx: Any = contextlib.nullcontext
    entries: list[str] = field(default_factory=lambda: list(ENTRIES))
    refusal_ok: bool = False
    post: Any = None


def registry() -> tuple[dict[str, Program], Callable[..., Any]]:
    """A fresh programs dict for one test module, and the decorator that fills it."""
    programs: dict[str, Program] = {}

    def program(*makes: Any, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            programs[fn.__name__] = Program(fn, makes, **kw)
            return fn

        return deco

    return programs, program


def compiled(fn: Callable[..., Any], entry: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    if entry == "aot_function":
        return aotgrad.aot_function(fn, aotgrad.nop)
    if entry in ("aotgrad_eager", "aotgrad"):
        return torch.compile(fn, backend=entry, fullgraph=True, options={"strict": True})
    return torch.compile(fn, backend=entry, fullgraph=True)


def check_program(programs: dict[str, Program], name: str, entry: str) -> None:
    prog = programs[name]
    comp = compiled(prog.fn, entry)
    for make in prog.makes:
        want = _run(prog.fn, make, prog.ctx, prog.post)
        got = _run(comp, make, prog.ctx, prog.post)
        if prog.refusal_ok and got[0] == "raised" and got[1] is UnsupportedError:
            return
        if want[0] == "raised" or got[0] == "raised":
            assert got[0] == want[0] == "raised", (got[:2], want[:2])
            assert issubclass(got[1], want[1]), (got[1], want[1])
            _assert_same(got[2], want[2], "inputs after raise")
            continue
        _assert_same(got[0], want[0], "outputs")
        _assert_same(got[1], want[1], "inputs after")
        _assert_same(got[2], want[2], "output relations")
        _assert_same(got[3], want[3], "backward")
        _assert_same(got[4], want[4], "leaf grads")


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


# Nested TwoTensor


def _nested_two(grad: bool, seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        x = TwoTensor(_two((2, 3), False), _two((2, 3), False)).requires_grad_(grad)
        return ([x.clone()] if grad else [x]), ([x] if grad else [])

    return make


# More: the caller's writes to returned views, aliased inputs, second calls


def _write_first_output(outs: list[Any], args: list[Any]) -> None:
    with torch.no_grad():
        outs[0].mul_(10)


class _DoubleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


def _nested4(seed: int = 0, grad: bool = True) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        parts = [torch.randn(n, 2, 4) for n in (2, 3)]
        x = torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=grad)
        return [x], [x] if grad else []

    return make
