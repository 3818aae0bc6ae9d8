"""Tensor subclasses through aotgrad (``aotgrad.subclasses``): traceable wrapper
subclasses are flattened to their inner tensors at the boundary of the trace, and
outputs and gradients are rebuilt as subclasses. Each case runs eagerly and through
``aot_function``, ``backend="aotgrad_eager"`` and ``backend="aotgrad"`` (Inductor),
comparing outputs, gradients and written inputs leaf by leaf."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.testing._internal.subclasses import WrapperSubclass
from torch.testing._internal.two_tensor import TwoTensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

import aotgrad
from aotgrad.errors import UnsupportedError

ENTRIES = ["aot_function", "aotgrad_eager", "aotgrad"]


def _compiled(fn: Callable[..., Any], entry: str) -> Callable[..., Any]:
    torch._dynamo.reset()
    if entry == "aot_function":
        return aotgrad.aot_function(fn, aotgrad.nop)
    return torch.compile(fn, backend=entry, fullgraph=True, options={"strict": True})


def _leaves(t: Any) -> list[torch.Tensor]:
    """A value's plain tensors, with its subclass structure (type per level)."""
    if t is None:
        return [None]
    if is_traceable_wrapper_subclass(t):
        attrs, ctx = t.__tensor_flatten__()
        out: list[Any] = [(type(t), ctx, tuple(t.shape))]
        for a in attrs:
            out.extend(_leaves(getattr(t, a)))
        return out
    return [t]


def _assert_same(got: Any, want: Any) -> None:
    g, w = _leaves(got), _leaves(want)
    assert len(g) == len(w), (g, w)
    for x, y in zip(g, w, strict=True):
        if isinstance(y, torch.Tensor):
            assert type(x) is type(y)
            torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
        else:
            assert x == y


def _two(*shape: int, grad: bool = True, dtype: torch.dtype = torch.float32) -> TwoTensor:
    t = TwoTensor(torch.randn(*shape, dtype=dtype), torch.randn(*shape, dtype=dtype))
    return t.requires_grad_(grad)


def _check(fn: Callable[..., Any], make_inputs: Callable[[], list[Any]], entry: str) -> None:
    """Outputs, input gradients and inputs after the call (written ones) equal eager."""
    torch.manual_seed(0)
    eager_in = make_inputs()
    torch.manual_seed(0)
    compiled_in = make_inputs()
    want = fn(*eager_in)
    got = _compiled(fn, entry)(*compiled_in)
    want_t = want if isinstance(want, tuple) else (want,)
    got_t = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got_t, want_t, strict=True):
        _assert_same(g, w)
    if any(o.requires_grad for o in want_t):
        torch.autograd.backward([o.sum() for o in want_t if o.requires_grad])
        torch.autograd.backward([o.sum() for o in got_t if o.requires_grad])
    for g, w in zip(compiled_in, eager_in, strict=True):
        if isinstance(w, torch.Tensor):
            _assert_same(g, w)  # written inputs
            if w.is_leaf and w.requires_grad:
                _assert_same(g.grad, w.grad)


def plain_fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x.clone() * 2).sin() * y + x


@pytest.mark.parametrize("entry", ENTRIES)
def test_two_tensor_values_and_grads(entry: str) -> None:
    _check(plain_fn, lambda: [_two(3, 4), _two(3, 4)], entry)


@pytest.mark.parametrize("entry", ENTRIES)
def test_nested_two_tensor(entry: str) -> None:
    def make() -> list[Any]:
        x = TwoTensor(_two(2, 3, grad=False), _two(2, 3, grad=False)).requires_grad_()
        y = TwoTensor(_two(2, 3, grad=False), _two(2, 3, grad=False))
        return [x, y]

    _check(lambda x, y: (x * y).tanh().mm(x.t()), make, entry)


@pytest.mark.parametrize("entry", ENTRIES)
def test_non_contiguous_two_tensor_views(entry: str) -> None:
    def make() -> list[Any]:
        base = _two(4, 6)
        return [base, base.detach()[:, ::2]]

    _check(lambda b, v: (b.t().cos() * 3).sum(0) + v.exp().t().sum(0).repeat(2)[:4], make, entry)


@pytest.mark.parametrize("entry", ENTRIES)
def test_two_tensor_written_in_place(entry: str) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return x + y

    _check(fn, lambda: [_two(3, grad=False), _two(3)], entry)


