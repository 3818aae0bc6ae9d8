"""Blind programs: outputs written into inputs. A compiled function or module returns an
intermediate ``t`` and also writes a value computed from ``t`` into one of its inputs in
place (``x += t``, ``x.add_(t * 2)``, ``x.copy_(t.sin())``, ``x[0] = t[0]``,
``x.mul_(t)``, slices, views of the input, views of a caller's base, the same input passed
twice, two outputs fed into one input, a chain ``t -> u -> x``, writes under
``torch.no_grad``, inputs that do not require grad until written, modules with
parameters); the caller then observes the gradient at ``t`` or at the written input:
``autograd.grad(x.sum(), t)``, ``retain_grad``, hooks registered after the call,
``backward(inputs=[t])``, losses reading ``x`` after the call, ``retain_graph=True`` with
a second backward, ``create_graph=True`` through ``t``.

Written in round 62 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_fed_written`` runs each under eager and under each entry point and
compares the recordings.
"""

from __future__ import annotations

import torch
from torch import nn

from blind_fed_outputs_harness import L, W, init_params, registry

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32


def init_(m, seed=0):
    return init_params(m, seed, offset=620)


def cnt(R, tag):
    return len(R.hooks.get(tag, []))


def tw(x, w):
    """An intermediate from ``x`` and ``w`` that saves neither (``tanh`` saves its
    result), so writing ``x`` afterwards leaves eager's backward valid."""
    return (x * 2 + w).tanh()


def mk(*shape, dtype=f64, seed=1):
    """``(leaf, x, w)``: a leaf, its clone (the input to write) and a weight leaf."""
    leaf = L(*shape, seed=seed, dtype=dtype)
    return leaf, leaf.clone(), L(*shape, seed=seed + 1, dtype=dtype)


def grads(R, **ts):
    for k, t in ts.items():
        R.grad(k, t)


# =====================================================================
# basic writes, observed by autograd.grad
# =====================================================================


def retained_t(C, R, f, n, m):
    """The common caller: ``f(x, w)`` compiled, ``x`` recorded, ``t``'s gradient
    retained, the backward of a weighted sum of the written ``x``, the gradients."""
    g = C(f)
    leaf, x, w = mk(n, m)
    t = g(x, w)
    R.rec("x", x)
    t.retain_grad()
    (x * W(x)).sum().backward()
    grads(R, t=t, leaf=leaf, w=w)


@prog(inductor=True)
def iadd_grad_wrt_t(C, R):
    def f(x, w):
        t = tw(x, w)
        x += t
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("t", t)
    R.rec("x", x)
    R.step("g_t", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("g_both", lambda: ag.grad([x.sum(), t.sum()], [t, leaf, w]))


@prog()
def iadd_grad_wrt_t_f32(C, R):
    def f(x, w):
        t = tw(x, w)
        x += t
        return t

    g = C(f)
    leaf, x, w = mk(3, 2, dtype=f32)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad([(x * W(x)).sum(), t.sum()], [t, leaf, w]))


@prog()
def add_scaled_retain_grad(C, R):
    def f(x, w):
        t = (w * 3).sin()
        x.add_(t * 2)
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    t.retain_grad()
    (x * 3).sum().backward()
    grads(R, t=t, leaf=leaf, w=w)
    R.rec("x", x)


@prog()
def copy_sin_hook(C, R):
    def f(x, w):
        t = tw(x, w)
        x.copy_(t.sin())
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t"))
    (x * W(x)).sum().backward()
    R.rec("ncalls", cnt(R, "t"))
    grads(R, leaf=leaf, w=w)


@prog()
def setitem_row_retain_grad(C, R):
    def f(x, w):
        t = tw(x, w)
        x[0] = t[0]
        return t

    retained_t(C, R, f, 3, 2)


@prog()
def mul_inplace_grad_all(C, R):
    def f(x, w):
        t = (w * 2).exp()
        x.mul_(t)
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t, leaf, w]))


