"""Blind programs: in-place metadata changes of inputs. A compiled function or module
changes the metadata of one of its inputs in place (``t_()``, ``transpose_``,
``swapdims_``, ``squeeze_``, ``unsqueeze_``, ``as_strided_`` smaller than the input, at an
offset, with overlapping or gapped strides or larger than the input but inside its
storage, ``resize_`` shrinking or growing a tensor that does not require grad, ``set_``
under ``torch.no_grad`` on tensors that do not require grad, ``.data = ...``,
``detach_()``, ``requires_grad_()``), with or without also writing its values (``mul_``,
``add_``, ``x[0].fill_``, ``masked_fill_``, ``copy_``, under ``torch.no_grad`` or not),
reading it before and after the change and returning views taken before or after it, the
input itself, or values computed from both layouts. The inputs are a leaf's clone, tensors
that do not require grad, views of a caller's base (``base[1:]``, ``base.t()``,
``base[:, ::2]``), two views of one base, non-contiguous and 0-dim or one-element
tensors. The caller then observes the outputs and the input (shape, stride, storage
offset, values, version, flags), differentiates (``autograd.grad`` at the caller's ``x``
itself and at the leaf, ``retain_grad``, hooks registered after the call,
``backward(inputs=)``, ``retain_graph``), calls again with fresh inputs or other
``requires_grad`` flags, under ``torch.no_grad`` or ``torch.inference_mode``, and sees
the errors eager raises.

Written in round 63 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_metadata_changes`` runs each under eager and under each entry point
and compares the recordings.
"""

from __future__ import annotations

import torch
from torch import nn

from blind_fed_outputs_harness import L, W, init_params, registry

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32


def mk(*shape, dtype=f64, seed=1):
    """``(leaf, x)``: a seeded leaf and its clone (the input whose metadata changes)."""
    leaf = L(*shape, seed=seed, dtype=dtype)
    return leaf, leaf.clone()


def meta(R, name, t):
    """Record ``t`` (values, shape, stride, flags) and its storage offset, version and
    contiguity."""
    R.rec(name, t)
    R.rec(name + ".meta", (t.storage_offset(), t._version, t.is_contiguous()))


def cnt(R, tag):
    return len(R.hooks.get(tag, []))


def wsum(*ts):
    """A weighted sum of the tensors (each by ``W``), so permuted gradients show."""
    return sum((t * W(t)).sum() for t in ts)


# =====================================================================
# t_, transpose_, swapdims_ on a leaf's clone
# =====================================================================


@prog()
def t_then_mul_grad_at_x(C, R):
    def f(x, w):
        x.t_()
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(3, 2, seed=2)
    out = g(x, w)
    R.rec("out", out)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(out, x), [x, leaf, w]))


@prog()
def t_returns_input_itself(C, R):
    def f(x):
        x.t_()
        return x

    g = C(f)
    leaf, x = mk(2, 3)
    o = g(x)
    R.rec("same", o is x)
    meta(R, "o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, leaf]))


@prog()
def mul_then_t_sum(C, R):
    def f(x):
        x.mul_(2)
        x.t_()
        return x.sum(1)

    g = C(f)
    leaf, x = mk(2, 3)
    s = g(x)
    R.rec("s", s)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(s, x), [x, leaf]))


@prog()
def transpose_reads_both_layouts(C, R):
    def f(x):
        a = x * 1.5
        x.transpose_(0, 1)
        b = x + 1
        return a, b

    g = C(f)
    leaf, x = mk(2, 4)
    a, b = g(x)
    R.rec("a", a)
    R.rec("b", b)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(a, b, x), [x, leaf]))


@prog()
def transpose_negative_dims_add_after(C, R):
    def f(x, w):
        x.transpose_(-1, -2)
        x.add_(w)
        return x.exp()

    g = C(f)
    leaf, x = mk(2, 2, 3)
    w = L(2, 3, 2, seed=2)
    e = g(x, w)
    R.rec("e", e)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e, x), [x, leaf, w]))


