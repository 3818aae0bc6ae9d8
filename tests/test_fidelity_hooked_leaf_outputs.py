"""Hooks on a leaf the function makes and returns, beside outputs computed from it.

``t = x.detach().requires_grad_(); t.register_hook(h); return t, t * 3``: eager's hook
runs once, on the sum of the caller's gradient of ``t`` and of what ``t * 3`` passes
back (its accumulator's input). The compiled node hands the caller's leaf that second
part; the hook was also traced into the compiled backward, so it ran on it there too (an
output rebuilt of an input: twice) or only there (an intermediate made a leaf: never on
the caller's part; soak 241023, the leaf's ``.grad`` twice eager's). Such hooks now run
on the caller's leaf only. Compared with eager on every output, every leaf's gradient
(the returned leaf's too: ``output_leaf_grads``), with linear and non-linear hooks.
"""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

HOOKS = {
    "half": lambda g: g * 0.5,
    "clamp": lambda g: g.clamp(-0.3, 0.3),
}
MAKE = {
    "detached_input": lambda x: x.detach().requires_grad_(),
    "intermediate_made_leaf": lambda x: (x * 2).detach().requires_grad_(),
    "factory": lambda x: torch.ones_like(x, requires_grad=True),
}
USES = {
    "alone": lambda t: (t,),
    "times_three": lambda t: (t, t * 3),
    "sin_first": lambda t: (t.sin(), t),
    "sum_with_input": lambda t: (t, (t * t).sum()),
}


def _program(make, hook, use):
    def fn(x):
        t = MAKE[make](x)
        t.register_hook(HOOKS[hook])
        return (*USES[use](t), x * 2)

    return fn


def _input():
    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x], [x]


CASES = [
    pytest.param(make, hook, use, id=f"{make}-{hook}-{use}")
    for make in MAKE
    for hook in HOOKS
    for use in USES
]


@pytest.mark.parametrize("entry", sorted(COMPILERS))
@pytest.mark.parametrize(("make", "hook", "use"), CASES)
def test_hooked_leaf_output_like_eager(make, hook, use, entry):
    assert_like_eager(_program(make, hook, use), _input, COMPILERS[entry], calls=2)
