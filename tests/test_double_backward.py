"""Double backward through a compiled function (``runtime.double_backward``): a gradient
taken with ``create_graph=True`` and differentiated again, against eager, for the
families users write: gradient penalties, Hessian-vector products, MAML's inner step,
``detach()`` and ``no_grad`` inside the function (where differentiating the traced
graphs would be silently wrong), every entry point; and the clear refusals."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from aotgrad.partition import default_partition

F64 = torch.float64


def _by_entry(entry: str) -> Callable[[Any], Any]:
    if entry == "aot_function":
        return lambda f: aotgrad.aot_function(f, aotgrad.nop)
    if entry == "aot_module":
        return lambda m: aotgrad.aot_module(m, aotgrad.nop)

    def dynamo(f: Any) -> Any:
        torch._dynamo.reset()
        return torch.compile(f, backend=entry, fullgraph=True)

    return dynamo


def _detached_scale(x, w):
    h = torch.tanh(x @ w)
    return (h * h.detach()).sum()  # (the second derivative sees the detach)


def _no_grad_inside(x, w):
    h = (x @ w).sin()
    with torch.no_grad():
        s = h.abs().max()
    return (h / s).pow(2).sum()


def _plain(x, w):
    return ((x @ w).sigmoid() * x.sum()).sum()


FUNCTIONS = [_detached_scale, _no_grad_inside, _plain]


def _penalty(run: Callable, x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    out = run(x, w)
    (gx,) = torch.autograd.grad(out, x, create_graph=True)
    ((gx.norm() - 1) ** 2 + out).backward()
    return [out.detach(), gx.detach(), x.grad, w.grad]


def _leaves() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(4, 3, dtype=F64, requires_grad=True)
    w = torch.randn(3, 5, dtype=F64, requires_grad=True)
    return x, w


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__.strip("_"))
def test_a_gradient_penalty_is_eagers(fn: Callable, entry: str) -> None:
    want = _penalty(fn, *_leaves())
    got = _penalty(_by_entry(entry)(fn), *_leaves())
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)


def test_differentiating_the_traced_graph_would_be_wrong_here() -> None:
    """The case that needs the replay: with the detach, the second derivative differs
    from the one of the function without it (what a differentiated functional graph,
    whose detach is an alias, would give)."""

    def without_detach(x, w):
        h = torch.tanh(x @ w)
        return (h * h).sum()

    assert not torch.allclose(
        _penalty(_detached_scale, *_leaves())[2], _penalty(without_detach, *_leaves())[2]
    )


class _Critic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(3, 8)
        self.l2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(torch.nn.functional.softplus(self.l1(x)))


def _wgan_gp_step(critic: torch.nn.Module, run: Callable) -> list[torch.Tensor]:
    torch.manual_seed(1)
    x = torch.randn(6, 3, requires_grad=True)
    out = run(x)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    loss = out.mean() + 10 * ((g.norm(2, dim=1) - 1) ** 2).mean()
    loss.backward()
    return [loss.detach(), x.grad, *(p.grad for p in critic.parameters())]


@pytest.mark.parametrize("entry", ["aot_module", "aotgrad_eager", "aotgrad"])
def test_a_wgan_gp_critic_step_is_eagers(entry: str) -> None:
    torch.manual_seed(0)
    eager = _Critic()
    torch.manual_seed(0)
    critic = _Critic()
    want = _wgan_gp_step(eager, eager)
    run = _by_entry(entry)(critic)
    for _ in range(2):  # (the second call reuses the compiled artefact)
        for p in critic.parameters():
            p.grad = None
        got = _wgan_gp_step(critic, run)
        for g, e in zip(got, want):
            torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


class _FlatCritic(_Critic):
    """A critic ending in ``.view(-1)`` (``D(x).view(-1)``, as most DCGAN/WGAN critics)."""

    def forward(self, x):
        return super().forward(x).view(-1)


@pytest.mark.parametrize("entry", ["aot_module", "aotgrad_eager"])
def test_a_critic_returning_a_view_of_its_output_is_eagers(entry: str) -> None:
    """Its output is a view of an intermediate (the compiled node returns the base, the
    runtime rebuilds the view): replayed, the base is the replayed view's ``._base``.
    Was refused ("returns a view")."""
    torch.manual_seed(0)
    eager = _FlatCritic()
    torch.manual_seed(0)
    critic = _FlatCritic()
    want = _wgan_gp_step(eager, eager)
    got = _wgan_gp_step(critic, _by_entry(entry)(critic))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


def _views_out(x, w):
    t = torch.addmm(w, x, w)
    return t.squeeze(), x[0], (x.sin() @ w).t(), (x @ w).detach()


def _views_out_written(outs: list[torch.Tensor]) -> None:
    outs[0].mul_(2)  # the caller writes the view of an intermediate


@pytest.mark.parametrize("written", [False, True], ids=["read", "written_after"])
@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_outputs_viewing_inputs_and_intermediates_are_replayed(entry: str, written: bool) -> None:
    results = []
    for run in (_views_out, _by_entry(entry)(_views_out)):
        torch.manual_seed(0)
        x = torch.randn(4, 4, dtype=F64, requires_grad=True)
        w = torch.randn(4, 4, dtype=F64, requires_grad=True)
        outs = list(run(x, w))
        if written:
            _views_out_written(outs)
        loss = outs[0].sum() + outs[1].pow(2).sum() + outs[2].cos().sum()
        gx, gw = torch.autograd.grad(loss, [x, w], create_graph=True)
        (gx.pow(2).sum() + (gw * w).sum()).backward()
        results.append([gx.detach(), gw.detach(), x.grad, w.grad])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


def _output_twice_and_viewed(x, w):
    h = (x @ w).tanh()
    return h, h, h.t(), (h * w).sum()


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_outputs_returned_twice_or_viewing_another_output_are_replayed(entry: str) -> None:
    """Both rebuilt outside the compiled node (the same tensor; a view of the caller's
    output): the replay differentiates the graph's outputs alone."""
    results = []
    for run in (_output_twice_and_viewed, _by_entry(entry)(_output_twice_and_viewed)):
        torch.manual_seed(0)
        x = torch.randn(4, 4, dtype=F64, requires_grad=True)
        w = torch.randn(4, 4, dtype=F64, requires_grad=True)
        a, b, t, s = run(x, w)
        loss = a.sum() + b.pow(2).sum() + t[0].sum() + s
        gx, gw = torch.autograd.grad(loss, [x, w], create_graph=True)
        (gx.pow(2).sum() + (gw * w).sum()).backward()
        results.append([gx.detach(), gw.detach(), x.grad, w.grad])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


