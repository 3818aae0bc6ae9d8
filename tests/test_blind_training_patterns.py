"""Training-loop patterns a blind helper wrote from a description alone (round 53), the
ones aotgrad got wrong, each compared with eager.

- One submodule under two names (``self.dec = self.enc``): ``aot_module`` swapped the
  module's parameters for traced stand-ins twice, restored the first stand-in as the
  second's original, and left a ``FunctionalTensor`` in the caller's module: the next
  call refused it, ``state_dict()`` failed.
"""

from __future__ import annotations

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
