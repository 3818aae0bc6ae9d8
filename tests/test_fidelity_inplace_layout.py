"""An in-place write keeps its tensor's strides (``aotgrad.inplace_layout``).

Functionalized, ``v.masked_fill_(...)`` became ``v = masked_fill(v, ...)``, whose value
is contiguous whatever ``v``'s strides: written through a transposed view, the base came
back transposed, and every op after followed it. Outputs had other strides than eager's,
a later ``.view(-1)`` raised where eager's runs (soak 38415, 22745, 39643), and an
``as_strided`` after the write was refused because the value no longer laid out the
caller's storage (seed 131, soak 30350, 22512, 23212)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager, leaf_clone

DT = torch.float64

WRITES: dict[str, Callable[[torch.Tensor], Any]] = {
    "masked_fill_": lambda v: v.masked_fill_(v > 0, 0.5),
    "lerp_": lambda v: v.lerp_(torch.ones_like(v), 0.3),
    "setitem_mask": lambda v: v.__setitem__(v > 0, 0.0),
    "clamp_": lambda v: v.clamp_(min=-0.1),
    "addcmul_": lambda v: v.addcmul_(v.detach(), v.detach(), value=0.5),
    "index_fill_": lambda v: v.index_fill_(1, torch.tensor([0, 2]), 1.0),
}


def _through_transpose_then_follow(write: Callable) -> Callable:
    def fn(x):
        write(x.t())
        return torch.where(x > 0, x, x * 2), x + 1, x.view(-1)

    return fn


def _through_transpose_then_as_strided(write: Callable) -> Callable:
    def fn(x):
        write(x.t())
        x.as_strided_((2, 2), (1, 2))
        return x * 2

    return fn


def _transposed_intermediate(write: Callable) -> Callable:
    def fn(x):
        t = (x * 2).t()
        write(t)
        return t + 1, torch.lerp(t, t.detach(), 0.5)

    return fn


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
@pytest.mark.parametrize(
    "program",
    [
        _through_transpose_then_follow,
        _through_transpose_then_as_strided,
        _transposed_intermediate,
    ],
)
def test_write_keeps_the_written_tensors_strides(program: Any, write: str, compiler: str) -> None:
    assert_like_eager(program(WRITES[write]), leaf_clone(4, 4), COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_write_under_no_grad_to_a_transposed_input(compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
        return [leaf.clone().t()], [leaf]

    def fn(x):
        with torch.no_grad():
            x.masked_fill_(x > 0, 0.5)
        return torch.where(x > 0, x, x), x.exp()

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _masked_fill_transposed_intermediate_returned_and_saved(x):
    t = (x * 2).t()
    t.masked_fill_(t > 0, 1.0)
    return t, t.sin()


def _index_put_transposed_clone_returned_and_saved(x, y):
    t = x.clone().t()
    t[t > 0] = y.t()[t > 0]
    return t, t.exp()


def _x_and_y() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn(4, 4, dtype=DT, requires_grad=True)
    y = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [x, y], [x, y]


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize(
    "fn, make",
    [
        (_masked_fill_transposed_intermediate_returned_and_saved, leaf_clone(4, 4)),
        (_index_put_transposed_clone_returned_and_saved, _x_and_y),
    ],
    ids=["masked_fill", "index_put"],
)
def test_saved_value_an_output_views_is_saved_at_eagers_version(
    fn: Any, make: Any, compiler: str
) -> None:
    """Min-cut saved the value whose transpose is the base the returned view is rebuilt
    on; the runtime then set that view's version (eager's 1), moving the saved value's
    shared counter: the backward raised "modified by an inplace operation" (blind
    probes a36, a26). The version is now set before the value is saved."""
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)
