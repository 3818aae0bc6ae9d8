"""Blind programs: the caller writes in place to what a compiled call returned, then
differentiates.

A compiled function or module returns tensors; after the call the caller modifies some of
them in place (``out.mul_(2)``, ``out[0].zero_()``, ``out.copy_(...)``, through
``out.data`` -- which does not bump the version counter --, under ``torch.no_grad()``,
through a view the caller takes, through ``out.detach()`` -- which shares the version
counter --, through the base of a returned view or another view of the same base), then
runs backward (``.backward()``, ``torch.autograd.grad``, ``backward(inputs=...)``,
``retain_graph=True`` and a second pass, ``create_graph=True``, the backward of only one
of several outputs). Eager either raises "one of the variables needed for gradient
computation has been modified by an inplace operation" (autograd saved that tensor, a view
of it or its base) or gives a gradient; the compiled call must do exactly what eager does.
Sub-families: outputs eager saves itself (exp, sigmoid, tanh, relu, softmax) or does not
save (``x + 1``), outputs saved only by another output's backward, outputs that are views
of another output, of an intermediate not returned or of an input (narrow, t, view,
unsqueeze, diagonal, expand, split/chunk/unbind), the same tensor returned twice, an input
returned as is, a ``.detach()`` of an intermediate, modules and several calls, float64
mostly with a few float32 and complex programs and a few inputs not requiring grad.

Written in round 57 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes (each step's result or exception, gradients, outputs'
values, flags and ``_version``); ``P`` maps each program's name to it. The test module
``test_fidelity_blind_caller_writes`` runs each under eager and under each entry point and
compares the recordings.
"""

from __future__ import annotations

import torch
from torch import nn

from blind_fed_outputs_harness import L, init_params, registry

P, prog = registry()


ag = torch.autograd
f64, f32, c128 = torch.float64, torch.float32, torch.complex128


def init_(m, seed=0):
    return init_params(m, seed)


def ng(fn):
    """``fn`` run under ``torch.no_grad()``."""

    def f():
        with torch.no_grad():
            return fn()

    return f


def V(R, name, **ts):
    """Record each tensor (values, flags) and its ``_version``."""
    for k, t in ts.items():
        R.rec(f"{name}.{k}", t)
        R.rec(f"{name}.{k}.ver", t._version)


def G(R, pre="", **ts):
    for k, t in ts.items():
        R.grad(pre + k, t)


def nonleaf(*shape, seed=0, dtype=f64):
    """A leaf and a non-leaf copy of it (``x0 * 1``)."""
    x0 = L(*shape, seed=seed, dtype=dtype)
    return x0, x0 * 1


# =====================================================================
# Outputs eager saves itself (exp, sigmoid, tanh, relu, softmax)
# =====================================================================
def f_exp(x):
    return x.exp()


@prog()
def exp_out_mul_then_backward(C, R):
    g = C(f_exp)
    x = L(3, 4, seed=1)
    y = g(x)
    V(R, "before", y=y)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_data_mul_then_backward(C, R):
    g = C(f_exp)
    x = L(3, 4, seed=2)
    y = g(x)
    R.step("write", lambda: y.data.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_no_grad_write_then_backward(C, R):
    g = C(f_exp)
    x = L(4, seed=3)
    y = g(x)
    R.step("write", ng(lambda: y.add_(1)))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_detach_write_then_backward(C, R):
    g = C(f_exp)
    x = L(2, 3, seed=4)
    y = g(x)
    d = y.detach()
    R.step("write", lambda: d.mul_(3))
    V(R, "after", y=y, d=d)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_write_then_autograd_grad(C, R):
    g = C(f_exp)
    x = L(3, seed=5)
    y = g(x)
    R.step("write", lambda: y.sub_(0.5))
    R.step("grad", lambda: ag.grad(y.sum(), x))


@prog()
def exp_out_retain_then_write_then_second(C, R):
    g = C(f_exp)
    x = L(3, seed=6)
    y = g(x)
    R.step("bw1", lambda: y.sum().backward(retain_graph=True))
    G(R, "1.", x=x)
    R.step("write", lambda: y.mul_(2))
    R.step("bw2", lambda: y.sum().backward())
    G(R, "2.", x=x)


@prog()
def exp_out_caller_slice_write(C, R):
    g = C(f_exp)
    x = L(3, 2, seed=7)
    y = g(x)
    R.step("write", lambda: y[1:].mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_caller_transpose_write(C, R):
    g = C(f_exp)
    x = L(3, 2, seed=8)
    y = g(x)
    yt = y.t()
    R.step("write", lambda: yt.add_(1))
    V(R, "after", y=y, yt=yt)
    R.step("bw", lambda: y.sum().backward())


@prog()
def exp_out_write_backward_inputs(C, R):
    g = C(f_exp)
    x = L(3, seed=9)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    R.step("bw", lambda: y.sum().backward(inputs=[x]))
    G(R, x=x)


@prog()
def exp_out_written_twice(C, R):
    g = C(f_exp)
    x = L(2, 2, seed=10)
    y = g(x)
    R.step("w1", lambda: y.mul_(2))
    R.step("w2", lambda: y[0].add_(1))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())


@prog()
def sigmoid_out_add_then_backward(C, R):
    g = C(lambda x: x.sigmoid())
    x = L(3, 3, seed=11)
    y = g(x)
    R.step("write", lambda: y.add_(1))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def sigmoid_out_data_copy_then_backward(C, R):
    g = C(lambda x: x.sigmoid())
    x = L(4, seed=12)
    y = g(x)
    R.step("write", lambda: y.data.copy_(torch.full_like(y, 0.25)))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def tanh_out_row_zero_then_backward(C, R):
    def f(x, w):
        return (x * w).tanh()

    g = C(f)
    x, w = L(3, 4, seed=13), L(4, seed=14)
    y = g(x, w)
    R.step("write", lambda: y[0].zero_())
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x, w=w)


