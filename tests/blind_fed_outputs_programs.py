"""Blind programs: outputs computed from other outputs, and how callers observe the
gradient at them: autograd.grad (Grad-CAM), retain_grad, hooks, backward(inputs=),
create_graph.

A compiled function or module returns an intermediate (features ``h``) together with
outputs computed from it (logits ``h @ w2``, a sum, a pyramid of levels); the caller then
differentiates one output with respect to another (``torch.autograd.grad(logits, h)``,
Grad-CAM style), retains or hooks the fed output's gradient, restricts ``backward`` to it
with ``inputs=``, builds higher-order graphs through it with ``create_graph=True``, or
chains calls feeding one call's output into the next.

Written in round 56 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_fed_outputs`` runs each under eager and under each entry point and
compares the recordings.
"""

from __future__ import annotations

from collections import namedtuple

import torch
from torch import nn

from blind_fed_outputs_harness import L, init_params, registry

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32
NT = namedtuple("NT", ["feat", "logits"])


def init_(m, seed=0):
    return init_params(m, seed, offset=500)


def cnt(R, tag):
    return len(R.hooks.get(tag, []))


# ---------- shared building blocks ----------
def feat_logits(x, w1, w2):
    h = (x @ w1).tanh()
    return h, h @ w2


def feat_logits_nl(x, w1, w2):
    h = (x @ w1).tanh()
    return h, (h @ w2).sin()


def pyramid(x, w1, w2, w3, wc):
    f1 = (x @ w1).tanh()
    f2 = (f1 @ w2).sin()
    f3 = f2 * f1 + 1
    logits = f3 @ wc
    return [f1, f2, f3], logits


def mk_basic(dtype=f64, n=2, d=3, k=4, c=2):
    return L(n, d, seed=1, dtype=dtype), L(d, k, seed=2, dtype=dtype), L(k, c, seed=3, dtype=dtype)


def mk_pyr():
    return L(2, 3, seed=1), L(3, 4, seed=2), L(4, 4, seed=3), L(4, 4, seed=4), L(4, 2, seed=5)


class FeatNet(nn.Module):
    def __init__(self, dtype=f64):
        super().__init__()
        self.body = nn.Linear(3, 4, dtype=dtype)
        self.head = nn.Linear(4, 2, dtype=dtype)

    def forward(self, x):
        h = self.body(x).relu()
        return h, self.head(h)


class PyrNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 4, dtype=f64)
        self.l2 = nn.Linear(4, 4, dtype=f64)
        self.l3 = nn.Linear(4, 4, dtype=f64)
        self.fc = nn.Linear(4, 3, dtype=f64)

    def forward(self, x):
        f1 = self.l1(x).tanh()
        f2 = self.l2(f1).tanh()
        f3 = self.l3(f2).tanh() + f1
        return [f1, f2, f3], self.fc(f3)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1, dtype=f64)
        self.fc = nn.Linear(3, 2, dtype=f64)

    def forward(self, x):
        feat = self.conv(x).tanh()
        return feat, self.fc(feat.mean((2, 3)))


def leaf_grads(R, pre, **ts):
    for k, t in ts.items():
        R.grad(pre + k, t)


