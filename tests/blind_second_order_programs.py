"""Blind programs: second-order gradients through a compiled function.

A caller compiles a function ``f`` and takes a gradient through it with
``create_graph=True``, then differentiates again: gradient penalties
(``g = autograd.grad(loss, x, create_graph=True); (g.pow(2).sum()).backward()``),
Hessian-vector products (``autograd.grad(g, x, v)``), MAML-style inner steps (parameters
updated by ``p - lr * g`` and the outer loss backpropagated through the update), double
backward of ``loss + penalty`` in one ``.backward()``, ``torch.autograd.functional``
(``hvp``, ``vhp``, ``vjp``, ``jvp``, ``jacobian``, ``hessian``), ``retain_graph``
combinations, ``backward()`` twice after a penalty, third-order gradients and batched
gradients. What ``f`` does varies: plain arithmetic, matmul and nonlinearities (sigmoid,
tanh, softplus, log_softmax, norm, gelu, cross-entropy, attention), ``detach()`` and
``torch.no_grad()`` blocks inside ``f``, in-place ops on intermediates (and on inputs
that do not require grad), random ops (dropout, ``rand_like``), a Dynamo graph break
inside ``f``, BatchNorm in training mode (buffers written), views of inputs returned, outputs computed from other outputs, several outputs of which only some are
used, integer and bool outputs, custom ``torch.autograd.Function``s inside (saving with
and without ``save_for_backward``, once-differentiable or not, a backward that is not
differentiable), ``nn.Module``s (Linear, LayerNorm, small MLPs) compiled as functions of
their inputs, parameters passed as inputs, inputs that do not require grad, the caller
writing an input in place (under ``no_grad``) between the call and the second-order
backward, the caller dropping references (a temporary passed as the input), the same
tensor passed as two inputs, the compiled function called twice (or on its own output)
and both calls differentiated, ``backward(inputs=...)`` and ``allow_unused`` (where a
gradient the engine cannot reach would silently come out as None), float32 and float64, and ``autocast`` (cpu,
bfloat16) around the call. Some programs raise under eager (a second backward without
``retain_graph``, differentiating a once-differentiable custom Function twice, a
penalty on a gradient taken without ``create_graph``, a saved tensor written in place):
the compiled call must raise the same kind of error at the same step, or run and match.

Written by a helper who had not read the implementation, from the family's description
alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an ``nn.Module``
(identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``) records what the
caller observes: outputs and their flags, the gradients of each ``autograd.grad`` call,
every leaf's ``.grad`` after each backward, and the exceptions raised. ``P`` maps each
program's name to it; ``test_fidelity_blind_second_order`` runs each under eager and
under each entry point and compares the recordings.
"""

from __future__ import annotations

import gc

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from blind_fed_outputs_harness import L, W, init_params, registry, tensors

P, prog = registry()

ag = torch.autograd
agf = torch.autograd.functional
f64, f32, bf16 = torch.float64, torch.float32, torch.bfloat16


# ---------------------------------------------------------------- helpers


def wsum(o):
    """A weighted sum of the floating tensors of ``o`` that require grad."""
    tot = 0
    for t in tensors(o):
        if t.requires_grad and t.is_floating_point():
            tot = tot + (t * W(t)).sum()
    return tot


def sqsum(o):
    """A weighted sum of squares of the tensors of ``o`` (the penalty on gradients)."""
    tot = 0
    for t in tensors(o):
        tot = tot + (t * t * W(t)).sum()
    return tot


def grads(R, leaves, pre=""):
    for k, t in leaves.items():
        R.grad(pre + k, t)


def penalty(R, cf, args, wrt, leaves, loss=wsum, pen=sqsum, pre=""):
    """Call, take ``g`` (``create_graph=True``) of ``loss(out)`` w.r.t. ``wrt``, backward
    the penalty ``pen(g)``, record the leaves' grads."""
    out = R.step(pre + "fwd", lambda: cf(*args))
    gs = R.step(pre + "g", lambda: ag.grad(loss(out), wrt, create_graph=True))
    if gs is not None:
        R.step(pre + "pen", lambda: pen(gs).backward())
    grads(R, leaves, pre)
    return out, gs


def hvp(R, cf, args, wrt, vs, loss=wsum, pre=""):
    """Call, take ``g`` (``create_graph=True``), then ``autograd.grad(g, wrt, vs)``."""
    out = R.step(pre + "fwd", lambda: cf(*args))
    gs = R.step(pre + "g", lambda: ag.grad(loss(out), wrt, create_graph=True))
    return R.step(pre + "hv", lambda: ag.grad(gs, wrt, vs))


def V(*shape, seed=50, dtype=f64):
    return L(*shape, seed=seed, dtype=dtype, rg=False)


def mlp(seed=0, dims=(4, 6, 3), act=nn.Tanh, dtype=f64):
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1], dtype=dtype))
        if i < len(dims) - 2:
            layers.append(act())
    return init_params(nn.Sequential(*layers), seed)


def param_grads(R, m, pre="p."):
    for n, p in m.named_parameters():
        R.grad(pre + n, p)


# =====================================================================
# A. gradient penalties through arithmetic and nonlinearities
# =====================================================================


@prog()
def gp_mul_sin_pow(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: (x * x).sin() + x.pow(3)), (x,), (x,), {"x": x})


@prog()
def gp_matmul_tanh_wrt_input(C, R):
    x, w = L(3, 4), L(4, 5, seed=1)
    penalty(R, C(lambda x, w: torch.tanh(x @ w)), (x, w), (x,), {"x": x, "w": w})


@prog()
def gp_log_softmax(C, R):
    x, w = L(3, 4), L(4, 5, seed=1)
    cf = C(lambda x, w: F.log_softmax(x @ w, dim=1))
    penalty(R, cf, (x, w), (x,), {"x": x, "w": w})


