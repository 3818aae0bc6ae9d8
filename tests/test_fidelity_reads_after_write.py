"""Reads of an input after the function wrote it reach the input's new node, as eager's.

``x.mul_(2); return (x * w).sin()``: eager's output goes through the node the write gave
``x``, so ``torch.autograd.grad(out, x)``, ``x.retain_grad()`` and a hook registered on
``x`` after the call see what those reads pass back. The compiled call used to connect
them to the node ``x`` had when called: None where eager has a gradient (soak 160005,
160117, 160408; the fidelity sample's seed 109; round 48's strict xfail). Totals into
the leaves were right either way, and must stay right: each test checks them too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, assert_like_eager

DT = torch.float64


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class _Dirty(torch.autograd.Function):
    """Writes its input in place, ``mark_dirty``; a backward of its own (not 2: 3)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 3


def _mul_then_read(x, w):
    x.mul_(2)
    return ((x * w).sin(),)


def _read_before_and_after(x, w):
    y = x + w  # before the write: through the node x had
    x.add_(w)
    return (y + x.cos(),)


def _masked_write_then_read(x, w):
    x[x > 0] = 0.0
    return (torch.where(x > 0, x, w) * x,)


def _write_then_return_read_and_detached(x, w):
    x.mul_(w)
    return x.exp(), x.detach()


def _custom_dirty_then_read(x, w):
    t = _Dirty.apply(x)
    return (t * w, x.sum())


def _written_twice_read_between(x, w):
    x.mul_(2)
    y = x + w  # reads the first write's node: not the one x has after the call
    x.add_(1)
    return (y, x.tanh())


def _write_under_no_grad_then_read(x, w):
    with torch.no_grad():
        x.mul_(3)
    return (x * w,)


def _write_with_grad_then_no_grad(x, w):
    x.mul_(w)
    t = x * 3
    with torch.no_grad():
        x.add_(1)  # moves the version; the node stays
    return (t,)


def _write_gradless_input_then_read(x, w):
    x.copy_(w * 2)  # x does not require grad: the write gives it a history
    return (x.sin(),)


def _write_read_through_view(x, w):
    x.mul_(w)
    return (x[1:3] * 2, x.t().exp())


def _write_read_by_another_write(x, w):
    x.mul_(2)
    w.copy_(x * 3)  # another written input's new value reads x after the write
    return (x.sin(),)


def _transposed_then_read(x, w):
    x.t_()  # a metadata change autograd records: x's new node
    return (x * w.t(),)


def _unsqueezed_written_then_read(x, w):
    x.unsqueeze_(0)
    x.mul_(w)
    return ((x * x).sum(1),)


PROGRAMS = [
    _transposed_then_read,
    _unsqueezed_written_then_read,
    _mul_then_read,
    _read_before_and_after,
    _masked_write_then_read,
    _write_then_return_read_and_detached,
    _custom_dirty_then_read,
    _written_twice_read_between,
    _write_under_no_grad_then_read,
    _write_with_grad_then_no_grad,
    _write_read_through_view,
]


def _args(w_grad: bool = True) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    leaf = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=True)
    w = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=w_grad)
    return [leaf.clone(), w], [leaf, w] if w_grad else [leaf]


def _observed(fn: Callable, how: str, make: Callable = _args) -> list[Any]:
    """What the caller sees at the written input's node (``how``), then every leaf's
    gradient after a ``backward`` of the same outputs."""
    args, leaves = make()
    x = args[0]
    outs = [o for o in fn(*args) if isinstance(o, torch.Tensor) and o.requires_grad]
    cots = [torch.full_like(o, 1.0 + k) for k, o in enumerate(outs)]
    seen: list[Any] = []
    if how == "autograd_grad":
        asked = torch.autograd.grad(outs, [x, *leaves], cots, retain_graph=True, allow_unused=True)
        seen += [None if g is None else g.detach().clone() for g in asked]
    elif how == "retain_grad":
        x.retain_grad()
    elif how == "hook":
        seen_by_hook: list[Any] = []
        x.register_hook(lambda g: seen_by_hook.append(g.clone()))
    torch.autograd.backward(outs, [c.clone() for c in cots])
    if how == "retain_grad":
        seen.append(x.grad)
    elif how == "hook":
        seen.append(seen_by_hook)
    return seen + [leaf.grad for leaf in leaves]