@prog()
def slice_add_backward_twice(C, R):
    def f(x, w):
        t = tw(x, w)
        x[:, 1:].add_(t[:, 1:])
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t"))
    loss = (x * W(x)).sum()
    R.step("bw1", lambda: loss.backward(retain_graph=True))
    grads(R, leaf1=leaf)
    R.step("bw2", lambda: loss.backward())
    grads(R, leaf2=leaf, w=w)
    R.rec("ncalls", cnt(R, "t"))


@prog()
def view_write_backward_inputs_t(C, R):
    def f(x, w):
        t = tw(x, w)
        v = x.view(-1)
        v.add_(t.view(-1) * 0.5)
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    R.step("bw", lambda: (x * x).sum().backward(inputs=[t]))
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def transpose_view_mul_hook_scales(C, R):
    def f(x, w):
        t = (w - 1).sigmoid()
        x.t().mul_(t.t())
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t", lambda gr: gr * 2))
    (x * W(x)).sum().backward()
    grads(R, leaf=leaf, w=w)


@prog()
def index_add_rows(C, R):
    def f(x, w):
        t = tw(x, w)
        idx = torch.tensor([2, 0])
        x.index_add_(0, idx, t[:2] * 3)
        return t

    g = C(f)
    leaf, x, w = mk(3, 2)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad([(x * W(x)).sum(), t.sum()], [t, leaf, w]))


@prog()
def where_copy(C, R):
    def f(x, w):
        t = (w * 1.5).cos()
        x.copy_(torch.where(x > 0, t, x * 0.5))
        return t

    retained_t(C, R, f, 3, 3)


@prog()
def add_then_relu_(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t).relu_()
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t, leaf, w]))


@prog()
def sub_into_mul_nonleaf(C, R):
    def f(x, w):
        t = (w**2).sin()
        x.sub_(t, alpha=2)
        return t

    g = C(f)
    leaf = L(2, 3, seed=1)
    x = leaf * 1.5
    w = L(2, 3, seed=2)
    t = g(x, w)
    R.rec("x", x)
    t.retain_grad()
    (x * x).sum().backward()
    grads(R, t=t, leaf=leaf, w=w)


# =====================================================================
# inputs that do not require grad until written
# =====================================================================
@prog(inductor=True)
def plain_input_gets_grad(C, R):
    def f(x, w):
        t = w.exp()
        x += t
        return t

    g = C(f)
    x = torch.zeros(2, 3, dtype=f64)
    w = L(2, 3, seed=2)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad(x.sum(), [t, w], retain_graph=True))
    R.step("g_x", lambda: ag.grad((x * 2).sum(), x))


@prog()
def plain_input_copy_hook(C, R):
    def f(x, w):
        t = (w * 0.5).tanh()
        x.copy_(t * 3)
        return t

    g = C(f)
    x = L(3, seed=1, rg=False)
    w = L(3, seed=2)
    t = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t"))
    (x * 3).sum().backward()
    R.grad("w", w)
    R.grad("x", x)


@prog()
def plain_input_setitem_f32(C, R):
    def f(x, w):
        t = (w + 1).exp()
        x[1] = t[1]
        return t

    g = C(f)
    x = L(2, 3, seed=1, dtype=f32, rg=False)
    w = L(2, 3, seed=2, dtype=f32)
    t = g(x, w)
    R.rec("x", x)
    t.retain_grad()
    (x * W(x)).sum().backward()
    grads(R, t=t, w=w)


@prog()
def plain_view_of_plain_base(C, R):
    def f(x, w):
        t = w.sin()
        x.add_(t)
        return t

    g = C(f)
    b = torch.zeros(3, 2, dtype=f64)
    x = b[1]
    w = L(2, seed=2)
    t = g(x, w)
    R.rec("b", b)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((b * W(b)).sum(), [t, w]))


@prog()
def plain_input_mul_grad_t_none(C, R):
    def f(x, w):
        t = w.cos()
        x.mul_(t)
        return t

    g = C(f)
    x = L(2, 2, seed=1, rg=False)
    w = L(2, 2, seed=2)
    t = g(x, w)
    R.rec("x", x)
    R.step("bw", lambda: x.sum().backward(inputs=[t]))
    R.grad("t", t)
    R.grad("w", w)


