"""Views taken with grad of a view an input got under ``no_grad`` (``with no_grad: t =
x.t()``, then ``t.split(2)[1].diagonal()`` returned), compared with eager
(``eager_oracle.assert_like_eager``).

Eager's node of such a view ends at the ``no_grad`` view, which autograd takes for a
leaf: no gradient reaches ``x``. A piece of a multi-output op (``split``, ``chunk``,
``unbind``) was made again of ``x`` with grad, so ``x.grad`` got one (soak 254883: a
silently wrong gradient); a slice was already eager's.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

NO_GRAD_VIEWS = {
    "t": lambda x: x.t(),
    "slice": lambda x: x[1:],
    "view": lambda x: x.view(2, 8),
}
PIECES = {
    "split": lambda t: t.split(2)[1],
    "chunk": lambda t: t.chunk(2)[0],
    "unbind": lambda t: t.unbind(0)[1],
    "slice": lambda t: t[1:],
    "split_then_diagonal": lambda t: t.split(2)[1].diagonal(),
}
WRITES = {"none": None, "piece": lambda outs: outs[0].mul_(2)}


def _program(view: str, piece: str):
    def f(x, w):
        with torch.no_grad():
            t = NO_GRAD_VIEWS[view](x)
        return PIECES[piece](t), (w * x).sum()

    return f


def _args():
    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x, w], [x, w]


CASES = list(itertools.product(NO_GRAD_VIEWS, PIECES, WRITES))


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_a_piece_of_a_no_grad_view_stops_at_it(case, compiler: str) -> None:
    view, piece, write = case
    assert_like_eager(_program(view, piece), _args, COMPILERS[compiler], after=WRITES[write])
