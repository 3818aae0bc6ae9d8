"""Blind programs over tensor subclasses (``TwoTensor``, jagged ``NestedTensor``): each runs
eagerly and through aotgrad, comparing outputs (values, types, shapes and nested ints,
requires_grad, is_leaf, grad_fn, identity and ``_base`` against the inputs), the inputs
after the call (values, metadata, version counters, autograd state), and every leaf's
gradient after a backward over the outputs and the inputs' later uses."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.nested._internal.nested_tensor import NestedTensor
from torch.testing._internal.subclasses import WrapperSubclass
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import aotgrad
from aotgrad.errors import UnsupportedError

ENTRIES = ["aot_function", "aotgrad_eager"]

# (program, entry) -> why it differs from eager (filled from the runs)
XFAIL: dict[tuple[str, str], str] = {
    (
        "n_sdpa",
        "aot_function",
    ): "SDPA on a jagged NT (CPU): TraceError (no fake for _nested_tensor_from_tensor_list)",
    ("n_sdpa", "aotgrad_eager"): "Dynamo refuses SDPA on a jagged NT (Unsupported); aot_eager too",
    (
        "t_duplicate_written_input",
        "aot_function",
    ): "same TwoTensor passed twice and written: UnsupportedError (plain: runs)",
    (
        "t_meta_t_",
        "aot_function",
    ): "t_ on a TwoTensor input raises RuntimeError (internal overlap); eager runs",
    ("t_meta_t_", "aotgrad_eager"): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_transpose_",
        "aot_function",
    ): "transpose_ on a TwoTensor input: the input's shape is not changed after the call",
    (
        "t_meta_transpose_",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_unsqueeze_",
        "aot_function",
    ): "unsqueeze_ on a TwoTensor input raises RuntimeError (internal overlap); eager runs",
    (
        "t_meta_unsqueeze_",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_and_write",
        "aot_function",
    ): "t_ then a write on a TwoTensor input: the input's shape is not changed after the call",
    (
        "t_meta_and_write",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_requires_grad_on_output",
        "aot_function",
    ): "requires_grad_() on an output made in the function: output is not a leaf (eager: leaf)",
    (
        "t_requires_grad_on_output",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_with_wrapper_subclass",
        "aot_function",
    ): "backward raises UnsupportedError: gradient of WrapperSubclass output arrives as TwoTensor",
    (
        "t_with_wrapper_subclass",
        "aotgrad_eager",
    ): "backward raises UnsupportedError: gradient of WrapperSubclass output arrives as TwoTensor",
    (
        "t_nested_two_tensor_mm",
        "aot_function",
    ): "leaf's grad is zeros where eager leaves it None (TwoTensor built inside)",
    (
        "t_nested_two_tensor_mm",
        "aotgrad_eager",
    ): "leaf's grad is zeros where eager leaves it None (TwoTensor built inside)",
    ("n_unbind", "aot_function"): "unbind of a NT: UnsupportedError (data-dependent sizes)",
    ("n_unbind", "aotgrad_eager"): "unbind of a NT: UnsupportedError (data-dependent sizes)",
    (
        "n_from_jagged_inside",
        "aot_function",
    ): "nested_tensor_from_jagged inside the function: EagerReplayWarning / BackendCompilerFailed",
    (
        "n_from_jagged_inside",
        "aotgrad_eager",
    ): "nested_tensor_from_jagged inside: BackendCompilerFailed (aot_eager passes)",
    (
        "n_requires_grad_on_output",
        "aot_function",
    ): "requires_grad_() on a NT output made in the function: UnsupportedError",
    (
        "n_requires_grad_on_output",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "n_caller_writes_returned_values",
        "aot_function",
    ): "caller's write to returned x.values(): input's version not bumped, later use raises RuntimeError (_Detached view)",
    (
        "n_caller_writes_returned_values",
        "aotgrad_eager",
    ): "caller's write to returned x.values(): input's version not bumped, later use raises RuntimeError (_Detached view)",
    (
        "t_aliased_inputs_write_view",
        "aot_function",
    ): "TwoTensor base and its view as inputs, view written: UnsupportedError (not seen as views of one tensor)",
    (
        "t_aliased_inputs_write_view",
        "aotgrad_eager",
    ): "TwoTensor base and its view as inputs, view written: UnsupportedError (not seen as views of one tensor)",
    (
        "t_custom_function_mark_dirty",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "n_custom_function_mark_dirty",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_requires_grad_on_input",
        "aot_function",
    ): "x.requires_grad_() on a TwoTensor input: the caller's x stays requires_grad=False",
    (
        "t_requires_grad_on_input",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "n_write_values_slice",
        "aot_function",
    ): "x.values()[:2].mul_ on a NT input: EagerReplayWarning (new_empty_strided)",
    (
        "n_write_values_slice",
        "aotgrad_eager",
    ): "x.values()[:2].mul_ on a NT input: EagerReplayWarning (new_empty_strided)",
    ("t_meta_t_", "aotgrad"): "Dynamo refuses t_ on a TwoTensor input (Unsupported); aot_eager too",
    (
        "n_values_and_input_returned",
        "aot_function",
    ): "x.values() of a non-leaf NT: _base is None (eager: x); aot_eager too",
    (
        "n_values_and_input_returned",
        "aotgrad_eager",
    ): "x.values() of a non-leaf NT: _base is None (eager: x); aot_eager too",
    (
        "t_chain_of_views",
        "aot_function",
    ): "view of another TwoTensor output: _base is None (eager: that output)",
    (
        "t_chain_of_views",
        "aotgrad_eager",
    ): "view of another TwoTensor output: _base is None (eager: that output)",
}


# ----------------------------------------------------------------------------- inputs


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


# ----------------------------------------------------------------------------- records


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


# ----------------------------------------------------------------------------- programs


@dataclass
class Program:
    fn: Callable[..., Any]
    makes: tuple[Callable[..., Any], ...]
    ctx: Any = contextlib.nullcontext
    entries: list[str] = field(default_factory=lambda: list(ENTRIES))
    refusal_ok: bool = False
    post: Any = None


PROGRAMS: dict[str, Program] = {}


def program(*makes: Any, **kw: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        PROGRAMS[fn.__name__] = Program(fn, makes, **kw)
        return fn

    return deco


def compiled(fn: Callable[..., Any], entry: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    if entry == "aot_function":
        return aotgrad.aot_function(fn, aotgrad.nop)
    if entry in ("aotgrad_eager", "aotgrad"):
        return torch.compile(fn, backend=entry, fullgraph=True, options={"strict": True})
    return torch.compile(fn, backend=entry, fullgraph=True)


def check_program(name: str, entry: str) -> None:
    prog = PROGRAMS[name]
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


# TwoTensor: inputs that are leaves, clones of leaves, without grad


@program(mk("T", "T"), mk("T", "T", seed=1))
def t_leaves(x, y):
    return (x * y).sin() + x


@program(mk("Tc"))
def t_clone_of_leaf(x):
    return x.exp() * 2


@program(mk("T0", "T"))
def t_one_without_grad(x, y):
    return x * y, x + 1


@program(mk("T0", "T0"))
def t_no_grad_inputs(x, y):
    return x.mm(y.t()).relu()


# TwoTensor: written in place


@program(mk("Tc"))
def t_write_whole(x):
    x.mul_(2)
    return x.sin()


@program(mk("Tc"))
def t_write_slice(x):
    x[0].add_(1)
    return x * 2


@program(mk("Tc"))
def t_write_transposed_view(x):
    x.t().mul_(3)
    return x.sum(0)


@program(mk("Tc"))
def t_write_under_no_grad(x):
    with torch.no_grad():
        x.add_(1)
    return x * x


@program(mk("T0", "T"))
def t_write_value_requiring_grad(x, y):
    x.copy_(y * 2)
    return x.cos()


@program(mk("T0", "T"))
def t_write_slice_value_requiring_grad(x, y):
    x[1:].add_(y[1:])
    return x.sum()


@program(mk("T"))
def t_write_leaf_raises(x):
    x.add_(1)
    return x * 2


@program(mk("T"))
def t_write_leaf_under_no_grad(x):
    with torch.no_grad():
        x.mul_(0.5)
    return x * 2


@program(mk("Tc"))
def t_write_and_return_input(x):
    x.add_(1)
    return x


@program(mk("T0"))
def t_write_no_grad_input(x):
    x.mul_(3)
    return x + 1


# TwoTensor: metadata mutation


@program(mk("Tc"))
def t_meta_t_(x):
    x.t_()
    return x * 2


@program(mk("T0"))
def t_meta_transpose_(x):
    x.transpose_(0, 1)
    return x + 1


@program(mk("Tc"))
def t_meta_unsqueeze_(x):
    x.unsqueeze_(0)
    return x.sum()


@program(mk("T0"))
def t_meta_and_write(x):
    x.t_()
    x[0].add_(1)
    return x.clone()


# TwoTensor: outputs that are the input or its views, several, detached, mixed


@program(mk("T"), mk("T0"))
def t_return_input(x):
    return x


@program(mk("Tc"))
def t_return_input_and_result(x):
    return x, x * 2


@program(mk("Tc"))
def t_view_as(x):
    return x.view_as(x)


@program(mk("Tc"))
def t_index0(x):
    return x[0]


@program(mk("Tc"), mk("T"))
def t_transpose_out(x):
    return x.transpose(0, 1)


@program(mk("T", "T"))
def t_several_outputs(x, y):
    return x.sin(), x.cos() * y, (x + y).sum()


@program(mk("T"))
def t_detached_outputs(x):
    return x.detach(), x.sin().detach(), x * 2


@program(mk("T", "T0", "T"))
def t_from_several_inputs(x, y, z):
    return torch.cat([x, y, z]), torch.stack([x * z, y])


@program(mk("T", "P0"))
def t_mixed_plain_without_grad(x, p):
    return x * p + p.sum(), p * 2


@program(mk("T", "P"), refusal_ok=True)
def t_mixed_plain_with_grad(x, p):
    return x * p + p.sin()


@program(mk("T0"))
def t_requires_grad_on_output(x):
    y = x * 2
    y.requires_grad_()
    return y, y * 3


@program(mk("T", "W"))
def t_with_wrapper_subclass(x, w):
    return x.sin() * 2, (w * 3).exp().sum(1)


@program(mk(("T", (2, 3))))
def t_nested_two_tensor_mm(x):
    inner = TwoTensor(x, x * 2)
    return (inner * inner).mm(inner.t())


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


@program(mk("T"))
def t_custom_function(x):
    return _Double.apply(x).sin()


@program(mk("Tc"))
def t_custom_function_saving(x):
    return _Exp.apply(x * 0.5) + x


# TwoTensor: second calls


@program(mk("T"), mk("T0"), mk("T"))
def t_second_call_requires_grad(x):
    return x.tanh() * x


@program(mk("T"), mk(("T", (5, 2)), seed=2), mk(("T", (3, 4, 2)), seed=3))
def t_second_call_shapes(x):
    return (x * x).sum(0)


@program(mk("Tc"), mk("T0"), mk("Tc", seed=4))
def t_second_call_writes(x):
    x.mul_(2)
    return x + 1


# TwoTensor: calls under no_grad / inference_mode


@program(mk("T", "T"), ctx=torch.no_grad)
def t_under_no_grad(x, y):
    return x * y + x


@program(mk("T"), ctx=torch.inference_mode)
def t_under_inference_mode(x):
    return x.sin()


@program(mk("T0"), ctx=torch.inference_mode)
def t_write_under_inference_mode(x):
    x.add_(1)
    return x * 2


# Nested TwoTensor


def _nested_two(grad: bool, seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        x = TwoTensor(_two((2, 3), False), _two((2, 3), False)).requires_grad_(grad)
        return ([x.clone()] if grad else [x]), ([x] if grad else [])

    return make


@program(_nested_two(True), _nested_two(False, seed=1))
def tt_nested_write(x):
    x.add_(1)
    return (x * x).sum(0), x.t()


@program(_nested_two(True))
def tt_nested_views(x):
    return x[0], x.view_as(x), x.detach()


# NestedTensor: ops


@program(mk("N", ("P", (3, 4)), ("P", (3,))), mk(("N", (4, 1, 2)), ("P", (3, 4)), ("P", (3,))))
def n_linear(x, w, b):
    return F.linear(x, w, b)


@program(mk("N", "P", "P"), mk(("Nc", (1, 5)), "P0", "P", seed=1))
def n_layer_norm(x, w, b):
    return F.layer_norm(x, (4,), w, b)


@program(mk("N"), mk(("N", (3, 3, 3)), seed=1))
def n_softmax_gelu(x):
    return x.softmax(-1), F.gelu(x)


@program(mk("S", "S"), mk("S0", "S", seed=1))
def n_add_shared_offsets(x, y):
    return x + y * 2


@program(mk("N"))
def n_to_padded(x):
    return torch.nested.to_padded_tensor(x.sin(), 0.0)


@program(mk("N"))
def n_values_offsets(x):
    return x.values() * 2, x.offsets()


@program(mk("N"), mk("N0"))
def n_unbind(x):
    return x.unbind()


@program(mk("N"))
def n_return_values(x):
    return x.values()


@program(mk(("P", (6, 4)), "P0"))
def n_from_jagged_inside(v, p):
    off = torch.tensor([0, 2, 6], dtype=torch.int64)
    nt = torch.nested.nested_tensor_from_jagged(v, off)
    return (nt * 2).sin().values() + p


def _explicit_offsets(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        off = torch.tensor([0, 1, 4, 6])
        a = torch.randn(6, 4, requires_grad=True)
        b = torch.randn(6, 4, requires_grad=True)
        x = torch.nested.nested_tensor_from_jagged(a, off)
        y = torch.nested.nested_tensor_from_jagged(b, off)
        return [x, y], [a, b]

    return make


@program(_explicit_offsets(), _explicit_offsets(seed=1))
def n_explicit_offsets_two_nts(x, y):
    return (x * y).relu() + x, y.cos()


# NestedTensor: leaves, clones, no grad, writes


@program(mk("Nc"), mk("N0"))
def n_clone_of_leaf(x):
    return x.sin() * x


@program(mk("Nc"))
def n_write_whole(x):
    x.mul_(2)
    return x.cos()


@program(mk("Nc"))
def n_write_under_no_grad(x):
    with torch.no_grad():
        x.add_(1)
    return x * 2


@program(mk("N"))
def n_write_leaf_raises(x):
    x.mul_(2)
    return x


@program(mk("N0"))
def n_write_values_view(x):
    x.values().add_(1)
    return x * 2


@program(mk("S0", "S"))
def n_write_value_requiring_grad(x, y):
    x.add_(y)
    return x.sin()


@program(mk("Nc"))
def n_write_and_return(x):
    x.mul_(3)
    return x


# NestedTensor: outputs


@program(mk("N"), mk("N0"))
def n_return_input(x):
    return x


@program(mk("Nc"))
def n_detached_outputs(x):
    return x.detach(), x * 2


@program(mk("N0"))
def n_requires_grad_on_output(x):
    y = x * 2
    y.requires_grad_()
    return y


@program(mk("N", "P"), refusal_ok=True)
def n_mixed_plain_with_grad(x, p):
    return x * p


@program(mk("N"))
def n_custom_function(x):
    return _Double.apply(x).sin()


@program(mk("N"), mk(("N", (4, 1, 2)), seed=1), mk(("N0", (1,)), seed=2), mk("N", seed=3))
def n_second_call_lengths(x):
    return F.gelu(x) * x


@program(mk("N"), ctx=torch.no_grad)
def n_under_no_grad(x):
    return x.softmax(-1)


@program(mk("N"), ctx=torch.inference_mode)
def n_under_inference_mode(x):
    return x * 2


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


# More: the caller's writes to returned views, aliased inputs, second calls


def _write_first_output(outs: list[Any], args: list[Any]) -> None:
    with torch.no_grad():
        outs[0].mul_(10)


@program(mk("Tc"), post=_write_first_output)
def t_caller_writes_returned_view(x):
    return x[1], x * 2


def _write_first_output_with_grad(outs: list[Any], args: list[Any]) -> None:
    outs[0].mul_(10)


@program(mk("Tc"), post=_write_first_output_with_grad)
def t_caller_writes_returned_view_with_grad(x):
    return x[1]


@program(mk("Tc"), post=_write_first_output)
def t_caller_writes_returned_input(x):
    return x


@program(mk("Nc"), post=_write_first_output)
def n_caller_writes_returned_values(x):
    return x.values()


def _base_and_view(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((4, 3), True)
        base = leaf.clone()
        return [base, base[1:]], [leaf]

    return make


@program(_base_and_view())
def t_aliased_inputs_write_view(b, v):
    v.mul_(2)
    return b.sin()


@program(mk("Nc"), mk("N0"), mk("Nc", seed=4))
def n_second_call_writes(x):
    x.mul_(2)
    return x + 1


@program(mk("Tc"), mk("T0"), mk("Tc", seed=4))
def t_second_call_writes_no_grad_block(x):
    with torch.no_grad():
        x.add_(1)
    return x * x


@program(mk("T0", "T"), mk("T", "T", seed=1), mk("T0", "T", seed=2))
def t_second_call_leaf_raises_then_not(x, y):
    x.add_(y)
    return x.sum()


def _wrapped_two(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        x = TwoTensor(WrapperSubclass(torch.randn(3, 2)), WrapperSubclass(torch.randn(3, 2)))
        x.requires_grad_()
        return [x], [x]

    return make


@program(_wrapped_two())
def t_two_tensor_of_wrappers(x):
    return (x * x).sum(0), x.t()


@program(mk("N", "N"))
def n_two_unrelated_nts(x, y):
    return x.sin(), (y * 2).cos()


@program(mk("T0"), mk("T0", seed=1))
def t_no_grad_write_and_view(x):
    x[0].zero_()
    return x[1:], x.sum()


@program(mk("N0"), mk(("N0", (3, 3)), seed=1))  # eager has no backward for sum(-1) of a NT
def n_sum_last_dim_without_grad(x):
    s = (x * x.softmax(-1)).sum(-1, keepdim=True)
    return x * s.sigmoid()


class _DoubleInPlace(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mark_dirty(x)
        return x.mul_(2)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _WithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = torch.zeros(x.shape[0], dtype=torch.int64)
        ctx.mark_non_differentiable(idx)
        return x.sin(), idx

    @staticmethod
    def backward(ctx, g, _):
        return g * 3


@program(mk("Tc"))
def t_custom_function_mark_dirty(x):
    return _DoubleInPlace.apply(x) + 1


@program(mk("T"))
def t_custom_function_non_differentiable(x):
    y, idx = _WithIndex.apply(x)
    return y, idx


@program(mk("Nc"))
def n_custom_function_mark_dirty(x):
    return _DoubleInPlace.apply(x).cos()


@program(mk("T"))
def t_same_output_twice(x):
    y = x * 2
    return y, y, y[0]


@program(mk("Tc"))
def t_detach_then_write(x):
    x.detach().add_(1)
    return x * 2


@program(mk("Nc"))
def n_detach_then_write(x):
    x.detach().mul_(2)
    return x + 1


@program(mk("T0"))
def t_requires_grad_on_input(x):
    x.requires_grad_()
    return x * 2


@program(mk("T", "T"))
def t_where(x, y):
    return torch.where(x > 0, x, y * 2)


@program(mk("T"), _nested_two(True, seed=1), mk(("T0", (2, 2)), seed=2))
def t_second_call_other_layout(x):
    return x.exp() - x


@program(mk("Nc"))
def n_write_values_slice(x):
    x.values()[:2].mul_(2)
    return x.sin()


@program(mk("Tc", "T"))
def t_write_then_view_output(x, y):
    x.mul_(y)
    return x[0], x.t()


@program(mk("N", ("P", (3, 4))), ctx=torch.inference_mode)
def n_linear_under_inference_mode(x, w):
    return F.linear(x, w).relu()


@program(mk(("T", (2, 3, 4))))
def t_bmm_and_reductions(x):
    return torch.bmm(x, x.transpose(1, 2)).mean(-1), x.amax(1), x.norm()


@program(mk("T"))
def t_leaf_write_under_no_grad_returned(x):
    with torch.no_grad():
        x.mul_(2)
    return x, x * 3


@program(mk("Nc"))
def n_values_and_input_returned(x):
    return x, x.values(), x * 2


@program(mk("T", "T0"))
def t_view_of_no_grad_input(x, y):
    return y[0], x * 2, y.expand(2, 3, 4)


def _view_input(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((4, 3), True)
        return [leaf.clone().t()], [leaf]

    return make


@program(_view_input(), _view_input(seed=1))
def t_input_is_view_written(x):
    x.add_(1)
    return x * x


def _nested4(seed: int = 0, grad: bool = True) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        parts = [torch.randn(n, 2, 4) for n in (2, 3)]
        x = torch.nested.nested_tensor(parts, layout=torch.jagged, requires_grad=grad)
        return [x], [x] if grad else []

    return make


@program(_nested4(), _nested4(seed=1, grad=False))
def n_transpose_ragged(x):
    y = x.transpose(1, 2).sin()
    return y, y.transpose(1, 2) * x


@program(mk(("T", (2, 3))), mk(("T", (2, 3)), seed=1))
def t_chain_of_views(x):
    y = x * 2
    v = y.view(3, 2)[1:].t()
    return v, y


@program(mk("Sc", "S0"))
def n_write_shared_offsets_then_add(x, y):
    y.mul_(2)
    x.add_(y)
    return x * y


@program(mk("T", ("T0", (4,))))
def t_broadcast_two_subclasses(x, y):
    return x * y, (x + y).mean(0)


@program(mk(("T", (4, 4))))
def t_matmul_softmax(x):
    return (x @ x.t()).softmax(-1), torch.linalg.vector_norm(x, dim=1)


def _inner_aliased(view: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(0)
        t = torch.randn(3)
        return [TwoTensor(t, t.view(3) if view else t)], []

    return make


@program(_inner_aliased(False), _inner_aliased(True))
def t_inner_aliased_written(x):
    x.mul_(2)
    return x + 1, x[0].clone()


@program(mk("Tc", "T"), ctx=torch.no_grad)
def t_write_clone_under_no_grad_call(x, y):
    x.add_(y)
    return x * 2


@program(mk("Nc"), ctx=torch.no_grad)
def n_write_clone_under_no_grad_call(x):
    x.mul_(2)
    return x.sin()


@program(mk("Tc"), ctx=torch.inference_mode)
def t_write_clone_under_inference_mode(x):
    x.mul_(2)
    return x.cos()


def _same_twice(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((3,), True)
        x = leaf.clone()
        return [x, x], [leaf]

    return make


@program(_same_twice())
def t_duplicate_written_input(x, y):
    x.add_(1)
    return x * y


@program(_nested4(), _nested4(seed=1, grad=False))
def n_sdpa(q):
    t = q.transpose(1, 2)
    return F.scaled_dot_product_attention(t, t, t).transpose(1, 2)


@program(mk("N"), mk("N0"))
def n_chunk_last_dim(x):
    a, b = x.chunk(2, -1)
    return a, a * b


def _narrowed(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        base = torch.randn(3, 5, 2)
        starts, lens = torch.tensor([0, 1, 2]), torch.tensor([3, 2, 1])
        return [torch.nested.narrow(base, 1, starts, lens, layout=torch.jagged)], []

    return make


@program(_narrowed())
def n_with_lengths(x):
    return torch.nested.to_padded_tensor(x.sin() * 2, 0.0)


# ----------------------------------------------------------------------------- tests


CASES = [(n, e) for n, p in PROGRAMS.items() for e in p.entries]
INDUCTOR = [
    "t_leaves",
    "t_write_whole",
    "n_linear",
    "n_write_whole",
    "t_meta_t_",
    "n_softmax_gelu",
    "t_several_outputs",
    "n_add_shared_offsets",
    "n_second_call_lengths",
    "t_write_under_no_grad",
    "n_explicit_offsets_two_nts",
    "t_custom_function_saving",
]


@pytest.mark.parametrize(("name", "entry"), CASES + [(n, "aotgrad") for n in INDUCTOR])
def test_program(name: str, entry: str, request: pytest.FixtureRequest) -> None:
    if (name, entry) in XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL[(name, entry)]))
    check_program(name, entry)


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
