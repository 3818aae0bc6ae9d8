# ruff: noqa: E741  (written by a blind helper: `l` is a loss throughout)
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.set_default_dtype(torch.float64)
PROGRAMS = {}


def prog(rtol=1e-6, atol=1e-8, rng=False, note=""):
    def deco(f):
        f.rtol, f.atol, f.rng, f.note = rtol, atol, rng, note
        PROGRAMS[f.__name__] = f
        return f

    return deco


def leaf(*shape):
    return torch.randn(*shape).requires_grad_()


# ---------------- straight-through / stop-gradient ----------------
@prog()
def ste_round(C, M, R):
    x, w = leaf(4, 3), leaf(3)

    def fn(x, w):
        y = x * w * 3
        q = y.round()
        return (y + (q - y).detach()).sum() * 0.5, q

    f = C(fn)
    loss, q = f(x, w)
    R("loss", loss)
    R("q", q)
    loss.backward()
    R("x", x)
    R("w", w)


@prog()
def ste_sign_binary_weights(C, M, R):
    x, w = leaf(5, 4), leaf(4, 3)

    def fn(x, w):
        wb = w + (w.sign() - w).detach()
        return (x @ wb).tanh()

    f = C(fn)
    out = f(x, w)
    R("out", out)
    out.pow(2).sum().backward()
    R("x", x)
    R("w", w)


@prog()
def detach_target(C, M, R):
    x, w = leaf(6, 3), leaf(3, 3)

    def fn(x, w):
        pred = x @ w
        target = (pred * 0.5 + 1).detach()
        return ((pred - target) ** 2).mean()

    f = C(fn)
    l = f(x, w)
    R("loss", l)
    l.backward()
    R("x", x)
    R("w", w)


@prog()
def stop_grad_partial(C, M, R):
    a, b = leaf(4), leaf(4)

    def fn(a, b):
        return a * b.detach() + a.detach() * b * 2 + a.detach().sin()

    f = C(fn)
    o = f(a, b)
    R("o", o)
    o.sum().backward()
    R("a", a)
    R("b", b)


@prog()
def detached_output_alias(C, M, R):
    x = leaf(3)

    def fn(x):
        y = x * 2
        return y, y.detach()

    f = C(fn)
    y, yd = f(x)
    R("y", y)
    R("yd", yd)
    yd.add_(100.0)  # eager: y shares storage with yd
    R("y_after", y)
    R("alias", y.data_ptr() == yd.data_ptr())


@prog()
def detach_inplace_intermediate(C, M, R):
    x, w = leaf(4), leaf(4)

    def fn(x, w):
        h = x * w
        g = h.detach()
        g.mul_(0)  # mutate detached view of h -> eager: h is zeroed too
        return h + w

    f = C(fn)
    o = R.try_("call", lambda: f(x, w))
    if o is not None:
        R("o", o)
        R.try_("bw", lambda: o.sum().backward())
        R("x", x)
        R("w", w)


# ---------------- buffers / BN ----------------
class BNNet(nn.Module):
    def __init__(self, momentum=0.1, track=True):
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4, momentum=momentum, track_running_stats=track)

    def forward(self, x):
        return self.bn(self.lin(x)).relu()


@prog()
def bn_train_two_calls(C, M, R):
    m = BNNet()
    m.train()
    cm = M(m)
    for i in range(2):
        x = torch.randn(6, 3)
        o = cm(x)
        R(f"o{i}", o)
        o.pow(2).sum().backward()
    R("m", m)
    R("nbt", m.bn.num_batches_tracked)


@prog()
def bn_eval(C, M, R):
    m = BNNet()
    m.bn.running_mean.fill_(0.3)
    m.bn.running_var.fill_(2.0)
    m.eval()
    cm = M(m)
    x = leaf(6, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)


@prog()
def bn_train_eval_switch(C, M, R):
    m = BNNet()
    cm = M(m)
    for i, mode in enumerate([True, False, True, False]):
        m.train(mode)
        x = torch.randn(5, 3)
        o = cm(x)
        R(f"o{i}", o)
        o.sum().backward()
        R(f"rm{i}", m.bn.running_mean.clone())
        R(f"nbt{i}", m.bn.num_batches_tracked.clone())
    R("m", m)


@prog()
def bn_cumulative_momentum_none(C, M, R):
    m = BNNet(momentum=None)
    m.train()
    cm = M(m)
    for i in range(3):
        x = torch.randn(4, 3) + i
        o = cm(x)
        R(f"o{i}", o)
        o.sum().backward()
    R("m", m)


@prog()
def bn2d_no_running_stats(C, M, R):
    m = nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3, track_running_stats=False), nn.ReLU()
    )
    cm = M(m)
    x = leaf(2, 2, 4, 4)
    o = cm(x)
    R("o", o)
    o.mean().backward()
    R("m", m)
    R("x", x)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.count += 1
        return self.lin(x) * self.count


@prog()
def buffer_counter_inplace(C, M, R):
    m = Counter()
    cm = M(m)
    for i in range(3):
        o = cm(torch.randn(2, 3))
        R(f"o{i}", o)
        o.sum().backward()
    R("m", m)


