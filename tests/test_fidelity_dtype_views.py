"""Outputs that view an input's bytes with another dtype (blind suite "tensor kinds").

``torch.view_as_real(x)`` (or ``view_as_complex``, ``x.view(torch.int32)``) returned,
where the function then writes ``x``: eager's output shares ``x``'s bytes, so the
write, and any later one, shows in it. Not an ``as_strided`` of the input, the output
was returned as the graph computed it: a copy of the old bytes, values right but no
longer sharing them (and, unwritten, sharing them without eager's ``._base``). Such
outputs are now made of the caller's tensor (``alias.reinterpret``), with grad or without
(``test_fidelity_complex_views.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager


def _view_as_real_then_written(x, y):
    r = torch.view_as_real(x)
    x.mul_(y.detach())
    return r, x * y


def _view_as_real_unwritten(x, y):
    return torch.view_as_real(x), y * 2


def _row_of_view_as_real(x, y):
    r = torch.view_as_real(x)[1:]
    x.add_(1)
    return r, y.sin()


def _view_as_complex_then_written(x, y):
    c = torch.view_as_complex(x)
    x.mul_(2)
    return c, x * y


def _int_view_then_written(x, y):
    r = x.view(torch.int32)
    x.mul_(2)
    return r, x * y


def _complex_inputs() -> tuple[list[Any], list[torch.Tensor]]:
    y = torch.randn(4, 3, dtype=torch.complex64, requires_grad=True)
    return [torch.randn(4, 3, dtype=torch.complex64), y], [y]


def _real_pairs() -> tuple[list[Any], list[torch.Tensor]]:
    y = torch.randn(4, 2, requires_grad=True)
    return [torch.randn(4, 2), y], [y]


def _later_write(outs: Any) -> None:
    outs[0].mul_(3)  # through the output: eager's reaches the input


PROGRAMS: dict[str, tuple[Callable, Callable]] = {
    "view_as_real_then_written": (_view_as_real_then_written, _complex_inputs),
    "view_as_real_unwritten": (_view_as_real_unwritten, _complex_inputs),
    "row_of_view_as_real": (_row_of_view_as_real, _complex_inputs),
    "view_as_complex_then_written": (_view_as_complex_then_written, _real_pairs),
    "int_view_then_written": (_int_view_then_written, _real_pairs),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_dtype_view_of_an_input_shares_its_bytes_as_eager(name: str, compiler: str) -> None:
    fn, make = PROGRAMS[name]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, after=_later_write)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_copy_of_one_that_requires_grad(compiler: str) -> None:
    def fn(x):
        return torch.view_as_real(x) * 1, x.abs()

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, dtype=torch.complex64, requires_grad=True)
        return [x], [x]

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)
