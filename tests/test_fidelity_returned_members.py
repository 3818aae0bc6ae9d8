"""Inputs that view one base (synthetic-base members), one of them written by the function
and one of them returned as an output: ``x0[1:3].copy_(...); return x1.t(), x1``.

The write gives the caller's ``x1`` (a view of the written base) a new node in eager, and
the outputs read after the write reach it, so ``autograd.grad(outs, x1)``, a hook or
``retain_grad`` on ``x1`` and ``backward(inputs=[x1])`` see what they pass back. A member
the function also returned was left out of the link onto the new node (its output is the
caller's tensor itself): ``autograd.grad`` gave only that output's own cotangent (soak
seed 225390). Now linked, less the returned output's own tangent. Each program runs under
eager and each entry point; every recording must match eager's
(``blind_fed_outputs_harness``).
"""

from __future__ import annotations

import pytest
import torch

from blind_fed_outputs_harness import ENTRIES, L, describe, differences, run_program

ag = torch.autograd
P = {}


def prog(fn):
    P[fn.__name__] = fn
    return fn


def split_inputs(seed=0, dt=torch.float64):
    l0 = L(4, 8, seed=seed, dtype=dt)
    b0 = l0.clone()
    return l0, b0, b0[:, :4], b0[:, 4:]


def std(R, outs, l0, wrt):
    cots = [torch.full_like(o, float(i + 1)) for i, o in enumerate(outs)]
    R.step("grad", lambda: ag.grad(outs, wrt, cots, allow_unused=True, retain_graph=True))
    R.step("bw", lambda: ag.backward(outs, cots))
    R.grad("l0", l0)


@prog
def ret_member_read_after(C, R):
    def f(x0, x1):
        x0[1:3].copy_(x0.sum())
        return x1.t().reshape(2, -1), x1

    l0, b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0, b0])


@prog
def ret_member_read_before(C, R):
    def f(x0, x1):
        t = x1 * 2
        x0[1:3].copy_(x0.sum())
        return t, x1, x1 * 3

    l0, b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0, b0])


@prog
def ret_written_member(C, R):
    def f(x0, x1):
        x0.mul_(2)
        return x0 * 3, x0, x1.sin()

    l0, b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0, b0])


@prog
def ret_member_twice(C, R):
    def f(x0, x1):
        x0.add_(1)
        return x1, x1.exp(), x1

    l0, _b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0])


@prog
def ret_member_hook(C, R):
    def f(x0, x1):
        x0.add_(1)
        return x1.exp(), x1

    l0, _b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    x1.register_hook(R.hook("x1"))
    x1.retain_grad()
    (outs[0].sum() + 2 * outs[1].sum()).backward()
    R.grad("x1", x1)
    R.grad("l0", l0)


@prog
def ret_member_inputs_kw(C, R):
    def f(x0, x1):
        x0.add_(1)
        return x1.exp() * x0.sum(), x1

    _l0, _b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.step("bw", lambda: (outs[0].sum() + outs[1].sum()).backward(inputs=[x1]))
    R.grad("x1", x1)


@prog
def ret_member_view(C, R):
    def f(x0, x1):
        x0.add_(1)
        return x1[1:], x1.cos(), x1

    l0, _b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0])


@prog
def ret_both_members(C, R):
    def f(x0, x1):
        x0.mul_(x1)
        return x0, x1, (x0 + x1).sum()

    l0, b0, x0, x1 = split_inputs()
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0, b0])


@prog
def ret_member_float32(C, R):
    def f(x0, x1):
        x0[0].zero_()
        return x1 @ x1.t(), x1

    l0, _b0, x0, x1 = split_inputs(dt=torch.float32)
    outs = C(f)(x0, x1)
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0])


@prog
def ret_member_two_calls(C, R):
    def f(x0, x1):
        x0.add_(x1)
        return x1.tanh(), x1

    g = C(f)
    l0, b0, x0, x1 = split_inputs()
    o1 = g(x0, x1)
    o2 = g(x1, x0)
    outs = [*o1, *o2]
    R.rec("outs", outs)
    std(R, outs, l0, [x1, x0, b0])


@prog
def overlapping_members(C, R):
    def f(a, b):
        a.mul_(2)
        return b.sum() * b, b

    l0 = L(8, 4, seed=3)
    b0 = l0.clone()
    a, b = b0[0:4], b0[2:6]
    outs = C(f)(a, b)
    R.rec("outs", outs)
    std(R, outs, l0, [a, b, b0])


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("name", list(P))
def test_returned_member_like_eager(name: str, entry: str) -> None:
    eager = run_program(P[name], "eager")
    _soft, real = differences(eager, run_program(P[name], entry))
    assert not real, f"{name} under {entry} differs from eager:\n{describe(real)}"
