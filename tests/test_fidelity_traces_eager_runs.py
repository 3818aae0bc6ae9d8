"""Family: the trace raises where eager runs.

The fidelity harness found programs whose trace raised an error that is not aotgrad's
own verdict, so the call ran eagerly (``EagerReplayWarning``): the values were eager's,
but the program should compile. Each test here fails if the call runs eagerly.

- A write with grad through one of two overlapping input views, then an in-place
  metadata change of the other, made a leaf by ``requires_grad_()`` in the function, after
  a read that gave it eager's history: traced apart, the other stayed a leaf and autograd
  refused the change (seed 113739). The overlap is now traced over a synthetic base.
- Overlapping input views written under inference mode: their traced stand-ins were made
  under no_grad (the whole trace runs so), and reading the other's node after the write
  raised "A view was created in no_grad mode ..." where eager's views, made with grad,
  rebuild theirs (seed 115370).
- An ``out=`` that resizes an input (``torch.mul(s, 2, out=x)``) after a view of it was
  taken: autograd replayed the view's ops on the resized input ("shape '[4, 4]' is
  invalid for input of size 1"); eager's view is an ``as_strided`` of it (seed 118218).
- A masked write through a transposed view of a reshape (``t = x.reshape(2, -1);
  t.t_(); t[t > 0] = 0``): functionalization's ``masked_fill`` value is contiguous, and
  propagating it back through ``view`` raised "Cannot view a tensor with shape ... and
  strides (1, 2)" (seed 111287).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from eager_oracle import COMPILERS, assert_like_eager

DT = torch.float64


def _compiled(compiler: Callable) -> Callable:
    """``compiler``, whose compiled function raises where its call would run eagerly."""

    def compile_fn(fn: Callable) -> Callable:
        compiled = compiler(fn)

        def call(*args: Any) -> Any:
            with warnings.catch_warnings():
                warnings.simplefilter("error", aotgrad.errors.EagerReplayWarning)
                return compiled(*args)

        return call

    return compile_fn


def _overlapping_gradless_views_and_a_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    b = torch.randn(8, 4, dtype=DT)
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [b[0:4], b[2:6].t(), w], [w]


def _leaf_made_then_read_then_restrided(x0, x1, w):
    x1.requires_grad_()
    x0.t().add_(w)  # gives the common base, and so x1, a history
    row = x1[0]  # (reading x1 rebuilds its node: it is a leaf no more)
    x1.as_strided_((2, 2), (4, 1))
    return row * 2, x1 * 3


def _leaf_made_then_restrided(x0, x1, w):
    x1.requires_grad_()
    x0.t().add_(w)
    x1.as_strided_((2, 2), (4, 1))  # eager: still a leaf, refused
    return (w * 2,)


@pytest.mark.parametrize("compiler", ["aot_function-min_cut", "aot_function-default"])
@pytest.mark.parametrize(
    "fn", [_leaf_made_then_read_then_restrided, _leaf_made_then_restrided], ids=["read", "unread"]
)
def test_leaf_made_in_the_function_beside_an_overlapping_input(fn: Any, compiler: str) -> None:
    """Seed 113739 (Dynamo itself fails on it, with torch's eager backend too: left out)."""
    make = _overlapping_gradless_views_and_a_leaf
    assert_like_eager(fn, make, _compiled(COMPILERS[compiler]), calls=2)


def _overlapping_views_requiring_grad() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(8, 4, dtype=DT, requires_grad=True)
    b = leaf.clone()
    return [b[0:4], b[2:6]], [leaf]


def _write_one_hook_the_other(x0, x1):
    x1.mul_(2)
    x0.register_hook(lambda g: g * 2)
    return x1.t(), x0 + 1


def _write_one_read_the_others_node(x0, x1):
    x1.copy_(x1 * 3)
    return x0.grad_fn is None, x0 * 2


@pytest.mark.parametrize("compiler", ["aot_function-min_cut", "aot_function-default"])
@pytest.mark.parametrize(
    "fn", [_write_one_hook_the_other, _write_one_read_the_others_node], ids=["hook", "node"]
)
def test_overlapping_input_views_written_under_inference_mode(fn: Any, compiler: str) -> None:
    """Seed 115370 (Dynamo traces no call under inference mode that way: left out)."""
    assert_like_eager(
        fn,
        _overlapping_views_requiring_grad,
        _compiled(COMPILERS[compiler]),
        ctx=torch.inference_mode,
        calls=2,
    )


def _resized_by_out_after_a_view(x, y):
    v = y.view_as(y)
    with torch.no_grad():
        torch.mul(x.sum(), 2, out=y)
    return x * v, y * 1


def _resized_by_out_after_a_slice(x, y):
    v = y[1:3]
    with torch.no_grad():
        torch.mul(x.sum(), 2, out=y)
    return (x[1:3] * v,)


def _input_and_clone() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn(4, 4, dtype=DT, requires_grad=True)
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [x, leaf.clone()], [x, leaf]


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize(
    "fn", [_resized_by_out_after_a_view, _resized_by_out_after_a_slice], ids=["view", "slice"]
)
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_view_read_after_out_resizes_its_input(fn: Any, compiler: str) -> None:
    """Seed 118218."""
    assert_like_eager(fn, _input_and_clone, _compiled(COMPILERS[compiler]), calls=2)


WRITES: dict[str, Callable[[torch.Tensor], Any]] = {
    "setitem_mask": lambda v: v.__setitem__(v > 0, 0.0),
    "masked_fill_": lambda v: v.masked_fill_(v > 0, 0.5),
    "lerp_": lambda v: v.lerp_(torch.ones_like(v), 0.3),
    "index_put_": lambda v: v.index_put_((torch.tensor([1, 5]),), v.detach()[0] * 3),
}


def _through_reshape_transposed_in_place(write: Callable) -> Callable:
    def fn(x):
        t = x.reshape(2, -1)
        t.t_()
        write(t)
        return x + 1, t * 2, x.view(-1)

    return fn


def _through_view_transposed(write: Callable) -> Callable:
    def fn(x):
        t = x.view(2, 8).t()
        write(t)
        return torch.where(x > 0, x, x * 2), t.exp()

    return fn


def _leaf_clone() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [leaf.clone()], [leaf]


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("write", WRITES, ids=list(WRITES))
@pytest.mark.parametrize(
    "program", [_through_reshape_transposed_in_place, _through_view_transposed], ids=["t_", "t"]
)
def test_write_through_a_transposed_view_of_a_view(program: Any, write: str, compiler: str) -> None:
    """Seed 111287."""
    assert_like_eager(program(WRITES[write]), _leaf_clone, _compiled(COMPILERS[compiler]), calls=2)
