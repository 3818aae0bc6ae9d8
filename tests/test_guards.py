"""A compiled function never returns a stale answer: each assumption changes between calls.

Every scenario is a function and a sequence of calls, each call under its own mode
(grad, no_grad, inference_mode, autocast…) with its own arguments. The same
scenario runs through ``aot_function``, ``aot_module`` and ``aot_module_simplified``
(used directly, not under Dynamo), and every call is compared with eager: output
values, dtypes, ``requires_grad`` of every output, the inputs after the call (in-place
updates) and, when an output requires grad, the gradients of every input.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad import guards
from aotgrad.errors import GuardError
from aotgrad.partition import default_partition, min_cut_rematerialization_partition
from guard_scenarios import (
    ENTRIES,
    _args,
    _assert_same,
    _cache_of,
    _compilations,
    _compile,
    _default_dtype,
    _run,
    _tensors,
    fn_mm,
    grad,
    inference,
    no_grad,
)

# ------------------------------------------------------------------ the assumptions


@pytest.mark.parametrize("entry", ENTRIES)
def test_grad_mode(entry):
    xw = _args(((3, 4), False), ((4, 4), True))
    c = _run(entry, fn_mm, [(grad, xw), (no_grad, xw), (grad, xw), (no_grad, xw)])
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_inference_mode(entry):
    xw = _args(((3, 4), False), ((4, 4), True))
    c = _run(entry, fn_mm, [(grad, xw), (inference, xw), (grad, xw), (no_grad, xw)])
    assert _compilations(entry, c) == 3
    with inference():
        out = c(*xw())
    assert all(t.is_inference() and not t.requires_grad for t in _tensors(out))


@pytest.mark.parametrize("entry", ENTRIES)
def test_compiled_under_no_grad_then_grad(entry):
    xw = _args(((3, 4), True), ((4, 4), True))
    _run(entry, fn_mm, [(no_grad, xw), (grad, xw)])


@pytest.mark.parametrize("entry", ENTRIES)
def test_requires_grad_per_input(entry):
    fn = lambda x, w: (x * w).exp()  # noqa: E731
    calls = [
        (grad, _args(((5,), False), ((5,), False))),  # nothing requires grad: inference
        (grad, _args(((5,), False), ((5,), True))),
        (grad, _args(((5,), True), ((5,), False))),
        (grad, _args(((5,), True), ((5,), True))),
    ]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 4


def _write_input(x, w):
    x.mul_(w.sum())
    return (x * w,)


def test_a_leaf_and_a_non_leaf_input_that_require_grad_are_told_apart():
    """Compiled for a non-leaf ``x`` (a clone), a call with a leaf ``x`` must raise
    eager's error on the in-place write, not reuse the graph (soak seeds 50800, 51968:
    the first call made ``x`` require grad, the next passed a leaf)."""
    compiled = aotgrad.aot_function(_write_input, aotgrad.nop)
    w = torch.randn(4, requires_grad=True)
    compiled(torch.randn(4, requires_grad=True).clone(), w)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        _write_input(torch.randn(4, requires_grad=True), w)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        compiled(torch.randn(4, requires_grad=True), w)
    old = guards.call_key([torch.randn(4, requires_grad=True).clone()], dynamic=False)
    new = guards.call_key([torch.randn(4, requires_grad=True)], dynamic=False)
    assert guards.describe_change(old, new) == "input 0: is_leaf False -> True"


@pytest.mark.parametrize("entry", ENTRIES)
def test_dtype(entry):
    fn = lambda x: (x.t() @ x).tanh()  # noqa: E731
    calls = [
        (grad, _args(((4, 3), True))),
        (grad, _args(((4, 3), True, torch.float64))),
        (grad, _args(((4, 3), False, torch.float16))),
    ]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 3


@pytest.mark.parametrize("entry", ENTRIES)
def test_device(entry):
    other = "cuda" if torch.cuda.is_available() else "meta"
    fn = lambda x: (x * 2).sin()  # noqa: E731

    def on(device: str) -> Callable[[], tuple[Any, ...]]:
        return lambda: (torch.randn(4, device=device).requires_grad_(),)

    c = _run(entry, fn, [(no_grad, on("cpu")), (no_grad, on(other)), (no_grad, on("cpu"))])
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_shape(entry):
    fn = lambda x: (x.t() @ x).tanh().sum(0)  # noqa: E731
    calls = [(grad, _args(((n, 3), True))) for n in (4, 6, 1, 0, 4)]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 4


@pytest.mark.parametrize("entry", ENTRIES)
def test_strides(entry):
    fn = lambda x: x.reshape(-1).cumsum(0) * 2  # noqa: E731

    def transposed():
        return (torch.randn(3, 4).t().requires_grad_(),)

    def expanded():
        return (torch.randn(4, 1).expand(4, 3),)

    def sliced():
        return (torch.randn(4, 6)[:, ::2],)

    calls = [(grad, _args(((4, 3), True))), (grad, transposed), (grad, expanded), (grad, sliced)]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 4


@pytest.mark.parametrize("entry", ENTRIES)
def test_dynamic_branch_on_size(entry):
    """A branch on a size taken while tracing is a symbolic guard, not just a key."""

    def fn(x):
        return x * 2 if x.shape[0] > 3 else x * 3

    calls = [(grad, _args(((n, 4), True))) for n in (5, 2, 6, 3, 7)]
    c = _run(entry, fn, calls, dynamic=True)
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_dynamic_zero_one_specialisation(entry):
    fn = lambda x: (x.sum(1, keepdim=True) * x).exp()  # noqa: E731
    calls = [(grad, _args(((n, 3), True))) for n in (4, 1, 0, 5, 1)]
    c = _run(entry, fn, calls, dynamic=True)
    assert _compilations(entry, c) == 3


@pytest.mark.parametrize("entry", ENTRIES)
def test_dynamic_duck_sizing_within_and_across_tensors(entry):
    """Equal sizes share one symbol: the graph of (4, 4) may use s0**2 for numel."""
    square = lambda x: x.reshape(x.shape[0] * x.shape[1]) * 2  # noqa: E731
    calls = [(grad, _args(((n, m), True))) for n, m in ((4, 4), (3, 5), (5, 5))]
    c = _run(entry, square, calls, dynamic=True)
    assert _compilations(entry, c) == 2

    def cat(x, y):
        return torch.cat([x, y]).view(x.shape[0] + y.shape[0]) * 2

    calls = [(grad, _args(((n,), True), ((m,), False))) for n, m in ((4, 4), (4, 5), (6, 6))]
    c = _run(entry, cat, calls, dynamic=True)
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_dynamic_strides(entry):
    fn = lambda x: x.reshape(-1) * 2  # noqa: E731

    def transposed():
        return (torch.randn(5, 4).t().requires_grad_(),)

    calls = [(grad, _args(((4, 5), True))), (grad, transposed), (grad, _args(((6, 7), True)))]
    c = _run(entry, fn, calls, dynamic=True)
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_aliasing_same_tensor_twice_with_mutation(entry):
    def fn(a, b):
        a.mul_(2)
        return a + b

    def separate():
        return torch.ones(3), torch.ones(3)

    def same():
        z = torch.randn(3)
        return z, z

    c = _run(entry, fn, [(grad, separate), (grad, same), (grad, separate)])
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_aliasing_tensor_and_its_detached_self(entry):
    """x and x.detach() are the same memory but not the same autograd input."""
    fn = lambda a, b: a * b  # noqa: E731

    def separate():
        return torch.randn(3, requires_grad=True), torch.randn(3)

    def detached():
        x = torch.randn(3, requires_grad=True)
        return x, x.detach()

    def same():
        x = torch.randn(3, requires_grad=True)
        return x, x

    _run(entry, fn, [(grad, separate), (grad, detached), (grad, same), (grad, detached)])


@pytest.mark.parametrize("entry", ENTRIES)
def test_aliasing_overlapping_views(entry):
    fn = lambda a, b: (a * b).sin()  # noqa: E731

    def views(lo: int) -> Callable[[], tuple[Any, ...]]:
        def make():
            base = torch.randn(6)
            return base[0:3], base[lo : lo + 3]

        return make

    c = _run(entry, fn, [(grad, _args(((3,), False), ((3,), False))), (grad, views(1))])
    _run(entry, fn, [(grad, views(1)), (grad, views(3)), (grad, views(0))])
    assert _compilations(entry, c) == 2


@pytest.mark.parametrize("entry", ENTRIES)
def test_mutated_views_overlapping_then_not(entry):
    """A written input that starts or stops overlapping another input (same storage, other
    offset) gets its own compilation, and eager's answer either way."""

    def fn(a, b):
        a.add_(1)
        return a * b

    def views(lo: int) -> Callable[[], tuple[Any, ...]]:
        def make():
            base = torch.randn(6)
            return base[0:2], base[lo : lo + 2]

        return make

    calls = [(grad, _args(((2,), False), ((2,), False)))]
    calls += [(grad, views(lo)) for lo in (1, 3, 1, 2)]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 4


