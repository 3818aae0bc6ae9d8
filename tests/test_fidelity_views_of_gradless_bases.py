"""In-place metadata changes (``t_``, ``transpose_``, ``unsqueeze_``, ``squeeze_``) of a
view the caller made require grad of a base that does not, compared with eager
(``eager_oracle.assert_like_eager``).

``b = l.clone(); x0, x1 = b[0:4], b[2:6]; x1.requires_grad_()``: ``x1`` is a leaf of its
own, a view of a base without grad; beside the overlapping ``x0`` the trace rebuilds both
from one synthetic base. Changed under ``no_grad`` (the caller's, or a block of the
function's), eager's ``x1`` stays that leaf at its new geometry: later reads with grad
send its gradient, of the new shape, to ``x1.grad``. The trace made the fresh view from
an alias of ``x1`` whose node autograd rebuilt from the gradless base after the change
(an internal assert), and refused it as a write through a view of a tensor that left
autograd (soak 111259, 114389, 114449, 118816). With grad on, eager refuses the change
("a view of a leaf Variable that requires grad is being used in an in-place
operation"), and so must the compiled function.

Eager's accumulator of ``x1`` (which checks its gradient's shape) is made at its first
use with grad: before the change, at the old layout (``x1 * 3; x1.unsqueeze_(0)``), or
after it, at the new one (``x1.t_(); x1 * y`` of a non-square ``x1``), and the caller's
``x1`` is given the layout the trace's accumulator had when the compiled graph runs.
Still refused: the base given a history after the change (eager rebuilds ``x1``'s node
as an ``as_strided`` at its new geometry).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = sorted(COMPILERS)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


def _leaf_view_beside_a_sibling() -> tuple[list[Any], list[torch.Tensor]]:
    b = _r(8, 4)
    x0, x1 = b[0:4], b[2:6]
    x1.requires_grad_()
    y = _r(4, 4).requires_grad_()
    return [x0, x1, y], [x1, y]


def _transposed_leaf_view() -> tuple[list[Any], list[torch.Tensor]]:
    """``x1`` a transposed view (soak 111259, 118816)."""
    b = _r(8, 4)
    x0, x1 = b[0:4], b[2:6].t()
    x1.requires_grad_()
    y = _r(4, 4).requires_grad_()
    return [x0, x1, y], [x1, y]


def _of_a_clone_without_grad() -> tuple[list[Any], list[torch.Tensor]]:
    """The base a clone of a leaf without grad (the soak's inputs)."""
    b = _r(8, 4).clone()
    x0, x1 = b[0:4], b[2:6]
    x1.requires_grad_()
    y = _r(4, 4).requires_grad_()
    return [x0, x1, y], [x1, y]


def _transposed(x0, x1, y):
    with torch.no_grad():
        x1.t_()
    return x1 * y, x0 * 2, x1.is_leaf


def _written_then_unsqueezed(x0, x1, y):
    """Soak 114449: the sibling written first (the base's version moves)."""
    with torch.no_grad():
        x0.addcmul_(y, y)
        x1.unsqueeze_(0)
    return torch.mm(y, x0), x1 * 2, x1.requires_grad


def _unsqueezed_then_written(x0, x1, y):
    with torch.no_grad():
        x1.unsqueeze_(0)
        x0.mul_(2)
    return x1 * y, x1.grad_fn is None


def _changed_and_returned(x0, x1, y):
    with torch.no_grad():
        x1.transpose_(0, 1)
        x1.unsqueeze_(-1)
    return x1, x0


def _changed_twice_and_read(x0, x1, y):
    with torch.no_grad():
        x1.unsqueeze_(0)
        x1.squeeze_(0)
        x1.t_()
    return (x1.sin() * y).sum(), x1.shape


def _used_then_changed(x0, x1, y):
    """Used with grad before the change: eager's accumulator of ``x1`` (which checks the
    gradient's shape) was made at its old layout; the trace's leaf keeps its own."""
    z = x1 * 3
    with torch.no_grad():
        x1.unsqueeze_(0)
    return z, x1 * 2


def _written_with_grad_then_changed(x0, x1, y):
    """The sibling written with grad (eager's base gains a history) before the change:
    eager's ``x1`` is a view of a base that now requires grad."""
    x0.mul_(y)
    with torch.no_grad():
        x1.t_()
    return x1 * 2, x0


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "make", [_leaf_view_beside_a_sibling, _transposed_leaf_view, _of_a_clone_without_grad]
)
@pytest.mark.parametrize(
    "fn",
    [
        _transposed,
        _written_then_unsqueezed,
        _unsqueezed_then_written,
        _changed_and_returned,
        _changed_twice_and_read,
        _used_then_changed,
        _written_with_grad_then_changed,
    ],
)
@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_metadata_change_of_a_leaf_view_of_a_base_without_grad(fn, make, entry, mode):
    if fn is _written_with_grad_then_changed and mode == "grad" and entry.startswith("dynamo"):
        pytest.skip("Dynamo's own: backend='eager' raises AssertionError on the t_() too")
    ctx = torch.no_grad if mode == "no_grad" else torch.enable_grad
    assert_like_eager(fn, make, COMPILERS[entry], calls=2, ctx=ctx)


