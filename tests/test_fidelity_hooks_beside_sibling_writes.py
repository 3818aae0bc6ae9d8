"""A hook the function registers on an input that is a view of a base another written
input also views (``x0, x1 = b.chunk(2)``; ``x1.register_hook(h); x0.sin_()``).

Eager's hook is on ``x1``'s node as it was: the sibling's write moves their shared
version count, and autograd rebuilds ``x1``'s node on its next read (of a ``chunk``
piece that read raises). The runtime registered the hook after it wrote the sibling
back, so on the rebuilt node, and under ``no_grad`` / ``inference_mode`` the
registration raised "Output 1 of Split is a view and its base ... has been modified
inplace" where eager raises nothing (soak 252645). Every recording must match eager's
(``blind_fed_outputs_harness``), per entry point.
"""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

SPLITS = {
    "chunk": lambda b: b.chunk(2),
    "slices": lambda b: (b[:4], b[4:]),
    "unbind": lambda b: (b[:4].unbind(0)[0], b[4:].unbind(0)[1]),
}
WRITES = {
    "with_grad": lambda x: x.sin_(),
    "no_grad": lambda x: _no_grad(lambda: x.mul_(2)),
}
READS = {
    "none": lambda x0, x1: (x0 * 1,),
    "before": lambda x0, x1: (x0 * 1, x1 * 3),
    "after": lambda x0, x1: (),
}
MODES = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def _no_grad(fn):
    with torch.no_grad():
        return fn()


def _program(split: str, write: str, reads: str, mode: str):
    def program(C, R):
        hook = R.hook("x1", lambda g: g.clamp(-0.5, 0.5))

        def f(x0, x1):
            x1.register_hook(hook)
            early = READS[reads](x0, x1)
            WRITES[write](x0)
            late = (x1 * 5,) if reads == "after" else ()
            return (*early, x0, *late)

        leaf = L(8, 4, seed=21)
        x0, x1 = SPLITS[split](leaf.clone())
        if not x1.requires_grad:
            x1.requires_grad_()
        with MODES[mode]():
            outs = R.step("call", lambda: C(f)(x0, x1))
        if outs is None:
            return
        R.rec("outs", outs)
        R.rec("x0", x0)
        if mode == "grad":
            cots = [torch.full_like(o, 2.0) for o in outs if o.requires_grad]
            R.step(
                "bw", lambda: torch.autograd.backward([o for o in outs if o.requires_grad], cots)
            )
            R.grad("leaf", leaf)

    return program


CASES = list(itertools.product(SPLITS, WRITES, READS, MODES))
_READ_AFTER = (
    "known open: a read of the view after its sibling's no_grad write goes, in eager, "
    "through the node autograd rebuilds, past the hooked one; the compiled graph's "
    "gradient reaches the view's node as it was, so the hook sees it (with grad, the "
    "reads after the write are linked to the rebuilt node)"
)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_a_hook_beside_a_sibling_write_like_eager(case, entry: str, request) -> None:
    program = _program(*case)
    eager = run_program(program, "eager")
    assert "__top__" not in eager, eager["__top__"]
    if case == ("slices", "no_grad", "after", "grad") and entry != "dynamo":
        request.applymarker(pytest.mark.xfail(strict=True, reason=_READ_AFTER))
    _soft, real = differences(eager, run_program(program, entry))
    if (
        real
        and entry == "dynamo"
        and differences(eager, run_program(program, "dynamo_backend_eager"))[1]
    ):
        pytest.xfail("Dynamo's own: torch.compile(backend='eager') differs from eager too")
    assert not real, describe(real)
