"""Programs of the blind reads-after-write suite (``test_fidelity_blind_reads_after_write``):
the setups, and the first programs (writes, custom Functions, views). Written by a helper
who had not read the implementation."""

from __future__ import annotations

import torch

D = torch.float64
PROGS = []


def prog(name, setup):
    def deco(f):
        PROGS.append((name, setup, f))
        return f

    return deco


def L(*shape):
    return torch.randn(shape, dtype=D).requires_grad_()


def P(*shape):
    return torch.randn(shape, dtype=D)


# ---------------------------------------------------------------- setups
def S_x():
    a = L(4, 3)
    return [a], [a.clone()], []


def S_xy():
    a, b = L(4, 3), L(4, 3)
    return [a, b], [a.clone(), b], []


def S_xcy():
    a, b = L(4, 3), L(4, 3)
    return [a, b], [a.clone(), b.clone()], []


def S_xyz():
    a, b, c = L(4, 3), L(4, 3), L(4, 3)
    return [a, b, c], [a.clone(), b.clone(), c], []


def S_zy():  # z plain (no grad), y leaf
    b = L(4, 3)
    return [b], [P(4, 3), b], []


def S_xzy():  # x clone, z plain, y leaf
    a, b = L(4, 3), L(4, 3)
    return [a, b], [a.clone(), P(4, 3), b], []


def S_vslice():
    bl, y = L(5, 3), L(2, 3)
    base = bl.clone()
    return [bl, y], [base[1:3], y], [base]


def S_vt():
    bl, y = L(3, 4), L(4, 3)
    base = bl.clone()
    return [bl, y], [base.t(), y], [base]


def S_overlap():
    bl = L(5, 3)
    base = bl.clone()
    return [bl], [base[0:3], base[1:4]], [base]


def S_disjoint():
    bl = L(4, 3)
    base = bl.clone()
    return [bl], [base[0:2], base[2:4]], [base]


def S_x_and_view():
    a = L(4, 3)
    x = a.clone()
    return [a], [x, x[1:3]], []


def S_leaf():
    a = L(4, 3)
    return [a], [a], []


def S_leafview():
    a = L(4, 3)
    return [a], [a[1:3]], []


def S_xs():
    a, s = L(4, 3), L()
    return [a, s], [a.clone(), s], []


def S_xpos():
    a, b = L(4, 3), L(4, 3)
    return [a, b], [a.clone(), (b * b + 1)], []


def S_x13():
    a = L(1, 4)
    return [a], [a.clone()], []


# built inside the traced function (aot_function refuses closed-over tensors)
def _m43():
    return torch.tensor([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]], dtype=torch.bool)


def _m23():
    return torch.tensor([[1, 0, 1], [0, 1, 0]], dtype=torch.bool)


def _w43():
    return torch.arange(12, dtype=D).reshape(4, 3) * 0.1 + 1


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class AddInto(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, y):
        z.add_(y)
        ctx.mark_dirty(z)
        return z

    @staticmethod
    def backward(ctx, g):
        return g, g


class DoubleAndSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x, x.sum()

    @staticmethod
    def backward(ctx, g, gs):
        return (g + gs) * 2


# ---------------------------------------------------------------- programs
@prog("mul_", S_x)
def _(x):
    x.mul_(2)
    return (x * x).sum(1)


@prog("add_y", S_xy)
def _(x, y):
    x.add_(y)
    return x.sin()


@prog("copy_y2", S_xy)
def _(x, y):
    x.copy_(y * 2)
    return x.exp()


@prog("mask_assign", S_xs)
def _(x, s):
    x[_m43()] = s * 3
    return x * x


@prog("slice_zero", S_x)
def _(x):
    x[1:3].zero_()
    return x.cos()


@prog("clamp_", S_xy)
def _(x, y):
    x.clamp_(-0.5, 0.5)
    return x * y


@prog("fn_mark_dirty", S_x)
def _(x):
    Double.apply(x)
    return x * x


@prog("fn_mark_dirty_ret", S_x)
def _(x):
    r = Double.apply(x)
    return r, x.sin()


@prog("fn_mark_dirty_plain_z", S_zy)
def _(z, y):
    AddInto.apply(z, y)
    return z * z


@prog("fn_mark_dirty_two_out", S_x)
def _(x):
    _r, s = DoubleAndSum.apply(x)
    return x * 3, s


@prog("out_mul_self", S_x)
def _(x):
    torch.mul(x, 2, out=x)
    return x * x


@prog("out_nograd", S_xy)
def _(x, y):
    with torch.no_grad():
        torch.mul(x, 2, out=x)
    return x * y


@prog("out_plain_from_plain", S_zy)
def _(z, y):
    torch.sin(z, out=z)
    return z * y


@prog("two_written", S_xcy)
def _(x, z):
    x.mul_(2)
    z.add_(x)
    return x * z


@prog("written_twice_reads_between", S_x)
def _(x):
    a = x * x
    x.mul_(3)
    b = x.sin()
    x.add_(1)
    return a + b + x * 2


@prog("write_then_nograd_write", S_x)
def _(x):
    x.mul_(2)
    with torch.no_grad():
        x.add_(1)
    return x * x


@prog("nograd_write_then_write", S_xy)
def _(x, y):
    with torch.no_grad():
        x.add_(1)
    x.mul_(y)
    return x.exp()


@prog("nograd_write_only", S_x)
def _(x):
    with torch.no_grad():
        x.mul_(2)
    return x * x


@prog("nograd_write_then_mulsave", S_xy)
def _(x, y):
    x.mul_(y)
    with torch.no_grad():
        x.mul_(0.5)
    return x * 3


@prog("plain_copy_grad", S_zy)
def _(z, y):
    z.copy_(y)
    return z * 2


@prog("plain_mul_grad", S_zy)
def _(z, y):
    z.mul_(y)
    return z.sum()


@prog("plain_index_set", S_zy)
def _(z, y):
    z[0] = y[0] * 3
    return z * z


@prog("plain_written_plain", S_xzy)
def _(x, z, y):
    z.add_(1)
    return x * z + y


@prog("plain_x_only", S_zy)
def _(z, y):
    z.mul_(2)
    return z * y


@prog("view_slice_mul", S_vslice)
def _(x, y):
    x.mul_(2)
    return x * x


@prog("view_slice_addy", S_vslice)
def _(x, y):
    x.add_(y)
    return x.view(-1) * 2, x.sum()


@prog("view_slice_mask", S_vslice)
def _(x, y):
    x[_m23()] = y[_m23()] * 2
    return x * x


@prog("view_t_add", S_vt)
def _(x, y):
    x.add_(y)
    return x.sum(0)


@prog("view_t_mul_twice", S_vt)
def _(x, y):
    x.mul_(y)
    a = x.exp()
    x.mul_(2)
    return a, x


@prog("overlap_write_a_read_b", S_overlap)
def _(a, b):
    a.mul_(2)
    return b * b


@prog("overlap_write_both", S_overlap)
def _(a, b):
    a.mul_(2)
    b.add_(1)
    return a * b[0:1].sum(), b.sin()


@prog("disjoint_views", S_disjoint)
def _(a, b):
    a.mul_(2)
    b.add_(a)
    return a * b


@prog("x_and_its_view", S_x_and_view)
def _(x, xv):
    x.mul_(2)
    return xv * xv


@prog("x_and_its_view_write_view", S_x_and_view)
def _(x, xv):
    xv.mul_(3)
    return x.sin()
