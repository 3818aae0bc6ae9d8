"""Inputs written with autograd that outputs read after the write ("linked" inputs: the
runtime hands the gradient of those reads to the node the write gives the caller's
tensor, ``runtime.post_write_link``), with hooks on the input and with outputs the
function computes other outputs from (``runtime.fed_outputs_link``).

Silent wrong gradients found by the fidelity soak (235965, 236812) and their families:
- a hook the function registers on the input after its write, then ``retain_grad()``
  (``x.sin_(); x.register_hook(lambda g: g.clamp(-.5, .5)); x.retain_grad()``): the
  leaf's gradient came out 0 and the input's ``.grad`` unclamped. The hook was traced, and
  in a pass where the link hands the input's node its gradient, the runtime took back out
  what that gradient passes on, computed through the hook alone: right only for a hook
  linear in the gradient. Such hooks are now registered on the caller's tensor after its
  write-back (eager's place), and the link's gradient is taken out of the new value's
  tangent before the backward runs, so hooks registered before or between the writes see
  eager's gradient too;
- a view input written under ``no_grad`` (linked: its node is rebuilt from its base's)
  beside an output the function computes another from (``t3 = x.tanh(); ...; return t3,
  t3 * x``): ``autograd.grad(loss, t3)`` missed what ``t3 * x`` passes back, because the
  fed outputs' link was left off wherever the post-write link was on. Both are on now,
  the fed outputs' outermost.
Eager PyTorch is the oracle: every leaf's gradient, ``.grad`` of retained inputs and
outputs, ``autograd.grad`` with respect to the inputs and the outputs.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS

HOOKS: dict[str, Callable] = {
    "clamp": lambda g: g.clamp(-0.5, 0.5),
    "x10": lambda g: g * 10,
    "square": lambda g: g * g.abs(),
}


def hook_after_write_retained(x, h):
    x.sin_()
    x.register_hook(h)
    x.retain_grad()
    return ((x * 2) ** 2,)


def hook_between_writes(x, h):
    x.sin_()
    x.register_hook(h)
    x.mul_(3)
    return ((x * 2) ** 2,)


def hook_after_write_input_returned(x, h):
    x.sin_()
    x.register_hook(h)
    return (x,)


def two_hooks_retained(x, h):
    x.sin_()
    x.register_hook(h)
    x.register_hook(lambda g: g + 1)
    x.retain_grad()
    return (x.exp() * 2,)


def hooks_before_and_after_write(x, h):
    x.register_hook(h)
    x.sin_()
    x.register_hook(h)
    return (x.cos(),)


def row_written_then_hooked(x, h):
    x[0].sin_()
    x.register_hook(h)
    return (x.sum(0) ** 2,)


def written_hooked_view_returned(x, h):
    x.mul_(2)
    x.register_hook(h)
    return x[1:], x * x


HOOKED = [
    hook_after_write_retained,
    hook_between_writes,
    hook_after_write_input_returned,
    two_hooks_retained,
    hooks_before_and_after_write,
    row_written_then_hooked,
    written_hooked_view_returned,
]


def fed_before_write(x):
    t3 = x.tanh()
    x.mul_(2)
    return t3, t3 * x


def fed_after_write(x):
    x.sin_()
    t3 = x * 3
    return t3, t3.exp()


def fed_beside_no_grad_row_write(x):
    with torch.no_grad():
        x[0].fill_(0.5)
    t3 = x * x
    return t3, t3.sum(0)


def fed_hooked_beside_no_grad_rows_write(x):
    t2 = x.detach()
    t3 = x.tanh()
    with torch.no_grad():
        x[1:3].fill_(0.25)
    t5 = torch.addmm(t3, t2 @ t3.t(), t3)
    t5.register_hook(lambda g: g * 2)
    return t3, torch.mm(t5, x.t())


FED = [fed_before_write, fed_after_write, fed_beside_no_grad_row_write]
FED += [fed_hooked_beside_no_grad_rows_write]

#: How the caller takes gradients after the call.
OBSERVE = ["backward", "retain", "grad_inputs", "grad_outputs", "grad_all"]


def _observe(fn: Callable, compile_: Callable | None, view: bool, how: str, *extra: Any) -> list:
    g = torch.Generator().manual_seed(0)
    leaf = torch.randn(3, 4, dtype=torch.float64, generator=g).requires_grad_()
    x = leaf.clone()
    if view:
        x = x.t()
    f = fn if compile_ is None else compile_(fn)
    outs = f(x, *extra)
    if how == "retain":
        x.retain_grad()
        for o in outs:
            o.retain_grad()
    loss = sum((o * (k + 1.5)).sum() for k, o in enumerate(outs)) + (x * x).sum()
    if how == "grad_inputs":
        return list(torch.autograd.grad(loss, [leaf, x]))
    if how == "grad_outputs":
        return list(torch.autograd.grad(loss, [leaf, *outs]))
    if how == "grad_all":
        return list(torch.autograd.grad(loss, [leaf, x, *outs]))
    loss.backward()
    return [leaf.grad, x.grad, *(o.grad for o in outs)] if how == "retain" else [leaf.grad]


def _assert_like_eager(fn: Callable, compiler: str, view: bool, how: str, *extra: Any) -> None:
    want = _observe(fn, None, view, how, *extra)
    got = _observe(fn, COMPILERS[compiler], view, how, *extra)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert (a is None) == (b is None), f"result {k}: eager {b}, compiled {a}"
        if b is not None:
            torch.testing.assert_close(a, b, msg=f"result {k}")


AOT = ["aot_function-min_cut", "aot_function-default"]


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize(
    ("fn", "hook", "how", "compiler"),
    list(itertools.product(HOOKED, HOOKS, OBSERVE, AOT)),
    ids=lambda v: getattr(v, "__name__", v),
)
def test_hooks_on_linked_inputs_like_eager(fn: Callable, hook: str, how: str, compiler: str):
    _assert_like_eager(fn, compiler, False, how, HOOKS[hook])


@pytest.mark.parametrize(
    ("fn", "view", "how", "compiler"),
    list(itertools.product(FED, [False, True], OBSERVE, AOT)),
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_fed_outputs_beside_linked_inputs_like_eager(fn: Callable, view: bool, how: str, compiler):
    _assert_like_eager(fn, compiler, view, how)