@prog()
def tanh_out_no_grad_fill(C, R):
    g = C(lambda x: x.tanh())
    x = L(5, seed=15)
    y = g(x)
    R.step("write", ng(lambda: y.fill_(0.5)))
    V(R, "after", y=y)
    R.step("grad", lambda: ag.grad(y.sum(), x))


@prog()
def relu_out_copy_from_grad_tensor(C, R):
    def f(x, w):
        return (x * w).relu()

    g = C(f)
    x, w, z = L(2, 3, seed=16), L(3, seed=17), L(2, 3, seed=18)
    y = g(x, w)
    R.step("write", lambda: y.copy_(z * 3))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x, w=w, z=z)


@prog()
def relu_out_data_sub_then_backward(C, R):
    g = C(lambda x: (x * 2).relu())
    x = L(6, seed=19)
    y = g(x)
    R.step("write", lambda: y.data.sub_(0.5))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def softmax_out_mul_then_backward(C, R):
    g = C(lambda x: x.softmax(-1))
    x = L(2, 4, seed=20)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    R.step("bw", lambda: (y * torch.arange(4.0, dtype=f64)).sum().backward())
    G(R, x=x)


@prog()
def softmax_out_data_mul_then_backward(C, R):
    g = C(lambda x: x.softmax(-1))
    x = L(2, 4, seed=21)
    y = g(x)
    R.step("write", lambda: y.data.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: (y * torch.arange(4.0, dtype=f64)).sum().backward())
    G(R, x=x)


@prog()
def exp_written_backward_other_output(C, R):
    def f(x):
        return x.exp(), x * 3

    g = C(f)
    x = L(3, seed=22)
    y, z = g(x)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y, z=z)
    R.step("bw_z", lambda: z.sum().backward())
    G(R, x=x)


@prog()
def exp_written_backward_both_outputs(C, R):
    def f(x):
        return x.exp(), x * 3

    g = C(f)
    x = L(3, seed=23)
    y, z = g(x)
    R.step("write", lambda: y.mul_(2))
    R.step("bw", lambda: (y.sum() + z.sum()).backward())
    G(R, x=x)


@prog()
def sin_out_written_ok(C, R):
    def f(x):
        return x.exp(), x.sin()

    g = C(f)
    x = L(3, seed=24)
    y, z = g(x)
    R.step("write", lambda: z.mul_(2))
    V(R, "after", z=z)
    R.step("bw", lambda: (y.sum() + z.sum()).backward())
    G(R, x=x)


@prog()
def exp_out_float32_write(C, R):
    g = C(f_exp)
    x = L(3, 2, seed=25, dtype=f32)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def sigmoid_out_float32_data_write(C, R):
    g = C(lambda x: x.sigmoid())
    x = L(4, seed=26, dtype=f32)
    y = g(x)
    R.step("write", lambda: y.data.mul_(0.5))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def exp_out_complex_write(C, R):
    g = C(f_exp)
    x = L(3, seed=27, dtype=c128)
    y = g(x)
    R.step("write", lambda: y.mul_(2j))
    V(R, "after", y=y)
    R.step("bw", lambda: y.abs().sum().backward())
    G(R, x=x)


@prog()
def mul_out_complex_write_ok(C, R):
    def f(x, w):
        return x * w

    g = C(f)
    x, w = L(3, seed=28, dtype=c128), L(3, seed=29, dtype=c128)
    y = g(x, w)
    R.step("write", lambda: y.mul_(1 + 2j))
    V(R, "after", y=y)
    R.step("bw", lambda: y.abs().sum().backward())
    G(R, x=x, w=w)


@prog()
def exp_out_complex_data_write(C, R):
    g = C(f_exp)
    x = L(2, 2, seed=30, dtype=c128)
    y = g(x)
    R.step("write", lambda: y.data.mul_(1j))
    R.step("bw", lambda: y.real.sum().backward())
    G(R, x=x)


@prog()
def tanh_create_graph_then_write(C, R):
    g = C(lambda x: x.tanh())
    x = L(3, seed=31)
    y = g(x)
    g1 = R.step("g1", lambda: ag.grad(y.sum(), x, create_graph=True)[0])
    R.step("write", ng(lambda: y.mul_(2)))
    if g1 is not None:
        R.step("g2", lambda: g1.sum().backward())
    G(R, x=x)


@prog()
def square_create_graph_then_write_ok(C, R):
    g = C(lambda x: x * x)
    x = L(3, seed=32)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    g1 = R.step("g1", lambda: ag.grad(y.sum(), x, create_graph=True)[0])
    if g1 is not None:
        R.step("g2", lambda: g1.sum().backward())
    G(R, x=x)


@prog()
def exp_create_graph_write_before(C, R):
    g = C(f_exp)
    x = L(3, seed=33)
    y = g(x)
    R.step("write", lambda: y.add_(1))
    R.step("g1", lambda: ag.grad(y.sum(), x, create_graph=True))


# =====================================================================
# Outputs eager does not save
# =====================================================================
@prog()
def add_out_mul_ok(C, R):
    g = C(lambda x: x + 1)
    x = L(2, 3, seed=34)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def mul_scalar_out_add_ok(C, R):
    g = C(lambda x: x * 2)
    x = L(4, seed=35)
    y = g(x)
    R.step("write", lambda: y.add_(1))
    V(R, "after", y=y)
    R.step("grad", lambda: ag.grad(y.sum(), x))


@prog()
def mul_tensor_out_copy_from_other(C, R):
    def f(x, w):
        return x * w

    g = C(f)
    x, w, z = L(3, seed=36), L(3, seed=37), L(3, seed=38)
    y = g(x, w)
    R.step("write", lambda: y.copy_(z * 3))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x, w=w, z=z)


