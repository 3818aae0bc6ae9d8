"""Blind programs: randomness. A compiled function or module draws random numbers
(``torch.rand`` / ``randn`` / ``randint`` / ``rand_like`` / ``randn_like`` / ``randperm``
/ ``bernoulli`` / ``multinomial`` / ``normal``, the in-place ``normal_`` / ``uniform_`` /
``exponential_`` / ``bernoulli_`` on inputs and on intermediates), drops out
(``F.dropout`` in training and eval, ``inplace=True``, ``nn.Dropout`` in modules,
``rrelu``, ``gumbel_softmax``), takes ``torch.Generator`` objects as arguments or creates
them, reseeds or saves and restores the global RNG (``torch.manual_seed``,
``get_rng_state`` / ``set_rng_state``, ``torch.random.fork_rng``), checkpoints dropout
regions (``torch.utils.checkpoint.checkpoint``, ``use_reentrant=False``, with and without
``preserve_rng_state``), multiplies random values into what is differentiated (so the
backward needs the forward's draws: a partitioner recomputing a draw in the backward
would show), draws under ``no_grad``, is called twice in a row, and raises the errors
eager raises for invalid random calls.

With the same ``torch.manual_seed`` before each call, the caller observes the outputs,
the gradients, and the global RNG state after the call and after the backward (as the
``torch.rand(3)`` it draws then), and a passed generator's state after the call (as a
draw from it).

Written in round 64 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_rng`` runs each under eager and under each entry point and compares
the recordings.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from blind_fed_outputs_harness import L, W, init_params, registry, tensors

P, prog = registry()

f64, f32 = torch.float64, torch.float32


# =====================================================================
# helpers
# =====================================================================
def after(R, tag):
    """Record the global RNG state as the ``torch.rand(3)`` the caller draws now."""
    R.rec("rng." + tag, torch.rand(3, dtype=f64))


def gafter(R, tag, gen):
    """Record generator ``gen``'s state as a draw from it."""
    R.rec("gen." + tag, torch.rand(3, generator=gen, dtype=f64))


def loss(out):
    """A weighted sum of the outputs of ``out`` that require grad (None if none does)."""
    outs = [o for o in tensors(out) if o.requires_grad and o.is_floating_point()]
    if not outs:
        return None
    return sum((o * W(o)).sum() for o in outs)


def bw(R, out, name="bw"):
    lo = loss(out)
    if lo is not None:
        R.step(name, lambda: lo.backward())


def grads(R, **ts):
    for k, t in ts.items():
        R.grad(k, t)


def std(C, R, f, *args, seed=1, leaves=None):
    """The usual observation: seed, call, the output, the RNG after the call, the weighted
    backward, the leaves' gradients, the RNG after the backward."""
    g = C(f)

    def grads_of_leaves():
        for i, a in enumerate(leaves if leaves is not None else args):
            if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf:
                R.grad(f"a{i}", a)

    return _seeded_run(R, lambda: g(*args), seed, grads_of_leaves)


def std_gen(C, R, f, x, gen_seed, seed):
    """``std`` of ``f(x, gen)`` with a generator ``gen`` seeded ``gen_seed``, then
    ``gen``'s state after (``gafter(R, "after", gen)``)."""
    gen = torch.Generator().manual_seed(gen_seed)
    std(C, R, f, x, gen, seed=seed)
    gafter(R, "after", gen)


def _seeded_run(R, call, seed, record_grads, tag=""):
    """Seed, ``R.step("call" + tag, call)``, the RNG after the call, the weighted backward
    (``"bw" + tag``), ``record_grads()``, the RNG after the backward; returns the output."""
    torch.manual_seed(seed)
    out = R.step("call" + tag, call)
    after(R, "after_call" + tag)
    if out is not None:
        bw(R, out, "bw" + tag)
    record_grads()
    after(R, "after_bw" + tag)
    return out


def _call_twice(R, g, x, seed, between=False):
    """Seed, call ``g(x)`` twice in a row (recording the RNG between the calls when
    ``between``), record both outputs as ``o1`` and ``o2`` and the RNG after the calls;
    returns the outputs."""
    torch.manual_seed(seed)
    o1 = g(x)
    if between:
        after(R, "between")
    o2 = g(x)
    R.rec("o1", o1)
    R.rec("o2", o2)
    after(R, "after_calls")
    return o1, o2


