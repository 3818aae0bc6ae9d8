"""The function setting the random number generator's state: a compiled graph draws as
the function did but cannot repeat a Python call that sets the state, which runs once,
while tracing; from the second call on it drew other numbers than eager (blind I1).
``aot_function`` runs such calls eagerly, with a warning naming the call (they were
refused); ``torch.compile`` breaks the graph there and matches eager. A generator made outside and passed in is followed."""

from __future__ import annotations

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning

DT = torch.float64


def _seed_inside(x):
    torch.manual_seed(3)
    return x + torch.rand_like(x)


def _random_module_seed_inside(x):
    torch.random.manual_seed(3)
    return x + torch.rand_like(x)


def _set_state_inside(x):
    s = torch.get_rng_state()
    a = torch.rand_like(x)
    torch.set_rng_state(s)
    return x + a - torch.rand_like(x)


def _fork_inside(x):
    with torch.random.fork_rng():
        a = torch.rand_like(x)
    return a - torch.rand_like(x)


def _generator_made_inside(x):
    g = torch.Generator().manual_seed(5)
    return x + torch.randn(x.shape, generator=g, dtype=DT)


SETTERS = [
    (_seed_inside, "torch.manual_seed"),
    (_random_module_seed_inside, "torch.random.manual_seed"),
    (_set_state_inside, "torch.set_rng_state"),
    (_fork_inside, "torch.random.fork_rng"),
    (_generator_made_inside, "torch.Generator"),
]


def _two_calls(f):
    torch.manual_seed(0)
    x = torch.zeros(3, dtype=DT, requires_grad=True)
    return [f(x).detach().clone() for _ in range(2)]


@pytest.mark.parametrize(("fn", "named"), SETTERS)
def test_aot_function_runs_a_generator_state_setter_eagerly(fn, named):
    eager = _two_calls(fn)
    torch.testing.assert_close(eager[0], eager[1])  # eager repeats its draws every call
    with pytest.warns(EagerReplayWarning, match=named.replace(".", r"\.")):
        compiled = _two_calls(aotgrad.aot_function(fn, aotgrad.nop))
    torch.testing.assert_close(compiled, eager)


@pytest.mark.parametrize(("fn", "named"), SETTERS)
def test_torch_compile_runs_the_setter_like_eager(fn, named):
    torch._dynamo.reset()
    compiled = _two_calls(torch.compile(fn, backend="aotgrad_eager"))
    for c, e in zip(compiled, _two_calls(fn)):
        torch.testing.assert_close(c, e)


def test_a_generator_passed_in_is_followed():
    def f(x, g):
        return x + torch.randn(x.shape, generator=g, dtype=DT)

    def draws(fn):
        g = torch.Generator().manual_seed(7)
        x = torch.zeros(3, dtype=DT, requires_grad=True)
        return [fn(x, g).detach().clone() for _ in range(3)]

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    for c, e in zip(draws(compiled), draws(f)):
        torch.testing.assert_close(c, e)


def test_reading_the_state_without_setting_it_traces():
    def f(x):
        s = torch.get_rng_state()  # read only: nothing to repeat
        return x * 2 + s.numel() * 0

    x = torch.ones(3, dtype=DT, requires_grad=True)
    torch.testing.assert_close(aotgrad.aot_function(f, aotgrad.nop)(x), x * 2)


# torch's ``default_partition`` outside Dynamo (blind checkpoint/RNG suite): it looks up
# the trace's fake mode through a tracing context, which only Dynamo had made. A random op
# in a checkpoint raised "fake_mode must not be None"; without one, dropout was recomputed
# in the backward, which drew from the global generator again (the next call's mask, and
# every later draw, differed from eager's).


def _checkpointed_dropout(x):
    return torch.utils.checkpoint.checkpoint(
        lambda z: torch.nn.functional.dropout(z, 0.5, training=True).sin() * z,
        x,
        use_reentrant=False,
    )


def _dropout(x):
    return torch.nn.functional.dropout(x.exp(), 0.5, training=True).sin()


@pytest.mark.parametrize("fn", [_checkpointed_dropout, _dropout])
def test_default_partition_draws_as_eager(fn):
    from functorch.compile import default_partition

    results = []
    for run in (fn, aotgrad.aot_function(fn, aotgrad.nop, partition_fn=default_partition)):
        x = torch.linspace(-1, 1, 16, dtype=DT).requires_grad_()
        torch.manual_seed(12)
        first = run(x)
        first.sum().backward()
        second = run(x)  # (its mask drawn after the first backward)
        results.append([first.detach(), x.grad, second.detach(), torch.rand(4)])
    for got, want in zip(*results[::-1]):
        torch.testing.assert_close(got, want)
