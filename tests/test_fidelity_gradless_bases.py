"""Inputs whose ``requires_grad`` is not their base's, compared with eager
(``eager_oracle.assert_like_eager``):

- an input that is a view made to require grad of a base that does not
  (``l = randn(8, 4); x = l[2:6]; x.requires_grad_()``): eager's views of it made without
  history (under ``no_grad``) are views of ``l``, so they require no grad. The trace's
  stand-in for ``x`` is a leaf, whose views said they require grad: a spurious raise
  ("A view was created in no_grad mode and its base ... has been modified inplace")
  where eager runs (soak 65012, 68132), an output requiring grad where eager's does not;
- an input without grad the function makes require grad and turns off again
  (``x.requires_grad_(); t = x.reshape(2, -1); x.requires_grad_(False)``): eager's
  outputs computed from it meanwhile have a history (soak 67261: they came back leaves).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = sorted(COMPILERS)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


def _leaf_view_alone() -> tuple[list[Any], list[torch.Tensor]]:
    l0 = _r(8, 4)
    x = l0[2:6]
    x.requires_grad_()
    return [x, _r(4, 4).requires_grad_()], [x]


def _leaf_view_beside_a_sibling() -> tuple[list[Any], list[torch.Tensor]]:
    """``y`` overlaps ``x`` (one base): a write makes them a synthetic base."""
    l0 = _r(8, 4)
    x, y = l0[2:6], l0[0:4]
    x.requires_grad_()
    return [x, y], [x]


def _viewed_under_no_grad(x, y):
    with torch.no_grad():
        m = x[0]
    return m * y[0], m.requires_grad


def _chunk_written_under_no_grad(x, y):
    with torch.no_grad():
        a, b = x.chunk(2, -1)
        a.zero_()
    return a.reshape(2, -1), b.sum() + y.sum()


def _view_of_a_tracked_view(x, y):
    v = x.t()
    with torch.no_grad():
        w = v[0]
    return w, v * 2, w.requires_grad


def _unbound_and_made_a_leaf(x, y):
    with torch.no_grad():
        rows = x.unbind(0)
        w = x.view(-1)
    w.requires_grad_()
    return rows[1], rows[0].requires_grad, w * 2, (x * 3).sum()


def _detached_copy_of_a_no_grad_view(x, y):
    with torch.no_grad():
        m = x[1:]
    return m.detach(), m.requires_grad, x * 2


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("make", [_leaf_view_alone, _leaf_view_beside_a_sibling])
@pytest.mark.parametrize(
    "fn",
    [
        _viewed_under_no_grad,
        _chunk_written_under_no_grad,
        _view_of_a_tracked_view,
        _unbound_and_made_a_leaf,
        _detached_copy_of_a_no_grad_view,
    ],
)
def test_no_grad_views_of_a_leaf_view_over_a_base_without_grad(fn, make, entry):
    assert_like_eager(fn, make, COMPILERS[entry], calls=2)


def _views_of_an_input_without_grad_written_with_grad(x0, x1, w):
    """``x0`` and ``x1`` view one base without grad: eager's earlier view of ``x0`` gains a
    history when the base is written with ``w`` (the detached alias must not be used)."""
    t1 = x0.squeeze()
    x0[1:3].add_(w)
    return t1, t1[0], x1 * 2


def _overlapping_views_without_grad() -> tuple[list[Any], list[torch.Tensor]]:
    b = _r(8, 4)
    w = _r(()).requires_grad_()
    return [b[0:4], b[2:6], w], [w]


@pytest.mark.parametrize("entry", ENTRIES)
def test_views_of_a_base_without_grad_gain_its_history(entry):
    if entry.startswith("dynamo"):
        pytest.skip("Dynamo's own: backend='eager' raises AssertionError on the write too")
    assert_like_eager(
        _views_of_an_input_without_grad_written_with_grad,
        _overlapping_views_without_grad,
        COMPILERS[entry],
        calls=2,
    )


# Inputs without grad the function makes require grad for a while.


def _alone() -> tuple[list[Any], list[torch.Tensor]]:
    return [_r(4, 4), _r(4, 4)], []


def _beside_a_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    w = _r(4, 4).requires_grad_()
    return [_r(4, 4), w], [w]


def _a_view_without_grad() -> tuple[list[Any], list[torch.Tensor]]:
    return [_r(8, 4)[2:6], _r(4, 4)], []


def _on_then_off(x, w):
    x.requires_grad_()
    t = x.reshape(2, -1)
    x.requires_grad_(False)
    return torch.cat([t, t]), t[1:], x * 2


def _on_then_detached(x, w):
    x.requires_grad_()
    t = x.sin()
    x.detach_()
    return t, x, x.requires_grad


def _on_off_and_on(x, w):
    x.requires_grad_()
    t = x.exp() * w
    x.requires_grad_(False)
    u = x * 3
    x.requires_grad_()
    return t, u, x.cos()


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("make", [_alone, _beside_a_leaf, _a_view_without_grad])
@pytest.mark.parametrize("fn", [_on_then_off, _on_then_detached, _on_off_and_on])
@pytest.mark.parametrize("mode", ["grad", "no_grad"])
def test_an_input_requiring_grad_for_a_while(fn, make, entry, mode):
    ctx = torch.no_grad if mode == "no_grad" else torch.enable_grad
    assert_like_eager(fn, make, COMPILERS[entry], calls=2, ctx=ctx)


# Found by a blind helper: a no_grad view made a leaf, a view after a write with grad,
# and a leaf input's own flags read inside the function.


def _no_grad_view_made_a_leaf(x, y):
    with torch.no_grad():
        v = x[0]
    v.requires_grad_()
    return v, v * 2


def _no_grad_view_after_a_write_with_grad(x, y):
    x[0].mul_(y[0])
    with torch.no_grad():
        v = x[1:]
    return v, v.requires_grad


def _read_own_flags(x, y):
    return x.requires_grad, x.is_leaf, x.grad_fn is None, x * 2


def _without_grad() -> tuple[list[Any], list[torch.Tensor]]:
    l0 = _r(8, 4)
    y = _r(4, 4).requires_grad_()
    return [l0[2:6], y], [y]


def _leaf_and_plain_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    x = _r(4, 4).requires_grad_()
    return [x, _r(4, 4)], [x]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "fn, make",
    [
        (_no_grad_view_made_a_leaf, _leaf_view_alone),
        (_no_grad_view_made_a_leaf, _without_grad),
        (_no_grad_view_after_a_write_with_grad, _without_grad),
        (_read_own_flags, _leaf_view_alone),
        (_read_own_flags, _leaf_and_plain_leaf),
        (_read_own_flags, _without_grad),
    ],
)
def test_blind_finds(fn, make, entry):
    assert_like_eager(fn, make, COMPILERS[entry], calls=2)