def init_(m, seed=0):
    return init_params(m, seed, offset=640)


# =====================================================================
# factory draws, the backward needs them
# =====================================================================
@prog()
def rand_added(C, R):
    std(C, R, lambda x: x * 2 + torch.rand(3, dtype=f64), L(3, seed=1))


@prog()
def randn_multiplied(C, R):
    std(C, R, lambda x: x * torch.randn(x.shape, dtype=f64), L(2, 3, seed=2))


@prog()
def randn_like_inside_sin(C, R):
    # the backward of sin needs x + noise: recomputing it would redraw the noise
    std(C, R, lambda x: (x + torch.randn_like(x)).sin().cos(), L(5, seed=4), seed=7)


@prog()
def rand_like_threshold_mask(C, R):
    def f(x):
        m = torch.rand_like(x) > 0.5
        return (x * m).exp()

    std(C, R, f, L(6, seed=5), seed=11)


@prog()
def rand_like_through_sin_then_mul(C, R):
    def f(x, w):
        r = torch.rand_like(x).sin()
        return (x * r) @ w

    std(C, R, f, L(3, 4, seed=6), L(4, 2, seed=7), seed=3)


@prog()
def randn_like_of_transposed_input(C, R):
    # randn_like keeps the input's strides: the draws land in memory order
    leaf = L(4, 3, seed=9)
    std(C, R, lambda x: x * torch.randn_like(x), leaf.t(), seed=5, leaves=[leaf])


@prog()
def randn_leaf_made_inside(C, R):
    def f(x):
        return x * torch.randn(3, dtype=f64, requires_grad=True)

    std(C, R, f, L(3, seed=5), seed=5)


@prog()
def randint_index_select(C, R):
    def f(x):
        idx = torch.randint(0, x.shape[0], (7,))
        return x[idx] * 3

    std(C, R, f, L(5, 2, seed=8), seed=5)


@prog()
def randperm_permutes(C, R):
    def f(x):
        return x[torch.randperm(x.shape[0])].cumsum(0)

    std(C, R, f, L(6, seed=10), seed=4)


@prog()
def bernoulli_of_input_probs(C, R):
    def f(x, p):
        return x.tanh() * torch.bernoulli(p.sigmoid())

    std(C, R, f, L(7, seed=12), L(7, seed=13), seed=13)


@prog()
def multinomial_with_replacement(C, R):
    def f(x, p):
        idx = torch.multinomial(p.softmax(0), 6, replacement=True)
        return x[idx] * p[idx]

    std(C, R, f, L(5, seed=14), L(5, seed=15), seed=2)


@prog()
def multinomial_without_replacement_rows(C, R):
    def f(x, p):
        idx = torch.multinomial(p.detach().exp(), 2)
        return torch.gather(x, 1, idx).sum(1)

    std(C, R, f, L(3, 5, seed=16), L(3, 5, seed=17), seed=6)


@prog()
def normal_functional_tensor_mean(C, R):
    def f(mu, sd):
        return torch.normal(mu, sd.abs() + 0.1) * mu

    std(C, R, f, L(4, seed=18), L(4, seed=19), seed=8)


@prog()
def two_draws_order_matters(C, R):
    def f(x):
        a = torch.rand(4, dtype=f64)
        b = torch.randn(4, dtype=f64)
        return x * a - b * x.exp(), a, b

    std(C, R, f, L(4, seed=21), seed=12)


@prog()
def random_values_returned_alone(C, R):
    def f(x):
        return torch.randn(x.shape, dtype=f64), torch.randint(0, 100, (4,))

    std(C, R, f, L(3, seed=22), seed=14)


@prog()
def random_float32_draws(C, R):
    def f(x):
        return (x * torch.randn_like(x)).double() + torch.rand(3, dtype=f32).double()

    std(C, R, f, L(3, seed=24, dtype=f32), seed=16)


