"""Hooks the function registers on tensors it makes run when the backward runs, on the
real gradient, every call (``aotgrad.hook_calls``); hooks on submodules of an
``aot_module`` run the calls eagerly (``module_hooks.refuse_submodule_hooks``). Each
against eager: what the hooks record (count, values), and every gradient."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad import cache
from aotgrad.errors import EagerReplayWarning
from aotgrad.hook_calls import TENSOR_HOOK
from eager_oracle import aot_inductor

COMPILERS = {
    "nop": lambda fn: aotgrad.aot_function(fn, aotgrad.nop),
    "inductor": aot_inductor,
}


def _record(seen: list) -> Callable:
    def hook(g):
        seen.append(g.clone())

    return hook


class _Recorder:
    def __init__(self, seen: list) -> None:
        self.seen = seen

    def __call__(self, g):
        self.seen.append(g.clone())


def _recording(seen):
    def fn(x):
        y = x.sin()
        y.register_hook(_record(seen))
        return y * 3

    return fn


def _scaled_then_recorded(seen):
    def fn(x):
        y = x.exp()
        y.register_hook(lambda g: g * 2)
        y.register_hook(lambda g: (seen.append(g.clone()), g + 1)[1])
        return (y * y).sum()

    return fn


def _recorded_on_a_view_and_output(seen):
    def fn(x):
        y = x.exp()
        z = y.t()
        z.register_hook(_Recorder(seen))
        return z.relu(), y

    return fn


def _builtin_append(seen):
    def fn(x):
        y = x * 2
        y.register_hook(seen.append)
        return y.cos(), y

    return fn


def _removed(seen):
    def fn(x):
        y = x * 2
        y.register_hook(_record(seen)).remove()
        return y.cos()

    return fn


def _unreached_output_hooked(seen):
    def fn(x):
        a = x.sin()
        a.register_hook(_record(seen))
        return x.exp().sum(), a

    return fn


def _holding_the_calls_tensor(seen):
    def fn(x):  # (the hook computes from the call's w: traced, as before)
        y = x.exp()
        w = x.cos()
        y.register_hook(lambda g: g * w)
        return y * 2

    return fn


PROGRAMS = [
    _recording,
    _scaled_then_recorded,
    _recorded_on_a_view_and_output,
    _builtin_append,
    _removed,
    _unreached_output_hooked,
    _holding_the_calls_tensor,
]


def _calls(make: Callable, wrap: Callable | None) -> tuple[list, list]:
    seen: list[Any] = []
    fn = make(seen)
    run = fn if wrap is None else wrap(fn)
    torch.manual_seed(0)
    grads = []
    for _ in range(3):
        x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
        out = run(x)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
        grads.append(x.grad)
    return seen, grads


@pytest.mark.parametrize("compiler", sorted(COMPILERS))
@pytest.mark.parametrize("make", PROGRAMS, ids=lambda m: m.__name__.strip("_"))
def test_hooks_run_every_backward_on_the_real_gradient(make: Callable, compiler: str) -> None:
    want_seen, want_grads = _calls(make, None)
    got_seen, got_grads = _calls(make, COMPILERS[compiler])
    assert len(got_seen) == len(want_seen)
    for got, want in zip(got_seen, want_seen):
        assert type(got) is torch.Tensor  # (not the trace's stand-in)
        torch.testing.assert_close(got, want)
    for got, want in zip(got_grads, want_grads):
        torch.testing.assert_close(got, want)


def _pure(g):
    return g + g.sum(0, keepdim=True)


def test_hooks_dynamo_takes_into_its_graph_stay_traced() -> None:
    """Dynamo puts only hooks it can trace into its graph (a recording closure breaks
    it): aotgrad traces them into the backward, where Inductor can fuse them."""
    graphs: list[Any] = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    def backend(gm, example_inputs):
        return aotgrad.aot_module_simplified(gm, example_inputs, fw_compiler=keep, bw_compiler=keep)

    def fn(x):
        y = x.sin()
        y.register_hook(_pure)
        return y * 3

    torch._dynamo.reset()
    x = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    torch.compile(fn, backend=backend)(x).sum().backward()
    want = x.grad
    x.grad = None
    fn(x).sum().backward()
    torch.testing.assert_close(want, x.grad)
    targets = {n.target for g in graphs for n in g.graph.nodes}
    assert TENSOR_HOOK not in targets and torch.ops.aten.sum.dim_IntList in targets


def test_the_backward_graph_calls_the_hook_and_the_cache_keeps_no_entry(tmp_path: Any) -> None:
    """The hook is an op of the backward graph (not traced into it), and a program that
    calls one is not written to the disk cache (its key names a hook of this process)."""
    graphs: list[Any] = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm

    seen: list[Any] = []
    compiled = aotgrad.aot_function(_recording(seen), keep)
    for _ in range(2):
        compiled(torch.randn(3, dtype=torch.float64, requires_grad=True)).sum().backward()
    assert len(seen) == 2 and all(type(g) is torch.Tensor for g in seen)
    assert any(n.target is TENSOR_HOOK for g in graphs for n in g.graph.nodes)
    (artifact,) = compiled.artifacts
    program = SimpleNamespace(
        layout=artifact.layout, forward=artifact.forward, backward=artifact.backward
    )
    assert cache.store("k" * 64, program, root=tmp_path) is None
    assert not list(tmp_path.glob("*/*"))


def test_a_hook_that_changes_the_size_raises_as_eager() -> None:
    def fn(x):
        y = x * 2
        y.register_hook(lambda g: g.sum())
        return y.sum()

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="changed the size of value"):
        fn(x).backward()
    with pytest.raises(RuntimeError, match="changed the size of value"):
        aotgrad.aot_function(fn, aotgrad.nop)(x).backward()


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.b(self.a(x).relu()).sum()


def _net_calls(compiled: bool, hook: str) -> tuple[list, list]:
    torch.manual_seed(0)
    net, acts = _Net(), []
    if hook == "forward":
        net.a.register_forward_hook(lambda m, i, o: acts.append(o.detach().clone()))
    else:
        net.a.register_full_backward_hook(lambda m, gi, go: acts.append(go[0].clone()))
    run = aotgrad.aot_module(net, aotgrad.nop) if compiled else net
    for _ in range(3):
        run(torch.randn(2, 4)).backward()
    return acts, [p.grad for p in net.parameters()]


@pytest.mark.parametrize("hook", ["forward", "full_backward"])
def test_a_users_hook_on_a_submodule_runs_the_calls_eagerly(hook: str) -> None:
    want_acts, want_grads = _net_calls(False, hook)
    with pytest.warns(EagerReplayWarning, match="submodule 'a' has a hook"):
        got_acts, got_grads = _net_calls(True, hook)
    assert len(got_acts) == len(want_acts) == 3
    for got, want in zip([*got_acts, *got_grads], [*want_acts, *want_grads]):
        assert type(got) is torch.Tensor
        torch.testing.assert_close(got, want)


def test_weight_norm_on_a_submodule_matches_eager() -> None:
    """``weight_norm``'s forward pre-hook (torch's own: not refused as a user's hook)
    sets the weight it computes on the module: that call runs eagerly (the attribute
    write, ``guards.refuse_changed_settings``); the gradients are eager's."""

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        net = _Net()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            torch.nn.utils.weight_norm(net.a)
        return net

    want, got = make(), make()
    run = aotgrad.aot_module(got, aotgrad.nop)
    with pytest.warns(EagerReplayWarning, match="sets Linear.weight"):
        for _ in range(2):
            x = torch.randn(2, 4)
            want(x).backward()
            run(x).backward()
    for (name, p), q in zip(want.named_parameters(), got.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)