@prog()
def gp_normalize_by_global_norm(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: x / x.norm()), (x,), (x,), {"x": x})


@prog()
def gp_relu_mlp_wrt_input(C, R):
    x, w1, w2 = L(3, 4), L(4, 6, seed=1), L(6, 2, seed=2)
    cf = C(lambda x, w1, w2: torch.relu(x @ w1) @ w2)
    penalty(R, cf, (x, w1, w2), (x,), {"x": x, "w1": w1, "w2": w2})


@prog()
def gp_cross_entropy(C, R):
    x, w = L(3, 4), L(4, 5, seed=1)
    t = torch.tensor([1, 4, 0])
    cf = C(lambda x, w, t: F.cross_entropy(x @ w, t))
    penalty(R, cf, (x, w, t), (x, w), {"x": x, "w": w})


@prog()
def gp_softmax_attention(C, R):
    q, k, v = L(3, 4), L(5, 4, seed=1), L(5, 2, seed=2)
    cf = C(lambda q, k, v: torch.softmax(q @ k.t() / 2, dim=-1) @ v)
    penalty(R, cf, (q, k, v), (q, k), {"q": q, "k": k, "v": v})


@prog()
def gp_layer_norm_functional(C, R):
    x, w, b = L(3, 4), L(4, seed=1), L(4, seed=2)
    cf = C(lambda x, w, b: F.layer_norm(x, (4,), w, b))
    penalty(R, cf, (x, w, b), (x,), {"x": x, "w": w, "b": b})


