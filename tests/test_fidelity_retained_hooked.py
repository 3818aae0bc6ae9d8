"""``retain_grad()`` and a gradient hook on one output (found by a blind probe, p54, p56,
p31). Eager's retain hook runs after every tensor hook, whichever was registered first:
the output's ``.grad`` is the hooked gradient. The hook is traced into the compiled
backward (it changes what flows to the inputs there); the caller's retain hook saw the
gradient before it. Such outputs now take their ``.grad`` from the backward, after the
hooks (``input_hooks.RetainedThrough``; ``trace.joint._after_hooks``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager, leaves

PROGRAMS: dict[str, Callable] = {}


def program(fn: Callable) -> Callable:
    PROGRAMS[fn.__name__] = fn
    return fn


def _triple(g: torch.Tensor) -> torch.Tensor:
    return g * 3


@program
def retained_then_hooked(x, w):
    y = x * w
    y.retain_grad()
    y.register_hook(_triple)
    return y


@program
def hooked_then_retained(x, w):
    y = x * w
    y.register_hook(_triple)
    y.retain_grad()
    return y


@program
def hooked_retained_hooked_and_computed_from(x, w):
    y = x * w
    y.register_hook(_triple)
    y.retain_grad()
    y.register_hook(lambda g: g + g.sum(0, keepdim=True))
    return y, y * 2


@program
def hooked_and_retained_beside_another_output(x, w):
    y = x.sin()
    z = x * w
    z.retain_grad()
    z.register_hook(_triple)
    return y, z


@program
def hook_removed_before_return(x, w):
    y = x * w
    y.retain_grad()
    h = y.register_hook(_triple)
    h.remove()
    return y, y.cos()


def _make():
    return leaves(((4, 4), True), ((4, 4), True))()


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", PROGRAMS.values(), ids=PROGRAMS)
def test_retained_grad_of_a_hooked_output_is_after_its_hooks(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, _make, COMPILERS[compiler], calls=2)
