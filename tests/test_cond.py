"""torch.cond and other higher-order ops through aotgrad; unsupported ones refused by name.

``cond`` stays one node in the joint graph (a forward ``cond`` over the branches'
forward subgraphs, a backward ``cond`` over their joint subgraphs); both branches
are differentiated. A higher-order op aotgrad cannot trace raises
``UnsupportedError`` naming it, and the backends run that graph eagerly with one
warning (``strict`` raises).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import pytest
import torch
import torch.fx as fx
from torch import nn
from torch._ops import HigherOrderOperator

from aotgrad import aot_function, nop, observe
from aotgrad.backends import aotgrad_eager_backend
from aotgrad.errors import UnsupportedError
from aotgrad.program import CompiledArtifact
from aotgrad.table import to_table

COND = torch.ops.higher_order.cond


class CondNet(nn.Module):
    """Each branch has its own parameters: a wrong branch or a lost gradient shows."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Linear(d, d)
        self.out = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(x: torch.Tensor) -> torch.Tensor:
            return self.a(x).sin()

        def negative(x: torch.Tensor) -> torch.Tensor:
            return self.b(x).relu() * 2

        y = torch.cond(x.sum() > 0, positive, negative, (x,))
        return (self.out(y) ** 2).mean()


def _batch(step: int) -> torch.Tensor:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step)).abs()
    return x if step % 2 else -x  # alternate the branch taken


@pytest.mark.parametrize("backend", ["aotgrad_eager", "aotgrad"])
def test_cond_model_trains_like_eager(backend: str) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    eager = CondNet()
    model = copy.deepcopy(eager)
    artifacts: list[CompiledArtifact] = []
    unregister = observe.on_compiled(artifacts.append)
    try:
        compiled = torch.compile(model, backend=backend, options={"strict": True, "cache": False})
        opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
        opt_c = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(4):
            x = _batch(step)
            xs = (x.clone().requires_grad_(), x.clone().requires_grad_())
            for m, opt, xi in ((compiled, opt_c, xs[0]), (eager, opt_e, xs[1])):
                opt.zero_grad()
                m(xi).backward()
            for (name, a), b in zip(eager.named_parameters(), model.parameters()):
                torch.testing.assert_close(b.grad, a.grad, msg=f"step {step}: {name}")
            torch.testing.assert_close(xs[0].grad, xs[1].grad)
            opt_c.step()
            opt_e.step()
    finally:
        unregister()
    for (name, a), b in zip(eager.named_parameters(), model.parameters()):
        torch.testing.assert_close(b, a, msg=name)
    # the branch taken changed without recompiling: one graph, cond decided at run time
    assert len(artifacts) == 1


def test_cond_stays_one_node_per_direction() -> None:
    torch._dynamo.reset()
    artifacts: list[CompiledArtifact] = []
    unregister = observe.on_compiled(artifacts.append)
    try:
        compiled = torch.compile(
            CondNet(), backend="aotgrad_eager", options={"strict": True, "cache": False}
        )
        compiled(_batch(0)).backward()
    finally:
        unregister()
    (art,) = artifacts
    assert art.joint is not None and art.backward is not None
    conds = art.joint.graph.find_nodes(op="call_function", target=COND)
    assert len(conds) == 2  # forward, backward
    for node in conds:  # both branches are traced subgraphs
        true_gm, false_gm = (getattr(art.joint, a.target) for a in node.args[1:3])
        assert isinstance(true_gm, fx.GraphModule) and isinstance(false_gm, fx.GraphModule)
    table, _ = to_table(art.joint, num_fwd_outputs=art.layout.num_fwd_outputs)
    assert "higher_order.cond" in table.op_names
    assert len(art.forward.graph.find_nodes(op="call_function", target=COND)) == 1
    assert len(art.backward.graph.find_nodes(op="call_function", target=COND)) == 1


def test_cond_under_aot_function() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda y: (y @ w).sin(), lambda y: (y @ w.t()).cos(), (x,))

    w = torch.randn(8, 8, requires_grad=True)
    compiled = aot_function(fn, nop)
    for step in range(2):  # one compilation, both branches
        x = _batch(step)
        compiled(x, w).sum().backward()
        got, w.grad = w.grad, None
        fn(x, w).sum().backward()
        torch.testing.assert_close(got, w.grad)
        w.grad = None
    assert len(compiled.artifacts) == 1


def test_cache_tells_branch_bodies_apart(tmp_path, monkeypatch) -> None:
    """Two graphs whose top-level code is the same and whose branches differ are two
    cache entries (the key hashes the HOP bodies), not one reused for both."""
    monkeypatch.setenv("AOTGRAD_CACHE_DIR", str(tmp_path))

    def sin_first(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda y: y.sin(), lambda y: y.cos(), (x,))

    def cos_first(x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda y: y.cos(), lambda y: y.sin(), (x,))

    torch._dynamo.reset()
    x = _batch(1).requires_grad_()
    for fn in (sin_first, cos_first):
        compiled = torch.compile(fn, backend="aotgrad_eager", options={"strict": True})
        torch.testing.assert_close(compiled(x), fn(x))