@pytest.mark.parametrize("entry", ENTRIES)
def test_python_scalars(entry):
    def fn(x, k, flag, s):
        y = x * k
        return (y.sin() if flag else y.cos()) + (1.0 if s == "a" else 2.0)

    x = ((3,), True)
    values = [(2, True, "a"), (3, True, "a"), (2.0, True, "a"), (2, False, "a"), (2, True, "b")]
    calls = [(grad, _args(x, k, flag, s)) for k, flag, s in values]
    calls.append((grad, _args(x, 2, True, "a")))
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == len(values)


@pytest.mark.parametrize("entry", ENTRIES)
def test_float_scalars_negative_zero_and_nan(entry):
    fn = lambda x, k: x / k + x * 0  # noqa: E731
    calls = [(grad, _args(((3,), True), k)) for k in (0.0, -0.0, math.nan, math.nan, 0.0)]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 3


@pytest.mark.parametrize("entry", ["aot_function", "aot_module"])
def test_scalars_in_lists_dicts_and_kwargs(entry):
    def fn(x, cfg, scales, *, shift=0.0):
        return x * scales[0] + x.pow(cfg["p"]) * scales[1] + shift

    c = _compile(entry, fn)
    ref_calls = [
        ((3,), {"p": 2}, [1.0, 2.0], {}),
        ((3,), {"p": 3}, [1.0, 2.0], {}),
        ((3,), {"p": 3}, [1.0, -2.0], {}),
        ((3,), {"p": 3}, [1.0, -2.0], {"shift": 1.5}),
        ((3,), {"p": 3}, [1.0, -2.0], {"shift": 2.5}),
        ((3,), {"p": 3}, [1.0, -2.0, 7.0], {"shift": 2.5}),
        ((3,), {"p": 2, "q": 1}, [1.0, 2.0], {}),
    ]
    for shape, cfg, scales, kw in ref_calls:
        torch.manual_seed(0)
        x = torch.randn(shape, requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        got, ref = c(x, cfg, scales, **kw), fn(xr, cfg, scales, **kw)
        _assert_same(got, ref)
        got.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, xr.grad)
    assert _cache_of(entry, c).compilations == len(ref_calls)