@prog()
def swapdims_3d_grad_all(C, R):
    def f(x):
        x.swapdims_(0, 2)
        return x.sin(), x.sum(0)

    g = C(f)
    leaf, x = mk(2, 3, 4)
    s, r = g(x)
    R.rec("s", s)
    R.rec("r", r)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(s, r), [x, leaf]))


@prog()
def swapdims_plain_input_weight_grad(C, R):
    def f(x, w):
        x.swapdims_(0, 2)
        return x * w

    g = C(f)
    x = L(2, 1, 3, seed=1, rg=False)
    w = L(3, 1, 2, seed=2)
    out = g(x, w)
    R.rec("out", out)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(out), [w]))


@prog()
def t_twice_with_fill_between(C, R):
    def f(x, w):
        x.t_()
        x[0].fill_(0.5)
        x.t_()
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(2, 3, seed=2)
    out = g(x, w)
    R.rec("out", out)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(out, x), [x, leaf, w]))


@prog()
def t_noncontiguous_nonview_input(C, R):
    def f(x):
        x.t_()
        return x.cumsum(0)

    g = C(f)
    leaf = L(2, 3, seed=1)
    x = torch.empty_strided((2, 3), (1, 2), dtype=f64).copy_(leaf)
    meta(R, "x0", x)
    c = g(x)
    R.rec("c", c)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(c, x), [x, leaf]))


@prog()
def t_view_before_returned(C, R):
    def f(x):
        v = x[0]
        x.t_()
        return v

    g = C(f)
    leaf, x = mk(2, 3)
    v = g(x)
    meta(R, "v", v)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(v, x), [x, leaf]))


@prog()
def t_view_after_returned(C, R):
    def f(x):
        x.t_()
        return x[0]

    g = C(f)
    leaf, x = mk(2, 3)
    v = g(x)
    meta(R, "v", v)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(v, x), [x, leaf]))


@prog()
def t_rows_from_old_and_new_layouts(C, R):
    def f(x):
        a = x[0] * 2
        x.t_()
        b = x[0] * 3
        return a, b

    g = C(f)
    leaf, x = mk(3, 3)
    a, b = g(x)
    R.rec("a", a)
    R.rec("b", b)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(a, b), [x, leaf]))


@prog()
def t_then_copy_from_other(C, R):
    def f(x, y):
        x.t_()
        x.copy_(y * 2)
        return x + 0

    g = C(f)
    leaf, x = mk(2, 3)
    y = L(3, 2, seed=2)
    o = g(x, y)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, y]))


@prog()
def t_under_nograd_on_view_input(C, R):
    def f(x):
        with torch.no_grad():
            x.t_()
        return x * 2

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    x = b.t()
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.rec("b", b)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf]))


@prog()
def t_under_nograd_backward_error(C, R):
    def f(x):
        with torch.no_grad():
            x.t_()
        return x * 2

    g = C(f)
    leaf, x = mk(2, 3)
    o = R.step("call", lambda: g(x))
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(o.sum(), [leaf]))


@prog()
def t_on_3d_raises(C, R):
    def f(x):
        x.t_()
        return x * 2

    g = C(f)
    _leaf, x = mk(2, 2, 2)
    R.step("call", lambda: g(x))
    meta(R, "x", x)


# =====================================================================
# metadata changes of views of a caller's base
# =====================================================================


@prog()
def transpose_view_rows_then_mul(C, R):
    def f(x):
        x.transpose_(0, 1)
        x.mul_(2)
        return x * 1

    g = C(f)
    leaf = L(3, 3, seed=1)
    b = leaf.clone()
    x = b[1:]
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.rec("x_base_is_b", x._base is b)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, b), [x, b, leaf]))


@prog()
def t_of_transposed_base_view(C, R):
    def f(x):
        x.t_()
        return x + 1

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    x = b.t()
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, b, leaf]))


@prog()
def t_strided_column_view_add(C, R):
    def f(x, w):
        x.t_()
        x.add_(w)
        return x.square()

    g = C(f)
    leaf = L(3, 4, seed=1)
    b = leaf.clone()
    x = b[:, ::2]
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, b), [x, leaf, w]))


