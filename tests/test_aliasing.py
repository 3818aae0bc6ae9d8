"""Aliasing and mutation, category by category, against eager PyTorch.

Each test runs a function eagerly and through ``aot_function`` on separate copies of
the same inputs and compares what a user can observe: outputs (values, shape, stride,
requires_grad, view-ness, ``._base``), grads, the inputs after the call (values, shape,
stride), writes through returned views, and version counters.
"""

from __future__ import annotations

import pytest
import torch

import aotgrad
from aotgrad import _rust, alias
from aotgrad.alias.reinterpret import Reinterpret
from aotgrad.errors import TableError, UnsupportedError
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]
V = alias.OutputVerdict
I = alias.InputVerdict  # noqa: E741


def _copies(*args):
    def one(a):
        if not isinstance(a, torch.Tensor):
            return a
        c = a.detach().clone()
        return c.requires_grad_(a.requires_grad)

    return [one(a) for a in args], [one(a) for a in args]


def _same_tensor(got, ref):
    torch.testing.assert_close(got, ref)
    assert got.shape == ref.shape and got.stride() == ref.stride()
    assert got.requires_grad == ref.requires_grad
    assert got._is_view() == ref._is_view()


def _layout(compiled):
    (artifact,) = compiled.artifacts
    return artifact.layout


def _run(fn, *args, partition_fn=min_cut_rematerialization_partition, **kw):
    eager_args, aot_args = _copies(*args)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn, **kw)
    v_eager = [a._version for a in eager_args if isinstance(a, torch.Tensor)]
    v_aot = [a._version for a in aot_args if isinstance(a, torch.Tensor)]
    ref = fn(*eager_args)
    got = compiled(*aot_args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = got if isinstance(got, tuple) else (got,)
    for g, r in zip(got, ref):
        _same_tensor(g, r)
    for a, e in zip(aot_args, eager_args):
        if isinstance(a, torch.Tensor):
            _same_tensor(a, e)
    dv_eager = [a._version - v for a, v in zip(eager_args, v_eager)]
    dv_aot = [a._version - v for a, v in zip(aot_args, v_aot)]
    assert dv_aot == dv_eager, "version counters bumped differently from eager"
    return compiled, (got, aot_args), (ref, eager_args)


def _grads(outs, inputs, extra=()):
    loss = sum((o.float() * (k + 1)).sum() for k, o in enumerate(outs) if o.requires_grad)
    loss = loss + sum((e * e).sum() for e in extra)
    leaves = [i for i in inputs if isinstance(i, torch.Tensor) and i.requires_grad]
    return torch.autograd.grad(loss, leaves, allow_unused=True)


# ------------------------------------------------------------------ input data mutations


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_input_data_mutation_is_applied_with_eager_version_count(partition_fn):
    def fn(x, w):
        x.add_(1)
        x.mul_(w.detach())
        x[0].zero_()
        return (x * w).sum()

    compiled, (got, aot_args), (ref, eager_args) = _run(
        fn, torch.randn(3, 4), torch.randn(3, 4, requires_grad=True), partition_fn=partition_fn
    )
    assert _layout(compiled).mutated_inputs == [0]
    assert eager_args[0]._version >= 3  # three in-place ops, and ours matched (in _run)
    torch.testing.assert_close(_grads(got, aot_args), _grads(ref, eager_args))


def test_mutation_kept_in_the_inference_graph():
    def fn(x, y):
        x.mul_(2)
        return x + y

    eager, ours = _copies(torch.randn(4), torch.randn(4))
    compiled = aotgrad.aot_function(fn, aotgrad.nop, keep_inference_input_mutations=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(*ours), fn(*eager))
    torch.testing.assert_close(ours[0], eager[0])
    (artifact,) = compiled.artifacts
    assert artifact.layout.mutated_inputs == []  # written by the graph itself
    targets = [n.target for n in artifact.forward.graph.nodes]
    assert torch.ops.aten.copy_.default in targets


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_mutation_under_no_grad_of_a_leaf_that_requires_grad(partition_fn):
    def fn(w, x):
        y = (w * x).sum()
        with torch.no_grad():
            w.sub_(0.1 * x)  # an optimizer-style update inside the function
        return y

    compiled, _, _ = _run(
        fn, torch.randn(5, requires_grad=True), torch.randn(5), partition_fn=partition_fn
    )
    assert compiled.artifacts[0].layout.mutation_with_grad == [False]


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_mutated_non_leaf_input_keeps_its_autograd_history(partition_fn):
    """The input is an intermediate of the caller's graph that requires grad; the
    function writes it with a differentiable value. Gradients through its new value (used
    after the call) and through its old value (used inside) both reach ``a``."""

    def fn(y, w):
        z = y.exp()  # saves its output, not y (eager would refuse a saved y written later)
        y.mul_(w)
        return z

    a = torch.randn(6, requires_grad=True)
    w = torch.randn(6, requires_grad=True)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)
    results = []
    for f in (fn, compiled):
        aa, ww = a.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        y = aa * 2
        z = f(y, ww)
        loss = (z * 3).sum() + (y * y).sum()
        results.append((z.detach(), y.detach(), torch.autograd.grad(loss, (aa, ww))))
    (z0, y0, g0), (z1, y1, g1) = results
    torch.testing.assert_close(z1, z0)
    torch.testing.assert_close(y1, y0)
    torch.testing.assert_close(g1, g0)
    assert compiled.artifacts[0].layout.mutation_with_grad == [True]


