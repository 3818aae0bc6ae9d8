"""Soak finds about the views a function returns, each compared with eager
(``eager_oracle.assert_like_eager``): their ``._base``, whether they are leaves, their
``grad_fn`` and version counter, for views of detached aliases (written or made leaves),
of custom Function outputs made stale, of inputs detached and restrided, and of
intermediates made to require grad after the view was taken. The seeds are the soak's
(``benches/fidelity_soak.py``), replayable with ``tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, DirtyMul, Half, ViewOf, assert_like_eager, leaf_clone, leaves


def _view_of_a_detached_leaf(x0):
    t = x0.detach().requires_grad_()
    return x0, t.view(-1)


def _views_of_a_detached_leaf_returned_too(x0):
    t = x0.detach().requires_grad_()
    return t, t.t(), t[1:]


def _view_made_leaf_of_a_detach(x0):
    return (x0.detach().t().requires_grad_(),)


def _view_taken_before_its_detach_requires_grad(x0):
    t1 = x0.detach()
    t2 = t1.t()
    t1.requires_grad_(True)
    return (t2,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [torch.no_grad, contextlib.nullcontext])
@pytest.mark.parametrize(
    "fn",
    [
        _view_of_a_detached_leaf,
        _views_of_a_detached_leaf_returned_too,
        _view_made_leaf_of_a_detach,
        _view_taken_before_its_detach_requires_grad,
    ],
)
def test_views_of_a_detached_leaf_keep_their_base(fn: Any, ctx: Any, compiler: str) -> None:
    """Soak seed 97368: under no_grad, ``x.detach().requires_grad_().view(-1)`` is a view
    whose flag is its base's (a leaf that requires grad); it came back as a view of a
    base without grad made a leaf itself, and a later write to the input did not make
    reading its ``grad_fn`` raise as eager's does."""
    made: list[Any] = []

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        made.append(x)
        return [x], [x]

    def write_input(outs: Any) -> None:
        with torch.no_grad():
            made[-1].mul_(2)

    assert_like_eager(fn, make, COMPILERS[compiler], ctx=ctx, after=write_input, calls=2)


def _view_of_a_written_detach_first(x0):
    t1 = x0.detach()
    t2 = t1[:, 1]
    t2[0].sub_(x0.sum())
    return t2, t1


def _view_of_a_written_detach_last(x0):
    t1 = x0.detach()
    t1.sub_(x0 * 2)
    return t1, x0, t1.t(), t1[1:]


def _soak_98809(x0):
    x0.diagonal().sub_(x0.sum())
    t1 = x0.detach()
    t2 = t1[:, 1]
    t3 = x0.reshape(2, -1)
    t2[0].sub_(t3.sum())
    with torch.no_grad():
        x0.masked_fill_(x0 > 0, 0.5)
    return x0, torch.mm(t1, t1), t2, t1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_view_of_a_written_detach_first, _view_of_a_written_detach_last, _soak_98809]
)
def test_views_of_a_written_detached_alias_view_it(fn: Any, compiler: str) -> None:
    """Soak seed 98809: ``t = x.detach()`` written with a history and returned beside
    its view ``t[:, 1]``: eager's view has ``t`` for ``._base``; ours viewed another
    detached alias of the input."""
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _custom_view_beside_a_detach(x2):
    t1 = x2.matmul(x2)
    t2 = Half.apply(t1)
    return t1.detach(), t2, t2


def _custom_view_beside_its_base(x2):
    t1 = x2.matmul(x2)
    return t1, Half.apply(t1)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [torch.no_grad, contextlib.nullcontext])
@pytest.mark.parametrize("fn", [_custom_view_beside_a_detach, _custom_view_beside_its_base])
def test_a_custom_view_of_an_intermediate_beside_its_detach(
    fn: Any, ctx: Any, compiler: str
) -> None:
    """Soak seed 95730: ``t1.detach(), Half.apply(t1)``: eager's second output views
    ``t1``, which is not returned; ours viewed the first output (the graph returns one
    tensor for ``t1`` and its detach)."""
    if compiler.startswith("dynamo") and ctx is torch.no_grad:
        pytest.skip("Dynamo's own: under no_grad backend='eager' returns t1 for Half.apply(t1)")
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], ctx=ctx, calls=2)


def _stale_custom_view_of_an_output(x0):
    t1 = x0.var(0)
    t3 = ViewOf.apply(t1)
    DirtyMul.apply(t1)
    return None, t1, t3


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_stale_custom_view_keeps_its_base_output(compiler: str) -> None:
    """Soak seed 99698: ``ViewOf.apply(t1)`` made stale by ``DirtyMul.apply(t1)``, both
    returned: eager's view has ``t1`` for ``._base`` (and raises on use with grad)."""
    assert_like_eager(
        _stale_custom_view_of_an_output, leaves(((4, 4), True)), COMPILERS[compiler], calls=2
    )


def _view_of_a_detach_beside_the_original(x1):
    t1 = torch.addmm(x1, x1, x1)
    t4 = t1.detach()
    return t1, x1.sum(), t4.unflatten(-1, (2, 2)), t4.t()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [False, True])
def test_a_view_of_a_detach_is_no_view_of_the_original(rg: bool, compiler: str) -> None:
    """Soak seed 100130: ``t1, t1.detach().unflatten(...)``: eager's view has the detach
    (not returned) for ``._base``; ours viewed the first output."""
    assert_like_eager(
        _view_of_a_detach_beside_the_original, leaves(((4, 4), rg)), COMPILERS[compiler], calls=2
    )