@pytest.mark.parametrize("entry", ENTRIES)
def test_autocast_and_default_dtype(entry):
    fn = lambda x, w: (x @ w) + torch.ones(2)  # noqa: E731
    xw = _args(((2, 3), False), ((3, 2), True))

    def bf16():
        return torch.autocast("cpu", dtype=torch.bfloat16)

    def f64():
        return _default_dtype(torch.float64)

    calls = [(grad, xw), (bf16, xw), (grad, xw), (f64, xw), (grad, xw)]
    c = _run(entry, fn, calls)
    assert _compilations(entry, c) == 3


# ------------------------------------------------------------------ module state


def _bn_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4), torch.nn.Dropout(0.0), torch.nn.Linear(4, 2)
    )


def _check_module_step(compiled: Any, mod: torch.nn.Module, ref: torch.nn.Module) -> None:
    torch.manual_seed(1)
    x = torch.randn(8, 4)
    got, want = compiled(x), ref(x)
    _assert_same(got, want)
    if want.requires_grad:
        got.sum().backward()
        want.sum().backward()
        for (name, p), q in zip(mod.named_parameters(), ref.parameters()):
            assert (p.grad is None) == (q.grad is None), name
            if q.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, msg=name)
                p.grad, q.grad = None, None
    for (name, b), c in zip(mod.named_buffers(), ref.buffers()):
        torch.testing.assert_close(b, c, msg=name)  # running stats updated like eager's