def test_writing_a_leaf_that_requires_grad_raises_like_eager():
    def fn(x):
        x.add_(1)
        return x * 2

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        fn(x)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        aotgrad.aot_function(fn, aotgrad.nop)(x)
    assert x._version == 0


# -------------------------------------------------------------- input metadata mutations


@pytest.mark.parametrize(
    "mutate",
    [
        lambda x: x.t_(),
        lambda x: x.transpose_(0, 1),
        lambda x: x.unsqueeze_(0),
        lambda x: x.as_strided_((2, 2), (1, 3), 1),
    ],
    ids=["t_", "transpose_", "unsqueeze_", "as_strided_"],
)
def test_input_metadata_mutation_is_replayed(mutate):
    def fn(x, y):
        mutate(x)
        return x.sum(0) + y.sum()

    compiled, _, _ = _run(fn, torch.randn(3, 4), torch.randn(2, requires_grad=True))
    assert list(_layout(compiled).metadata_mutations) == [0]


def test_input_data_and_metadata_mutation():
    def fn(x):
        x.t_()
        x.mul_(3)
        return x[0] + 1

    _, (_, aot_args), _ = _run(fn, torch.randn(2, 3))
    assert aot_args[0].shape == (3, 2)


# Metadata mutation of inputs that require grad: tests/test_fidelity_regressions.py (case 11).


# ---------------------------------------------------------------- outputs aliasing inputs


@pytest.mark.parametrize("requires_grad", [False, True])
def test_output_is_the_input_object(requires_grad):
    def fn(x, y):
        return x, y * 2

    compiled, (got, aot_args), _ = _run(
        fn, torch.randn(3), torch.randn(3, requires_grad=requires_grad)
    )
    assert got[0] is aot_args[0]
    assert _layout(compiled).output_aliases[0].verdict == V.IS_INPUT


@pytest.mark.parametrize(
    "view",
    [
        lambda x: x[:, 1:],
        lambda x: x.view(-1),
        lambda x: x.t(),
        lambda x: x[1],
        lambda x: x.unsqueeze(0).expand(2, 3, 4),
    ],
    ids=["slice", "view", "t", "select", "expand"],
)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_output_view_of_input_is_a_real_view(view, requires_grad):
    def fn(x, w):
        return view(x), (x * w).sum()

    x = torch.randn(3, 4)
    x = (x.requires_grad_() * 1) if requires_grad else x  # a non-leaf, so writes are allowed
    compiled, (got, aot_args), (ref, eager_args) = _run(
        fn, x, torch.randn(3, 4, requires_grad=True)
    )
    out, inp = got[0], aot_args[0]
    assert out._base is (inp if inp._base is None else inp._base)
    assert out.untyped_storage().data_ptr() == inp.untyped_storage().data_ptr()
    assert _layout(compiled).output_aliases[0].verdict == V.ALIAS_OF_INPUT
    torch.testing.assert_close(_grads(got, aot_args), _grads(ref, eager_args))
    if not requires_grad and not out.stride().count(0):  # (eager refuses writes to expand)
        v = inp._version  # a write through the returned view lands in the input
        out.add_(100)
        ref[0].add_(100)
        torch.testing.assert_close(inp, eager_args[0])
        assert inp._version > v


