"""Hooks registered on the module ``aot_module`` compiles run as eager runs them, on every
call, with readable tensors (``aotgrad.module_hooks``): before, they ran once, at trace
time, on stand-in tensors (blind suites 5 and 6: a full backward hook logged one call
after two backwards; a forward hook kept unreadable activations)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

DT = torch.float64
PARTITIONS = {"default": default_partition, "min_cut": min_cut_rematerialization_partition}


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).to(DT)


def _run(
    hooks: Callable[[nn.Module, list], None], partition: str | None, steps: int = 3
) -> tuple[list, list]:
    """Three training steps of the model (compiled unless ``partition`` is None) with
    ``hooks`` registered on it: what the hooks logged, and the gradients."""
    m = _model()
    log: list = []
    hooks(m, log)
    cm = (
        m
        if partition is None
        else aotgrad.aot_module(m, fw_compiler=aotgrad.nop, partition_fn=PARTITIONS[partition])
    )
    torch.manual_seed(1)
    grads = []
    for _ in range(steps):
        m.zero_grad()
        x = torch.randn(2, 3, dtype=DT, requires_grad=True)
        cm(x).pow(2).sum().backward()
        grads.append([x.grad.clone(), *(p.grad.clone() for p in m.parameters())])
    return log, grads


def _full_backward_hook(m: nn.Module, log: list) -> None:
    def hook(mod: nn.Module, grad_in: Any, grad_out: Any) -> Any:
        log.append(("backward", mod is m, grad_out[0].clone()))
        return (grad_in[0] * 3.0,)

    m.register_full_backward_hook(hook)


def _backward_pre_hook(m: nn.Module, log: list) -> None:
    def hook(mod: nn.Module, grad_out: Any) -> Any:
        log.append(("pre-backward", grad_out[0].clone()))
        return (grad_out[0] * 0.5,)

    m.register_full_backward_pre_hook(hook)


def _forward_hooks(m: nn.Module, log: list) -> None:
    def pre(mod: nn.Module, args: Any) -> Any:
        log.append(("pre", args[0].clone()))
        return (args[0] * 2.0,)

    def post(mod: nn.Module, args: Any, out: Any) -> Any:
        log.append(("post", out.detach().clone()))
        return out + 1.0

    m.register_forward_pre_hook(pre)
    m.register_forward_hook(post)


def _forward_hook_with_kwargs(m: nn.Module, log: list) -> None:
    def post(mod: nn.Module, args: Any, kwargs: Any, out: Any) -> None:
        log.append(("kwargs-post", type(out).__name__, out.detach().sum().item()))

    m.register_forward_hook(post, with_kwargs=True)


HOOKS = [_full_backward_hook, _backward_pre_hook, _forward_hooks, _forward_hook_with_kwargs]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return type(b) is torch.Tensor and torch.allclose(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return a == b


@pytest.mark.parametrize("partition", list(PARTITIONS))
@pytest.mark.parametrize("hooks", HOOKS, ids=lambda h: h.__name__.strip("_"))
def test_the_modules_own_hooks_run_on_every_call_as_eager(hooks: Callable, partition: str) -> None:
    eager_log, eager_grads = _run(hooks, None)
    log, grads = _run(hooks, partition)
    assert len(log) == len(eager_log) and _same(eager_log, log), (eager_log, log)
    assert _same(eager_grads, grads)


def test_a_hook_registered_after_the_first_call_and_removed_later() -> None:
    m = _model()
    cm = aotgrad.aot_module(m, fw_compiler=aotgrad.nop)
    x = torch.randn(2, 3, dtype=DT)
    plain = cm(x).detach().clone()
    handle = m.register_forward_hook(lambda mod, args, out: out * 10.0)
    torch.testing.assert_close(cm(x), plain * 10.0)
    handle.remove()
    torch.testing.assert_close(cm(x), plain)
    assert "forward" not in m.__dict__  # the module's forward is its own again
