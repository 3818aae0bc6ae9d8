"""Multi-output views (``unbind``, ``split``) and their kin, compared with eager
(``eager_oracle.assert_like_eager``); found by a blind probe of the family.

1. An input that is such a view (or one made under ``no_grad`` of a tensor that requires
   grad, or by a custom Function), written under ``no_grad``, then used with grad: eager
   raises on reading its ``grad_fn`` ("Output 0 of Unbind is a view and its base or
   another view of its base has been modified inplace..."); the compiled call returned
   gradients. What reads no node (``detach()``, ``argmax``, ops under ``no_grad``) runs,
   as in eager; so does a plain view input, whose node autograd rebuilds.
2. ``retain_grad()`` on one output of ``unbind`` whose sibling the function computes
   from: refused as if the sibling were computed from it (they share one node).
3. An output of ``split`` / ``unbind`` returned beside its base, the base (or a sibling)
   written after the split: eager's ``._base`` is the returned base and reading its
   ``grad_fn`` raises; the compiled one was a custom Function's view of a private base.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, ViewOf, assert_like_eager

ENTRIES = sorted(COMPILERS)


def _input_view(kind: str) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    """One input: a view of a clone of a leaf that requires grad."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        c = leaf.clone()
        if kind == "unbind":
            x = c.unbind(0)[0]
        elif kind == "split":
            x = c.split(2)[1]
        elif kind == "chunk":
            x = c.chunk(3, dim=1)[0]
        elif kind == "no_grad":
            with torch.no_grad():
                x = c[1:]
        elif kind == "custom":
            x = ViewOf.apply(c)
        else:  # a plain view: autograd rebuilds its node after a write
            x = c[1:]
        return [x], [leaf]

    return make


KINDS = ["unbind", "split", "chunk", "no_grad", "custom", "slice"]


def _written_then_used(x):
    with torch.no_grad():
        x.mul_(2)
    return x * 3


def _written_through_a_view_then_viewed(x):
    with torch.no_grad():
        x[0].add_(1)
    return x[:1] + 1, x.sum()


def _written_then_only_read_without_grad(x):
    with torch.no_grad():
        x.mul_(2)
        y = x * 3
    return y, x.detach() + 1, x.argmax()


def _used_then_written(x):
    y = x * 3
    with torch.no_grad():
        x.mul_(2)
    return y


_PROGRAMS = [
    _written_then_used,
    _written_through_a_view_then_viewed,
    _written_then_only_read_without_grad,
    _used_then_written,
]


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fn", _PROGRAMS, ids=[f.__name__ for f in _PROGRAMS])
def test_an_input_view_autograd_cannot_rebuild_written_without_grad(
    fn: Any, kind: str, compiler: str
) -> None:
    assert_like_eager(fn, _input_view(kind), COMPILERS[compiler])


def _leaf() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    return [x], [x]


def _retained_beside_sibling(x):
    a, b, _ = (x * 2).unbind(0)
    a.retain_grad()
    return a, b * 2


def _retained_beside_siblings_split(x):
    a, b = (x * 2).split([1, 2])
    a.retain_grad()
    return a, b.sin()


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("fn", [_retained_beside_sibling, _retained_beside_siblings_split])
def test_retain_grad_on_one_output_of_a_multi_output_view(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, _leaf, COMPILERS[compiler])


def _base_written_without_grad(x):
    y = x * 2
    a, _b, _c = y.split(2)
    with torch.no_grad():
        y.add_(1)
    return y, a


def _sibling_written_without_grad(x):
    y = x * 2
    a, _b, c = y.split(2)
    with torch.no_grad():
        a.mul_(2)
    return y, a, c


def _base_row_written_with_grad(x):
    y = x * 2
    a, _b, c = y.unbind(0)
    y[0].mul_(2)  # a plain view of y, not one of the unbind outputs
    return y, a, c.sum()


def _detached_sibling_written(x):
    y = x * 2
    a, b, _c = y.split(2)
    a.detach().mul_(2)
    return b, y


def _chunk_base_written_under_no_grad_returned_first(x):
    y = x.t() * 2
    _a, b = y.chunk(2, dim=1)
    with torch.no_grad():
        y.sub_(1)
    return b, y


_WRITTEN_BASES = [
    _base_written_without_grad,
    _sibling_written_without_grad,
    _base_row_written_with_grad,
    _detached_sibling_written,
    _chunk_base_written_under_no_grad_returned_first,
]


def _leaf_6x3() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    return [x], [x]


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("fn", _WRITTEN_BASES, ids=[f.__name__ for f in _WRITTEN_BASES])
def test_a_stale_multi_output_view_returned_beside_its_base(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, _leaf_6x3, COMPILERS[compiler])