@prog()
def gp_third_order(C, R):
    x = L(5)
    out = R.step("fwd", lambda: C(lambda x: x.pow(4).sin())(x))
    g1 = R.step("g1", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    g2 = R.step("g2", lambda: ag.grad((g1 * W(g1)).sum(), x, create_graph=True)[0])
    R.step("g3", lambda: ag.grad((g2 * W(g2)).sum(), x))


@prog()
def gp_float32_tanh_mlp(C, R):
    x, w1, w2 = L(3, 4, dtype=f32), L(4, 6, seed=1, dtype=f32), L(6, 1, seed=2, dtype=f32)
    cf = C(lambda x, w1, w2: torch.tanh(x @ w1) @ w2)
    penalty(R, cf, (x, w1, w2), (x,), {"x": x, "w1": w1, "w2": w2})


@prog()
def gp_mixed_f32_f64_inputs(C, R):
    x, w = L(3, 4, dtype=f32), L(3, 4, seed=1)
    penalty(R, C(lambda x, w: (x * w).sin()), (x, w), (x, w), {"x": x, "w": w})


# =====================================================================
# B. Hessian-vector products
# =====================================================================


@prog()
def hvp_cubic_grad_of_grad(C, R):
    x, v = L(5), V(5)
    hvp(R, C(lambda x: (x**3).sum() + (x.sin() * x).sum()), (x,), (x,), (v,))
    R.grad("x", x)


@prog()
def hvp_mlp_params(C, R):
    x, w1, w2 = L(3, 4, rg=False), L(4, 5, seed=1), L(5, 1, seed=2)
    v1, v2 = V(4, 5, seed=51), V(5, 1, seed=52)
    cf = C(lambda x, w1, w2: (torch.tanh(x @ w1) @ w2).pow(2).mean())
    hvp(R, cf, (x, w1, w2), (w1, w2), (v1, v2))
    grads(R, {"w1": w1, "w2": w2})


@prog()
def hvp_functional(C, R):
    x, v = L(3, 4), V(3, 4)
    R.step("hvp", lambda: agf.hvp(C(lambda x: (x.tanh() ** 2).sum()), x, v))
    R.grad("x", x)


@prog()
def vhp_functional_two_inputs(C, R):
    x, w, vx, vw = L(3, 4), L(4, seed=1), V(3, 4), V(4, seed=51)
    cf = C(lambda x, w: F.softplus(x @ w).sum())
    R.step("vhp", lambda: agf.vhp(cf, (x, w), (vx, vw)))


@prog()
def vjp_functional_create_graph_then_backward(C, R):
    x, v = L(3, 4), V(3, 4)
    res = R.step("vjp", lambda: agf.vjp(C(lambda x: x.sin() * x), x, v, create_graph=True))
    R.step("bw", lambda: sqsum(res[1]).backward())
    R.grad("x", x)


@prog()
def jvp_functional(C, R):
    x, v = L(3, 4), V(3, 4)
    R.step("jvp", lambda: agf.jvp(C(lambda x: x.exp() * x.cos()), x, v))


@prog()
def hessian_functional_create_graph_backward(C, R):
    x = L(3)
    h = R.step("hess", lambda: agf.hessian(C(lambda x: x.pow(3).prod()), x, create_graph=True))
    R.step("bw", lambda: (h * W(h)).sum().backward())
    R.grad("x", x)


@prog()
def jacobian_create_graph_then_backward(C, R):
    x = L(3)
    j = R.step("jac", lambda: agf.jacobian(C(lambda x: x.tanh() * x.sum()), x, create_graph=True))
    R.step("bw", lambda: sqsum(j).backward())
    R.grad("x", x)


@prog()
def hvp_grad_outputs_require_grad(C, R):
    x, v = L(3, 4), L(3, 4, seed=51)
    out = R.step("fwd", lambda: C(lambda x: x.pow(3) * x.cos())(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    hv = R.step("hv", lambda: ag.grad(g, x, v, create_graph=True)[0])
    R.step("bw", lambda: sqsum(hv).backward())
    grads(R, {"x": x, "v": v})


@prog()
def hvp_is_grads_batched(C, R):
    x = L(3)
    out = R.step("fwd", lambda: C(lambda x: (x.exp() * x.roll(1)).sum())(x))
    g = R.step("g", lambda: ag.grad(out, x, create_graph=True)[0])
    eye = torch.eye(3, dtype=f64)
    R.step("hess_rows", lambda: ag.grad(g, x, eye, is_grads_batched=True))


@prog()
def hvp_twice_with_retain(C, R):
    x, v1, v2 = L(4), V(4), V(4, seed=52)
    out = R.step("fwd", lambda: C(lambda x: (x.sin() * x.pow(2)).sum())(x))
    g = R.step("g", lambda: ag.grad(out, x, create_graph=True)[0])
    R.step("hv1", lambda: ag.grad(g, x, v1, retain_graph=True))
    R.step("hv2", lambda: ag.grad(g, x, v2))


@prog()
def hvp_twice_without_retain_raises(C, R):
    x, v1, v2 = L(4), V(4), V(4, seed=52)
    out = R.step("fwd", lambda: C(lambda x: (x.sin() * x.pow(2)).sum())(x))
    g = R.step("g", lambda: ag.grad(out, x, create_graph=True)[0])
    R.step("hv1", lambda: ag.grad(g, x, v1))
    R.step("hv2", lambda: ag.grad(g, x, v2))


@prog()
def hvp_float32_log_softmax(C, R):
    x, w, v = L(3, 4, dtype=f32), L(4, 5, seed=1, dtype=f32), V(4, 5, dtype=f32)
    cf = C(lambda x, w: -F.log_softmax(x @ w, dim=1)[:, 0].sum())
    hvp(R, cf, (x, w), (w,), (v,))


@prog()
def hvp_then_backward_of_hv(C, R):
    x, v = L(4), V(4)
    out = R.step("fwd", lambda: C(lambda x: (x.tanh() * x.exp()).sum())(x))
    g = R.step("g", lambda: ag.grad(out, x, create_graph=True)[0])
    hv = R.step("hv", lambda: ag.grad(g, x, v, create_graph=True)[0])
    R.step("bw", lambda: (hv * W(hv)).sum().backward())
    R.grad("x", x)


# =====================================================================
# C. MAML-style inner steps
# =====================================================================


def _lin_loss(x, w, b, y):
    return ((torch.tanh(x @ w + b) - y) ** 2).mean()


def _maml_data():
    xs, ys = L(4, 3, seed=10, rg=False), L(4, 2, seed=11, rg=False)
    xq, yq = L(4, 3, seed=12, rg=False), L(4, 2, seed=13, rg=False)
    return xs, ys, xq, yq


@prog()
def maml_one_inner_step(C, R):
    cf = C(_lin_loss)
    w, b = L(3, 2, seed=1), L(2, seed=2)
    xs, ys, xq, yq = _maml_data()
    gw, gb = R.step("inner_g", lambda: ag.grad(cf(xs, w, b, ys), (w, b), create_graph=True))
    w2, b2 = w - 0.5 * gw, b - 0.5 * gb
    outer = R.step("outer", lambda: cf(xq, w2, b2, yq))
    R.step("bw", lambda: outer.backward())
    grads(R, {"w": w, "b": b})


@prog()
def maml_two_inner_steps(C, R):
    cf = C(_lin_loss)
    w, b = L(3, 2, seed=1), L(2, seed=2)
    xs, ys, xq, yq = _maml_data()
    fw, fb = w, b
    for i in range(2):
        gw, gb = R.step(
            f"inner_g{i}",
            lambda fw=fw, fb=fb: ag.grad(cf(xs, fw, fb, ys), (fw, fb), create_graph=True),
        )
        fw, fb = fw - 0.3 * gw, fb - 0.3 * gb
    outer = R.step("outer", lambda: cf(xq, fw, fb, yq))
    R.step("bw", lambda: outer.backward())
    grads(R, {"w": w, "b": b})


@prog()
def maml_first_order_no_create_graph(C, R):
    cf = C(_lin_loss)
    w, b = L(3, 2, seed=1), L(2, seed=2)
    xs, ys, xq, yq = _maml_data()
    gw, gb = R.step("inner_g", lambda: ag.grad(cf(xs, w, b, ys), (w, b)))
    w2, b2 = w - 0.5 * gw, b - 0.5 * gb
    outer = R.step("outer", lambda: cf(xq, w2, b2, yq))
    R.step("bw", lambda: outer.backward())
    grads(R, {"w": w, "b": b})


@prog()
def maml_mlp_param_list(C, R):
    def f(x, y, w1, b1, w2, b2):
        return F.cross_entropy(F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2), y)

    cf = C(f)
    ps = [L(5, 3, seed=1), L(5, seed=2), L(4, 5, seed=3), L(4, seed=4)]
    xs, xq = L(6, 3, seed=10, rg=False), L(6, 3, seed=12, rg=False)
    ys, yq = torch.tensor([0, 1, 2, 3, 0, 1]), torch.tensor([3, 2, 1, 0, 0, 2])
    gs = R.step("inner_g", lambda: ag.grad(cf(xs, ys, *ps), ps, create_graph=True))
    fast = [p - 0.4 * g for p, g in zip(ps, gs)]
    outer = R.step("outer", lambda: cf(xq, yq, *fast))
    R.step("bw", lambda: outer.backward())
    grads(R, {f"p{i}": p for i, p in enumerate(ps)})


@prog()
def maml_module_params_as_inputs(C, R):
    lin = init_params(nn.Linear(3, 2, dtype=f64), 3)
    cf = C(lambda x, w, b: F.linear(x, w, b).tanh().pow(2).mean())
    xs, _, xq, _ = _maml_data()
    gw, gb = R.step(
        "inner_g",
        lambda: ag.grad(cf(xs, lin.weight, lin.bias), (lin.weight, lin.bias), create_graph=True),
    )
    outer = R.step("outer", lambda: cf(xq, lin.weight - 0.5 * gw, lin.bias - 0.5 * gb))
    R.step("bw", lambda: outer.backward())
    param_grads(R, lin)


@prog()
def maml_learned_lr(C, R):
    cf = C(_lin_loss)
    w, b, lr = L(3, 2, seed=1), L(2, seed=2), torch.tensor(0.3, dtype=f64, requires_grad=True)
    xs, ys, xq, yq = _maml_data()
    gw, gb = R.step("inner_g", lambda: ag.grad(cf(xs, w, b, ys), (w, b), create_graph=True))
    outer = R.step("outer", lambda: cf(xq, w - lr * gw, b - lr * gb, yq))
    R.step("bw", lambda: outer.backward())
    grads(R, {"w": w, "b": b, "lr": lr})


# =====================================================================
# D. loss + penalty in one backward
# =====================================================================


@prog()
def loss_plus_penalty_wrt_input(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.sigmoid(x @ w))(x, w))
    loss = wsum(out)
    g = R.step("g", lambda: ag.grad(loss, x, create_graph=True)[0])
    R.step("bw", lambda: (loss + sqsum(g)).backward())
    grads(R, {"x": x, "w": w})


@prog()
def loss_plus_penalty_wrt_weights(C, R):
    x, w1, w2 = L(3, 4, rg=False), L(4, 5, seed=1), L(5, 2, seed=2)
    out = R.step("fwd", lambda: C(lambda x, a, b: F.softplus(x @ a) @ b)(x, w1, w2))
    loss = wsum(out)
    g = R.step("g", lambda: ag.grad(loss, (w1, w2), create_graph=True))
    R.step("bw", lambda: (loss + 0.1 * sqsum(g)).backward())
    grads(R, {"w1": w1, "w2": w2})


@prog()
def wgan_gp_interpolates_module(C, R):
    D = mlp(1, (4, 8, 1))
    cD = C(D)
    real, fake = L(5, 4, seed=3, rg=False), L(5, 4, seed=4, rg=False)
    a = torch.linspace(0.1, 0.9, 5, dtype=f64).unsqueeze(1)
    xh = (a * real + (1 - a) * fake).requires_grad_()
    d = R.step("d", lambda: cD(xh))
    g = R.step("g", lambda: ag.grad(d.sum(), xh, create_graph=True)[0])
    gp = R.step("gp", lambda: ((g.norm(dim=1) - 1) ** 2).mean())
    R.step("bw", lambda: (cD(fake).mean() - cD(real).mean() + 10 * gp).backward())
    param_grads(R, D)
    R.grad("xh", xh)


@prog()
def r1_penalty_on_real_data(C, R):
    D = mlp(2, (4, 6, 1), act=nn.Softplus)
    cD = C(D)
    x = L(5, 4, seed=5)
    d = R.step("d", lambda: cD(x))
    g = R.step("g", lambda: ag.grad(d.sum(), x, create_graph=True)[0])
    R.step("bw", lambda: (F.softplus(-d).mean() + 5 * g.pow(2).sum(1).mean()).backward())
    param_grads(R, D)
    R.grad("x", x)


@prog()
def loss_plus_penalty_then_loss_backward_again_raises(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.tanh(x @ w) * x.sum(1, keepdim=True))(x, w))
    loss = wsum(out)
    g = R.step("g", lambda: ag.grad(loss, x, create_graph=True)[0])
    R.step("bw", lambda: (loss + sqsum(g)).backward())
    grads(R, {"x": x, "w": w}, "1.")
    R.step("bw_again", lambda: loss.backward())
    grads(R, {"x": x, "w": w}, "2.")


