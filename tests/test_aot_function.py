"""aot_function / aot_module against eager PyTorch: values, grads, inputs after the call."""

from __future__ import annotations

import pytest
import torch

import aotgrad
from aotgrad.errors import AotgradError, EagerReplayWarning, TraceError, UnsupportedError
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]


def _clone_inputs(args):
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            c = a.detach().clone()
            c.requires_grad_(a.requires_grad)
            out.append(c)
        else:
            out.append(a)
    return out


def _check(fn, args, partition_fn, *, grad_seed=0):
    """Run fn eagerly and compiled on separate copies; compare outputs, grads, inputs."""
    eager_args = _clone_inputs(args)
    aot_args = _clone_inputs(args)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)
    ref = fn(*eager_args)
    got = compiled(*aot_args)
    ref_flat = torch.utils._pytree.tree_leaves(ref)
    got_flat = torch.utils._pytree.tree_leaves(got)
    assert len(ref_flat) == len(got_flat)
    for r, g in zip(ref_flat, got_flat):
        if isinstance(r, torch.Tensor):
            torch.testing.assert_close(g, r)
            assert g.requires_grad == r.requires_grad
        else:
            assert g == r
    gen = torch.Generator().manual_seed(grad_seed)
    diff = [
        (r, g)
        for r, g in zip(ref_flat, got_flat)
        if isinstance(r, torch.Tensor) and r.requires_grad
    ]
    if diff:
        cots = [torch.randn(r.shape, generator=gen, dtype=r.dtype) for r, _ in diff]
        torch.autograd.backward([r for r, _ in diff], cots)
        torch.autograd.backward([g for _, g in diff], cots)
    for e, a in zip(eager_args, aot_args):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(a, e)  # inputs after the call (mutations)
            if e.requires_grad:
                torch.testing.assert_close(a.grad, e.grad)
    return compiled


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_mlp_values_and_grads(partition_fn):
    def fn(x, w1, b1, w2):
        h = torch.nn.functional.gelu(x @ w1 + b1)
        return (h @ w2).tanh().sum(-1)

    args = [
        torch.randn(8, 16),
        torch.randn(16, 32, requires_grad=True),
        torch.randn(32, requires_grad=True),
        torch.randn(32, 4, requires_grad=True),
    ]
    _check(fn, args, partition_fn)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_pytree_inputs_outputs_and_constants(partition_fn):
    def fn(d, scale, flag):
        y = d["a"] * scale + d["b"][0].sin()
        return {"y": y if flag else -y, "n": 3, "pair": (y.sum(), d["b"][1] * 2)}

    d = {"a": torch.randn(3, 3, requires_grad=True), "b": [torch.randn(3, 3), torch.randn(2)]}
    _check(lambda d: fn(d, 2.5, True), [d], partition_fn)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_mixed_requires_grad_and_nondiff_outputs(partition_fn):
    def fn(a, b, c):
        return a * b, (b + 1).argmax(), c.cos()

    args = [torch.randn(5, requires_grad=True), torch.randn(5), torch.randn(5)]
    _check(fn, args, partition_fn)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_duplicate_inputs_accumulate_grads(partition_fn):
    def fn(a, b):
        return (a * b.exp()).sum()

    w = torch.randn(4, requires_grad=True)
    w_ref = w.detach().clone().requires_grad_()
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)
    compiled(w, w).backward()
    fn(w_ref, w_ref).backward()
    torch.testing.assert_close(w.grad, w_ref.grad)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_input_data_mutation_is_applied(partition_fn):
    def fn(x, buf):
        buf.add_(1)
        return x * buf

    args = [torch.randn(4, requires_grad=True), torch.zeros(4)]
    _check(fn, args, partition_fn)


def test_custom_autograd_function_inside():
    class ScaleGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * 3

    def fn(x):
        return ScaleGrad.apply(x.sin()).sum()

    _check(fn, [torch.randn(6, requires_grad=True)], min_cut_rematerialization_partition)