@prog()
def add_out_self_mul(C, R):
    g = C(lambda x: x + 1)
    x = L(3, seed=39)
    y = g(x)
    R.step("write", lambda: y.mul_(y))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def sum_out_scalar_write(C, R):
    def f(x, w):
        return (x * w).sum()

    g = C(f)
    x, w = L(3, seed=40), L(3, seed=41)
    y = g(x, w)
    R.step("write", lambda: y.mul_(3))
    V(R, "after", y=y)
    R.step("bw", lambda: y.backward())
    G(R, x=x, w=w)


@prog()
def matmul_out_write_ok(C, R):
    def f(a, b):
        return a @ b

    g = C(f)
    a, b = L(2, 3, seed=42), L(3, 2, seed=43)
    y = g(a, b)
    R.step("write", lambda: y.add_(1))
    R.step("write2", lambda: y[:, 1].mul_(3))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, a=a, b=b)


@prog()
def add_out_mul_by_leaf(C, R):
    g = C(lambda x: x * 2)
    x = L(3, seed=44)
    y = g(x)
    R.step("write", lambda: y.mul_(x))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def add_out_caller_view_strided_write(C, R):
    g = C(lambda x: x + 1)
    x = L(2, 3, seed=45)
    y = g(x)
    R.step("write", lambda: y.view(-1)[::2].mul_(3))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def add_out_row_times_other_row(C, R):
    g = C(lambda x: x * 1.5)
    x = L(2, 3, seed=46)
    y = g(x)
    R.step("write", lambda: y[0].mul_(y[1]))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def add_out_detach_write_ok(C, R):
    g = C(lambda x: x - 2)
    x = L(3, seed=47)
    y = g(x)
    d = y.detach()
    R.step("write", lambda: d.mul_(4))
    V(R, "after", y=y, d=d)
    R.step("bw", lambda: (y * y).sum().backward())
    G(R, x=x)


@prog()
def add_out_retain_write_second(C, R):
    def f(x, w):
        return x * w + 1

    g = C(f)
    x, w = L(3, seed=48), L(3, seed=49)
    y = g(x, w)
    R.step("bw1", lambda: y.sum().backward(retain_graph=True))
    R.step("write", lambda: y.mul_(2))
    R.step("bw2", lambda: y.sum().backward())
    G(R, x=x, w=w)


# =====================================================================
# Outputs saved only by another output's backward
# =====================================================================
def f_hw(x, w):
    h = x + 1
    return h, h * w


def f_hw_tanh(x, w):
    h = x.tanh()
    return h, h * w


@prog()
def hw_write_h_backward_h(C, R):
    g = C(f_hw)
    x, w = L(3, seed=50), L(3, seed=51)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    V(R, "after", h=h, o=o)
    R.step("bw", lambda: h.sum().backward())
    G(R, x=x, w=w)


@prog()
def hw_write_h_backward_o(C, R):
    g = C(f_hw)
    x, w = L(3, seed=52), L(3, seed=53)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x, w=w)


@prog()
def hw_write_h_backward_o_w_nograd(C, R):
    g = C(f_hw)
    x, w = L(3, seed=54), L(3, seed=55, rg=False)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x)


@prog()
def hw_write_h_backward_o_inputs_x(C, R):
    g = C(f_hw)
    x, w = L(3, seed=56), L(3, seed=57)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward(inputs=[x]))
    G(R, x=x, w=w)


@prog()
def hw_write_h_backward_o_inputs_w(C, R):
    g = C(f_hw)
    x, w = L(3, seed=58), L(3, seed=59)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward(inputs=[w]))
    G(R, x=x, w=w)


@prog()
def hw_write_o_backward_both(C, R):
    g = C(f_hw)
    x, w = L(3, seed=60), L(3, seed=61)
    h, o = g(x, w)
    R.step("write", lambda: o.mul_(2))
    V(R, "after", h=h, o=o)
    R.step("bw", lambda: (h.sum() + o.sum()).backward())
    G(R, x=x, w=w)


@prog()
def hw_write_h_backward_both(C, R):
    g = C(f_hw)
    x, w = L(3, seed=62), L(3, seed=63)
    h, o = g(x, w)
    R.step("write", lambda: h.add_(1))
    R.step("bw", lambda: (h.sum() + o.sum()).backward())
    G(R, x=x, w=w)


@prog()
def hw_tanh_write_h_backward_o(C, R):
    g = C(f_hw_tanh)
    x, w = L(3, seed=64), L(3, seed=65)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x, w=w)


@prog()
def hw_tanh_data_write_h_backward_o(C, R):
    g = C(f_hw_tanh)
    x, w = L(3, seed=66), L(3, seed=67)
    h, o = g(x, w)
    R.step("write", lambda: h.data.mul_(2))
    V(R, "after", h=h, o=o)
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x, w=w)


@prog()
def hw_write_h_autograd_grad_o_wrt_x(C, R):
    g = C(f_hw)
    x, w = L(3, seed=68), L(3, seed=69)
    h, o = g(x, w)
    R.step("write", lambda: h.add_(1))
    R.step("grad", lambda: ag.grad(o.sum(), x))


@prog()
def hw_retain_h_then_write_then_o(C, R):
    g = C(f_hw)
    x, w = L(3, seed=70), L(3, seed=71)
    h, o = g(x, w)
    R.step("bw_h", lambda: h.sum().backward(retain_graph=True))
    R.step("write", ng(lambda: h.mul_(2)))
    R.step("bw_o", lambda: o.sum().backward())
    G(R, x=x, w=w)


@prog()
def hm_matmul_write_h_backward_o(C, R):
    def f(x, w):
        h = x * 2
        return h, h @ w

    g = C(f)
    x, w = L(2, 3, seed=72), L(3, 2, seed=73)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x, w=w)