@prog()
def loss_plus_penalty_retain_then_penalty_again(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.tanh(x @ w).exp())(x, w))
    loss = wsum(out)
    g = R.step("g", lambda: ag.grad(loss, x, create_graph=True)[0])
    pen = sqsum(g)
    R.step("bw", lambda: (loss + pen).backward(retain_graph=True))
    grads(R, {"x": x, "w": w}, "1.")
    R.step("bw_pen", lambda: pen.backward())
    grads(R, {"x": x, "w": w}, "2.")


# =====================================================================
# E. retain_graph and backward patterns
# =====================================================================


@prog()
def penalty_backward_twice_raises(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.sin() * x.exp())(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    pen = sqsum(g)
    R.step("bw1", lambda: pen.backward())
    grads(R, {"x": x}, "1.")
    R.step("bw2", lambda: pen.backward())
    grads(R, {"x": x}, "2.")


@prog()
def penalty_backward_twice_with_retain(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: (x @ w).tanh())(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    pen = sqsum(g)
    R.step("bw1", lambda: pen.backward(retain_graph=True))
    grads(R, {"x": x, "w": w}, "1.")
    R.step("bw2", lambda: pen.backward())
    grads(R, {"x": x, "w": w}, "2.")


@prog()
def first_order_backward_after_create_graph_grad(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: (x @ w).sigmoid())(x, w))
    loss = wsum(out)
    g = R.step("g", lambda: ag.grad(loss, x, create_graph=True)[0])
    R.step("bw_loss", lambda: loss.backward())
    grads(R, {"x": x, "w": w}, "1.")
    R.step("bw_pen", lambda: sqsum(g).backward())
    grads(R, {"x": x, "w": w}, "2.")


@prog()
def grad_without_create_graph_then_penalty_raises(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.pow(3))(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x)[0])
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def create_graph_with_retain_false_then_penalty(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: (x * x).sin())(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True, retain_graph=False)[0])
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def create_graph_retain_false_linear_fn(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: (x @ w) * 3)(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True, retain_graph=False)[0])
    R.step("pen", lambda: sqsum(g).backward())
    grads(R, {"x": x, "w": w})


@prog()
def backward_create_graph_then_penalty_on_dot_grad(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.tanh(x @ w))(x, w))
    R.step("bw1", lambda: wsum(out).backward(create_graph=True))
    gx = R.grad("1.x", x)
    R.grad("1.w", w)
    x.grad, w.grad = None, None
    R.step("pen", lambda: sqsum(gx).backward())
    grads(R, {"x": x, "w": w}, "2.")