def test_write_through_a_returned_view_then_backward():
    """In-place on an output that aliases a (non-leaf) input: autograd must see the view
    relation, so that the gradient of the later use flows through the write into x."""

    def fn(x):
        return x[1:]

    results = []
    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    for f in (fn, compiled):
        a = torch.arange(6.0).requires_grad_()
        x = a * 1
        v = f(x)
        v.mul_(3)
        (g,) = torch.autograd.grad((x * x).sum(), a)
        results.append((x.detach(), g))
    torch.testing.assert_close(results[1], results[0])


# ---------------------------------------------------------- outputs aliasing intermediates


def test_view_of_an_intermediate_is_a_view_of_a_returned_base():
    def fn(x):
        return (x * 2).view(-1)

    compiled, (got, aot_args), (ref, eager_args) = _run(fn, torch.randn(2, 3, requires_grad=True))
    layout = _layout(compiled)
    assert layout.output_aliases[0].verdict == V.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT
    assert layout.num_intermediate_bases == 1
    assert got[0]._base is not None and got[0]._base.shape == (2, 3)
    torch.testing.assert_close(_grads(got, aot_args), _grads(ref, eager_args))


def test_views_of_one_intermediate_share_one_base_and_in_place_writes_flow():
    def fn(x):
        y = x * 2  # (saves nothing: eager allows writing y's views before backward)
        return y[0], y[1], y.t()

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    results = []
    for f in (fn, compiled):
        x = torch.randn(2, 3, requires_grad=True)
        with torch.no_grad():
            x.copy_(torch.linspace(-1, 1, 6).view(2, 3))
        a, b, c = f(x)
        assert a._base is b._base is c._base
        a.mul_(2)  # written through one view: the others and the gradient see it
        (g,) = torch.autograd.grad((b * c.t()[1]).sum() + (a * a).sum(), x)
        results.append((a.detach(), c.detach(), g))
    torch.testing.assert_close(results[1], results[0])
    verdicts = [a.verdict for a in _layout(compiled).output_aliases]
    assert verdicts == [
        V.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
        V.ALIAS_OF_INTERMEDIATE,
        V.ALIAS_OF_INTERMEDIATE,
    ]


def test_view_of_an_intermediate_that_is_also_returned():
    def fn(x):
        y = x * 3
        return y, y[:, :2]

    compiled, (got, aot_args), (ref, eager_args) = _run(fn, torch.randn(3, 4, requires_grad=True))
    assert got[1]._base is got[0]
    assert (
        _layout(compiled).output_aliases[0].verdict == V.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT
    )
    torch.testing.assert_close(_grads(got, aot_args), _grads(ref, eager_args))


def test_view_of_an_intermediate_without_grad_is_a_view_as_in_eager():
    def fn(x):
        return (x * 2).view(-1)

    compiled, ((got,), _), ((want,), _) = _run(fn, torch.randn(2, 3))
    assert want._is_view() and got._is_view() and not got.requires_grad
    assert got._base.shape == want._base.shape == (2, 3)
    assert [a.verdict for a in _layout(compiled).output_aliases] == [
        V.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT
    ]


# ------------------------------------------------------------------------ aliased inputs


def test_the_same_view_twice_is_one_graph_input():
    def fn(a, b):
        a.add_(1)
        return a + b

    x = torch.zeros(3)
    ref_x = torch.zeros(3)
    out = aotgrad.aot_function(fn, aotgrad.nop)(x, x)
    torch.testing.assert_close(out, fn(ref_x, ref_x))
    torch.testing.assert_close(x, ref_x)


def test_non_overlapping_views_need_no_synthetic_base():
    def fn(a, b):
        a.mul_(2)
        b.add_(1)
        return a.sum() + b.sum()

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    x, ref_x = torch.randn(2, 3), None
    ref_x = x.clone()
    out = compiled(x[0], x[1])
    torch.testing.assert_close(out, fn(ref_x[0], ref_x[1]))
    torch.testing.assert_close(x, ref_x)
    (entry,) = compiled.cache.values()
    assert entry.synthetic_base is None