@prog()
def two_views_t_and_mul(C, R):
    def f(u, v):
        u.t_()
        v.mul_(2)
        return u * v.t()

    g = C(f)
    leaf = L(2, 4, seed=1)
    b = leaf.clone()
    u, v = b[:, :2], b[:, 2:]
    o = g(u, v)
    R.rec("o", o)
    meta(R, "u", u)
    meta(R, "v", v)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, b), [u, v, leaf]))


@prog()
def two_overlapping_views_unsqueeze_and_write(C, R):
    def f(u, v):
        u.unsqueeze_(0)
        v[0].fill_(3.0)
        return u * 2, v.sum()

    g = C(f)
    leaf = L(5, seed=1)
    b = leaf.clone()
    u, v = b[:4], b[1:]
    o, s = g(u, v)
    R.rec("o", o)
    R.rec("s", s)
    meta(R, "u", u)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, s, b), [u, leaf]))


@prog()
def unsqueeze_row_view_of_base(C, R):
    def f(x, w):
        x.unsqueeze_(0)
        return x * w

    g = C(f)
    leaf = L(3, 3, seed=1)
    b = leaf.clone()
    x = b[1]
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, b, leaf, w]))


@prog()
def squeeze_view_then_base_written_by_caller(C, R):
    def f(x):
        x.squeeze_()
        return x * 3

    g = C(f)
    leaf = L(3, 4, seed=1)
    b = leaf.clone()
    x = b[1:2]
    o = g(x)
    meta(R, "x", x)
    with torch.no_grad():
        b[1].mul_(10)
    R.rec("x_after_base_write", x)
    R.rec("o", o)
    R.step("g", lambda: ag.grad(wsum(o, x), [leaf]))


@prog()
def t_view_retain_grad_on_x_and_base(C, R):
    def f(x, w):
        x.t_()
        return x.sum(0) * w

    g = C(f)
    leaf = L(3, 2, seed=1)
    b = leaf.clone()
    x = b[1:]
    w = L(2, seed=2)
    o = g(x, w)
    meta(R, "x", x)
    x.retain_grad()
    b.retain_grad()
    R.step("bw", lambda: wsum(o, x).backward())
    R.grad("x", x)
    R.grad("b", b)
    R.grad("leaf", leaf)
    R.grad("w", w)


@prog()
def as_strided_offset_on_transposed_view(C, R):
    def f(x):
        x.as_strided_((2,), (1,), 1)
        return x.exp()

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    x = b.t()
    e = g(x)
    R.rec("e", e)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e, x), [x, leaf]))


@prog()
def data_assign_on_row_view(C, R):
    def f(x, y):
        x.data = y.sin()
        return x * 2

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    x = b[0]
    y = L(3, seed=2, rg=False)
    o = g(x, y)
    R.rec("o", o)
    meta(R, "x", x)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf]))


@prog()
def base_and_view_view_squeezed_base_written(C, R):
    def f(base, v):
        v.squeeze_(0)
        base.mul_(2)
        return v * 3

    g = C(f)
    leaf = L(2, 4, seed=1)
    b = leaf.clone()
    v = b[1:]
    o = g(b, v)
    R.rec("o", o)
    meta(R, "v", v)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, v), [v, leaf]))


# =====================================================================
# squeeze_ / unsqueeze_
# =====================================================================


@prog()
def unsqueeze_then_broadcast(C, R):
    def f(x, w):
        x.unsqueeze_(1)
        return x * w

    g = C(f)
    leaf, x = mk(3)
    w = L(3, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


@prog()
def squeeze_all_exp(C, R):
    def f(x):
        x.squeeze_()
        return x.exp()

    g = C(f)
    leaf, x = mk(1, 3, 1)
    e = g(x)
    R.rec("e", e)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e, x), [x, leaf]))


