"""A leaf the function makes of another tensor's value (``t2 = t1.detach()
.requires_grad_()``), returned twice beside that tensor: ``t2, t1, t2``.

Inside the graph the detach is the identity, so the three outputs are one value; the
runtime makes ``t2`` a leaf of its own and the second ``t2`` the first one's object
(``same_as``). It made the second a leaf in place of the shared object too, which was
``t1``'s: ``t1`` came back requiring grad where eager's does not (soak 241950:
``return (t2, x2[:, 1], t1, t2)``, ``t1 = x2.mean()`` of an input without grad; its
gradient was returned where eager has none). Compared with eager on every output (value,
flags, identity between outputs) and gradient (``eager_oracle``), inputs with and without
grad.
"""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager


def _made(x):
    t1 = x.mean() if x.dim() == 2 else x * 2
    return t1, t1.detach().requires_grad_()


def _leaf_twice_around(x):
    t1, t2 = _made(x)
    return t2, t1, t2


def _leaf_twice_after(x):
    t1, t2 = _made(x)
    return t1, t2, t2


def _leaf_twice_before(x):
    t1, t2 = _made(x)
    return t2, t2, t1


def _both_twice(x):
    t1, t2 = _made(x)
    return t2, t1, t2, t1


def _leaf_twice_with_a_view(x):
    t1 = x * 2
    t2 = t1.detach().requires_grad_()
    return t2, t1[0], t2, t1


FUNCTIONS = [
    _leaf_twice_around,
    _leaf_twice_after,
    _leaf_twice_before,
    _both_twice,
    _leaf_twice_with_a_view,
]


def _input(requires_grad: bool, dims: int):
    def make():
        x = torch.randn(*(4,) * dims, dtype=torch.float64)
        return [x.requires_grad_(requires_grad)], [x] if requires_grad else []

    return make


@pytest.mark.parametrize("entry", sorted(COMPILERS))
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_new_leaf_returned_twice_like_eager(fn, requires_grad, dims, entry):
    assert_like_eager(fn, _input(requires_grad, dims), COMPILERS[entry], calls=2)