# =====================================================================
# in-place random fills on intermediates and on inputs
# =====================================================================
@prog()
def normal_inplace_on_intermediate(C, R):
    def f(x):
        n = torch.empty_like(x).normal_(1.0, 0.5)
        return x * n

    std(C, R, f, L(5, seed=26), seed=18)


@prog()
def uniform_inplace_on_intermediate_in_graph(C, R):
    def f(x):
        t = x * 2
        t.uniform_(-1.0, 1.0)
        return t * x

    std(C, R, f, L(4, seed=27), seed=19)


@prog()
def bernoulli_inplace_on_intermediate(C, R):
    def f(x):
        m = torch.zeros_like(x).bernoulli_(0.3)
        return x * m * 2

    std(C, R, f, L(9, seed=29), seed=22)


@prog()
def normal_inplace_on_input_buffer(C, R):
    def f(x, buf):
        buf.normal_()
        return x * buf

    buf = torch.zeros(4, dtype=f64)
    std(C, R, f, L(4, seed=32), buf, seed=24)
    R.rec("buf", buf)
    R.rec("buf.version", buf._version)


@prog()
def uniform_inplace_on_input_view(C, R):
    def f(x, buf):
        buf[1:].uniform_(2.0, 3.0)
        return x + buf.sum()

    buf = torch.zeros(4, dtype=f64)
    std(C, R, f, L(2, seed=33), buf, seed=25)
    R.rec("buf", buf)


@prog()
def exponential_inplace_on_input_returned(C, R):
    def f(buf):
        return buf.exponential_()

    buf = torch.ones(3, dtype=f64)
    out = std(C, R, f, buf, seed=26)
    R.rec("same", out is buf)
    R.rec("buf", buf)


@prog()
def bernoulli_inplace_on_input_under_no_grad(C, R):
    def f(x, m):
        with torch.no_grad():
            m.bernoulli_(0.5)
        return x * m

    m = torch.empty(6, dtype=f64)
    std(C, R, f, L(6, seed=34), m, seed=27)
    R.rec("m", m)


@prog()
def uniform_inplace_on_nonleaf_input(C, R):
    def f(y):
        y.uniform_()
        return y * 3

    leaf = L(3, seed=35)
    y = leaf * 1
    std(C, R, f, y, seed=28, leaves=[leaf])
    R.rec("y", y)


# =====================================================================
# dropout
# =====================================================================
@prog()
def dropout_training(C, R):
    std(C, R, lambda x: F.dropout(x, 0.5, training=True) * x, L(4, 4, seed=36), seed=29)


@prog()
def dropout_eval(C, R):
    std(C, R, lambda x: F.dropout(x.sin(), 0.5, training=False), L(5, seed=37), seed=30)


@prog()
def dropout_inplace_on_intermediate(C, R):
    def f(x, w):
        h = x @ w
        F.dropout(h, 0.3, training=True, inplace=True)
        return h.tanh()

    std(C, R, f, L(3, 4, seed=38), L(4, 5, seed=39), seed=31)


@prog()
def dropout_p_zero(C, R):
    std(C, R, lambda x: F.dropout(x, 0.0, True) * x, L(5, seed=40), seed=32)


@prog()
def dropout_p_one(C, R):
    std(C, R, lambda x: F.dropout(x, 1.0, True) + x, L(5, seed=40), seed=32)


@prog()
def alpha_dropout_and_dropout2d_p_one(C, R):
    def f(x):
        return F.alpha_dropout(x, 1.0, True) + F.dropout2d(x, 1.0, True) + x

    std(C, R, f, L(2, 3, 2, 2, seed=2), seed=32)


@prog()
def dropout_twice_two_masks(C, R):
    def f(x):
        return F.dropout(x, 0.5, True) * F.dropout(x, 0.5, True)

    std(C, R, f, L(10, seed=41), seed=33)


@prog()
def dropout2d_and_alpha_dropout(C, R):
    def f(x):
        return F.dropout2d(x, 0.5, True).sum(), F.alpha_dropout(x, 0.3, True)

    std(C, R, f, L(2, 4, 3, 3, seed=43), seed=35)


@prog()
def rrelu_training(C, R):
    std(C, R, lambda x: F.rrelu(x, 0.1, 0.3, training=True), L(8, seed=44), seed=36)


