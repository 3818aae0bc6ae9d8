"""A hook the function registers on one piece of a multi-output view (``chunk``,
``unbind``, ``split``, ``tensor_split``), other pieces (or views of them) returned.

The pieces share one autograd node, each at its own output of it; a hook on ``a`` sits
on ``a``'s output only. The runtime took a returned piece ``b`` (rebuilt as a view of
the input or intermediate) for a view made through ``a``'s hook and rebuilt it of a view
of ``a``'s region: ``b``'s whole gradient was lost (soak seed 223429; 144 of these
programs under ``aot_function`` and ``torch.compile``). Each program runs under eager and
each entry point; every recording must match eager's (``blind_fed_outputs_harness``).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

SPLITS = {
    "chunk": lambda t: t.chunk(2, -1),
    "unbind": lambda t: t.unbind(0)[:2],
    "split": lambda t: t.split([1, 3], 0)[:2],
    "tensor_split": lambda t: torch.tensor_split(t, 2, 1),
}
RETURNS = {
    "other_piece": lambda t, a, b: (b,),
    "other_piece_viewed": lambda t, a, b: (b.t() if b.dim() == 2 else b.unsqueeze(0),),
    "base_and_other": lambda t, a, b: (t, b),
    "both_pieces": lambda t, a, b: (a, b),
}
SOURCES = ("input", "leaf", "intermediate")
HOOKS = {"returns_none": lambda g: None, "scales": lambda g: None if g is None else g * 3}


def _program(split: str, ret: str, source: str, hook: str):
    def program(C, R):
        def f(x):
            t = x[:4, :4] if source == "input" else x * 1
            a, b = SPLITS[split](t)
            a.register_hook(HOOKS[hook])
            return RETURNS[ret](t, a, b)

        leaf = L(4, 4, seed=3)
        x = leaf if source == "leaf" else leaf.clone()
        outs = C(f)(x)
        R.rec("outs", outs)
        cots = [torch.full_like(o, 1.0) * (i + 1) for i, o in enumerate(outs)]
        R.step("bw", lambda: torch.autograd.backward(outs, cots))
        R.grad("leaf", leaf)

    return program


CASES = list(itertools.product(SPLITS, RETURNS, SOURCES, HOOKS))


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(("split", "ret", "source", "hook"), CASES)
def test_piece_hooks_like_eager(split: str, ret: str, source: str, hook: str, entry: str) -> None:
    program = _program(split, ret, source, hook)
    eager = run_program(program, "eager")
    _soft, real = differences(eager, run_program(program, entry))
    assert not real, f"{split}/{ret}/{source}/{hook} under {entry}:\n{describe(real)}"
