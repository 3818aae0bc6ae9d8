"""Hooks on a piece of a multi-output view (``unbind``, ``split``, ``chunk``) that gets no
gradient, beside a piece that does: eager's backward runs the pieces' shared node and
calls the hook with None. A hook written for tensors raises there (``g * 0.5``: a
``TypeError`` in the backward), one that counts its calls counts a None.

The compiled call skipped both: a hook the function registers on such a piece of an
input, beside a piece it returns (the output made again as a view of the caller's
input, on a node of its own: soak 250352, 248984), and a hook on an input the caller
split, beside the piece the function uses (soak 245818: the runtime skipped None for
every input hook). Each program runs under eager and each entry point; the hook's calls
(None or the gradient's shape), the leaves' gradients and the error raised must match.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS

DT = torch.float64


def _pieces_of_a_caller_split(x3, x4, w, hook):
    x3.register_hook(hook)  # (soak 245818)
    return (x4 * w,)


def _pieces_of_a_caller_split_none_used(x3, x4, w, hook):
    x3.register_hook(hook)  # eager's node never runs: no call
    return (w * 2,)


def _pieces_of_a_caller_split_hooked_used(x3, x4, w, hook):
    x3.register_hook(hook)
    return (x3 * w,)


def _unbind_of_an_input_beside_the_returned_piece(x3, x4, w, hook):
    a, b = x3.unbind(0)  # (soak 250352)
    a.register_hook(hook)
    return (b, w * 2)


def _unbind_in_enable_grad_called_under_no_grad(x3, x4, w, hook):
    with torch.enable_grad():
        a, b = x3.unbind(0)
    a.register_hook(hook)
    return (b, b.detach())


def _split_of_an_input_beside_a_computed_piece(x3, x4, w, hook):
    a, b = x4.split(1)
    a.register_hook(hook)
    return (b.sin(),)


def _chunk_of_an_intermediate(x3, x4, w, hook):
    a, b = (x3 * w).chunk(2, dim=1)
    a.register_hook(hook)
    return (b * 3,)


PROGRAMS = [
    _pieces_of_a_caller_split,
    _pieces_of_a_caller_split_none_used,
    _pieces_of_a_caller_split_hooked_used,
    _unbind_of_an_input_beside_the_returned_piece,
    _unbind_in_enable_grad_called_under_no_grad,
    _split_of_an_input_beside_a_computed_piece,
    _chunk_of_an_intermediate,
]


def _observed(fn: Callable, raising: bool) -> list[Any]:
    """The hook's calls, the leaves' gradients, the error the backward raised (type)."""
    calls: list[Any] = []

    def hook(g):
        calls.append(None if g is None else tuple(g.shape))
        return g * 0.5 if raising else None

    leaf = torch.randn(4, 3, dtype=DT, generator=torch.Generator().manual_seed(2))
    leaf.requires_grad_()
    w = torch.randn(2, 3, dtype=DT, generator=torch.Generator().manual_seed(3))
    w.requires_grad_()
    x3, x4 = leaf.clone().split(2)
    no_grad = fn is _unbind_in_enable_grad_called_under_no_grad
    with torch.set_grad_enabled(not no_grad):
        outs = fn(x3, x4, w, hook)
    error = None
    try:
        torch.autograd.backward([o.sum() for o in outs if o.requires_grad])
    except TypeError as e:
        error = type(e).__name__
    return [calls, error, leaf.grad, w.grad]


@pytest.mark.parametrize("raising", [False, True], ids=["counting", "raising"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_a_hook_on_an_unused_piece_is_called_as_in_eager(
    fn: Callable, compiler: str, raising: bool
) -> None:
    want = _observed(fn, raising)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _observed(COMPILERS[compiler](fn), raising)
    assert got[:2] == want[:2], f"eager {want[:2]}, compiled {got[:2]}"
    if want[1] is not None:  # (what a raising pass accumulated first: the engine's order)
        return
    for g, e in zip(got[2:], want[2:], strict=True):
        assert (g is None) == (e is None)
        if e is not None:
            torch.testing.assert_close(g, e)


def test_both_pieces_returned_compile() -> None:
    """The hooked piece returned beside the other: its hook is the output's (the runtime
    registers it), no reason to run eagerly."""
    from aotgrad.errors import EagerReplayWarning

    def fn(x):
        a, b = x.chunk(2, dim=1)
        a.register_hook(lambda g: g * 2)
        return a, b

    compiled = COMPILERS["aot_function-min_cut"](fn)
    x = torch.randn(3, 4, dtype=DT, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        a, b = compiled(x.clone())
    (a.sum() + b.sum() * 3).backward()
