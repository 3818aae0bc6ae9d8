"""Soak finds where the autograd and aliasing metadata of outputs and inputs differed from
eager's without a word (values right): an output's ``._base`` (another output, an alias
not returned, the caller's tensor), ``requires_grad`` / ``is_leaf`` / ``grad_fn`` of an
output or of an input's base after the call. Each compared with eager
(``eager_oracle.assert_like_eager``); the seeds are the soak's, replayable with
``tests/fidelity_programs.py SEED ENTRY``.

- stale views (made under no_grad, their base written after) of a detached alias: of one
  returned (113371), of one not returned (117564);
- views of an input Dynamo passes beside a detached alias of it across a graph break (a
  synthetic base's detached member: 71723);
- a leaf view its base's write moved into the graph's interior, then written by a custom
  Function (110555);
- a custom Function applied with grad enabled under inference mode to a tensor that
  requires grad (70484).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
import torch

from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, DirtyMul, SavedSquare, assert_like_eager, leaves

_AOT = [name for name in COMPILERS if name.startswith("aot_function")]


def _leaf_4x4() -> Any:
    return leaves(((4, 4), True))


# ------------------------------------- stale views of a detached alias (113371, 117564)


def _stale_view_of_a_returned_detach(x0):
    t1 = x0.detach().requires_grad_()
    t2 = t1.as_strided((2, 2), (1, 2))
    t1.diagonal().add_(1)
    return t1, t2


def _stale_transpose_of_a_returned_detach(x0):
    t1 = x0.detach().requires_grad_()
    t2 = t1.t()
    t1.add_(1)
    return t1, x0, t2


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize(
    "fn", [_stale_view_of_a_returned_detach, _stale_transpose_of_a_returned_detach]
)
def test_stale_view_of_a_returned_detached_alias(fn: Any, ctx: Any, compiler: str) -> None:
    """Soak seed 113371: ``t1 = x0.detach().requires_grad_()``, a view of it taken without
    grad, then ``t1`` written: the view is stale and its ``._base`` is ``t1``, an output.
    It was made early of the input ``x0`` (its ``._base``), as a stale view of an input
    is, ignoring that eager's base is the other output."""
    assert_like_eager(fn, _leaf_4x4(), COMPILERS[compiler], ctx=ctx, calls=2)


def _stale_view_of_a_detach_not_returned(x2):
    t1 = x2.detach().requires_grad_()
    t3 = t1.diagonal()
    x2.unsqueeze_(0)
    return (t3,)


def _stale_view_of_a_detach_beside_its_input(x2):
    t1 = x2.detach().requires_grad_()
    t3 = t1.diagonal()
    x2.unsqueeze_(0)
    return t3, x2


@pytest.mark.parametrize("compiler", _AOT)  # (Dynamo's own fakes raise reading it)
@pytest.mark.parametrize("ctx", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize(
    "fn", [_stale_view_of_a_detach_not_returned, _stale_view_of_a_detach_beside_its_input]
)
def test_stale_view_of_a_detached_alias_not_returned(fn: Any, ctx: Any, compiler: str) -> None:
    """Soak seed 117564: a view taken without grad of ``x2.detach().requires_grad_()``,
    made stale by a change of ``x2`` (one version counter): eager's ``._base`` is that
    detached alias, which the function does not return; it was made a view of ``x2``.
    (torch.compile with any backend raises reading the stale view's ``is_leaf`` as it
    fakes the function's locals: Dynamo's, not aotgrad's.)"""
    assert_like_eager(fn, _leaf_4x4(), COMPILERS[compiler], ctx=ctx, calls=2)


# ------------------------------- views of a synthetic base's detached member (71723)


def _views_of_an_input_beside_its_detach(x, t):
    x[1:3].relu_()
    return t.narrow(-1, 1, 2), x[0], x.squeeze()


def _transpose_of_a_written_input_beside_its_detach(x, t):
    x.mul_(2)
    return t * 2, x.t()


def _input_and_its_detach() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn(4, 4, dtype=torch.float64)
    t = x.detach().requires_grad_()
    return [x, t], [t]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [contextlib.nullcontext, torch.no_grad])
@pytest.mark.parametrize(
    "fn", [_views_of_an_input_beside_its_detach, _transpose_of_a_written_input_beside_its_detach]
)
def test_views_of_an_input_passed_beside_its_detached_alias(
    fn: Any, ctx: Any, compiler: str
) -> None:
    """Inputs ``x`` and ``x.detach().requires_grad_()``, ``x`` written: a synthetic base,
    the one that requires grad, with ``x`` rebuilt inside as a detached alias of it. A view
    of ``x`` the function returned was made of a detached alias of the base; eager's
    ``._base`` is the caller's ``x``."""
    assert_like_eager(fn, _input_and_its_detach, COMPILERS[compiler], ctx=ctx, calls=2)