@prog()
def gumbel_softmax_hard(C, R):
    std(C, R, lambda x: F.gumbel_softmax(x, tau=0.5, hard=True), L(3, 4, seed=45), seed=37)


@prog()
def dropout_mask_reused_with_retain_graph(C, R):
    g = C(lambda x: F.dropout(x * 2, 0.5, True))
    x = L(6, seed=46)
    torch.manual_seed(38)
    out = g(x)
    R.rec("out", out)
    after(R, "after_call")
    R.step("g1", lambda: torch.autograd.grad(out.sum(), x, retain_graph=True))
    after(R, "after_g1")
    R.step("g2", lambda: torch.autograd.grad((out * W(out)).sum(), x))
    after(R, "after_g2")


# =====================================================================
# modules
# =====================================================================
def _mlp(seed=0):
    m = nn.Sequential(nn.Linear(4, 5), nn.Dropout(0.4), nn.Tanh(), nn.Linear(5, 2))
    return init_(m.double(), seed)


def _module_run(R, mod, m, x, seed, tag=""):
    """Seed, call ``m`` (``mod`` compiled), record as ``std`` does, with the parameters'
    gradients read from ``mod`` itself."""

    def record_grads():
        for n, p in mod.named_parameters():
            R.rec(f"grad{tag}.{n}", p.grad)
        R.grad("x" + tag, x)

    _seeded_run(R, lambda: m(x), seed, record_grads, tag)


@prog()
def module_dropout_train(C, R):
    mod = _mlp(1)
    _module_run(R, mod, C(mod), L(3, 4, seed=47), 40)


@prog()
def module_dropout_p_one(C, R):
    mod = init_(nn.Sequential(nn.Linear(3, 3), nn.Dropout(1.0)).double(), 8)
    _module_run(R, mod, C(mod), L(2, 3, seed=3), 5)


@prog()
def module_train_then_eval(C, R):
    mod = _mlp(3)
    m = C(mod)
    _module_run(R, mod, m, L(3, 4, seed=49), 42, ".train")
    mod.eval()
    mod.zero_grad()
    _module_run(R, mod, m, L(3, 4, seed=50), 42, ".eval")


class NoisyLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("eps", torch.zeros(3, 3))

    def forward(self, x):
        if self.training:
            self.eps.normal_()
            w = self.lin.weight + 0.1 * self.eps
        else:
            w = self.lin.weight
        return F.linear(x, w, self.lin.bias)


@prog()
def module_noisy_buffer_normal_(C, R):
    mod = init_(NoisyLinear().double(), 4)
    _module_run(R, mod, C(mod), L(2, 3, seed=51), 43)
    R.rec("eps", mod.eps)


class NoiseInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.25)

    def forward(self, x):
        h = self.lin(x) + 0.05 * torch.randn_like(x)
        return self.drop(h).relu() * torch.rand(1, dtype=x.dtype)


@prog()
def module_randn_like_and_dropout(C, R):
    mod = init_(NoiseInForward().double(), 5)
    _module_run(R, mod, C(mod), L(5, 4, seed=52), 44)


@prog()
def module_called_twice_in_a_row(C, R):
    mod = _mlp(6)
    m = C(mod)
    x = L(2, 4, seed=53)
    o1, o2 = _call_twice(R, m, x, 45)
    R.step("bw", lambda: (o1 * W(o1) + o2).sum().backward())
    for n, p in mod.named_parameters():
        R.rec(f"grad.{n}", p.grad)
    after(R, "after_bw")


# =====================================================================
# generators
# =====================================================================
@prog()
def generator_argument(C, R):
    def f(x, gen):
        return x * torch.rand(x.shape, generator=gen, dtype=x.dtype)

    std_gen(C, R, f, L(4, seed=54), 123, seed=46)


@prog()
def generator_argument_called_twice(C, R):
    def f(x, gen):
        return x + torch.randn(x.shape, generator=gen, dtype=x.dtype)

    g = C(f)
    gen = torch.Generator().manual_seed(7)
    x = L(3, seed=55)
    torch.manual_seed(47)
    R.rec("o1", g(x, gen))
    R.rec("o2", g(x, gen))
    gafter(R, "after", gen)
    after(R, "after_calls")


