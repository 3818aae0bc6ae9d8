"""Dropout and the global generator, compared with eager.

With a probability of 1 in training eager draws nothing (its kernel returns ``x * 0``):
the caller's next random numbers must be eager's (``aotgrad.eager_shortcuts``; the traced
decomposition drew a full mask: blind RNG suite ``dropout_p_one``). Under
``checkpoint(preserve_rng_state=False)`` eager's backward draws again: such a call runs
eagerly (``aotgrad.hops``)."""

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


def _checkpointed(body):
    from torch.utils.checkpoint import checkpoint

    return lambda x: checkpoint(body, x, use_reentrant=False, preserve_rng_state=False)


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if c.startswith("aot_function")])
def test_checkpoint_without_rng_state_around_dropout_runs_eagerly(compiler: str) -> None:
    # eager's backward recomputes the dropout with a fresh mask (blind RNG suite
    # ``checkpoint_dropout_no_preserve_rng``): a compiled backward cannot, so the call
    # runs eagerly, with eager's gradient and generator state
    from aotgrad.errors import EagerReplayWarning

    f = _checkpointed(lambda t: F.dropout(t.sin(), 0.5, True) * t)
    x0 = torch.randn(8, dtype=torch.float64)
    want = _run(f, x0.clone().requires_grad_())
    with pytest.warns(EagerReplayWarning, match="preserve_rng_state=False"):
        got = _run(COMPILERS[compiler](f), x0.clone().requires_grad_())
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if c.startswith("aot_function")])
def test_checkpoint_without_rng_state_and_no_draws_compiles(compiler: str) -> None:
    import warnings

    f = _checkpointed(lambda t: t.sin() * t)
    x0 = torch.randn(8, dtype=torch.float64)
    want = _run(f, x0.clone().requires_grad_())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _run(COMPILERS[compiler](f), x0.clone().requires_grad_())
    for w, g in zip(want, got, strict=True):
        torch.testing.assert_close(g, w)
