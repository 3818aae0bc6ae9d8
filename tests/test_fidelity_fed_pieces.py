"""Pieces of a multi-output view of an input (``a, b = x.chunk(2)``, ``unbind``,
``split``, ``tensor_split``) returned beside an output computed from them (``a * b``):
eager's ``a*b`` goes through the pieces' node, so ``a.retain_grad()``, hooks on ``a``,
``autograd.grad(p, a)`` and ``backward(inputs=[a])`` see what it passes back. Round 56
linked views of an input the function leaves alone, but took a piece (a view whose
creation meta is not the default) for a view made under ``no_grad``: not linked,
``a.grad`` stayed None (216 of these 120 programs x 3 entries differed; the blind
view-hooks suite's ``caller_retain_grad_on_view_outputs``). Round 58: the pieces returned
together are rebuilt by one node (``runtime.output_pieces``), so the caller's hook on the
piece no gradient reaches is called with None when the node runs for the other, as
eager's (18 strict xfails before). Each program runs under eager and each entry point;
every recording must match eager's (``blind_fed_outputs_harness``).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

ag = torch.autograd

SPLITS = {
    "chunk": lambda x: x.chunk(2),
    "unbind": lambda x: x.unbind(0)[:2],
    "split": lambda x: x.split([1, 3]),
    "tensor_split": lambda x: torch.tensor_split(x, 2, 1),
}
USES = {
    "mul": lambda a, b: a * b.sum(),
    "matmul": lambda a, b: a.t() @ a + b.sum(),
    "exp": lambda a, b: a.exp(),
}


def _retain(R, a, b, p):
    a.retain_grad()
    b.retain_grad()
    R.step("bw", lambda: p.sum().backward())
    R.grad("a", a)
    R.grad("b", b)


def _grad(R, a, b, p):
    R.step("g", lambda: ag.grad(p.sum(), [a, b], allow_unused=True))


def _hook(R, a, b, p):
    a.register_hook(R.hook("a"))
    b.register_hook(R.hook("b", lambda g: None if g is None else g * 2))
    R.step("bw", lambda: (p.sum() + a.sum()).backward())


def _inputs(R, a, b, p):
    R.step("bw", lambda: p.sum().backward(inputs=[a]))
    R.grad("a", a)


def _write(R, a, b, p):
    R.step("write", lambda: a.mul_(2))  # (eager: a multi-output view may not be written)
    R.step("bw", lambda: p.sum().backward())


HOW = {"retain": _retain, "grad": _grad, "hook": _hook, "inputs": _inputs, "write": _write}


def _program(split: str, use: str, leaf: bool, how: str):
    def program(C, R):
        def f(x):
            a, b = SPLITS[split](x)
            return a, b, USES[use](a, b)

        base = L(4, 2, seed=5)
        a, b, p = C(f)(base if leaf else base * 1)
        HOW[how](R, a, b, p)
        R.grad("base", base)

    return program


def _cases() -> list:
    return [pytest.param(*c) for c in itertools.product(SPLITS, USES, (True, False), HOW)]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("split", "use", "leaf", "how"), _cases())
def test_fed_pieces_like_eager(split: str, use: str, leaf: bool, how: str, entry: str) -> None:
    program = _program(split, use, leaf, how)
    eager = run_program(program, "eager")
    _soft, real = differences(eager, run_program(program, entry))
    assert not real, f"{split}/{use}/{leaf}/{how} under {entry}:\n{describe(real)}"


def _of_intermediate(split: str, use: str, how: str):
    def program(C, R):
        def f(x):
            a, b = SPLITS[split](x * 2)
            return a, b, USES[use](a, b)

        base = L(4, 2, seed=6)
        a, b, p = C(f)(base)
        HOW[how](R, a, b, p)
        R.grad("base", base)

    return program


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("split", "use", "how"), list(itertools.product(SPLITS, USES, HOW)))
def test_pieces_of_an_intermediate_like_eager(split: str, use: str, how: str, entry: str) -> None:
    """The same, the pieces split from an intermediate (``x * 2``): rebuilt of the
    graph's intermediate base, by one node too."""
    program = _of_intermediate(split, use, how)
    eager = run_program(program, "eager")
    assert "__top__" not in eager, eager["__top__"]
    _soft, real = differences(eager, run_program(program, entry))
    assert not real, f"{split}/{use}/{how} under {entry}:\n{describe(real)}"