class EMA(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("ema", torch.zeros(()))

    def forward(self, x):
        y = self.lin(x)
        with torch.no_grad():
            self.ema.mul_(0.9).add_(y.mean() * 0.1)
        return y - self.ema


@prog()
def buffer_ema_no_grad(C, M, R):
    m = EMA()
    cm = M(m)
    for i in range(3):
        o = cm(torch.randn(4, 3))
        R(f"o{i}", o)
        o.sum().backward()
    R("m", m)


@prog()
def buffer_passed_to_fn_mutated(C, M, R):
    x = leaf(3)
    buf = torch.zeros(3)

    def fn(x, buf):
        buf.add_(1)
        return x * buf

    f = C(fn)
    for i in range(2):
        o = f(x, buf)
        R(f"o{i}", o)
        o.sum().backward()
    R("buf", buf)
    R("x", x)


class PyCounter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


@prog(note="python-int attribute mutated in forward")
def python_attr_counter(C, M, R):
    m = PyCounter()
    cm = M(m)
    for i in range(3):
        o = cm(torch.randn(2, 2))
        R(f"o{i}", o)
    R("calls", m.calls)


class WeightNormInplace(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 3))

    def forward(self, x):
        with torch.no_grad():
            self.w.div_(self.w.norm())
        return x @ self.w


@prog()
def param_renorm_inplace_no_grad(C, M, R):
    m = WeightNormInplace()
    cm = M(m)
    for i in range(2):
        x = leaf(2, 3)
        o = cm(x)
        R(f"o{i}", o)
        o.sum().backward()
        R(f"x{i}", x)
    R("m", m)


# ---------------- tying / sharing ----------------
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.out = nn.Linear(4, 7, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, idx):
        return self.out(self.emb(idx).tanh())


@prog()
def weight_tying_module(C, M, R):
    m = Tied()
    cm = M(m)
    idx = torch.tensor([[1, 2, 3], [0, 6, 2]])
    o = cm(idx)
    R("o", o)
    F.cross_entropy(o.reshape(-1, 7), idx.reshape(-1)).backward()
    R("m", m)
    R("tied", m.out.weight is m.emb.weight)


@prog()
def param_passed_twice(C, M, R):
    x, w = leaf(3, 3), leaf(3, 3)

    def fn(x, a, b):
        return (x @ a @ b).sum() + (a * 2).sum()

    f = C(fn)
    o = f(x, w, w)
    R("o", o)
    o.backward()
    R("w", w)
    R("x", x)
    x2 = leaf(3, 3)
    w2 = leaf(3, 3)
    o2 = f(x2, w, w2)
    R("o2", o2)
    o2.backward()
    R("w_after", w)
    R("w2", w2)


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        shared = nn.Linear(3, 3)
        self.a = nn.Sequential(shared, nn.Tanh())
        self.b = nn.Sequential(shared, nn.Sigmoid())

    def forward(self, x):
        return self.a(x) + self.b(x)


@prog()
def shared_submodule(C, M, R):
    m = Shared()
    cm = M(m)
    x = leaf(2, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)
    R("params", [p for p in m.parameters()])