@prog()
def squeeze_dim_add_return_input(C, R):
    def f(x):
        x.squeeze_(1)
        x.add_(1)
        return x

    g = C(f)
    leaf, x = mk(2, 1, 3)
    o = g(x)
    R.rec("same", o is x)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, leaf]))


@prog()
def squeeze_non_one_dim_noop(C, R):
    def f(x, w):
        x.squeeze_(0)
        return x @ w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(3, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, leaf, w]))


@prog()
def squeeze_plain_masked_fill(C, R):
    def f(x, w):
        x.squeeze_(0)
        x.masked_fill_(x > 0, 0.0)
        return x * w

    g = C(f)
    x = L(1, 2, 3, seed=1, rg=False)
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def masked_fill_then_unsqueeze_nonleaf(C, R):
    def f(x):
        x.masked_fill_(x < 0, 1.0)
        x.unsqueeze_(-1)
        return x.expand(3, 2, 4) * 2

    g = C(f)
    leaf, x = mk(3, 1)
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, leaf]))


@prog()
def unsqueeze_views_before_and_after(C, R):
    def f(x):
        v0 = x[0]
        x.unsqueeze_(0)
        v1 = x[0]
        return v0, v1

    g = C(f)
    leaf, x = mk(2, 3)
    v0, v1 = g(x)
    meta(R, "v0", v0)
    meta(R, "v1", v1)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(v0, v1), [x, leaf]))


@prog()
def squeeze_one_element_to_0dim(C, R):
    def f(x):
        x.squeeze_()
        return x * 3, x.dim()

    g = C(f)
    leaf, x = mk(1)
    o, d = g(x)
    R.rec("o", o)
    R.rec("d", d)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(o + x, [x, leaf]))


@prog()
def unsqueeze_0dim_twice(C, R):
    def f(x, w):
        x.unsqueeze_(0)
        x.unsqueeze_(1)
        return x * w

    g = C(f)
    leaf = torch.tensor(0.7, dtype=f64, requires_grad=True)
    x = leaf.clone()
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


@prog()
def squeeze_out_of_range_raises(C, R):
    def f(x):
        x.squeeze_(4)
        return x + 1

    g = C(f)
    _leaf, x = mk(2, 1)
    R.step("call", lambda: g(x))
    meta(R, "x", x)


# =====================================================================
# as_strided_
# =====================================================================


@prog()
def as_strided_smaller_block(C, R):
    def f(x, w):
        x.as_strided_((2, 2), (3, 1))
        return x * w

    g = C(f)
    leaf, x = mk(3, 3)
    w = L(2, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


@prog()
def as_strided_at_offset(C, R):
    def f(x):
        x.as_strided_((2, 2), (3, 1), 4)
        return x.sin()

    g = C(f)
    leaf, x = mk(3, 3)
    s = g(x)
    R.rec("s", s)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(s, x), [x, leaf]))


@prog()
def as_strided_overlapping_square(C, R):
    def f(x):
        x.as_strided_((2, 2), (1, 1))
        return x * x

    g = C(f)
    leaf, x = mk(3, 3)
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, leaf]))


@prog()
def as_strided_gapped(C, R):
    def f(x):
        x.as_strided_((2, 2), (6, 2), 1)
        return x.exp()

    g = C(f)
    leaf, x = mk(3, 4)
    e = g(x)
    R.rec("e", e)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e, x), [x, leaf]))


@prog()
def as_strided_larger_than_view_inside_storage(C, R):
    def f(x):
        x.as_strided_((3, 3), (3, 1), 0)
        return x * 2

    g = C(f)
    leaf = L(3, 3, seed=1)
    b = leaf.clone()
    x = b[:2]
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    meta(R, "b", b)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, b, leaf]))


