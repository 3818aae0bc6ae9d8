"""Hooks on inputs the backward gives no gradient (blind caller-side suite): eager's
engine never reaches such an input's node, so its hooks are not called; the compiled
node has an edge to every input and the engine ran the node behind each, handing it None:
``lambda g: g * 2`` raised ``TypeError``, a post-accumulate hook ran with ``.grad`` None.
Compared with eager under every entry point (``runtime.unreached_hooks``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from eager_oracle import COMPILERS

DT = torch.float64


def _two_heads(x, y):
    return x * 2, y * 3


def _unused(x, y):
    return (x.sin(),)


def _run(fn: Callable, compiled: bool, entry: str, non_leaf: bool, other_path: bool) -> list:
    run = COMPILERS[entry](fn) if compiled else fn
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, dtype=DT, generator=g, requires_grad=True)
    leaf = torch.randn(3, dtype=DT, generator=g, requires_grad=True)
    y = leaf * 1 if non_leaf else leaf
    seen: list[Any] = []
    y.register_hook(lambda gr: seen.append(gr.clone()) or gr * 2)
    if not non_leaf:
        y.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone() + 1000))
    outs = run(x, y)
    loss = outs[0].sum() + (y.pow(2).sum() if other_path else 0)
    loss.backward(retain_graph=True)
    first = [list(seen), x.grad.clone(), None if leaf.grad is None else leaf.grad.clone()]
    if len(outs) > 1:  # the hooks are back for a pass that reaches the input
        seen.clear()
        outs[1].sum().backward()
        first += [list(seen), leaf.grad.clone()]
    return first


@pytest.mark.parametrize("other_path", [False, True], ids=["unreached", "reached_elsewhere"])
@pytest.mark.parametrize("non_leaf", [False, True], ids=["leaf", "non_leaf"])
@pytest.mark.parametrize("fn", [_two_heads, _unused], ids=["other_head", "unused"])
@pytest.mark.parametrize("entry", list(COMPILERS))
def test_hooks_of_an_input_without_a_gradient_are_eagers(
    entry: str, fn: Callable, non_leaf: bool, other_path: bool
) -> None:
    want = _run(fn, False, entry, non_leaf, other_path)
    got = _run(fn, True, entry, non_leaf, other_path)
    torch.testing.assert_close(got, want)


class _TwoHeads(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 2)
        self.b = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.a(x), self.b(x)


def test_a_parameter_hook_of_the_head_not_trained_is_not_called() -> None:
    """A module with two heads, one trained this step: hooks on the other head's
    parameters (gradient clipping per parameter, an optimizer in a post-accumulate hook)."""
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        m = _TwoHeads().double()
        calls: list[str] = []
        for name, p in m.named_parameters():
            p.register_hook(lambda g, n=name, c=calls: c.append(n) or g.clamp(-1, 1))
            p.register_post_accumulate_grad_hook(lambda p, n=name, c=calls: c.append("post " + n))
        run = aotgrad.aot_module(m, aotgrad.nop) if compiled else m
        run(torch.randn(4, 3, dtype=DT))[0].sum().backward()
        results.append((calls, [p.grad for p in m.parameters()]))
    (want_calls, want), (got_calls, got) = results
    assert sorted(got_calls) == sorted(want_calls)  # (the order: the engine's, per node)
    assert [g is None for g in got] == [g is None for g in want]
    torch.testing.assert_close(
        [g for g in got if g is not None], [g for g in want if g is not None]
    )


def _three(x):
    return x.exp(), x.cos(), x * 2


@pytest.mark.parametrize("mode", ["all", "any"])
@pytest.mark.parametrize("entry", list(COMPILERS))
def test_a_multi_grad_hook_over_outputs_one_without_a_gradient(entry: str, mode: str) -> None:
    """``register_multi_grad_hook`` over the outputs, one of which the backward does not
    reach: eager's "all" fires once with None for it ("all" never fired: its per-output
    hook, skipped on None, was never counted); "any" fires once, with a real gradient."""
    seen = []
    for fn in (_three, COMPILERS[entry](_three)):
        x = torch.linspace(-1, 1, 3, dtype=DT, requires_grad=True)
        outs = fn(x)
        calls: list[Any] = []
        torch.autograd.graph.register_multi_grad_hook(
            list(outs),
            lambda gs, c=calls: c.append([g if g is None else g.clone() for g in gs]),
            mode=mode,
        ) if mode == "all" else torch.autograd.graph.register_multi_grad_hook(
            list(outs), lambda g, c=calls: c.append(g.clone()), mode=mode
        )
        (outs[0].sum() * 2 + outs[2].sum()).backward()
        seen.append((calls, x.grad))
    (want_calls, want), (got_calls, got) = seen
    assert len(got_calls) == len(want_calls) == 1
    if mode == "all":
        torch.testing.assert_close(got_calls, want_calls)
    else:  # (the first output's gradient: which one is first is each engine's order)
        assert got_calls[0] is not None
    torch.testing.assert_close(got, want)