@prog()
def backward_then_grad_create_graph_raises(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.exp() * x)(x))
    loss = wsum(out)
    R.step("bw", lambda: loss.backward())
    R.step("g", lambda: ag.grad(loss, x, create_graph=True))
    R.grad("x", x)


@prog()
def penalty_backward_inputs_subset(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: F.softplus(x @ w))(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward(inputs=[w]))
    grads(R, {"x": x, "w": w})


@prog()
def grad_allow_unused_penalty(C, R):
    x, u = L(3, 4), L(2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, u: x.tanh().pow(2))(x, u))
    gs = R.step("g", lambda: ag.grad(wsum(out), (x, u), create_graph=True, allow_unused=True))
    R.step("pen", lambda: sqsum([g for g in gs if g is not None]).backward())
    grads(R, {"x": x, "u": u})


@prog()
def penalty_on_grad_wrt_nonleaf_input(C, R):
    x = L(3, 4)
    x2 = x.exp()
    out = R.step("fwd", lambda: C(lambda a: (a * a).log1p())(x2))
    g = R.step("g", lambda: ag.grad(wsum(out), x2, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def grad_wrt_output_and_input(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.sin().pow(2))(x))
    loss = (out.exp() * W(out)).sum()
    gs = R.step("g", lambda: ag.grad(loss, (out, x), create_graph=True))
    R.step("pen", lambda: sqsum(gs).backward())
    R.grad("x", x)


# =====================================================================
# F. detach() and no_grad() inside f
# =====================================================================


@prog()
def fn_detach_one_factor(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: x.sin() * x.detach().pow(2)), (x,), (x,), {"x": x})


@prog()
def fn_no_grad_scale(C, R):
    def f(x):
        with torch.no_grad():
            s = x.norm()
        return x * x / s

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def fn_returns_detached_and_live(C, R):
    def f(x, w):
        y = x @ w
        return y.detach(), y.tanh()

    x, w = L(3, 4), L(4, 2, seed=1)
    penalty(R, C(f), (x, w), (x, w), {"x": x, "w": w})


@prog()
def fn_no_grad_inplace_on_intermediate(C, R):
    def f(x):
        y = x * 2
        with torch.no_grad():
            y.add_(1)
        return y.sin() * x

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


# =====================================================================
# G. in-place ops on intermediates
# =====================================================================


@prog()
def inplace_mul_by_input(C, R):
    def f(x):
        y = x * 2
        y.mul_(x)
        return y.sin()

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def inplace_relu_after_matmul(C, R):
    def f(x, w):
        y = x @ w
        y.relu_()
        return y.pow(2)

    x, w = L(3, 4), L(4, 5, seed=1)
    penalty(R, C(f), (x, w), (x,), {"x": x, "w": w})


@prog()
def inplace_on_nonleaf_input_penalty_backward_inputs(C, R):
    def f(a):
        a.mul_(2)
        return a.sin() * a

    x = L(3, 4)
    x2 = x * 1
    out = R.step("fwd", lambda: C(f)(x2))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward(inputs=[x]))
    R.grad("x", x)


@prog()
def fn_writes_nograd_input_then_penalty(C, R):
    def f(x, w):
        x.mul_(2)
        return (x @ w).tanh()

    x, w = L(3, 4, rg=False), L(4, 2, seed=1)
    penalty(R, C(f), (x, w), (w,), {"w": w})
    R.rec("x", x)


@prog()
def inplace_on_view_of_intermediate(C, R):
    def f(x):
        y = x * 1
        y[0].mul_(3)
        return y.exp()

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def inplace_on_saved_sigmoid_raises(C, R):
    def f(x):
        y = torch.sigmoid(x)
        y.mul_(2)
        return y

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def inplace_scale_on_nonleaf_input(C, R):
    def f(a):
        a.mul_(2)
        return a.sin() * a

    x = L(3, 4)
    x2 = x * 1
    penalty(R, C(f), (x2,), (x,), {"x": x})
    R.rec("x2", x2)


# =====================================================================
# H. views of inputs returned; I. outputs from outputs; J. partly used outputs
# =====================================================================


@prog()
def returns_row_view_and_sin(C, R):
    x = L(3, 4)
    loss = lambda o: (o[0].pow(3) * W(o[0])).sum() + wsum(o[1])  # noqa: E731
    penalty(R, C(lambda x: (x[0], x.sin())), (x,), (x,), {"x": x}, loss=loss)


@prog()
def returns_flat_view_cubed_by_caller(C, R):
    x = L(3, 4)
    loss = lambda o: (o[0].pow(3) * W(o[0])).sum() + wsum(o[1])  # noqa: E731
    penalty(R, C(lambda x: (x.view(-1), x.exp())), (x,), (x,), {"x": x}, loss=loss)


@prog()
def returns_input_itself_and_square(C, R):
    x = L(3, 4)
    loss = lambda o: (o[0].sin() * W(o[0])).sum() + wsum(o[1])  # noqa: E731
    out, _ = penalty(R, C(lambda x: (x, x * x)), (x,), (x,), {"x": x}, loss=loss)
    R.rec("out0_is_x", out[0] is x)


@prog()
def output_from_output_a_and_a_squared(C, R):
    def f(x):
        a = x.sin()
        return a, a * a

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def output_and_its_sum(C, R):
    def f(x, w):
        a = torch.tanh(x @ w)
        return a, a.sum()

    x, w = L(3, 4), L(4, 2, seed=1)
    loss = lambda o: wsum(o[0]) * o[1]  # noqa: E731
    penalty(R, C(f), (x, w), (x, w), {"x": x, "w": w}, loss=loss)


@prog()
def three_outputs_use_middle(C, R):
    x = L(3, 4)
    loss = lambda o: wsum(o[1])  # noqa: E731
    cf = C(lambda x: (x.sin(), x.cos() * x, x.exp()))
    penalty(R, cf, (x,), (x,), {"x": x}, loss=loss)