@pytest.mark.parametrize("order", ["whole_first", "view_first"])
def test_overlapping_written_inputs_go_through_a_synthetic_base(order):
    def fn(a, b):
        a.mul_(2)  # visible through b in eager
        return a.sum() + b.sum(), b * 1

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    for step in range(2):  # the second call reuses the compiled synthetic-base graph
        x = torch.arange(6.0).view(2, 3) + step
        ref_x = x.clone()
        args = (x, x[1]) if order == "whole_first" else (x[1], x)
        ref_args = (ref_x, ref_x[1]) if order == "whole_first" else (ref_x[1], ref_x)
        got, ref = compiled(*args), fn(*ref_args)
        torch.testing.assert_close(got, ref)
        torch.testing.assert_close(x, ref_x)
    (entry,) = compiled.cache.values()
    base = entry.synthetic_base
    assert base is not None and [g.common_base for g in base.groups] == [True]


def test_overlapping_written_inputs_that_require_grad():
    def fn(a, b):
        a.mul_(2)
        return a.sum() * b.sum()

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    results = []
    for f in (fn, compiled):
        p = torch.linspace(-1, 1, 6).view(2, 3).requires_grad_()
        base = p * 1
        out = f(base[0], base[:, 1])
        (g,) = torch.autograd.grad(out + (base * base).sum(), p)
        results.append((out.detach(), base.detach(), g))
    torch.testing.assert_close(results[1], results[0])


def test_overlap_guard_recompiles_when_inputs_stop_overlapping():
    def fn(a, b):
        a.add_(1)
        return a + b

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    x = torch.zeros(4)
    compiled(x[:2], x[1:3])  # overlapping: synthetic base
    y, ref_y = torch.zeros(4), torch.zeros(4)
    out = compiled(y[:2], y[2:])  # disjoint now
    torch.testing.assert_close(out, fn(ref_y[:2], ref_y[2:]))
    torch.testing.assert_close(y, ref_y)
    assert len(compiled.artifacts) == 2


# ------------------------------------------------------------------ modules with buffers


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_batchnorm_running_stats_over_training_steps(partition_fn):
    torch.manual_seed(0)

    def make():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 4, 3),
            torch.nn.BatchNorm2d(4),
            torch.nn.ReLU(),
            torch.nn.Flatten(),
            torch.nn.Linear(4 * 6 * 6, 2),
        )

    eager, ours = make(), make()
    compiled = aotgrad.aot_module(ours, aotgrad.nop, partition_fn=partition_fn)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_o = torch.optim.SGD(ours.parameters(), lr=0.1)
    for step in range(4):
        x = torch.randn(5, 3, 8, 8)
        for opt, run in ((opt_e, eager), (opt_o, compiled)):
            opt.zero_grad()
            run(x).square().mean().backward()
            opt.step()
        for (name, a), (_, b) in zip(eager.named_buffers(), ours.named_buffers()):
            torch.testing.assert_close(b, a, msg=f"buffer {name} after step {step}")
        for (name, a), (_, b) in zip(eager.named_parameters(), ours.named_parameters()):
            torch.testing.assert_close(b, a, msg=f"parameter {name} after step {step}")
    assert int(ours[1].num_batches_tracked) == 4
    eager.eval(), ours.eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), eager(x))


# ------------------------------------------------------------------------ dynamic shapes


def test_views_of_inputs_under_dynamic_shapes():
    def fn(x):
        return x[1:], x.t(), x * 2

    compiled = aotgrad.aot_function(fn, aotgrad.nop, dynamic=True)
    for n in (4, 7):
        x = torch.randn(n, 5)
        got, ref = compiled(x), fn(x)
        for g, r in zip(got, ref):
            _same_tensor(g, r)
        assert got[0]._base is x and got[1]._base is x
    assert len(compiled.artifacts) == 1


# ----------------------------------------------------------------- the Rust classification


def test_the_rust_classifier_refuses_a_malformed_alias_table():
    ok = ([0], [0], [1], [-1], [-1], [-1])
    assert list(_rust.classify_aliases(*ok)[1]) == [0]
    bad = ([0], [0], [1 | 1 << 3], [4], [-1], [-1])  # aliases input 4 of 1
    with pytest.raises(TableError, match="output_input") as info:
        _rust.classify_aliases(*bad)
    assert info.value.column == "output_input"


