"""Fidelity families compared with eager (``eager_oracle.assert_like_eager``): views laid
out as eager's after a write through them, custom Functions whose output views an
input's bytes, and in-place calls eager refuses (aotgrad must raise them too).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

from eager_oracle import (
    COMPILERS,
    DirtyMul,
    Half,
    assert_like_eager,
    leaf_clone,
    leaves,
)


@pytest.fixture(autouse=True)
def _quiet_resize_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="An output with one or more elements")
        yield


# ------------------------- views laid out as eager's after a write through them


def _column_major(rg: bool) -> Any:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.empty_strided((4, 4), (1, 4), dtype=torch.float64)
        x.copy_(torch.randn(4, 4, dtype=torch.float64)).requires_grad_(rg)
        return ([x.clone()], [x]) if rg else ([x], [])

    return make


def _write_through_view_of_input(x):
    t = x.unflatten(-1, (2, 2))
    t.masked_fill_(t > 0, 0.5)  # functionalization regenerates t from a new base
    return t.transpose(0, 1), t[1:3]  # eager: strides (8, 1, 4) and (1, 8, 4) (seed 9244)


def _write_through_view_of_intermediate(x):
    t = x * 1  # column-major, as x
    v = t.unflatten(-1, (2, 2))
    v.masked_fill_(v > 0, 0.5)
    return v.transpose(0, 1), t.sum()  # the view's values were read in another order


def _view_of_an_intermediate_transposed_in_place(x):
    t1 = -x
    t1.transpose_(0, 1)  # its own metadata changed: views of it follow the transpose
    return t1.expand(2, 4, 4), t1[1:3]  # eager strides (0, 1, 4), (1, 4) (seed 22080)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize(
    "fn",
    [
        _write_through_view_of_input,
        _write_through_view_of_intermediate,
        _view_of_an_intermediate_transposed_in_place,
    ],
)
def test_view_written_through_keeps_eager_layout(fn: Any, rg: bool, compiler: str) -> None:
    assert_like_eager(fn, _column_major(rg), COMPILERS[compiler], calls=2)


# ------------------------------- custom Functions whose output views an input's bytes


def _dirty_view_of_input(x0):
    t = x0.view_as(x0)
    return x0 * 1, DirtyMul.apply(t)


def _as_is_then_base_written_under_no_grad(x0):
    t = Half.apply(x0)
    with torch.no_grad():
        x0.mul_(2)  # eager: t is now stale; reading its grad_fn raises
        t.copy_(t)
    return x0.reshape(2, -1), t


def _as_is_of_a_slice(x0):
    return Half.apply(x0[1:]), x0 * 2


def _columns() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
    return [leaf[:, :4]], [leaf]


CUSTOM_VIEWS = {
    "mark_dirty_on_a_view_of_an_input": (_dirty_view_of_input, leaf_clone(2, 3)),
    "as_is_then_written_under_no_grad": (_as_is_then_base_written_under_no_grad, _columns),
    "as_is_of_a_slice_of_an_input": (_as_is_of_a_slice, leaf_clone(3, 2)),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(CUSTOM_VIEWS))
def test_custom_function_view_of_an_input(case: str, compiler: str) -> None:
    fn, make = CUSTOM_VIEWS[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def test_stale_custom_view_raises_as_eager_on_use() -> None:
    """Eager returns the stale view; using it with grad raises autograd's error."""
    for compiler in COMPILERS.values():
        args, _ = _columns()
        _, t = compiler(_as_is_then_base_written_under_no_grad)(*args)
        assert t.requires_grad
        with pytest.raises(RuntimeError, match="created inside a custom Function"):
            t.sum()


# ------------------------------------------------ in-place calls eager refuses


def _partial_overlap(x):
    x.t().add_(x)  # eager: "...refer to a single memory location"
    return x


def _shifted_overlap(x):
    x[1:].copy_(x[:-1])
    return x


def _internal_overlap(x):
    x.expand(2, 3).add_(1)  # eager: "more than one element of the written-to tensor..."
    return x


def _same_tensor_is_fine(x):
    x.add_(x)  # full overlap: eager runs it
    x.mul_(x.t().contiguous())
    return x


def _view_of_leaf_metadata_write(x):
    t = x[1:3]
    t.unsqueeze_(0)  # eager: "a view of a leaf Variable that requires grad..."
    return t


def _view_of_leaf_under_no_grad(x):
    with torch.no_grad():
        x[:, 1:].add_(1)  # eager runs it
    return x * 2


def _view_of_a_leaf_passed_in(rg: bool) -> Any:
    """One input that is a view, in the caller, of a leaf: ``l[4:]``."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=rg)
        return [leaf[4:]], [leaf] if rg else []

    return make


def _input_view_metadata_write(x):
    t = x[1:3]
    t.transpose_(0, 1)  # x is a view of a leaf in the caller: eager raises (soak 33216)
    return (x,)


def _input_view_written(x):
    x.mul_(2)
    return (x,)


REFUSED = {
    "partial_overlap": (_partial_overlap, leaves(((3, 3), False))),
    "shifted_overlap": (_shifted_overlap, leaves(((4, 3), False))),
    "internal_overlap": (_internal_overlap, leaves(((1, 3), False))),
    "full_overlap_runs": (_same_tensor_is_fine, leaves(((3, 3), False))),
    "metadata_write_to_a_view_of_a_leaf": (_view_of_leaf_metadata_write, leaves(((4, 3), True))),
    "view_of_a_leaf_written_under_no_grad": (_view_of_leaf_under_no_grad, leaves(((4, 3), True))),
    "input_view_of_a_leaf_restrided": (_input_view_metadata_write, _view_of_a_leaf_passed_in(True)),
    "input_view_of_a_leaf_written": (_input_view_written, _view_of_a_leaf_passed_in(True)),
    "input_view_of_a_leaf_under_no_grad": (
        _view_of_leaf_under_no_grad,
        _view_of_a_leaf_passed_in(True),
    ),
    "input_view_of_a_plain_tensor": (_input_view_metadata_write, _view_of_a_leaf_passed_in(False)),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(REFUSED))
def test_inplace_calls_eager_refuses(case: str, compiler: str) -> None:
    fn, make = REFUSED[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)
