"""Copies whose source overlaps the tensor they write: ``t[1] = t[:, 0]``,
``t[1].copy_(t[:, 0])``, over every pairing of a written view and a source view of one
base.

Where eager's overlap check cannot judge (a source that is not dense), eager's CPU kernel
copies the elements one after another and later ones read what earlier ones wrote
(``t[1, 1]`` gets ``t[1, 0]``'s new value). A traced graph read the whole source first:
``t[1] = t[:, 0]`` gave other values than eager's, silently, and ``copy_`` was refused
(eager replay; the random-program test drew one). Where the overlap is partial and dense,
eager raises, and so must the compiled function. Each program runs under eager and each
entry point on an intermediate that requires grad and on a buffer input; outputs,
gradients and the buffer after the call must match eager's, with no eager replay
(``aotgrad.ordered_copies``).
"""

from __future__ import annotations

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

#: Written views (``t[index]``), all of 4 elements or 2 x 4.
WRITTEN = {
    "row1": 1,
    "col1": (slice(None), 1),
    "col3": (slice(None), 3),
    "rows01": slice(0, 2),
}
#: Sources: views of the same base.
SOURCES = {
    "col0": lambda b: b[:, 0],
    "row0": lambda b: b[0],
    "diag": lambda b: b.diagonal(),
    "t_row2": lambda b: b.t()[2],
    "stride0": lambda b: b[0, :1].expand(4),
    "flat_3_7": lambda b: b.view(-1)[3:7],
    "flat_step5": lambda b: b.view(-1)[::5],
    "flat_col2": lambda b: b.view(-1)[2:15:4],
    "t_rows12": lambda b: b.t()[1:3],
    "rows12": lambda b: b[1:3],
    "cols12_t": lambda b: b[:, 1:3].t(),
    "elem11": lambda b: b[1, 1],
    "elem11_1d": lambda b: b[1, 1:2],
}
SHAPES = {"row1": (4,), "col1": (4,), "col3": (4,), "rows01": (2, 4)}


def _fits(written: str, source: str) -> bool:
    shape = SOURCES[source](torch.zeros(4, 4)).shape
    return torch.broadcast_shapes(shape, SHAPES[written]) == SHAPES[written]


def _program(written: str, source: str, how: str, base: str, dtype: torch.dtype):
    index, view = WRITTEN[written], SOURCES[source]

    def write(b):
        if how == "setitem":
            b[index] = view(b)
        else:
            b[index].copy_(view(b))

    def program(C, R):
        x = L(4, 4, dtype=dtype)
        buf = torch.arange(16.0, dtype=dtype).reshape(4, 4).div(7)

        def f(x, buf):
            t = buf if base == "buffer" else x * 2
            write(t)
            return t * 1, x.sin()

        outs = R.step("call", lambda: C(f)(x, buf))
        R.rec("buf", buf)
        if outs is not None:
            R.rec("outs", outs)
            cots = [torch.full_like(o, i + 1.0) for i, o in enumerate(outs)]
            R.step("bw", lambda: torch.autograd.backward(outs, cots))
            R.grad("x", x)

    return program


CASES = [
    (w, s, how, base, dt)
    for w in WRITTEN
    for s in SOURCES
    if _fits(w, s)
    for how in ("setitem", "copy_")
    for base in ("intermediate", "buffer")
    for dt in (torch.float64, torch.float16)
]


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)).replace("torch.", ""))
def test_ordered_copy_like_eager(case, entry: str) -> None:
    program = _program(*case)
    eager = run_program(program, "eager")
    assert "__top__" not in eager, eager["__top__"]  # (the program itself runs)
    got = run_program(program, entry)
    assert not got["__eager_replay__"], "ran eagerly"
    _soft, real = differences(eager, got)
    assert not real, describe(real)


def test_an_ordered_copy_differs_from_reading_first() -> None:
    """The family holds order-dependent copies (the test would pass without the fix
    otherwise): eager's ``t[1] = t[:, 0]`` is not the copy of a snapshot."""
    t = torch.arange(16.0).reshape(4, 4)
    snapshot = t.clone()
    snapshot[1] = snapshot[:, 0].clone()
    t[1] = t[:, 0]
    assert not torch.equal(t, snapshot)
