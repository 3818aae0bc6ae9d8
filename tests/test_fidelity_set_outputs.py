"""Views of an input the function ``set_()`` to another input's storage (a blind
helper's find, round 52): eager's view that input (``_base``, version counter) though
the bytes are the other's; the graph computes them from the other input, so they came
back views of it, and the caller's write to one moved the wrong counter."""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS


def _unsqueezed(x, y):
    x.set_(y)
    return x.unsqueeze(0)


def _sliced(x, y):
    x.set_(y)
    return x[1:]


def _both_viewed(x, y):
    x.set_(y)
    return x.unsqueeze(0), y.unsqueeze(0)


def _itself(x, y):
    x.set_(y)
    return x


def _seen(fn):
    torch.manual_seed(0)
    x, y = torch.randn(3, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    outs = fn(x, y)
    outs = outs if isinstance(outs, tuple) else (outs,)
    seen = [(o._base is x, o._base is y, o is x, o._version) for o in outs]
    outs[0].mul_(2)  # (the caller's write: it moves the counter eager's view shares)
    return [*seen, (x._version, y._version), x.tolist(), y.tolist()]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_unsqueezed, _sliced, _both_viewed, _itself], ids=lambda f: f.__name__
)
def test_views_of_an_input_set_to_another_storage(fn, compiler):
    assert _seen(COMPILERS[compiler](fn)) == _seen(fn)