def test_input_written_in_forward_and_backward_is_refused():
    """Backward writes alone are supported (tests/test_fidelity_regressions.py); an input
    written in both passes is refused, before anything is written."""

    class WritesInBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, buf):
            ctx.save_for_backward(buf)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (buf,) = ctx.saved_tensors
            buf.add_(1)
            return g * 2, None

    def fn(x, buf):
        buf.add_(1)
        return WritesInBackward.apply(x, buf)

    buf = torch.zeros(3)
    with pytest.raises(UnsupportedError, match="backward"):
        aotgrad.aot_function(fn, aotgrad.nop)(torch.randn(3, requires_grad=True), buf)
    assert buf._version == 0 and not buf.any()


# ------------------------------------------------------------------- through Inductor


def test_aliases_and_mutations_through_the_inductor_backend():
    """The same categories with Inductor-compiled graphs (which may return copies where
    the eager graph returns views): the runtime still rebuilds real views."""

    def fn(x, buf, w):
        buf.add_(1)
        y = torch.relu(x @ w)
        return x[:, 1:], y, y.t(), buf.view(-1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aotgrad", fullgraph=True)
    x = torch.randn(4, 4)
    w = torch.randn(4, 4, requires_grad=True)
    bufs = torch.zeros(4), torch.zeros(4)
    ref = fn(x, bufs[0], w)
    got = compiled(x, bufs[1], w)
    for g, r in zip(got, ref):
        _same_tensor(g, r)
    torch.testing.assert_close(bufs[1], bufs[0])
    assert got[0]._base is x and got[3]._base is bufs[1]
    assert got[2]._base is got[1]
    (g1,) = torch.autograd.grad((got[1] * got[2].t()).sum(), w)
    (g0,) = torch.autograd.grad((ref[1] * ref[2].t()).sum(), w)
    torch.testing.assert_close(g1, g0)


def test_distinct_then_aliased_inputs_recompile():
    """Compiled for distinct inputs, then called with overlapping ones (one written): a
    new compilation with a synthetic base, never the stale distinct-input graph."""

    def fn(a, b):
        a.add_(1)
        return a * b

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    compiled(torch.zeros(3), torch.ones(3))
    x, ref_x = torch.zeros(3), torch.zeros(3)
    torch.testing.assert_close(compiled(x, x[:]), fn(ref_x, ref_x[:]))
    torch.testing.assert_close(x, ref_x)
    assert len(compiled.artifacts) == 2


def test_mutation_and_views_under_inference_mode():
    def fn(x):
        x.add_(1)
        return x[1:], x * 2

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    with torch.inference_mode():
        x, ref_x = torch.zeros(3), torch.zeros(3)  # inference tensors: no version counter
        got, ref = compiled(x), fn(ref_x)
        torch.testing.assert_close(got, ref)
        torch.testing.assert_close(x, ref_x)
        got[0].fill_(7)  # still a view of x
        assert x[1:].eq(7).all()


@pytest.mark.parametrize(
    "view",
    [torch.view_as_complex, lambda x: x.view(torch.int32), lambda x: x.to(torch.complex64).conj()],
    ids=["view_as_complex", "view_dtype", "conj"],
)
def test_reinterpreting_views_are_rebuilt_as_views(view):
    """A conj bit or another dtype, which no as_strided makes (found by the OpInfo sweep:
    fft.ifft returns a conj view): rebuilt of the real base through the view ops that
    reinterpret its bytes (``alias.reinterpret``; ``test_fidelity_complex_views.py``).
    ``view(dtype)`` is no view in eager: a detached alias of the input, reinterpreted,
    rebuilt by ``view(dtype)``."""

    def fn(x):
        return view(x), x + 1

    x = torch.randn(3, 2)
    compiled, (got, _), _ = _run(fn, x)
    (a,) = _layout(compiled).output_aliases
    v = view(x)
    # (taken by view(dtype): rebuilt so, Reinterpret.dtype_view)
    by_view_dtype = not v._is_view()
    assert a.view.reinterpret == Reinterpret(v.dtype, v.is_conj(), v.is_neg(), by_view_dtype)
    assert got[0]._is_view() == v._is_view()
    assert a.detached == (0 if v._is_view() else 1)
