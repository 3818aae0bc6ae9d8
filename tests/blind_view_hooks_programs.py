"""Blind programs: gradient hooks meeting views, inside and outside the compiled function.

Inside the compiled function, tensor hooks (``t.register_hook(fn)``, pure functions of the
gradient) are registered on views of inputs (slices, ``t()``, ``view``, ``unsqueeze``,
``diagonal``, ``expand``, ``select``, ``narrow``, ``as_strided``), on pieces of
multi-output views (``chunk``, ``unbind``, ``split``, ``tensor_split``), on views of
intermediates, on chains of views, on the inputs themselves (leaf and non-leaf) and on
outputs before returning them; several hooks on one tensor, hooks on two pieces of one
split, hooks on a view and on its base, and in-place writes after the registration (to
the hooked view, to its base). The function returns the hooked view, a sibling, a view of
it, its base, something computed from it, detached things or nothing touching it. The
caller then registers its own (recording) hooks on outputs and inputs, and runs
``backward``, ``torch.autograd.grad`` (with respect to inputs and to outputs),
``backward(inputs=...)``, backward of one output of several, ``retain_graph=True`` twice
and ``retain_grad()`` on outputs; modules hook views of their activations (``q`` of a
chunked ``qkv``), compiled functions are called several times.

Written in round 57 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_view_hooks`` runs each under eager and under each entry point and
compares the recordings.
"""

from __future__ import annotations

import torch
from torch import nn

from blind_fed_outputs_harness import L, W, init_params, registry, tensors

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32


# ---------- pure hooks (the only kind registered inside compiled functions) ----------
def h2(g):
    return g * 2


def h3(g):
    return g * 3


def hclamp(g):
    return g.clamp(-0.5, 0.5)


def hflip(g):
    return g.flip(0)


def hnone(g):
    return None


def hplus(g):
    return None if g is None else g + 1


def h2n(g):
    return None if g is None else g * 2


def h3n(g):
    return None if g is None else g * 3


def hneg(g):
    return -g


def hhalf(g):
    return g * 0.5


# ---------- caller-side helpers ----------
def wsum(o):
    """A weighted sum of the tensors of ``o`` that require grad (0 if none)."""
    tot = 0
    for t in tensors(o):
        if t.requires_grad:
            tot = tot + (t * W(t)).sum()
    return tot


def go(R, cf, args, grads, loss=wsum, pre=""):
    """Call, record the output, backward through ``loss``, record the named grads."""
    out = R.step(pre + "fwd", lambda: cf(*args))
    R.rec(pre + "out", out)
    R.step(pre + "bw", lambda: loss(out).backward())
    for k, t in grads.items():
        R.grad(pre + k, t)
    return out


def init_(m, seed=0):
    return init_params(m, seed)


