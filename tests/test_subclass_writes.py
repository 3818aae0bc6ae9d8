"""Subclass inputs (``TwoTensor``, a jagged ``NestedTensor``) that the function writes or
returns, against eager: a written input that requires grad carries the write in its
autograd history (the caller's later uses of it differentiate through the write), its
version counter moves as eager's does, a leaf that requires grad raises eager's error
at the write and is left untouched, ``return x`` returns the caller's tensor itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

import aotgrad

ENTRIES = ["aot_function", "aotgrad_eager"]


def _two() -> torch.Tensor:
    return TwoTensor(torch.randn(3, 4), torch.randn(3, 4))


def _nested() -> torch.Tensor:
    return torch.nested.nested_tensor([torch.randn(2, 4), torch.randn(3, 4)], layout=torch.jagged)


MAKERS = {"two_tensor": _two, "nested": _nested}


def _compiled(fn: Callable[..., Any], entry: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    if entry == "aot_function":
        return aotgrad.aot_function(fn, aotgrad.nop)
    return torch.compile(fn, backend=entry, fullgraph=True)


def _plain(t: torch.Tensor) -> torch.Tensor:
    """The values of a subclass value, as one plain tensor to compare."""
    if t.is_nested:
        return t.values().detach()
    return torch.cat([t.a, t.b]).detach()


def _loss(t: torch.Tensor) -> torch.Tensor:
    """A differentiable scalar of a subclass value (not linear: a gradient that lost a
    factor shows)."""
    v = t.values() if t.is_nested else t
    return (v * v).sum()


def _writes(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    x.add_(1)
    return x.sin()


def _writes_without_grad(x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        x.mul_(2)
    return x.cos()


def _leaf(kind: str, seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return MAKERS[kind]().requires_grad_()


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("fn", [_writes, _writes_without_grad], ids=["grad", "no_grad"])
def test_written_input_used_after_the_call(entry: str, kind: str, fn: Any) -> None:
    """The caller multiplies the written input after the call: its gradient reaches the
    leaf through the function's write (eager: the input's grad_fn is the write's)."""
    runs = []
    for f in (fn, _compiled(fn, entry)):
        leaf = _leaf(kind)
        x = leaf.clone()
        version = x._version
        out = f(x)
        after = x * 3
        (_loss(out) + _loss(after)).backward()
        runs.append((_plain(out), _plain(x), _plain(leaf.grad), x._version - version))
    (o1, x1, g1, v1), (o2, x2, g2, v2) = runs
    torch.testing.assert_close(o2, o1)
    torch.testing.assert_close(x2, x1)
    torch.testing.assert_close(g2, g1)
    assert v2 == v1


def _writes_view(x: torch.Tensor) -> torch.Tensor:
    x[0].add_(1)
    return x.sin()


@pytest.mark.parametrize("entry", ["aot_function"])
@pytest.mark.parametrize("fn", [_writes, _writes_view], ids=["itself", "view"])
def test_written_leaf_raises_as_eager(entry: str, fn: Any) -> None:
    """A leaf that requires grad, written with grad on: eager's RuntimeError, raised at
    the write, so the input keeps its values. (Under Dynamo, Dynamo's own fake run
    raises first, for every backend.)"""
    x = _leaf("two_tensor")
    with pytest.raises(RuntimeError) as want:
        fn(x)
    before = _plain(x).clone()
    with pytest.raises(RuntimeError) as got:
        _compiled(fn, entry)(x)
    assert str(got.value).split("\n")[0] == str(want.value).split("\n")[0]
    torch.testing.assert_close(_plain(x), before)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", list(MAKERS))
def test_leaf_written_without_grad(entry: str, kind: str) -> None:
    runs = []
    for f in (_writes_without_grad, _compiled(_writes_without_grad, entry)):
        x = _leaf(kind)
        _loss(f(x)).backward()
        runs.append((_plain(x), _plain(x.grad), x._version, x.is_leaf))
    (x1, g1, v1, l1), (x2, g2, v2, l2) = runs
    torch.testing.assert_close(x2, x1)
    torch.testing.assert_close(g2, g1)
    assert (v2, l2) == (v1, l1)


@pytest.mark.parametrize("kind", list(MAKERS))
@pytest.mark.parametrize("grad", [False, True])
def test_returned_input_is_the_input(kind: str, grad: bool) -> None:
    f = aotgrad.aot_function(lambda x: (x, x * 2), aotgrad.nop)
    x = _leaf(kind).requires_grad_(grad)
    out, doubled = f(x)
    assert out is x
    torch.testing.assert_close(_plain(doubled), _plain(x) * 2)


def _transposes(x: torch.Tensor) -> torch.Tensor:
    x.transpose_(0, 1)
    return x + 1


def _unsqueezes_and_writes(x: torch.Tensor) -> torch.Tensor:
    x.unsqueeze_(0)
    x.mul_(2)
    return x.cos()


@pytest.mark.parametrize("fn", [_transposes, _unsqueezes_and_writes], ids=["t", "unsqueeze_write"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "clone_of_leaf"])
def test_metadata_of_a_two_tensor_input(fn: Any, grad: bool) -> None:
    """``x.transpose_()`` / ``x.unsqueeze_()`` on a TwoTensor argument: the caller's
    wrapper and its inner tensors take eager's shape and strides, the version moves as
    eager's, and later uses of it differentiate through the change."""
    runs = []
    for f in (fn, _compiled(fn, "aot_function")):
        leaf = _leaf("two_tensor").requires_grad_(grad)
        x = leaf.clone() if grad else leaf
        out = f(x)
        if grad:
            (_loss(out) + _loss(x * 3)).backward()
        runs.append(
            (
                [tuple(t.shape) + tuple(t.stride()) for t in (x, x.a, x.b)],
                x._version,
                _plain(out),
                None if leaf.grad is None else _plain(leaf.grad),
            )
        )
    (m1, v1, o1, g1), (m2, v2, o2, g2) = runs
    assert (m2, v2) == (m1, v1)
    torch.testing.assert_close(o2, o1)
    if grad:
        torch.testing.assert_close(g2, g1)
