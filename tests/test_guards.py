"""A compiled function never returns a stale answer: each assumption changes between calls."""

from __future__ import annotations

import pytest
import torch

import aotgrad
from aotgrad.errors import GuardError


def _compiled_variants(fn):
    """The same flat function through aot_function and aot_module_simplified."""

    class Wrap(torch.nn.Module):
        def forward(self, *args):
            return (fn(*args),)

    return {
        "aot_function": lambda *a: aotgrad.aot_function(fn, aotgrad.nop)(*a),
        "aot_module_simplified": lambda *a: aotgrad.aot_module_simplified(
            Wrap(), list(a), aotgrad.nop
        )(*a)[0],
    }


def _fresh(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(x.requires_grad)


def _compare(compiled, fn, *args):
    got_args = [_fresh(a) if isinstance(a, torch.Tensor) else a for a in args]
    ref_args = [_fresh(a) if isinstance(a, torch.Tensor) else a for a in args]
    got, ref = compiled(*got_args), fn(*ref_args)
    torch.testing.assert_close(got, ref)
    assert got.requires_grad == ref.requires_grad
    if ref.requires_grad:
        got.sum().backward()
        ref.sum().backward()
        for g, r in zip(got_args, ref_args):
            if isinstance(r, torch.Tensor) and r.requires_grad:
                torch.testing.assert_close(g.grad, r.grad)


def fn_scalar(x, w, k):
    return (x @ w).sin() * k


@pytest.mark.parametrize("entry", ["aot_function", "aot_module_simplified"])
def test_grad_mode_change(entry):
    x, w = torch.randn(3, 4), torch.randn(4, 4, requires_grad=True)
    fn = lambda x, w: (x @ w).sin()  # noqa: E731
    if entry == "aot_function":
        c = aotgrad.aot_function(fn, aotgrad.nop)
    else:

        class M(torch.nn.Module):
            def forward(self, x, w):
                return (fn(x, w),)

        inner = aotgrad.aot_module_simplified(M(), [x, w], aotgrad.nop)
        c = lambda x, w: inner(x, w)[0]  # noqa: E731
    _compare(c, fn, x, w)
    with torch.no_grad():
        out = c(x, w)
        assert not out.requires_grad  # eager's rule under no_grad
        torch.testing.assert_close(out, fn(x, w))
    with torch.inference_mode():
        out = c(x, w)
        assert not out.requires_grad
        torch.testing.assert_close(out, fn(x, w))
    _compare(c, fn, x, w)


def test_requires_grad_change():
    c = aotgrad.aot_function(lambda x, w: (x * w).exp(), aotgrad.nop)
    fn = lambda x, w: (x * w).exp()  # noqa: E731
    x, w = torch.randn(5), torch.randn(5)
    _compare(c, fn, x, w)  # nothing requires grad: inference graph
    _compare(c, fn, x, w.requires_grad_())  # now w does: a training graph
    _compare(c, fn, x.requires_grad_(), w)  # and x too
    assert len(c.cache) == 3


def test_dtype_shape_device_and_stride_changes():
    fn = lambda x: (x.t() @ x).tanh()  # noqa: E731
    c = aotgrad.aot_function(fn, aotgrad.nop)
    base = torch.randn(4, 3, requires_grad=True)
    _compare(c, fn, base)
    _compare(c, fn, torch.randn(6, 2, requires_grad=True))  # shape
    _compare(c, fn, torch.randn(4, 3, dtype=torch.float64, requires_grad=True))  # dtype
    _compare(c, fn, torch.randn(3, 4).t().requires_grad_())  # strides
    assert len(c.cache) == 4


@pytest.mark.parametrize("entry", ["aot_function", "aot_module_simplified"])
def test_python_scalar_value_change(entry):
    x, w = torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)
    variants = _compiled_variants(fn_scalar)
    if entry == "aot_function":
        c = aotgrad.aot_function(fn_scalar, aotgrad.nop)
        _compare(c, fn_scalar, x, w, 2.0)
        _compare(c, fn_scalar, x, w, -3.0)
        assert len(c.cache) == 2
    else:
        for k in (2.0, -3.0):
            _compare(lambda *a: variants[entry](*a), fn_scalar, x, w, k)


def test_aliasing_change_with_mutation():
    def fn(a, b):
        a.mul_(2)
        return a + b

    c = aotgrad.aot_function(fn, aotgrad.nop)
    x, y = torch.ones(3), torch.ones(3)
    out = c(x, y)
    torch.testing.assert_close(out, torch.full((3,), 3.0))
    # Now both arguments are one tensor: eager gives 2 + 2 = 4 and leaves it at 2.
    z, z_ref = torch.ones(3), torch.ones(3)
    ref = fn(z_ref, z_ref)
    got = c(z, z)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(z, z_ref)


def test_module_training_flag_and_parameters():
    torch.manual_seed(0)
    mod = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    ref = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    ref.load_state_dict(mod.state_dict())
    c = aotgrad.aot_module(mod, aotgrad.nop)
    x = torch.randn(8, 4)
    torch.testing.assert_close(c(x), ref(x))
    mod.eval()
    ref.eval()
    out = c(x)  # eval uses the running stats: a different graph
    torch.testing.assert_close(out, ref(x))
    with torch.no_grad():  # replacing a parameter's values is seen on the next call
        mod[0].weight.mul_(2)
        ref[0].weight.mul_(2)
    torch.testing.assert_close(c(x), ref(x))
    mod[0].weight = torch.nn.Parameter(torch.randn(4, 4))  # a new parameter object
    ref[0].weight = torch.nn.Parameter(mod[0].weight.detach().clone())
    torch.testing.assert_close(c(x), ref(x))


def test_recompile_limit_names_the_changing_assumption():
    c = aotgrad.aot_function(lambda x, k: x * k, aotgrad.nop, recompile_limit=3)
    x = torch.randn(2)
    for k in range(3):
        c(x, k)
    with pytest.raises(GuardError, match=r"input 1: non-tensor argument value 2 -> 3"):
        c(x, 3)


def test_overlapping_views_with_mutation_refuse_instead_of_wrong_answer():
    from aotgrad.errors import UnsupportedError

    def fn(a, b):
        a.add_(1)
        return a * b

    c = aotgrad.aot_function(fn, aotgrad.nop)
    base = torch.zeros(4)
    c(torch.zeros(2), torch.zeros(2))
    with pytest.raises(UnsupportedError, match="shares storage"):
        c(base[:2], base[1:3])
    # Same storage, but nothing is mutated: the functional graph is right as it is.
    g = aotgrad.aot_function(lambda a, b: a * b, aotgrad.nop)
    torch.testing.assert_close(g(base[:2], base[1:3]), base[:2] * base[1:3])