@prog()
def generator_in_place_fill(C, R):
    def f(x, gen):
        n = torch.empty_like(x).normal_(0.0, 1.0, generator=gen)
        u = torch.empty_like(x).uniform_(0, 1, generator=gen)
        return x * n + u

    std_gen(C, R, f, L(5, seed=56), 99, seed=48)


@prog()
def generator_and_global_interleaved(C, R):
    def f(x, gen):
        a = torch.rand(3, dtype=f64)
        b = torch.rand(3, generator=gen, dtype=f64)
        c = torch.randn(3, dtype=f64)
        return x * a + x * b * c

    std_gen(C, R, f, L(3, seed=57), 5, seed=49)


@prog()
def generator_created_inside(C, R):
    def f(x):
        gen = torch.Generator().manual_seed(31)
        return x * torch.randn(x.shape, generator=gen, dtype=x.dtype)

    std(C, R, f, L(4, seed=58), seed=50)


@prog()
def generator_reseeded_inside(C, R):
    def f(x, gen):
        gen.manual_seed(77)
        return x * torch.rand(x.shape, generator=gen, dtype=x.dtype)

    std_gen(C, R, f, L(4, seed=59), 1, seed=51)


@prog()
def generator_multinomial_and_randperm(C, R):
    def f(x, gen):
        idx = torch.multinomial(torch.ones(5, dtype=f64), 3, generator=gen)
        perm = torch.randperm(5, generator=gen)
        return x[idx] + x[perm][:3]

    std_gen(C, R, f, L(5, seed=60), 8, seed=52)


# =====================================================================
# reseeding and saving the global RNG inside the function
# =====================================================================
@prog()
def manual_seed_inside(C, R):
    def f(x):
        torch.manual_seed(3)
        return x * torch.rand_like(x)

    std(C, R, f, L(4, seed=61), seed=53)


@prog()
def get_and_set_rng_state_inside(C, R):
    def f(x):
        s = torch.get_rng_state()
        a = torch.rand(x.shape, dtype=x.dtype)
        torch.set_rng_state(s)
        b = torch.rand(x.shape, dtype=x.dtype)
        return x * a, x * b

    std(C, R, f, L(4, seed=63), seed=55)


@prog()
def set_rng_state_passed_in(C, R):
    def f(x, s):
        torch.set_rng_state(s)
        return F.dropout(x, 0.5, True)

    torch.manual_seed(99)
    s = torch.get_rng_state()
    std(C, R, f, L(6, seed=64), s, seed=56)


@prog()
def fork_rng_inside(C, R):
    def f(x):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(5)
            a = torch.rand_like(x)
        b = torch.rand_like(x)
        return x * a + x * b

    std(C, R, f, L(4, seed=65), seed=57)


# =====================================================================
# checkpoint
# =====================================================================
@prog()
def checkpoint_dropout_preserve_rng(C, R):
    def f(x):
        return checkpoint(lambda t: F.dropout(t.sin(), 0.5, True) * t, x, use_reentrant=False)

    std(C, R, f, L(8, seed=67), seed=59)


@prog()
def checkpoint_dropout_no_preserve_rng(C, R):
    # eager: the recomputation in the backward draws a fresh mask from the global RNG
    def f(x):
        return checkpoint(
            lambda t: F.dropout(t.sin(), 0.5, True) * t,
            x,
            use_reentrant=False,
            preserve_rng_state=False,
        )

    std(C, R, f, L(8, seed=68), seed=60)


@prog()
def checkpoint_rand_like_region(C, R):
    def f(x, w):
        def region(a):
            return (a @ w * torch.rand(a.shape[0], w.shape[1], dtype=a.dtype)).tanh()

        return checkpoint(region, x, use_reentrant=False).sum(1)

    std(C, R, f, L(3, 4, seed=69), L(4, 2, seed=70), seed=61)