def test_dropout_matches_eager_mask_under_same_seed():
    def fn(x, w):
        return torch.nn.functional.dropout(x @ w, p=0.5, training=True)

    x = torch.randn(16, 16)
    w1 = torch.randn(16, 16, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    compiled(x, w1)  # compile outside the seeded region
    torch.manual_seed(123)
    got = compiled(x, w1)
    torch.manual_seed(123)
    ref = fn(x, w2)
    torch.testing.assert_close(got, ref)
    got.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(w1.grad, w2.grad)


def test_backward_retain_graph_twice():
    def fn(x, w):
        return (x @ w).relu().sum()

    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    out = aotgrad.aot_function(fn, aotgrad.nop)(x, w)
    out.backward(retain_graph=True)
    g1 = w.grad.clone()
    out.backward()
    torch.testing.assert_close(w.grad, 2 * g1)


def test_double_backward_runs_as_eager():
    """(``tests/test_double_backward.py`` has the families.)"""

    def fn(x):
        return (x.sin() * x).sum()

    grads = []
    for run in (fn, aotgrad.aot_function(fn, aotgrad.nop)):
        x = torch.linspace(-1, 1, 3, requires_grad=True)
        (g,) = torch.autograd.grad(run(x), x, create_graph=True)
        g.sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0])


def test_double_backward_of_a_function_with_random_ops_raises_clearly():
    def fn(x):
        return (torch.nn.functional.dropout(x.sin(), 0.5) * x).sum()

    x = torch.randn(3, requires_grad=True)
    out = aotgrad.aot_function(fn, aotgrad.nop)(x)
    (g,) = torch.autograd.grad(out, x, create_graph=True)  # (first order: fine)
    with pytest.raises(UnsupportedError, match=r"double backward.*random ops"):
        g.sum().backward()


def test_inference_graph_only_when_no_grad():
    calls = []

    def counting_nop(gm, inputs):
        calls.append(gm)
        return gm

    def fn(x, w):
        return x @ w

    x, w = torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)
    compiled = aotgrad.aot_function(fn, counting_nop)
    with torch.no_grad():
        out = compiled(x, w)
    assert len(calls) == 1  # forward only: no backward traced or compiled
    assert not out.requires_grad
    torch.testing.assert_close(out, x @ w)
    out = compiled(x, w)  # grad enabled now: a new, guarded, training compilation
    assert out.requires_grad and len(calls) == 3


def test_data_dependent_control_flow_runs_eagerly_naming_the_problem():
    """A branch on a tensor's value cannot be traced: the call runs as eager runs it, with
    a warning that names the problem and where it is (the graph would be wrong for the
    other value; eager's answer is right for both)."""

    def fn(x):
        if x.sum() > 0:  # data-dependent control flow
            return x * 2
        return x

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    with pytest.warns(EagerReplayWarning, match="data-dependent control flow"):
        for v in (1.0, -1.0):
            x = torch.full((3,), v, requires_grad=True)
            torch.testing.assert_close(compiled(x), fn(x))
    assert issubclass(TraceError, AotgradError)


def test_aot_module_trains_like_eager_with_batchnorm():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    mod = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU())
    mod.load_state_dict(ref.state_dict())
    compiled = aotgrad.aot_module(mod, aotgrad.nop)
    opt_r = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_m = torch.optim.SGD(mod.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
        for opt, f in ((opt_r, ref), (opt_m, compiled)):
            opt.zero_grad()
            f(x).square().mean().backward()
            opt.step()
    for (name, a), b in zip(ref.state_dict().items(), mod.state_dict().values()):
        torch.testing.assert_close(b, a, msg=name)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_backward_sees_pre_mutation_value_of_input(partition_fn):
    def fn(x, buf):
        y = x * buf.t().exp()  # a partition may recompute exp from buf in the backward
        buf.add_(1)
        return y

    args = [torch.randn(3, 3, requires_grad=True), torch.randn(3, 3)]
    _check(fn, args, partition_fn)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_effectful_linalg_ops_keep_their_error_checks(partition_fn):
    # aten._linalg_check_errors is an ordered-effect op: traced through a token chain.
    args = [(torch.randn(3, 3) + 3 * torch.eye(3)).requires_grad_()]
    compiled = _check(torch.linalg.inv, args, partition_fn)
    with pytest.raises(torch.linalg.LinAlgError):
        compiled(torch.zeros(3, 3, requires_grad=True))  # the check survived partitioning
    with torch.no_grad(), pytest.raises(torch.linalg.LinAlgError):
        compiled(torch.zeros(3, 3))


def test_zero_dim_tensor_value_is_never_baked_in():
    """A tensor's value used as a size becomes an unbacked symbol: one graph serves
    every value. A view of an input at such an offset can't be rebuilt from the inputs
    alone: refused, naming why."""

    def copy_of_narrow(x, start):
        return torch.narrow(x, 0, start, 2) * 2

    compiled = aotgrad.aot_function(copy_of_narrow, aotgrad.nop)
    x = torch.randn(5, 3, requires_grad=True)
    for start in (1, 3):
        out = compiled(x, torch.tensor(start))
        torch.testing.assert_close(out, x[start : start + 2] * 2)
        (g,) = torch.autograd.grad(out.sum(), x)
        torch.testing.assert_close(g[start : start + 2], torch.full((2, 3), 2.0))
        assert g.sum() == 12
    assert len(compiled.artifacts) == 1

    def narrow(x, start):
        return torch.narrow(x, 0, start, 2)

    compiled = aotgrad.aot_function(narrow, aotgrad.nop)
    with pytest.raises(UnsupportedError, match="data-dependent sizes or offset"):
        compiled(torch.randn(5, 3, requires_grad=True), torch.tensor(1))


def test_an_output_object_pytree_cannot_see_into_is_refused():
    """A dataclass output holding tensors came back holding the traced ones, unusable
    (blind K2); a registered one is flattened and returned like eager's."""
    import dataclasses

    @dataclasses.dataclass
    class Opaque:
        a: torch.Tensor

    with pytest.raises(UnsupportedError, match="Opaque holding tensors"):
        aotgrad.aot_function(lambda x: Opaque(x * 2), aotgrad.nop)(torch.ones(2))

    @dataclasses.dataclass
    class Registered:
        a: torch.Tensor
        label: str = "r"

    torch.utils._pytree.register_dataclass(
        Registered, field_names=["a"], drop_field_names=["label"]
    )
    x = torch.ones(2, requires_grad=True)
    out = aotgrad.aot_function(lambda x: Registered(x * 2), aotgrad.nop)(x)
    assert isinstance(out, Registered)
    out.a.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 2.0))