def _assert_same(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w), f"result {k}: {w} vs {g}"
            for a, b in zip(g, w, strict=True):
                torch.testing.assert_close(a, b, msg=f"result {k}")
            continue
        assert (g is None) == (w is None), f"result {k}: eager {w}, compiled {g}"
        if w is not None:
            torch.testing.assert_close(g, w, msg=f"result {k}")


@pytest.mark.parametrize("how", ["autograd_grad", "retain_grad", "hook"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_the_written_inputs_node_sees_the_reads_after_the_write(
    fn: Callable, compiler: str, how: str
) -> None:
    want = _observed(fn, how)
    got = _observed(COMPILERS[compiler](fn), how)
    _assert_same(got, want)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_mul_then_read, _custom_dirty_then_read, _written_twice_read_between]
)
def test_everything_else_stays_like_eager(fn: Callable, compiler: str) -> None:
    """Outputs' metadata, version counts, the inputs after the call, leaf gradients."""
    assert_like_eager(fn, _args, COMPILERS[compiler])


def test_a_gradless_input_given_a_history_by_the_write() -> None:
    """``x`` requires no grad; the write of a value that does gives it a node, which the
    reads after the write reach (the fidelity sample's seed 109, for ``x0``)."""

    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        g = torch.Generator().manual_seed(3)
        w = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=True)
        return [torch.randn(4, 4, dtype=DT, generator=g), w], [w]

    for compiler in COMPILERS.values():
        fn = _write_gradless_input_then_read
        _assert_same(
            _observed(compiler(fn), "autograd_grad", make), _observed(fn, "autograd_grad", make)
        )


def _relaid_read_by_another_write(x, w):
    x.t_()
    w[:, 1:3].copy_(x.sum())  # (soak 246825: the gradient at the caller's x was None)
    return (w.sum() * 2,)


def _read_by_another_write_and_the_output(x, w):
    x.mul_(2)
    w.add_(x.sin())
    return (w * x,)


def _relaid_read_by_another_write_and_the_output(x, w):
    x.t_()
    w.mul_(x * 3)
    return (w * 2 + x,)


READ_BY_ANOTHER_WRITE = [
    _write_read_by_another_write,
    _relaid_read_by_another_write,
    _read_by_another_write_and_the_output,
    _relaid_read_by_another_write_and_the_output,
]


