"""Pieces of a multi-output view (``chunk``, ``unbind``, ``split``), and views of them,
returned beside the tensor they were split from: ``t2 = x.diagonal(); a, b =
t2.chunk(2); return a.expand(2, 2), t2, a[0]``.

Eager's pieces, and views of them, carry the creation meta "output of a function that
returns multiple views": once their base is written (by the caller, past autograd:
``x.detach().add_(1)``), reading their ``grad_fn`` raises, and an in-place write to one
raises. The runtime rebuilds such an output as a view of the other output it views
(``OutputAlias.base_output``) and left its creation meta the default: ``grad_fn`` was
rebuilt, and a backward gave a gradient where eager raises (soak 229787, the caller's
write then a backward). Each program runs under eager and each entry point; every
recording must match eager's (``blind_fed_outputs_harness``).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

SPLITS = {
    "chunk": lambda t: t.chunk(2, -1),
    "unbind": lambda t: t.unbind(-1)[:2],
    "split": lambda t: t.split([1, 3], -1),
}
BASES = {
    "diagonal": lambda x: x.diagonal(),
    "rows": lambda x: x[1:],
    "input": lambda x: x,
}
RETURNS = {
    "piece_view_and_base": lambda base, a, b: (a.expand(2, *a.shape), base, a[0]),
    "pieces_and_base": lambda base, a, b: (a, base, b),
    "piece_t_and_base": lambda base, a, b: (base, a.unsqueeze(0).transpose(0, 1), b[..., :1]),
}


def _grad_fns(R, outs):
    for k, o in enumerate(outs):
        R.step(f"grad_fn{k}", lambda o=o: type(o.grad_fn).__name__)


def _base_written(R, x, outs):
    R.step("write", lambda: x.detach().add_(1))
    _grad_fns(R, outs)
    usable = [o for k, o in enumerate(outs) if "__ok__" in R.obs[f"grad_fn{k}"]]
    R.step("bw", lambda: torch.autograd.backward(usable, [torch.ones_like(o) for o in usable]))


def _output_written(R, x, outs):
    for k, o in enumerate(outs):
        R.step(f"write{k}", lambda o=o: o.mul_(2))
    _grad_fns(R, outs)


def _no_grad_written(R, x, outs):
    with torch.no_grad():
        R.step("write", lambda: x.mul_(2))
    _grad_fns(R, outs)


ACTIONS = {"base_written": _base_written, "output_written": _output_written}
ACTIONS["no_grad_written"] = _no_grad_written


def _program(split: str, base: str, returns: str, action: str):
    def program(C, R):
        def f(x):
            t = BASES[base](x)
            a, b = SPLITS[split](t)
            return RETURNS[returns](t, a, b)

        leaf = L(4, 4, seed=3)
        x = leaf.clone()
        outs = R.step("call", lambda: list(C(f)(x)))
        if outs is None:
            return
        ACTIONS[action](R, x, outs)
        R.grad("leaf", leaf)

    return program


CASES = list(itertools.product(SPLITS, BASES, RETURNS, ACTIONS))


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_output_piece_views_like_eager(case, entry: str) -> None:
    program = _program(*case)
    eager = run_program(program, "eager")
    assert "__top__" not in eager, eager["__top__"]  # (the program itself runs)
    _soft, real = differences(eager, run_program(program, entry))
    assert not real, describe(real)