# =====================================================================
# views of a caller's base
# =====================================================================
@prog(inductor=True)
def base_row_view_written(C, R):
    def f(x, w):
        t = tw(x, w)
        x += t
        return t

    g = C(f)
    leaf = L(3, 2, seed=1)
    b = leaf.clone()
    x = b[1]
    w = L(2, seed=2)
    t = g(x, w)
    R.rec("b", b)
    R.rec("x", x)
    R.step("g", lambda: ag.grad([(b * W(b)).sum(), t.sum()], [t, leaf, w]))


@prog()
def base_column_view_mul_hook(C, R):
    def f(x, w):
        t = (w * 2).exp()
        x.mul_(t)
        return t

    g = C(f)
    leaf = L(3, 3, seed=1)
    b = leaf.clone()
    x = b[:, 0]
    w = L(3, seed=2)
    t = g(x, w)
    R.rec("b", b)
    t.register_hook(R.hook("t"))
    (b * W(b)).sum().backward()
    grads(R, leaf=leaf, w=w)


@prog()
def base_view_retain_grad_on_base(C, R):
    def f(x, w):
        t = tw(x, w)
        x.copy_(t * t)
        return t

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    x = b[0]
    w = L(3, seed=2)
    t = g(x, w)
    b.retain_grad()
    t.retain_grad()
    (b * W(b)).sum().backward()
    grads(R, b=b, t=t, leaf=leaf, w=w)


@prog()
def base_view_read_via_view(C, R):
    def f(x, w):
        t = (w + 0.3).sin()
        x[1:] = t[1:] * 2
        return t

    g = C(f)
    leaf = L(2, 4, seed=1)
    b = leaf.clone()
    x = b[1]
    w = L(4, seed=2)
    t = g(x, w)
    R.rec("x", x)
    R.step("g_view", lambda: ag.grad((x * W(x)).sum(), [t, leaf], retain_graph=True))
    R.step("g_base", lambda: ag.grad(b.sum(), [t, w]))


@prog()
def base_and_view_both_passed(C, R):
    def f(base, x, w):
        t = (w * 3).tanh()
        x.add_(t)
        return t, base.sum(0)

    g = C(f)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    w = L(3, seed=2)
    t, s = g(b, b[0], w)
    R.rec("s", s)
    R.rec("b", b)
    R.step("g", lambda: ag.grad([s.sum(), (b * W(b)).sum()], [t, leaf, w]))


@prog()
def view_returned_from_inside(C, R):
    def f(x, w):
        t = tw(x, w)
        v = x[0]
        v.add_(t[0])
        return v, t

    g = C(f)
    leaf, x, w = mk(2, 3)
    v, t = g(x, w)
    R.rec("v", v)
    R.rec("v_base_is_x", v._base is x)
    R.rec("x", x)
    R.step("g", lambda: ag.grad([v.sum(), (x * W(x)).sum()], [t, leaf, w]))


# =====================================================================
# the same input twice, written input returned, several writes
# =====================================================================
@prog()
def same_input_twice_read_alias(C, R):
    def f(a, c, w):
        t = (w * 2).sin()
        a.add_(t)
        y = c * 2
        return t, y

    g = C(f)
    leaf, x, w = mk(2, 2)
    t, y = g(x, x, w)
    R.rec("y", y)
    R.rec("x", x)
    R.step("g", lambda: ag.grad(y.sum(), [t, leaf, w]))


@prog()
def same_input_twice_both_written(C, R):
    def f(a, c, w):
        t1 = (w * 2).sin()
        a.add_(t1)
        t2 = (w + 1).exp()
        c.mul_(t2)
        return t1, t2

    g = C(f)
    leaf, x, w = mk(3)
    t1, t2 = g(x, x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad(x.sum(), [t1, t2, leaf, w]))