@prog()
def two_outputs_penalty_on_one_loss_on_other(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: ((x @ w).tanh(), (x * x).sum()))(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out[0]), x, create_graph=True)[0])
    R.step("bw", lambda: (sqsum(g) + out[1]).backward())
    grads(R, {"x": x, "w": w})


# =====================================================================
# K. integer and bool outputs
# =====================================================================


@prog()
def int_argmax_output_used_for_gather(C, R):
    def f(x, w):
        y = (x @ w).tanh()
        return y, y.argmax(dim=1)

    x, w = L(3, 4), L(4, 5, seed=1)
    loss = lambda o: o[0].gather(1, o[1].unsqueeze(1)).pow(2).sum() + wsum(o[0])  # noqa: E731
    penalty(R, C(f), (x, w), (x,), {"x": x, "w": w}, loss=loss)


@prog()
def bool_mask_output_used_in_penalty(C, R):
    def f(x):
        y = x.pow(3) - x
        return y, y > 0

    x = L(3, 4)
    out = R.step("fwd", lambda: C(f)(x))
    g = R.step("g", lambda: ag.grad(wsum(out[0]), x, create_graph=True)[0])
    R.step("pen", lambda: (g.pow(2) * out[1]).sum().backward())
    R.grad("x", x)


# =====================================================================
# L. custom autograd Functions inside
# =====================================================================


class Cube(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


class ScaledSinCtxAttr(ag.Function):
    """Keeps its input on ``ctx`` (no ``save_for_backward``)."""

    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        ctx.k = 2.0
        return x.sin() * 2.0

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k * ctx.x.cos()


class OnceSquare(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class DetachedBackward(ag.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.pow(2)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (2 * x * g).detach()


class TwoOut(ag.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y, x + y * y

    @staticmethod
    def backward(ctx, ga, gb):
        x, y = ctx.saved_tensors
        return ga * y + gb, ga * x + 2 * y * gb


class ExpSavesOutput(ag.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class SortedWithIndex(ag.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argsort(dim=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x)
        return x * x, idx

    @staticmethod
    def backward(ctx, g, _gi):
        (x,) = ctx.saved_tensors
        return 2 * x * g


@prog()
def custom_cube_penalty(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: Cube.apply(x).sin()), (x,), (x,), {"x": x})


@prog()
def custom_cube_hvp(C, R):
    x, v = L(5), V(5)
    hvp(R, C(lambda x: Cube.apply(x * 2).sum()), (x,), (x,), (v,))


@prog()
def custom_ctx_attr_penalty(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: ScaledSinCtxAttr.apply(x) * x), (x,), (x,), {"x": x})


@prog()
def custom_once_differentiable_penalty_raises(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: OnceSquare.apply(x).sin()), (x,), (x,), {"x": x})


@prog()
def custom_once_differentiable_fed_constant_grad(C, R):
    # the gradient reaching the once-differentiable backward does not require grad: its
    # result is a constant and the penalty differentiates only through sin
    x = L(3, 4)
    penalty(R, C(lambda x: OnceSquare.apply(x.sin())), (x,), (x,), {"x": x})


@prog()
def custom_once_differentiable_grad_flags(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: OnceSquare.apply(x) * 3)(x))
    R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True))


@prog()
def custom_once_differentiable_off_the_penalty_path(C, R):
    x, w = L(3, 4), L(3, 4, seed=1)
    cf = C(lambda x, w: (x * w).sin() + OnceSquare.apply(w))
    penalty(R, cf, (x, w), (x,), {"x": x, "w": w})


@prog()
def custom_detached_backward_penalty_raises(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: DetachedBackward.apply(x * 2)), (x,), (x,), {"x": x})


@prog()
def custom_two_outputs_penalty(C, R):
    x, y = L(3, 4), L(3, 4, seed=1)
    penalty(R, C(lambda x, y: TwoOut.apply(x.sin(), y)), (x, y), (x, y), {"x": x, "y": y})


@prog()
def custom_saves_output_penalty(C, R):
    x = L(3, 4)
    penalty(R, C(lambda x: ExpSavesOutput.apply(x * 0.5) * x), (x,), (x,), {"x": x})


@prog()
def custom_mark_non_differentiable_index(C, R):
    def f(x):
        y, idx = SortedWithIndex.apply(x)
        return y.gather(1, idx), idx

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def custom_inside_mlp_hvp(C, R):
    x, w, v = L(3, 4, rg=False), L(4, 2, seed=1), V(4, 2)
    hvp(R, C(lambda x, w: Cube.apply(torch.tanh(x @ w)).sum()), (x, w), (w,), (v,))


# =====================================================================
# L2. random ops inside f (eager saves the draw; a replay would draw again)
# =====================================================================


@prog()
def dropout_inside_penalty(C, R):
    x = L(4, 5)
    cf = C(lambda x: F.dropout(x.sin(), 0.5, training=True) * x)
    penalty(R, cf, (x,), (x,), {"x": x})


@prog()
def rand_noise_inside_penalty(C, R):
    x = L(5)
    penalty(R, C(lambda x: (x + torch.rand_like(x)) ** 3), (x,), (x,), {"x": x})


