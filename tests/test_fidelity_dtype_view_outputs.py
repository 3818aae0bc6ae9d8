"""Outputs reinterpreting bytes that ``Reinterpret`` could not rebuild, so came back as
the graph computed them (soak 111121, 111821, 110714; aot_module and dynamo).

``x.view(torch.complex128)`` of a real ``x`` whose last dim is no pair (an (8, 4)
float64): eager's shares ``x``'s bytes and version counter but is no view of it and has
no gradient (``view(dtype)`` to another element size); ``.conj()`` of it views it. The
rebuild took the dtype by ``view_as_complex``, which refuses such a layout, so the
output, after a write to ``x`` (or, where ``x`` requires grad, with a ``.conj()``), was a
tensor of its own. Now rebuilt by ``view(dtype)`` where the view took its dtype so
(``Reinterpret.dtype_view``). And ``view_as_complex(t.reshape(4, 2, 2))`` of a (4, 4)
intermediate ``t``: its base ``t`` has no trailing pair; the rebuild now pairs a
contiguous base's elements first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from eager_oracle import COMPILERS, assert_like_eager

C = torch.complex128


def _written_then_dtype_view(x, y):
    x.mul_(2)
    return x.view(C), y * 2


def _dtype_view_then_written(x, y):
    t = x.view(C)
    with torch.no_grad():
        x.mul_(2)
    return t.conj(), y * 2


def _conj_of_dtype_view(x, y):
    return x.view(C).conj(), y * 2


def _dtype_view_of_written_split(x, y):  # (seed 111121)
    _, m = x.split(x.shape[0] // 2)
    m.mul_(2)
    t = m.view(C)
    t.imag.zero_()
    torch.view_as_real(t).add_(1)
    return y * 2, t


def _view_as_complex_of_reshaped_intermediate(x, y):  # (seed 110714)
    t = x[:4].abs()
    return t.reshape(2, -1), torch.view_as_complex(t.reshape(4, 2, 2)), y * 2


def _view_as_complex_of_reshaped_product(x, y):  # (its gradient through the view)
    t = (x[:4] * y).abs()
    return t.reshape(2, -1), torch.view_as_complex(t.reshape(4, 2, 2))


def _imag_slice_beside_its_dtype_view(x, y):  # (Dynamo soak 71977: "setStorage ... out of bounds")
    t = x.view(C)
    return t.imag[1:3], t, y * 2


def _real_and_imag_beside_their_dtype_view(x, y):
    t = x.view(C)
    return t, t.real, t.imag.t(), y.sum()


PROGRAMS: dict[str, Callable] = {
    "imag_slice_beside_its_dtype_view": _imag_slice_beside_its_dtype_view,
    "real_and_imag_beside_their_dtype_view": _real_and_imag_beside_their_dtype_view,
    "written_then_dtype_view": _written_then_dtype_view,
    "dtype_view_then_written": _dtype_view_then_written,
    "conj_of_dtype_view": _conj_of_dtype_view,
    "dtype_view_of_written_split": _dtype_view_of_written_split,
    "view_as_complex_of_reshaped_intermediate": _view_as_complex_of_reshaped_intermediate,
    "view_as_complex_of_reshaped_product": _view_as_complex_of_reshaped_product,
}


def _inputs(rg: tuple[bool, bool], offset: bool) -> Callable:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        a = torch.randn(8, 4, dtype=torch.float64, requires_grad=rg[0])
        y = torch.randn(4, 4, dtype=torch.float64, requires_grad=rg[1])
        x = a[2:6] if offset else a.clone() if rg[0] else a
        return [x, y], [t for t in (a, y) if t.requires_grad]

    return make


KINDS = {
    "plain": _inputs((False, False), False),
    "x_requires_grad": _inputs((True, False), False),
    "y_requires_grad": _inputs((False, True), False),
    "offset": _inputs((False, False), True),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_reinterpreting_output_is_eagers(name: str, compiler: str, kind: str) -> None:
    assert_like_eager(PROGRAMS[name], KINDS[kind], COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("name", ["view_as_real", "view_dtype"])
def test_written_offset_input_with_symbolic_sizes_reads_eagers_values(name: str) -> None:
    """Sizes traced as symbols, the layout of a view taken after a write to an input that
    starts past its storage's start is the written value's (not replayed at eager's): it
    was rebuilt at that offset, reading other elements. Returned as computed now (values
    right; sharing the input's bytes there stays open)."""

    def fn(x):
        x.mul_(2)
        return torch.view_as_real(x) if name == "view_as_real" else x.view(C)

    dtype, shape = (C, (8, 2)) if name == "view_as_real" else (torch.float64, (8, 4))
    compiled = aotgrad.aot_function(fn, aotgrad.nop, dynamic=True)
    for _ in range(2):
        a = torch.randn(*shape, dtype=dtype)
        b = a.clone()
        torch.testing.assert_close(compiled(a[2:6]), fn(b[2:6]))
        torch.testing.assert_close(a, b)