@prog()
def hm_matmul_w_nograd_write_h(C, R):
    def f(x, w):
        h = x * 2
        return h, h @ w

    g = C(f)
    x, w = L(2, 3, seed=74), L(3, 2, seed=75, rg=False)
    h, o = g(x, w)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: o.sum().backward())
    G(R, x=x)


@prog()
def hw_float32_write_h_backward_o(C, R):
    g = C(f_hw)
    x, w = L(3, seed=76, dtype=f32), L(3, seed=77, dtype=f32)
    h, o = g(x, w)
    R.step("write", lambda: h.zero_())
    R.step("bw", lambda: o.sum().backward())
    R.step("bw_h", lambda: h.sum().backward())
    G(R, x=x, w=w)


# =====================================================================
# An output that is a view of another output
# =====================================================================
def f_nv(a, b):
    t = a @ b
    v = t.narrow(-1, 1, 2)
    return v, v.pow(2), t


def mk_nv(s=0, dtype=f64):
    return L(2, 3, seed=80 + s, dtype=dtype), L(3, 4, seed=90 + s, dtype=dtype)


@prog()
def nv_write_v_backward_pow(C, R):
    g = C(f_nv)
    a, b = mk_nv(0)
    v, p, t = g(a, b)
    R.rec("v_is_view", v._is_view())
    R.step("write", lambda: v.mul_(2))
    V(R, "after", v=v, p=p, t=t)
    R.step("bw", lambda: p.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_v_backward_t(C, R):
    g = C(f_nv)
    a, b = mk_nv(1)
    v, _p, t = g(a, b)
    R.step("write", lambda: v.mul_(2))
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: t.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_t_backward_pow(C, R):
    g = C(f_nv)
    a, b = mk_nv(2)
    v, p, t = g(a, b)
    R.step("write", lambda: t.add_(1))
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: p.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_t_backward_v(C, R):
    g = C(f_nv)
    a, b = mk_nv(3)
    v, _p, t = g(a, b)
    R.step("write", lambda: t.mul_(3))
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: (v * torch.tensor([1.0, 2.0], dtype=f64)).sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_other_view_backward_pow(C, R):
    g = C(f_nv)
    a, b = mk_nv(4)
    v, p, t = g(a, b)
    R.step("write", lambda: t[:, 0].zero_())
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: p.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_other_view_backward_t(C, R):
    g = C(f_nv)
    a, b = mk_nv(5)
    v, _p, t = g(a, b)
    R.step("write", lambda: t[:, 3].mul_(5))
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: t.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_data_write_v_backward_all(C, R):
    g = C(f_nv)
    a, b = mk_nv(6)
    v, p, t = g(a, b)
    R.step("write", lambda: v.data.mul_(2))
    V(R, "after", v=v, p=p, t=t)
    R.step("bw", lambda: (v.sum() + p.sum() + t.sum()).backward())
    G(R, a=a, b=b)


@prog()
def nv_no_grad_write_v_backward_t(C, R):
    g = C(f_nv)
    a, b = mk_nv(7)
    v, p, t = g(a, b)
    R.step("write", ng(lambda: v.fill_(1.0)))
    V(R, "after", v=v, t=t)
    R.step("bw_t", lambda: t.sum().backward(retain_graph=True))
    G(R, "1.", a=a, b=b)
    R.step("bw_p", lambda: p.sum().backward())


@prog()
def nv_write_v_backward_v(C, R):
    g = C(f_nv)
    a, b = mk_nv(8)
    v, _p, t = g(a, b)
    R.step("write", lambda: v.add_(v.detach() * 0 + 1))
    V(R, "after", v=v, t=t)
    R.step("bw", lambda: v.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_float32_write_v_backward_pow(C, R):
    g = C(f_nv)
    a, b = mk_nv(9, f32)
    v, p, t = g(a, b)
    R.step("write", lambda: v.mul_(2))
    R.step("bw", lambda: p.sum().backward())
    R.step("bw_t", lambda: t.sum().backward())
    G(R, a=a, b=b)


@prog()
def nv_write_v_autograd_grad_t_wrt_b(C, R):
    g = C(f_nv)
    a, b = mk_nv(10)
    v, p, t = g(a, b)
    R.step("write", lambda: v.mul_(-1))
    R.step("grad_t", lambda: ag.grad(t.sum(), b))
    R.step("grad_p", lambda: ag.grad(p.sum(), b))


@prog()
def view_of_output_exp_of_view(C, R):
    def f(x, w):
        t = x * w
        v = t[1]
        return v, v.exp(), t

    g = C(f)
    x, w = L(2, 3, seed=100), L(3, seed=101)
    v, e, t = g(x, w)
    R.step("write", lambda: v.mul_(2))
    V(R, "after", v=v, e=e, t=t)
    R.step("bw_e", lambda: e.sum().backward(retain_graph=True))
    G(R, "1.", x=x, w=w)
    R.step("bw_t", lambda: t.sum().backward())
    G(R, "2.", x=x, w=w)


@prog()
def view_of_output_complex_write(C, R):
    def f(x, w):
        t = x * w
        v = t[0]
        return v, v * v, t

    g = C(f)
    x, w = L(2, 3, seed=102, dtype=c128), L(3, seed=103, dtype=c128)
    v, q, t = g(x, w)
    R.step("write", lambda: t.mul_(1j))
    V(R, "after", v=v, t=t)
    R.step("bw_q", lambda: q.abs().sum().backward())
    R.step("bw_t", lambda: t.abs().sum().backward())
    G(R, x=x, w=w)


# =====================================================================
# Outputs that are views of an intermediate not returned
# =====================================================================
def f_iv(x, y):
    t = x * y
    return t[0], t[0].sin(), t[1]


def mk_iv(s):
    return L(2, 3, seed=110 + s), L(2, 3, seed=120 + s)


@prog()
def iv_write_first_backward_sin(C, R):
    g = C(f_iv)
    x, y = mk_iv(0)
    a, s, b = g(x, y)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a, s=s, b=b)
    R.step("bw", lambda: s.sum().backward())
    G(R, x=x, y=y)


@prog()
def iv_write_second_backward_sin(C, R):
    g = C(f_iv)
    x, y = mk_iv(1)
    a, s, b = g(x, y)
    R.step("write", lambda: b.mul_(2))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: s.sum().backward())
    G(R, x=x, y=y)