# ------------------------------------------------------------------ other higher-order ops


@torch.compiler.nested_compile_region
def _region(y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (y @ w).sin()


def _map(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    from torch._higher_order_ops.map import map as hop_map

    return hop_map(lambda y, w: (y @ w).sin(), x.view(2, 2, 8), w).sum()


def _scan(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    from torch._higher_order_ops.scan import scan

    return scan(lambda c, y: (c.sin() + y @ w, c * 2), x[0] @ w, x)[0].sum()


HOPS: dict[str, tuple[Callable[..., torch.Tensor], str]] = {
    "invoke_subgraph": (lambda x, w: (_region(x, w) + _region(x * 2, w)).sum(), "invoke_subgraph"),
    "map": (_map, "map_impl"),
    "scan": (_scan, "scan"),
}


@pytest.mark.parametrize("case", sorted(HOPS))
def test_higher_order_op_differentiates_like_eager(case: str) -> None:
    fn, hop_name = HOPS[case]
    torch._dynamo.reset()
    artifacts: list[CompiledArtifact] = []
    unregister = observe.on_compiled(artifacts.append)
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)
    try:
        compiled = torch.compile(
            fn, backend="aotgrad_eager", fullgraph=True, options={"strict": True, "cache": False}
        )
        compiled(x, w).backward()
    finally:
        unregister()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    fn(x, w).backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], w.grad)
    (art,) = artifacts
    assert art.joint is not None
    hops = {
        n.target.name() for n in art.joint.graph.nodes if isinstance(n.target, HigherOrderOperator)
    }
    assert hop_name in hops  # recognisable in the joint graph, not inlined


def test_scan_under_inductor_runs_eagerly_with_right_grads() -> None:
    """torch 2.15's Inductor miscompiles scan's backward (backend="inductor" too): the
    aotgrad backend refuses it by name and the graph runs eagerly, with eager's grads."""
    torch._dynamo.reset()
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, 8, requires_grad=True)
    compiled = torch.compile(_scan, backend="aotgrad", fullgraph=True, options={"cache": False})
    with pytest.warns(UserWarning, match="scan"):
        compiled(x, w).backward()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    _scan(x, w).backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], w.grad)


# ------------------------------------------------------------------ unsupported


class _UntraceableHop(HigherOrderOperator):
    """Runs eagerly (below autograd, no gradient) but has no rule for aotgrad's modes."""

    def __init__(self) -> None:
        super().__init__("aotgrad_test_untraceable")

    def __call__(self, body: Callable[..., torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return super().__call__(body, x)  # type: ignore[no-any-return]


untraceable = _UntraceableHop()


@untraceable.py_impl(torch._C.DispatchKey.CompositeExplicitAutograd)
def _untraceable_dense(body: Callable[..., torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return body(x)


@untraceable.py_impl(torch._C.DispatchKey.Autograd)
def _untraceable_autograd(body: Callable[..., torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    with torch._C._AutoDispatchBelowAutograd():
        return untraceable(body, x)


class _Body(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sin() * 2


class _Top(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = _Body()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor]:
        return (untraceable(self.body, x) + 1,)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_unsupported_hop_raises_naming_it(requires_grad: bool) -> None:
    x = torch.randn(3, requires_grad=requires_grad)
    with pytest.raises(UnsupportedError, match="higher-order op aotgrad_test_untraceable"):
        aot_function(lambda x: untraceable(_Body(), x) + 1, nop)(x)


def test_backend_runs_unsupported_hop_eagerly_with_one_warning() -> None:
    gm = fx.symbolic_trace(_Top())  # what Dynamo hands a backend: the HOP over a submodule
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            run = aotgrad_eager_backend(gm, [x])
            torch.testing.assert_close(run(x)[0], x.sin() * 2 + 1)
    messages = [str(w.message) for w in caught if "aotgrad" in str(w.message)]
    assert len(messages) == 1
    assert "aotgrad_test_untraceable" in messages[0] and "UnsupportedError" in messages[0]
    with pytest.raises(UnsupportedError, match="aotgrad_test_untraceable"):
        aotgrad_eager_backend(gm, [x], options={"strict": True})


def test_hop_without_autograd_rule_is_refused_not_given_no_grad() -> None:
    """``hints_wrapper`` has no autograd rule (torch defers the error to backward): eager
    backward raises; aotgrad must refuse, not return a ``None`` gradient."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        hints_wrapper = torch.ops.higher_order.hints_wrapper
        return hints_wrapper(lambda y: y.sin(), (x,), {}, hints={"h": 1})

    x = torch.randn(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="Autograd not implemented for hints_wrapper"):
        fn(x).sum().backward()
    with pytest.raises(UnsupportedError, match="higher-order op hints_wrapper"):
        aot_function(fn, nop)(x)
