"""Views the caller made under no_grad of a tensor that requires grad (fidelity seed 119520).

Such a view ``x3`` requires grad (through its base) without a gradient edge of its own:
eager's ``x3 @ x0`` computes no gradient for it, so saves no ``x0``, and a write to ``x0``
after the call does not fail its backward. The trace's fake of ``x3`` had an edge: its
graph differentiated ``x3``, saved ``x0``, and the runtime raised eager's version error
("... which is an input of the compiled function, is at version 1"). The trace now runs
the function on such a view (``view_nodes.gradient_edgeless``), and the guard key, the
cache key and the checks aotgrad adds to Dynamo's guards tell it from a leaf (the
``kinds`` below alternate between calls: a leaf's gradient needs ``x0``, so eager raises).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = list(COMPILERS)


def _edgeless_view_input(kinds: tuple[str, ...]) -> Callable[[], tuple[list, list]]:
    """``x0``, a non-leaf that requires grad, and ``x3``, per call as ``kinds`` says: a
    view made under no_grad of a leaf that requires grad (``edgeless``), the same given an
    accumulator of its own by the caller's ``requires_grad_()`` (``own_edge``), or a
    plain leaf (``leaf``)."""
    calls = iter(kinds * 4)

    def make() -> tuple[list[Any], list[Any]]:
        kind = next(calls)
        l0 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        base = torch.randn(4, 8, dtype=torch.float64, requires_grad=True)
        if kind == "leaf":
            x3 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            return [l0.clone(), x3], [l0, x3]
        with torch.no_grad():
            x3 = base[:, 2:6]
        if kind == "own_edge":
            x3.requires_grad_()
            return [l0.clone(), x3], [l0, x3, base]
        return [l0.clone(), x3], [l0, base]

    return make


def _matmul_by_edgeless(x0, x3):
    return x3 @ x0, x0


def _matmul_of_edgeless(x0, x3):
    return x0 @ x3, x3[1:], x0


def _product_with_edgeless(x0, x3):
    return (x3 * x0).sin(), x0


def _matmul_of_an_output_by_edgeless(x0, x3):
    t = x0 * 2
    return x3 @ t, t


EDGELESS_PROGRAMS = [
    _matmul_by_edgeless,
    _matmul_of_edgeless,
    _product_with_edgeless,
    _matmul_of_an_output_by_edgeless,
]


def _write_returned_input(outs: list[Any]) -> None:
    outs[-1].detach().add_(1)  # (``x0`` or ``t``, returned: written after the call)


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize(
    "kinds",
    [("edgeless",), ("edgeless", "leaf"), ("leaf", "edgeless"), ("own_edge", "edgeless")],
    ids=["edgeless", "edgeless_then_leaf", "leaf_then_edgeless", "own_edge_then_edgeless"],
)
@pytest.mark.parametrize("fn", EDGELESS_PROGRAMS)
def test_input_written_after_a_call_that_read_it_beside_an_edgeless_view(
    fn: Callable, kinds: tuple[str, ...], compiler: str
) -> None:
    make = _edgeless_view_input(kinds)
    compiled = COMPILERS[compiler]
    assert_like_eager(fn, make, compiled, calls=2, after=_write_returned_input)


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("fn", [_matmul_by_edgeless, _matmul_of_edgeless])
def test_edgeless_view_input_without_a_later_write(fn: Callable, compiler: str) -> None:
    make = _edgeless_view_input(("edgeless", "leaf"))
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _returns_it_and_reads_its_flags(x0, x3):
    return x3, x3.requires_grad, x3.is_leaf, x3 @ x0, x0


def _reads_it_under_no_grad_too(x0, x3):
    with torch.no_grad():
        y = x3 @ x0
    return y, x3.t() @ x0, x0


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("write", [False, True], ids=["unwritten", "written"])
@pytest.mark.parametrize("fn", [_returns_it_and_reads_its_flags, _reads_it_under_no_grad_too])
def test_edgeless_view_returned_or_read_without_grad(
    fn: Callable, write: bool, compiler: str
) -> None:
    make = _edgeless_view_input(("edgeless", "leaf"))
    after = _write_returned_input if write else None
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, after=after)


def _gives_it_an_edge(x0, x3):
    x3.requires_grad_()
    return x3 @ x0, x0


@pytest.mark.parametrize("compiler", ENTRIES)
def test_requires_grad_on_an_edgeless_view_runs_eagerly(compiler: str) -> None:
    """Eager's ``requires_grad_()`` gives the caller's view an accumulator (its ``.grad``
    is filled); the compiled graph has no edge to give it: the call runs eagerly, named
    (it was compiled, leaving ``x3.grad`` None). Dynamo runs ``requires_grad_()`` itself."""
    make = _edgeless_view_input(("edgeless",))
    replays = (
        contextlib.nullcontext()
        if compiler.startswith("dynamo")
        else pytest.warns(aotgrad.errors.EagerReplayWarning, match="made under no_grad")
    )
    with replays:
        assert_like_eager(_gives_it_an_edge, make, COMPILERS[compiler], calls=2)
