"""Entry points at torch's breadth, each against eager and against torch's own
``functorch.compile`` function on the same inputs."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
import torch
import torch.nn as nn
from functorch import compile as ftc
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

import aotgrad
from aotgrad.errors import PartitionError


class Tup(nn.Module):
    """aot_module_simplified's contract: the module returns a tuple."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.inner(x)
        return out if isinstance(out, tuple) else (out,)


class TwoOut(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(5, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.bn(self.lin(x))
        return h.relu(), h.sum(1)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(5, 7), nn.GELU(), nn.Linear(7, 2))


def _simplified_run(
    make: Any, impl: Any, traced: bool, grad: bool, steps: int = 3
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Train ``steps`` SGD steps of ``make()`` through ``impl`` (None: eager); the outputs,
    the parameter grads of each step and the final state (parameters and buffers)."""
    torch.manual_seed(0)
    inner = make()
    mod = Tup(inner)
    if traced:
        mod = torch.fx.symbolic_trace(mod)
    example = [torch.randn(6, 5)]
    run = mod if impl is None else impl(mod, example, fw_compiler=ftc.nop, bw_compiler=ftc.nop)
    outs, grads = [], []
    opt = torch.optim.SGD(mod.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(6, 5, generator=torch.Generator().manual_seed(step))
        with torch.set_grad_enabled(grad):
            out = run(x)
        outs.append([o.detach().clone() for o in out])
        if grad:
            sum(o.sum() for o in out).backward()
            grads.append([p.grad.clone() for p in mod.parameters()])
            opt.step()
            opt.zero_grad()
    return outs, grads, {k: v.detach().clone() for k, v in mod.state_dict().items()}


def _assert_same(a: Any, b: Any) -> None:
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("traced", [True, False])
@pytest.mark.parametrize("make", [_mlp, TwoOut], ids=["mlp", "linear_bn_two_outputs"])
def test_aot_module_simplified_lifts_submodule_parameters(make, traced, grad) -> None:
    eager = _simplified_run(make, None, traced, grad)
    ours = _simplified_run(make, aotgrad.aot_module_simplified, traced, grad)
    _assert_same(ours, eager)
    if traced:  # torch's needs a GraphModule (it lifts named_parameters of an fx graph)
        _assert_same(ours, _simplified_run(make, ftc.aot_module_simplified, traced, grad))


def test_aot_module_simplified_with_symbolic_fake_example_inputs_compiles_once() -> None:
    mod = nn.Linear(4, 3)
    gm = torch.fx.symbolic_trace(Tup(mod))
    mode = FakeTensorMode(shape_env=ShapeEnv())
    example = mode.from_tensor(torch.randn(5, 4), static_shapes=False)
    compiled = aotgrad.aot_module_simplified(gm, [example], fw_compiler=aotgrad.nop)
    theirs = ftc.aot_module_simplified(gm, [example], fw_compiler=ftc.nop)
    for n in (5, 7, 9):
        x = torch.randn(n, 4, requires_grad=True)
        _assert_same(compiled(x)[0], theirs(x)[0])
    for n in (5, 7, 9):
        x = torch.randn(n, 4, requires_grad=True)
        (out,) = compiled(x)
        _assert_same(out, mod(x))
        out.sum().backward()
        xr = x.detach().requires_grad_()
        mod(xr).sum().backward()
        _assert_same(x.grad, xr.grad)
    assert compiled.compilations == 1


@pytest.mark.parametrize("impl", ["aotgrad", "torch"])
def test_aot_module_under_inference_mode(impl: str) -> None:
    m = nn.Linear(4, 3)
    compile_module = aotgrad.aot_module if impl == "aotgrad" else ftc.aot_module
    cm = compile_module(copy.deepcopy(m), fw_compiler=ftc.nop)
    with torch.inference_mode():
        x = torch.randn(2, 4)
        out, ref = cm(x), m(x)
    _assert_same(out, ref)
    assert out.is_inference() and not out.requires_grad
    if impl == "torch":
        return  # torch's reuses the inference graph for the next (training) call
    # aotgrad guards inference mode: the module still trains afterwards
    x = torch.randn(2, 4)
    cm(x).sum().backward()
    assert all(p.grad is not None for p in cm.parameters())


def _grads(fn: Any, partition_fn: Any, via: Any) -> torch.Tensor:
    x = torch.randn(4, 5, requires_grad=True, generator=torch.Generator().manual_seed(0))
    compiled = fn if via is None else via(fn, ftc.nop, partition_fn=partition_fn)
    compiled(x).sum().backward()
    return x.grad


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compiler": "inductor"},
        {"compiler": "nvfuser"},
        {"static_lifetime_input_indices": [0]},
        {"static_lifetime_input_indices": [], "compiler": "inductor"},
    ],
)
@pytest.mark.parametrize("name", ["min_cut_rematerialization_partition", "default_partition"])
def test_partition_fn_accepts_torch_keywords(name: str, kwargs: dict[str, Any]) -> None:
    if name == "default_partition" and "compiler" in kwargs:
        pytest.skip("torch's default_partition has no compiler keyword")

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * 2).cos().sum(1)

    ours = functools.partial(getattr(aotgrad.partition, name), **kwargs)
    theirs = functools.partial(getattr(ftc, name), **kwargs)
    eager = _grads(fn, None, None)
    _assert_same(_grads(fn, ours, aotgrad.aot_function), eager)
    _assert_same(_grads(fn, ours, ftc.aot_function), eager)  # aotgrad's inside torch's
    _assert_same(_grads(fn, theirs, ftc.aot_function), eager)


def test_partition_fn_rejects_a_compiler_that_is_not_a_name() -> None:
    pf = functools.partial(aotgrad.partition.min_cut_rematerialization_partition, compiler=3)
    g = aotgrad.aot_function(lambda x: x.sin().sum(), aotgrad.nop, partition_fn=pf)
    with pytest.raises(PartitionError, match="compiler must be a str"):
        g(torch.randn(3, requires_grad=True))


# ------------------------------------------------------------------- compiled autograd


def _compiled_autograd_step(fn: Any, backend: str | None, *shapes: tuple[int, ...]) -> list:
    """Grads of ``fn``'s outputs summed, with the backward traced by compiled autograd
    (``torch._dynamo.config.compiled_autograd``) when ``backend`` is given."""
    torch.manual_seed(0)
    args = [torch.randn(*s, requires_grad=True) for s in shapes]
    if backend is None:
        outs = fn(*args)
        sum(o.sum() for o in outs).backward()
        return [a.grad for a in args]
    torch._dynamo.reset()

    @torch.compile(backend=backend)
    def step(*xs: torch.Tensor) -> None:
        outs = fn(*xs)
        sum(o.sum() for o in outs).backward()

    with torch._dynamo.config.patch(compiled_autograd=True):
        step(*args)
    return [a.grad for a in args]


def _one_output(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
    return ((x @ w).relu().sum(),)


def _two_outputs(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (x @ w).tanh().sum(0), (x * 2).sin()


@pytest.mark.parametrize("fn", [_one_output, _two_outputs])
def test_compiled_autograd_traces_aotgrads_backward(fn: Any) -> None:
    eager = _compiled_autograd_step(fn, None, (4, 3), (3, 3))
    ours = _compiled_autograd_step(fn, "aotgrad_eager", (4, 3), (3, 3))
    _assert_same(ours, eager)


def test_compiled_autograd_enabled_around_a_compiled_function() -> None:
    from torch._dynamo import compiled_autograd

    torch.manual_seed(0)
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
    xe, we = (t.detach().clone().requires_grad_() for t in (x, w))
    a, b = _two_outputs(xe, we)
    (a.sum() + b.sum()).backward()
    torch._dynamo.reset()
    a, b = torch.compile(_two_outputs, backend="aotgrad_eager")(x, w)
    with compiled_autograd._enable(torch.compile(backend="aotgrad_eager")):
        (a.sum() + b.sum()).backward()
    _assert_same([x.grad, w.grad], [xe.grad, we.grad])


# ------------------------------------------------------------------- effectful custom ops

EFFECT_LOG: list[int] = []


@torch.library.custom_op("aotgrad_test::record_effect", mutates_args=())
def record_effect(x: torch.Tensor, tag: int) -> torch.Tensor:
    EFFECT_LOG.append(tag)
    return x.clone()


@record_effect.register_fake
def _(x: torch.Tensor, tag: int) -> torch.Tensor:
    return torch.empty_like(x)


def _record_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.tag = inputs[1]


def _record_backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
    return record_effect(g, 100 + ctx.tag), None


record_effect.register_autograd(_record_backward, setup_context=_record_setup)


def _register_effects() -> None:
    from torch._higher_order_ops.effects import _EffectType, _register_effectful_op

    _register_effectful_op(torch.ops.aotgrad_test.record_effect.default, _EffectType.ORDERED)


_register_effects()


def _effects(x: torch.Tensor) -> torch.Tensor:
    y = record_effect(x * 2, 1)
    z = record_effect(y.sin(), 2)
    return record_effect(z.cos(), 3).sum()


def _effect_run(compile_fn: Any) -> tuple[list[int], torch.Tensor, torch.Tensor]:
    x = torch.randn(5, requires_grad=True, generator=torch.Generator().manual_seed(0))
    EFFECT_LOG.clear()
    out = compile_fn(_effects)(x)
    out.backward()
    return list(EFFECT_LOG), out.detach(), x.grad


def _dynamo(backend: str) -> Any:
    def compile_fn(fn: Any) -> Any:
        torch._dynamo.reset()
        return torch.compile(fn, backend=backend)

    return compile_fn


@pytest.mark.parametrize(
    "compile_fn",
    [
        lambda fn: aotgrad.aot_function(fn, aotgrad.nop),
        lambda fn: ftc.aot_function(fn, ftc.nop),
        _dynamo("aotgrad_eager"),
    ],
    ids=["aot_function", "torch_aot_function", "dynamo_aotgrad_eager"],
)
def test_effectful_ops_run_in_eagers_order_forward_and_backward(compile_fn: Any) -> None:
    eager = _effect_run(lambda fn: fn)
    assert eager[0] == [1, 2, 3, 103, 102, 101]
    _assert_same(_effect_run(compile_fn), eager)


def test_inductor_channels_last_conv_effectful_op_and_input_mutation() -> None:
    """Inductor gets effect tokens as it expects them (made and sunk inside its graphs):
    a token among a graph's outputs made it fail ("'NoneType' object has no attribute
    'get_size'")."""
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)

    def f(x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        y = record_effect(conv(x), 7)
        buf.add_(1)
        return y.relu().sum()

    def run(g: Any) -> list[Any]:
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
        x = x.to(memory_format=torch.channels_last).requires_grad_()
        buf = torch.zeros(3)
        conv.zero_grad(set_to_none=True)
        EFFECT_LOG.clear()
        out = g(x, buf)
        out.backward()
        return [
            out.detach(),
            x.grad,
            [p.grad.clone() for p in conv.parameters()],
            buf,
            list(EFFECT_LOG),
        ]

    eager = run(f)
    ours = run(_dynamo("aotgrad")(f))
    assert ours[4] == eager[4] == [7, 107]
    _assert_same(ours[:4], eager[:4])