def test_aot_module_refuses_a_reassigned_buffer_and_keeps_an_in_place_one():
    """``self.avg = self.avg * 0.5 + m`` in forward: the new tensor was dropped and every
    call read the old buffer (blind H2; torch's aot_module too). Refused by name; the same
    update written in place is carried like eager's."""

    class Ema(torch.nn.Module):
        def __init__(self, in_place: bool) -> None:
            super().__init__()
            self.in_place = in_place
            self.register_buffer("avg", torch.zeros(2, dtype=torch.float64))

        def forward(self, x):
            new = self.avg * 0.5 + x.detach().mean(0)
            if self.in_place:
                self.avg.copy_(new)
            else:
                self.avg = new
            return x + self.avg

    with pytest.raises(UnsupportedError, match="reassigns 'avg'"):
        aotgrad.aot_module(Ema(False), aotgrad.nop)(torch.ones(3, 2, dtype=torch.float64))
    eager, compiled = Ema(True), Ema(True)
    f = aotgrad.aot_module(compiled, aotgrad.nop)
    for _ in range(3):
        x = torch.ones(3, 2, dtype=torch.float64)
        torch.testing.assert_close(f(x), eager(x))
    torch.testing.assert_close(compiled.avg, eager.avg)


def test_the_compiled_function_keeps_no_calls_tensors():
    """The first call's inputs (a batch, an activation) are freed with the call: the
    compiled function held them for its whole life (its traced call kept them)."""
    import gc
    import weakref

    compiled = aotgrad.aot_function(lambda a: a.relu().sum(), aotgrad.nop)
    a = torch.randn(1000, requires_grad=True)
    seen = weakref.ref(a)
    compiled(a).backward()
    del a
    gc.collect()
    assert seen() is None


@pytest.mark.parametrize("transform", ["grad", "vmap", "jacrev", "hessian"])
def test_torch_func_transforms_over_a_compiled_function_run_as_eager(transform):
    """``torch.func.grad(compiled)(x)``: the arguments are the transform's wrappers, which
    have no storage; refused as a sparse tensor before, now the call runs eagerly under
    the transform (with an ``EagerReplayWarning``), as eager's does."""
    from aotgrad.errors import EagerReplayWarning

    def f(x):
        return (x.sin() * x).sum()

    apply = getattr(torch.func, transform)
    x = torch.linspace(-1, 1, 4) if transform != "vmap" else torch.randn(3, 4)
    with pytest.warns(EagerReplayWarning, match="torch.func transform"):
        got = apply(aotgrad.aot_function(f, aotgrad.nop))(x)
    torch.testing.assert_close(got, apply(f)(x))
