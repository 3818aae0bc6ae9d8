"""The scenario harness of tests/test_guards.py: one function, a sequence of calls (each
under its own mode, with its own arguments), run through ``aot_function``,
``aot_module`` and ``aot_module_simplified`` and compared call by call with eager."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

import aotgrad

ENTRIES = ("aot_function", "aot_module", "aot_module_simplified")


class _AsModule(torch.nn.Module):
    """``fn`` as a module without parameters (for aot_module)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)


class _AsFlatModule(torch.nn.Module):
    """``fn`` as a flat-in, tuple-out module (for aot_module_simplified)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> tuple[Any, ...]:
        out = self.fn(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class _Simplified:
    """aot_module_simplified compiles eagerly for its example inputs: do that on the first
    call (under the first call's modes), then call the guarded result."""

    def __init__(self, fn: Callable[..., Any], kwargs: dict[str, Any]) -> None:
        self.fn, self.kwargs, self.compiled = fn, kwargs, None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            self.compiled = aotgrad.aot_module_simplified(
                _AsFlatModule(self.fn), list(args), aotgrad.nop, **self.kwargs
            )
        return self.compiled(*args)


def _compile(entry: str, fn: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    if entry == "aot_function":
        return aotgrad.aot_function(fn, aotgrad.nop, **kwargs)
    if entry == "aot_module":
        return aotgrad.aot_module(_AsModule(fn), aotgrad.nop, **kwargs)
    return _Simplified(fn, kwargs)


def _simplified_unwrap(entry: str, got: Any, ref: Any) -> Any:
    if entry == "aot_module_simplified" and not isinstance(ref, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == 1
        return got[0]
    if entry == "aot_module_simplified" and isinstance(ref, list):
        return list(got)
    return got


def _tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _assert_same(got: Any, ref: Any) -> None:
    g, r = pytree.tree_leaves(got), pytree.tree_leaves(ref)
    assert len(g) == len(r)
    for a, b in zip(g, r):
        if not isinstance(b, torch.Tensor):
            assert a == b or (a != a and b != b)  # nan
            continue
        assert isinstance(a, torch.Tensor)
        assert (a.dtype, a.device, a.shape) == (b.dtype, b.device, b.shape)
        assert a.requires_grad == b.requires_grad, "requires_grad differs from eager's"
        if b.device.type != "meta":
            torch.testing.assert_close(a.detach(), b.detach(), equal_nan=True)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    was = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(was)


Call = tuple[Callable[[], Any], Callable[[], tuple[Any, ...]]]


def _run(entry: str, fn: Callable[..., Any], calls: list[Call], **kwargs: Any) -> Any:
    """Run ``calls`` (mode, argument factory) through ``entry`` and eagerly, comparing
    outputs, inputs after the call and gradients. The factory is called twice per call
    (seeded), so that aliasing between arguments is the same for both runs."""
    compiled = _compile(entry, fn, **kwargs)
    for ctx, make in calls:
        torch.manual_seed(0)
        got_args = make()
        torch.manual_seed(0)
        ref_args = make()
        with ctx():
            got = compiled(*got_args)
            ref = fn(*ref_args)
        got = _simplified_unwrap(entry, got, ref)
        _assert_same(got, ref)
        _assert_same(got_args, ref_args)  # in-place updates of the inputs
        diff_ref = [t for t in _tensors(ref) if t.requires_grad and t.is_floating_point()]
        if diff_ref:
            diff_got = [t for t in _tensors(got) if t.requires_grad and t.is_floating_point()]
            sum(t.sum() for t in diff_got).backward()  # type: ignore[union-attr]
            sum(t.sum() for t in diff_ref).backward()  # type: ignore[union-attr]
            for a, b in zip(_tensors(got_args), _tensors(ref_args)):
                if b.is_leaf and b.requires_grad:
                    assert (a.grad is None) == (b.grad is None)
                    if b.grad is not None:
                        torch.testing.assert_close(a.grad, b.grad, equal_nan=True)
    return compiled


def _cache_of(entry: str, compiled: Any) -> aotgrad.api.AotFunction:
    if entry == "aot_module":
        return compiled._compiled
    if entry == "aot_module_simplified":
        return compiled.compiled
    return compiled


def _compilations(entry: str, compiled: Any) -> int:
    return _cache_of(entry, compiled).compilations


def _args(*specs: Any) -> Callable[[], tuple[Any, ...]]:
    """A seeded argument factory: a spec is ``(shape, requires_grad[, dtype])`` or a value."""

    def make() -> tuple[Any, ...]:
        out = []
        for s in specs:
            if isinstance(s, tuple) and s and isinstance(s[0], tuple):
                shape, rg, *dtype = s
                t = torch.randn(shape, dtype=dtype[0] if dtype else torch.float32)
                out.append(t.requires_grad_(rg))
            else:
                out.append(s)
        return tuple(out)

    return make


grad, no_grad, inference = torch.enable_grad, torch.no_grad, torch.inference_mode


def fn_mm(x, w):
    return (x @ w).sin()


def fn_scalar(x, w, k):
    return (x @ w).sin() * k
