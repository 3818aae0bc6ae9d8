"""``torch.inference_mode()`` blocks inside the compiled function that view a tensor made
outside the block (an input, an intermediate): eager's view is a normal tensor that
requires grad where its base does, with no history. Traced on functional tensors, every
such view op raised "Cannot set version_counter for inference tensor" (a plain
RuntimeError) where eager runs; torch's AOT Autograd raises the same. Also: a stale
no_grad view of ``x.detach().requires_grad_()`` returned after the leaf's bytes were
written (soak 31162) lost its ``requires_grad``."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable

import pytest
import torch

from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, Half, SavedSquare, ViewOf, assert_like_eager, leaves

ENTRIES = list(COMPILERS)
MODES = {
    "grad": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "inference_mode": torch.inference_mode,
}


def _view_then_compute(x):
    with torch.inference_mode():
        y = x[2:] * 2
    return y, x * 3


def _view_used_outside(x):
    with torch.inference_mode():
        y = x.t()
    return y.sum(), y * 2


def _write_through_view_of_intermediate(x):
    y = x * 1
    with torch.inference_mode():
        y[2:].mul_(2)
    return y


def _write_through_view_of_input(x):
    with torch.inference_mode():
        x[1:3].add_(1)
    return x * 2


def _several_views(x):
    with torch.inference_mode():
        a, b = x.chunk(2, 0)
        c = x.unsqueeze(0).expand(2, 4, 4)
        s = a + b + c.sum(0)
    return s, x.sin()


def _view_of_detached_leaf(x):
    t = x.detach().requires_grad_()
    with torch.inference_mode():
        v = t[1:]
        w = v * 2
    return w, t * x


FAMILY = [
    _view_then_compute,
    _view_used_outside,
    _write_through_view_of_intermediate,
    _write_through_view_of_input,
    _several_views,
    _view_of_detached_leaf,
]


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("requires_grad", [True, False])
@pytest.mark.parametrize("fn", FAMILY, ids=lambda f: f.__name__.strip("_"))
def test_views_inside_an_inference_mode_block(
    fn: Callable, requires_grad: bool, mode: str, compiler: str
) -> None:
    make = leaves(((4, 4), requires_grad))
    if fn is _write_through_view_of_input and requires_grad:
        # a leaf that requires grad: eager writes it (autograd checks nothing there)
        def make():
            x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
            return [x.clone()], [x]

    assert_like_eager(fn, make, COMPILERS[compiler], ctx=MODES[mode], calls=2)


def _stale_view_of_detached_leaf(x):
    t = x.detach().requires_grad_()
    m0 = t[0:2]
    with torch.no_grad():
        t[2:].mul_(2)
    return m0


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_a_stale_view_of_a_detached_leaf_requires_grad(mode: str, compiler: str) -> None:
    assert_like_eager(
        _stale_view_of_detached_leaf, leaves(((4, 4), False)), COMPILERS[compiler], ctx=MODES[mode]
    )


# Called under inference mode, a function with its own enable_grad block: autograd records
# nothing there. Through torch.compile the graph (traced by Dynamo under no_grad) raised
# "Inference tensors cannot be saved for backward" (soak 70090), or returned outputs that
# require grad (soak 70920; blind: ``with enable_grad: return x * 2``).


def _enable_grad_block(x, w):
    with torch.enable_grad():
        t = x.abs() * w
    return t.unsqueeze(0), t.mT, (t * 2).sum()


def _write_in_an_enable_grad_block(x, w):
    with torch.enable_grad():
        w.diagonal().add_(1)
        t = w.abs()
    return t.unsqueeze(0), t.mT


def _view_in_nested_blocks(x, w):
    with torch.no_grad(), torch.enable_grad():
        v = x[0]
    return v, x.cumsum(0)


def _saves_in_an_enable_grad_block(x, w):
    t = x.mean()
    with torch.enable_grad():
        u = torch.where(x > 0, x, w)  # saves its mask
        t.sub_(x.sum())
    return u, x


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize(
    "fn",
    [
        _enable_grad_block,
        _write_in_an_enable_grad_block,
        _view_in_nested_blocks,
        _saves_in_an_enable_grad_block,
    ],
)
def test_enable_grad_block_called_under_inference_mode(fn: Callable, compiler: str) -> None:
    def make():
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        return [x, torch.randn(4, 4, dtype=torch.float64)], [x]

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, ctx=torch.inference_mode)


# ---------------- a custom Function in an enable_grad block of a call under inference mode
# Inference mode records nothing, except a custom Function applied with grad enabled to a
# tensor that requires grad: eager's output has its backward (soak 117037: ours had no
# gradient for the input). The call runs eagerly, with a warning.


def _custom_function_in_enable_grad(x0):
    with torch.enable_grad():
        t = ViewOf.apply(Half.apply(x0))
    return t, t[1:3], x0 * 2


def _custom_function_under_no_grad_stays_unrecorded(x0):
    return Half.apply(x0) * 2, ViewOf.apply(x0)


def _custom_function_computing_an_inference_tensor(x0):
    with torch.enable_grad():  # its output is an inference tensor: nothing records on it
        t = SavedSquare.apply(x0)
    return t.as_strided((2, 2), (1, 2)), t * 2


@pytest.mark.parametrize("compiler", ENTRIES)
def test_a_custom_function_records_under_inference_mode_with_grad_on(compiler: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerReplayWarning)
        assert_like_eager(
            _custom_function_in_enable_grad,
            leaves(((4, 4), True)),
            COMPILERS[compiler],
            ctx=torch.inference_mode,
        )


@pytest.mark.parametrize("compiler", [c for c in ENTRIES if c.startswith("aot_function")])
@pytest.mark.parametrize(
    "fn",
    [
        _custom_function_under_no_grad_stays_unrecorded,
        _custom_function_computing_an_inference_tensor,
    ],
)
def test_where_nothing_records_the_call_stays_compiled(fn: Callable, compiler: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        assert_like_eager(
            fn,
            leaves(((4, 4), True)),
            COMPILERS[compiler],
            ctx=torch.inference_mode,
        )
