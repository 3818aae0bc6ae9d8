"""Custom ``autograd.Function`` outputs that view what the function made.

Leaves made inside the function (``t = x.detach().requires_grad_()``) passed through a
custom ``autograd.Function`` that returns a view of its input (``Half.apply(t)``).

Eager's output requires grad (its node is the Function's backward, which accumulates into
``t``). aotgrad took such an output for a view of the leaf to rebuild at runtime, found no
output computed from the leaf, and returned it without grad: the caller's backward raised
(soak 20224). With the leaf returned too, its gradient missed the Function's ``g * 0.5``,
and the output was not a view of the leaf (eager's ``._base`` is the leaf)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import (
    COMPILERS,
    DirtyMul,
    Half,
    SaveOut,
    ViewOf,
    assert_like_eager,
    leaf_clone,
    leaves,
)

DT = torch.float64
AOT = [c for c in COMPILERS if c.startswith("aot_function")]


Doubled = ViewOf  # returns a view of its input; backward g * 2

LEAVES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "detach": lambda x: x.detach().requires_grad_(),
    "clone_detach": lambda x: x.clone().detach().requires_grad_(),
    "factory": lambda x: torch.ones(4, 4, dtype=DT, requires_grad=True),
}

OUTPUTS: dict[str, Callable[[torch.Tensor, torch.Tensor], tuple]] = {
    "half": lambda t, x: (Half.apply(t), x * 1),
    "doubled": lambda t, x: (Doubled.apply(t), x * 1),
    "half_row": lambda t, x: (Half.apply(t)[1], x * 1),
    "row_then_half": lambda t, x: (Half.apply(t[0]), x * 1),
    "half_and_leaf": lambda t, x: (Half.apply(t), t, x * 1),
}


def _input(view: bool, rg: bool) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    """One input: a clone of a leaf (``rg``: that requires grad), or a row block of one."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8 if view else 4, 4, dtype=DT, requires_grad=rg)
        x = leaf.clone()
        return [x[:4] if view else x], [leaf] if rg else []

    return make


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("out", OUTPUTS)
@pytest.mark.parametrize("leaf", LEAVES)
@pytest.mark.parametrize("view", [False, True], ids=["input", "input_view"])
@pytest.mark.parametrize("rg", [True, False], ids=["rg", "no_rg"])
def test_custom_function_output_of_an_inner_leaf(
    leaf: str, out: str, view: bool, rg: bool, compiler: str
) -> None:
    """Eager's output is a view of the leaf (``._base``), its node the Function's backward;
    a returned leaf's gradient goes through that backward."""

    def fn(x):
        return OUTPUTS[out](LEAVES[leaf](x), x)

    assert_like_eager(fn, _input(view, rg), COMPILERS[compiler], calls=2)


FACTORY_OUTPUTS: dict[str, Callable[[torch.Tensor, torch.Tensor], tuple]] = {
    "leaf": lambda t, x: (t, x * 1),
    "row": lambda t, x: (t[0], x * 1),
    "split": lambda t, x: (*t.split(2), x * 1),
    "half": lambda t, x: (Half.apply(t), x * 1),
}


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("out", FACTORY_OUTPUTS)
@pytest.mark.parametrize("rg", [True, False])
def test_factory_leaf_outputs_have_eager_versions(out: str, rg: bool, compiler: str) -> None:
    """``torch.ones(..., requires_grad=True)`` returned (or views of it, or a custom
    Function's output of it): eager's are at version 0; the graph's ``aten.ones`` fills
    what it made, and aotgrad returned them at version 1."""

    def fn(x):
        return FACTORY_OUTPUTS[out](torch.ones(4, 4, dtype=DT, requires_grad=True), x)

    assert_like_eager(fn, leaves(((4, 4), rg)), COMPILERS[compiler], calls=2)


class _NamedCtx(torch.autograd.Function):
    """Stores attributes named like an autograd node's (``name``, ``variable``) on ctx:
    legal in eager (the node is the ctx, nothing calls them)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.name = "scaled"
        ctx.variable = x
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


@pytest.mark.parametrize("compiler", COMPILERS)
def test_ctx_attributes_named_like_node_methods(compiler: str) -> None:
    """``ctx.name = "..."`` made aot_function raise "'str' object is not callable" (the
    trace's walk of the autograd graph called ``node.name()``; blind e13)."""

    def fn(x):
        return _NamedCtx.apply(x), x.detach().requires_grad_() * 1

    assert_like_eager(fn, leaves(((4,), True)), COMPILERS[compiler], calls=2)


# ------------- under Dynamo: what a custom Function saved is checked as eager's is
# Dynamo captures ``apply`` as the ``autograd_function_apply`` op, whose saved values
# torch keeps without ``ctx.save_for_backward``: a write to the input the Function saved,
# after the call, left our backward reading the written value where eager's raises
# (found by a blind probe). Values stashed on ``ctx`` are not checked, as in eager.


class _SavesItsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.stashed = x * 3  # not saved: no check
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g + ctx.stashed


def _input_saved(x):
    return _SavesItsInput.apply(x), x


def _slice_saved(x):
    return _SavesItsInput.apply(x[1:]), x


def _output_saved(x):
    return x * 2, SaveOut.apply(x)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_input_saved, _slice_saved, _output_saved])
@pytest.mark.parametrize("write", [True, False])
def test_what_a_custom_function_saved_is_checked(fn: Callable, write: bool, compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
        return [leaf.clone()], [leaf]

    def after(outs: Any) -> None:
        if write:
            with torch.no_grad():
                outs[1].add_(1)

    assert_like_eager(fn, make, COMPILERS[compiler], after=after, calls=2)


# A custom Function's output that is no view in eager (``DirtyMul.apply(t)`` of an
# intermediate ``t``) after an in-place metadata change of ``t`` (``t.t_()``,
# ``squeeze_`` under no_grad): the graph returns a view of its own intermediate there
# (``t(t(mul))``), and aotgrad returned it as one (``._base`` set, eager's None; soak
# 242456). Such outputs are made tensors of their own now (``fresh_outputs``).


def _dirty_after_transpose(x):
    t = x * 2
    t.t_()
    return (DirtyMul.apply(t),)


def _dirty_after_squeeze_without_grad(x):
    t = x.matmul(x)
    with torch.no_grad():
        t.squeeze_(0)
    t2 = DirtyMul.apply(t)
    return x, t2, t


def _dirty_after_unsqueeze_twice(x):
    t = x.sum(0)
    t.unsqueeze_(1)
    return DirtyMul.apply(t), DirtyMul.apply(t.t())


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_dirty_after_transpose, _dirty_after_squeeze_without_grad, _dirty_after_unsqueeze_twice]
)
def test_a_custom_function_output_eager_makes_no_view_is_none(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler])