def _views_of_an_input_across_a_graph_break(x0):
    t1 = x0.detach().requires_grad_()  # (Dynamo breaks the graph at requires_grad_)
    x0[1:3].relu_()
    return t1.narrow(-1, 1, 2), x0.squeeze(), x0[0]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_an_input_across_a_graph_break(compiler: str) -> None:
    """Soak seed 71723: Dynamo passes ``x0`` and its detached alias to the graph after the
    break, which writes ``x0``: its views came back with a base of aotgrad's own."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.empty_strided((4, 4), (1, 4), dtype=torch.float64).copy_(torch.randn(4, 4))
        return [x], []

    assert_like_eager(_views_of_an_input_across_a_graph_break, make, COMPILERS[compiler], calls=2)


# ------------------------ a leaf view moved into the interior, then made dirty (110555)


def _dirty_leaf_view_after_its_base_written(x1, x2):
    x1 += x2.clone()
    DirtyMul.apply(x2)
    return (torch.ones(1),)


def _dirty_leaf_view_after_a_hidden_write(x1, x2):
    x1 += x2.clone()
    with torch.no_grad():
        x1.t().copy_(x2.clone())
    DirtyMul.apply(x2)
    return (x1.detach().sum(),)


def _column_views_one_a_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    b1 = torch.randn(4, 8, dtype=torch.float64)
    x1, x2 = b1[:, :4], b1[:, 4:]
    x2.requires_grad_()  # a view made a leaf
    return [x1, x2], [x2]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_dirty_leaf_view_after_its_base_written, _dirty_leaf_view_after_a_hidden_write]
)
def test_leaf_view_moved_into_the_interior_then_made_dirty(fn: Any, compiler: str) -> None:
    """Soak seed 110555: ``x1 += x2.clone()`` (``x2`` a leaf view of ``x1``'s base) gives
    the base a history and moves ``x2`` into the graph's interior; ``DirtyMul.apply(x2)``
    then resets the variable of its old accumulator, so the trace no longer saw that the
    base's new value is computed from it: the caller's base, ``x1`` and ``x2`` were left
    without a history. (Eager's own backward aborts there: none is run.)"""
    assert_like_eager(fn, _column_views_one_a_leaf, COMPILERS[compiler], calls=2)


# ---------------- a custom Function with grad enabled under inference mode (70484)


def _custom_function_in_enable_grad(x):
    with torch.enable_grad():
        t = SavedSquare.apply(x)
    return t, t


def _custom_function_of_a_view_in_enable_grad(x):
    with torch.enable_grad():
        u = SavedSquare.apply(x[0])
    return u, x * 3


def _custom_function_of_a_detach_in_enable_grad(x):
    t = x.detach().requires_grad_()
    with torch.enable_grad():
        u = SavedSquare.apply(t)
    return (u,)


def _custom_function_of_a_computed_tensor_in_enable_grad(x):
    with torch.enable_grad():
        u = SavedSquare.apply(x * 2)  # (``x * 2`` records nothing: nor does the Function)
    return (u,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _custom_function_in_enable_grad,
        _custom_function_of_a_view_in_enable_grad,
        _custom_function_of_a_detach_in_enable_grad,
    ],
)
def test_custom_function_with_grad_under_inference_mode(fn: Any, compiler: str) -> None:
    """Soak seed 70484: under inference mode, ``SavedSquare.apply(x)`` in an
    ``enable_grad`` block, ``x`` requiring grad: no op of torch's records there, but the
    Function's ``apply`` gives its output (an inference tensor) its backward node. The
    inference graph returned it without one; the call runs eagerly, with a warning (as
    for a Function's output that is a normal tensor: ``test_fidelity_inference_blocks``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerReplayWarning)
        assert_like_eager(fn, _leaf_4x4(), COMPILERS[compiler], ctx=torch.inference_mode, calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_custom_function_of_an_inference_tensor_stays_compiled(compiler: str) -> None:
    """The Function applied to a tensor computed under inference mode (which requires no
    grad in eager, whatever the trace's enable_grad block recorded) records nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        assert_like_eager(
            _custom_function_of_a_computed_tensor_in_enable_grad,
            _leaf_4x4(),
            COMPILERS[compiler],
            ctx=torch.inference_mode,
            calls=2,
        )


# ------------- a view of an intermediate taken before requires_grad_() made it a leaf


def _view_before_the_output_became_a_leaf(x0):
    with torch.enable_grad():
        t1 = x0 @ x0
        t2 = t1[1:3]
    t1.requires_grad_()
    return (t1, t2)


def _view_before_and_after(x0):
    t1 = x0.exp()
    t2 = t1.t()
    t1.requires_grad_()
    return (t2, t1, t1[0])


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_view_before_the_output_became_a_leaf, _view_before_and_after])
def test_view_taken_before_its_output_base_became_a_leaf(fn: Any, compiler: str) -> None:
    """Eager's view taken before ``requires_grad_()`` made its base (an output) a leaf is
    a leaf itself, requiring grad through its base, with no node: its gradient stays its
    own. It was rebuilt of the leaf, with a node sending its gradient into the base's
    (soak 111568; a view taken after stays a view with a node)."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        return [torch.randn(4, 4, dtype=torch.float64)], []

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)