# =====================================================================
# A. hooks on views of (leaf) inputs
# =====================================================================
@prog()
def slice_ret_view(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v

    x = L(3, 4, seed=1)
    go(R, C(f), (x,), dict(x=x))


@prog()
def slice_ret_computed(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(hflip)
        return v * 2

    x = L(3, 4, seed=2)
    go(R, C(f), (x,), dict(x=x))


@prog()
def slice_ret_sibling_disjoint(C, R):
    def f(x):
        v = x[2:]
        v.register_hook(h2)
        return x[:2] * 3

    x = L(4, 3, seed=4)
    go(R, C(f), (x,), dict(x=x))


@prog()
def slice_ret_sibling_overlap(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return x[:2].sin(), v.cos()

    x = L(3, 4, seed=5)
    go(R, C(f), (x,), dict(x=x))


@prog()
def slice_ret_same_slice_fresh(C, R):
    # a fresh view of the same region is not the hooked tensor
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return x[1:] * 2

    x = L(3, 4, seed=6)
    go(R, C(f), (x,), dict(x=x))


@prog()
def slice_ret_input_and_view(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return x, v

    x = L(3, 4, seed=7)
    go(R, C(f), (x,), dict(x=x))


@prog()
def t_ret_matmul(C, R):
    def f(x, w):
        v = x.t()
        v.register_hook(hflip)
        return v @ w

    x, w = L(3, 4, seed=8), L(3, 2, seed=9)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def view_flat_clamp(C, R):
    def f(x, w):
        v = x.view(12)
        v.register_hook(hclamp)
        return v * w

    x, w = L(3, 4, seed=10), L(12, seed=11)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def unsqueeze_ret_view(C, R):
    def f(x):
        v = x.unsqueeze(0)
        v.register_hook(h2)
        return v

    x = L(3, 4, seed=12)
    go(R, C(f), (x,), dict(x=x))


@prog()
def unsqueeze_ret_expand(C, R):
    def f(x):
        v = x.unsqueeze(0)
        v.register_hook(hflip)
        return v.expand(2, 3, 4) * 1.5

    x = L(3, 4, seed=13)
    go(R, C(f), (x,), dict(x=x))


@prog()
def diagonal_exp(C, R):
    def f(x):
        v = x.diagonal()
        v.register_hook(h3)
        return v.exp(), x.sum()

    x = L(3, 3, seed=14)
    go(R, C(f), (x,), dict(x=x))


@prog()
def expand_times_w(C, R):
    def f(x, w):
        v = x.expand(3, 4)
        v.register_hook(hclamp)
        return v * w

    x, w = L(1, 4, seed=16), L(3, 4, seed=17)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def expand_ret_view(C, R):
    def f(x):
        v = x.expand(3, 4)
        v.register_hook(h2)
        return v

    x = L(4, seed=18)
    go(R, C(f), (x,), dict(x=x))


@prog()
def select_sin(C, R):
    def f(x):
        v = x.select(0, 1)
        v.register_hook(hflip)
        return v.sin()

    x = L(3, 4, seed=19)
    go(R, C(f), (x,), dict(x=x))


@prog()
def select_ret_view_and_other_row(C, R):
    def f(x):
        v = x.select(0, 1)
        v.register_hook(h2)
        return v, x.select(0, 2)

    x = L(3, 4, seed=20)
    go(R, C(f), (x,), dict(x=x))


@prog()
def narrow_cos(C, R):
    def f(x):
        v = x.narrow(1, 1, 2)
        v.register_hook(h2)
        return v.cos()

    x = L(3, 4, seed=21)
    go(R, C(f), (x,), dict(x=x))


@prog()
def as_strided_overlapping(C, R):
    def f(x):
        v = x.as_strided((3, 2), (1, 1))
        v.register_hook(h2)
        return v.sin()

    x = L(6, seed=25)
    go(R, C(f), (x,), dict(x=x))


@prog()
def transpose_f32(C, R):
    def f(x, w):
        v = x.transpose(0, 1)
        v.register_hook(hclamp)
        return (v @ w).tanh()

    x, w = L(3, 4, seed=27, dtype=f32), L(3, 2, seed=28, dtype=f32)
    go(R, C(f), (x, w), dict(x=x, w=w))


# =====================================================================
# B. pieces of multi-output views
# =====================================================================
@prog()
def chunk_hook_a_ret_product(C, R):
    def f(x):
        a, b = x.chunk(2)
        a.register_hook(h2)
        return a * b

    x = L(4, 3, seed=30)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chunk_hook_a_ret_b(C, R):
    def f(x):
        a, b = x.chunk(2)
        a.register_hook(h2n)
        return b * 2

    x = L(4, 3, seed=31)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chunk_hook_both_pieces(C, R):
    def f(x):
        a, b = x.chunk(2)
        a.register_hook(h2)
        b.register_hook(hflip)
        return a + b

    x = L(4, 3, seed=32)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chunk_ret_pieces(C, R):
    def f(x):
        a, b = x.chunk(2, dim=1)
        a.register_hook(h3)
        return a, b

    x = L(3, 4, seed=33)
    go(R, C(f), (x,), dict(x=x))


@prog()
def unbind_hook_row_stack(C, R):
    def f(x, w):
        rows = x.unbind(0)
        rows[1].register_hook(h2)
        return torch.stack(rows) * w

    x, w = L(3, 4, seed=35), L(3, 4, seed=36)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def unbind_ret_rows(C, R):
    def f(x):
        rows = x.unbind(0)
        rows[0].register_hook(hflip)
        return rows

    x = L(3, 4, seed=37)
    go(R, C(f), (x,), dict(x=x))


@prog()
def split_ret_hooked_piece(C, R):
    def f(x):
        _a, b = x.split([1, 3])
        b.register_hook(h2)
        return b

    x = L(4, 2, seed=41)
    go(R, C(f), (x,), dict(x=x))


@prog()
def split_ret_unhooked_piece(C, R):
    # the hook on the unused piece is called with None in eager: h2 raises in backward
    def f(x):
        a, b = x.split([1, 3])
        b.register_hook(h2)
        return a

    x = L(4, 2, seed=42)
    go(R, C(f), (x,), dict(x=x))


@prog()
def tensor_split_cat_reversed(C, R):
    def f(x):
        ps = torch.tensor_split(x, 3, dim=1)
        ps[1].register_hook(hflip)
        return torch.cat(ps[::-1], 1) * 1.0

    x = L(3, 5, seed=43)
    go(R, C(f), (x,), dict(x=x))


@prog()
def tensor_split_indices(C, R):
    def f(x):
        ps = torch.tensor_split(x, [1, 3])
        ps[2].register_hook(h2)
        ps[0].register_hook(h3)
        return ps[2] * ps[0].sum()

    x = L(5, 2, seed=44)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chunk_intermediate(C, R):
    def f(x, w):
        h = x @ w
        a, b = h.chunk(2, dim=1)
        a.register_hook(hflip)
        return a.tanh(), b

    x, w = L(3, 4, seed=45), L(4, 4, seed=46)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def split_intermediate_one_unused(C, R):
    def f(x):
        h = x.exp()
        a, b = h.split(2)
        a.register_hook(h2)
        b.register_hook(hnone)
        return a

    x = L(4, 3, seed=47)
    go(R, C(f), (x,), dict(x=x))


@prog()
def unbind_f32_stack_hooks(C, R):
    def f(x):
        rs = (x * 2).unbind(0)
        rs[0].register_hook(hclamp)
        rs[-1].register_hook(hplus)
        return torch.stack([rs[-1], rs[0]])

    x = L(3, 4, seed=48, dtype=f32)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# C. views of intermediates
# =====================================================================
@prog()
def inter_slice_ret_view(C, R):
    def f(x):
        h = x.tanh()
        v = h[1:]
        v.register_hook(h2)
        return v

    x = L(3, 4, seed=50)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_slice_ret_base(C, R):
    def f(x):
        h = x.tanh()
        v = h[1:]
        v.register_hook(h2)
        return h

    x = L(3, 4, seed=51)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_slice_ret_base_and_view(C, R):
    def f(x):
        h = x.tanh()
        v = h[1:]
        v.register_hook(hflip)
        return h, v

    x = L(3, 4, seed=52)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_diag_and_base(C, R):
    def f(x):
        h = x @ x.t()
        v = h.diagonal()
        v.register_hook(h3)
        return v, h

    x = L(3, 2, seed=55)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_view_of_hooked(C, R):
    def f(x):
        h = x * 2
        v = h[1:]
        v.register_hook(h2)
        return v[0]

    x = L(3, 4, seed=56)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_view_ret_detached(C, R):
    def f(x):
        h = x.sin()
        v = h[1:]
        v.register_hook(h2)
        return v.detach(), h.sum()

    x = L(3, 4, seed=57)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_view_nothing_touches(C, R):
    def f(x):
        h = x.exp()
        v = h[0]
        v.register_hook(h3)
        return x.sin()

    x = L(3, 4, seed=58)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inter_unsqueeze_expand_f32(C, R):
    def f(x):
        h = x.sigmoid()
        v = h.unsqueeze(1).expand(3, 2, 4)
        v.register_hook(hflip)
        return v * 3

    x = L(3, 4, seed=61, dtype=f32)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# D. chains of views
# =====================================================================
@prog()
def chain_t_slice_unsqueeze(C, R):
    def f(x):
        v = x.t()[1:].unsqueeze(0)
        v.register_hook(h2)
        return v

    x = L(3, 4, seed=62)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chain_hook_each_level(C, R):
    def f(x):
        a = x.t()
        a.register_hook(h2)
        b = a[1:]
        b.register_hook(hplus)
        c = b.unsqueeze(0)
        c.register_hook(hflip)
        return c * 1.0

    x = L(3, 4, seed=63)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chain_intermediate_view_strided(C, R):
    def f(x):
        h = x.sin()
        v = h.view(2, 6)[:, ::2]
        v.register_hook(hflip)
        return v.cos()

    x = L(3, 4, seed=64)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chain_ret_middle(C, R):
    def f(x):
        a = x.t()
        b = a[1:]
        c = b.unsqueeze(0)
        c.register_hook(h2)
        return b

    x = L(3, 4, seed=65)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# E. hooks on the inputs themselves
# =====================================================================
@prog()
def nonleaf_input_hook(C, R):
    def f(x):
        x.register_hook(h2)
        return x * 3

    leaf = L(3, 4, seed=70)
    x = leaf * 1
    go(R, C(f), (x,), dict(leaf=leaf, x=x))


@prog()
def nonleaf_input_clone_hook_view(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(hflip)
        return v

    leaf = L(3, 4, seed=71)
    x = leaf.clone()
    go(R, C(f), (x,), dict(leaf=leaf, x=x))


@prog()
def nonleaf_input_hook_return_input(C, R):
    def f(x):
        x.register_hook(h2)
        return x

    leaf = L(3, 4, seed=72)
    x = leaf * 1
    go(R, C(f), (x,), dict(leaf=leaf, x=x))


@prog()
def leaf_input_hook(C, R):
    def f(x):
        x.register_hook(h2)
        return x.sin()

    x = L(3, 4, seed=73)
    go(R, C(f), (x,), dict(x=x))


@prog()
def leaf_input_hook_called_twice(C, R):
    def f(x):
        x.register_hook(h2)
        return x.sin()

    x = L(3, 4, seed=74)
    cf = C(f)
    y1 = R.step("fwd1", lambda: cf(x))
    y2 = R.step("fwd2", lambda: cf(x))
    R.step("bw", lambda: (wsum(y1) + wsum(y2)).backward())
    R.grad("x", x)


@prog()
def leaf_input_hook_persists_after_call(C, R):
    # the hook registered inside the call stays on the leaf for later, outside use
    def f(x):
        x.register_hook(hclamp)
        return x * 2

    x = L(3, 4, seed=77)
    go(R, C(f), (x,), dict(x=x))
    R.step("outside_bw", lambda: (x * W(x)).sum().backward())
    R.grad("x_after_outside", x)


@prog()
def nonleaf_input_caller_hook_before(C, R):
    def f(x):
        x.register_hook(h2)
        return x.tanh()

    leaf = L(3, 4, seed=78)
    x = leaf * 1
    x.register_hook(R.hook("x_before"))
    out = go(R, C(f), (x,), dict(leaf=leaf))
    del out


@prog()
def nonleaf_input_caller_hook_after(C, R):
    def f(x):
        x.register_hook(h2)
        return x.tanh()

    leaf = L(3, 4, seed=79)
    x = leaf * 1
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    x.register_hook(R.hook("x_after"))
    R.rec("out", y)
    R.step("bw", lambda: wsum(y).backward())
    R.grad("leaf", leaf)


@prog()
def nonleaf_input_hook_and_view_hook(C, R):
    def f(x):
        x.register_hook(hplus)
        v = x[:, 1:]
        v.register_hook(h2)
        return v.sin(), x.cos()

    leaf = L(3, 4, seed=80)
    x = leaf.clone()
    go(R, C(f), (x,), dict(leaf=leaf))


@prog()
def leaf_input_hook_f32_and_nograd_input(C, R):
    def f(x, c):
        x.register_hook(hflip)
        return x * c

    x, c = L(3, 4, seed=81, dtype=f32), L(3, 4, seed=82, dtype=f32, rg=False)
    go(R, C(f), (x, c), dict(x=x, c=c))


# =====================================================================
# F. hooks on outputs before returning them
# =====================================================================
@prog()
def out_hook_plus(C, R):
    def f(x):
        y = x * 2
        y.register_hook(hplus)
        return y

    x = L(3, 4, seed=90)
    go(R, C(f), (x,), dict(x=x))


@prog()
def out_hook_view_output(C, R):
    def f(x, w):
        y = (x @ w)[0]
        y.register_hook(h2)
        return y

    x, w = L(3, 4, seed=91), L(4, 2, seed=92)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def out_hook_then_caller_hook(C, R):
    def f(x):
        y = x.exp()
        y.register_hook(h2)
        return y

    x = L(3, 4, seed=93)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    y.register_hook(R.hook("y"))
    x.register_hook(R.hook("x"))
    R.step("bw", lambda: wsum(y).backward())
    R.grad("x", x)


@prog()
def out_hook_retain_grad(C, R):
    def f(x):
        y = x.sin()
        y.register_hook(h3)
        return y

    x = L(3, 4, seed=94)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    y.retain_grad()
    R.step("bw", lambda: wsum(y).backward())
    R.grad("y", y)
    R.grad("x", x)


@prog()
def out_hook_backward_other_output(C, R):
    def f(x):
        h = x.tanh()
        y1 = h * 2
        y1.register_hook(h2)
        y2 = h.sum(0)
        return y1, y2

    x = L(3, 4, seed=95)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    R.step("bw", lambda: wsum(o[1]).backward())
    R.grad("x", x)


@prog()
def out_hook_scalar(C, R):
    def f(x):
        s = (x * x).sum()
        s.register_hook(h2)
        return s

    x = L(3, 4, seed=97)
    go(R, C(f), (x,), dict(x=x))


@prog()
def out_hook_on_view_of_output_returned_both(C, R):
    def f(x):
        y = x * 1.5
        v = y[1]
        v.register_hook(hflip)
        y.register_hook(hplus)
        return y, v

    x = L(3, 4, seed=98)
    go(R, C(f), (x,), dict(x=x))


@prog()
def out_hook_f32_chunk_outputs(C, R):
    def f(x):
        a, b = (x * 2).chunk(2, -1)
        a.register_hook(hclamp)
        b.register_hook(hflip)
        return a, b

    x = L(3, 4, seed=99, dtype=f32)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# G. several hooks: order, view and base
# =====================================================================
@prog()
def two_hooks_scale_then_plus(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        v.register_hook(hplus)
        return v * v

    x = L(3, 4, seed=100)
    go(R, C(f), (x,), dict(x=x))


@prog()
def two_hooks_plus_then_scale(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(hplus)
        v.register_hook(h2)
        return v * v

    x = L(3, 4, seed=101)
    go(R, C(f), (x,), dict(x=x))


@prog()
def three_hooks_none_in_middle(C, R):
    def f(x):
        v = x.t()
        v.register_hook(h2)
        v.register_hook(hnone)
        v.register_hook(hflip)
        return v.sin()

    x = L(3, 4, seed=102)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hooks_view_and_base_ret_both(C, R):
    def f(x):
        h = x * 1.5
        v = h[1:]
        v.register_hook(h2)
        h.register_hook(hplus)
        return v.sin(), h.cos()

    x = L(3, 4, seed=103)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hooks_base_then_view_ret_view(C, R):
    def f(x):
        h = x.exp()
        h.register_hook(hflip)
        v = h[:, :2]
        v.register_hook(h3)
        return v

    x = L(3, 4, seed=104)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hooks_on_input_view_and_input_leaf(C, R):
    def f(x):
        v = x.diagonal()
        v.register_hook(h2)
        x.register_hook(hclamp)
        return v * x.sum()

    x = L(3, 3, seed=105)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hook_view_caller_hooks_input(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v.exp()

    x = L(3, 4, seed=107)
    x.register_hook(R.hook("x"))
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    y.register_hook(R.hook("y"))
    R.step("bw", lambda: wsum(y).backward())
    R.grad("x", x)


@prog()
def many_hooks_same_view_f32(C, R):
    def f(x):
        v = x.view(2, 6)
        v.register_hook(hflip)
        v.register_hook(h2)
        v.register_hook(hclamp)
        v.register_hook(hneg)
        return v.tanh()

    x = L(3, 4, seed=108, dtype=f32)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# H. in-place writes after the hook registration
# =====================================================================
@prog()
def nograd_mul_view_of_saved(C, R):
    # exp saves its result; the no_grad write makes backward raise in eager
    def f(x):
        h = x.exp()
        v = h[1:]
        v.register_hook(h2)
        with torch.no_grad():
            v.mul_(2)
        return v

    x = L(3, 4, seed=110)
    go(R, C(f), (x,), dict(x=x))


@prog()
def nograd_mul_view_unsaved(C, R):
    def f(x):
        h = x + 1
        v = h[1:]
        v.register_hook(h2)
        with torch.no_grad():
            v.mul_(2)
        return v * 3

    x = L(3, 4, seed=111)
    go(R, C(f), (x,), dict(x=x))


@prog()
def grad_mul_view_ret_view(C, R):
    def f(x):
        h = x + 1
        v = h[1:]
        v.register_hook(h2)
        v.mul_(2)
        return v

    x = L(3, 4, seed=112)
    go(R, C(f), (x,), dict(x=x))


@prog()
def write_base_after_hooked_view(C, R):
    def f(x):
        h = x + 1
        v = h[:2]
        v.register_hook(h2)
        h.mul_(3)
        return v

    x = L(3, 4, seed=114)
    go(R, C(f), (x,), dict(x=x))


@prog()
def write_base_other_region(C, R):
    def f(x, w):
        h = x * 1.0
        v = h[:2]
        v.register_hook(h3)
        h[2].add_(w)
        return h, v.sin()

    x, w = L(3, 4, seed=115), L(4, seed=116)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def leaf_view_inplace_raises(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        v.mul_(2)
        return v

    x = L(3, 4, seed=117)
    go(R, C(f), (x,), dict(x=x))
    R.rec("x_after", x)


@prog()
def leaf_view_nograd_inplace(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        with torch.no_grad():
            v.mul_(2)
        return v * 3

    x = L(3, 4, seed=118)
    go(R, C(f), (x,), dict(x=x))
    R.rec("x_after", x)


@prog()
def nonleaf_input_view_inplace_ret_input(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        v.mul_(2)
        return x

    leaf = L(3, 4, seed=119)
    x = leaf * 1
    go(R, C(f), (x,), dict(leaf=leaf))
    R.rec("x_after", x)


@prog()
def hooked_then_inplace_itself(C, R):
    def f(x):
        h = x + 1
        h.register_hook(h2)
        h.mul_(2)
        return h

    x = L(3, 4, seed=120)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hooked_view_inplace_sin_saved(C, R):
    # sin_ on a view whose base is needed by nothing: backward fine in eager
    def f(x):
        h = x * 2
        v = h.t()
        v.register_hook(hflip)
        v.sin_()
        return h

    x = L(3, 4, seed=121)
    go(R, C(f), (x,), dict(x=x))


@prog()
def chunk_piece_inplace_after_hook(C, R):
    # in-place on a piece of chunk (a multi-output view) raises in eager
    def f(x):
        h = x * 2
        a, b = h.chunk(2)
        a.register_hook(h2)
        a.mul_(2)
        return a, b

    x = L(4, 3, seed=122)
    go(R, C(f), (x,), dict(x=x))


@prog()
def inplace_hook_view_then_hook_again(C, R):
    def f(x):
        h = x + 0.5
        v = h[1:]
        v.register_hook(h2)
        v.add_(1)
        v.register_hook(hplus)
        return v * 1.0

    x = L(3, 4, seed=123)
    go(R, C(f), (x,), dict(x=x))


# =====================================================================
# I. caller-side variety
# =====================================================================
def _hooked_pair(x, w):
    h = x @ w
    v = h[:, 1:]
    v.register_hook(hflip)
    return v.tanh(), h.sum(1)


@prog()
def caller_autograd_grad_inputs(C, R):
    x, w = L(3, 4, seed=130), L(4, 3, seed=131)
    cf = C(_hooked_pair)
    o = R.step("fwd", lambda: cf(x, w))
    R.rec("out", o)
    R.step("g", lambda: ag.grad(wsum(o), [x, w]))
    R.grad("x", x)


@prog()
def caller_autograd_grad_wrt_output(C, R):
    def f(x):
        y = x * 2
        y.register_hook(h3)
        return y

    x = L(3, 4, seed=132)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    R.step("g", lambda: ag.grad((y.sin() * W(y)).sum(), y))
    R.grad("x", x)


@prog()
def caller_autograd_grad_wrt_hooked_view_output(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v, v.exp()

    x = L(3, 4, seed=133)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    R.step("g", lambda: ag.grad(wsum(o[1]), [o[0], x]))


@prog()
def caller_backward_inputs_w_only(C, R):
    x, w = L(3, 4, seed=136), L(4, 3, seed=137)
    cf = C(_hooked_pair)
    o = R.step("fwd", lambda: cf(x, w))
    R.step("bw", lambda: wsum(o).backward(inputs=[w]))
    R.grad("x", x)
    R.grad("w", w)


@prog()
def caller_backward_inputs_output(C, R):
    def f(x):
        y = x.sin()
        v = y[1:]
        v.register_hook(h2)
        return y, v * 2

    x = L(3, 4, seed=140)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    R.step("bw", lambda: wsum(o[1]).backward(inputs=[o[0]]))
    R.grad("y", o[0])
    R.grad("x", x)


@prog()
def caller_backward_one_of_two_hooked(C, R):
    def f(x):
        a, b = x.chunk(2)
        a.register_hook(h2n)
        b.register_hook(h3n)
        return a.exp(), b.exp()

    x = L(4, 3, seed=141)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    R.step("bw0", lambda: wsum(o[0]).backward())
    R.grad("x0", x)
    R.step("bw1", lambda: wsum(o[1]).backward())
    R.grad("x1", x)


@prog()
def caller_retain_graph_twice(C, R):
    def f(x):
        v = x.t()
        v.register_hook(hflip)
        return v.exp()

    x = L(3, 4, seed=142)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    y.register_hook(R.hook("y"))
    R.step("bw1", lambda: wsum(y).backward(retain_graph=True))
    R.grad("x1", x)
    R.step("bw2", lambda: wsum(y).backward(retain_graph=True))
    R.grad("x2", x)
    R.step("bw3", lambda: wsum(y).backward())
    R.grad("x3", x)


@prog()
def caller_second_backward_without_retain(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v.exp()

    x = L(3, 4, seed=143)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    R.step("bw1", lambda: wsum(y).backward())
    R.step("bw2", lambda: wsum(y).backward())
    R.grad("x", x)


@prog()
def caller_retain_grad_on_view_outputs(C, R):
    def f(x):
        a, b = x.chunk(2, dim=1)
        a.register_hook(h2)
        return a, b, a * b

    x = L(3, 4, seed=144)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    for t in o:
        t.retain_grad()
    R.step("bw", lambda: wsum(o[2]).backward())
    R.grad("a", o[0])
    R.grad("b", o[1])
    R.grad("ab", o[2])
    R.grad("x", x)


@prog()
def caller_hooks_on_all_outputs_and_inputs(C, R):
    def f(x, w):
        v = x[:, :2]
        v.register_hook(hclamp)
        y = v @ w
        y.register_hook(h2)
        return y, v

    x, w = L(3, 4, seed=145), L(2, 3, seed=146)
    x.register_hook(R.hook("x"))
    w.register_hook(R.hook("w"))
    cf = C(f)
    o = R.step("fwd", lambda: cf(x, w))
    o[0].register_hook(R.hook("y"))
    o[1].register_hook(R.hook("v", lambda g: g * 10))
    R.step("bw", lambda: wsum(o).backward())
    R.grad("x", x)
    R.grad("w", w)


@prog()
def caller_called_three_times(C, R):
    def f(x, w):
        v = x.t()
        v.register_hook(h2)
        return v @ w

    x, w = L(3, 4, seed=147), L(3, 2, seed=148)
    cf = C(f)
    for i in range(3):
        go(R, cf, (x, w), dict(x=x, w=w), pre=f"c{i}.")


@prog()
def caller_called_twice_backward_together(C, R):
    def f(x):
        v = x.diagonal()
        v.register_hook(h3)
        return v.sin()

    x = L(3, 3, seed=151)
    cf = C(f)
    y1 = R.step("fwd1", lambda: cf(x))
    y2 = R.step("fwd2", lambda: cf(x * 2))
    R.step("bw", lambda: (wsum(y1) + wsum(y2)).backward())
    R.grad("x", x)


@prog()
def caller_nonleaf_input_grad_wrt_nonleaf(C, R):
    def f(x):
        v = x.view(4, 3)
        v.register_hook(h2)
        return v.exp()

    leaf = L(3, 4, seed=152)
    x = leaf * 1
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    R.step("g", lambda: ag.grad(wsum(y), x))
    R.grad("leaf", leaf)


@prog()
def caller_autograd_grad_retain_then_backward(C, R):
    def f(x):
        v = x.narrow(1, 0, 2)
        v.register_hook(hflip)
        return v * v

    x = L(3, 4, seed=153)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x))
    R.step("g", lambda: ag.grad(wsum(y), x, retain_graph=True))
    R.step("bw", lambda: wsum(y).backward())
    R.grad("x", x)


@prog()
def caller_grad_output_hook_detached_output(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v.detach(), v * 2

    x = L(3, 4, seed=154)
    cf = C(f)
    o = R.step("fwd", lambda: cf(x))
    R.rec("out", o)
    R.step("hook_detached", lambda: o[0].register_hook(hnone))
    R.step("bw", lambda: wsum(o).backward())
    R.grad("x", x)


@prog()
def caller_f32_backward_inputs_and_hooks(C, R):
    def f(x, w):
        q, k = (x @ w).chunk(2, -1)
        q.register_hook(hhalf)
        return (q * k).sum(-1)

    x, w = L(3, 4, seed=155, dtype=f32), L(4, 4, seed=156, dtype=f32)
    cf = C(f)
    y = R.step("fwd", lambda: cf(x, w))
    w.register_hook(R.hook("w"))
    R.step("bw", lambda: wsum(y).backward(inputs=[x, w]))
    R.grad("x", x)
    R.grad("w", w)


# =====================================================================
# J. modules hooking views of their activations
# =====================================================================
class AttnQ(nn.Module):
    def __init__(self, d=4, dtype=f64, hook_k=False):
        super().__init__()
        self.lin = nn.Linear(d, 3 * d, dtype=dtype)
        self.hook_k = hook_k

    def forward(self, x):
        q, k, v = self.lin(x).chunk(3, -1)
        q.register_hook(hhalf)
        if self.hook_k:
            k.register_hook(hflip)
            v.register_hook(hclamp)
        a = (q @ k.transpose(-1, -2) / 2).softmax(-1)
        return a @ v


@prog()
def module_attn_hook_q(C, R):
    m = init_(AttnQ())
    cf = C(m)
    x = L(3, 4, seed=160)
    go(R, cf, (x,), dict(x=x, wt=m.lin.weight, b=m.lin.bias))


@prog()
def module_attn_hook_qkv(C, R):
    m = init_(AttnQ(hook_k=True), seed=1)
    cf = C(m)
    x = L(2, 3, 4, seed=161)
    go(R, cf, (x,), dict(x=x, wt=m.lin.weight, b=m.lin.bias))


@prog()
def module_attn_f32_input_no_grad(C, R):
    m = init_(AttnQ(dtype=f32), seed=2)
    cf = C(m)
    x = L(3, 4, seed=162, dtype=f32, rg=False)
    go(R, cf, (x,), dict(wt=m.lin.weight, b=m.lin.bias))


@prog()
def module_attn_called_twice(C, R):
    m = init_(AttnQ(), seed=3)
    cf = C(m)
    x1, x2 = L(3, 4, seed=163), L(3, 4, seed=164)
    y1 = R.step("fwd1", lambda: cf(x1))
    y2 = R.step("fwd2", lambda: cf(x2))
    R.step("bw", lambda: (wsum(y1) - wsum(y2)).backward())
    R.grad("wt", m.lin.weight)
    R.grad("x1", x1)
    R.grad("x2", x2)


class SliceHookNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 6, dtype=f64)
        self.b = nn.Linear(3, 2, dtype=f64)

    def forward(self, x):
        h = self.a(x).tanh()
        lo, hi = h.split([2, 4], -1)
        hi.register_hook(hflip)
        lo.register_hook(h2)
        return self.b(hi[..., 1:]) + lo, hi


@prog()
def module_split_hooks_return_activation(C, R):
    m = init_(SliceHookNet(), seed=4)
    cf = C(m)
    x = L(4, 3, seed=165)
    o = R.step("fwd", lambda: cf(x))
    R.rec("out", o)
    o[1].register_hook(R.hook("hi"))
    R.step("bw", lambda: wsum(o).backward())
    R.grad("x", x)
    R.grad("aw", m.a.weight)
    R.grad("bw", m.b.weight)


@prog()
def module_split_hooks_grad_wrt_activation(C, R):
    m = init_(SliceHookNet(), seed=5)
    cf = C(m)
    x = L(4, 3, seed=166)
    o = R.step("fwd", lambda: cf(x))
    R.step("g", lambda: ag.grad(wsum(o[0]), [o[1], m.a.weight]))


class WeightViewHook(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(4, 3, dtype=f64))

    def forward(self, x):
        wt = self.w.t()
        wt.register_hook(h2)
        row = self.w[0]
        row.register_hook(hflip)
        return x @ self.w + row


@prog()
def module_hooks_on_parameter_views(C, R):
    m = init_(WeightViewHook(), seed=6)
    cf = C(m)
    x = L(2, 4, seed=167)
    go(R, cf, (x,), dict(x=x, w=m.w))


class InputViewHook(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 2, dtype=f64)

    def forward(self, x):
        v = x[:, 1:]
        v.register_hook(h3)
        return self.lin(x) + v.sum(-1, keepdim=True)


@prog()
def module_input_view_hook(C, R):
    m = init_(InputViewHook(), seed=7)
    cf = C(m)
    x = L(3, 4, seed=168)
    go(R, cf, (x,), dict(x=x, wt=m.lin.weight))


@prog()
def module_input_view_hook_no_grad_input(C, R):
    # x does not require grad: register_hook raises in eager
    m = init_(InputViewHook(), seed=8)
    cf = C(m)
    x = L(3, 4, seed=169, rg=False)
    go(R, cf, (x,), dict(wt=m.lin.weight))


class UnbindMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4, dtype=f32)
        self.l2 = nn.Linear(4, 2, dtype=f32)

    def forward(self, x):
        h = self.l1(x).relu()
        rows = h.unbind(0)
        rows[0].register_hook(hclamp)
        rows[1].register_hook(h2)
        return self.l2(torch.stack(rows))


@prog()
def module_f32_unbind_hooks(C, R):
    m = init_(UnbindMLP(), seed=9)
    cf = C(m)
    x = L(3, 3, seed=170, dtype=f32)
    go(R, cf, (x,), dict(x=x, w1=m.l1.weight, w2=m.l2.weight))


@prog()
def module_f32_unbind_called_twice_retain(C, R):
    m = init_(UnbindMLP(), seed=10)
    cf = C(m)
    x = L(3, 3, seed=171, dtype=f32)
    y = R.step("fwd1", lambda: cf(x))
    R.step("bw1", lambda: wsum(y).backward(retain_graph=True))
    R.step("bw1b", lambda: wsum(y).backward())
    R.grad("w1", m.l1.weight)
    y2 = R.step("fwd2", lambda: cf(x * 0.5))
    R.step("bw2", lambda: wsum(y2).backward())
    R.grad("w1_2", m.l1.weight)
    R.grad("x", x)


class OutputHookModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 4, dtype=f64)

    def forward(self, x):
        y = self.lin(x)
        out = y.view(-1)
        out.register_hook(hplus)
        return out


@prog()
def module_output_view_hook(C, R):
    m = init_(OutputHookModule(), seed=11)
    cf = C(m)
    x = L(2, 3, seed=172)
    o = R.step("fwd", lambda: cf(x))
    R.rec("out", o)
    o.retain_grad()
    o.register_hook(R.hook("out"))
    R.step("bw", lambda: wsum(o).backward())
    R.grad("o", o)
    R.grad("x", x)
    R.grad("wt", m.lin.weight)


# =====================================================================
# K. inputs not requiring grad, mixed
# =====================================================================
@prog()
def nograd_input_hook_on_product_view(C, R):
    def f(x, w):
        h = x @ w
        v = h[1:]
        v.register_hook(h2)
        return v

    x, w = L(3, 4, seed=180, rg=False), L(4, 2, seed=181)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def nograd_input_hook_on_its_view_raises(C, R):
    def f(x, w):
        v = x[1:]
        v.register_hook(h2)
        return v @ w

    x, w = L(3, 4, seed=182, rg=False), L(4, 2, seed=183)
    go(R, C(f), (x, w), dict(x=x, w=w))


@prog()
def no_grad_mode_call_hook_on_view(C, R):
    def f(x):
        v = x[0]
        v.register_hook(h2)
        return v * 2

    x = L(3, 4, seed=187)
    cf = C(f)

    def call():
        with torch.no_grad():
            return cf(x)

    R.step("fwd", call)


@prog()
def nonleaf_and_nograd_inputs_mixed(C, R):
    def f(a, b, c):
        va = a[:, 1:]
        va.register_hook(h2)
        vb = b.t()
        vb.register_hook(hclamp)
        return va * c[:, 1:], vb.sum(0)

    la = L(3, 4, seed=188)
    a = la * 1
    b = L(4, 3, seed=189)
    c = L(3, 4, seed=190, rg=False)
    go(R, C(f), (a, b, c), dict(la=la, b=b, c=c))


# =====================================================================
# L. detached things and hooks that matter to nothing
# =====================================================================
@prog()
def detached_only_and_plain(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(h2)
        return v.detach() * 2, x.sum()

    x = L(3, 4, seed=191)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hook_plus_on_sliced_zero_grad_region(C, R):
    # the hooked view is used only partly: its gradient has zeros where unused
    def f(x):
        v = x[1:]
        v.register_hook(hplus)
        return v[0] * 2

    x = L(3, 4, seed=194)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hook_changes_layout(C, R):
    def f(x):
        v = x.t()
        v.register_hook(lambda g: g.t().contiguous().t() * 2)
        return v.exp()

    x = L(3, 4, seed=195)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hook_returns_wrong_shape_raises(C, R):
    def f(x):
        v = x[1:]
        v.register_hook(lambda g: g.sum(0))
        return v.exp()

    x = L(3, 4, seed=196)
    go(R, C(f), (x,), dict(x=x))


@prog()
def hook_on_expand_of_one_element_input(C, R):
    def f(s, w):
        v = s.expand(3)
        v.register_hook(hflip)
        return v * w

    s, w = L(1, seed=197), L(3, seed=198)
    go(R, C(f), (s, w), dict(s=s, w=w))


@prog()
def hook_on_view_and_sibling_both_used(C, R):
    def f(x):
        a = x[:2]
        b = x[1:]
        a.register_hook(h2)
        b.register_hook(hflip)
        return a.sum(0) * b.sum(0)

    x = L(3, 4, seed=203)
    go(R, C(f), (x,), dict(x=x))
