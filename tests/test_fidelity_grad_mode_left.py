"""A function that leaves grad mode changed (``torch.set_grad_enabled(False)`` at its
end, not undone): eager's caller goes on in that mode, and the outputs computed before
the change keep their history. Found by a blind helper (round 52): the first call's
trace leaked the mode into the compiled call (its outputs lost their history), later
calls left the caller's mode as it was."""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS


def _off_at_end(x):
    y = x * 2
    torch.set_grad_enabled(False)
    return y, x * 3


def _off_at_start(x):
    torch.set_grad_enabled(False)
    return x * 2


def _on_at_start(x):
    torch.set_grad_enabled(True)
    return x * 2, x.sin()


def _toggled_and_restored(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y, x * 3


PROGRAMS = [_off_at_end, _off_at_start, _on_at_start, _toggled_and_restored]


def _seen(fn, caller_grad):
    torch.manual_seed(0)
    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    seen = []
    for _ in range(3):  # (the first call traces; the others reuse it)
        torch.set_grad_enabled(caller_grad)
        try:
            outs = fn(x)
        finally:
            mode = torch.is_grad_enabled()
            torch.set_grad_enabled(True)
        outs = outs if isinstance(outs, tuple) else (outs,)
        seen.append((mode, [(o.requires_grad, o.grad_fn is None) for o in outs]))
        diff = [o.sum() for o in outs if o.requires_grad]
        if diff:
            seen.append(torch.autograd.grad(sum(diff), x)[0])
    return seen


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("caller_grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_grad_mode_the_function_leaves(fn, caller_grad, compiler):
    try:
        want = _seen(fn, caller_grad)
        got = _seen(COMPILERS[compiler](fn), caller_grad)
    finally:
        torch.set_grad_enabled(True)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w)
        else:
            assert g == w