@prog()
def as_strided_larger_plain_view(C, R):
    def f(x, w):
        x.as_strided_((2, 4), (4, 1), 0)
        return x * w

    g = C(f)
    b = L(2, 4, seed=1, rg=False)
    x = b[1, 1:3]
    w = L(2, 4, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def as_strided_then_mul_(C, R):
    def f(x, w):
        x.as_strided_((2, 2), (3, 1))
        x.mul_(2)
        return x * w

    g = C(f)
    leaf, x = mk(3, 3)
    w = L(2, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


@prog()
def add_then_as_strided_sum(C, R):
    def f(x):
        x.add_(1)
        x.as_strided_((3,), (4,))
        return x.sum()

    g = C(f)
    leaf, x = mk(3, 3)
    s = g(x)
    R.rec("s", s)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(s + wsum(x), [x, leaf]))


@prog()
def as_strided_reads_old_layout_first(C, R):
    def f(x):
        a = x.sum(0)
        x.as_strided_((2, 3), (1, 2), 1)
        return a, x * 2

    g = C(f)
    leaf, x = mk(3, 3)
    a, o = g(x)
    R.rec("a", a)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(a, o), [x, leaf]))


@prog()
def as_strided_plain_under_nograd_write(C, R):
    def f(x, w):
        with torch.no_grad():
            x.as_strided_((2, 2), (1, 2), 1)
            x.mul_(-1)
        return x * w

    g = C(f)
    x = L(3, 3, seed=1, rg=False)
    w = L(2, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def as_strided_then_t(C, R):
    def f(x):
        x.as_strided_((2, 3), (4, 1), 1)
        x.t_()
        return x * 1

    g = C(f)
    leaf, x = mk(3, 4)
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf]))


# =====================================================================
# resize_
# =====================================================================


@prog()
def resize_shrink_plain(C, R):
    def f(x, w):
        x.resize_(2, 2)
        return x * w

    g = C(f)
    x = L(3, 3, seed=1, rg=False)
    w = L(2, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def resize_grow_plain_then_fill(C, R):
    def f(x, w):
        x.resize_(6)
        x[4:].fill_(1.0)
        return x * w

    g = C(f)
    x = L(2, 2, seed=1, rg=False)
    w = L(6, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def resize_requires_grad_raises(C, R):
    def f(x):
        x.resize_(2, 2)
        return x * 2

    g = C(f)
    _leaf, x = mk(3, 3)
    R.step("call", lambda: g(x))
    meta(R, "x", x)


@prog()
def resize_view_before_returned(C, R):
    def f(x, w):
        v = x[1]
        x.resize_(2)
        return v * w, x * 2

    g = C(f)
    x = L(2, 3, seed=1, rg=False)
    w = L(3, seed=2)
    a, o = g(x, w)
    R.rec("a", a)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(a), [w]))


# =====================================================================
# set_ under no_grad
# =====================================================================


@prog()
def set_nograd_then_mul_weight(C, R):
    def f(x, y, w):
        with torch.no_grad():
            x.set_(y)
        return x * w

    g = C(f)
    x = L(3, seed=1, rg=False)
    y = L(2, 2, seed=2, rg=False)
    w = L(2, 2, seed=3)
    o = g(x, y, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.rec("shares", x.data_ptr() == y.data_ptr())
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def set_nograd_then_write_seen_through_other(C, R):
    def f(x, y):
        with torch.no_grad():
            x.set_(y)
        x.mul_(2)
        return x.sum()

    g = C(f)
    x = L(4, seed=1, rg=False)
    y = L(2, 3, seed=2, rg=False)
    s = g(x, y)
    R.rec("s", s)
    meta(R, "x", x)
    meta(R, "y", y)


@prog()
def set_nograd_returns_input(C, R):
    def f(x, y):
        with torch.no_grad():
            x.set_(y.t())
        return x

    g = C(f)
    x = L(2, seed=1, rg=False)
    y = L(2, 3, seed=2, rg=False)
    o = g(x, y)
    R.rec("same", o is x)
    meta(R, "x", x)


# =====================================================================
# .data assignment, detach_, requires_grad_
# =====================================================================


@prog()
def data_assign_same_shape(C, R):
    def f(x, y, w):
        x.data = y * 2
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    y = L(2, 3, seed=2, rg=False)
    w = L(2, 3, seed=3)
    o = g(x, y, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


@prog()
def data_assign_plain_transposed(C, R):
    def f(x, w):
        x.data = x.data.t()
        return x * w

    g = C(f)
    x = L(2, 3, seed=1, rg=False)
    w = L(3, 2, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def detach_leaf_clone(C, R):
    def f(x, w):
        x.detach_()
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))
    R.step("g_leaf", lambda: ag.grad(wsum(o), [leaf]))


@prog()
def mul_then_detach(C, R):
    def f(x, w):
        x.mul_(2)
        x.detach_()
        return x + w

    g = C(f)
    _leaf, x = mk(3)
    w = L(3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [w]))