@prog()
def checkpoint_module_with_dropout(C, R):
    class Blk(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _mlp(7)

        def forward(self, x):
            return checkpoint(self.inner, x, use_reentrant=False)

    mod = Blk()
    _module_run(R, mod, C(mod), L(3, 4, seed=71), 62)


# =====================================================================
# no_grad, repeated calls, caller draws between
# =====================================================================
@prog()
def random_under_no_grad_inside(C, R):
    def f(x):
        with torch.no_grad():
            n = torch.randn_like(x)
            m = F.dropout(torch.ones_like(x), 0.5, True)
        return x * n * m

    std(C, R, f, L(6, seed=72), seed=63)


@prog()
def called_under_no_grad(C, R):
    g = C(lambda x: F.dropout(x, 0.5, True) + torch.rand_like(x))
    x = L(6, seed=73)
    torch.manual_seed(64)
    with torch.no_grad():
        out = g(x)
    R.rec("out", out)
    after(R, "after_call")
    torch.manual_seed(64)
    out2 = g(x)
    R.rec("out2", out2)
    after(R, "after_call2")
    bw(R, out2)
    R.grad("x", x)


@prog()
def called_twice_in_a_row(C, R):
    g = C(lambda x: x * torch.rand_like(x) + torch.randn(2, dtype=f64).sum())
    x = L(5, seed=74)
    o1, o2 = _call_twice(R, g, x, 65)
    R.step("bw", lambda: (o1 * W(o1) + o2 * 3).sum().backward())
    R.grad("x", x)
    after(R, "after_bw")


@prog()
def caller_draws_between_calls(C, R):
    g = C(lambda x: F.dropout(x, 0.5, True))
    x = L(7, seed=75)
    o1, o2 = _call_twice(R, g, x, 66, between=True)
    R.step("bw", lambda: (o1 * W(o1) + o2).sum().backward())
    R.grad("x", x)


@prog()
def backward_between_calls(C, R):
    g = C(lambda x: (x * torch.randn_like(x)).sin())
    x = L(4, seed=76)
    torch.manual_seed(67)
    o1 = g(x)
    R.step("bw1", lambda: o1.sum().backward())
    after(R, "after_bw1")
    o2 = g(x)
    R.step("bw2", lambda: (o2 * W(o2)).sum().backward())
    R.rec("o1", o1)
    R.rec("o2", o2)
    R.grad("x", x)
    after(R, "after_bw2")


@prog()
def input_without_grad(C, R):
    std(C, R, lambda x: F.dropout(x, 0.5, True) + torch.rand(2, dtype=f64).sum(), L(5, rg=False))


@prog()
def data_dependent_branch_on_draw(C, R):
    def f(x):
        if torch.rand(()) > 0.5:
            return x * 2
        return x.sin()

    g = C(f)
    x = L(3, seed=80)
    for s in (0, 1, 2, 3):
        torch.manual_seed(s)
        R.step(f"o{s}", lambda: g(x))
    after(R, "after")


# =====================================================================
# errors eager raises
# =====================================================================
def _err(C, R, f, *args):
    g = C(f)
    torch.manual_seed(70)
    R.step("call", lambda: g(*args))
    after(R, "after_call")


@prog()
def err_randint_low_above_high(C, R):
    _err(C, R, lambda x: x + torch.randint(5, 2, x.shape), L(3, seed=81))


@prog()
def err_multinomial_negative_probs(C, R):
    _err(C, R, lambda p: torch.multinomial(p - 10, 2), L(4, seed=82))


@prog()
def err_multinomial_too_many_without_replacement(C, R):
    _err(C, R, lambda p: p[torch.multinomial(p.exp(), 6)], L(4, seed=83))


@prog()
def err_dropout_p_out_of_range(C, R):
    _err(C, R, lambda x: F.dropout(x, 1.5, True), L(3, seed=84))


@prog()
def err_normal_negative_std(C, R):
    _err(C, R, lambda x: x * torch.empty_like(x).normal_(0.0, -1.0), L(3, seed=86))


@prog()
def err_random_fill_on_leaf_requiring_grad(C, R):
    _err(C, R, lambda x: x.normal_() * 2, L(3, seed=87))


@prog()
def err_bernoulli_probs_above_one(C, R):
    _err(C, R, lambda x: x * torch.bernoulli(x.detach().abs() + 1.5), L(3, seed=88))
