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

import warnings

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


# ``register_post_accumulate_grad_hook`` on a leaf the function makes: eager's fires when
# the caller's backward fills the leaf's ``.grad``; registered on the trace's leaf, it
# never fired (the blind hooks suite, 8 pairs). Returned, the leaf the caller gets has
# it; not returned, the calls run eagerly (the hook fires there, as in eager).


def _post_hooked_leaf(returned: bool):
    def f(x):
        t = (x * 2).detach().requires_grad_()
        t.register_post_accumulate_grad_hook(lambda p: SEEN.append(p.grad.sum().item()))
        return (t, t * 3) if returned else (t * 3,)

    return f


SEEN: list = []


@pytest.mark.parametrize("returned", [True, False], ids=["returned", "not_returned"])
@pytest.mark.parametrize("compiler", ["aot_function-min_cut", "aot_function-default"])
def test_a_post_accumulate_hook_on_a_made_leaf_fires(returned: bool, compiler: str) -> None:
    seen = []
    for compile_ in (lambda f: f, COMPILERS[compiler]):
        SEEN.clear()
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = compile_(_post_hooked_leaf(returned))(x)
        sum(o.sum() for o in outs).backward()
        seen.append((list(SEEN), [type(w.message).__name__ for w in caught]))
    assert seen[1][0] == pytest.approx(seen[0][0]) and len(seen[0][0]) == 1
    assert ("EagerReplayWarning" in seen[1][1]) == (not returned)
