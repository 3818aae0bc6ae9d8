"""Dropout with a probability of 1 in training draws nothing in eager (its kernel returns
``x * 0``): the caller's next random numbers must be eager's (``aotgrad.eager_shortcuts``;
the traced decomposition drew a full mask: blind RNG suite ``dropout_p_one``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from eager_oracle import COMPILERS

CALLS = {
    "functional": lambda x: F.dropout(x, 1.0, training=True),
    "functional_kw": lambda x: F.dropout(x, p=1.0, training=True),
    "inplace": lambda x: F.dropout(x * 1, 1.0, True, True),
    "aten": lambda x: torch.dropout(x, 1.0, True),
    "module": lambda x: torch.nn.Dropout(1.0)(x),
    "half": lambda x: F.dropout(x, 0.5, training=True),
    "eval": lambda x: F.dropout(x, 1.0, training=False),
}


def _run(fn, x):
    torch.manual_seed(3)
    out = fn(x)
    after_call = torch.rand(3)
    out.sum().backward() if out.requires_grad else None
    return out.detach(), x.grad, after_call, torch.rand(2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("call", list(CALLS))
def test_dropout_draws_as_eager(call: str, compiler: str) -> None:
    def f(x):
        return CALLS[call](x) + x

    x0 = torch.randn(6, dtype=torch.float64)
    want = _run(f, x0.clone().requires_grad_())
    got = _run(COMPILERS[compiler](f), x0.clone().requires_grad_())
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