def _custom_view_between_two_writes(x0, x1):
    x0.mul_(x1)  # now x0 requires grad
    t1 = Half.apply(x0)
    x0.mul_(2)  # t1 is stale
    return x1, t1


def _custom_view_of_a_row_between_two_writes(x0, x1):
    x0[:, 1:3].mul_(x1)
    t1 = Half.apply(x0[1])
    x0.addcmul_(x0, x0)
    return (t1,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_custom_view_between_two_writes, _custom_view_of_a_row_between_two_writes]
)
def test_a_stale_custom_view_of_an_input_written_with_grad(fn: Any, compiler: str) -> None:
    """Soak seed 109714: an input without grad written with grad, viewed by a custom
    Function, written again: eager's stale view has the input for ``._base``; ours
    viewed a detached alias of it."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x1 = torch.randn((), dtype=torch.float64, requires_grad=True)
        return [torch.randn(4, 4, dtype=torch.float64), x1], [x1]

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _detached_then_restrided(x1):
    x1.detach_()
    x1.as_strided_((2, 2), (4, 1))
    return x1.unsqueeze(0), x1.mT


def _restrided_then_detached(x1):
    x1.as_strided_((2, 2), (4, 1))
    x1.detach_()
    return x1.unsqueeze(0), x1.mT


def _detached_then_transposed(x1):
    x1.detach_()
    x1.t_()
    return x1[0], x1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_detached_then_restrided, _restrided_then_detached, _detached_then_transposed]
)
def test_views_of_an_input_detached_and_restrided(fn: Any, compiler: str) -> None:
    """Soak seed 109759: views of an input taken out of autograd (``detach_()``) whose
    metadata the function changed came back as tensors of their own; eager's view it."""
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _view_before_its_base_requires_grad(x0):
    t3 = x0.expand(2, 4, 4).relu()
    t4 = t3[::2]
    t3.requires_grad_()
    return x0, t4, t3[1]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [False, True])
def test_a_view_taken_before_its_intermediate_base_requires_grad(rg: bool, compiler: str) -> None:
    """Soak seed 100870: ``t4 = t3[::2]; t3.requires_grad_()``: eager's ``t4`` has no
    ``grad_fn`` (its flag is its base's); ours was a view with one."""
    assert_like_eager(
        _view_before_its_base_requires_grad, leaves(((4, 4), rg)), COMPILERS[compiler], calls=2
    )


def _custom_view_of_a_detached_leaf(x0):
    t5 = x0.detach().requires_grad_()
    return x0 * 2, Half.apply(t5)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_custom_view_of_a_detached_leaf_counts_the_inputs_writes(compiler: str) -> None:
    """Soak seed 109056: ``Half.apply(x.detach().requires_grad_())`` of an input written
    before the call: eager's view shares the input's version counter (1); ours was at 0."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        with torch.no_grad():
            x.mul_(1.5)
        return [x], [x]

    assert_like_eager(_custom_view_of_a_detached_leaf, make, COMPILERS[compiler], calls=2)


def _view_of_a_sum_with_an_input_unsqueezed(x0, x1, x3):
    x3.unsqueeze_(0)
    t1 = torch.where(x1 > 0, x1, x3)  # laid out after the transposed x1
    return x0 * 2, t1.unflatten(-1, (2, 2)), (x1 + x3)[0]


def _transposed_and_unsqueezed() -> tuple[list[Any], list[torch.Tensor]]:
    x0 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    x1 = torch.randn(4, 4, dtype=torch.float64).t()
    return [x0, x1, torch.randn(4, 4, dtype=torch.float64)], [x0]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("ctx", [contextlib.nullcontext, torch.inference_mode])
def test_a_view_of_an_intermediate_laid_out_again_keeps_its_count(ctx: Any, compiler: str) -> None:
    # the graph's base came back laid out otherwise than traced: the view is taken of a
    # copy laid out as traced, whose write counted on the view (soak 115328: version 1;
    # under inference mode, a base without a count)
    assert_like_eager(
        _view_of_a_sum_with_an_input_unsqueezed,
        _transposed_and_unsqueezed,
        COMPILERS[compiler],
        ctx=ctx,
    )


# Views of an intermediate whose eager kernel lays it out otherwise than its meta kernel
# (``angle`` of a non-contiguous complex tensor: eager's is contiguous, the trace's keeps
# the input's strides; soak 150642): eager's views share their base's storage and stride
# it as eager laid it out. They were each taken of a copy of their own, laid out as traced.


def _views_of_an_angle(x0):
    t = (x0 * (1 + 1j)).angle()
    return t.expand(2, 4, 4), t[:, 1], t[1:3].t()


def _views_of_an_angle_with_grad(x0):
    t = (x0.sigmoid() * (1 + 1j)).angle()
    return t.expand(2, 4, 4), t[:, 1], x0.sum()


def _transposed(rg: bool) -> Any:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=rg)
        return [leaf.t()], [leaf] if rg else []

    return make


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [False, True])
@pytest.mark.parametrize("fn", [_views_of_an_angle, _views_of_an_angle_with_grad])
def test_views_of_an_intermediate_eager_lays_out_otherwise(
    fn: Any, rg: bool, compiler: str
) -> None:
    assert_like_eager(fn, _transposed(rg), COMPILERS[compiler], calls=2)
