"""Backwards that raise under aotgrad where eager's do not (the soak's
``spurious_raise:bw1``), one test per cause, each compared with eager
(``eager_oracle.assert_like_eager``); seeds replay with
``tests/fidelity_programs.py SEED ENTRY``.

- a second backward through a call whose backward reads no saved tensor: eager's nodes
  that save nothing run again once the graph is freed (soak 116510);
- a saved value that shares storage with an output eager does not save, written by the
  caller after the call: eager's backward never reads it (soak 111536);
- a custom Function's view of an input made under no_grad, the input then restrided
  (``as_strided_``): eager's Function records no node, and so holds no gradient
  accumulator of the input at its old shape to refuse a backward through the input
  (soak 112105);
- an input that requires grad that no output's history reaches (``t1 * t3`` left
  unused, as in the graph after a Dynamo graph break): the compiled node had an edge to
  its history, so the caller's backward ran the nodes behind it, whose saved tensors
  were written since; eager's never reaches them (soak 71115, 71161).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, ViewOf, assert_like_eager, leaves


class _Chained:
    """Arguments for two calls: the first a fresh leaf, the second the first call's
    output (kept by ``after``), so the second backward runs the first call's backward
    again after the first backward freed it."""

    def __init__(self) -> None:
        self.calls = 0
        self.kept: list[Any] = []

    def make(self) -> tuple[list[Any], list[torch.Tensor]]:
        self.calls += 1
        if self.calls % 2 == 1:
            self.leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            self.kept = []
            return [self.leaf], [self.leaf]
        return [self.kept[0]], [self.leaf]

    def after(self, outs: list[Any]) -> None:
        self.kept = list(outs)


def _saves_nothing(x):
    y = x.clone().add_(x, alpha=2)
    return y.lerp_(x.clone(), 0.5)  # a scalar weight: nothing saved


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_second_backward_through_a_call_that_saves_nothing(compiler: str) -> None:
    chained = _Chained()
    assert_like_eager(
        _saves_nothing, chained.make, COMPILERS[compiler], after=chained.after, calls=2
    )


def _output_and_tanh_of_it(x):
    t1 = x.matmul(x)
    return t1.tanh(), t1  # tanh saves its result: eager saves nothing of t1


def _view_of_a_base_beside_tanh(x):  # soak 111536
    t1 = x.matmul(x)
    t2 = t1.expand(2, 4, 4)
    return t2.tanh()[0], t2.as_strided((2, 2), (1, 2))


def _write_second_output(outs: list[Any]) -> None:
    outs[1].mul_(2)


@pytest.mark.parametrize("fn", [_output_and_tanh_of_it, _view_of_a_base_beside_tanh])
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_output_written_after_the_call_that_eager_does_not_save(fn, compiler: str) -> None:
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], after=_write_second_output)


def _custom_view_then_restrided(x):  # soak 112105
    t = ViewOf.apply(x)
    x.as_strided_((2, 2), (4, 1))
    return x, t


class _KeepOut:
    """``after``: keeps output 1 alive but out of the backward (eager's reading its
    ``grad_fn`` raises), so that the backward runs through the input alone."""

    def __call__(self, outs: list[Any]) -> None:
        self.kept = outs[1]
        outs[1] = None


# Dynamo itself refuses these calls (torch.compile(backend="eager") raises "A view was
# created in no_grad mode..." too): aot_function only
@pytest.mark.parametrize("compiler", [c for c in COMPILERS if c.startswith("aot_function")])
def test_custom_view_of_an_input_restrided_under_no_grad(compiler: str) -> None:
    assert_like_eager(
        _custom_view_then_restrided,
        leaves(((4, 4), True)),
        COMPILERS[compiler],
        ctx=torch.no_grad,
        after=_KeepOut(),
    )


def _unused_product(x0, t1):
    t3 = x0 * 2
    t4 = t1 * t3  # noqa: F841  (unused: no output's history reaches t1)
    return t3


def _input_behind_a_written_save() -> tuple[list[Any], list[torch.Tensor]]:
    x0 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    l1 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    x1 = l1.clone()
    t1 = x1.norm()  # saves x1
    x1.mul_(2)  # its backward would raise
    return [x0, t1], [x0, l1]


def _graph_break_before_unused_product(x0, x1):
    t1 = x1.norm()
    torch._dynamo.graph_break()
    x1.mul_(2)
    t3 = x0 * 2
    t4 = t1 * t3  # noqa: F841
    return t3


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_input_no_output_reaches_behind_a_written_save(compiler: str) -> None:
    assert_like_eager(_unused_product, _input_behind_a_written_save, COMPILERS[compiler])


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_graph_break_before_an_unused_product(compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x0 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        l1 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        return [x0, l1.clone()], [x0, l1]

    assert_like_eager(_graph_break_before_unused_product, make, COMPILERS[compiler])