@pytest.mark.parametrize("how", ["none", "autograd_grad", "retain_grad", "hook"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", READ_BY_ANOTHER_WRITE, ids=lambda f: f.__name__.strip("_"))
def test_a_read_by_another_inputs_write_reaches_the_node(
    fn: Callable, compiler: str, how: str
) -> None:
    """Another written input's new value reads ``x`` after its write: the runtime passes
    that value through a link onto ``x``'s new node before writing it, so the node sees
    what the value's gradient passes back (and what the caller's later uses of the other
    input pass back), as eager's; the totals stay eager's."""
    make = lambda: _args(w_grad=False)  # noqa: E731
    _assert_same(_observed(COMPILERS[compiler](fn), how, make), _observed(fn, how, make))


def _read_by_a_chain_of_writes(x, w, v):
    x.mul_(2)
    w.add_(x.sin())
    v.add_(w.cos())  # (reads x through w's new value: one link per step)
    return (v * 2,)


def _relaid_read_by_two_writes(x, w, v):
    x.t_()
    w.add_(x.sin())
    v.add_(x.cos())
    return (w * v,)


@pytest.mark.parametrize("how", ["none", "autograd_grad", "retain_grad", "hook"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_read_by_a_chain_of_writes, _relaid_read_by_two_writes], ids=["chain", "two"]
)
def test_several_writes_reading_the_input(fn: Callable, compiler: str, how: str) -> None:
    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        g = torch.Generator().manual_seed(5)
        leaf = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=True)
        w, v = (torch.randn(4, 4, dtype=DT, generator=g) for _ in "wv")
        return [leaf.clone(), w, v], [leaf]

    _assert_same(_observed(COMPILERS[compiler](fn), how, make), _observed(fn, how, make))


def test_checkpointed_reads_after_the_write() -> None:
    """A non-reentrant checkpoint after the write (soak 160005): the region differentiates
    once; the linking must not run a second backward through it."""

    def fn(x):
        x[x > 0] = 0.0
        t = torch.where(x > 0, x, x)
        return (torch.utils.checkpoint.checkpoint(lambda a: a.sin() * a, t, use_reentrant=False),)

    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=DT, generator=torch.Generator().manual_seed(1))
        leaf.requires_grad_()
        return [leaf.clone()], [leaf]

    want = _observed(fn, "autograd_grad", make)
    assert want[0] is not None
    for compiler in COMPILERS.values():
        with warnings.catch_warnings():
            warnings.simplefilter("error", EagerReplayWarning)
            got = _observed(compiler(fn), "autograd_grad", make)
        _assert_same(got, want)


def _counting_backward() -> tuple[Callable, list[int]]:
    runs = [0]

    def compiler(gm: Any, example_inputs: Any) -> Callable:
        def run(*args: Any) -> Any:
            runs[0] += 1
            return gm(*args)

        return run

    return compiler, runs


@pytest.mark.parametrize("how", ["backward", "autograd_grad", "retain_grad", "inputs"])
def test_the_backward_runs_twice_only_where_the_pass_can_see_the_node(how: str) -> None:
    """The gradient at the written input's node costs a second run of the compiled
    backward; a plain ``backward()`` (no ``inputs=``, no retain_grad or hook on the
    input) cannot see it and runs it once, with eager's totals."""
    import aotgrad

    compiler, runs = _counting_backward()
    compiled = aotgrad.aot_function(_mul_then_read, aotgrad.nop, bw_compiler=compiler)
    for fn in (_mul_then_read, compiled):
        runs[0] = 0
        args, (leaf, w) = _args()
        x = args[0]
        (out,) = fn(*args)
        if how == "retain_grad":
            x.retain_grad()
        if how == "autograd_grad":
            seen = torch.autograd.grad(out.sum(), [x, w])
        elif how == "inputs":
            out.sum().backward(inputs=[x, leaf])
            seen = (x.grad, leaf.grad)
        else:
            out.sum().backward()
            seen = (x.grad, leaf.grad, w.grad)
        if fn is _mul_then_read:
            want = seen
        else:
            _assert_same(list(seen), list(want))
    assert runs[0] == (1 if how == "backward" else 2)


def test_through_inductor() -> None:
    """The compiled backward (Inductor's C++ kernels) runs twice on the same saved
    tensors in a pass that asks for the input's gradient: nothing it reads is donated."""
    torch._dynamo.reset()
    compiled = torch.compile(_mul_then_read, backend="aotgrad")
    for how in ("autograd_grad", "retain_grad"):
        _assert_same(_observed(compiled, how), _observed(_mul_then_read, how))


def _strided_then_slice_written(x, w):
    x.as_strided_((2, 2), (4, 1))  # (soak 249393: the gradient at the caller's x was None)
    x[:, 0].mul_(2)
    return (x * w[:2, :2],)


def _written_then_strided(x, w):
    x.mul_(2)
    x.as_strided_((2, 2), (4, 1))
    return (x.sin(),)


def _strided_at_an_offset_then_written(x, w):
    x.as_strided_((2, 3), (4, 1), 5)
    x.add_(w[:2, :3])
    return (x * x,)