@prog()
def detach_view_raises(C, R):
    def f(x):
        x.detach_()
        return x * 2

    g = C(f)
    leaf = L(3, 2, seed=1)
    b = leaf.clone()
    x = b[1:]
    R.step("call", lambda: g(x))
    meta(R, "x", x)


@prog()
def requires_grad_on_plain_input(C, R):
    def f(x, w):
        x.requires_grad_()
        return x * w

    g = C(f)
    x = L(2, 3, seed=1, rg=False)
    w = L(2, 3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o), [x, w]))


@prog()
def requires_grad_then_reads_both(C, R):
    def f(x):
        a = x * 2
        x.requires_grad_()
        return a, x.exp()

    g = C(f)
    x = L(3, seed=1, rg=False)
    a, e = g(x)
    R.rec("a", a)
    R.rec("e", e)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e), [x]))
    R.step("g_a", lambda: ag.grad(wsum(a), [x]))


@prog()
def requires_grad_false_nonleaf_raises(C, R):
    def f(x):
        x.requires_grad_(False)
        return x * 2

    g = C(f)
    _leaf, x = mk(3)
    R.step("call", lambda: g(x))
    meta(R, "x", x)


# =====================================================================
# the caller's observations after a metadata change
# =====================================================================


@prog()
def t_retain_grad_after_call(C, R):
    def f(x, w):
        x.t_()
        return (x * w).sum(0)

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(3, 2, seed=2)
    o = g(x, w)
    x.retain_grad()
    R.step("bw", lambda: wsum(o, x).backward())
    R.grad("x", x)
    R.grad("leaf", leaf)
    R.grad("w", w)


@prog()
def unsqueeze_hook_on_x_after_call(C, R):
    def f(x):
        x.unsqueeze_(0)
        return x.tanh()

    g = C(f)
    leaf, x = mk(3)
    o = g(x)
    x.register_hook(R.hook("x", lambda gr: gr * 2))
    R.step("bw", lambda: wsum(o, x).backward())
    R.rec("n", cnt(R, "x"))
    R.grad("leaf", leaf)


@prog()
def swapdims_backward_inputs_x(C, R):
    def f(x, w):
        x.swapdims_(0, 1)
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(3, 2, seed=2)
    o = g(x, w)
    R.step("bw", lambda: wsum(o).backward(inputs=[x]))
    R.grad("x", x)
    R.grad("leaf", leaf)
    R.grad("w", w)


@prog()
def as_strided_retain_graph_twice(C, R):
    def f(x):
        x.as_strided_((2, 2), (1, 3), 1)
        return x.sin()

    g = C(f)
    leaf, x = mk(3, 3)
    o = g(x)
    x.register_hook(R.hook("x"))
    loss = wsum(o, x)
    R.step("bw1", lambda: loss.backward(retain_graph=True))
    R.grad("leaf1", leaf)
    R.step("bw2", lambda: loss.backward())
    R.grad("leaf2", leaf)
    R.rec("n", cnt(R, "x"))


@prog()
def t_second_call_fresh_inputs_other_flags(C, R):
    def f(x, w):
        x.t_()
        x.mul_(3)
        return x @ w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(2, 2, seed=2)
    o = g(x, w)
    R.rec("o1", o)
    meta(R, "x1", x)
    R.step("g1", lambda: ag.grad(wsum(o), [leaf, w]))
    x2 = L(2, 3, seed=4, rg=False)
    w2 = L(2, 2, seed=5, rg=False)
    o2 = g(x2, w2)
    R.rec("o2", o2)
    meta(R, "x2", x2)
    leaf3, x3 = mk(2, 3, seed=6)
    o3 = g(x3, w2)
    R.rec("o3", o3)
    meta(R, "x3", x3)
    R.step("g3", lambda: ag.grad(wsum(o3, x3), [x3, leaf3]))