def _module_pair() -> tuple[torch.nn.Module, torch.nn.Module]:
    mod, ref = _bn_net(), _bn_net()
    ref.load_state_dict(mod.state_dict())
    return mod, ref


def test_aot_module_training_flag_top_level_and_submodule():
    mod, ref = _module_pair()
    c = aotgrad.aot_module(mod, aotgrad.nop)
    _check_module_step(c, mod, ref)
    mod.eval(), ref.eval()  # eval uses the running stats: a different graph
    _check_module_step(c, mod, ref)
    mod.train(), ref.train()
    _check_module_step(c, mod, ref)
    mod[1].eval(), ref[1].eval()  # only the BatchNorm: the top-level flag is unchanged
    _check_module_step(c, mod, ref)
    assert mod.training and not mod[1].training  # calling does not reset the flags
    assert c._compiled.compilations == 3


def test_aot_module_simplified_training_flag():
    """Used directly, the module's (and its submodules') training flags are guarded."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(4, affine=False, track_running_stats=False)

        def forward(self, x, w):
            return (self.bn(x @ w) if self.training else x @ w * 0.5,)

    torch.manual_seed(0)
    x, w = torch.randn(8, 4), torch.randn(4, 4, requires_grad=True)
    mod = M()
    c = aotgrad.aot_module_simplified(mod, [x, w], aotgrad.nop)
    for train in (True, False, True):
        mod.train(train)
        got, want = c(x, w), mod(x, w)
        _assert_same(got, want)
    mod.bn.eval()
    _assert_same(c(x, w), mod(x, w))
    assert c.compilations == 3


def test_aot_module_parameter_replaced_by_new_parameter():
    mod, ref = _module_pair()
    c = aotgrad.aot_module(mod, aotgrad.nop)
    _check_module_step(c, mod, ref)
    with torch.no_grad():  # values changed in place: read on the next call
        mod[0].weight.mul_(2)
        ref[0].weight.mul_(2)
    _check_module_step(c, mod, ref)
    new = torch.randn(4, 4)
    mod[0].weight = torch.nn.Parameter(new.clone())  # a new Parameter object
    ref[0].weight = torch.nn.Parameter(new.clone())
    _check_module_step(c, mod, ref)
    assert c._compiled.compilations == 1  # parameters are inputs: no recompilation
    mod[3].weight = torch.nn.Parameter(torch.randn(2, 4, dtype=torch.float64))  # new dtype
    ref[3].weight = torch.nn.Parameter(mod[3].weight.detach().clone())
    mod[3].bias = torch.nn.Parameter(mod[3].bias.detach().double())
    ref[3].bias = torch.nn.Parameter(mod[3].bias.detach().clone())
    with pytest.raises(RuntimeError):  # eager refuses the mixed dtypes: so does aotgrad
        ref(torch.randn(8, 4))
    with pytest.raises(Exception):  # noqa: B017
        c(torch.randn(8, 4))


def test_aot_module_frozen_parameter_and_reassigned_buffer():
    mod, ref = _module_pair()
    c = aotgrad.aot_module(mod, aotgrad.nop)
    _check_module_step(c, mod, ref)
    mod[0].weight.requires_grad_(False)  # frozen: a different joint graph
    ref[0].weight.requires_grad_(False)
    _check_module_step(c, mod, ref)
    mod[1].running_mean = torch.full((4,), 3.0)  # buffer reassigned to a new tensor
    ref[1].running_mean = torch.full((4,), 3.0)
    mod.eval(), ref.eval()
    _check_module_step(c, mod, ref)
    mod.train(), ref.train()
    _check_module_step(c, mod, ref)  # and updated in place by the next training step
    assert c._compiled.compilations == 3


def test_aot_module_tied_then_untied_weights():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4, bias=False)
            self.b = torch.nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x).relu())

    torch.manual_seed(0)
    mod, ref = Tied(), Tied()
    ref.load_state_dict(mod.state_dict())
    c = aotgrad.aot_module(mod, aotgrad.nop)
    _check_module_step(c, mod, ref)
    untied = torch.randn(4, 4)
    mod.b.weight = torch.nn.Parameter(untied.clone())
    ref.b.weight = torch.nn.Parameter(untied.clone())
    _check_module_step(c, mod, ref)
    assert c._compiled.compilations == 2


# ------------------------------------------------------------------ outputs' requires_grad


def fn_outputs(x, y):
    return (
        x.sin(),  # differentiable
        x.argmax(),  # integer: never requires grad
        x > 0,  # bool
        x.detach() * 2,  # does not depend on a grad-requiring input
        y + 1,  # neither
        x[0],  # a view of an input
    )


@pytest.mark.parametrize("mode", [no_grad, inference])
@pytest.mark.parametrize("entry", ENTRIES)
def test_outputs_requires_grad_follows_eager(entry, mode):
    xy = _args(((4,), True), ((4,), False))
    _run(entry, fn_outputs, [(grad, xy), (mode, xy), (grad, xy)])


@pytest.mark.parametrize("entry", ENTRIES)
def test_output_that_is_an_input(entry):
    fn = lambda x, y: (x, y, x * y)  # noqa: E731
    xy = _args(((4,), True), ((4,), False))
    _run(entry, fn, [(grad, xy), (no_grad, xy)])


# ------------------------------------------------------------------ saved values written later


def _mutate_saved(x, w):
    y = x * w  # w's grad needs x, written below: eager's backward raises
    x.mul_(2)
    return y.sum() + x.sum()


def _mutate_saved_sin(x, w):
    y = x.sin() * w  # x's grad (when it requires grad) needs x, written below
    x.mul_(3)
    return y


def _mutate_unsaved(x, w):
    y = x.clone() * w  # the clone is saved, not x: the backward runs
    x.mul_(2)
    return y.sum() + x.sum()


def _backward_outcome(fn, c, x_requires_grad):
    a = torch.randn(4, requires_grad=x_requires_grad, generator=torch.Generator().manual_seed(0))
    w = torch.randn(4, requires_grad=True, generator=torch.Generator().manual_seed(1))
    a, w = a.detach().requires_grad_(x_requires_grad), w.detach().requires_grad_()
    x = a * 1  # not a leaf: may be written in place
    out = c(x, w)
    facts = [out.detach(), x.detach().clone(), x._version]
    try:
        out.sum().backward()
        facts += [w.grad, a.grad]
    except RuntimeError as e:
        facts.append("modified by an inplace operation" in str(e))
    return facts


@pytest.mark.parametrize("partition", [default_partition, min_cut_rematerialization_partition])
@pytest.mark.parametrize("fn", [_mutate_saved, _mutate_saved_sin, _mutate_unsaved])
@pytest.mark.parametrize("x_requires_grad", [False, True])
def test_saved_value_written_later_raises_in_backward_like_eager(fn, partition, x_requires_grad):
    """Eager's backward refuses a saved tensor written after it was saved (its version
    counter); the compiled backward raises the same error, and only then: forward values
    and the written input are eager's, and a backward that needs no such value runs."""
    c = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition)
    for _ in range(2):
        got, want = (
            _backward_outcome(fn, c, x_requires_grad),
            _backward_outcome(fn, fn, x_requires_grad),
        )
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                torch.testing.assert_close(g, w)
            else:
                assert g == w


