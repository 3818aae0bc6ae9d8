"""Input views restrided in place past their own elements (``b[:, 4:].as_strided_((2, 2),
(4, 1))``), compared with eager (``eager_oracle.assert_like_eager``): eager's reads,
writes and (under ``no_grad``) gradient reach the base's elements there, where the
traced input held only its own; the function is compiled over the base of every input
on that storage (``EagerCalls._past_input``, ``alias.synthetic_base``).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, assert_like_eager
from test_fidelity_restrides import _columns, _r, _rows_at_offset

# ------------------ restrided under no_grad past the view's elements, then differentiated
# Eager does not record the change; the view's next use rebuilds its node as an
# ``as_strided`` of its base at the new geometry, so the gradient reaches the base's
# elements the view did not cover. The traced input held only its own: those gradients
# were dropped, silently (soak 58381).


def _past_then_read(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (4, 1))
    return (x1.view_as(x1),)


def _past_then_returned(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (4, 1))
    return x1


def _past_then_multiplied(x0, x1):
    with torch.no_grad():
        x1.as_strided_((3,), (7,))
    return x1 * x0[0, 0:3], x0 + 0


def _past_then_written(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (4, 1))
    x1.mul_(x0[0, 0:2].detach())
    return x0 * 1, x1 + 0


def _past_then_read_with_grad_off(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (4, 1))
        y = x1 * 2
    return x1.sum() * y


def _intermediate_view_past(x0, x1):
    v = (x0 * 2)[:, 2:]
    with torch.no_grad():
        v.as_strided_((2, 2), (4, 1))
    return v * x1[0:2, 0:2]


def _past_then_squeezed_with_grad(x0, x1):
    with torch.no_grad():
        x0.as_strided_((2, 2), (4, 1))
    x0.squeeze_(0)  # recorded, on the layout the unrecorded change left (soak 62282)
    return x0, x1[1:3]


def _within_under_no_grad(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (8, 1))  # its own elements
    return x1 * 3


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _past_then_read,
        _past_then_returned,
        _past_then_multiplied,
        _past_then_written,
        _past_then_read_with_grad_off,
        _intermediate_view_past,
        _past_then_squeezed_with_grad,
        _within_under_no_grad,
    ],
)
@pytest.mark.parametrize("rg", [True, False])
def test_a_view_restrided_past_its_elements_under_no_grad(fn: Any, rg: bool, compiler: str) -> None:
    assert_like_eager(fn, _columns(rg), COMPILERS[compiler], calls=2)


def _row_restrided_back_under_no_grad(x):
    with torch.no_grad():
        x.as_strided_((2, 4), (4, 1), 2)  # before its first element
    return x.cos()


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_row_view_restrided_before_its_offset_under_no_grad(compiler: str) -> None:
    assert_like_eager(
        _row_restrided_back_under_no_grad, _rows_at_offset(True), COMPILERS[compiler], calls=2
    )


def _past_with_grad_then_written(x0, x1):
    x1.as_strided_((2, 2), (4, 1))
    x1.mul_(torch.arange(1.0, 5.0, dtype=torch.float64).view(2, 2))
    return x0 * 1, x1 + 0


def _past_with_grad_then_returned(x0, x1):
    x1.as_strided_((3,), (7,))
    return x1, x0.sin()


def _past_in_inference_mode_then_read(x0, x1):
    with torch.inference_mode():
        x1.as_strided_((2, 2), (4, 1))
    return x1.view_as(x1), x0 + 0


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [_past_with_grad_then_returned, _past_in_inference_mode_then_read],
)
@pytest.mark.parametrize("rg", [True, False])
def test_a_view_restrided_past_its_elements(fn: Any, rg: bool, compiler: str) -> None:
    assert_like_eager(fn, _columns(rg), COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("rg", [True])  # (without grad: test_fidelity_restrides_writes)
def test_a_write_after_a_recorded_restride_past_its_elements_is_refused(rg: bool) -> None:
    # recorded, eager's view chain passes through the old geometry (functionalization
    # cannot replay a write through an as_strided after the chain's first step)
    (x0, x1), _ = _columns(rg)()
    compiled = aotgrad.aot_function(_past_with_grad_then_written, aotgrad.nop)
    with pytest.raises(UnsupportedError, match=r"reache[sd] elements"):
        compiled(x0, x1)


# ---- an input restrided past its elements beside other inputs that overlap and are
# written: the first trace stops at the restride, before the written overlaps are known;
# the compile over the first base asked for another (soak 52932, 59699: refused by the
# retry). Both groups are now passed as bases.


def _two_storages() -> tuple[list[Any], list[torch.Tensor]]:
    la, lb = _r(4, 8).requires_grad_(True), _r(8, 4).requires_grad_(True)
    a, b = la.clone(), lb.clone()
    return [a[:, :4], a[:, 4:], b[0:4], b[2:6]], [la, lb]


def _past_then_overlap_written(x0, x1, x2, x3):
    x1.as_strided_((2, 2), (4, 1))
    x2.mul_(2)
    return x0 * 1, x1 * 1, x3 + 0


def _overlap_written_then_past(x0, x1, x2, x3):
    x3.add_(1)
    with torch.no_grad():
        x1.as_strided_((3,), (7,))
    return x1 * x0[0, 0:3], x2.sum()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_past_then_overlap_written, _overlap_written_then_past])
def test_a_restride_past_an_input_beside_a_written_overlap(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, _two_storages, COMPILERS[compiler], calls=2)


# ---- an input view the caller made a leaf (``b[:, 4:].requires_grad_()``, ``b`` without
# grad), restrided in place under no_grad: it stays a leaf that requires grad (the
# rebuilt view was made of the base, without the flag: soak 53089, 53622, 57865, 58087).
# Called with grad on, the leaf's gradient takes its new shape, which the compiled node
# does not expect: the known shape error of a leaf input whose metadata changes (README).


def _leaf_view_restrided_under_no_grad(x0, x1):
    with torch.no_grad():
        x1.as_strided_((2, 2), (8, 1))
        x0.as_strided_((2, 2), (4, 1))
    return x1 * 2, x0 * 1


def _columns_one_a_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    b = _r(4, 8)
    x0, x1 = b[:, :4], b[:, 4:]
    x1.requires_grad_()
    return [x0, x1], [x1]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [torch.no_grad, torch.inference_mode])
def test_a_leaf_view_restrided_under_no_grad_stays_a_leaf(ctx: Any, compiler: str) -> None:
    assert_like_eager(
        _leaf_view_restrided_under_no_grad,
        _columns_one_a_leaf,
        COMPILERS[compiler],
        ctx=ctx,
        calls=2,
    )