@prog()
def written_input_returned(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t)
        return x, t

    g = C(f)
    leaf, x, w = mk(2, 3)
    o, t = g(x, w)
    R.rec("same", o is x)
    R.rec("o", o)
    R.rec("x", x)
    R.step("g", lambda: ag.grad(o.sum(), [t, leaf], retain_graph=True))
    t.retain_grad()
    (x * 3).sum().backward()
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def written_input_returned_module(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3, dtype=f64)

        def forward(self, inp, acc):
            t = self.lin(inp).tanh()
            acc.add_(t)
            return acc, t

    m = init_(M())
    g = C(m)
    inp = L(2, 3, seed=1)
    acc = torch.zeros(2, 3, dtype=f64)
    o, t = g(inp, acc)
    R.rec("same", o is acc)
    R.rec("acc", acc)
    t.register_hook(R.hook("t"))
    (acc * W(acc)).sum().backward()
    R.grad("inp", inp)
    for n, p in m.named_parameters():
        R.grad(n, p)


@prog()
def two_outputs_fed_same_input(C, R):
    def f(x, w):
        t1 = tw(x, w)
        t2 = (w * 0.5).exp()
        x.add_(t1)
        x.mul_(t2)
        return t1, t2

    g = C(f)
    leaf, x, w = mk(2, 3)
    t1, t2 = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t1, t2, leaf, w], retain_graph=True))
    t1.retain_grad()
    t2.register_hook(R.hook("t2"))
    x.sum().backward()
    grads(R, t1=t1, leaf=leaf, w=w)


@prog()
def chain_t_u_into_x_hooks(C, R):
    def f(x, w):
        t = tw(x, w)
        u = t.sin()
        x.copy_(u * 2)
        return t, u

    g = C(f)
    leaf, x, w = mk(2, 2)
    t, u = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t"))
    u.register_hook(R.hook("u", lambda gr: gr * 3))
    (x * W(x)).sum().backward()
    R.rec("n", (cnt(R, "t"), cnt(R, "u")))
    grads(R, leaf=leaf, w=w)


@prog()
def chain_t_u_autograd_grad(C, R):
    def f(x, w):
        t = (w * 2).tanh()
        u = t * t + x.detach()
        x.add_(u)
        return t, u

    g = C(f)
    leaf, x, w = mk(3)
    t, u = g(x, w)
    R.rec("u", u)
    R.step("g", lambda: ag.grad(x.sum(), [t, u], retain_graph=True))
    R.step("g_wl", lambda: ag.grad([x.sum(), u.sum()], [w, leaf]))


@prog()
def t_added_twice(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t)
        x.add_(t * t)
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    t.retain_grad()
    (x * W(x)).sum().backward()
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def two_calls_same_x(C, R):
    def f(x, w):
        t = tw(x, w)
        x += t
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    w2 = L(2, 3, seed=7)
    t1 = g(x, w)
    t2 = g(x, w2)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t1, t2, leaf, w, w2]))


@prog()
def t_detached_written(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t.detach())
        return t

    g = C(f)
    leaf, x, w = mk(3)
    t = g(x, w)
    R.rec("x", x)
    R.step("g_t", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("g_unused", lambda: ag.grad(x.sum(), [t, leaf], allow_unused=True))


@prog()
def mixed_dtype_add(C, R):
    def f(x, w):
        t = (w * 2).sin()
        x.add_(t)
        return t

    g = C(f)
    leaf = L(2, 3, seed=1, dtype=f32)
    x = leaf.clone()
    w = L(2, 3, seed=2)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t, w, leaf]))


@prog()
def input_clone_of_other_input(C, R):
    def f(x, w):
        t = w.exp()
        x.add_(t)
        return t

    g = C(f)
    w = L(2, 3, seed=2)
    x = w.clone()
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad((x * W(x)).sum(), [t, w]))