@prog()
def rand_noise_penalty_backward_inputs(C, R):
    x = L(5)
    out = R.step("fwd", lambda: C(lambda x: (x + torch.rand_like(x)) ** 3)(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward(inputs=[x]))
    R.grad("x", x)


@prog()
def rand_noise_inside_hvp(C, R):
    x, v = L(5), V(5)
    hvp(R, C(lambda x: ((x + torch.rand_like(x)) ** 3).sum()), (x,), (x,), (v,))


@prog()
def rand_noise_inside_functional_hvp(C, R):
    x, v = L(5), V(5)
    R.step("hvp", lambda: agf.hvp(C(lambda x: ((x + torch.rand_like(x)) ** 3).sum()), x, v))


# =====================================================================
# M. nn.Modules compiled as functions of their inputs
# =====================================================================


@prog()
def module_linear_penalty_wrt_input(C, R):
    m = init_params(nn.Linear(4, 3, dtype=f64))
    cm = C(m)
    x = L(5, 4)
    loss = lambda o: (o.tanh() * W(o)).sum()  # noqa: E731
    penalty(R, cm, (x,), (x,), {"x": x}, loss=loss)
    param_grads(R, m)


@prog()
def module_layernorm_penalty(C, R):
    m = init_params(nn.LayerNorm(4, dtype=f64), 1)
    x = L(3, 4)
    penalty(R, C(m), (x,), (x,), {"x": x})
    param_grads(R, m)


@prog()
def module_mlp_hvp_wrt_input(C, R):
    m = mlp(2, (4, 5, 1), act=nn.Softplus)
    x, v = L(3, 4), V(3, 4)
    hvp(R, C(m), (x,), (x,), (v,))
    param_grads(R, m)


@prog()
def module_mlp_penalty_wrt_params(C, R):
    m = mlp(3, (4, 5, 2))
    x = L(3, 4, rg=False)
    ps = tuple(m.parameters())
    penalty(R, C(m), (x,), ps, {})
    param_grads(R, m)


@prog()
def module_linear_called_twice_penalty(C, R):
    m = init_params(nn.Linear(4, 4, dtype=f64), 4)
    cm = C(m)
    x = L(2, 4)
    penalty(R, lambda x: cm(cm(x).tanh()), (x,), (x,), {"x": x})
    param_grads(R, m)


@prog()
def module_batchnorm_train_penalty(C, R):
    lin1, lin2 = nn.Linear(4, 5, dtype=f64), nn.Linear(5, 1, dtype=f64)
    m = init_params(nn.Sequential(lin1, nn.BatchNorm1d(5, dtype=f64), nn.Tanh(), lin2))
    x = L(6, 4)
    penalty(R, C(m), (x,), (x,), {"x": x})
    param_grads(R, m)
    R.rec("running_mean", m[1].running_mean)
    R.rec("running_var", m[1].running_var)
    R.rec("num_batches_tracked", m[1].num_batches_tracked)


@prog()
def module_mlp_float32_penalty(C, R):
    m = mlp(5, (4, 6, 1), dtype=f32)
    x = L(3, 4, dtype=f32)
    penalty(R, C(m), (x,), (x,), {"x": x})
    param_grads(R, m)


@prog()
def module_layernorm_mlp_loss_plus_penalty(C, R):
    m = init_params(
        nn.Sequential(
            nn.Linear(4, 6, dtype=f64),
            nn.LayerNorm(6, dtype=f64),
            nn.GELU(),
            nn.Linear(6, 1, dtype=f64),
        ),
        6,
    )
    x = L(3, 4)
    d = R.step("fwd", lambda: C(m)(x))
    g = R.step("g", lambda: ag.grad(d.sum(), x, create_graph=True)[0])
    R.step("bw", lambda: (d.mean() + sqsum(g)).backward())
    param_grads(R, m)
    R.grad("x", x)


# =====================================================================
# N. inputs that do not require grad
# =====================================================================


@prog()
def nograd_constant_input(C, R):
    x, c = L(3, 4), V(3, 4)
    penalty(R, C(lambda x, c: (x * c).sin() * x), (x, c), (x,), {"x": x, "c": c})


@prog()
def nograd_data_hessian_wrt_weight(C, R):
    x, w = L(3, 4, rg=False), L(4, seed=1)
    penalty(R, C(lambda x, w: (x @ w).sigmoid()), (x, w), (w,), {"x": x, "w": w})


@prog()
def all_inputs_nograd_grad_raises(C, R):
    x = L(3, 4, rg=False)
    out = R.step("fwd", lambda: C(lambda x: x.sin())(x))
    R.step("g", lambda: ag.grad(out.sum(), x, create_graph=True))


@prog()
def output_not_requiring_grad_among_outputs(C, R):
    x, c = L(3, 4), V(3, 4)
    penalty(R, C(lambda x, c: ((x * c).exp(), c * 2)), (x, c), (x,), {"x": x})


# =====================================================================
# O. the caller writes an input in place (under no_grad) after the call
# =====================================================================


@prog()
def caller_writes_data_input_before_penalty(C, R):
    x, w = L(3, 4, rg=False), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.tanh(x @ w))(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), w, create_graph=True)[0])
    with torch.no_grad():
        x.mul_(2)
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("w", w)


@prog()
def caller_writes_weight_leaf_before_penalty(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.sigmoid(x @ w))(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    with torch.no_grad():
        w.add_(1)
    R.step("pen", lambda: sqsum(g).backward())
    grads(R, {"x": x, "w": w})


@prog()
def caller_writes_unsaved_input_before_penalty(C, R):
    x, w = L(3, 4, rg=False), L(3, 4, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: x + w * w * w)(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), w, create_graph=True)[0])
    with torch.no_grad():
        x.mul_(2)
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("w", w)


@prog()
def caller_writes_unsaved_weight_leaf(C, R):
    x, w = L(3, 4), L(3, 4, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: x.exp() * w.sum())(x, w))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    with torch.no_grad():
        w.mul_(3)
    R.step("pen", lambda: sqsum(g).backward())
    grads(R, {"x": x, "w": w})