@prog()
def iv_write_second_backward_first(C, R):
    g = C(f_iv)
    x, y = mk_iv(2)
    a, _s, b = g(x, y)
    R.step("write", lambda: b.add_(1))
    R.step("bw", lambda: a.sum().backward())
    G(R, x=x, y=y)


@prog()
def iv_write_first_backward_second(C, R):
    g = C(f_iv)
    x, y = mk_iv(3)
    a, _s, b = g(x, y)
    R.step("write", lambda: a.add_(1))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: (b * 2).sum().backward())
    G(R, x=x, y=y)


@prog()
def iv_write_first_backward_all(C, R):
    g = C(f_iv)
    x, y = mk_iv(4)
    a, s, b = g(x, y)
    R.step("write", lambda: a.mul_(3))
    R.step("bw", lambda: (a.sum() + s.sum() + b.sum()).backward())
    G(R, x=x, y=y)


@prog()
def iv_data_write_second_backward_sin(C, R):
    g = C(f_iv)
    x, y = mk_iv(5)
    a, s, b = g(x, y)
    R.step("write", lambda: b.data.mul_(2))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: s.sum().backward())
    G(R, x=x, y=y)


@prog()
def iv_exp_transposed_write(C, R):
    g = C(lambda x: x.exp().t())
    x = L(2, 3, seed=130)
    y = g(x)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def iv_exp_row_data_write(C, R):
    g = C(lambda x: x.exp()[0])
    x = L(2, 3, seed=131)
    y = g(x)
    R.step("write", lambda: y.data.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def iv_exp_row_write(C, R):
    g = C(lambda x: x.exp()[1])
    x = L(2, 3, seed=132)
    y = g(x)
    R.step("write", lambda: y.add_(1))
    R.step("bw", lambda: y.sum().backward())
    G(R, x=x)


@prog()
def iv_diagonal_write_backward_sum(C, R):
    def f(x, w):
        t = x @ w
        return t.diagonal(), t.sum()

    g = C(f)
    x, w = L(3, 3, seed=133), L(3, 3, seed=134)
    d, s = g(x, w)
    R.step("write", lambda: d.zero_())
    V(R, "after", d=d, s=s)
    R.step("bw", lambda: s.backward())
    G(R, x=x, w=w)


@prog()
def iv_two_views_both_written(C, R):
    def f(x):
        t = x * 2
        return t[:, 0], t[:, 1]

    g = C(f)
    x = L(3, 2, seed=135)
    a, b = g(x)
    R.step("write", lambda: a.add_(b))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: (a.sum() + b.sum()).backward())
    G(R, x=x)


# =====================================================================
# Outputs that are views of an input
# =====================================================================
@prog()
def inview_leaf_slice_write(C, R):
    def f(x):
        v = x[1:]
        return v, v.exp()

    g = C(f)
    x = L(3, 2, seed=140)
    v, e = g(x)
    R.rec("v", v)
    R.step("write", lambda: v.mul_(2))
    V(R, "after", x=x)
    R.step("bw", lambda: e.sum().backward())
    G(R, x=x)


@prog()
def inview_leaf_slice_no_grad_write(C, R):
    def f(x):
        v = x[1:]
        return v, v.exp()

    g = C(f)
    x = L(3, 2, seed=141)
    v, e = g(x)
    R.step("write", ng(lambda: v.mul_(2)))
    V(R, "after", x=x, v=v, e=e)
    R.step("bw", lambda: e.sum().backward())
    G(R, x=x)


@prog()
def inview_nonleaf_slice_write_backward_exp(C, R):
    def f(x):
        v = x[1:]
        return v, v.exp()

    g = C(f)
    x0, x = nonleaf(3, 2, seed=142)
    v, e = g(x)
    R.step("write", lambda: v.mul_(2))
    V(R, "after", x=x, v=v)
    R.step("bw", lambda: (e.sum() + v.sum()).backward())
    G(R, x0=x0)


@prog()
def inview_nonleaf_slice_sin_write(C, R):
    def f(x):
        v = x[1:]
        return v, v.sin()

    g = C(f)
    x0, x = nonleaf(3, 2, seed=143)
    v, s = g(x)
    R.step("write", lambda: v.mul_(2))
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def inview_nonleaf_t_write(C, R):
    def f(x, w):
        v = x.t()
        return v, v * w

    g = C(f)
    x0, x = nonleaf(3, 2, seed=144)
    w = L(3, seed=145)
    v, o = g(x, w)
    R.step("write", lambda: v.add_(1))
    V(R, "after", x=x, v=v)
    R.step("bw", lambda: o.sum().backward())
    G(R, x0=x0, w=w)


@prog()
def inview_nonleaf_view_write(C, R):
    def f(x):
        v = x.view(-1)
        return v, v.pow(2)

    g = C(f)
    x0, x = nonleaf(2, 3, seed=146)
    v, p = g(x)
    R.step("write", lambda: v[0].fill_(7.0))
    V(R, "after", x=x, v=v)
    R.step("bw", lambda: p.sum().backward())
    R.step("bw_v", lambda: v.sum().backward())
    G(R, x0=x0)


@prog()
def inview_nonleaf_unsqueeze_write(C, R):
    def f(x):
        u = x.unsqueeze(0)
        return u, u.cos()

    g = C(f)
    x0, x = nonleaf(3, seed=147)
    u, c = g(x)
    R.step("write", lambda: u.mul_(2))
    V(R, "after", x=x, u=u)
    R.step("bw", lambda: c.sum().backward())
    G(R, x0=x0)


