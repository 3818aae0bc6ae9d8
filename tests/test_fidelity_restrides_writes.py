"""Writes to an input's storage after an ``as_strided`` view of it, compared with eager
(``eager_oracle.assert_like_eager``).

A view made by ``as_strided`` past the tensor it was taken from (but inside the input),
requiring grad, has a gradient that stops at that tensor's elements until a write to the
storage makes eager rebuild its node from the base; traced, the graph differentiates it
otherwise, so such a write is refused (``aotgrad.restrides``). Made under ``no_grad`` the
view requires no grad and its values are the input's own elements: nothing differs from
eager, and the write runs (soak 112346, 114580).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, assert_like_eager
from test_fidelity_restrides import _columns, _r


def _rows(rg: bool) -> Any:
    """Two overlapping row views of one clone of a leaf: ``b[0:4]``, ``b[2:6]``."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(8, 4).requires_grad_(rg)
        b = leaf.clone()
        return [b[0:4], b[2:6]], [leaf] if rg else []

    return make


def _one_row_block(rg: bool) -> Any:
    """One input, ``b[0:4]`` of an (8, 4) clone of a leaf."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(8, 4).requires_grad_(rg)
        return [leaf.clone()[0:4]], [leaf] if rg else []

    return make


# ------------------ a no_grad as_strided view past its tensor's elements, then a write
# Called with grad on, eager raises at a read of the no_grad view after the write (its
# base was modified in place with grad on): aotgrad raises too. Called under no_grad or
# inference_mode (the soak's calls), eager runs.

_MODES = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def _no_grad_view_then_a_write(x):
    half = x[:, :2]
    with torch.no_grad():
        y = half.as_strided((2, 2), (1, 2))  # elements 0..3: x's, not all half's
    x.add_(1)
    return y * 1, x * 2


def _no_grad_view_read_before_a_write(x):
    half = x[:, :2]
    with torch.no_grad():
        y = half.as_strided((2, 2), (1, 2))
    t = y.sum() * x
    x.mul_(3)
    return t, x * 1


def _no_grad_view_then_a_no_grad_write(x):
    m0, m1 = x.chunk(2, -1)  # seed 112346
    with torch.no_grad():
        y = m0.as_strided((2, 2), (1, 2))
        x.diagonal().add_(y.sum())
    return m1 * 2, y + 0


def _no_grad_view_of_a_member_then_a_write(x1, x2):
    top = x2[2:4]
    with torch.no_grad():
        y = top.as_strided((2, 2), (1, 2), 8)  # row 2 of b: x2's, not top's
    x1.diagonal().add_(1)  # seed 114580 wrote a sibling member
    return y * 2, x2 + 0


def _no_grad_view_of_a_column_member_then_a_write(x1, x2):
    head = x2[:2]
    with torch.no_grad():
        y = head.as_strided((2, 2), (8, 1), 20)  # rows 2..3 of x2: not head's
    x1.mul_(2)
    x2.add_(1)
    return y * 1, x1 * 1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _no_grad_view_then_a_write,
        _no_grad_view_read_before_a_write,
        _no_grad_view_then_a_no_grad_write,
    ],
)
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("mode", list(_MODES))
def test_a_no_grad_view_past_its_tensor_then_a_write(
    fn: Any, rg: bool, mode: str, compiler: str
) -> None:
    assert_like_eager(fn, _one_row_block(rg), COMPILERS[compiler], ctx=_MODES[mode], calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_no_grad_view_past_a_member_then_a_write(rg: bool, mode: str, compiler: str) -> None:
    fn = _no_grad_view_of_a_member_then_a_write
    assert_like_eager(fn, _rows(rg), COMPILERS[compiler], ctx=_MODES[mode], calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_no_grad_view_past_a_column_member_then_a_write(
    rg: bool, mode: str, compiler: str
) -> None:
    fn = _no_grad_view_of_a_column_member_then_a_write
    assert_like_eager(fn, _columns(rg), COMPILERS[compiler], ctx=_MODES[mode], calls=2)


# ------------------ the same view made with grad on: still refused


def _grad_view_then_a_write(x):
    y = x[:, :2].as_strided((2, 2), (1, 2))
    x.add_(1)
    return y * 1


def test_a_grad_view_past_its_tensor_then_a_write_is_refused() -> None:
    (x,), _ = _one_row_block(True)()
    with pytest.raises(UnsupportedError, match="outside the tensor it was taken from"):
        aotgrad.aot_function(_grad_view_then_a_write, aotgrad.nop)(x)
