"""Training-loop patterns a blind helper wrote from a description alone (round 53), the
ones aotgrad got wrong, each compared with eager.

- One submodule under two names (``self.dec = self.enc``): ``aot_module`` swapped the
  module's parameters for traced stand-ins twice, restored the first stand-in as the
  second's original, and left a ``FunctionalTensor`` in the caller's module: the next
  call refused it, ``state_dict()`` failed.
- Outputs the backward does not reach (``loss, aux = f(x); loss.backward()``): the
  compiled backward took a zero tangent for ``aux``, and ``0 * inf`` is nan: the
  gradient came out nan (``runtime.unreached_tangents``).
- Python state the forward changes (``self.calls += 1``): a trace baked the value in and
  ran the forward more than once; now the setting is set back and the calls run eagerly.
  Likewise a tensor the forward stores on the module (``self.last_attn = a.detach()``):
  it was the trace's ``FunctionalTensor``, which raised on first use.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import aotgrad

pytestmark = pytest.mark.filterwarnings("ignore")


class _SharedTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(3, 3).double()
        self.dec = self.enc  # the same submodule under a second name
        self.head = nn.Linear(3, 2).double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.dec(self.enc(x).tanh()))


class _TiedAcross(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3).double()
        self.b = nn.Linear(3, 3).double()
        self.b.weight = self.a.weight  # one Parameter in two submodules

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).relu())


def _steps(model: nn.Module, run: nn.Module) -> list[torch.Tensor]:
    """Three training steps (grads accumulate, SGD under no_grad): the module's
    parameters, gradients and outputs after each."""
    seen = []
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        x = torch.randn(4, 3, dtype=torch.float64, generator=g)
        out = run(x)
        out.square().sum().backward()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-0.1)
        seen.append(out.detach())
        seen += [p.grad.clone() for p in model.parameters()]
        seen += [p.detach().clone() for p in model.parameters()]
        model.zero_grad(set_to_none=True)
    return seen


@pytest.mark.parametrize("make", [_SharedTwice, _TiedAcross], ids=["shared", "tied"])
def test_a_module_reached_under_two_names_trains_as_eager(make) -> None:
    torch.manual_seed(0)
    eager = make()
    compiled_model = make()
    compiled_model.load_state_dict(eager.state_dict())
    originals = [id(p) for p in compiled_model.parameters()]
    want = _steps(eager, eager)
    got = _steps(compiled_model, aotgrad.aot_module(compiled_model, aotgrad.nop))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    # the caller's module holds its own Parameters still, leaves, its state readable
    assert [id(p) for p in compiled_model.parameters()] == originals
    assert all(type(p) is nn.Parameter and p.is_leaf for p in compiled_model.parameters())
    assert compiled_model.state_dict().keys() == eager.state_dict().keys()


# ------------------------------------------------- outputs the backward does not reach
#
# ``loss, aux = f(x); loss.backward()``: eager never runs the part of the backward the
# unused ``aux`` feeds. The compiled backward took a zero tangent for it, and ``0 * inf``
# is nan: a second output's derivative that is infinite or nan somewhere (``sqrt`` at a
# negative input, ``log`` at 0) made the input's gradient nan; ``0.0 + -0.0`` made a
# ``-0.0`` gradient ``+0.0``.


def _loss_and_sqrt(x):
    return (x * x).sum(), x.sqrt()


def _loss_and_log(x, w):
    h = x @ w
    return h.square().mean(), h.log(), (h * 0).sum()


def _loss_and_negative_zero(x):
    return -(x * 0.0).sum(), (x * 2).sum()


def _three_heads(x, w):
    h = (x @ w).tanh()
    return h.sum(), (1 / h).sum(), (h.abs() + 1).sqrt().sum()


PARTIAL = [
    (_loss_and_sqrt, lambda g: [torch.tensor([-1.0, 2.0, 0.0], dtype=torch.float64)], [0]),
    (
        _loss_and_log,
        lambda g: [
            torch.randn(3, 4, dtype=torch.float64, generator=g),
            torch.randn(4, 2, dtype=torch.float64, generator=g),
        ],
        [0],
    ),
    (_loss_and_negative_zero, lambda g: [torch.ones(3, dtype=torch.float64)], [0]),
    (
        _three_heads,
        lambda g: [
            torch.zeros(2, 3, dtype=torch.float64),
            torch.randn(3, 3, dtype=torch.float64, generator=g),
        ],
        [0, 2],
    ),
]

ENTRIES = {
    "aot_function-min_cut": lambda fn: aotgrad.aot_function(fn, aotgrad.nop),
    "aot_function-default": lambda fn: aotgrad.aot_function(
        fn, aotgrad.nop, partition_fn=aotgrad.partition.default_partition
    ),
    "dynamo-aotgrad_eager": lambda fn: torch.compile(fn, backend="aotgrad_eager"),
}


def _partial_grads(fn, make, used, compiler) -> list[torch.Tensor | None]:
    torch._dynamo.reset()
    leaves = [t.requires_grad_() for t in make(torch.Generator().manual_seed(1))]
    outs = (fn if compiler is None else compiler(fn))(*leaves)
    for step in range(2):  # (a second call: the pruned backward is reused)
        torch.autograd.backward([outs[k] for k in used], retain_graph=step == 0)
    return [t.grad for t in leaves]


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize(
    ("fn", "make", "used"), PARTIAL, ids=[p[0].__name__.strip("_") for p in PARTIAL]
)
def test_outputs_the_backward_does_not_reach_add_nothing(fn, make, used, entry) -> None:
    want = _partial_grads(fn, make, used, None)
    got = _partial_grads(fn, make, used, ENTRIES[entry])
    for g, w in zip(got, want, strict=True):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w, equal_nan=True)
            # -0.0 and +0.0 apart, as eager's
            assert torch.equal(torch.signbit(g), torch.signbit(w))


# ------------------------------------------- Python state the forward changes
#
# ``self.calls += 1; return x * self.calls``: a trace bakes the value in and runs the
# forward more than once; three calls gave ``x * 2, x * 4, x * 4`` and ``calls == 4``.
# The forward's change is now seen while tracing: the setting is set back and the calls
# run eagerly (an ``EagerReplayWarning``), as eager's.


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.scale = 2.0
        self.lin = nn.Linear(2, 2).double()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.lin(x) * self.calls * self.scale


def _counted(run: nn.Module, model: _Counter) -> list[Any]:
    seen: list[Any] = []
    for step in range(4):
        if step == 2:
            model.scale = 3.0  # (a setting the caller changes: guarded, as before)
        x = torch.full((1, 2), float(step), dtype=torch.float64)
        out = run(x)
        out.sum().backward()
        seen += [out.detach(), model.calls, model.lin.weight.grad.clone()]
    return seen


def test_python_state_the_forward_changes_runs_as_eager() -> None:
    torch.manual_seed(0)
    eager = _Counter()
    compiled_model = _Counter()
    compiled_model.load_state_dict(eager.state_dict())
    want = _counted(eager, eager)
    with pytest.warns(aotgrad.errors.EagerReplayWarning, match="Counter.calls"):
        got = _counted(aotgrad.aot_module(compiled_model, aotgrad.nop), compiled_model)
    for g, w in zip(got, want, strict=True):
        if isinstance(w, torch.Tensor):
            torch.testing.assert_close(g, w)
        else:
            assert g == w


class _StoresAttention(nn.Module):
    def __init__(self, declared: bool) -> None:
        super().__init__()
        self.q = nn.Linear(4, 4).double()
        if declared:
            self.last_attn = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = (self.q(x) @ x.t()).softmax(-1)
        self.last_attn = a.detach()  # (kept for a plot)
        return a @ x


@pytest.mark.parametrize("declared", [True, False], ids=["was_none", "new_attribute"])
def test_an_activation_the_forward_stores_on_the_module_is_eagers(declared: bool) -> None:
    """``self.last_attn = a.detach()``: the module kept the trace's ``FunctionalTensor``,
    which raised on first use; now the call runs eagerly, the stored tensor real."""
    torch.manual_seed(0)
    eager, model = _StoresAttention(declared), _StoresAttention(declared)
    model.load_state_dict(eager.state_dict())
    run = aotgrad.aot_module(model, aotgrad.nop)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        x = torch.randn(3, 4, dtype=torch.float64, generator=g)
        got = run(x)
        want = eager(x)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(model.last_attn * 1, eager.last_attn)
        torch.testing.assert_close(model.q.weight.grad, eager.q.weight.grad)