def test_a_hook_added_to_a_submodule_after_the_first_call_runs_and_its_removal_compiles() -> None:
    """A hook registered between calls changes the guard (looked for again when any
    hook handle was made): the calls with it run eagerly, with it removed the compiled
    entry runs again."""

    def negate(m, i, o):
        return -o

    torch.manual_seed(0)
    want_net, got_net = _Net(), _Net()
    got_net.load_state_dict(want_net.state_dict())
    run = aotgrad.aot_module(got_net, aotgrad.nop)
    results = []
    for net, call in ((want_net, want_net), (got_net, run)):
        outs = [call(torch.ones(2, 4))]
        handle = net.a.register_forward_hook(negate)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EagerReplayWarning)
            outs.append(call(torch.ones(2, 4)))
        handle.remove()
        outs.append(call(torch.ones(2, 4)))
        results.append(outs)
    for got, want in zip(*results[::-1]):
        torch.testing.assert_close(got, want)
    assert len(run._compiled.eager.keys) == 1 and len(run._compiled.cache) == 1


def test_hooks_on_an_output_keep_their_order_with_hooks_added_after_the_call() -> None:
    """``g * 2``, then a recording hook (Dynamo breaks its graph there and registers it
    and the next one on the output after the graph), then ``g + 1``: eager records the
    doubled gradient. The first hook ran in the compiled backward, after the others."""

    def run(compile_it: bool) -> tuple[list, torch.Tensor]:
        seen: list[Any] = []

        def f(x):
            y = x * x
            y.register_hook(lambda g: g * 2)
            y.register_hook(lambda g: seen.append(g.clone()))
            y.register_hook(lambda g: g + 1)
            return y.sum() * 3

        torch._dynamo.reset()
        x = torch.linspace(-1, 1, 3, requires_grad=True)
        (torch.compile(f, backend="aotgrad_eager") if compile_it else f)(x).backward()
        return seen, x.grad

    (want_seen, want_grad), (got_seen, got_grad) = run(False), run(True)
    torch.testing.assert_close(got_seen, want_seen)
    torch.testing.assert_close(got_grad, want_grad)


