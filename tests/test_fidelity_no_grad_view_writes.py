"""A view input written under ``no_grad`` inside the function, then read again.

Eager's write without grad leaves the base's node alone but moves the view's version:
autograd rebuilds the view's node from its base's on the next read, so the reads after
the write reach a node the view did not have when called, which the caller's view has
after the call: ``torch.autograd.grad(out, x)``, ``x.retain_grad()`` and hooks
registered on ``x`` after the call see those reads' gradient (the reads before the write
reach the old node). The trace runs such an input as a view of its copy, whose node is
rebuilt alike, and the runtime links the outputs to the caller's view's new node
(``trace.post_write_reads``, ``runtime.post_write_link``).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from eager_oracle import COMPILERS, VIEW_INPUTS, assert_same_observations

D = torch.float64


def _write_then_read(x, y):
    with torch.no_grad():
        x.add_(1)
    return x * y


def _read_write_read(x, y):
    a = x * 2
    with torch.no_grad():
        x.mul_(0.5)
    return a * x + y


def _sub_view_write(x, y):
    with torch.no_grad():
        x[0].zero_()
    return (x.exp() * y).sum()


def _written_twice(x, y):
    with torch.no_grad():
        x.add_(1)
    b = x * 3
    with torch.no_grad():
        x.mul_(2)
    return b + x * y


def _returned_too(x, y):
    with torch.no_grad():
        x.clamp_(-0.5, 0.5)
    return x * y, x


def _not_read_after(x, y):
    a = x + y
    with torch.no_grad():
        x.add_(1)
    return a


PROGRAMS = [
    _write_then_read,
    _read_write_read,
    _sub_view_write,
    _written_twice,
    _returned_too,
    _not_read_after,
]


SETUPS = VIEW_INPUTS
HOW = ["autograd_grad", "retain_grad", "hook", "backward", "backward_inputs"]


def _seen(fn, setup, how):
    torch.manual_seed(0)
    leaf, x = setup()
    y = torch.randn(2, 3, dtype=D, requires_grad=True)
    outs = fn(x, y)
    outs = outs if isinstance(outs, tuple) else (outs,)
    loss = sum((o * (torch.arange(o.numel(), dtype=D).reshape(o.shape) + 1)).sum() for o in outs)
    seen = []
    if how == "autograd_grad":
        return list(torch.autograd.grad(loss, [x, leaf, y], allow_unused=True))
    if how == "retain_grad":
        x.retain_grad()
    if how == "hook":
        x.register_hook(lambda g: seen.append(g.detach().clone()))
    if how == "backward_inputs":
        loss.backward(inputs=[x, leaf])
    else:
        loss.backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (.grad of a non-leaf)
        return [x.grad, leaf.grad, y.grad, len(seen), *seen]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_view_written_without_grad_then_read(fn, setup, how, compiler):
    want = _seen(fn, SETUPS[setup], how)
    got = _seen(COMPILERS[compiler](fn), SETUPS[setup], how)
    assert_same_observations(got, want)


# ------------- views of a written view input taken before the write (blind helper, round 52)


def _view_before_write(x, y):
    v = x[0]
    x.add_(1)
    return v, x * y


def _transposed_before_write(x, y):
    v = x.t()
    x.mul_(y)
    return v, x.sum()


def _view_before_no_grad_write(x, y):
    v = x[1]
    with torch.no_grad():
        x.add_(1)
    return v, x * y


def _view_after_write(x, y):  # (the control: through the input's new node)
    x.add_(1)
    return x[0], x * y


VIEW_PROGRAMS = [
    _view_before_write,
    _transposed_before_write,
    _view_before_no_grad_write,
    _view_after_write,
]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("fn", VIEW_PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_output_view_taken_before_the_write(fn, how, compiler):
    """Eager rebuilds the node of a view taken before the write from the base's, past
    the input's new node: ``autograd.grad(v, x)`` after the call does not see it."""
    want = _seen(fn, SETUPS["slice"], how)
    got = _seen(COMPILERS[compiler](fn), SETUPS["slice"], how)
    assert_same_observations(got, want)


def _saved_after_no_grad_write(x, w):
    with torch.no_grad():
        x[:, 1:2].mul_(2)
    return x @ w  # (saves x at the version the call leaves it)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_saved_view_input_written_by_the_caller_after_the_call(compiler):
    """Eager saves the view as the call leaves it: the caller's write after the call
    makes its backward raise. The trace's view of the input's copy is the input too
    (soak 200989, 201915: the compiled backward did not raise)."""

    def seen(f):
        torch.manual_seed(0)
        leaf, x = VIEW_INPUTS["transposed"]()
        out = f(x, torch.randn(3, 2, dtype=D, requires_grad=True))
        with torch.no_grad():
            x.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
        return leaf.grad

    assert seen(_saved_after_no_grad_write) is None
    assert seen(COMPILERS[compiler](_saved_after_no_grad_write)) is None