class _NormedCritic(torch.nn.Module):
    """A critic with BatchNorm in train mode: each call writes its running statistics."""

    def __init__(self) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(3, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.l2 = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.l2(torch.relu(self.bn(self.l1(x)))).view(-1)


@pytest.mark.parametrize("entry", ["aot_module", "aotgrad_eager"])
def test_a_critic_writing_running_statistics_is_eagers(entry: str) -> None:
    """The replay runs on copies of the inputs the call wrote (under no_grad), as they
    were before it: the gradients are eager's and the statistics are written once per
    call, not again by the replay. Was refused ("writes an input")."""
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        critic = _NormedCritic().double()
        run = _by_entry(entry)(critic) if compiled else critic
        for step in range(2):
            torch.manual_seed(step)
            x = torch.randn(6, 3, dtype=F64, requires_grad=True)
            out = run(x)
            (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
            (out.mean() + g.pow(2).sum(1).mean()).backward()
        results.append([*(p.grad for p in critic.parameters()), *critic.bn.buffers()])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


def test_a_large_written_input_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from aotgrad.runtime import double_backward

    monkeypatch.setattr(double_backward, "KEEP_WRITTEN_BYTES", 8)

    def f(x, buf):
        with torch.no_grad():
            buf.add_(x.detach().mean(0))
        return (x.sin() * buf).sum()

    x = torch.randn(4, 3, dtype=F64, requires_grad=True)
    (g,) = torch.autograd.grad(
        aotgrad.aot_function(f, aotgrad.nop)(x, torch.zeros(3, dtype=F64)), x, create_graph=True
    )
    with pytest.raises(UnsupportedError, match="MiB of its inputs"):
        g.sum().backward()


def test_hessian_vector_product_and_maml_inner_step() -> None:
    def f(x, w):
        return ((x @ w).sin() * x.sum()).sum()

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    results = []
    for run in (f, compiled):
        x, w = _leaves()
        v = torch.ones_like(w)
        (gw,) = torch.autograd.grad(run(x, w), w, create_graph=True)
        (hvp,) = torch.autograd.grad(gw, w, v, retain_graph=True)
        adapted = w - 0.1 * gw  # MAML: the outer loss through the inner step
        run(x, adapted).backward()
        results.append([hvp, w.grad, x.grad])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


def test_random_ops_are_refused_clearly_and_first_order_still_runs() -> None:
    def f(x):
        return (torch.nn.functional.dropout(x, 0.5) * x).sum()

    x = torch.randn(5, requires_grad=True)
    (g,) = torch.autograd.grad(aotgrad.aot_function(f, aotgrad.nop)(x), x, create_graph=True)
    assert g.shape == x.shape
    with pytest.raises(UnsupportedError, match="random ops"):
        g.sum().backward()


def test_an_input_freed_before_the_backward_is_refused_clearly() -> None:
    """An activation passed in is held weakly (min-cut may not save it): freed before a
    create_graph backward, the replay cannot run and says so."""

    def f(a):
        return a.relu().sum()

    leaf = torch.randn(4, requires_grad=True)
    compiled = aotgrad.aot_function(f, aotgrad.nop, partition_fn=default_partition)
    out = compiled(leaf * 2)  # (relu saves its output only: the input is not saved)
    gc.collect()
    with pytest.raises(UnsupportedError, match="freed"):
        torch.autograd.grad(out, leaf, create_graph=True)


def _chained(run: Callable, x: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
    y = run(run(x, w), w).pow(2).sum()  # (w reaches y through both calls)
    gx, gw = torch.autograd.grad(y, (x, w), create_graph=True)
    (gx.square().sum() + gw.square().sum()).backward()
    return [gx.detach(), gw.detach(), x.grad, w.grad]


def test_a_call_fed_its_own_output_and_weight_counts_each_path_once() -> None:
    """Blind double-backward suite: ``cf(cf(x, w), w)``. The replay of the second call
    differentiated ``w`` through the first call's history too, and the engine added that
    part again through the first call's node: gw was twice as large in part. Each input
    enters the replay through a node of its own."""

    def f(x, w):
        return torch.tanh(x @ w)

    x, _ = _leaves()
    w = torch.randn(3, 3, dtype=F64, requires_grad=True)
    want = _chained(f, x.detach().requires_grad_(), w.detach().requires_grad_())
    got = _chained(
        aotgrad.aot_function(f, aotgrad.nop),
        x.detach().requires_grad_(),
        w.detach().requires_grad_(),
    )
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)


def test_an_input_that_requires_grad_and_is_unused_does_not_refuse() -> None:
    def f(x, w, u):
        return (x * w).sin().sum()

    results = []
    for run in (f, aotgrad.aot_function(f, aotgrad.nop)):
        x, w, u = (torch.linspace(0.1, 1, 3, dtype=F64, requires_grad=True) for _ in range(3))
        (gx,) = torch.autograd.grad(run(x, w, u), x, create_graph=True)
        gx.sum().backward()
        results.append([gx.detach(), x.grad, w.grad])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_an_unused_input_the_function_branches_on_replays_the_same_branch(entry: str) -> None:
    """An input no output's history reaches enters the compiled node detached; the
    replay ran the function on that, so ``if u.requires_grad`` took the other branch:
    a different second-order gradient, and no raise at a later pass (soak 246639)."""

    def f(x, w, u):
        t = x.clamp(-0.5, 0.5) if u.requires_grad else -x
        return torch.addmm(t, w, t), t

    results = []
    for run in (f, _by_entry(entry)(f)):
        g = torch.Generator().manual_seed(3)
        x, w, u = (torch.randn(4, 4, dtype=F64, generator=g, requires_grad=True) for _ in "xwu")
        outs = run(x, w, u.clone())
        gx, gw = torch.autograd.grad([o.sum() for o in outs], [x, w], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        results.append([gx.detach(), gw.detach(), x.grad.clone(), w.grad.clone()])
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            outs[0].sum().backward()
    torch.testing.assert_close(results[1], results[0])


def test_a_call_under_autocast_replays_under_it() -> None:
    def f(x, w):
        return (x @ w).float().sigmoid().sum()

    results = []
    for run in (f, aotgrad.aot_function(f, aotgrad.nop)):
        x, w = (t.float().detach().requires_grad_() for t in _leaves())
        with torch.autocast("cpu", torch.bfloat16):
            out = run(x, w)
        (gx,) = torch.autograd.grad(out, x, create_graph=True)
        gx.square().sum().backward()
        results.append([gx.detach(), x.grad, w.grad])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


def test_a_custom_function_under_dynamo_is_refused_not_replayed() -> None:
    """Dynamo's rewrite of a custom Function does not differentiate twice as eager's does
    (``backend="eager"`` differs from eager too): refused, never a different value."""

    def f(x):
        return _Cube.apply(x).tanh().sum()

    torch._dynamo.reset()
    x = torch.linspace(-1, 1, 4, dtype=F64, requires_grad=True)
    (gx,) = torch.autograd.grad(torch.compile(f, backend="aotgrad_eager")(x), x, create_graph=True)
    with pytest.raises(UnsupportedError, match="double backward"):
        gx.sum().backward()


# An input the caller writes after the call (``x.mul_(2)`` under no_grad) before the
# second-order backward: the replay ran the function again on the new value, and the
# gradient penalty's ``x.grad`` was sigmoid''s at ``2x`` where eager's (from what the call
# saved) is at ``x`` (soak 244176). It is refused with the reason now; unwritten, it runs.


def _sigmoid_rows(x):
    return torch.sigmoid(x).sum(0)


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
@pytest.mark.parametrize("written", [False, True])
def test_an_input_written_after_the_call_is_not_replayed_anew(entry: str, written: bool) -> None:
    x = torch.randn(3, 4, dtype=F64, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    grads = []
    for arg, fn in ((xe, _sigmoid_rows), (x, _by_entry(entry)(_sigmoid_rows))):
        out = fn(arg)
        if written:
            with torch.no_grad():
                arg.mul_(2)
        (g,) = torch.autograd.grad(out.sum(), arg, create_graph=True)
        grads.append(g.detach())
        if written and arg is x:  # (the first-order gradient is eager's still)
            torch.testing.assert_close(grads[1], grads[0])
            with pytest.raises(UnsupportedError, match=r"\(input 0\) was written after the call"):
                (g * g).sum().backward()
            return
        (g * g).sum().backward()
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(x.grad, xe.grad)


# A refused double backward (random ops, an input whose metadata the function changes) that
# the engine walks toward the inputs only: ``backward(inputs=[x])``,
# ``autograd.functional.hvp``, ``autograd.grad(g, x, v)``. The refusing node had no edge to
# the call's inputs, so the engine never ran it: x.grad stayed None, the HVP came back as
# zeros (a blind second-order suite). It has those edges now, and raises.


def _noisy_cube(x):
    return ((x + torch.rand_like(x)) ** 3).sum()


def _relays_its_input(x):
    x.unsqueeze_(0)
    return (x**3).sum()


@pytest.mark.parametrize(
    ("fn", "how"),
    [(_noisy_cube, h) for h in ("backward_inputs", "hvp", "grad")]
    + [(_relays_its_input, h) for h in ("backward_inputs", "grad")],  # (hvp: a leaf re-laid)
)
@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_a_refused_double_backward_toward_the_inputs_raises(fn, how: str, entry: str) -> None:
    if fn is _relays_its_input and entry == "aotgrad_eager":
        pytest.skip("Dynamo itself refuses an in-place view op on a graph input")
    leaf = torch.linspace(-1, 1, 5, dtype=F64, requires_grad=True)
    x = leaf * 1 if fn is _relays_its_input else leaf
    cf = _by_entry(entry)(fn)
    v = torch.ones(5, dtype=F64)
    with pytest.raises(UnsupportedError, match="double backward"):
        if how == "hvp":
            torch.autograd.functional.hvp(cf, x, v)
        else:
            (g,) = torch.autograd.grad(cf(x), leaf, create_graph=True)
            if how == "grad":
                torch.autograd.grad(g, leaf, v, allow_unused=True)
            else:
                (g * g).sum().backward(inputs=[leaf])


# Inputs the function writes with autograd recording: the replay runs on a copy of each
# one's value before the call that keeps its history from then (the caller's tensor has
# the write's node after the call). Refused before (soak 247037, 247255, 246675: a write
# to a view, whose node ``CopySlices`` wraps, frees what it saved at the penalty).


def _scaled_in_place(x, w):
    x.mul_(w)
    return (x.sin(),)


def _returned_after_write(x, w):
    x.mul_(w)
    return (x,)


def _given_a_history_by_the_write(x, w):
    x.copy_(w.sin())
    return (x * w,)


def _output_written_into_it(x, w):
    t = w.exp()
    x += t
    return t, x.cos()


def _row_written(x, w):
    x[0].relu_()
    return x.chunk(2, -1)[0], (x * w).sum()


RECORDED = [_scaled_in_place, _returned_after_write, _given_a_history_by_the_write]
RECORDED += [_output_written_into_it, _row_written]


def _penalty_after_write(run: Callable, x_grad: bool) -> list[Any]:
    g = torch.Generator().manual_seed(1)
    leaf = torch.randn(4, 4, dtype=F64, generator=g, requires_grad=True)
    w = torch.randn(4, 4, dtype=F64, generator=g, requires_grad=True)
    x = leaf.clone() if x_grad else leaf.detach().clone()
    outs = run(x, w)
    loss = sum((o * (k + 1)).sum() for k, o in enumerate(outs)) + (x * 3).sum()
    leaves = [leaf, w] if x_grad else [w]
    grads = torch.autograd.grad(loss, leaves, create_graph=True)
    penalty = [(q * q).sum() for q in grads if q.requires_grad]  # (x * w: w's is x's)
    if penalty:
        sum(penalty).backward()
    seen = [q.detach() for q in grads] + [leaf.grad for leaf in leaves]
    seen = [t if t is None else t.clone() for t in seen]
    try:  # (the penalty freed the forward's nodes its graph ran through: eager raises,
        # after some leaves took their part: not compared)
        loss.backward()
        seen.append("no raise")
    except RuntimeError as e:
        seen.append(str(e)[:40])
    return seen


@pytest.mark.parametrize("x_grad", [True, False], ids=["x_requires_grad", "x_without"])
@pytest.mark.parametrize("fn", RECORDED, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_inputs_written_with_autograd_are_replayed(entry: str, fn: Callable, x_grad: bool) -> None:
    want = _penalty_after_write(fn, x_grad)
    got = _penalty_after_write(_by_entry(entry)(fn), x_grad)
    assert got[-1] == want[-1]
    torch.testing.assert_close(got[:-1], want[:-1])


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_a_leaf_made_to_require_grad_after_its_use_is_a_constant_its_penalty_reaches(
    entry: str,
) -> None:
    """``addmm(x0, x1, x0)`` then ``x1.requires_grad_()``: eager's forward took ``x1`` in
    as a constant, and its node saved the leaf itself, so the second-order graph (built
    after the flag is on) reaches ``x1``. The replay ran with ``x1`` requiring grad from
    the start (a first-order path through the product), or on a detached alias (no
    second-order path; soak 247736)."""

    def f(x0, x1):
        t1 = torch.addmm(x0, x1, x0)
        x1.requires_grad_()
        return x1, t1

    if entry == "aot_function":
        compiled = _by_entry(entry)(f)
    else:  # (Dynamo takes ``requires_grad_()`` out of the graph: a graph break)
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=entry)
    results = []
    for run in (f, compiled):
        g = torch.Generator().manual_seed(0)
        x0 = torch.randn(4, 4, dtype=F64, generator=g, requires_grad=True)
        x1 = torch.randn(4, 4, dtype=F64, generator=g)
        outs = run(x0, x1)
        cots = [torch.randn(4, 4, dtype=F64, generator=g) for _ in outs]
        grads = torch.autograd.grad(outs, [x0, x1], cots, create_graph=True)
        sum((q * q).sum() for q in grads).backward()
        results.append([*(q.detach() for q in grads), x0.grad, x1.grad])
    assert results[0][2] is None and results[1][2] is None  # (x0's: the product is linear)
    torch.testing.assert_close(results[1], results[0])


def _detached_beside(x, w):
    h = (x @ w).tanh()
    m = h.mean()
    return m.view_as(m), h, m.detach(), h.detach()  # (soak 250549: the detached ones merged)


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_outputs_detached_beside_their_tensor_are_replayed(entry: str) -> None:
    """Outputs the graph returns as another output's value, detached by the runtime: no
    gradient reaches them, the replay differentiates the others (was refused)."""
    results = []
    for run in (_detached_beside, _by_entry(entry)(_detached_beside)):
        torch.manual_seed(0)
        x = torch.randn(4, 4, dtype=F64, requires_grad=True)
        w = torch.randn(4, 4, dtype=F64, requires_grad=True)
        m, h, md, hd = run(x, w)
        assert not md.requires_grad and not hd.requires_grad
        loss = m * 3 + (h * hd).sum()
        gx, gw = torch.autograd.grad(loss, [x, w], create_graph=True)
        (gx.pow(2).sum() + (gw * w).sum()).backward()
        results.append([gx.detach(), gw.detach(), x.grad, w.grad, md, hd])
    for g, e in zip(*results[::-1]):
        torch.testing.assert_close(g, e)


def _intermediate_written_then_viewed(x, w):
    t = x @ w
    t.mul_(2).add_(1)  # (soak 250943: the output's version count)
    return (t.transpose(0, 1), (t * w).sum())


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_an_intermediate_written_in_place_is_replayed(entry: str) -> None:
    results = []
    for run in (
        _intermediate_written_then_viewed,
        _by_entry(entry)(_intermediate_written_then_viewed),
    ):
        torch.manual_seed(0)
        x = torch.randn(4, 4, dtype=F64, requires_grad=True)
        w = torch.randn(4, 4, dtype=F64, requires_grad=True)
        tt, s = run(x, w)
        gx, gw = torch.autograd.grad(tt.pow(2).sum() + s, [x, w], create_graph=True)
        (gx.pow(2).sum() + (gw * w).sum()).backward()
        results.append([gx.detach(), gw.detach(), x.grad, w.grad, tt._version])
    for g, e in zip(*results[::-1]):
        if isinstance(e, int):
            assert g == e
        else:
            torch.testing.assert_close(g, e)