def test_a_hook_on_an_output_the_backward_does_not_reach_is_not_called() -> None:
    """``a`` and ``b`` come from two nodes in eager, from one compiled node here: a
    backward through ``a`` alone gave ``b``'s hook None (a recording hook raised)."""
    for compile_it in (False, True):
        seen: list[Any] = []

        def f(x):
            return x * 2, x * 3

        run = aotgrad.aot_function(f, aotgrad.nop) if compile_it else f
        x = torch.ones(3, requires_grad=True)
        a, b = run(x)
        a.register_hook(lambda g, seen=seen: seen.append(("a", g.clone())))
        b.register_hook(lambda g, seen=seen: seen.append(("b", g.clone())))
        a.sum().backward()
        assert [name for name, _ in seen] == ["a"]
        torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


def test_a_hook_on_an_output_the_others_are_computed_from_sees_eagers_gradient() -> None:
    """``a = x * 2; b = a.exp()``, both returned, a hook on ``a`` after the call, backward
    through ``b``: eager's hook sees ``a``'s gradient through ``b``. The compiled node
    added that part inside, and a warning said the hook saw only the caller's part;
    since round 56 ``b`` reaches ``a`` (``runtime.fed_outputs_link``): no warning, the
    hook sees eager's gradient, and ``x.grad`` is unchanged."""
    calls = []

    def f(x):
        a = x * 2
        return a, a.exp()

    x = torch.ones(3, requires_grad=True)
    a, b = aotgrad.aot_function(f, aotgrad.nop)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.register_hook(lambda g: calls.append(g))
    b.sum().backward()
    assert len(calls) == 1
    torch.testing.assert_close(calls[0], torch.exp(torch.full((3,), 2.0)))
    torch.testing.assert_close(x.grad, 2 * torch.exp(torch.full((3,), 2.0)))
