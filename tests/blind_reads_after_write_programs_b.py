"""Programs of the blind reads-after-write suite, continued: metadata changes, written
inputs read by other writes, and isolating variants."""

from __future__ import annotations

import torch

from blind_reads_after_write_programs import (
    S_leaf,
    S_leafview,
    S_vslice,
    S_vt,
    S_x,
    S_x13,
    S_xcy,
    S_xpos,
    S_xs,
    S_xy,
    S_xyz,
    _m43,
    _w43,
    prog,
)


@prog("t_", S_xy)
def _(x, y):
    x.t_()
    return x * y.t()


@prog("t_then_mul", S_xy)
def _(x, y):
    x.t_()
    x.mul_(2)
    return x * y.t()


@prog("unsqueeze_", S_x)
def _(x):
    x.unsqueeze_(0)
    return x * 2


@prog("unsqueeze_then_add", S_xy)
def _(x, y):
    x.unsqueeze_(0)
    x.add_(y)
    return x * x


@prog("squeeze_", S_x13)
def _(x):
    x.squeeze_(0)
    x.mul_(3)
    return x * x


@prog("view_t_", S_vt)
def _(x, y):
    x.t_()
    return x * 2


@prog("transpose_", S_xy)
def _(x, y):
    x.transpose_(0, 1)
    x.mul_(2)
    return x * y.t()


@prog("return_x", S_x)
def _(x):
    x.mul_(2)
    return x, x.sum()


@prog("return_x_only", S_x)
def _(x):
    x.mul_(2)
    return x


@prog("return_view_of_x", S_x)
def _(x):
    x.add_(1)
    return x[0], x * 3


@prog("return_t_of_x", S_xy)
def _(x, y):
    x.mul_(y)
    return x.t(), y * 1


@prog("some_none", S_xcy)
def _(x, w):
    x.mul_(2)
    w.mul_(3)
    return x * 2, w.detach()


@prog("not_read_after", S_xy)
def _(x, y):
    x.mul_(2)
    return y * 1


@prog("index_put_", S_xs)
def _(x, s):
    x.index_put_((torch.tensor([0, 2]),), s.expand(2, 3) * 1)
    return x * x


@prog("index_put_accum", S_xy)
def _(x, y):
    x.index_put_((torch.tensor([0, 0, 3]),), y[0:3], accumulate=True)
    return x * x


@prog("masked_fill_", S_xy)
def _(x, y):
    x.masked_fill_(_m43(), 0.0)
    return x * y


@prog("mul_twice", S_x)
def _(x):
    x.mul_(2)
    x.mul_(3)
    return x


@prog("row_mul_", S_x)
def _(x):
    x[0].mul_(2)
    return x * x


@prog("flat_view_mul_y", S_xy)
def _(x, y):
    x.view(-1)[2:5].mul_(y.view(-1)[0:3])
    return x.sum()


@prog("sigmoid_", S_x)
def _(x):
    x.sigmoid_()
    return x * x


@prog("exp_", S_x)
def _(x):
    x.exp_()
    return x + x


@prog("relu_", S_xy)
def _(x, y):
    x.relu_()
    return x * y


@prog("addcmul_", S_xy)
def _(x, y):
    x.addcmul_(y, y)
    return x


@prog("copy_flip_self", S_x)
def _(x):
    x.copy_(x.flip(0))
    return x * _w43()


@prog("read_before_and_after", S_x)
def _(x):
    a = x.sin()
    x.zero_()
    return a, x + 1


@prog("copy_x_sq", S_x)
def _(x):
    x.copy_(x * x)
    return x


@prog("div_", S_xpos)
def _(x, y):
    x.div_(y)
    return (x * x + 1).log()


@prog("col_assign", S_xy)
def _(x, y):
    x[:, 0] = y[:, 0]
    return x.sum(1)


@prog("where_copy", S_xy)
def _(x, y):
    x.copy_(torch.where(x > 0, x, y))
    return x * 2


@prog("leaf_inplace_raises", S_leaf)
def _(x):
    x.mul_(2)
    return x * x


@prog("leaf_view_inplace_raises", S_leafview)
def _(x):
    x.mul_(2)
    return x * x


@prog("leaf_nograd_write", S_leaf)
def _(x):
    with torch.no_grad():
        x.mul_(2)
    return x * x


@prog("self_slice_copy", S_x)
def _(x):
    x[1:3] = x[0:2].clone()
    return x * _w43()


@prog("fill_tensor", S_xs)
def _(x, s):
    x.fill_(s)
    return x * _w43()


@prog("lerp_", S_xy)
def _(x, y):
    x.lerp_(y, 0.3)
    return x


@prog("neg_return", S_x)
def _(x):
    x.neg_()
    return x


@prog("three_inputs_chain", S_xyz)
def _(x, z, y):
    x.mul_(y)
    z.mul_(x)
    x.add_(z)
    return x.sum(), z * y


# non-raising variants of the programs whose eager backward trips the version check
@prog("written_twice_ok", S_xy)
def _(x, y):
    a = x * 2
    x.mul_(3)
    b = x.sum(1, keepdim=True)
    x.add_(y)
    return a + b + x * x


@prog("read_before_after_ok", S_x)
def _(x):
    a = x * 2
    x.zero_()
    return a, x + 1


@prog("copy_x_3_ok", S_x)
def _(x):
    x.copy_(x * 3)
    return x * x


@prog("three_chain_ok", S_xyz)
def _(x, z, y):
    x.mul_(y)
    z.mul_(2)
    z.add_(x)
    x.add_(z)
    return x.sum(), z * y


# isolating variants
@prog("two_written_indep", S_xcy)
def _(x, z):
    x.mul_(2)
    z.mul_(3)
    return x * z


@prog("two_written_cross_noread", S_xcy)
def _(x, z):
    x.mul_(2)
    z.add_(x)
    return z * 1


@prog("two_written_old_x", S_xcy)
def _(x, z):
    z.add_(x)
    x.mul_(2)
    return x * z


@prog("two_written_cross_detach", S_xcy)
def _(x, z):
    x.mul_(2)
    z.add_(x.detach())
    return x * z


@prog("view_write_no_read", S_vslice)
def _(x, y):
    x.mul_(2)
    return y * 1


@prog("view_no_write", S_vslice)
def _(x, y):
    return x * y


@prog("t_no_read", S_xy)
def _(x, y):
    x.t_()
    return y * 1