# ---------------- accumulation / optimizers ----------------
@prog()
def grad_accumulation(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    cm = M(m)
    for _i in range(3):
        x = torch.randn(5, 3)
        (cm(x).pow(2).mean() / 3).backward()
    R("m", m)


@prog()
def sgd_loop_zero_grad(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.GELU(), nn.Linear(4, 2))
    cm = M(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for i in range(4):
        opt.zero_grad(set_to_none=(i % 2 == 0))
        x = torch.randn(4, 3)
        y = torch.randn(4, 2)
        loss = F.mse_loss(cm(x), y)
        R(f"loss{i}", loss)
        loss.backward()
        opt.step()
    R("m", m)


@prog()
def adam_loop_layernorm(C, M, R):
    m = nn.Sequential(nn.Linear(3, 5), nn.LayerNorm(5), nn.SiLU(), nn.Linear(5, 3))
    cm = M(m)
    opt = torch.optim.AdamW(m.parameters(), lr=0.01)
    for i in range(3):
        opt.zero_grad()
        x = torch.randn(4, 3)
        t = torch.randint(0, 3, (4,))
        loss = F.cross_entropy(cm(x), t, label_smoothing=0.1)
        R(f"loss{i}", loss)
        loss.backward()
        opt.step()
    R("m", m)


@prog()
def zero_grad_false_then_backward(C, M, R):
    m = nn.Linear(3, 2)
    cm = M(m)
    cm(torch.randn(2, 3)).sum().backward()
    m.zero_grad(set_to_none=False)
    R("after_zero", m)
    cm(torch.randn(2, 3)).sum().backward()
    R("m", m)


@prog()
def sgd_step_in_fn(C, M, R):
    ps = [leaf(3), leaf(2, 2)]
    (ps[0].sum() * 2 + ps[1].pow(2).sum()).backward()

    def step(p0, p1, lr):
        with torch.no_grad():
            p0.add_(p0.grad, alpha=-lr)
            p1.add_(p1.grad, alpha=-lr)

    f = C(step)
    R.try_("step", lambda: f(ps[0], ps[1], 0.1))
    R("ps", ps)


@prog()
def sgd_step_explicit_grads(C, M, R):
    ps = [leaf(3), leaf(2, 2)]
    gs = [torch.randn(3), torch.randn(2, 2)]
    bufs = [torch.zeros(3), torch.zeros(2, 2)]

    def step(p0, p1, g0, g1, b0, b1):
        with torch.no_grad():
            for p, g, b in ((p0, g0, b0), (p1, g1, b1)):
                b.mul_(0.9).add_(g)
                p.add_(b, alpha=-0.1)

    f = C(step)
    for i in range(2):
        R.try_(f"step{i}", lambda: f(*ps, *gs, *bufs))
    R("ps", ps)
    R("bufs", bufs)


@prog()
def foreach_ema_update(C, M, R):
    params = [torch.randn(3), torch.randn(2, 2)]
    ema = [torch.zeros(3), torch.zeros(2, 2)]

    def upd(e0, e1, p0, p1):
        with torch.no_grad():
            torch._foreach_mul_([e0, e1], 0.99)
            torch._foreach_add_([e0, e1], [p0, p1], alpha=0.01)

    f = C(upd)
    for _i in range(2):
        f(*ema, *params)
    R("ema", ema)


@prog()
def p_data_update_in_fn(C, M, R):
    p = leaf(3)

    def fn(p, x):
        p.data.mul_(0.5)
        return (p * x).sum()

    f = C(fn)
    x = torch.randn(3)
    o = R.try_("call", lambda: f(p, x))
    if o is not None:
        R("o", o)
        o.backward()
    R("p", p)


@prog(note="loss.backward() inside the compiled function")
def backward_inside_fn(C, M, R):
    w = leaf(3)

    def step(w, x):
        loss = (w * x).pow(2).sum()
        loss.backward()
        return loss.detach()

    f = C(step)
    o = R.try_("call", lambda: f(w, torch.randn(3)))
    R("o", o)
    R("w", w)


# ---------------- higher-order grads / retain graph ----------------
@prog()
def gradient_penalty(C, M, R):
    x, w = leaf(4, 3), leaf(3, 2)

    def fn(x, w):
        return torch.tanh(x @ w).pow(2).sum(1)

    f = C(fn)
    out = f(x, w)
    R("out", out)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    R("g", g)
    pen = ((g.norm(dim=1) - 1) ** 2).mean()
    R("pen", pen)
    (pen + out.mean()).backward()
    R("w", w)
    R("x", x)


@prog()
def hessian_vector_product(C, M, R):
    w = leaf(4)
    v = torch.randn(4)

    def fn(w):
        return (w.sin() * w.exp()).sum() + (w**3).sum()

    f = C(fn)
    l = f(w)
    (g,) = torch.autograd.grad(l, w, create_graph=True)
    (hv,) = torch.autograd.grad(g @ v, w)
    R("g", g)
    R("hv", hv)


@prog()
def double_backward_module(C, M, R):
    m = nn.Sequential(nn.Linear(2, 4), nn.Softplus(), nn.Linear(4, 1))
    cm = M(m)
    x = leaf(3, 2)
    y = cm(x)
    (dx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    dx.pow(2).sum().backward()
    R("dx", dx)
    R("m", m)
    R("x", x)


@prog()
def retain_graph_two_backward(C, M, R):
    x, w = leaf(3), leaf(3)

    def fn(x, w):
        return (x * w).exp().sum()

    f = C(fn)
    o = f(x, w)
    o.backward(retain_graph=True)
    R("w1", w.grad.clone())
    o.backward()
    R("w", w)
    R("x", x)


@prog()
def backward_twice_without_retain(C, M, R):
    x, w = leaf(3), leaf(3)

    def fn(x, w):
        return (x * w).exp().sum()

    f = C(fn)
    o = f(x, w)
    o.backward()
    R.try_("second", lambda: o.backward())
    R("w", w)


@prog()
def backward_with_gradient_arg(C, M, R):
    x = leaf(2, 3)

    def fn(x):
        return x.sigmoid() * 3, x.cumsum(1)

    f = C(fn)
    a, b = f(x)
    torch.autograd.backward([a, b], [torch.full_like(a, 2.0), torch.randn(2, 3)])
    R("x", x)


@prog()
def autograd_grad_allow_unused(C, M, R):
    x, y = leaf(3), leaf(3)

    def fn(x, y):
        return (x * 2).sum(), y.detach() + 1

    f = C(fn)
    o, d = f(x, y)
    gx, gy = torch.autograd.grad(o, [x, y], allow_unused=True)
    R("gx", gx)
    R("gy", gy)
    R("d", d)


# ---------------- hooks / retain_grad ----------------
@prog()
def register_hook_intermediate_scale(C, M, R):
    x, w = leaf(3), leaf(3)

    def fn(x, w):
        h = x * w
        h.register_hook(lambda g: g * 10)
        return (h.sin()).sum()

    f = C(fn)
    o = R.try_("call", lambda: f(x, w))
    if o is not None:
        R("o", o)
        o.backward()
    R("x", x)
    R("w", w)


@prog()
def register_hook_side_effect(C, M, R):
    seen = []
    x = leaf(3)

    def fn(x):
        h = x.exp()
        h.register_hook(lambda g: seen.append(g.clone()))
        return (h * h).sum()

    f = C(fn)
    o = R.try_("call", lambda: f(x))
    if o is not None:
        o.backward()
    R("seen", seen)
    R("x", x)


@prog()
def retain_grad_intermediate(C, M, R):
    x = leaf(3)

    def fn(x):
        h = x * 3
        h.retain_grad()
        return (h**2).sum(), h

    f = C(fn)
    o = R.try_("call", lambda: f(x))
    if o is not None:
        loss, h = o
        loss.backward()
        R("h", h)
        R("h_grad", h.grad)
    R("x", x)


@prog()
def hook_on_param_outside(C, M, R):
    m = nn.Linear(3, 2)
    cm = M(m)
    m.weight.register_hook(lambda g: g.clamp(-0.1, 0.1))
    cm(torch.randn(4, 3)).pow(2).sum().backward()
    R("m", m)


# ---------------- checkpoint ----------------
@prog()
def checkpoint_nonreentrant_fn(C, M, R):
    x, w1, w2 = leaf(4, 3), leaf(3, 3), leaf(3, 2)

    def block(h, w):
        return torch.tanh(h @ w).relu()

    def fn(x, w1, w2):
        h = checkpoint(block, x, w1, use_reentrant=False)
        return (h @ w2).sum()

    f = C(fn)
    o = f(x, w1, w2)
    R("o", o)
    o.backward()
    R("x", x)
    R("w1", w1)
    R("w2", w2)


class CkptNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(3, 5)
        self.l2 = nn.Linear(5, 5)
        self.l3 = nn.Linear(5, 1)

    def forward(self, x):
        h = self.l1(x).relu()
        h = checkpoint(lambda t: self.l2(t).tanh() + t, h, use_reentrant=False)
        return self.l3(h)


@prog()
def checkpoint_in_module(C, M, R):
    m = CkptNet()
    cm = M(m)
    x = leaf(4, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)


# ---------------- in-place activations ----------------
@prog()
def relu_inplace_fn(C, M, R):
    x, w = leaf(4, 3), leaf(3, 3)

    def fn(x, w):
        y = x @ w
        y.relu_()
        return y * 2

    f = C(fn)
    o = f(x, w)
    R("o", o)
    o.sum().backward()
    R("x", x)
    R("w", w)


@prog()
def relu_inplace_module(C, M, R):
    m = nn.Sequential(
        nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 4), nn.LeakyReLU(0.1, inplace=True)
    )
    cm = M(m)
    x = leaf(5, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x)
        h += x
        h = F.relu(h, inplace=True)
        h *= 0.5
        return h


@prog()
def residual_inplace_add(C, M, R):
    m = Residual()
    cm = M(m)
    x = leaf(4, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)


@prog()
def inplace_on_input_activation(C, M, R):
    x = torch.randn(4)
    w = leaf(4)

    def fn(x, w):
        x.relu_()
        return x * w

    f = C(fn)
    o = f(x, w)
    R("o", o)
    R("x_after", x)
    o.sum().backward()
    R("w", w)


@prog()
def inplace_on_leaf_requiring_grad_error(C, M, R):
    x = leaf(3)

    def fn(x):
        x.mul_(2)
        return x

    f = C(fn)
    R.try_("call", lambda: f(x))
    R("x", x)


# ---------------- dropout ----------------
@prog(rng=True)
def dropout_fixed_seed(C, M, R):
    x = leaf(6, 4)

    def fn(x):
        return F.dropout(x.tanh(), p=0.5, training=True) * 2

    f = C(fn)
    for i in range(2):
        torch.manual_seed(123)
        o = f(x)
        R(f"o{i}", o)
        o.sum().backward()
    R("x", x)


@prog(rng=False)
def dropout_eval_mode_module(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.3), nn.Linear(4, 2))
    m.eval()
    cm = M(m)
    x = leaf(5, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("m", m)
    R("x", x)


@prog(rng=True)
def dropout_train_then_eval(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    cm = M(m)
    torch.manual_seed(7)
    o1 = cm(torch.ones(8, 3))
    R("o_train", o1)
    m.eval()
    o2 = cm(torch.ones(8, 3))
    R("o_eval", o2)
    R("eval_is_deterministic", bool(torch.allclose(o2[0], o2[1])))


# ---------------- losses ----------------
@prog()
def loss_reduction_none_mean(C, M, R):
    logits = leaf(5, 4)
    t = torch.tensor([0, 3, 1, 1, 2])
    wt = torch.rand(5)

    def fn(logits, t, wt):
        ce = F.cross_entropy(logits, t, reduction="none")
        mse = F.mse_loss(
            logits.softmax(-1), F.one_hot(t, 4).to(logits.dtype), reduction="none"
        ).sum(-1)
        return (ce * wt).mean() + mse.mean(), ce

    f = C(fn)
    l, ce = f(logits, t, wt)
    R("l", l)
    R("ce", ce)
    l.backward()
    R("logits", logits)


@prog()
def masked_loss(C, M, R):
    pred, tgt = leaf(3, 5), torch.randn(3, 5)
    mask = torch.rand(3, 5) > 0.4

    def fn(pred, tgt, mask):
        l = (pred - tgt).abs() * mask
        return l.sum() / mask.sum().clamp(min=1)

    f = C(fn)
    l = f(pred, tgt, mask)
    R("l", l)
    l.backward()
    R("pred", pred)


@prog()
def ignore_index_ce(C, M, R):
    logits = leaf(6, 3)
    t = torch.tensor([0, -100, 2, 1, -100, 0])

    def fn(logits, t):
        return F.cross_entropy(logits, t, ignore_index=-100), F.nll_loss(
            logits.log_softmax(-1), t, reduction="sum"
        )

    f = C(fn)
    a, b = f(logits, t)
    R("a", a)
    R("b", b)
    (a + b).backward()
    R("logits", logits)


@prog()
def where_nan_safe(C, M, R):
    x = torch.tensor([-1.0, 0.0, 2.0, 3.0]).requires_grad_()

    def fn(x):
        safe = torch.where(x > 0, x, torch.ones_like(x))
        return torch.where(x > 0, safe.log(), torch.zeros_like(x)).sum()

    f = C(fn)
    o = f(x)
    R("o", o)
    o.backward()
    R("x", x)


@prog()
def where_nan_unsafe(C, M, R):
    x = torch.tensor([-1.0, 0.0, 2.0, 3.0]).requires_grad_()

    def fn(x):
        return torch.where(x > 0, x.log(), torch.zeros_like(x)).sum(), x.sqrt()

    f = C(fn)
    o, s = f(x)
    R("o", o)
    R("s", s)
    o.backward()
    R("x", x)


@prog()
def kl_distill_teacher_nograd(C, M, R):
    student, teacher = nn.Linear(4, 3), nn.Linear(4, 3)

    class Distill(nn.Module):
        def __init__(s):
            super().__init__()
            s.student = student
            s.teacher = teacher

        def forward(s, x):
            with torch.no_grad():
                t = s.teacher(x).div(2.0).softmax(-1)
            lp = s.student(x).div(2.0).log_softmax(-1)
            return F.kl_div(lp, t, reduction="batchmean") * 4

    m = Distill()
    cm = M(m)
    l = cm(torch.randn(5, 4))
    R("l", l)
    l.backward()
    R("m", m)


@prog()
def grad_scaler_like(C, M, R):
    w = leaf(3, 2)

    def fwd(x, w, scale):
        return (x @ w).pow(2).mean() * scale

    def unscale(g, inv):
        with torch.no_grad():
            g.mul_(inv)
            return torch.isfinite(g).all()

    f, u = C(fwd), C(unscale)
    l = f(torch.randn(4, 3), w, 1024.0)
    l.backward()
    ok = u(w.grad, 1 / 1024.0)
    R("ok", ok)
    R("w", w)


@prog(note=".item() inside the function (logging)")
def item_logging(C, M, R):
    logs = []
    w = leaf(3)

    def fn(x, w):
        loss = (x * w).sum()
        logs.append(loss.item())
        return loss

    f = C(fn)
    for i in range(2):
        l = R.try_(f"call{i}", lambda: f(torch.randn(3), w))
        if l is not None:
            l.backward()
    R("logs", logs)
    R("w", w)


# ---------------- autocast ----------------
@prog(rtol=2e-2, atol=2e-2)
def autocast_around_call(C, M, R):
    x = torch.randn(4, 3, dtype=torch.float32, requires_grad=True)
    w = torch.randn(3, 5, dtype=torch.float32, requires_grad=True)

    def fn(x, w):
        return (x @ w).relu(), (x * 2).sum()

    f = C(fn)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a, b = f(x, w)
    R("a", a)
    R("b", b)
    (a.float().sum() + b).backward()
    R("x", x)
    R("w", w)


@prog(rtol=2e-2, atol=2e-2)
def autocast_inside_fn(C, M, R):
    x = torch.randn(4, 3, dtype=torch.float32, requires_grad=True)
    w = torch.randn(3, 5, dtype=torch.float32, requires_grad=True)

    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = x @ w
            with torch.autocast("cpu", enabled=False):
                s = h.float().softmax(-1)
        return h, s

    f = C(fn)
    h, s = f(x, w)
    R("h", h)
    R("s", s)
    (h.float().sum() + s.pow(2).sum()).backward()
    R("x", x)
    R("w", w)


@prog(rtol=2e-2, atol=2e-2)
def autocast_module_training(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).float()
    cm = M(m)
    x = torch.randn(5, 3, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        o = cm(x)
        loss = F.mse_loss(o.float(), torch.zeros(5, 2))
    R("o", o)
    R("loss", loss)
    loss.backward()
    R("m", m)
    o2 = cm(x)
    R("o_noautocast", o2)


# ---------------- outputs ----------------
@prog()
def dict_output_mixed(C, M, R):
    x, w = leaf(3, 2), leaf(2)

    def fn(x, w):
        y = x @ w
        return {
            "loss": y.pow(2).mean(),
            "logits": y,
            "n": 3,
            "name": "run",
            "stats": (y.min(), 1.5, None),
        }

    f = C(fn)
    d = f(x, w)
    R("d", d)
    d["loss"].backward()
    R("x", x)
    R("w", w)


@prog()
def list_tuple_output(C, M, R):
    x = leaf(4)

    def fn(x):
        return (x * 2, [x.cos(), None, 7], 2.5, x.shape[0])

    f = C(fn)
    o = f(x)
    R("o", o)
    (o[0].sum() + o[1][0].sum()).backward()
    R("x", x)


@prog()
def return_param_itself(C, M, R):
    x, w = leaf(3), leaf(3)

    def fn(x, w):
        return x * w, w

    f = C(fn)
    y, w_out = f(x, w)
    R("y", y)
    R("w_out", w_out)
    R("is_same", w_out is w)
    (y.sum() + w_out.sum()).backward()
    R("w", w)
    R("x", x)


class ReturnsWeight(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x), self.lin.weight, self.lin.bias.detach()


@prog()
def module_returns_param(C, M, R):
    m = ReturnsWeight()
    cm = M(m)
    o, wt, b = cm(torch.randn(3, 2))
    R("o", o)
    R("wt", wt)
    R("b", b)
    R("wt_is_param", wt is m.lin.weight)
    (o.sum() + (wt**2).sum()).backward()
    R("m", m)


@prog()
def return_input_and_view(C, M, R):
    x = leaf(2, 3)

    def fn(x):
        return x, x.view(-1), x.t()

    f = C(fn)
    a, b, c = f(x)
    R("a", a)
    R("b", b)
    R("c", c)
    R("a_is_x", a is x)
    R("b_base_alias", b.data_ptr() == x.data_ptr())
    (b.sum() * 2 + c.sum()).backward()
    R("x", x)


@prog()
def output_view_of_intermediate_both_used(C, M, R):
    x = leaf(2, 3)

    def fn(x):
        y = x.exp()
        return y, y.view(-1)[:4]

    f = C(fn)
    y, v = f(x)
    R("y", y)
    R("v", v)
    (y.sum() + (v * 3).sum()).backward()
    R("x", x)


# ---------------- grad modes ----------------
@prog()
def call_under_no_grad_then_grad(C, M, R):
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    cm = M(m)
    x = torch.randn(2, 3)
    with torch.no_grad():
        o1 = cm(x)
    R("o1", o1)
    o2 = cm(x)
    R("o2", o2)
    o2.sum().backward()
    R("m", m)


@prog()
def call_under_inference_mode(C, M, R):
    m = nn.Linear(3, 3)
    cm = M(m)
    with torch.inference_mode():
        o = cm(torch.randn(2, 3))
    R("o", o)
    R("inf", o.is_inference())
    o2 = cm(torch.randn(2, 3))
    o2.sum().backward()
    R("m", m)


@prog()
def requires_grad_toggle_between_calls(C, M, R):
    w = torch.randn(3)

    def fn(x, w):
        return (x * w).sin().sum()

    f = C(fn)
    o1 = f(torch.randn(3), w)
    R("o1", o1)
    w.requires_grad_()
    o2 = f(torch.randn(3), w)
    R("o2", o2)
    o2.backward()
    R("w", w)


@prog()
def freeze_layer_midtraining(C, M, R):
    m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    cm = M(m)
    cm(torch.randn(2, 3)).sum().backward()
    m[0].weight.requires_grad_(False)
    m[0].weight.grad = None
    cm(torch.randn(2, 3)).sum().backward()
    R("m", m)


# ---------------- misc realistic modules ----------------
@prog()
def embedding_padding_idx(C, M, R):
    m = nn.Sequential(nn.Embedding(6, 3, padding_idx=0), nn.Flatten(), nn.Linear(9, 1))
    cm = M(m)
    idx = torch.tensor([[0, 2, 5], [1, 0, 0]])
    o = cm(idx)
    R("o", o)
    o.sum().backward()
    R("m", m)


@prog()
def lstmcell_unroll(C, M, R):
    cell = nn.LSTMCell(3, 4)

    class Unroll(nn.Module):
        def __init__(s):
            super().__init__()
            s.cell = cell

        def forward(s, xs):
            h = torch.zeros(xs.shape[1], 4)
            c = torch.zeros(xs.shape[1], 4)
            outs = []
            for t in range(xs.shape[0]):
                h, c = s.cell(xs[t], (h, c))
                outs.append(h)
            return torch.stack(outs)

    m = Unroll()
    cm = M(m)
    xs = leaf(3, 2, 3)
    o = cm(xs)
    R("o", o)
    o.pow(2).sum().backward()
    R("m", m)
    R("xs", xs)


@prog()
def weight_norm_parametrization(C, M, R):
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
    cm = M(lin)
    x = leaf(4, 3)
    o = cm(x)
    R("o", o)
    o.sum().backward()
    R("x", x)
    R("params", {n: p for n, p in lin.named_parameters()})


@prog()
def closure_captured_module_fn(C, M, R):
    lin = nn.Linear(3, 2)

    def fn(x):
        return lin(x).relu().sum()

    f = C(fn)
    o = f(torch.randn(4, 3))
    R("o", o)
    R.try_("bw", lambda: o.backward())
    R("lin", lin)


@prog()
def clip_grad_then_step(C, M, R):
    m = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
    cm = M(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    for i in range(2):
        opt.zero_grad()
        (cm(torch.randn(4, 3)) * 100).sum().backward()
        n = nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        R(f"norm{i}", n)
        opt.step()
    R("m", m)


# ================= batch 2 =================
@prog()
def aux_output_nan_not_backpropped(C, M, R):
    x = torch.tensor([-1.0, 0.5, 2.0]).requires_grad_()
    w = leaf(3)

    def fn(x, w):
        loss = (x * w).pow(2).sum()
        metric = x.sqrt()  # logged only, never backpropagated
        return loss, metric

    f = C(fn)
    loss, metric = f(x, w)
    R("loss", loss)
    R("metric", metric)
    loss.backward()
    R("x", x)
    R("w", w)


class SameModTwoNames(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(3, 3)
        self.dec = self.enc

    def forward(self, x):
        return self.dec(self.enc(x).tanh())


@prog()
def same_module_two_names(C, M, R):
    m = SameModTwoNames()
    cm = M(m)
    for i in range(2):
        o = cm(torch.randn(2, 3))
        R(f"o{i}", o)
        o.sum().backward()
    R("m", m)
    R("still_param", isinstance(m.enc.weight, nn.Parameter) and m.enc.weight.is_leaf)


@prog()
def shared_submodule_train_loop(C, M, R):
    m = Shared()
    cm = M(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(2):
        opt.zero_grad()
        l = cm(torch.randn(2, 3)).pow(2).sum()
        R(f"l{i}", l)
        l.backward()
        opt.step()
    R("w", m.a[0].weight.detach().clone())
    R("is_leaf", m.a[0].weight.is_leaf)


@prog()
def hook_side_effect_two_calls(C, M, R):
    seen = []
    w = leaf(3)

    def fn(x, w):
        h = x * w
        h.register_hook(lambda g: seen.append(float(g.sum())))
        return h.pow(2).sum()

    f = C(fn)
    for i in range(2):
        R.try_(f"bw{i}", lambda: f(torch.randn(3), w).backward())
    R("n_seen", len(seen))
    R("seen", seen)
    R("w", w)


@prog()
def forward_hook_feature_extraction(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    feats = []
    m[1].register_forward_hook(lambda mod, inp, out: feats.append(out.detach()))
    cm = M(m)
    for _i in range(2):
        o = cm(torch.randn(2, 3))
        o.sum().backward()
    R("n", len(feats))
    R.try_("feats", lambda: R("feats_val", [f_ * 1 for f_ in feats]))
    R("m", m)


@prog()
def full_backward_hook_module(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    gnorms = []
    m[0].register_full_backward_hook(lambda mod, gi, go: gnorms.append(float(go[0].norm())))
    cm = M(m)
    x = leaf(2, 3)
    o = cm(x)
    o.sum().backward()
    R("gnorms", gnorms)
    R("m", m)
    R("x", x)


class StoreAttn(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(4, 4)
        self.last_attn = None

    def forward(self, x):
        a = (self.q(x) @ x.transpose(-1, -2)).softmax(-1)
        self.last_attn = a.detach()
        return a @ x


@prog()
def store_intermediate_on_module(C, M, R):
    m = StoreAttn()
    cm = M(m)
    o = cm(torch.randn(3, 4))
    o.sum().backward()
    R("o", o)
    R.try_("use_attn", lambda: R("attn", m.last_attn * 1))
    R("m", m)


class ReassignBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.register_buffer("running", torch.zeros(3))

    def forward(self, x):
        y = self.lin(x)
        self.running = 0.9 * self.running + 0.1 * y.mean(0).detach()
        return y - self.running


@prog()
def buffer_reassigned_in_forward(C, M, R):
    m = ReassignBuffer()
    cm = M(m)
    for i in range(3):
        o = R.try_(f"call{i}", lambda: cm(torch.randn(4, 3)))
        if o is not None:
            R(f"o{i}", o)
            o.sum().backward()
    R("running", m.running)
    R("m", m)


@prog()
def module_returns_buffer(C, M, R):
    m = BNNet()
    M(m)

    class W(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = m

        def forward(s, x):
            return s.net(x), s.net.bn.running_mean

    w = W()
    cw = M(w)
    o, rm = cw(torch.randn(4, 3))
    R("o", o)
    R("rm", rm)
    R("rm_is_buffer", rm is m.bn.running_mean)
    o.sum().backward()
    R("m", m)


@prog()
def varying_batch_size(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 1))
    cm = M(m)
    for i, b in enumerate([8, 8, 3, 8, 5]):
        o = cm(torch.randn(b, 3))
        R(f"o{i}", o)
        o.mean().backward()
    R("m", m)


@prog()
def load_state_dict_between_calls(C, M, R):
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    cm = M(m)
    x = torch.randn(4, 3)
    R("o1", cm(x))
    other = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    other.train()
    other(torch.randn(4, 3))
    m.load_state_dict(other.state_dict())
    o2 = cm(x)
    R("o2", o2)
    o2.sum().backward()
    R("m", m)


@prog()
def replace_parameter_between_calls(C, M, R):
    m = nn.Linear(3, 2)
    cm = M(m)
    x = torch.randn(4, 3)
    R("o1", cm(x))
    m.weight = nn.Parameter(torch.ones(2, 3))
    o2 = cm(x)
    R("o2", o2)
    o2.sum().backward()
    R("m", m)
    with torch.no_grad():
        m.weight.data = torch.full((2, 3), 2.0)
    R("o3", cm(x))


@prog()
def compiled_wrapper_eval_train(C, M, R):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    cm = M(m)
    x = torch.randn(5, 3)
    R("o_train", cm(x))
    cm.eval()
    R("training_after_eval", m.training)
    R("bn_training", m[1].training)
    R("o_eval", cm(x))
    cm.train()
    R("o_train2", cm(x))
    R("m", m)


@prog(rng=True)
def rng_state_after_dropout(C, M, R):
    x = leaf(5)

    def fn(x):
        return F.dropout(x, 0.5, training=True) + torch.rand(5)

    f = C(fn)
    torch.manual_seed(1)
    o = f(x)
    R("o", o)
    R("next_rand", torch.rand(3))
    o.sum().backward()
    R("x", x)


@prog()
def two_outputs_separate_backward(C, M, R):
    a, b, w = leaf(3), leaf(3), leaf(3)

    def fn(a, b, w):
        return (a * w).sum(), (b * w.detach()).sin().sum()

    f = C(fn)
    l1, l2 = f(a, b, w)
    l1.backward()
    R.try_("second_bw", lambda: l2.backward())
    R("a", a)
    R("b", b)
    R("w", w)


@prog()
def gan_style_step(C, M, R):
    G, D = nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 1), nn.Sigmoid())
    cG, cD = M(G), M(D)
    z = torch.randn(4, 2)
    real = torch.randn(4, 3)
    fake = cG(z)
    d_loss = F.binary_cross_entropy(cD(fake.detach()), torch.zeros(4, 1)) + F.binary_cross_entropy(
        cD(real), torch.ones(4, 1)
    )
    d_loss.backward()
    R("d_loss", d_loss)
    R("D", D)
    R("G_after_d", G)
    D.zero_grad()
    g_loss = F.binary_cross_entropy(cD(fake), torch.ones(4, 1))
    g_loss.backward()
    R("g_loss", g_loss)
    R("G", G)
    R("D2", D)


@prog()
def gradient_penalty_inside_fn(C, M, R):
    x, w = torch.randn(4, 3), leaf(3, 2)

    def fn(x, w):
        x = x.detach().requires_grad_()
        out = torch.tanh(x @ w).pow(2).sum()
        (g,) = torch.autograd.grad(out, x, create_graph=True)
        return out + ((g.norm(dim=1) - 1) ** 2).mean()

    f = C(fn)
    l = R.try_("call", lambda: f(x, w))
    if l is not None:
        R("l", l)
        l.backward()
    R("w", w)


@prog()
def enable_grad_under_no_grad(C, M, R):
    w = leaf(3)

    def fn(x, w):
        with torch.enable_grad():
            x = x.detach().requires_grad_()
            y = (x * w).pow(2).sum()
            (g,) = torch.autograd.grad(y, x)
        return g

    f = C(fn)
    with torch.no_grad():
        g = R.try_("call", lambda: f(torch.randn(3), w))
    R("g", g)
    R("w", w)


@prog()
def no_grad_region_inside_fn(C, M, R):
    x, w = leaf(3), leaf(3)

    def fn(x, w):
        with torch.no_grad():
            scale = (x * w).abs().max()
        y = x * w / scale
        return y, scale

    f = C(fn)
    y, s = f(x, w)
    R("y", y)
    R("s", s)
    y.sum().backward()
    R("x", x)
    R("w", w)


@prog()
def zero_grad_inside_fn(C, M, R):
    w = leaf(3)
    (w * 2).sum().backward()

    def fn(w, x):
        w.grad.zero_()
        return (w * x).sum()

    f = C(fn)
    l = R.try_("call", lambda: f(w, torch.randn(3)))
    R("w_after_call", w)
    if l is not None:
        l.backward()
    R("w", w)


@prog()
def compiled_block_called_twice(C, M, R):
    blk = nn.Sequential(nn.Linear(3, 3), nn.Tanh())
    cb = M(blk)
    x = leaf(2, 3)
    h = cb(x)
    h = cb(h)
    h = cb(h * 0.5)
    h.sum().backward()
    R("h", h)
    R("blk", blk)
    R("x", x)


@prog()
def noncontiguous_inputs(C, M, R):
    w = leaf(3, 4)

    def fn(x, w):
        return (x @ w).relu().sum(0)

    f = C(fn)
    x1 = torch.randn(3, 5).t()  # non-contiguous
    o1 = f(x1, w)
    R("o1", o1)
    o1.sum().backward()
    x2 = torch.randn(5, 3)
    o2 = f(x2, w)
    R("o2", o2)
    o2.sum().backward()
    R("w", w)


@prog()
def output_detach_requires_grad(C, M, R):
    x = leaf(3)

    def fn(x):
        y = (x * 2).detach().requires_grad_()
        return y, x * 3

    f = C(fn)
    y, z = R.try_("call", lambda: f(x)) or (None, None)
    R("y", y)
    R("z", z)
    if z is not None:
        (y.sum() + z.sum()).backward()
        R("y_after", y)
    R("x", x)


@prog()
def ste_quantize_module_with_buffer_scale(C, M, R):
    class QLinear(nn.Module):
        def __init__(s):
            super().__init__()
            s.lin = nn.Linear(3, 3)
            s.register_buffer("amax", torch.zeros(()))

        def forward(s, x):
            with torch.no_grad():
                s.amax.copy_(torch.maximum(s.amax, x.abs().max()))
            scale = s.amax / 7
            xq = x + ((x / scale).round().clamp(-8, 7) * scale - x).detach()
            return s.lin(xq)

    m = QLinear()
    cm = M(m)
    for i in range(3):
        x = leaf(4, 3)
        o = cm(x * (i + 1))
        R(f"o{i}", o)
        o.sum().backward()
        R(f"x{i}", x)
    R("m", m)


@prog()
def int_buffer_step_counter_used_in_math(C, M, R):
    class Warm(nn.Module):
        def __init__(s):
            super().__init__()
            s.lin = nn.Linear(2, 2)
            s.register_buffer("step", torch.tensor(0))

        def forward(s, x):
            s.step.add_(1)
            warm = torch.clamp(s.step.to(x.dtype) / 3, max=1.0)
            return s.lin(x) * warm

    m = Warm()
    cm = M(m)
    for i in range(4):
        o = cm(torch.randn(2, 2))
        R(f"o{i}", o)
        o.sum().backward()
    R("m", m)


@prog()
def optimizer_step_compiled(C, M, R):
    m = nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)

    def step():
        opt.step()

    f = C(step)
    for i in range(2):
        opt.zero_grad()
        m(torch.randn(4, 3)).pow(2).sum().backward()
        R.try_(f"step{i}", lambda: f())
    R("m", m)


@prog()
def inputs_mutated_list_of_params_grad_accum(C, M, R):
    # manual grad accumulation into a buffer inside compiled fn
    w = leaf(3)
    acc = torch.zeros(3)

    def fn(x, w, acc):
        loss = (x * w).pow(2).sum()
        (g,) = torch.autograd.grad(loss, w)
        acc.add_(g)
        return loss.detach()

    f = C(fn)
    for i in range(2):
        R.try_(f"call{i}", lambda: f(torch.randn(3), w, acc))
    R("acc", acc)
    R("w", w)