# ------------------------------------------------------------------ the recompile limit


@pytest.mark.parametrize(
    "change, message",
    [
        ("scalar", r"input 1: non-tensor argument value 2 -> 3"),
        ("shape", r"input 0: shape torch.Size\(\[2\]\) -> torch.Size\(\[3\]\)"),
        ("grad mode", r"grad mode True -> False"),
        ("requires_grad", r"input 0: requires_grad"),
        ("dynamic", r"symbolic shape guard failed: .*size\(\)\[0\]"),
    ],
)
def test_recompile_limit_names_the_changing_assumption(change, message):
    def fn(x, k):
        return x * k if x.shape[0] > 3 else x * (k + 1)

    calls: list[tuple[Any, Any]] = {
        "scalar": [(grad, (torch.randn(2), k)) for k in (1, 2, 3)],
        "shape": [(grad, (torch.randn(n), 2)) for n in (1, 2, 3)],
        "grad mode": [(m, (torch.randn(2, requires_grad=True), 2)) for m in (grad, no_grad)],
        "requires_grad": [(grad, (torch.randn(2).requires_grad_(r), 2)) for r in (True, False)],
        "dynamic": [(grad, (torch.randn(n, 7), 2)) for n in (5, 6, 2)],
    }[change]
    if change == "grad mode":
        calls.insert(0, (grad, (torch.randn(2), 2)))
    if change == "requires_grad":
        calls.insert(0, (no_grad, (torch.randn(2), 2)))
    limit = 1 if change == "dynamic" else len(calls) - 1
    c = aotgrad.aot_function(fn, aotgrad.nop, recompile_limit=limit, dynamic=change == "dynamic")
    for ctx, args in calls[:-1]:
        with ctx():
            c(*args)
    ctx, args = calls[-1]
    with ctx(), pytest.raises(GuardError, match=message):
        c(*args)