# =====================================================================
# reads of x after the write, inside the function
# =====================================================================
@prog(inductor=True)
def read_after_write_y(C, R):
    def f(x, w):
        t = tw(x, w)
        x += t
        y = x * 2
        return y, t

    g = C(f)
    leaf, x, w = mk(2, 3)
    y, t = g(x, w)
    R.rec("y", y)
    R.step("g", lambda: ag.grad(y.sum(), t, retain_graph=True))
    t.retain_grad()
    (y.sum() + (x * W(x)).sum()).backward()
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def read_after_write_grad_x_wrt_t(C, R):
    def f(x, w):
        t = (w * 2).tanh()
        x.add_(t)
        return t, x.sum()

    g = C(f)
    leaf, x, w = mk(2, 2)
    t, s = g(x, w)
    R.rec("s", s)
    R.step("g_x", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("g_s", lambda: ag.grad(s, t, retain_graph=True))
    R.step("bw", lambda: (x * W(x)).sum().backward(inputs=[t]))
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def read_after_write_saved_product(C, R):
    def f(x, w):
        t = (w * 2).sin()
        x.mul_(t)
        y = x * w
        return y, t

    g = C(f)
    leaf, x, w = mk(3, 2)
    y, t = g(x, w)
    R.rec("y", y)
    t.register_hook(R.hook("t"))
    y.sum().backward()
    grads(R, leaf=leaf, w=w)


@prog()
def read_after_write_reduction(C, R):
    def f(x, w):
        t = tw(x, w)
        x[0].add_(t[0])
        s = (x**2).sum()
        return s, t

    g = C(f)
    leaf, x, w = mk(2, 2, dtype=f32)
    s, t = g(x, w)
    R.rec("s", s)
    R.step("g", lambda: ag.grad(s, [t, leaf, w]))


# =====================================================================
# writes under torch.no_grad inside the function
# =====================================================================
@prog()
def nograd_write_nonleaf(C, R):
    def f(x, w):
        t = tw(x, w)
        with torch.no_grad():
            x.add_(t)
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    t = g(x, w)
    R.rec("x", x)
    t.register_hook(R.hook("t"))
    R.step("g_t", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("g_unused", lambda: ag.grad(x.sum(), [t, leaf], allow_unused=True))
    R.step("bw", lambda: (x * W(x)).sum().backward())
    grads(R, leaf=leaf, w=w)
    R.rec("ncalls", cnt(R, "t"))


@prog()
def nograd_write_plain_input(C, R):
    def f(x, w):
        t = (w * 2).exp()
        with torch.no_grad():
            x.copy_(t)
        return t

    g = C(f)
    x = torch.zeros(3, dtype=f64)
    w = L(3, seed=2)
    t = g(x, w)
    R.rec("x", x)
    R.step("g", lambda: ag.grad(t.sum(), w))


@prog()
def nograd_write_then_read(C, R):
    def f(x, w):
        t = w.sin()
        with torch.no_grad():
            x.copy_(t * 2)
        y = x * w
        return y, t

    g = C(f)
    leaf, x, w = mk(2, 2)
    y, _t = g(x, w)
    R.rec("y", y)
    R.step("g", lambda: ag.grad(y.sum(), [w, leaf], allow_unused=True))


# =====================================================================
# second order, backward(inputs=), retain_graph
# =====================================================================
@prog()
def create_graph_through_t(C, R):
    def f(x, w):
        t = (w * 2).tanh()
        x.add_(t * t)
        return t

    g = C(f)
    _leaf, x, w = mk(3)
    t = g(x, w)
    gt = R.step("g1", lambda: ag.grad((x * W(x)).sum(), t, create_graph=True)[0])
    if gt is not None:
        R.rec("gt_rg", gt.requires_grad)
        R.step("g2", lambda: ag.grad(gt.sum(), [w, t], allow_unused=True))


@prog()
def create_graph_x_squared_loss(C, R):
    def f(x, w):
        t = w.sin()
        x.mul_(t)
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    gt = R.step("g1", lambda: ag.grad((x * x).sum(), t, create_graph=True)[0])
    if gt is not None:
        R.step("g2", lambda: ag.grad(gt.sum(), [leaf, w]))


@prog()
def create_graph_backward_leaf_grads(C, R):
    def f(x, w):
        t = (w * 0.7).exp()
        x.add_(t * w)
        return t

    g = C(f)
    leaf, x, w = mk(3)
    g(x, w)
    R.step("bw", lambda: (x * x).sum().backward(create_graph=True))
    R.rec("wg_rg", None if w.grad is None else w.grad.requires_grad)
    if w.grad is not None:
        gw = w.grad
        w.grad = None
        leaf.grad = None
        R.step("bw2", lambda: gw.sum().backward(inputs=[w, leaf]))
    grads(R, leaf=leaf, w=w)


@prog()
def backward_inputs_t_and_leaf(C, R):
    def f(x, w):
        t = tw(x, w)
        x[:, 0] = t[:, 0] * 3
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    t.register_hook(R.hook("t", lambda gr: gr + 1))
    R.step("bw", lambda: (x * W(x)).sum().backward(inputs=[t, leaf]))
    grads(R, t=t, leaf=leaf, w=w)


@prog()
def retain_graph_two_backwards_hook_counts(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t.exp())
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    t.register_hook(R.hook("t"))
    t.retain_grad()
    loss = (x * t).sum()
    R.step("bw1", lambda: loss.backward(retain_graph=True))
    grads(R, t1=t, leaf1=leaf)
    R.step("bw2", lambda: loss.backward())
    grads(R, t2=t, leaf2=leaf, w=w)
    R.rec("ncalls", cnt(R, "t"))
    R.step("bw3", lambda: loss.backward())


@prog()
def no_retain_then_second_grad(C, R):
    def f(x, w):
        t = (w * 2).exp()
        x.mul_(t)
        return t

    g = C(f)
    _leaf, x, w = mk(3)
    t = g(x, w)
    R.step("g1", lambda: ag.grad(x.sum(), t))
    R.step("g2", lambda: ag.grad(x.sum(), t))
    R.step("g3", lambda: ag.grad(t.sum(), w))


@prog()
def retain_grad_on_x_before_call(C, R):
    def f(x, w):
        t = tw(x, w)
        x.add_(t * 2)
        return t

    g = C(f)
    leaf, x, w = mk(2, 3)
    x.retain_grad()
    t = g(x, w)
    t.retain_grad()
    (x * W(x)).sum().backward()
    grads(R, x=x, t=t, leaf=leaf, w=w)


@prog()
def hook_on_x_before_and_after(C, R):
    def f(x, w):
        t = (w * 2).sin()
        x.mul_(t)
        return t

    g = C(f)
    leaf, x, w = mk(3)
    x.register_hook(R.hook("x_before"))
    t = g(x, w)
    x.register_hook(R.hook("x_after", lambda gr: gr * 2))
    t.register_hook(R.hook("t"))
    (x * W(x)).sum().backward()
    grads(R, leaf=leaf, w=w)


@prog()
def hook_zero_t_loss_reads_x(C, R):
    def f(x, w):
        t = tw(x, w)
        x.copy_(t + x)
        return t

    g = C(f)
    leaf, x, w = mk(2, 2)
    t = g(x, w)
    t.register_hook(R.hook("t", lambda gr: torch.zeros_like(gr)))
    (x * 3).sum().backward()
    grads(R, leaf=leaf, w=w)


# =====================================================================
# eager errors: the write clobbers a saved tensor
# =====================================================================
@prog()
def write_clobbers_saved_input(C, R):
    def f(x, w):
        t = (x * w).sin()
        x.add_(t)
        return t

    g = C(f)
    leaf, x, w = mk(3)
    t = g(x, w)
    R.rec("x", x)
    R.step("g_t", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("bw", lambda: x.sum().backward())
    grads(R, leaf=leaf, w=w)


# =====================================================================
# modules with parameters
# =====================================================================
class AccNet(nn.Module):
    def __init__(self, dtype=f64):
        super().__init__()
        self.lin = nn.Linear(3, 3, dtype=dtype)

    def forward(self, inp, acc):
        t = self.lin(inp).tanh()
        acc.add_(t)
        return t


@prog(inductor=True)
def module_acc_retain_grad(C, R):
    m = init_(AccNet())
    g = C(m)
    inp = L(2, 3, seed=1)
    acc = torch.zeros(2, 3, dtype=f64)
    t = g(inp, acc)
    R.rec("acc", acc)
    t.retain_grad()
    (acc * 3).sum().backward()
    R.grad("t", t)
    R.grad("inp", inp)
    for n, p in m.named_parameters():
        R.grad(n, p)


@prog()
def module_acc_f32_nonleaf(C, R):
    m = init_(AccNet(f32))
    g = C(m)
    inp = L(2, 3, seed=1, dtype=f32, rg=False)
    leaf = L(2, 3, seed=3, dtype=f32)
    acc = leaf.clone()
    t = g(inp, acc)
    R.rec("acc", acc)
    R.step("g", lambda: ag.grad((acc * W(acc)).sum(), [t, leaf, m.lin.weight]))


@prog()
def module_writes_own_input(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3, dtype=f64)

        def forward(self, x):
            t = self.lin(x).tanh()
            x.add_(t)
            return t

    m = init_(M())
    g = C(m)
    leaf, x, _w = mk(2, 3)
    t = g(x)
    R.rec("x", x)
    R.step("g_t", lambda: ag.grad(x.sum(), t, retain_graph=True))
    R.step("bw", lambda: x.sum().backward())
    R.grad("leaf", leaf)
    R.grad("lw", m.lin.weight)


@prog()
def module_param_fed_into_view_of_base(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3, dtype=f64))

        def forward(self, x):
            t = self.scale.exp()
            x.mul_(t)
            y = x.sin()
            return y, t

    m = init_(M())
    g = C(m)
    leaf = L(2, 3, seed=1)
    b = leaf.clone()
    y, t = g(b[1])
    R.rec("b", b)
    R.rec("y", y)
    t.register_hook(R.hook("t"))
    R.step("bw", lambda: (y.sum() + (b * W(b)).sum()).backward())
    R.grad("leaf", leaf)
    R.grad("scale", m.scale)


@prog()
def module_nograd_fast_weight(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(3, dtype=f64))

        def forward(self, x, mem):
            t = (x * self.w.sum()).tanh()
            with torch.no_grad():
                mem.add_(t * 0.1)
            return t

    m = init_(M())
    g = C(m)
    x = L(2, 3, seed=1)
    mem = torch.zeros(2, 3, dtype=f64)
    t = g(x, mem)
    R.rec("mem", mem)
    R.step("g", lambda: ag.grad(t.sum(), [x, m.w]))
    R.step("g_mem", lambda: ag.grad(mem.sum(), t))


@prog()
def module_two_outputs_into_acc(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2, dtype=f64)
            self.b = nn.Linear(2, 2, dtype=f64)

        def forward(self, inp, acc):
            t1 = self.a(inp).sin()
            t2 = self.b(t1).tanh()
            acc[0] = t1[0]
            acc[1:].add_(t2[1:])
            return t1, t2

    m = init_(M())
    g = C(m)
    inp = L(3, 2, seed=1)
    acc = L(3, 2, seed=2, rg=False)
    t1, t2 = g(inp, acc)
    R.rec("acc", acc)
    R.step("g", lambda: ag.grad((acc * W(acc)).sum(), [t1, t2], retain_graph=True))
    t1.retain_grad()
    R.step("bw", lambda: (acc * W(acc)).sum().backward(inputs=[t1, m.b.weight]))
    R.grad("t1", t1)
    R.grad("bw", m.b.weight)
    R.grad("aw", m.a.weight)


@prog()
def module_called_twice_same_acc(C, R):
    m = init_(AccNet())
    g = C(m)
    acc = torch.zeros(2, 3, dtype=f64)
    x1, x2 = L(2, 3, seed=1), L(2, 3, seed=2)
    t1 = g(x1, acc)
    t2 = g(x2, acc)
    R.rec("acc", acc)
    t1.register_hook(R.hook("t1"))
    t2.retain_grad()
    (acc * W(acc)).sum().backward()
    R.grad("t2", t2)
    R.grad("x1", x1)
    R.grad("x2", x2)
    R.grad("lw", m.lin.weight)
