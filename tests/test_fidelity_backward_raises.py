"""Backwards that raise under aotgrad where eager's do not (the soak's
``spurious_raise:bw1``), one test per cause, each compared with eager
(``eager_oracle.assert_like_eager``); seeds replay with
``tests/fidelity_programs.py SEED ENTRY``.

- a second backward through a call whose backward reads no saved tensor: eager's nodes
  that save nothing run again once the graph is freed (soak 116510);
- a saved value that shares storage with an output eager does not save, written by the
  caller after the call: eager's backward never reads it (soak 111536).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager, leaves


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
