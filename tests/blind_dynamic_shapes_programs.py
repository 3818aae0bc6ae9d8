"""Blind programs: shapes that change between calls (dynamic shapes), in training.

The same compiled function or module is called 3-5 times with inputs whose sizes change
between calls (the batch, the sequence length or both; sizes 1, 2, 3, 5, 8, 17; a size
that becomes 1 and then larger again; an empty dimension of size 0 in one call),
sometimes after ``torch._dynamo.mark_dynamic`` on the input, sometimes not (Dynamo then
recompiles, and may go dynamic on its own; aot_function / aot_module specialize on shapes
and trace again for each new one). Each call runs a backward (``.backward()`` or
``torch.autograd.grad``) and the program records the outputs, the gradients and each
step's result or exception. The functions reshape and view with ``-1`` and with sizes
computed from ``x.shape``, slice with size-dependent bounds, ``narrow``, ``unfold``,
``split`` / ``chunk`` into shape-dependent pieces, ``cat`` / ``stack`` them, build masks
(``x > 0``, ``where``, ``masked_fill``, ``tril`` causal masks from ``torch.ones(t, t)``),
reduce over dynamic dims, run ``nn.Linear`` / ``nn.LayerNorm`` / ``nn.Embedding`` /
a small causal attention block / ``F.cross_entropy`` with targets of varying length,
pad, expand / repeat / broadcast against dynamic sizes, index with ``arange(x.shape[0])``,
write in place into views of intermediates, return views of inputs and outputs aliasing
each other, pass python ints computed from shapes on, branch on shapes, in float32,
float64 and a few under a CPU bf16 autocast block. Parameters' ``.grad`` accumulate over
the calls in some programs (nothing zeroed between calls).

Written in round 57 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_dynamic_shapes`` runs each under eager and under each entry point
and compares the recordings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from blind_fed_outputs_harness import L, init_params, registry

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32


# ---------- shared building blocks ----------
def G(seed):
    return torch.Generator().manual_seed(3000 + seed)


def ri(high, *shape, seed=0, low=0):
    """Seeded integer indices / targets."""
    return torch.randint(low, high, shape, generator=G(seed))


def md(t, *dims):
    """``mark_dynamic`` on each of ``dims`` of ``t`` (a no-op outside Dynamo)."""
    for d in dims:
        torch._dynamo.mark_dynamic(t, d)
    return t


def init_(m, seed=0):
    return init_params(m, seed)


def flat(o):
    if isinstance(o, torch.Tensor):
        yield o
    elif isinstance(o, (list, tuple)):
        for x in o:
            yield from flat(x)
    elif isinstance(o, dict):
        for x in o.values():
            yield from flat(x)


def lossof(o):
    """A scalar loss over every floating output that requires grad (weighted by position)."""
    tot = None
    for i, t in enumerate(flat(o)):
        if t.dtype.is_floating_point and t.requires_grad:
            v = (t.double().sin() * (i + 1)).sum()
            tot = v if tot is None else tot + v
    return tot


def fb(R, tag, cf, *args, wrt=(), loss=lossof):
    """One training call: ``cf(*args)``, its outputs recorded, ``loss(out).backward()``,
    then the gradients of ``wrt`` (result of step ``tag``)."""

    def go():
        out = cf(*args)
        R.rec(tag + ".out", out)
        loss(out).backward()
        return [t.grad for t in wrt]

    return R.step(tag, go)


def fg(R, tag, cf, *args, wrt=(), loss=lossof, **kw):
    """Like ``fb`` with ``torch.autograd.grad(loss, wrt)`` instead of backward."""

    def go():
        out = cf(*args)
        R.rec(tag + ".out", out)
        return ag.grad(loss(out), list(wrt), **kw)

    return R.step(tag, go)


class Attn(nn.Module):
    """q, k, v from one Linear split with chunk(3, -1), scaled causal softmax attention."""

    def __init__(self, c=4, dtype=f64):
        super().__init__()
        self.qkv = nn.Linear(c, 3 * c, dtype=dtype)
        self.proj = nn.Linear(c, c, dtype=dtype)

    def forward(self, x):
        _b, t, _c = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        s = (q @ k.transpose(-2, -1)) * (x.shape[-1] ** -0.5)
        mask = torch.tril(torch.ones(t, t, dtype=x.dtype, device=x.device))
        s = s.masked_fill(mask == 0, float("-inf"))
        a = s.softmax(-1)
        return self.proj(a @ v)


class MHA(nn.Module):
    """Multi-head causal attention with head views computed from the shape."""

    def __init__(self, c=8, h=2, dtype=f64):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(c, 3 * c, dtype=dtype)
        self.proj = nn.Linear(c, c, dtype=dtype)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, -1)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        s = s.masked_fill(~causal, float("-inf"))
        y = s.softmax(-1) @ v
        y = y.transpose(1, 2).reshape(b, t, c)
        return self.proj(y)


class TinyLM(nn.Module):
    def __init__(self, V=11, c=8, dtype=f64):
        super().__init__()
        self.emb = nn.Embedding(V, c, dtype=dtype)
        self.pos = nn.Embedding(32, c, dtype=dtype)
        self.ln1 = nn.LayerNorm(c, dtype=dtype)
        self.attn = MHA(c, 2, dtype)
        self.ln2 = nn.LayerNorm(c, dtype=dtype)
        self.mlp = nn.Sequential(
            nn.Linear(c, 2 * c, dtype=dtype), nn.GELU(), nn.Linear(2 * c, c, dtype=dtype)
        )
        self.head = nn.Linear(c, V, dtype=dtype)

    def forward(self, idx, targets):
        b, t = idx.shape
        x = self.emb(idx) + self.pos(torch.arange(t))
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        logits = self.head(x)
        loss = F.cross_entropy(logits.reshape(b * t, -1), targets.reshape(-1))
        return logits, loss


def second(o):
    return o[1]


def pgrads(R, prefix, m):
    for n, p in m.named_parameters():
        R.grad(f"{prefix}.{n}", p)


# ====================================================================== reshape / view


@prog()
def view_batch_flatten_linear(C, R):
    w = L(12, 3, seed=1)

    def f(x, w):
        return x.view(x.shape[0], -1) @ w

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 3, 4, seed=10 + i)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def reshape_bt_c_mark_batch(C, R):
    w = L(4, 6, seed=2)

    def f(x, w):
        b, t, c = x.shape
        y = x.reshape(b * t, c) @ w
        return y.reshape(b, t, -1).relu()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (5, 2), (8, 17)]):
        x = md(L(b, t, 4, seed=20 + i), 0)
        fb(R, f"c{i}", cf, x, w, wrt=[x, w])


@prog()
def reshape_bt_c_both_change(C, R):
    w = L(3, 3, seed=3)

    def f(x, w):
        b, t, c = x.shape
        return (x.reshape(b * t, c) @ w).tanh().reshape(b, t, c).sum(1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 2), (3, 5), (1, 8), (5, 1), (2, 17)]):
        x = L(b, t, 3, seed=30 + i)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def view_neg1_rows_of_input(C, R):
    def f(x):
        v = x.view(-1, 4)
        return v, v.sum(0) * 2

    cf = C(f)
    for i, shape in enumerate([(2, 4), (3, 8), (1, 4), (5, 4)]):
        x = L(*shape, seed=40 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def flatten_unflatten_roundtrip(C, R):
    def f(x):
        b, t = x.shape[0], x.shape[1]
        y = x.flatten(0, 1).tanh() * 3
        return y.unflatten(0, (b, t))

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (4, 1), (1, 5), (3, 8)]):
        x = md(L(b, t, 2, seed=50 + i), 1)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def view_from_input_sizes_md_both(C, R):
    w = L(3, 4, seed=4)

    def f(x, w):
        y = (x @ w).view(x.shape[0], x.shape[1], 2, -1)
        return y.sum(-1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (2, 2), (5, 8)]):
        x = md(L(b, t, 3, seed=70 + i), 0, 1)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def reshape_float32_batch_then_one(C, R):
    w = L(6, 2, seed=5, dtype=f32)

    def f(x, w):
        return x.reshape(-1, 6) @ w

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 1, 8]):
        x = L(b, 2, 3, seed=80 + i, dtype=f32)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


# ====================================================================== slicing


@prog()
def slice_first_half_seq(C, R):
    def f(x):
        return x[:, : x.shape[1] // 2] * 3

    cf = C(f)
    for i, t in enumerate([2, 3, 5, 8, 1]):
        x = L(2, t, seed=90 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def slice_ellipsis_diff(C, R):
    def f(x):
        return (x[..., 1:] - x[..., :-1]).exp()

    cf = C(f)
    for i, n in enumerate([3, 1, 5, 2]):
        x = L(2, 2, n, seed=100 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def slice_last_two_rows(C, R):
    w = L(3, seed=6)

    def f(x, w):
        return x[-2:] * w

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 2]):
        x = L(b, 3, seed=110 + i)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def slice_return_view_of_input(C, R):
    def f(x):
        return x[1:], x[:-1].sum()

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 2]):
        x = L(b, 2, seed=120 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def narrow_middle(C, R):
    def f(x):
        return x.narrow(1, 1, x.shape[1] - 2).sin()

    cf = C(f)
    for i, t in enumerate([3, 5, 2, 8]):
        x = L(2, t, seed=130 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def narrow_too_short_raises(C, R):
    def f(x):
        return x.narrow(1, 1, x.shape[1] - 2) * 2

    cf = C(f)
    for i, t in enumerate([4, 5, 1, 6]):
        x = L(2, t, seed=140 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def unfold_windows_mean(C, R):
    def f(x):
        return x.unfold(1, 3, 1).mean(-1)

    cf = C(f)
    for i, t in enumerate([3, 5, 8, 17]):
        x = L(2, t, seed=150 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def unfold_step2_marked(C, R):
    w = L(2, seed=7)

    def f(x, w):
        return (x.unfold(1, 2, 2) * w).sum(-1)

    cf = C(f)
    for i, t in enumerate([4, 5, 8, 17, 2]):
        x = md(L(3, t, seed=160 + i), 1)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def select_last_position(C, R):
    def f(x):
        return x[:, -1] * 2 + x[:, x.shape[1] - 1], x[:, 0]

    cf = C(f)
    for i, t in enumerate([3, 1, 5, 17]):
        x = L(2, t, 3, seed=180 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def slice_bounds_from_both_dims(C, R):
    def f(x):
        b, t = x.shape
        m = min(b, t)
        return x[:m, :m].tanh() + x[b - m :, t - m :]

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (5, 2), (3, 3), (1, 8), (8, 5)]):
        x = L(b, t, seed=190 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


# ====================================================================== split / chunk / cat / stack


@prog()
def split_halves_swap_cat(C, R):
    def f(x):
        n = x.shape[1]
        a, b = x.split([n // 2, n - n // 2], 1)
        return torch.cat([b.sin(), a.cos()], 1)

    cf = C(f)
    for i, t in enumerate([2, 3, 5, 8, 1]):
        x = L(2, t, seed=200 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def chunk3_varying_count(C, R):
    def f(x):
        y = x * 2
        return [p.exp() for p in y.chunk(3, 0)]

    cf = C(f)
    for i, b in enumerate([1, 2, 5, 8]):
        x = L(b, 2, seed=210 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def split2_returns_input_views(C, R):
    def f(x):
        return x.split(2, 0)

    cf = C(f)
    for i, b in enumerate([3, 5, 1, 4]):
        x = L(b, 2, seed=220 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def unbind_reverse_stack(C, R):
    w = L(3, seed=8)

    def f(x, w):
        return torch.stack(list(reversed(x.unbind(0))), 0) * w

    cf = C(f)
    for i, b in enumerate([2, 3, 1, 5]):
        x = L(b, 3, seed=230 + i)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def tensor_split_three_weighted(C, R):
    def f(x):
        ps = torch.tensor_split(x, 3, dim=1)
        return torch.cat([p * (k + 1) for k, p in enumerate(ps)], 1)

    cf = C(f)
    for i, t in enumerate([3, 5, 1, 8, 17]):
        x = L(2, t, seed=240 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def cat_cls_token_expand(C, R):
    cls = L(1, 1, 3, seed=9)

    def f(x, cls):
        b = x.shape[0]
        return torch.cat([cls.expand(b, 1, x.shape[2]), x], 1).tanh()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 1), (1, 5), (5, 2)]):
        x = L(b, t, 3, seed=250 + i)
        fb(R, f"c{i}", cf, x, cls, wrt=[x])
    R.grad("cls", cls)


@prog()
def view_pairs_unbind_stack(C, R):
    def f(x):
        b = x.shape[0]
        a, c = x.view(b, 2, -1).unbind(1)
        return torch.stack([a * c, a - c], -1)

    cf = C(f)
    for i, (b, n) in enumerate([(2, 4), (3, 6), (1, 2), (5, 8)]):
        x = md(L(b, n, seed=260 + i), 0)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def chunk_sizes_split_sum_autograd_grad(C, R):
    w = L(4, seed=10)

    def f(x, w):
        parts = x.split(3, 1)
        return sum(p.sum(1) for p in parts) * w[: x.shape[0]]

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (4, 7), (1, 2), (3, 9)]):
        x = L(b, t, seed=270 + i)
        fg(R, f"c{i}", cf, x, w, wrt=[x, w])


# ====================================================================== masks


@prog()
def relu_mask_mul(C, R):
    def f(x):
        return x * (x > 0)

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 3, seed=280 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def where_elu_like(C, R):
    def f(x):
        return torch.where(x > 0, x, x.exp() - 1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (1, 1), (8, 2)]):
        x = md(L(b, t, seed=290 + i), 0)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def causal_masked_fill_softmax(C, R):
    def f(x):
        t = x.shape[1]
        s = x @ x.transpose(-1, -2)
        mask = torch.ones(t, t).tril().bool()
        return s.masked_fill(~mask, float("-inf")).softmax(-1)

    cf = C(f)
    for i, t in enumerate([1, 3, 5, 2]):
        x = L(2, t, 3, seed=300 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def length_mask_mean_pool(C, R):
    def f(x, lengths):
        t = x.shape[1]
        m = (torch.arange(t)[None, :] < lengths[:, None]).to(x.dtype)
        return (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (2, 8), (4, 2)]):
        x = L(b, t, 2, seed=310 + i)
        lengths = ri(t + 1, b, seed=310 + i)
        fb(R, f"c{i}", cf, x, lengths, wrt=[x])


@prog()
def masked_fill_inplace_intermediate(C, R):
    def f(x):
        y = x * 2
        y.masked_fill_(y < 0, 0.0)
        return y

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 8]):
        x = L(b, 2, seed=320 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


# ====================================================================== reductions


@prog()
def softmax_over_seq(C, R):
    def f(x):
        return x.softmax(1)

    cf = C(f)
    for i, t in enumerate([2, 5, 1, 8, 3]):
        x = L(3, t, seed=350 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def logsumexp_with_empty_seq(C, R):
    def f(x):
        return x.logsumexp(1)

    cf = C(f)
    for i, t in enumerate([3, 5, 0, 2]):
        x = L(2, t, seed=360 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def var_over_batch(C, R):
    def f(x):
        return x.var(0), x.var(0, unbiased=False)

    cf = C(f)
    for i, b in enumerate([3, 5, 1, 8]):
        x = L(b, 2, seed=370 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def topk_half_of_seq(C, R):
    def f(x):
        k = max(1, x.shape[1] // 2)
        v, idx = x.topk(k, 1)
        return v, idx

    cf = C(f)
    for i, t in enumerate([2, 5, 1, 8]):
        x = L(2, t, seed=420 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def var_mean_float32_marked(C, R):
    def f(x):
        v, m = torch.var_mean(x, 1)
        return (x - m[:, None]) / (v[:, None] + 1e-3).sqrt()

    cf = C(f)
    for i, t in enumerate([2, 5, 3, 8]):
        x = md(L(3, t, seed=440 + i, dtype=f32), 1)
        fb(R, f"c{i}", cf, x, wrt=[x])


# ====================================================================== modules


@prog()
def linear_module_accumulates(C, R):
    m = init_(nn.Linear(4, 3, dtype=f64), 1)
    cm = C(m)
    for i, b in enumerate([2, 5, 1, 8, 3]):
        x = L(b, 4, seed=450 + i)
        fb(R, f"c{i}", cm, x, wrt=[x, m.weight, m.bias])
    pgrads(R, "m", m)


@prog()
def linear_module_marked_zeroed(C, R):
    m = init_(nn.Linear(3, 2, dtype=f64), 2)
    cm = C(m)
    for i, b in enumerate([2, 3, 5, 8]):
        x = md(L(b, 3, seed=460 + i), 0)
        fb(R, f"c{i}", cm, x, wrt=[m.weight, m.bias])
        m.zero_grad(set_to_none=True)
    pgrads(R, "m", m)


@prog()
def layernorm_mlp_bt(C, R):
    m = init_(nn.Sequential(nn.Linear(4, 6, dtype=f64), nn.LayerNorm(6, dtype=f64), nn.GELU()), 3)
    cm = C(m)
    for i, (b, t) in enumerate([(2, 3), (1, 5), (3, 1), (2, 8)]):
        x = L(b, t, 4, seed=470 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def layernorm_float32_marked_both(C, R):
    m = init_(nn.LayerNorm(5, dtype=f32), 4)
    cm = C(m)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (2, 2), (5, 17)]):
        x = md(L(b, t, 5, seed=480 + i, dtype=f32), 0, 1)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def embedding_varying_length(C, R):
    m = init_(nn.Embedding(10, 4, dtype=f64), 5)
    cm = C(m)
    for i, n in enumerate([3, 7, 1, 17]):
        idx = ri(10, n, seed=490 + i)
        fb(R, f"c{i}", cm, idx, wrt=[m.weight])
    pgrads(R, "m", m)


@prog()
def embedding_padding_idx_bt(C, R):
    m = init_(nn.Embedding(8, 3, padding_idx=0, dtype=f64), 6)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.e = m

        def forward(self, idx):
            return self.e(idx).mean(1)

    net = Net()
    cm = C(net)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (1, 1), (4, 8)]):
        idx = ri(8, b, t, seed=500 + i)
        fb(R, f"c{i}", cm, idx)
    pgrads(R, "m", net)


@prog()
def cross_entropy_varying_targets(C, R):
    lin = init_(nn.Linear(4, 5, dtype=f64), 7)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x, y):
            return F.cross_entropy(self.lin(x), y)

    net = Net()
    cm = C(net)
    for i, n in enumerate([2, 8, 1, 17]):
        x = L(n, 4, seed=510 + i)
        y = ri(5, n, seed=510 + i)
        fb(R, f"c{i}", cm, x, y, wrt=[x])
    pgrads(R, "n", net)


@prog()
def cross_entropy_ignore_index_seq(C, R):
    w = L(3, 4, seed=11)

    def f(x, w, y):
        b, t, _c = x.shape
        logits = x @ w
        return F.cross_entropy(logits.reshape(b * t, -1), y.reshape(-1), ignore_index=-100)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (1, 5), (3, 2), (2, 8)]):
        x = L(b, t, 3, seed=520 + i)
        y = ri(4, b, t, seed=520 + i)
        y[:, 0] = -100
        fb(R, f"c{i}", cf, x, w, y, wrt=[x])
    R.grad("w", w)


@prog()
def cross_entropy_sum_with_empty_batch(C, R):
    w = L(3, 4, seed=12)

    def f(x, w, y):
        return F.cross_entropy(x @ w, y, reduction="sum")

    cf = C(f)
    for i, n in enumerate([3, 0, 5, 2]):
        x = L(n, 3, seed=530 + i)
        y = ri(4, n, seed=530 + i)
        fb(R, f"c{i}", cf, x, w, y, wrt=[x, w])


@prog()
def cross_entropy_mean_empty_is_nan(C, R):
    w = L(3, 4, seed=13)

    def f(x, w, y):
        return F.cross_entropy(x @ w, y)

    cf = C(f)
    for i, n in enumerate([2, 5, 0]):
        x = L(n, 3, seed=540 + i)
        y = ri(4, n, seed=540 + i)
        fb(R, f"c{i}", cf, x, w, y, wrt=[x])
    R.grad("w", w)


@prog()
def attention_block_varying_seq(C, R):
    m = init_(Attn(4), 8)
    cm = C(m)
    for i, t in enumerate([1, 3, 5, 8]):
        x = L(2, t, 4, seed=550 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def attention_block_marked_batch_seq(C, R):
    m = init_(Attn(4), 9)
    cm = C(m)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (2, 8), (4, 17)]):
        x = md(L(b, t, 4, seed=560 + i), 0, 1)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def attention_block_seq_one_then_more(C, R):
    m = init_(Attn(4, dtype=f32), 10)
    cm = C(m)
    for i, t in enumerate([3, 1, 5, 1, 8]):
        x = L(1, t, 4, seed=570 + i, dtype=f32)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def multihead_attention_autograd_grad(C, R):
    m = init_(MHA(8, 2), 11)
    cm = C(m)
    ps = list(m.parameters())
    for i, (b, t) in enumerate([(2, 2), (1, 5), (3, 3)]):
        x = L(b, t, 8, seed=580 + i)
        fg(R, f"c{i}", cm, x, wrt=[x, *ps])


@prog()
def sdpa_causal_varying_seq(C, R):
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    cf = C(f)
    for i, t in enumerate([2, 5, 3, 8]):
        q, k, v = (L(2, 2, t, 4, seed=590 + 3 * i + j) for j in range(3))
        fb(R, f"c{i}", cf, q, k, v, wrt=[q, k, v])


@prog()
def tiny_lm_varying_seq_accumulates(C, R):
    m = init_(TinyLM(), 12)
    cm = C(m)
    for i, (b, t) in enumerate([(2, 3), (1, 5), (2, 8), (3, 2)]):
        idx = ri(11, b, t, seed=600 + i)
        tg = ri(11, b, t, seed=650 + i)
        fb(R, f"c{i}", cm, idx, tg, loss=second)
    pgrads(R, "m", m)


@prog()
def tiny_lm_marked_seq(C, R):
    m = init_(TinyLM(), 13)
    cm = C(m)
    for i, t in enumerate([3, 5, 8, 17]):
        idx = md(ri(11, 2, t, seed=610 + i), 1)
        tg = ri(11, 2, t, seed=660 + i)
        fb(R, f"c{i}", cm, idx, tg, loss=second)
        R.step(f"c{i}.emb_grad_sum", lambda: m.emb.weight.grad.sum())
    pgrads(R, "m", m)


@prog()
def conv1d_varying_length(C, R):
    m = init_(nn.Conv1d(2, 3, 3, padding=1, dtype=f64), 14)
    cm = C(m)
    for i, n in enumerate([3, 5, 17, 1]):
        x = L(2, 2, n, seed=620 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "m", m)


@prog()
def batchnorm_varying_batch(C, R):
    m = init_(nn.BatchNorm1d(3, dtype=f64), 15)
    cm = C(m)
    for i, b in enumerate([2, 5, 8, 3]):
        x = L(b, 3, seed=630 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
        R.rec(f"c{i}.running", (m.running_mean.clone(), m.running_var.clone()))
    pgrads(R, "m", m)
    R.rec("num_batches_tracked", m.num_batches_tracked.item())


@prog()
def batchnorm_batch_one_raises(C, R):
    m = init_(nn.BatchNorm1d(2, dtype=f64), 16)
    cm = C(m)
    for i, b in enumerate([3, 1, 4]):
        x = L(b, 2, seed=640 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
    R.rec("running_mean", m.running_mean)


# ====================================================================== autocast (CPU bf16)


@prog()
def autocast_bf16_linear_batch(C, R):
    m = init_(nn.Linear(4, 3, dtype=f32), 17)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = m

        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = self.lin(x)
            return y.float().relu()

    net = Net()
    cm = C(net)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 4, seed=690 + i, dtype=f32)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "n", net)


@prog()
def autocast_bf16_attention_scores(C, R):
    def f(q, k):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5)
        t = q.shape[1]
        mask = torch.tril(torch.ones(t, t))
        return s.float().masked_fill(mask == 0, float("-inf")).softmax(-1)

    cf = C(f)
    for i, t in enumerate([2, 3, 5]):
        q, k = L(2, t, 4, seed=700 + i, dtype=f32), L(2, t, 4, seed=710 + i, dtype=f32)
        fb(R, f"c{i}", cf, q, k, wrt=[q, k])


@prog()
def autocast_bf16_matmul_marked(C, R):
    w = L(3, 3, seed=14, dtype=f32)

    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x.reshape(-1, 3) @ w
        return y.reshape(x.shape[0], -1)

    cf = C(f)
    for i, b in enumerate([2, 3, 5, 8]):
        x = md(L(b, 2, 3, seed=720 + i, dtype=f32), 0)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


# ====================================================================== pad / expand / repeat / index


@prog()
def pad_to_multiple_of_four(C, R):
    def f(x):
        return F.pad(x, (0, (-x.shape[1]) % 4)).view(x.shape[0], -1, 4).sum(-1)

    cf = C(f)
    for i, t in enumerate([1, 4, 5, 17]):
        x = L(2, t, seed=730 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def pad_both_dims_constant(C, R):
    def f(x):
        return F.pad(x, (1, 2, x.shape[0] % 2, 1), value=0.5).tanh()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 1), (1, 5), (5, 2)]):
        x = L(b, t, seed=740 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def expand_bias_to_batch(C, R):
    bias = L(3, seed=15)

    def f(x, bias):
        return x + bias.expand(x.shape[0], -1)

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8, 0]):
        x = L(b, 3, seed=750 + i)
        fb(R, f"c{i}", cf, x, bias, wrt=[x, bias])


@prog()
def repeat_rows_to_batch(C, R):
    w = L(1, 3, seed=16)

    def f(x, w):
        return w.repeat(x.shape[0], 1) * x

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 2]):
        x = md(L(b, 3, seed=760 + i), 0)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def broadcast_to_input_shape(C, R):
    v = L(4, seed=17)

    def f(x, v):
        return torch.broadcast_to(v, x.shape) * x, v.expand_as(x)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (1, 1), (3, 5)]):
        x = L(b, t, 4, seed=770 + i)
        fb(R, f"c{i}", cf, x, v, wrt=[x])
    R.grad("v", v)


@prog()
def expand_first_position_over_seq(C, R):
    def f(x):
        return x[:, :1].expand(-1, x.shape[1], -1) * x

    cf = C(f)
    for i, t in enumerate([3, 1, 5, 8]):
        x = L(2, t, 2, seed=780 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def arange_rows_index_targets(C, R):
    def f(x, idx):
        return x.log_softmax(-1)[torch.arange(x.shape[0]), idx]

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 4, seed=790 + i)
        idx = ri(4, b, seed=790 + i)
        fb(R, f"c{i}", cf, x, idx, wrt=[x])


@prog()
def arange_positions_embedding(C, R):
    pos = init_(nn.Embedding(20, 3, dtype=f64), 18)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos = pos

        def forward(self, x):
            return x + self.pos(torch.arange(x.shape[1]))

    net = Net()
    cm = C(net)
    for i, t in enumerate([3, 5, 1, 17]):
        x = L(2, t, 3, seed=800 + i)
        fb(R, f"c{i}", cm, x, wrt=[x])
    pgrads(R, "n", net)


# ====================================================================== in place / aliasing / new tensors


@prog()
def inplace_mul_on_column_view(C, R):
    def f(x):
        y = x * 1.5
        y[:, 0].mul_(2)
        return y

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 3, seed=850 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def inplace_add_on_half_slice(C, R):
    def f(x):
        y = x.clone()
        y[:, : x.shape[1] // 2].add_(1)
        return y.sin()

    cf = C(f)
    for i, t in enumerate([2, 5, 1, 8]):
        x = md(L(2, t, seed=860 + i), 1)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def inplace_on_view_returned_with_base(C, R):
    def f(x):
        y = x * x
        v = y[-2:]
        v.mul_(3)
        return y, v

    cf = C(f)
    for i, b in enumerate([3, 2, 5, 1]):
        x = L(b, 2, seed=870 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def return_transpose_of_input(C, R):
    def f(x):
        return x.t(), (x * 2).sum()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (1, 5), (5, 1), (3, 3)]):
        x = L(b, t, seed=880 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def aliasing_outputs(C, R):
    def f(x):
        y = x.tanh()
        return y, y.view(-1), y[0]

    cf = C(f)
    for i, b in enumerate([1, 3, 5, 2]):
        x = L(b, 2, seed=890 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def aliasing_outputs_marked_caller_inplace(C, R):
    def f(x):
        y = x * 2
        return y, y[:, 1:]

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (5, 2)]):
        x = md(L(b, t, seed=900 + i), 0, 1)

        def go(x=x, i=i):
            y, z = cf(x)
            z.mul_(10)
            R.rec(f"c{i}.y", y)
            R.rec(f"c{i}.z", z)
            (y.sin().sum() + z.cos().sum()).backward()
            return x.grad

        R.step(f"c{i}", go)


@prog()
def new_zeros_fill_column(C, R):
    def f(x):
        z = x.new_zeros(x.shape)
        z[:, 0] = x[:, 0] * 2
        return z + x

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (5, 1), (1, 4), (8, 2)]):
        x = L(b, t, seed=910 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def zeros_like_plus_cumsum(C, R):
    def f(x):
        return torch.zeros_like(x) + x.cumsum(0), torch.ones_like(x[:1])

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 0, 2]):
        x = L(b, 2, seed=920 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def full_from_shape_values(C, R):
    def f(x):
        return torch.full((x.shape[0], 1), float(x.shape[1]), dtype=x.dtype) * x

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (1, 8), (5, 2)]):
        x = L(b, t, seed=930 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


# ====================================================================== python ints / branching


@prog()
def int_from_shape_scales_output(C, R):
    def f(x):
        n = x.shape[0]
        y = x.sin()
        return y * n, n

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 8]):
        x = L(b, 2, seed=950 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def int_from_shape_marked(C, R):
    def f(x):
        b, t = x.shape
        return x * (b * t) - x.sum() / (b + t), b * t

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (3, 5), (5, 2), (8, 17)]):
        x = md(L(b, t, seed=960 + i), 0, 1)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def branch_on_batch_size(C, R):
    def f(x):
        if x.shape[0] > 4:
            return x.sin() * 2
        return x.cos()

    cf = C(f)
    for i, b in enumerate([2, 5, 8, 3, 1]):
        x = L(b, 2, seed=970 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def branch_on_seq_marked(C, R):
    w = L(2, 2, seed=18)

    def f(x, w):
        if x.shape[1] > 3:
            return (x @ w).relu().mean(1)
        return x.mean(1)

    cf = C(f)
    for i, t in enumerate([2, 5, 3, 8]):
        x = md(L(2, t, 2, seed=980 + i), 1)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def numel_mean_with_empty(C, R):
    def f(x):
        return x.sum() / x.numel(), x.mean()

    cf = C(f)
    for i, b in enumerate([3, 0, 5]):
        x = L(b, 2, seed=990 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def return_shape_and_products(C, R):
    def f(x):
        return x * 2, x.shape, x.shape[0] * x.shape[1], x.size(-1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (5, 1), (3, 8)]):
        x = L(b, t, seed=1000 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])


@prog()
def autograd_grad_unused_when_small(C, R):
    w1, w2 = L(3, 3, seed=19), L(3, 3, seed=20)

    def f(x, w1, w2):
        y = x @ w1
        if x.shape[0] > 2:
            y = y @ w2
        return y

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 3]):
        x = L(b, 3, seed=1010 + i)
        fg(R, f"c{i}", cf, x, w1, w2, wrt=[x, w1, w2], allow_unused=True)


# ====================================================================== grad APIs and flags


@prog()
def autograd_grad_input_and_param(C, R):
    w = L(3, 2, seed=21)

    def f(x, w):
        return (x @ w).tanh()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (5, 3), (1, 3), (8, 3)]):
        x = L(b, t, seed=1020 + i)
        fg(R, f"c{i}", cf, x, w, wrt=[x, w])
    R.grad("w", w)


@prog()
def backward_with_gradient_argument(C, R):
    def f(x):
        return x.exp() * x.shape[0]

    cf = C(f)
    for i, b in enumerate([2, 5, 1, 3]):
        x = L(b, 2, seed=1030 + i)

        def go(x=x, i=i):
            out = cf(x)
            R.rec(f"c{i}.out", out)
            out.backward(torch.full_like(out, 0.5))
            return x.grad

        R.step(f"c{i}", go)


@prog()
def input_requires_grad_toggles(C, R):
    w = L(2, 2, seed=22)

    def f(x, w):
        return (x @ w).sigmoid()

    cf = C(f)
    for i, (b, rg) in enumerate([(2, True), (3, False), (5, True), (1, False)]):
        x = L(b, 2, seed=1040 + i, rg=rg)
        fb(R, f"c{i}", cf, x, w, wrt=[w])
        R.rec(f"c{i}.xgrad", x.grad)
    R.grad("w", w)


@prog()
def linear_zero_batch_then_more(C, R):
    m = init_(nn.Linear(3, 2, dtype=f64), 19)
    cm = C(m)
    for i, b in enumerate([2, 0, 3, 5]):
        x = L(b, 3, seed=1050 + i)
        fb(R, f"c{i}", cm, x, wrt=[x, m.weight])
    pgrads(R, "m", m)


@prog()
def size_one_then_larger_marked(C, R):
    w = L(4, 4, seed=23)

    def f(x, w):
        return (x @ w).softmax(-1) * x.shape[0]

    cf = C(f)
    for i, b in enumerate([3, 1, 5, 1, 8]):
        x = md(L(b, 4, seed=1060 + i), 0)
        fb(R, f"c{i}", cf, x, w, wrt=[x])
    R.grad("w", w)


@prog()
def retain_grad_on_outputs(C, R):
    def f(x):
        y = x.sin()
        return y, y.sum(1)

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (1, 5), (4, 2)]):
        x = L(b, t, seed=1070 + i)

        def go(x=x, i=i):
            y, s = cf(x)
            y.retain_grad()
            s.retain_grad()
            (s * s).sum().backward()
            return y.grad, s.grad, x.grad, y.is_leaf, s.requires_grad

        R.step(f"c{i}", go)


@prog()
def float32_mlp_varying_batch_accumulates(C, R):
    m = init_(
        nn.Sequential(nn.Linear(3, 5, dtype=f32), nn.Tanh(), nn.Linear(5, 2, dtype=f32)),
        20,
    )
    cm = C(m)
    for i, b in enumerate([1, 2, 3, 5, 8]):
        x = L(b, 3, seed=1080 + i, dtype=f32)
        fb(R, f"c{i}", cm, x)
    pgrads(R, "m", m)


@prog()
def contiguous_after_transpose(C, R):
    def f(x):
        y = x.transpose(0, 1).contiguous()
        return y * 2, y.stride()

    cf = C(f)
    for i, (b, t) in enumerate([(2, 3), (5, 1), (1, 4)]):
        x = L(b, t, seed=1160 + i)
        fb(R, f"c{i}", cf, x, wrt=[x])