@prog()
def squeeze_second_call_other_shape(C, R):
    def f(x):
        x.squeeze_(0)
        return x * 2

    g = C(f)
    leaf, x = mk(1, 3)
    o = g(x)
    R.rec("o1", o)
    meta(R, "x1", x)
    leaf2, x2 = mk(2, 3, seed=2)
    o2 = g(x2)
    R.rec("o2", o2)
    meta(R, "x2", x2)
    R.step("g", lambda: ag.grad(wsum(o, o2), [x, leaf, x2, leaf2]))


@prog()
def t_call_under_no_grad(C, R):
    def f(x, w):
        x.t_()
        x.add_(1)
        return x * w

    g = C(f)
    leaf, x = mk(2, 3)
    w = L(3, 2, seed=2)
    with torch.no_grad():
        o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(x), [x, leaf]))


@prog()
def unsqueeze_call_under_inference_mode(C, R):
    def f(x, w):
        x.unsqueeze_(0)
        x.mul_(2)
        return x + w

    g = C(f)
    with torch.inference_mode():
        x = L(3, seed=1, rg=False)
        w = L(2, 3, seed=2, rg=False)
        o = g(x, w)
    R.rec("o", o)
    R.rec("x", x)
    R.rec("x.meta", (x.storage_offset(), x.is_contiguous()))


@prog()
def as_strided_call_under_inference_then_grad(C, R):
    def f(x):
        x.as_strided_((2,), (2,), 1)
        return x * 2

    g = C(f)
    x = L(2, 2, seed=1, rg=False)
    with torch.inference_mode():
        o1 = g(x)
    R.rec("o1", o1)
    meta(R, "x1", x)
    leaf, x2 = mk(2, 2, seed=2)
    o2 = g(x2)
    R.rec("o2", o2)
    meta(R, "x2", x2)
    R.step("g", lambda: ag.grad(wsum(o2, x2), [x2, leaf]))


@prog()
def t_x_used_in_loss_after_caller_write(C, R):
    def f(x):
        x.t_()
        return x.exp()

    g = C(f)
    leaf, x = mk(2, 3)
    e = g(x)
    R.step("write", lambda: x.mul_(2))
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(e, x), [leaf]))


@prog()
def float32_transpose_fill_row(C, R):
    def f(x, w):
        x.transpose_(0, 1)
        x[0].fill_(2.0)
        return x * w

    g = C(f)
    leaf, x = mk(3, 2, dtype=f32)
    w = L(2, 3, seed=2, dtype=f32)
    o = g(x, w)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, w]))


# =====================================================================
# modules
# =====================================================================


class TLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 3, dtype=f64)

    def forward(self, x):
        x.t_()
        return self.lin(x)


@prog()
def module_t_input_then_linear(C, R):
    m = init_params(TLinear(), 0, offset=630)
    g = C(m)
    leaf, x = mk(2, 4)
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf, m.lin.weight, m.lin.bias]))


@prog()
def module_unsqueeze_batch_twice(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2, dtype=f64)

        def forward(self, x):
            x.unsqueeze_(0)
            with torch.no_grad():
                x.mul_(0.5)
            return self.lin(x).relu()

    m = init_params(M(), 1, offset=630)
    g = C(m)
    leaf, x = mk(3)
    o = g(x)
    R.rec("o", o)
    meta(R, "x", x)
    x2 = L(3, seed=3, rg=False)
    o2 = g(x2)
    R.rec("o2", o2)
    meta(R, "x2", x2)
    o2.sum().backward()
    R.grad("w", m.lin.weight)
    R.step("g", lambda: ag.grad(wsum(o, x), [x, leaf]))