def _the_same_leaf_view_twice() -> tuple[list[Any], list[torch.Tensor]]:
    """Soak 118816: the leaf view passed twice, beside an overlapping sibling."""
    b = _r(8, 4)
    x0, x1 = b[0:4], b[2:6].t()
    x1.requires_grad_()
    return [x0, x1, x1], [x1]


def _unsqueezed_through_one_name(x0, x1, x2):
    with torch.no_grad():
        t1 = x2.cumsum(-1)
    x2.unsqueeze_(0)
    return torch.addmm(t1, x0, t1), x1.shape, x1 * 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_metadata_change_of_a_leaf_view_passed_twice(entry):
    assert_like_eager(
        _unsqueezed_through_one_name,
        _the_same_leaf_view_twice,
        COMPILERS[entry],
        calls=2,
        ctx=torch.no_grad,
    )


def _short_leaf_view() -> tuple[list[Any], list[torch.Tensor]]:
    """``x1`` of two rows: its transpose has another shape."""
    b = _r(8, 4)
    x0, x1 = b[0:4], b[2:4]
    x1.requires_grad_()
    y = _r(4, 2).requires_grad_()
    return [x0, x1, y], [x1, y]


def _transposed_then_used(x0, x1, y):
    """First used with grad after the change: eager's accumulator is made at the new
    shape, and the caller's ``x1`` takes it before the compiled graph runs."""
    with torch.no_grad():
        x1.t_()
    return x1 * y, x0 + 1, x1.shape


def _used_then_transposed(x0, x1, y):
    z = x1 * 3
    with torch.no_grad():
        x1.t_()
    return z, x1, x0 * y.sum()


def _used_between_changes(x0, x1, y):
    """Used at a layout that is neither the first nor the last."""
    with torch.no_grad():
        x1.swapdims_(0, 1)
        x1.unsqueeze_(1)
    w = x1 * 2
    with torch.no_grad():
        x1.squeeze_(1)
    return w, x1 + 0, x0


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "fn", [_transposed_then_used, _used_then_transposed, _used_between_changes]
)
@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference_mode"])
def test_metadata_change_of_a_leaf_view_to_another_shape(fn, entry, mode):
    ctx = {"grad": torch.enable_grad, "no_grad": torch.no_grad}.get(mode, torch.inference_mode)
    assert_like_eager(fn, _short_leaf_view, COMPILERS[entry], calls=2, ctx=ctx)


def _changed_then_base_written_with_grad(x0, x1, y):
    with torch.no_grad():
        x1.t_()
    x0.mul_(y)
    return x1 * 2, x0


def test_base_given_a_history_after_the_change_is_refused():
    """Eager rebuilds ``x1``'s node as an ``as_strided`` of the base at its transposed
    geometry; the trace's would replay ``b[2:6]`` (a gradient through other elements).
    Still refused, by name (eager runs it)."""
    args, _ = _leaf_view_beside_a_sibling()
    _changed_then_base_written_with_grad(*args)
    args, _ = _leaf_view_beside_a_sibling()
    compiled = aotgrad.aot_function(_changed_then_base_written_with_grad, aotgrad.nop)
    with pytest.raises(UnsupportedError, match="then its base was given a history"):
        compiled(*args)


# Leaf views the function makes (``m = x[0:2]; m.requires_grad_()``) are no synthetic
# base's members: their change is made as other views' are (``write_metadata``).


def _input_without_grad() -> tuple[list[Any], list[torch.Tensor]]:
    y = _r(4, 2).requires_grad_()
    return [_r(4, 4), y], [y]


def _made_leaf_then_transposed(x, y):
    m = x[0:2]
    m.requires_grad_()
    with torch.no_grad():
        m.t_()
    return m * y, m


def _made_leaf_transposed_then_base_written(x, y):
    m = x[0:2]
    m.requires_grad_()
    with torch.no_grad():
        m.t_()
    x.mul_(y.sum())
    return m * 2, x


def _leaf_of_an_intermediate_transposed(x, y):
    t = x * 1
    m = t[0:2]
    m.requires_grad_()
    with torch.no_grad():
        m.t_()
    t.mul_(y.sum())
    return m * y.t(), t


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "fn",
    [
        _made_leaf_then_transposed,
        _made_leaf_transposed_then_base_written,
        _leaf_of_an_intermediate_transposed,
    ],
)
@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_metadata_change_of_a_leaf_view_the_function_made(fn, entry, mode, request):
    of_input = fn is not _leaf_of_an_intermediate_transposed
    dynamo_breaks = entry.startswith("dynamo") and fn is _made_leaf_then_transposed
    if mode == "grad" and of_input and not dynamo_breaks:
        # (traced, the alias ``write_metadata`` takes of the leaf has a node autograd
        # rebuilds from the gradless input after the change: an internal assert)
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="known gap: runs eagerly, with a warning")
        )
    ctx = torch.no_grad if mode == "no_grad" else torch.enable_grad
    assert_like_eager(fn, _input_without_grad, COMPILERS[entry], calls=2, ctx=ctx)