@pytest.mark.parametrize("entry", ENTRIES)
def test_non_contiguous_two_tensor_view_written_in_place(entry: str) -> None:
    base = _two(4, 6, grad=False)
    ref = base.clone()

    def fn(v: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        v.add_(1)
        return (v * y).sum()

    y = _two(4, 3)
    fn(ref[:, ::2], y)
    out = _compiled(fn, entry)(base[:, ::2], y.detach().requires_grad_())
    _assert_same(base, ref)
    assert type(out) is TwoTensor


@pytest.mark.parametrize("entry", ENTRIES)
def test_two_tensor_mixed_with_another_subclass(entry: str) -> None:
    def make() -> list[Any]:
        w = WrapperSubclass(torch.randn(3, 4)).requires_grad_()
        return [_two(3, 4), w]

    _check(lambda x, w: (x.sin() * 2, (w * 3).exp().sum(1)), make, entry)


class _Linear(torch.nn.Module):
    def __init__(self, nested: bool) -> None:
        super().__init__()
        if nested:
            w = TwoTensor(
                TwoTensor(torch.randn(4, 5), torch.randn(4, 5)),
                TwoTensor(torch.randn(4, 5), torch.randn(4, 5)),
            )
            b = TwoTensor(
                TwoTensor(torch.randn(4), torch.randn(4)), TwoTensor(torch.randn(4), torch.randn(4))
            )
        else:
            w = TwoTensor(torch.randn(4, 5), torch.randn(4, 5))
            b = TwoTensor(torch.randn(4), torch.randn(4))
        self.weight = torch.nn.Parameter(w)
        self.bias = torch.nn.Parameter(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.linear(x, self.weight, self.bias).relu()


@pytest.mark.parametrize("nested", [False, True])
@pytest.mark.parametrize("entry", ["aot_module", "aotgrad_eager", "aotgrad"])
def test_two_tensor_parameters(entry: str, nested: bool) -> None:
    torch.manual_seed(0)
    eager = _Linear(nested)
    model = copy.deepcopy(eager)
    x = TwoTensor(torch.randn(3, 5), torch.randn(3, 5))
    if nested:
        x = TwoTensor(x, TwoTensor(torch.randn(3, 5), torch.randn(3, 5)))
    torch._dynamo.reset()
    if entry == "aot_module":
        compiled = aotgrad.aot_module(model, aotgrad.nop)
    else:
        compiled = torch.compile(model, backend=entry, fullgraph=True, options={"strict": True})
    for _ in range(2):
        want, got = eager(x), compiled(x)
        _assert_same(got, want)
        want.sum().backward()
        got.sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
        assert type(p.grad) is type(q.grad), name
        _assert_same(p.grad, q.grad)
    if entry == "aot_module":
        assert len(compiled._compiled.subclass_children) == 1


def test_layout_change_recompiles_and_key_names_subclass() -> None:
    f = aotgrad.aot_function(lambda x: x * 2, aotgrad.nop)
    x = _two(3, grad=False)
    _assert_same(f(x), x * 2)
    f(TwoTensor(_two(3, grad=False), _two(3, grad=False)))
    f(_two(4, grad=False))
    keys = list(f.subclass_children)
    assert len(keys) == 3
    assert all(k[0][0][0] is TwoTensor for k in keys)


def test_plain_input_with_subclass_gradient_is_refused() -> None:
    f = aotgrad.aot_function(lambda x, w: x * w, aotgrad.nop)
    with pytest.raises(UnsupportedError, match="TwoTensor"):
        f(_two(3, grad=False), torch.randn(3, requires_grad=True))


def _made_inside(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    inner = TwoTensor(x, x * 2)
    return (inner * inner).mm(inner.t()), x.sin()


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager"])
def test_subclass_made_inside_from_plain_arguments(entry: str) -> None:
    """A TwoTensor built inside from plain arguments and returned: eager's values and
    gradients (the traced output held the trace's own tensors; its backward raised)."""
    runs = []
    for f in (_made_inside, _compiled(_made_inside, entry)):
        torch.manual_seed(0)
        x = torch.randn(3, 3, requires_grad=True)
        out, other = f(x)
        (out.sum() + other.sum()).backward()
        runs.append((type(out), out.requires_grad, out.a.detach(), out.b.detach(), x.grad))
    (t1, r1, a1, b1, g1), (t2, r2, a2, b2, g2) = runs
    assert (t2, r2) == (t1, r1)
    torch.testing.assert_close(a2, a1)
    torch.testing.assert_close(b2, b1)
    _assert_same(g2, g1)