def _read_before_and_after_strided(x, w):
    y = x * 2  # before the change: through the node x had
    x.as_strided_((3,), (5,))
    x.mul_(3)
    return (y.sum() + x, x.cos())


def _strided_past_the_old_layout_then_written(x, w):
    x.as_strided_((8,), (2,))
    x.mul_(w.reshape(-1)[:8])
    return (x.exp(),)


def _strided_written_without_grad_then_read(x, w):
    x.as_strided_((2, 2), (4, 1))
    with torch.no_grad():
        x.add_(1)
    return (x * w[:2, :2],)


def _strided_written_twice_read_between(x, w):
    x.as_strided_((2, 2), (1, 4))
    x.mul_(2)
    y = x.sum()
    x.add_(w[:2, :2])
    return (y * x,)


#: Metadata changes that cover other elements than the input's (``as_strided_``): the
#: value is written back in the caller's layout, then the new metadata is recorded.
STRIDED = [
    _strided_then_slice_written,
    _written_then_strided,
    _strided_at_an_offset_then_written,
    _read_before_and_after_strided,
    _strided_past_the_old_layout_then_written,
    _strided_written_without_grad_then_read,
    _strided_written_twice_read_between,
]


@pytest.mark.parametrize("how", ["none", "autograd_grad", "retain_grad", "hook"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", STRIDED, ids=lambda f: f.__name__.strip("_"))
def test_reads_after_a_strided_change_reach_the_node(fn: Callable, compiler: str, how: str) -> None:
    """``x.as_strided_(...)`` and a write, then reads of ``x``: eager's outputs reach the
    node ``x`` leaves with (its write's, or the change's), so ``autograd.grad(out, x)``,
    ``retain_grad()`` and hooks see those reads; the totals stay eager's."""
    _assert_same(_observed(COMPILERS[compiler](fn), how), _observed(fn, how))


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", STRIDED[:4], ids=lambda f: f.__name__.strip("_"))
def test_strided_changes_stay_like_eager(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, _args, COMPILERS[compiler])


def _viewed_t_without_grad(x, w):
    with torch.no_grad():
        x.t_()  # (eager rebuilds the view's node on its next read: the reads reach it)
    return (x * w.t(),)


def _viewed_unsqueezed_without_grad(x, w):
    with torch.no_grad():
        x.unsqueeze_(0)
    return ((x * w).sin().sum(0),)


def _viewed_strided_without_grad_then_viewed(x, w):
    with torch.no_grad():
        x.as_strided_((2, 2), (1, 4))
    return x[0] * 3, (x * w[:2, :2]).sum()


VIEW_INPUTS = {
    "transposed": lambda leaf: leaf.clone().t(),
    "rows": lambda leaf: leaf.clone()[:, :],
}


@pytest.mark.parametrize("how", ["autograd_grad", "retain_grad", "hook"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("view", list(VIEW_INPUTS))
@pytest.mark.parametrize(
    "fn",
    [
        _viewed_t_without_grad,
        _viewed_unsqueezed_without_grad,
        _viewed_strided_without_grad_then_viewed,
    ],
    ids=lambda f: f.__name__.strip("_"),
)
def test_reads_after_a_no_grad_change_of_a_view_reach_its_rebuilt_node(
    fn: Callable, view: str, compiler: str, how: str
) -> None:
    """A view input re-laid under no_grad (blind metadata suite: ``x = base.t()``,
    ``x.t_()`` under no_grad): eager rebuilds its node from the base on the next read,
    and the reads after go through it; the compiled call's outputs reached the node the
    view had when called (``autograd.grad(out, x)`` raised "not used in the graph")."""

    def make() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        g = torch.Generator().manual_seed(7)
        leaf = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=True)
        w = torch.randn(4, 4, dtype=DT, generator=g, requires_grad=True)
        return [VIEW_INPUTS[view](leaf), w], [leaf, w]

    _assert_same(_observed(COMPILERS[compiler](fn), how, make), _observed(fn, how, make))