def test_recompile_limit_names_the_module_state():
    mod = _bn_net()
    c = aotgrad.aot_module(mod, aotgrad.nop, recompile_limit=1)
    x = torch.randn(8, 4)
    c(x)
    mod[1].eval()
    with pytest.raises(GuardError, match=r"module state: submodule 2 training True -> False"):
        c(x)


# ------------------------------------------------------------------ the key itself


def test_overlapping():
    base = torch.arange(12.0)
    assert guards.overlapping(base[:4], base[3:6])
    assert not guards.overlapping(base[:4], base[4:8])
    assert guards.overlapping(base.view(3, 4)[:, 0], base.view(3, 4)[1])  # strided
    assert not guards.overlapping(base[:4], torch.arange(4.0))
    assert not guards.overlapping(base[:0], base)  # empty
    assert guards.overlapping(base.view(4, 3).t(), base[5:6])
    assert guards.overlapping(torch.zeros(1).expand(5), torch.zeros(1).expand(5)) is False


def test_key_records_storage_offsets_and_overlap_of_shared_inputs():
    base = torch.arange(8.0)

    def key(*ts: torch.Tensor) -> tuple:
        return guards.call_key(list(ts), dynamic=False)

    disjoint, overlap = key(base[0:3], base[3:6]), key(base[0:3], base[2:5])
    assert disjoint[2] == overlap[2]  # same storage sharing either way…
    assert disjoint[3] != overlap[3]  # …but one pair overlaps
    assert disjoint[3] == (((0, 0), (1, 3)), ())
    assert overlap[3] == (((0, 0), (1, 2)), ((0, 1),))
    assert key(base[0:3], base[4:7])[3] != disjoint[3]  # another offset
    assert key(torch.zeros(3), torch.zeros(3))[3] == ()  # nothing shared: nothing computed
    a, b = torch.zeros(3), torch.zeros(3)
    c = aotgrad.aot_function(lambda x, y: x + y, aotgrad.nop)
    c(base[0:3], base[3:6])
    c(base[0:3], base[2:5])
    c(base[0:3], base[3:6])
    c(a, b)
    assert c.compilations == 3


def test_guard_check_is_cheap():
    """The per-call check: a few µs for two small tensors (the bench prints the figure)."""
    import time

    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    flat = [x, y]
    guards.call_key(flat, dynamic=False)
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        guards.call_key(flat, dynamic=False)
    per_call_us = (time.perf_counter() - t0) / n * 1e6
    assert per_call_us < 50  # generous: a shared 2-core machine