# =====================================================================
# Grad-CAM style autograd.grad(logits, feats)
# =====================================================================
@prog(inductor=True)
def gradcam_basic(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.rec("h", h)
    R.rec("lo", lo)
    R.step("gh", lambda: ag.grad(lo[:, 0].sum(), h))
    R.step("bw_after_free", lambda: lo.sum().backward())
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def gradcam_retain_then_backward(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("gh", lambda: ag.grad(lo[:, 1].sum(), h, retain_graph=True))
    R.step("bw", lambda: lo.sum().backward())
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def gradcam_twice_retain(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("g1", lambda: ag.grad(lo[:, 0].sum(), h, retain_graph=True))
    R.step("g2", lambda: ag.grad(lo[:, 1].sum(), h, retain_graph=True))
    R.step("g3", lambda: ag.grad(lo[:, 1].sum(), h))
    R.step("g4", lambda: ag.grad(lo[:, 1].sum(), h))


@prog()
def gradcam_float32(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic(f32)
    h, lo = g(x, w1, w2)
    R.rec("o", (h, lo))
    R.step("gh", lambda: ag.grad(lo.sum(), h))


@prog(inductor=True)
def gradcam_module(C, R):
    m = init_(FeatNet())
    g = C(m)
    x = L(2, 3, seed=1)
    h, lo = g(x)
    R.rec("o", (h, lo))
    R.step("gh", lambda: ag.grad(lo[:, 0].sum(), h, retain_graph=True))
    lo.sum().backward()
    R.grad("x", x)
    R.grad("bw", m.body.weight)
    R.grad("hw", m.head.weight)


@prog()
def gradcam_conv(C, R):
    m = init_(ConvNet())
    g = C(m)
    x = L(1, 2, 4, 4, seed=1, rg=False)
    feat, lo = g(x)
    gr = R.step("gf", lambda: ag.grad(lo[0, 1], feat)[0])
    if gr is not None:
        cam = (gr.mean((2, 3), keepdim=True) * feat).sum(1).relu()
        R.rec("cam", cam)


@prog()
def gradcam_several_inputs(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("g", lambda: ag.grad(lo.sum(), [h, w2, x]))


@prog()
def gradcam_h_and_w1(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("g", lambda: ag.grad(lo.sum(), [w1, h], retain_graph=True))
    R.step("g_x_only", lambda: ag.grad(lo.sum(), [x]))


@prog()
def gradcam_allow_unused(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        other = x.cos()
        return h, other, h.sum(1)

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 3, seed=2)
    h, other, s = g(x, w)
    R.step("no_allow", lambda: ag.grad(s.sum(), [h, other], retain_graph=True))
    R.step("allow", lambda: ag.grad(s.sum(), [h, other], allow_unused=True, retain_graph=True))
    R.step("mat", lambda: ag.grad(s.sum(), [other, h], allow_unused=True, materialize_grads=True))


@prog()
def gradcam_grad_outputs(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    v = L(2, 2, seed=9, rg=False)
    R.step("g", lambda: ag.grad(lo, h, grad_outputs=v))


@prog()
def gradcam_batched_jacobian(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic(n=1)
    h, lo = g(x, w1, w2)
    eye = torch.eye(2, dtype=f64).view(2, 1, 2)
    R.step("jac", lambda: ag.grad(lo, h, grad_outputs=eye, is_grads_batched=True))


@prog()
def gradcam_loop_two_calls(C, R):
    g = C(feat_logits_nl)
    w1, w2 = L(3, 4, seed=2), L(4, 2, seed=3)
    for i in range(2):
        x = L(2, 3, seed=10 + i, rg=False)
        h, lo = g(x, w1, w2)
        R.step(f"g{i}", lambda: ag.grad(lo[:, i].sum(), h))  # noqa: B023 (called at once)


@prog()
def gradcam_wrt_logits_self(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("g_self", lambda: ag.grad(lo.sum(), lo, retain_graph=True))
    R.step("g_h_self", lambda: ag.grad(h.sum(), h))


@prog()
def grad_h_from_sum_output(C, R):
    def f(x, w):
        h = (x * w).exp()
        return h, h.sum()

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    h, s = g(x, w)
    R.rec("o", (h, s))
    R.step("gh", lambda: ag.grad(s, h, retain_graph=True))
    R.step("ghw", lambda: ag.grad(s, [h, w]))


@prog()
def grad_feat_from_mean_and_pow(C, R):
    def f(x):
        h = x.sin()
        return h, h.mean(), (h**2).sum()

    g = C(f)
    x = L(2, 3, seed=1)
    h, m, q = g(x)
    R.step("g", lambda: ag.grad(m + q, h, retain_graph=True))
    R.step("gx", lambda: ag.grad(m * q, x))


# =====================================================================
# second order / create_graph
# =====================================================================
@prog()
def gp_on_features(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    gr = R.step("gh", lambda: ag.grad(lo.sum(), h, create_graph=True)[0])
    if gr is not None:
        R.rec("gr_rg", gr.requires_grad)
        pen = gr.pow(2).sum()
        R.step("pen_bw", lambda: pen.backward())
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def gp_on_features_plus_loss(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    gr = R.step("gh", lambda: ag.grad(lo.sum(), h, create_graph=True)[0])
    if gr is not None:
        loss = lo.pow(2).sum() + 0.1 * gr.pow(2).sum()
        R.step("bw", lambda: loss.backward())
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def gp_module_params(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 4, dtype=f64)
            self.b = nn.Linear(4, 1, dtype=f64)

        def forward(self, x):
            h = self.a(x).tanh()
            return h, self.b(h).tanh()

    m = init_(M())
    g = C(m)
    x = L(3, 3, seed=1, rg=False)
    h, d = g(x)
    gr = R.step("gh", lambda: ag.grad(d.sum(), h, create_graph=True)[0])
    if gr is not None:
        R.step("bw", lambda: ((gr.norm(dim=1) - 1) ** 2).mean().backward())
    for n, p in m.named_parameters():
        R.grad(n, p)


@prog()
def double_grad_wrt_feat(C, R):
    def f(x):
        h = x.sin()
        return h, (h**3).sum()

    g = C(f)
    x = L(3, seed=1)
    h, s = g(x)
    g1 = R.step("g1", lambda: ag.grad(s, h, create_graph=True)[0])
    if g1 is not None:
        R.step("g2", lambda: ag.grad(g1.sum(), [h, x], allow_unused=True))


@prog()
def create_graph_wrt_input_from_out(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    _h, lo = g(x, w1, w2)
    gx = R.step("gx", lambda: ag.grad(lo.sum(), x, create_graph=True)[0])
    if gx is not None:
        R.step("hvp", lambda: ag.grad((gx * gx).sum(), [w1, w2]))


@prog()
def create_graph_backward_twice(C, R):
    def f(x, w):
        h = (x * w).tanh()
        return h, (h * h * w).sum()

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    _h, s = g(x, w)
    R.step("bw", lambda: s.backward(create_graph=True))
    R.rec("xg_rg", x.grad.requires_grad if x.grad is not None else None)
    if x.grad is not None:
        gx = x.grad
        x.grad = None
        w.grad = None
        R.step("bw2", lambda: gx.sum().backward())
    R.grad("x", x)
    R.grad("w", w)


# =====================================================================
# retain_grad on outputs
# =====================================================================
@prog(inductor=True)
def retain_grad_feat_logits_bw(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    lo.sum().backward()
    R.grad("h", h)
    R.grad("lo", lo)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def retain_grad_both_used(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    lo.retain_grad()
    ((h * 1).sum() + lo.sum()).backward()
    R.grad("h", h)
    R.grad("lo", lo)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def retain_grad_pyramid(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    for f_ in fs:
        f_.retain_grad()
    lo.sum().backward()
    for i, f_ in enumerate(fs):
        R.grad(f"f{i}", f_)
    for i, t in enumerate(ins):
        R.grad(f"in{i}", t)


@prog()
def retain_grad_pyramid_mixed_loss(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    for f_ in fs:
        f_.retain_grad()
    (fs[0].sum() + fs[2].pow(2).sum() + lo.sum()).backward()
    for i, f_ in enumerate(fs):
        R.grad(f"f{i}", f_)
    for i, t in enumerate(ins):
        R.grad(f"in{i}", t)


@prog()
def retain_grad_middle_only(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    fs[1].retain_grad()
    lo.sum().backward()
    R.grad("f1", fs[1])
    R.grad("f0", fs[0])
    R.grad("x", ins[0])


@prog()
def retain_grad_accumulate_twice(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    lo.sum().backward(retain_graph=True)
    R.grad("h1", h)
    lo.sum().backward()
    R.grad("h2", h)
    R.grad("w1", w1)


@prog()
def retain_grad_feat_backward_feat_only(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    lo.retain_grad()
    h.pow(2).sum().backward()
    R.grad("h", h)
    R.grad("lo", lo)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def retain_grad_sum_output(C, R):
    def f(x):
        h = x.exp()
        return h, h.sum()

    g = C(f)
    x = L(2, 3, seed=1)
    h, s = g(x)
    h.retain_grad()
    s.backward()
    R.grad("h", h)
    R.grad("x", x)


@prog()
def retain_grad_module_pyramid(C, R):
    m = init_(PyrNet())
    g = C(m)
    x = L(2, 3, seed=1)
    fs, lo = g(x)
    for f_ in fs:
        f_.retain_grad()
    lo[:, 2].sum().backward()
    for i, f_ in enumerate(fs):
        R.grad(f"f{i}", f_)
    R.grad("x", x)
    R.grad("l1w", m.l1.weight)
    R.grad("fcb", m.fc.bias)


# =====================================================================
# hooks on outputs
# =====================================================================
@prog(inductor=True)
def hook_record_feat(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h"))
    lo.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog(inductor=True)
def hook_scale_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    lo.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def hook_zero_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: torch.zeros_like(gr)))
    lo.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def hook_zero_feat_with_skip(C, R):
    def f(x, w1, w2):
        h = (x @ w1).tanh()
        return h, h @ w2 + x.sum(1, keepdim=True) * 3

    g = C(f)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: gr * 0))
    lo.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def hook_scale_chain(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    fs[0].register_hook(R.hook("f0"))
    fs[1].register_hook(R.hook("f1", lambda gr: gr * 3))
    fs[2].register_hook(R.hook("f2", lambda gr: gr + 1))
    lo.sum().backward()
    for i, t in enumerate(ins):
        R.grad(f"in{i}", t)


@prog()
def hook_zero_middle_chain_retain(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    fs[0].retain_grad()
    fs[1].register_hook(lambda gr: torch.zeros_like(gr))
    lo.sum().backward()
    R.grad("f0", fs[0])
    R.grad("x", ins[0])
    R.grad("w3", ins[3])


@prog()
def hook_feat_used_twice(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h"))
    (h.sum() * 2 + lo.sum()).backward()
    R.rec("ncalls", cnt(R, "h"))
    leaf_grads(R, "", x=x, w1=w1)


@prog()
def hook_on_logits_scale_reaches_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    lo.register_hook(R.hook("lo", lambda gr: gr * -1))
    h.register_hook(R.hook("h"))
    lo.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def hook_and_retain_grad(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    h.register_hook(R.hook("h", lambda gr: gr * 5))
    lo.sum().backward()
    R.grad("h", h)
    R.grad("x", x)


@prog()
def hook_then_autograd_grad_input(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    R.step("gx", lambda: ag.grad(lo.sum(), [x, w2]))


@prog()
def hook_then_autograd_grad_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    R.step("g", lambda: ag.grad(lo.sum(), [h, x]))


@prog()
def hook_removed(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    hd = h.register_hook(R.hook("h", lambda gr: gr * 100))
    hd.remove()
    lo.sum().backward()
    R.grad("x", x)
    R.rec("ncalls", cnt(R, "h"))


@prog()
def hook_two_on_same_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("a", lambda gr: gr + 1))
    h.register_hook(R.hook("b", lambda gr: gr * 2))
    lo.sum().backward()
    R.grad("x", x)
    R.grad("w1", w1)


@prog()
def multi_grad_hook_all(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    seen = []
    torch.autograd.graph.register_multi_grad_hook(
        [fs[0], fs[2], lo],
        lambda gs: seen.append([None if gr is None else gr.detach().clone() for gr in gs]),
    )
    lo.sum().backward()
    R.rec("seen", seen)
    R.grad("x", ins[0])


@prog()
def multi_grad_hook_all_partial(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    seen = []
    torch.autograd.graph.register_multi_grad_hook(
        [h, lo], lambda gs: seen.append([None if gr is None else gr.detach().clone() for gr in gs])
    )
    h.sum().backward()
    R.rec("seen", seen)
    R.grad("x", x)


@prog()
def multi_grad_hook_any(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    seen = []
    torch.autograd.graph.register_multi_grad_hook(
        [h, lo], lambda gr: seen.append(gr.detach().clone()), mode="any"
    )
    lo.sum().backward()
    R.rec("seen", seen)


@prog()
def hook_split_piece(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        a, b = h.split([2, 2], dim=1)
        return a, b * a.sum(1, keepdim=True)

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 4, seed=2)
    a, out = g(x, w)
    a.register_hook(R.hook("a", lambda gr: gr * 2))
    out.sum().backward()
    R.grad("x", x)
    R.grad("w", w)


@prog()
def hook_module_activations(C, R):
    m = init_(PyrNet())
    g = C(m)
    x = L(2, 3, seed=1)
    fs, lo = g(x)
    for i, f_ in enumerate(fs):
        f_.register_hook(R.hook(f"f{i}", (lambda gr: gr * 0.5) if i == 1 else None))
    lo.sum().backward()
    R.grad("x", x)
    for n, p in m.named_parameters():
        R.grad(n, p)


@prog()
def hook_on_sum_output(C, R):
    def f(x):
        h = x.sin()
        return h, h.sum(), (h * 2).sum()

    g = C(f)
    x = L(3, seed=1)
    h, s, t = g(x)
    s.register_hook(R.hook("s", lambda gr: gr * 10))
    h.register_hook(R.hook("h"))
    (s + t).backward()
    R.grad("x", x)


# =====================================================================
# backward variants
# =====================================================================
@prog()
def logits_backward_only(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    _h, lo = g(x, w1, w2)
    lo.backward(torch.ones_like(lo))
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def feat_backward_only(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, _lo = g(x, w1, w2)
    h.sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def feat_bw_retain_then_logits(C, R):
    def f(x, w):
        s = (x * w).sum()
        return s, (s * 2).sin() + x

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    s, out = g(x, w)
    R.step("b1", lambda: s.backward(retain_graph=True))
    R.grad("x1", x)
    R.step("b2", lambda: out.sum().backward())
    R.grad("x2", x)
    R.grad("w2", w)


@prog()
def feat_bw_no_retain_then_logits(C, R):
    def f(x, w):
        s = (x * w).sum()
        return s, (s * 2).sin() + x

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    s, out = g(x, w)
    R.step("b1", lambda: s.backward())
    R.grad("x1", x)
    R.step("b2", lambda: out.sum().backward())
    R.grad("x2", x)
    R.grad("w2", w)


@prog()
def logits_bw_no_retain_then_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("b1", lambda: lo.sum().backward())
    R.grad("w1a", w1)
    R.step("b2", lambda: h.sum().backward())
    R.grad("w1b", w1)


@prog()
def backward_inputs_feat(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("bw", lambda: lo.sum().backward(inputs=[h]))
    R.grad("h", h)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def backward_inputs_w(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    R.step("bw", lambda: ((h * 1).sum() + lo.sum()).backward(inputs=[w1]))
    R.grad("h", h)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def backward_inputs_feat_and_w2(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("bw", lambda: (h.sum() + lo.sum()).backward(inputs=[h, w2]))
    R.grad("h", h)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def backward_inputs_pyramid_mid(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    fs[0].register_hook(R.hook("f0"))
    R.step("bw", lambda: lo.sum().backward(inputs=[fs[1], ins[4]]))
    R.grad("f1", fs[1])
    R.grad("wc", ins[4])
    R.grad("x", ins[0])
    R.rec("f0_calls", cnt(R, "f0"))


@prog()
def two_backwards_retain(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    loss = (h * 1).sum() + lo.sum()
    loss.backward(retain_graph=True)
    R.grad("x1", x)
    loss.backward()
    R.grad("x2", x)
    R.grad("w1", w1)
    R.step("third", lambda: loss.backward())


@prog()
def autograd_backward_multi_tensors(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    gh = L(2, 4, seed=7, rg=False)
    gl = L(2, 2, seed=8, rg=False)
    ag.backward([h, lo], [gh, gl])
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def backward_feat_with_gradient(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.backward(L(2, 4, seed=7, rg=False), retain_graph=True)
    R.grad("w1a", w1)
    lo.backward(L(2, 2, seed=8, rg=False))
    R.grad("w1b", w1)
    R.grad("w2", w2)


@prog()
def grad_wrt_feat_then_backward_all(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    R.step("g", lambda: ag.grad(lo.sum(), fs, retain_graph=True))
    (lo.sum() + fs[1].sum()).backward()
    for i, t in enumerate(ins):
        R.grad(f"in{i}", t)


@prog()
def grad_pyramid_pairs(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    R.step("f2_f0", lambda: ag.grad(fs[2].sum(), fs[0], retain_graph=True))
    R.step("f1_f0", lambda: ag.grad(fs[1].sum(), fs[0], retain_graph=True))
    R.step("lo_f1", lambda: ag.grad(lo.sum(), fs[1], retain_graph=True))
    R.step("f0_f2", lambda: ag.grad(fs[0].sum(), fs[2], retain_graph=True))
    R.step("f0_f2u", lambda: ag.grad(fs[0].sum(), fs[2], allow_unused=True))


# =====================================================================
# no_grad / twice / detach
# =====================================================================
@prog(inductor=True)
def no_grad_call(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    with torch.no_grad():
        h, lo = g(x, w1, w2)
    R.rec("o", (h, lo))
    R.step("bw", lambda: lo.sum().backward())
    R.step("gh", lambda: ag.grad(lo.sum(), h))


@prog()
def no_grad_then_grad(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    with torch.no_grad():
        h0, lo0 = g(x, w1, w2)
    h, lo = g(x, w1, w2)
    R.rec("o0", (h0, lo0))
    R.rec("o", (h, lo))
    R.step("gh", lambda: ag.grad(lo.sum(), h))


@prog()
def inference_mode_call(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    with torch.inference_mode():
        h, lo = g(x, w1, w2)
    R.rec("o", (h, lo))


@prog()
def no_input_requires_grad(C, R):
    g = C(feat_logits)
    x, w1, w2 = mk_basic()
    for t in (x, w1, w2):
        t.requires_grad_(False)
    h, lo = g(x, w1, w2)
    R.rec("o", (h, lo))
    R.step("gh", lambda: ag.grad(lo.sum(), h))


@prog()
def call_twice_both_used(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h1, lo1 = g(x, w1, w2)
    h2, lo2 = g(x * 2, w1, w2)
    h1.retain_grad()
    h2.register_hook(R.hook("h2", lambda gr: gr * 3))
    (lo1.sum() + lo2.sum() + (h1 * h2).sum()).backward()
    R.grad("h1", h1)
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def chain_two_calls_feed_output(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        return h, h.sum(0)

    g = C(f)
    x, w = L(3, 3, seed=1), L(3, 3, seed=2)
    h1, s1 = g(x, w)
    h2, s2 = g(h1, w)
    R.step("g", lambda: ag.grad(s2.sum(), [h1, h2], retain_graph=True))
    h1.retain_grad()
    (s1.sum() + s2.sum()).backward()
    R.grad("h1", h1)
    R.grad("x", x)
    R.grad("w", w)


@prog()
def detach_feat_used_with_logits(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    hd = h.detach()
    R.rec("hd", hd)
    (hd.sum(1, keepdim=True) * lo).sum().backward()
    leaf_grads(R, "", x=x, w1=w1, w2=w2)


@prog()
def detach_residual_loss(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.retain_grad()
    ((h - h.detach() * 0.5) ** 2).sum().backward(retain_graph=True)
    R.grad("h", h)
    R.grad("w1", w1)
    R.grad("w2", w2)
    R.step("gh_after", lambda: ag.grad(lo.sum(), h))


@prog()
def returns_detached_copy(C, R):
    def f(x, w):
        h = (x * w).sin()
        return h, h.detach(), h * 2

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    o = g(x, w)
    R.rec("o", o)
    R.step("g", lambda: ag.grad(o[2].sum(), o[0]))
    R.step("g_det", lambda: ag.grad(o[2].sum(), o[1]))


# =====================================================================
# output structures, views, multi-output ops, dtypes
# =====================================================================
@prog()
def dict_outputs(C, R):
    def f(x, w1, w2):
        h = (x @ w1).tanh()
        lo = h @ w2
        return {"feat": h, "logits": lo, "prob": lo.softmax(-1)}

    g = C(f)
    x, w1, w2 = mk_basic()
    o = g(x, w1, w2)
    R.rec("o", o)
    o["feat"].retain_grad()
    R.step("g", lambda: ag.grad(o["prob"][:, 0].sum(), [o["logits"], o["feat"]], retain_graph=True))
    o["prob"][:, 1].sum().backward()
    R.grad("feat", o["feat"])
    R.grad("w1", w1)


@prog()
def namedtuple_outputs(C, R):
    def f(x, w1, w2):
        h = (x @ w1).tanh()
        return NT(h, h @ w2)

    g = C(f)
    x, w1, w2 = mk_basic()
    o = g(x, w1, w2)
    R.rec("type", type(o).__name__)
    R.step("g", lambda: ag.grad(o.logits.sum(), o.feat))


@prog()
def nested_list_tuple(C, R):
    def f(x, w):
        a = x * w
        b = a.sin()
        return ((a, [b]), {"c": (a * b).sum()})

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    o = g(x, w)
    a, b, c = o[0][0], o[0][1][0], o[1]["c"]
    b.retain_grad()
    R.step("g", lambda: ag.grad(c, [a, b], retain_graph=True))
    c.backward()
    R.grad("b", b)
    R.grad("x", x)


@prog()
def view_output_of_output(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        return h, h.view(-1), h.view(-1) * 2

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 2, seed=2)
    h, hv, o = g(x, w)
    R.rec("o", (h, hv, o))
    R.rec("base", hv._base is h)
    R.step("g", lambda: ag.grad(o.sum(), [h, hv], retain_graph=True))
    hv.retain_grad()
    h.retain_grad()
    o.sum().backward()
    R.grad("h", h)
    R.grad("hv", hv)
    R.grad("w", w)


@prog()
def transposed_view_feeds_output(C, R):
    def f(x, w):
        h = (x @ w).exp()
        ht = h.t()
        return h, ht, ht @ x

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 3, seed=2)
    h, ht, o = g(x, w)
    R.step("g", lambda: ag.grad(o.sum(), [ht, h]))


@prog()
def row_view_hook(C, R):
    def f(x, w):
        h = (x @ w).sin()
        r = h[0]
        return h, r, (r * w.sum(0)).sum()

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 3, seed=2)
    h, r, s = g(x, w)
    r.register_hook(R.hook("r", lambda gr: gr * 2))
    h.register_hook(R.hook("h"))
    s.backward()
    R.grad("x", x)
    R.grad("w", w)


@prog()
def flatten_then_fc(C, R):
    def f(x, w):
        x2 = x.flatten(1)
        return x2, x2 @ w

    g = C(f)
    x = L(2, 2, 3, seed=1)
    w = L(6, 2, seed=2)
    x2, lo = g(x, w)
    R.rec("x2", x2)
    R.rec("x2_base_is_x", x2._base is x)
    R.step("g", lambda: ag.grad(lo.sum(), x2, retain_graph=True))
    x2.retain_grad()
    lo.sum().backward()
    R.grad("x2", x2)
    R.grad("x", x)
    R.grad("w", w)


@prog()
def flatten_nonleaf_input_then_fc(C, R):
    def f(a, w):
        a2 = a.flatten(1)
        return a2, (a2 @ w).tanh()

    g = C(f)
    base = L(2, 2, 3, seed=1)
    a = base * 2
    w = L(6, 2, seed=2)
    a2, lo = g(a, w)
    a2.register_hook(R.hook("a2", lambda gr: gr * 2))
    lo.sum().backward()
    R.grad("base", base)
    R.grad("w", w)


@prog()
def flatten_module(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 2, dtype=f64)
            self.fc = nn.Linear(8, 3, dtype=f64)

        def forward(self, x):
            f_ = self.conv(x).relu()
            x2 = f_.flatten(1)
            return f_, x2, self.fc(x2)

    m = init_(M())
    g = C(m)
    x = L(2, 1, 3, 3, seed=1)
    f_, x2, lo = g(x)
    R.rec("is_view", x2._base is f_)
    R.step("g", lambda: ag.grad(lo[:, 1].sum(), [f_, x2], retain_graph=True))
    f_.retain_grad()
    lo.sum().backward()
    R.grad("f", f_)
    R.grad("x", x)
    R.grad("conv", m.conv.weight)


@prog()
def shared_output_two_consumers(C, R):
    def f(x):
        a = x.sin()
        return a, a * 2, a.exp()

    g = C(f)
    x = L(3, seed=1)
    a, b, c = g(x)
    R.step("g", lambda: ag.grad(b.sum() + c.sum(), a, retain_graph=True))
    R.step("gb", lambda: ag.grad(b.sum(), a, retain_graph=True))
    a.register_hook(R.hook("a"))
    (b.sum() + c.sum()).backward()
    R.grad("x", x)
    R.rec("ncalls", cnt(R, "a"))


@prog()
def output_from_two_outputs(C, R):
    def f(x, y):
        a = x * 2
        b = y.sin()
        return a, b, a * b

    g = C(f)
    x, y = L(3, seed=1), L(3, seed=2)
    a, b, c = g(x, y)
    R.step("g", lambda: ag.grad(c.sum(), [a, b], retain_graph=True))
    a.register_hook(R.hook("a", lambda gr: gr * 10))
    b.retain_grad()
    c.sum().backward()
    R.grad("b", b)
    R.grad("x", x)
    R.grad("y", y)


@prog()
def diamond_outputs(C, R):
    def f(x):
        a = x.exp()
        b = a.sin()
        c = a.cos()
        return a, b, c, b * c

    g = C(f)
    x = L(2, 2, seed=1)
    a, b, c, d = g(x)
    for t in (a, b, c):
        t.retain_grad()
    c.register_hook(R.hook("c", lambda gr: gr * 0))
    d.sum().backward()
    R.grad("a", a)
    R.grad("b", b)
    R.grad("c", c)
    R.grad("x", x)


@prog()
def same_output_twice(C, R):
    def f(x, w):
        h = (x * w).tanh()
        return h, h, h * 3

    g = C(f)
    x, w = L(3, seed=1), L(3, seed=2)
    o = g(x, w)
    R.rec("same", o[0] is o[1])
    R.step("g", lambda: ag.grad(o[2].sum(), [o[0], o[1]], retain_graph=True))
    o[1].retain_grad()
    o[2].sum().backward()
    R.grad("o0", o[0])
    R.grad("x", x)


@prog()
def dtype_f32_from_f64_output(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        return h, h.float() * 2

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 3, seed=2)
    h, lo = g(x, w)
    R.rec("o", (h, lo))
    R.step("g", lambda: ag.grad(lo.sum(), h, retain_graph=True))
    h.register_hook(R.hook("h"))
    lo.sum().backward()
    R.grad("x", x)


@prog()
def dtype_f64_from_f32_output(C, R):
    def f(x, w):
        h = (x @ w).sin()
        return h, (h.double() ** 2).sum(1)

    g = C(f)
    x, w = L(2, 3, seed=1, dtype=f32), L(3, 3, seed=2, dtype=f32)
    h, s = g(x, w)
    R.rec("o", (h, s))
    h.retain_grad()
    s.sum().backward()
    R.grad("h", h)
    R.grad("w", w)


@prog()
def int_output_from_feat(C, R):
    def f(x, w):
        h = x @ w
        return h, h.argmax(-1), (h > 0).sum()

    g = C(f)
    x, w = L(3, 3, seed=1), L(3, 4, seed=2)
    o = g(x, w)
    R.rec("o", o)
    h = o[0]
    R.step("g", lambda: ag.grad(h.gather(1, o[1][:, None]).sum(), h))


@prog()
def split_piece_returned_other_feeds(C, R):
    def f(x, w):
        h = x @ w
        a, b = h.split(2, dim=1)
        return h, a, (b * 2).exp()

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 4, seed=2)
    h, a, e = g(x, w)
    R.rec("a_view", a._is_view())
    R.step("g", lambda: ag.grad(e.sum(), [h, a], allow_unused=True, retain_graph=True))
    R.step("g_noallow", lambda: ag.grad(e.sum(), a, retain_graph=True))
    a.retain_grad()
    h.retain_grad()
    (a.sum() + e.sum()).backward()
    R.grad("a", a)
    R.grad("h", h)
    R.grad("w", w)


@prog()
def unbind_rows(C, R):
    def f(x):
        h = x.sin()
        r = h.unbind(0)
        return r[0], r[1], r[0] * r[1] + r[2]

    g = C(f)
    x = L(3, 2, seed=1)
    r0, r1, o = g(x)
    R.step("g", lambda: ag.grad(o.sum(), [r0, r1], retain_graph=True))
    r0.register_hook(R.hook("r0", lambda gr: gr * 2))
    o.sum().backward()
    R.grad("x", x)


@prog()
def chunk_feeds_matmul(C, R):
    def f(x, w):
        h = (x * 3).tanh()
        c0, c1 = h.chunk(2, -1)
        return c0, c1, c0 @ w + c1.sum()

    g = C(f)
    x = L(2, 4, seed=1)
    w = L(2, 2, seed=2)
    c0, c1, o = g(x, w)
    c0.retain_grad()
    c1.retain_grad()
    o.sum().backward()
    R.grad("c0", c0)
    R.grad("c1", c1)
    R.grad("x", x)
    R.grad("w", w)


@prog()
def split_pieces_all_returned(C, R):
    def f(x):
        return x.exp().split(1)

    g = C(f)
    x = L(3, 2, seed=1)
    ps = g(x)
    R.rec("n", len(ps))
    R.step("g", lambda: ag.grad((ps[0] * ps[2]).sum(), list(ps), allow_unused=True))


@prog()
def output_is_input_feeds_output(C, R):
    def f(w, x):
        return w, (x @ w).tanh()

    g = C(f)
    w, x = L(3, 2, seed=1), L(2, 3, seed=2)
    o = g(w, x)
    R.rec("same", o[0] is w)
    R.step("g", lambda: ag.grad(o[1].sum(), o[0], retain_graph=True))
    o[0].register_hook(R.hook("w", lambda gr: gr * 2))
    o[1].sum().backward()
    R.grad("w", w)
    R.grad("x", x)


@prog()
def layernorm_module_activations(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4, dtype=f64)
            self.ln = nn.LayerNorm(4, dtype=f64)
            self.out = nn.Linear(4, 2, dtype=f64)

        def forward(self, x):
            a = self.lin(x)
            n = self.ln(a)
            return {"pre": a, "norm": n, "out": self.out(n.relu())}

    m = init_(M())
    g = C(m)
    x = L(3, 4, seed=1)
    o = g(x)
    R.step("g", lambda: ag.grad(o["out"].sum(), [o["pre"], o["norm"]], retain_graph=True))
    o["norm"].register_hook(R.hook("n", lambda gr: gr * 2))
    o["pre"].retain_grad()
    o["out"].sum().backward()
    R.grad("pre", o["pre"])
    for n, p in m.named_parameters():
        R.grad(n, p)


@prog()
def module_no_input_grad_params_only(C, R):
    m = init_(FeatNet())
    g = C(m)
    x = L(2, 3, seed=1, rg=False)
    h, lo = g(x)
    R.rec("flags", (h.requires_grad, lo.requires_grad, h.is_leaf))
    h.retain_grad()
    R.step("g", lambda: ag.grad(lo.sum(), [h, m.head.bias], retain_graph=True))
    lo.sum().backward()
    R.grad("h", h)
    R.grad("bw", m.body.weight)


@prog()
def module_frozen_head(C, R):
    m = init_(FeatNet())
    m.head.requires_grad_(False)
    g = C(m)
    x = L(2, 3, seed=1)
    h, lo = g(x)
    R.rec("o", (h, lo))
    R.step("g", lambda: ag.grad(lo.sum(), h, retain_graph=True))
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    lo.sum().backward()
    R.grad("x", x)
    R.grad("bw", m.body.weight)
    R.grad("hw", m.head.weight)


@prog()
def module_frozen_body(C, R):
    m = init_(FeatNet())
    m.body.requires_grad_(False)
    g = C(m)
    x = L(2, 3, seed=1, rg=False)
    h, lo = g(x)
    R.rec("o", (h, lo))
    R.step("g", lambda: ag.grad(lo.sum(), h, allow_unused=True, retain_graph=True))
    R.step("h_retain", lambda: h.retain_grad())
    lo.sum().backward()
    R.grad("hw", m.head.weight)


@prog()
def sequential_features_classifier(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Linear(3, 5, dtype=f64), nn.Tanh(), nn.Linear(5, 4, dtype=f64), nn.Sigmoid()
            )
            self.classifier = nn.Linear(4, 2, dtype=f64)

        def forward(self, x):
            f_ = self.features(x)
            return f_, self.classifier(f_), self.classifier(f_).log_softmax(-1)

    m = init_(M())
    g = C(m)
    x = L(3, 3, seed=1)
    f_, lo, lp = g(x)
    R.step("g", lambda: ag.grad(lp[:, 0].sum(), [f_, lo], retain_graph=True))
    f_.register_hook(R.hook("f"))
    (-lp[:, 1].sum()).backward()
    R.grad("x", x)
    R.grad("c", m.classifier.weight)
    R.grad("f0", m.features[0].weight)


@prog()
def feat_output_returned_before_and_after(C, R):
    def f(x, w):
        h = (x @ w).tanh()
        return (h * w.sum()).sum(), h

    g = C(f)
    x, w = L(2, 3, seed=1), L(3, 3, seed=2)
    s, h = g(x, w)
    h.retain_grad()
    R.step("g", lambda: ag.grad(s, h, retain_graph=True))
    s.backward()
    R.grad("h", h)
    R.grad("w", w)


@prog()
def feat_grad_then_inplace_caller(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    R.step("g", lambda: ag.grad(lo.sum(), h, retain_graph=True))
    h.add_(1)
    R.step("bw", lambda: lo.sum().backward())
    R.grad("w2", w2)


@prog()
def retain_grad_hook_float32_module(C, R):
    m = init_(FeatNet(f32))
    g = C(m)
    x = L(2, 3, seed=1, dtype=f32)
    h, lo = g(x)
    h.retain_grad()
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    lo.sum().backward()
    R.grad("h", h)
    R.grad("x", x)
    R.grad("bw", m.body.weight)


@prog()
def exp_output_used_in_loss_and_feeds(C, R):
    def f(x):
        e = x.exp()
        return e, e.log() * e

    g = C(f)
    x = L(3, seed=1)
    e, o = g(x)
    e.retain_grad()
    o.retain_grad()
    (e.sum() + (o * o).sum()).backward()
    R.grad("e", e)
    R.grad("o", o)
    R.grad("x", x)


@prog()
def chain_grad_cam_then_pen_then_step(C, R):
    g = C(pyramid)
    ins = mk_pyr()
    fs, lo = g(*ins)
    gs = R.step("g", lambda: ag.grad(lo[:, 0].sum(), [fs[0], fs[2]], create_graph=True))
    if gs is not None:
        pen = sum(t.pow(2).sum() for t in gs)
        R.step("bw", lambda: (pen + lo.sum()).backward())
    for i, t in enumerate(ins):
        R.grad(f"in{i}", t)


@prog()
def backward_inputs_retained_then_hook(C, R):
    g = C(feat_logits_nl)
    x, w1, w2 = mk_basic()
    h, lo = g(x, w1, w2)
    h.register_hook(R.hook("h", lambda gr: gr * 2))
    R.step("bw", lambda: lo.sum().backward(inputs=[h, x]))
    R.grad("h", h)
    R.grad("x", x)
    R.grad("w1", w1)


@prog()
def cg_grad_wrt_input_with_sum_output(C, R):
    def f(x):
        h = x.exp()
        return h, h.sum()

    g = C(f)
    x = L(3, seed=1)
    _h, s = g(x)
    R.step("g_plain", lambda: ag.grad(s, x, retain_graph=True))
    gx = R.step("g_cg", lambda: ag.grad(s, x, create_graph=True)[0])
    if gx is not None:
        R.step("gg", lambda: ag.grad(gx.sum(), x))