@prog()
def inview_nonleaf_diagonal_write(C, R):
    def f(x):
        d = x.diagonal()
        return d, d.pow(2)

    g = C(f)
    x0, x = nonleaf(3, 3, seed=148)
    d, p = g(x)
    R.step("write", lambda: d.zero_())
    V(R, "after", x=x, d=d)
    R.step("bw_p", lambda: p.sum().backward())
    R.step("bw_x", lambda: x.sum().backward())
    G(R, x0=x0)


@prog()
def inview_expand_write(C, R):
    def f(x):
        e = x.expand(3, 4)
        return e, e * 2

    g = C(f)
    x0, x = nonleaf(1, 4, seed=149)
    e, m = g(x)
    R.rec("e", e)
    R.step("write", lambda: e.mul_(2))
    V(R, "after", x=x)
    R.step("bw", lambda: m.sum().backward())
    G(R, x0=x0)


@prog()
def inview_expand_no_grad_write(C, R):
    def f(x):
        e = x.expand(2, 3)
        return e, e.exp()

    g = C(f)
    x = L(1, 3, seed=150)
    e, m = g(x)
    R.step("write", ng(lambda: e.add_(1)))
    V(R, "after", x=x)
    R.step("bw", lambda: m.sum().backward())
    G(R, x=x)


@prog()
def inview_split_write(C, R):
    def f(x):
        a, b = x.split(2)
        return a, b, a.sin()

    g = C(f)
    x0, x = nonleaf(4, 2, seed=151)
    a, _b, s = g(x)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", x=x)
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def inview_split_second_write_no_grad(C, R):
    def f(x):
        a, b = x.split(2)
        return a, b, a.sin()

    g = C(f)
    x0, x = nonleaf(4, 2, seed=152)
    _a, b, s = g(x)
    R.step("write", ng(lambda: b.mul_(2)))
    V(R, "after", x=x)
    R.step("b_after", lambda: b.grad_fn is None)
    R.step("bw", lambda: (s.sum() + b.sum()).backward())
    G(R, x0=x0)


@prog()
def inview_chunk_write(C, R):
    def f(x):
        a, b = x.chunk(2, dim=1)
        return a, b, (a * b).sum()

    g = C(f)
    x0, x = nonleaf(2, 4, seed=153)
    _a, b, s = g(x)
    R.step("write", lambda: b.add_(1))
    R.step("bw", lambda: s.backward())
    G(R, x0=x0)


@prog()
def inview_chunk_data_write(C, R):
    def f(x):
        a, b = x.chunk(2, dim=1)
        return a, b, (a * b).sum()

    g = C(f)
    x0, x = nonleaf(2, 4, seed=154)
    _a, b, s = g(x)
    R.step("write", lambda: b.data.add_(1))
    V(R, "after", x=x, b=b)
    R.step("bw", lambda: s.backward())
    G(R, x0=x0)


@prog()
def inview_unbind_write(C, R):
    def f(x):
        r0, r1, r2 = x.unbind(0)
        return r0, r1, r2, (r0 * r1).sum()

    g = C(f)
    x0, x = nonleaf(3, 2, seed=155)
    _r0, _r1, r2, s = g(x)
    R.step("write", lambda: r2.mul_(2))
    V(R, "after", x=x)
    R.step("bw", lambda: s.backward())
    G(R, x0=x0)


@prog()
def inview_unbind_leaf_write_no_grad(C, R):
    def f(x):
        r0, r1 = x.unbind(1)
        return r0, r1, r0.exp()

    g = C(f)
    x = L(3, 2, seed=156)
    r0, _r1, e = g(x)
    R.step("write", ng(lambda: r0.mul_(2)))
    V(R, "after", x=x, e=e)
    R.step("r0_after", lambda: r0.grad_fn is None)
    R.step("bw", lambda: e.sum().backward())
    G(R, x=x)


@prog()
def inview_caller_writes_base_sin(C, R):
    def f(x):
        v = x[0]
        return v.sin(), v

    g = C(f)
    x0, x = nonleaf(2, 3, seed=157)
    s, v = g(x)
    R.step("write", lambda: x.add_(1))
    V(R, "after", v=v, x=x)
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def inview_caller_writes_base_exp(C, R):
    def f(x):
        v = x[0]
        return v.exp(), v

    g = C(f)
    x0, x = nonleaf(2, 3, seed=158)
    e, v = g(x)
    R.step("write", lambda: x.add_(1))
    V(R, "after", v=v, x=x)
    R.step("bw", lambda: (e.sum() + v.sum()).backward())
    G(R, x0=x0)


@prog()
def inview_caller_writes_sibling_view_of_input(C, R):
    def f(x):
        v = x[0]
        return v.sin(), v

    g = C(f)
    x0, x = nonleaf(2, 3, seed=159)
    s, v = g(x)
    R.step("write", lambda: x[1].mul_(2))
    V(R, "after", v=v)
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def inview_leaf_input_written_under_no_grad(C, R):
    def f(x):
        v = x[0]
        return v * 3, v

    g = C(f)
    x = L(2, 3, seed=160)
    m, v = g(x)
    R.step("write", ng(lambda: x.mul_(2)))
    V(R, "after", v=v, m=m)
    R.step("bw", lambda: m.sum().backward())
    G(R, x=x)


# =====================================================================
# The same tensor twice, an input returned as is, a detach of an intermediate
# =====================================================================
@prog()
def twice_exp_write_first_backward_second(C, R):
    def f(x):
        t = x.exp()
        return t, t

    g = C(f)
    x = L(3, seed=170)
    a, b = g(x)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: b.sum().backward())
    G(R, x=x)


