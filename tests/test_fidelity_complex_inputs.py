"""Complex inputs and the views that reinterpret their bytes (another dtype, a conjugate
or negative bit): made by a custom Function, written through, or taken under
``torch.inference_mode()`` (fidelity seeds 240, 51, 200101, 200031).

* A custom Function's view of such a view of an input (``ViewOf.apply(x.imag)``) was
  rebuilt as an ``as_strided`` of the complex input at the float view's strides and
  offset: "setStorage ... out of bounds", or wrong elements where they fit; one of
  ``x.conj()`` lost the conjugate bit (wrong values). ``ViewSpec`` now records the view's
  dtype and bits (``reinterpret``), its layout in that dtype's elements.
* A write through ``x.conj()`` left ``x``'s functional value with the conjugate bit
  (torch's functionalization inverts the view lazily), so ``view_as_real(x)`` raised in
  the trace and the call ran eagerly (torch's own AOT Autograd raises); through
  ``view(dtype)`` of a real tensor the inverse itself raised. The trace now writes the
  bytes through a view without the bit and resolves the root (``trace.conj_writes``).
* ``view_as_real`` of an input that requires grad, returned from a call that records
  nothing (``no_grad``, ``inference_mode``), was returned as computed: no view, and an
  inference tensor under inference mode. It is now made of the caller's tensor.
* ``x.view(dtype)`` under inference mode is an inference tensor sharing ``x``'s bytes
  (no view, no version counter: a write through it leaves ``x._version``); it was
  returned as a view, and its writes counted on ``x`` (``inference_views``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, Half, ViewOf, assert_like_eager

ENTRIES = list(COMPILERS)
NOT_RECORDING = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}


def _complex_input(flags: tuple[bool, ...]) -> Callable[[], tuple[list[Any], list[Any]]]:
    """``view_as_complex`` of a float leaf, the leaf requiring grad per call as ``flags``
    says (the second call's differs: seed 240 failed on it)."""
    calls = iter(flags * 4)

    def make() -> tuple[list[Any], list[Any]]:
        rg = next(calls)
        leaf = torch.randn(5, 4, 2, dtype=torch.float64, requires_grad=rg)
        return [torch.view_as_complex(leaf[1:])], [leaf] if rg else []

    return make


def _complex_leaf(conj: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        x = torch.randn(4, 4, dtype=torch.complex128, requires_grad=True)
        return [x.conj() if conj else x], [x]

    return make


def _custom_view_of_imag(x):
    return (ViewOf.apply(x.imag),)


def _custom_view_of_view_as_real(x):
    return ViewOf.apply(torch.view_as_real(x)), x.abs()


def _custom_view_of_real_rows(x):
    v = Half.apply(x.real[1:])
    return v, v * 2


def _custom_view_of_conj(x):
    return (ViewOf.apply(x.conj()),)


def _custom_view_of_conj_imag(x):
    return (ViewOf.apply(x.conj().imag),)


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize(
    "fn", [_custom_view_of_imag, _custom_view_of_view_as_real, _custom_view_of_real_rows]
)
def test_custom_function_view_of_a_float_view_of_a_complex_input(
    fn: Callable, compiler: str
) -> None:
    assert_like_eager(fn, _complex_input((False, True)), COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("conj", [False, True], ids=["plain", "conj_input"])
@pytest.mark.parametrize(
    "fn", [_custom_view_of_imag, _custom_view_of_conj, _custom_view_of_conj_imag]
)
def test_custom_function_view_keeps_the_conjugate_and_negative_bits(
    fn: Callable, conj: bool, compiler: str
) -> None:
    assert_like_eager(fn, _complex_leaf(conj), COMPILERS[compiler], calls=2)


def _conj_write_then_view_as_real(x):
    x.conj().mul_(2)
    return (torch.view_as_real(x),)


def _neg_write_then_imag(x):
    x.conj().imag.mul_(3)
    return torch.view_as_real(x), x.imag * 1


def _conj_row_write_then_dtype_view(x):
    x.conj()[1:].add_(1j)
    return x.view(torch.float64), x.sin()


def _conj_write_through_a_view(x):
    t = x.view(2, 8)
    t.conj().mul_(1j)
    return torch.view_as_real(t), torch.view_as_real(x)


def _conj_write_through_a_dtype_view(x):
    # (of the real input: the view(dtype) inverse met the bit and raised, seed 214)
    torch.view_as_real(x).view(torch.complex128).conj().mul_(2)
    return (x * 1,)


def _float_pairs(rg: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        leaf = torch.randn(4, 8, dtype=torch.float64, requires_grad=rg)
        return [leaf.clone().view(torch.complex128)], [leaf] if rg else []

    return make


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("rg", [False, True], ids=["plain", "requires_grad"])
@pytest.mark.parametrize(
    "fn",
    [
        _conj_write_then_view_as_real,
        _neg_write_then_imag,
        _conj_row_write_then_dtype_view,
        _conj_write_through_a_view,
        _conj_write_through_a_dtype_view,
    ],
)
def test_write_through_a_conjugate_view_stays_compiled(
    fn: Callable, rg: bool, compiler: str
) -> None:
    # (an EagerReplayWarning, an error under pytest, named the trace's failure)
    assert_like_eager(fn, _float_pairs(rg), COMPILERS[compiler], calls=2)


def _written_then_view_as_real(x):
    x.mul_(1j)
    return torch.view_as_real(x), x.imag.sum()


def _view_as_real_unwritten(x):
    return (torch.view_as_real(x)[1:],)


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("mode", sorted(NOT_RECORDING))
@pytest.mark.parametrize("fn", [_written_then_view_as_real, _view_as_real_unwritten])
def test_view_as_real_of_an_input_with_grad_where_nothing_records(
    fn: Callable, mode: str, compiler: str
) -> None:
    make = _complex_input((True, False))
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, ctx=NOT_RECORDING[mode])


def _imag_of_dtype_view_written(x):
    t = x.view(torch.complex128)
    t.imag.zero_()
    return x.detach(), torch.view_as_real(t)


def _dtype_view_written(x):
    t = x.view(torch.complex128)
    t.mul_(2)
    return (t,)


def _same_dtype_view(x):
    return (x.view(torch.float64)[1:],)


def _real_input(rg: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=rg)
        return [leaf.clone()], [leaf] if rg else []

    return make


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("rg", [False, True], ids=["plain", "requires_grad"])
@pytest.mark.parametrize("fn", [_imag_of_dtype_view_written, _dtype_view_written, _same_dtype_view])
def test_dtype_view_under_inference_mode_is_an_inference_tensor(
    fn: Callable, rg: bool, compiler: str
) -> None:
    assert_like_eager(fn, _real_input(rg), COMPILERS[compiler], calls=2, ctx=torch.inference_mode)


@pytest.mark.parametrize("compiler", ENTRIES)
def test_dtype_view_outside_inference_mode_is_still_a_view(compiler: str) -> None:
    assert_like_eager(
        _imag_of_dtype_view_written,
        _real_input(False),
        COMPILERS[compiler],
        calls=2,
        ctx=contextlib.nullcontext,
    )
