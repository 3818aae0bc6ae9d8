"""The function's hooks on an output it returns with a view of it (``t.register_hook(h);
return t, t[0]``): eager runs them on ``t``'s gradient, the view's part included, before
the hooks the caller registers on ``t``. The view is remade of the caller's ``t``, so its
part reaches ``t``'s node there; the function's hook stayed in the compiled backward and
ran after the caller's, on ``t``'s own part only (the blind hooks suite, 6 pairs). It is
registered on the caller's ``t`` now. A view the runtime does not remake of ``t`` (a
custom Function's, one made under no_grad, of a detached alias) keeps it in the trace."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch

from eager_oracle import COMPILERS, ViewOf, assert_like_eager, leaf_clone


def _clamp(g):
    return g.clamp(-0.3, 0.3)


def _row_of_hooked(x):
    t = x * 2
    t.register_hook(_clamp)
    return t, t[0]


def _row_of_hooked_caller_hook(x):
    return _row_of_hooked(x)


def _custom_view_of_hooked(x):
    t = x * 2
    t.register_hook(_clamp)
    return t, ViewOf.apply(t)


def _no_grad_view_of_hooked(x):
    t = x * 2
    t.register_hook(_clamp)
    with torch.no_grad():
        v = t[0]
    return t, v


def _view_and_detached_view(x):
    t = x * 2
    t.register_hook(_clamp)
    return t, t[0], t.detach()[1]


def _view_fed_into_another(x):
    t = x * 2
    t.register_hook(_clamp)
    v = t[1:]
    return t, v * 3


PROGRAMS = [
    _row_of_hooked,
    _custom_view_of_hooked,
    _no_grad_view_of_hooked,
    _view_and_detached_view,
    _view_fed_into_another,
]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", PROGRAMS)
def test_hooks_on_an_output_returned_with_its_view(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler])


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_the_callers_hook_runs_after_the_functions(compiler: str) -> None:
    """The caller doubles ``t``'s gradient: eager clamps the sum first, then doubles."""
    results = []
    for compile_ in (lambda f: f, COMPILERS[compiler]):
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            x.copy_(torch.linspace(-1, 1, 16, dtype=torch.float64).view(4, 4))
        t, row = compile_(_row_of_hooked_caller_hook)(x.clone())
        t.register_hook(lambda g: g * 2)
        (t.sum() + (row * 5).sum()).backward()
        results.append(x.grad)
    torch.testing.assert_close(results[1], results[0])


# ``retain_grad()`` inside the function on a returned view that other outputs are
# computed from (``t = x[1:]; t.retain_grad(); return t, t * 3``): eager's ``.grad`` is
# the sum of both parts. The call ran eagerly; the view is linked now (the fed outputs'
# link hands its node the others' part, autograd's retain hook sees the sum). One that a
# view the runtime remakes of the base is computed from (``(x * 2).t()`` and its row)
# still runs eagerly (the link would miss the row's part).


def _retained_input_view(x):
    t = x[1:]
    t.retain_grad()
    return t, t * 3


def _retained_intermediate_view(x):
    t = (x * 2)[1:]
    t.retain_grad()
    return t, t.sin()


def _retained_input_view_and_its_row(x):
    t = x[1:]
    t.retain_grad()
    return t, t[0], t.exp()


def _retained_transposed_and_its_row(x):
    t = (x * 2).t()
    t.retain_grad()
    return t, t[0]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _retained_input_view,
        _retained_intermediate_view,
        _retained_input_view_and_its_row,
        _retained_transposed_and_its_row,
    ],
)
def test_a_retained_view_others_are_computed_from(fn: Callable, compiler: str) -> None:
    results = []
    for compile_ in (lambda f: f, COMPILERS[compiler]):
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            x.copy_(torch.linspace(-1, 1, 16, dtype=torch.float64).view(4, 4))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = compile_(fn)(x.clone() if fn is _retained_input_view else x)
        sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
        eager_run = any(type(w.message).__name__ == "EagerReplayWarning" for w in caught)
        results.append((outs[0].grad, eager_run))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[1][1] == (fn is _retained_transposed_and_its_row and "dynamo" not in compiler)
