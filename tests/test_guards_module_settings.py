"""Guards on an ``aot_module``'s plain settings (``guards.ModuleSettings``): the public
bool/int/float/str/None attributes a traced forward bakes in (``Dropout.p``,
``self.scale``) are part of the key, except those the forward itself changes."""

from __future__ import annotations

import pytest
import torch

import aotgrad
from aotgrad.errors import GuardError


def test_a_modules_plain_settings_are_guarded():
    """``Dropout.p`` and a plain attribute (``self.scale``) are read as constants by the
    trace: changed between calls, the call compiles again (the first call's values were
    reused: blind recompile suite, mod_python_attr_scale), and the limit names them."""

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.drop = torch.nn.Dropout(0.0)
            self.scale = 2.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.drop(self.lin(x)) * self.scale

    mod = Scaled()
    c = aotgrad.aot_module(mod, aotgrad.nop)
    x = torch.randn(3, 4)
    torch.testing.assert_close(c(x), mod(x))
    mod.scale = 5.0
    torch.testing.assert_close(c(x), mod(x))
    mod.drop.p = 1.0
    torch.testing.assert_close(c(x), torch.zeros(3, 4))
    limited = aotgrad.aot_module(mod, aotgrad.nop, recompile_limit=1)
    limited(x)
    mod.scale = 3.0
    with pytest.raises(GuardError, match=r"submodule 0 settings \(plain attributes\)"):
        limited(x)


def test_a_setting_the_forward_changes_is_not_guarded():
    """A counter the forward increments (``self.calls += 1``) is Python state the function
    changes: a trace would bake it in, so the calls run eagerly (an
    ``EagerReplayWarning``), the counter counting as eager's; it is not guarded (it
    would differ on every call and compile again each time, until the recompile limit
    raised), the settings the forward leaves alone still are."""

    class Counting(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.calls = 0
            self.scale = 2.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return self.lin(x) * self.scale

    mod = Counting()
    # (compiles: the first call; once more without ``calls`` in the key; for scale 4.0)
    c = aotgrad.aot_module(mod, aotgrad.nop, recompile_limit=3)
    x = torch.randn(3, 4)
    with pytest.warns(aotgrad.errors.EagerReplayWarning, match="Counting.calls"):
        for _ in range(5):
            torch.testing.assert_close(c(x), mod.lin(x) * mod.scale)
    assert mod.calls == 5  # (eager's: once per call, none for the traces)
    mod.scale = 4.0  # still guarded: the forward does not change it
    torch.testing.assert_close(c(x), mod.lin(x) * 4.0)
    assert mod.calls == 6