@prog()
def twice_add_write_first_backward_second(C, R):
    def f(x):
        t = x + 1
        return t, t

    g = C(f)
    x = L(3, seed=171)
    a, b = g(x)
    R.rec("alias", a.data_ptr() == b.data_ptr())
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: b.sum().backward())
    G(R, x=x)


@prog()
def twice_mul_write_first_backward_both(C, R):
    def f(x, w):
        t = x * w
        return t, t

    g = C(f)
    x, w = L(3, seed=172), L(3, seed=173)
    a, b = g(x, w)
    R.step("write", lambda: a.add_(a.detach()))
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: (a.sum() + 2 * b.sum()).backward())
    G(R, x=x, w=w)


@prog()
def twice_write_second_data_backward_first(C, R):
    def f(x):
        t = x.sigmoid()
        return t, t

    g = C(f)
    x = L(3, seed=174)
    a, b = g(x)
    R.step("write", lambda: b.data.zero_())
    V(R, "after", a=a, b=b)
    R.step("bw", lambda: a.sum().backward())
    G(R, x=x)


@prog()
def input_returned_leaf_write(C, R):
    def f(x):
        return x, x.exp()

    g = C(f)
    x = L(3, seed=175)
    a, e = g(x)
    R.rec("a", a)
    R.step("write", lambda: a.mul_(2))
    R.step("bw", lambda: e.sum().backward())
    G(R, x=x)


@prog()
def input_returned_leaf_no_grad_write_exp(C, R):
    def f(x):
        return x, x.exp()

    g = C(f)
    x = L(3, seed=176)
    a, e = g(x)
    R.step("write", ng(lambda: a.mul_(2)))
    V(R, "after", a=a, x=x, e=e)
    R.step("bw", lambda: e.sum().backward())
    G(R, x=x)


@prog()
def input_returned_leaf_no_grad_write_sin(C, R):
    def f(x):
        return x, x.sin()

    g = C(f)
    x = L(3, seed=177)
    a, s = g(x)
    R.step("write", ng(lambda: a.mul_(2)))
    V(R, "after", x=x)
    R.step("bw", lambda: s.sum().backward())
    G(R, x=x)


@prog()
def input_returned_nonleaf_write_sin(C, R):
    def f(x):
        return x, x.sin()

    g = C(f)
    x0, x = nonleaf(3, seed=178)
    a, s = g(x)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a, x=x)
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def input_returned_nonleaf_write_exp(C, R):
    def f(x):
        return x, x.exp()

    g = C(f)
    x0, x = nonleaf(3, seed=179)
    a, e = g(x)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a, x=x)
    R.step("bw", lambda: (e.sum() + a.sum()).backward())
    G(R, x0=x0)


@prog()
def input_returned_nonleaf_data_write_sin(C, R):
    def f(x):
        return x, x.sin()

    g = C(f)
    x0, x = nonleaf(3, seed=180)
    a, s = g(x)
    R.step("write", lambda: a.data.mul_(2))
    V(R, "after", x=x)
    R.step("bw", lambda: s.sum().backward())
    G(R, x0=x0)


@prog()
def detach_of_saved_written(C, R):
    def f(x):
        t = x.exp()
        return t.detach(), t * 2

    g = C(f)
    x = L(3, seed=181)
    d, m = g(x)
    R.rec("d", d)
    R.step("write", lambda: d.mul_(2))
    V(R, "after", d=d, m=m)
    R.step("bw", lambda: m.sum().backward())
    G(R, x=x)


@prog()
def detach_of_unsaved_written(C, R):
    def f(x):
        t = x * 2
        return t.detach(), t.sum()

    g = C(f)
    x = L(3, seed=182)
    d, s = g(x)
    R.step("write", lambda: d.mul_(2))
    V(R, "after", d=d, s=s)
    R.step("bw", lambda: s.backward())
    G(R, x=x)


@prog()
def detach_and_original_returned(C, R):
    def f(x):
        t = x + 1
        return t.detach(), t

    g = C(f)
    x = L(3, seed=183)
    d, t = g(x)
    R.step("write", lambda: d.mul_(3))
    V(R, "after", d=d, t=t)
    R.step("bw", lambda: (t * t).sum().backward())
    G(R, x=x)


@prog()
def detach_of_tanh_and_tanh_returned(C, R):
    def f(x):
        t = x.tanh()
        return t.detach(), t

    g = C(f)
    x = L(3, seed=184)
    d, t = g(x)
    R.step("write", lambda: d.zero_())
    V(R, "after", d=d, t=t)
    R.step("bw", lambda: t.sum().backward())
    G(R, x=x)


# =====================================================================
# Modules and several calls
# =====================================================================
class LinTanh(nn.Module):
    def __init__(self, dtype=f64):
        super().__init__()
        self.lin = nn.Linear(3, 4, dtype=dtype)

    def forward(self, x):
        return self.lin(x).tanh()


class FeatHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(3, 4, dtype=f64)
        self.head = nn.Linear(4, 2, dtype=f64)

    def forward(self, x):
        h = self.body(x).relu()
        return h, self.head(h)


class LinSig(nn.Module):
    def __init__(self, dtype=f64):
        super().__init__()
        self.lin = nn.Linear(3, 3, dtype=dtype)

    def forward(self, x):
        return self.lin(x).sigmoid()


def pgrads(R, m, pre=""):
    for n, p in m.named_parameters():
        R.grad(pre + n, p)


@prog()
def mod_linear_tanh_write(C, R):
    m = init_(LinTanh())
    g = C(m)
    x = L(2, 3, seed=190)
    a = g(x)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a)
    R.step("bw", lambda: a.sum().backward())
    pgrads(R, m)


@prog()
def mod_linear_tanh_data_write(C, R):
    m = init_(LinTanh())
    g = C(m)
    x = L(2, 3, seed=191)
    a = g(x)
    R.step("write", lambda: a.data.mul_(2))
    R.step("bw", lambda: a.sum().backward())
    pgrads(R, m)
    G(R, x=x)