@prog()
def caller_writes_input_between_call_and_grad(C, R):
    x, w = L(3, 4, rg=False), L(4, 2, seed=1)
    out = R.step("fwd", lambda: C(lambda x, w: torch.tanh(x @ w))(x, w))
    with torch.no_grad():
        x.add_(0.5)
    g = R.step("g", lambda: ag.grad(wsum(out), w, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("w", w)


@prog()
def caller_writes_output_before_grad(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: (x * 2).exp())(x))
    with torch.no_grad():
        out.add_(1)
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def caller_writes_output_after_grad_before_penalty(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: (x * 2).exp())(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    with torch.no_grad():
        out.add_(1)
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def caller_writes_input_before_hvp(C, R):
    x, w, v = L(3, 4, rg=False), L(4, seed=1), V(4)
    out = R.step("fwd", lambda: C(lambda x, w: F.softplus(x @ w).sum())(x, w))
    g = R.step("g", lambda: ag.grad(out, w, create_graph=True)[0])
    with torch.no_grad():
        x.sub_(1)
    R.step("hv", lambda: ag.grad(g, w, v))


@prog()
def caller_writes_leaf_input_saved_by_penalty(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.pow(3))(x))
    g = R.step("g", lambda: ag.grad(wsum(out), x, create_graph=True)[0])
    with torch.no_grad():
        x.mul_(0.5)
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


# =====================================================================
# P. the caller drops references
# =====================================================================


@prog()
def del_output_before_penalty(C, R):
    x = L(3, 4)
    out = R.step("fwd", lambda: C(lambda x: x.sin().exp())(x))
    g = R.step("g", lambda out=out: ag.grad(wsum(out), x, create_graph=True)[0])
    del out
    gc.collect()
    R.step("pen", lambda: sqsum(g).backward())
    R.grad("x", x)


@prog()
def del_compiled_fn_before_penalty(C, R):
    x, w = L(3, 4), L(4, 2, seed=1)
    cf = C(lambda x, w: torch.tanh(x @ w))
    out = R.step("fwd", lambda cf=cf: cf(x, w))
    g = R.step("g", lambda out=out: ag.grad(wsum(out), x, create_graph=True)[0])
    del cf, out
    gc.collect()
    R.step("pen", lambda: sqsum(g).backward())
    grads(R, {"x": x, "w": w})


# =====================================================================
# Q. the compiled function called twice
# =====================================================================


@prog()
def called_twice_product_of_grads(C, R):
    x = L(3, 4)
    cf = C(lambda x: x.sin() * x)
    y1 = R.step("fwd1", lambda: cf(x))
    y2 = R.step("fwd2", lambda: cf(x * 2))
    g1 = R.step("g1", lambda: ag.grad(wsum(y1), x, create_graph=True)[0])
    g2 = R.step("g2", lambda: ag.grad(wsum(y2), x, create_graph=True)[0])
    R.step("bw", lambda: (g1 * g2).sum().backward())
    R.grad("x", x)


@prog()
def nested_call_on_own_output(C, R):
    x = L(3, 4)
    cf = C(lambda x: x.tanh() * 1.5)
    penalty(R, lambda x: cf(cf(x)), (x,), (x,), {"x": x})


@prog()
def temporary_input_dropped_by_caller(C, R):
    x = L(3, 4)
    cf = C(lambda a: a.exp() * 2)
    penalty(R, lambda x: cf(x * 3), (x,), (x,), {"x": x})


@prog()
def same_tensor_passed_twice(C, R):
    x = L(3, 4)
    penalty(R, C(lambda a, b: (a * b).sin() + a.exp() * b), (x, x), (x,), {"x": x})


@prog()
def graph_break_inside_fn(C, R):
    def f(x):
        y = x.sin() * x
        torch._dynamo.graph_break()
        return y.exp()

    x = L(3, 4)
    penalty(R, C(f), (x,), (x,), {"x": x})


@prog()
def called_twice_second_penalty_after_first_backward(C, R):
    x = L(3, 4)
    cf = C(lambda x: x.exp() * x.cos())
    penalty(R, cf, (x,), (x,), {"x": x}, pre="a.")
    penalty(R, cf, (x * 0.5,), (x,), {"x": x}, pre="b.")


@prog()
def called_twice_different_dtypes(C, R):
    x32, x64 = L(3, 4, dtype=f32), L(3, 4, seed=1)
    cf = C(lambda x: (x * x).sin())
    penalty(R, cf, (x32,), (x32,), {"x32": x32}, pre="a.")
    penalty(R, cf, (x64,), (x64,), {"x64": x64}, pre="b.")


# =====================================================================
# S. autocast (cpu, bfloat16) around the call
# =====================================================================


def _autocast_call(cf, *args):
    with torch.autocast("cpu", dtype=bf16):
        return cf(*args)


@prog()
def autocast_bf16_matmul_penalty(C, R):
    x, w = L(3, 4, dtype=f32), L(4, 2, seed=1, dtype=f32)
    cf = C(lambda x, w: torch.tanh(x @ w))
    penalty(R, lambda x, w: _autocast_call(cf, x, w), (x, w), (x,), {"x": x, "w": w})


@prog()
def autocast_bf16_elementwise_penalty(C, R):
    x = L(3, 4, dtype=f32)
    cf = C(lambda x: x.sigmoid() * x.sin())
    penalty(R, lambda x: _autocast_call(cf, x), (x,), (x,), {"x": x})


@prog()
def autocast_bf16_linear_module_hvp(C, R):
    m = init_params(nn.Linear(4, 2), 7)
    x, v = L(3, 4, dtype=f32), V(3, 4, dtype=f32)
    cm = C(m)
    hvp(R, lambda x: _autocast_call(cm, x).float().tanh().pow(2).sum(), (x,), (x,), (v,))


@prog()
def autocast_bf16_maml_step(C, R):
    w, x = L(4, 2, seed=1, dtype=f32), L(3, 4, rg=False, dtype=f32)
    cf = C(lambda x, w: (x @ w).float().tanh().pow(2).mean())
    gw = R.step("inner_g", lambda: ag.grad(_autocast_call(cf, x, w), w, create_graph=True)[0])
    outer = R.step("outer", lambda: _autocast_call(cf, x * 2, w - 0.5 * gw))
    R.step("bw", lambda: outer.backward())
    R.grad("w", w)
