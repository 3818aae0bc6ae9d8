"""A tensor the function makes a leaf (``t.requires_grad_()``) beside an input whose
``requires_grad`` it turns on for a while (``x.requires_grad_()`` ... ``x.detach_()``),
compared with eager (``eager_oracle.assert_like_eager``, two calls on the same inputs).

Eager's ``t``, computed before ``x`` required grad, is a leaf. The runtime turns the
caller's ``x`` on while the graph runs (outputs computed from it after the switch have
a history), so the graph's ``t`` came back with one: not a leaf, its gradient lost
(soak 255988)."""

from __future__ import annotations

import itertools

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

OFF = {
    "detach_": lambda x: x.detach_(),
    "flag_off": lambda x: x.requires_grad_(False),
    "stays_on": lambda x: None,
}
MADE = {
    "before": "t computed before x requires grad",
    "after": "t computed after",
}
RETURNS = {"leaf": lambda x, t, u: (t,), "all": lambda x, t, u: (3, x, t, u)}


def _program(off: str, made: str, returns: str):
    def f(x, y):
        t = y / (x.abs() + 1) if made == "before" else None
        x.requires_grad_()
        if t is None:
            t = (y / (x.abs() + 1)).detach()
        t.requires_grad_()
        u = x * 2
        OFF[off](x)
        return RETURNS[returns](x, t, u)

    return f


def _args():
    return [torch.randn(4, 4, dtype=torch.float64), torch.randn(4, 4, dtype=torch.float64)], []


CASES = list(itertools.product(OFF, MADE, RETURNS))


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_a_leaf_beside_an_input_on_for_a_while(case, compiler: str) -> None:
    assert_like_eager(_program(*case), _args, COMPILERS[compiler], calls=2)