@prog()
def mod_feat_head_write_h_backward_logits(C, R):
    m = init_(FeatHead())
    g = C(m)
    x = L(2, 3, seed=192)
    h, lo = g(x)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: lo.sum().backward())
    pgrads(R, m)


@prog()
def mod_feat_head_write_logits_ok(C, R):
    m = init_(FeatHead())
    g = C(m)
    x = L(2, 3, seed=193)
    _h, lo = g(x)
    R.step("write", lambda: lo.add_(1))
    V(R, "after", lo=lo)
    R.step("bw", lambda: (lo * lo).sum().backward())
    pgrads(R, m)
    G(R, x=x)


@prog()
def mod_feat_head_write_h_backward_h(C, R):
    m = init_(FeatHead())
    g = C(m)
    x = L(2, 3, seed=194)
    h, _lo = g(x)
    R.step("write", lambda: h[0].zero_())
    R.step("bw", lambda: h.sum().backward())
    pgrads(R, m)


@prog()
def mod_two_calls_write_first_backward_second(C, R):
    m = init_(LinSig())
    g = C(m)
    x1, x2 = L(2, 3, seed=195), L(2, 3, seed=196)
    a1 = g(x1)
    a2 = g(x2)
    R.step("write", lambda: a1.mul_(2))
    R.step("bw2", lambda: a2.sum().backward())
    pgrads(R, m, "2.")
    R.step("bw1", lambda: a1.sum().backward())
    G(R, x1=x1, x2=x2)


@prog()
def mod_write_between_calls_feed(C, R):
    m = init_(LinSig())
    g = C(m)
    x = L(2, 3, seed=197)
    a1 = g(x)
    R.step("write", lambda: a1.mul_(2))
    a2 = g(a1)
    R.rec("a2", a2)
    R.step("bw", lambda: a2.sum().backward())
    pgrads(R, m)
    G(R, x=x)


@prog()
def mod_write_between_calls_no_grad_feed(C, R):
    m = init_(LinSig())
    g = C(m)
    x = L(2, 3, seed=198)
    a1 = g(x)
    a2 = g(a1)
    R.step("write", ng(lambda: a1.add_(1)))
    V(R, "after", a1=a1, a2=a2)
    R.step("bw", lambda: a2.sum().backward())
    pgrads(R, m)


@prog()
def mod_write_second_call_output_backward_first(C, R):
    m = init_(LinTanh())
    g = C(m)
    x1, x2 = L(2, 3, seed=199), L(2, 3, seed=200)
    a1 = g(x1)
    a2 = g(x2)
    R.step("write", lambda: a2.zero_())
    R.step("bw1", lambda: a1.sum().backward())
    pgrads(R, m)
    G(R, x1=x1)


@prog()
def mod_no_grad_params_and_input_write(C, R):
    m = init_(LinTanh())
    m.requires_grad_(False)
    g = C(m)
    x = L(2, 3, seed=201, rg=False)
    a = g(x)
    R.rec("a", a)
    R.step("write", lambda: a.mul_(2))
    V(R, "after", a=a)


@prog()
def mod_float32_write_then_second_call(C, R):
    m = init_(LinSig(f32))
    g = C(m)
    x = L(2, 3, seed=202, dtype=f32)
    a1 = g(x)
    R.step("write", ng(lambda: a1.mul_(0.5)))
    a2 = g(x)
    R.step("bw2", lambda: a2.sum().backward())
    pgrads(R, m)
    R.step("bw1", lambda: a1.sum().backward())


@prog()
def mod_input_frozen_params_write_h(C, R):
    m = init_(FeatHead())
    m.head.requires_grad_(False)
    g = C(m)
    x = L(2, 3, seed=203)
    h, lo = g(x)
    R.step("write", lambda: h.mul_(2))
    R.step("bw", lambda: lo.sum().backward())
    pgrads(R, m)
    G(R, x=x)


# =====================================================================
# Inputs not requiring grad
# =====================================================================
@prog()
def nograd_inputs_exp_write(C, R):
    g = C(f_exp)
    x = L(3, seed=210, rg=False)
    y = g(x)
    R.rec("y", y)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: y.sum().backward())


@prog()
def nograd_x_exp_saved_by_o(C, R):
    def f(x, w):
        y = x.exp()
        return y, y * w

    g = C(f)
    x, w = L(3, seed=211, rg=False), L(3, seed=212)
    y, o = g(x, w)
    R.rec("y", y)
    R.step("write", lambda: y.mul_(2))
    V(R, "after", y=y)
    R.step("bw", lambda: o.sum().backward())
    G(R, w=w)


@prog()
def nograd_x_written_then_grad_w_only(C, R):
    def f(x, w):
        y = x + 1
        return y, y.exp() * w

    g = C(f)
    x, w = L(3, seed=213, rg=False), L(3, seed=214)
    y, o = g(x, w)
    R.step("write", lambda: y.zero_())
    V(R, "after", y=y, o=o)
    R.step("bw", lambda: o.sum().backward())
    G(R, w=w)


@prog()
def nograd_view_of_input_written(C, R):
    def f(x):
        v = x[0]
        return v, v.sin()

    g = C(f)
    x = L(2, 3, seed=215, rg=False)
    v, s = g(x)
    R.step("write", lambda: v.add_(1))
    V(R, "after", x=x, v=v, s=s)


@prog()
def nograd_complex_written(C, R):
    def f(x, w):
        y = x * 2
        return y, (y * w).real

    g = C(f)
    x, w = L(3, seed=216, dtype=c128, rg=False), L(3, seed=217, dtype=c128)
    y, o = g(x, w)
    R.step("write", lambda: y.mul_(1j))
    V(R, "after", y=y)
    R.step("bw", lambda: o.sum().backward())
    G(R, w=w)
