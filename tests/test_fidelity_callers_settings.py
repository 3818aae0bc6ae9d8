"""The first (compiling) call made under a caller's autograd settings: the trace ran
under them (blind suite 6). A non-reentrant ``checkpoint`` counted the trace's saves,
and the backward raised ``CheckpointError`` where eager runs; ``detect_anomaly`` made
the trace fail ("data-dependent control flow"); a ``FlopCounterMode`` counted the
trace's ops too (672 FLOPs where eager counts 288). Each case compiles cold (a fresh
disk cache: a warm one hides the trace) and compares with eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

import aotgrad
from eager_oracle import COMPILERS

DT = torch.float64


@pytest.fixture(autouse=True)
def _cold_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AOTGRAD_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()


def _f(x, w):
    return torch.tanh(x @ w) * x.sin()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return (
        torch.randn(3, 4, dtype=DT, requires_grad=True),
        torch.randn(4, 4, dtype=DT, requires_grad=True),
    )


def _grads(run: Callable[[Callable, torch.Tensor, torch.Tensor], Any], fn: Callable) -> Any:
    x, w = _inputs()
    try:
        extra = run(fn, x, w)
    except Exception as e:  # eager's own error, if any, is compared by type
        return type(e).__name__
    return extra, x.grad, w.grad


def _in_checkpoint(fn, x, w):
    for _ in range(2):  # the first iteration compiles inside the region
        checkpoint(lambda a, b: fn(a, b) * 2, x, w, use_reentrant=False).sum().backward()


def _in_checkpoint_twice_per_region(fn, x, w):
    def region(a, b):
        return fn(a, b) + fn(a * 2, b)

    checkpoint(region, x, w, use_reentrant=False).sum().backward()


def _under_anomaly_mode(fn, x, w):
    with torch.autograd.detect_anomaly():
        fn(x, w).sum().backward()


def _under_save_on_cpu(fn, x, w):
    with torch.autograd.graph.save_on_cpu():
        y = fn(x, w)
    y.sum().backward()


def _with_hooks_disabled(fn, x, w):
    with torch.autograd.graph.disable_saved_tensors_hooks("the caller disabled them"):
        y = fn(x, w)
    y.sum().backward()


def _counting_flops(fn, x, w):
    counter = FlopCounterMode(display=False)
    with counter:
        fn(x, w).sum().backward()
    return counter.get_total_flops()


CASES = [
    _in_checkpoint,
    _in_checkpoint_twice_per_region,
    _under_anomaly_mode,
    _under_save_on_cpu,
    _with_hooks_disabled,
    _counting_flops,
]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.allclose(a, b)
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return a == b


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("run", CASES, ids=lambda c: c.__name__.strip("_"))
def test_a_first_call_under_the_callers_settings_is_like_eager(
    run: Callable, compiler: str
) -> None:
    eager = _grads(run, _f)
    compiled = _grads(run, COMPILERS[compiler](_f))
    assert _same(eager, compiled), (eager, compiled)


def test_the_callers_settings_are_back_after_the_trace() -> None:
    seen = []

    def pack(t):
        seen.append(t.shape)
        return t

    compiled = aotgrad.aot_function(_f, aotgrad.nop)
    x, w = _inputs()
    with (
        torch.autograd.detect_anomaly(),
        torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
    ):
        compiled(x, w).sum().backward()
        assert torch.is_anomaly_enabled()
        assert torch._C._autograd._top_saved_tensors_default_hooks(True)[0] is pack
    assert seen  # the compiled forward's saves went through the caller's hook
    assert not torch.is_anomaly_enabled()
    assert torch._C._autograd._top_saved_tensors_default_hooks(True) is None


def test_a_module_compiled_inside_a_checkpoint_region() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    model = model.to(DT)
    compiled = aotgrad.aot_module(model, fw_compiler=aotgrad.nop)
    x = torch.randn(3, 4, dtype=DT, requires_grad=True)
    grads = []
    for m in (model, compiled):
        model.zero_grad()
        checkpoint(m, x, use_reentrant=False).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
