"""A view input the caller hooked before the call, written by the function with autograd.

Eager's write to a view gives its base a ``CopySlices`` node that hands the gradient
of the write's history to the base's node directly: the view's node from before the
call runs only for the function's reads of the view before the write, and the hooks
the caller registered on the view then (tensor hooks live on that node) see those
reads' gradient only, or never run. The compiled Function's edge for the input is that
node, so its hooks would see (and a hook that returns a new gradient would change)
the whole gradient. The runtime passes a fresh view of the base for such an input
where no read before the write reaches an output, and runs the call eagerly, with a
warning, where one does (``runtime.call_inputs.unhooked_views``).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, VIEW_INPUTS

D = torch.float64


def _write_only(x, y):
    x.mul_(2)
    return x * y


def _two_writes(x, y):
    x.add_(y)
    x.mul_(3)
    return x.sin(), x.sum()


def _copy_in(x, y):
    x.copy_(y * 2)
    return x.exp()


def _sub_view_write(x, y):
    x[0].mul_(2)
    return x * y


def _returns_it(x, y):
    x.mul_(y)
    return x


def _read_before(x, y):
    y2 = x * 3
    x.mul_(2)
    return x * y2


def _read_by_the_write(x, y):
    x.mul_(x * 3)
    return x * y


def _self_read(x, y):
    x.add_(x)  # (the write's node reads it as its operand too)
    return x * y


def _read_unused(x, y):
    (x * 3).sum()  # (reaches no output: nothing of it comes back)
    x.mul_(2)
    return x * y


def _no_grad_write(x, y):
    with torch.no_grad():
        x.mul_(2)
    return x * y


def _no_grad_write_read_before(x, y):
    a = x * 3
    with torch.no_grad():
        x.mul_(2)
    return a * y + x


FRESH = [
    _write_only,
    _two_writes,
    _copy_in,
    _sub_view_write,
    _returns_it,
    _read_unused,
    _no_grad_write,
]
READ_BEFORE = [_read_before, _read_by_the_write, _self_read, _no_grad_write_read_before]


SETUPS = {k: VIEW_INPUTS[k] for k in ("slice", "transposed", "view_of_view")}


def _run(fn, setup, observer):
    torch.manual_seed(0)
    leaf, x = setup()
    y = torch.randn(2, 3, dtype=D, requires_grad=True)
    seen = []
    if observer in ("doubling", "doubling_retained"):
        x.register_hook(lambda g: (seen.append(g.detach().clone()), g * 2)[1])
    else:
        x.register_hook(lambda g: seen.append(g.detach().clone()))
    if observer == "doubling_retained":
        x.retain_grad()
    out = fn(x, y)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum((o * (torch.arange(o.numel(), dtype=D).reshape(o.shape) + 1)).sum() for o in outs)
    (loss + (x * 0.5).sum()).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (.grad of a non-leaf)
        kept = x.grad if observer == "doubling_retained" else None
    return [leaf.grad, y.grad, kept, *seen], len(seen)


def _compare(fn, setup, observer, compiler, replays):
    want, runs = _run(fn, setup, observer)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, got_runs = _run(COMPILERS[compiler](fn), setup, observer)
    assert got_runs == runs, f"the hook ran {got_runs} times, eager's {runs}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g is None) == (w is None), f"result {k}: eager {w}, compiled {g}"
        if w is not None:
            torch.testing.assert_close(g, w, msg=f"result {k}")
    ran_eagerly = any(issubclass(c.category, EagerReplayWarning) for c in caught)
    if compiler.startswith("aot_function"):  # (Dynamo's replay runs its graph quietly)
        assert ran_eagerly == replays


OBSERVERS = ["recording", "doubling", "doubling_retained"]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("observer", OBSERVERS)
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("fn", FRESH, ids=lambda f: f.__name__.strip("_"))
def test_written_view_hooked_before_the_call(fn, setup, observer, compiler):
    """No read before the write reaches an output: eager never runs the hooks; the
    call runs compiled, the Function given a fresh view of the base."""
    _compare(fn, SETUPS[setup], observer, compiler, replays=False)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("observer", OBSERVERS)
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("fn", READ_BEFORE, ids=lambda f: f.__name__.strip("_"))
def test_written_view_hooked_and_read_before_its_write(fn, setup, observer, compiler):
    """Eager's hooks see the reads before the write only: the call runs eagerly."""
    _compare(fn, SETUPS[setup], observer, compiler, replays=True)


def test_unhooked_view_runs_compiled_and_its_base_gets_the_whole_gradient():
    """Without hooks nothing changes: the Function's edge is the view's node."""
    torch.manual_seed(0)
    b = torch.randn(4, 3, dtype=D, requires_grad=True)
    x = (b * 1)[1:3]
    y = torch.randn(2, 3, dtype=D, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        out = aotgrad.aot_function(_read_before, aotgrad.nop)(x, y)
    out.sum().backward()
    want = torch.zeros(4, 3, dtype=D)
    want[1:3] = 12 * b.detach()[1:3]  # d/dx of (2x)(3x)
    torch.testing.assert_close(b.grad, want)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_returns_it, _write_only], ids=lambda f: f.__name__.strip("_"))
def test_written_view_retained_before_the_call_with_its_base_used_after(fn, compiler):
    """Eager's ``.grad`` of a view retained before the call is what reaches the node its
    write gives it: the caller's later use of the base is not part of it (a blind
    helper's find, round 52: the compiled call took the whole new value's gradient)."""

    def seen(f):
        leaf = torch.ones(4, 3, dtype=D, requires_grad=True)
        base = leaf * 1
        x = base[1:3]
        x.retain_grad()
        out = f(x, torch.full((2, 3), 2.0, dtype=D, requires_grad=True))
        (out.sum() + 10 * base.sum()).backward()
        return [x.grad, leaf.grad]

    want = seen(fn)
    got = seen(COMPILERS[compiler](fn))
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _sibling_written(p, q):
    q.mul_(p.sum())
    return p, q


def _base_written_view_read(p, q):
    y = q * 2
    p.mul_(3)
    return y, q


def _overlapping():
    b = torch.randn(4, 3, dtype=D, requires_grad=True)
    base = b * 1
    return b, base[0:3], base[1:4]


def _base_and_view():
    b = torch.randn(4, 3, dtype=D, requires_grad=True)
    base = b * 1
    return b, base, base[1:3]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("hooked", [0, 1])
@pytest.mark.parametrize(
    "fn,setup",
    [(_sibling_written, _overlapping), (_base_written_view_read, _base_and_view)],
    ids=["sibling_written", "base_written"],
)
def test_overlapping_input_hooked_before_the_call(fn, setup, hooked, compiler):
    """Inputs passed as views of one base, one written (a synthetic base), one hooked
    before the call: eager runs the hook for the function's reads of it before the
    write, on a node the compiled Function (given the base) never reaches; the call
    runs eagerly (a blind helper's find, round 52)."""

    def seen(f):
        torch.manual_seed(0)
        leaf, p, q = setup()
        calls = []
        (p, q)[hooked].register_hook(lambda g: (calls.append(g.detach().clone()), g * 2)[1])
        outs = f(p, q)
        sum((o * (k + 1)).sum() for k, o in enumerate(outs)).backward()
        return [leaf.grad, len(calls), *calls]

    want = seen(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerReplayWarning)
        got = seen(COMPILERS[compiler](fn))
    assert got[1] == want[1], f"the hook ran {got[1]} times, eager's {want[1]}"
    for g, w in zip(got[:1] + got[2:], want[:1] + want[2:], strict=True):
        torch.testing.assert_close(g, w)
