"""Programs the fidelity soak and blind probes found, one test per family, each compared
with eager (``eager_oracle.assert_like_eager``); the seeds are the soak's
(``benches/fidelity_soak.py``), replayable with ``tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import (
    COMPILERS,
    DirtyMul,
    Half,
    SavedSquare,
    ViewOf,
    assert_like_eager,
    leaf_clone,
    leaves,
)


@pytest.fixture(autouse=True)
def _quiet_resize_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="An output with one or more elements")
        yield


# ------------------------------------------- found by the soak (seeds 5000-5399)


def _out_in_enable_grad(x0):
    t2 = x0 - x0.relu()
    with torch.enable_grad():  # inference mode: still records nothing, out= is fine
        torch.mul(x0.sum(), 2, out=t2[:, 1:3])
    return t2


def test_out_inside_enable_grad_under_inference_mode() -> None:
    for compiler in COMPILERS.values():
        assert_like_eager(
            _out_in_enable_grad, leaves(((4, 4), True)), compiler, ctx=torch.inference_mode
        )


def _views_of_a_detached_output(x0):
    t = x0.detach().requires_grad_()
    return t, t.t(), t.unflatten(-1, (2, 2))


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_a_detached_alias_that_is_an_output(compiler: str) -> None:
    assert_like_eager(_views_of_a_detached_output, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _overlapping_rows() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    base = leaf.clone()
    return [base[0:4], base[2:6]], [leaf]


def _save_one_squeeze_the_other(x3, x4):
    t1 = x4.to(torch.float64)
    x4.squeeze_(0)  # a metadata write on a synthetic-base member bumps the counter
    return t1, SavedSquare.apply(x3)  # x3 saved: a view of the base the graph made


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
def test_saved_view_of_a_synthetic_base_whose_member_changes_metadata(compiler: str) -> None:
    assert_like_eager(_save_one_squeeze_the_other, _overlapping_rows, COMPILERS[compiler], calls=2)


def _detach_view_input(x):
    x.detach_()  # eager: "Can't detach views in-place"
    return x * 2


@pytest.mark.parametrize("mode", ["grad", "no_grad", "inference_mode"])
def test_detach_in_place_of_a_view_input(mode: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        return [leaf.clone()[1:]], [leaf]

    ctx = {
        "grad": contextlib.nullcontext,
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
    }[mode]
    for compiler in COMPILERS.values():
        assert_like_eager(_detach_view_input, make, compiler, ctx=ctx)


def _flag_on_after_use(x0, x1, s0):
    t2 = x1.mT.matmul(x1.mT)  # before the flag: no autograd history, as in eager
    t3 = x0 + s0
    x1.requires_grad_()
    return t2, t3, x0, t3


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
def test_requires_grad_turned_on_after_a_use(compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        return [
            torch.randn(4, 4, dtype=torch.float64),
            torch.randn(4, 4, dtype=torch.float64),
            0.5,
        ], []

    assert_like_eager(_flag_on_after_use, make, COMPILERS[compiler], calls=2)


def _view_of_detached_alias_made_a_leaf(x0):
    t = x0.detach().requires_grad_()
    return t.squeeze(), x0 * 2


def _views_of_an_intermediate_leaf(x0):
    t = (x0 * 2).detach().requires_grad_()  # a leaf made inside the function
    return t[1:3], t[::2]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [_view_of_detached_alias_made_a_leaf, _views_of_an_intermediate_leaf],
    ids=["input", "intermediate"],
)
def test_views_of_a_leaf_made_inside_have_a_grad_fn(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, leaves(((4, 4), False)), COMPILERS[compiler], calls=2)


# ------------------------------------------- inference mode: autograd checks nothing


def _leaf_written_in_enable_grad(x0, x1):
    with torch.no_grad(), torch.enable_grad():
        x1[1:3].add_(1)  # under inference mode eager writes the leaf without a word
    return torch.addmm(x1, x1, x1), x0


def _detach_a_view_made_inside(x0):
    t = x0.view_as(x0)
    t.detach_()  # eager raises, except under inference mode
    return t * 2


@pytest.mark.parametrize(
    "fn, make",
    [
        (_leaf_written_in_enable_grad, leaves(((4, 4), True), ((4, 4), True))),
        (_detach_a_view_made_inside, leaves(((4, 4), True))),
    ],
    ids=["leaf_written_in_enable_grad", "detach_a_view"],
)
@pytest.mark.parametrize("mode", ["grad", "inference_mode"])
def test_autograd_checks_follow_inference_mode(fn: Any, make: Any, mode: str) -> None:
    ctx = torch.inference_mode if mode == "inference_mode" else contextlib.nullcontext
    for name, compiler in COMPILERS.items():
        if (
            name.startswith("dynamo")
            and mode == "inference_mode"
            and fn is _detach_a_view_made_inside
        ):
            continue  # Dynamo itself (backend="eager") fails on this detach_() under inference mode
        assert_like_eager(fn, make, compiler, ctx=ctx)


# ------------------------------------------- found by the soak (seeds 7000-7399)


def _out_resizes_an_input(x0, x2):
    t1 = x0.sum(0)
    torch.mul(t1, 2, out=x0)  # eager resizes the input itself to [4]
    return x0 @ x0, x2 - t1


def _saved_then_unsqueezed(x1, x2):
    t1 = torch.mm(x1, x2)  # saves x2 for the backward
    with torch.enable_grad():
        x2.unsqueeze_(0)  # eager: the call runs, the backward raises "modified by an inplace"
    return t1, x2.squeeze()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn, make",
    [
        (_out_resizes_an_input, leaves(((4, 4), False), ((4, 4), False))),
        (_saved_then_unsqueezed, leaves(((4, 4), True), ((4, 4), True))),
    ],
    ids=["out_resizes_an_input", "saved_then_unsqueezed"],
)
def test_soak_7000(fn: Any, make: Any, compiler: str) -> None:
    def make_clones() -> tuple[list[Any], list[torch.Tensor]]:
        args, leaves_ = make()
        return [a.clone() if a.requires_grad else a for a in args], leaves_

    ctx = torch.no_grad if fn is _out_resizes_an_input else contextlib.nullcontext
    assert_like_eager(fn, make_clones, COMPILERS[compiler], ctx=ctx, calls=2)


# ------------------------------------------------- session of 2026-12-02 (seeds 42-297)


def _written_then_relaid(x0):
    t1 = x0.unflatten(-1, (2, 2))  # sees the write below
    with torch.no_grad():
        x0[1:3].zero_()
    x0.as_strided_((2, 2), (4, 1))  # the new metadata no longer shows rows 1-3
    return t1.view_as(t1)


def _relaid_then_written(x0):
    x0.t_()
    x0.mul_(2)
    return x0 * 1


def _written_then_transposed(x0):
    x0[1:3].mul_(2)
    x0.transpose_(0, 1)  # the same bytes: written through the new metadata
    return x0 * 1


def _written_through_transpose_then_relaid(x0):
    x0.t().mul_(2)
    x0.as_strided_((4, 4), (1, 4))
    return x0 * 1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _written_then_relaid,
        _relaid_then_written,
        _written_then_transposed,
        _written_through_transpose_then_relaid,
    ],
    ids=["written_then_relaid", "relaid_then_written", "then_transposed", "through_transpose"],
)
def test_input_written_and_relaid(fn: Any, compiler: str) -> None:
    """Seed 84: data and metadata both changed: the runtime writes the whole storage the
    input covered (in the caller's layout), then gives it the new metadata. (With an input
    that requires grad, ``_written_then_relaid`` fails in the trace: under autograd,
    functionalization rebuilds ``t1`` from the input's new metadata — still open.)"""
    make = leaves(((4, 4), False)) if fn is _written_then_relaid else leaf_clone(4, 4)
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _views_of_intermediate_written_through_transpose(x0):
    t2 = torch.mm(x0, x0)
    t2.t().add_(1)
    return t2.view(-1), t2.unsqueeze(0)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_written_intermediate_count_the_write(compiler: str) -> None:
    """Seed 42: the graph returns the intermediate base as a transpose of what it wrote;
    eager's base is no view, and its views' version counts the write."""
    assert_like_eager(
        _views_of_intermediate_written_through_transpose,
        leaves(((4, 4), True)),
        COMPILERS[compiler],
        calls=2,
    )


def _exp_output(x0):
    return x0.exp(), x0 * 2  # exp saves its result


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_saved_output_written_after_the_call(compiler: str) -> None:
    """Seed 125: eager's backward raises when an output it saved was written after the
    call, whatever the partition saved instead (min-cut recomputes ``exp``)."""
    assert_like_eager(
        _exp_output,
        leaves(((4, 4), True)),
        COMPILERS[compiler],
        after=lambda outs: outs[0].mul_(2),
        calls=2,
    )


def _view_of_no_grad_view(x0, x3):
    with torch.no_grad():
        t1 = x0[::2]
    return t1.narrow(-1, 1, 2), x3 * 2


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_view_of_a_no_grad_view_has_a_grad_fn(compiler: str) -> None:
    """Seed 297: a view taken with grad on of a view made under no_grad has a grad_fn that
    ends at that view (a leaf to autograd): no gradient reaches the input through it."""
    assert_like_eager(
        _view_of_no_grad_view,
        leaves(((4, 4), True), ((4, 4), True)),
        COMPILERS[compiler],
        calls=2,
    )


def _computed_from_a_leaf_made_inside(x0):
    t = x0.detach().requires_grad_()
    return torch.maximum(t, t) * 2, t


def _factory_leaf_times_input(x0):
    w = torch.ones(4, dtype=x0.dtype, requires_grad=True)
    return w * x0


def _leaf_made_inside_and_its_views(x0):
    t = x0.detach().requires_grad_()  # shares x0's storage
    y = t.cumsum(-1)
    return y * 2, t[1:], t  # the leaf, returned, is the one y's gradient fills


def _leaf_made_inside_unreturned(x0):
    with torch.enable_grad():
        t = x0.detach().requires_grad_()
    return t.exp() * x0  # requires grad even where x0 does not (seeds 9028, 9084)


@pytest.mark.parametrize(
    "fn",
    [
        _computed_from_a_leaf_made_inside,
        _factory_leaf_times_input,
        _leaf_made_inside_and_its_views,
        _leaf_made_inside_unreturned,
    ],
    ids=["detach", "factory", "views", "unreturned"],
)
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("ctx", [contextlib.nullcontext, torch.no_grad], ids=["grad", "no_grad"])
def test_output_computed_from_a_leaf_made_inside(
    fn: Any, compiler: str, rg: bool, ctx: Any
) -> None:
    """Seed 6207: eager's output requires grad and its backward fills the inner leaf's
    ``.grad`` (it was refused): the runtime passes a stand-in leaf into the compiled
    Function, which the backward's gradient for it reaches, and returns that leaf where
    the function returns it."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=rg)
        return [x], [x] if rg else []

    assert_like_eager(fn, make, COMPILERS[compiler], ctx=ctx, calls=2)


def _input_made_to_require_grad(x0):
    x0.requires_grad_()
    return x0.amax(-1, keepdim=True)[1:3] * 2


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_requires_grad_on_an_input_is_no_new_leaf(compiler: str) -> None:
    """Seed 240: ``requires_grad_()`` on an input is the caller's tensor requiring grad."""
    assert_like_eager(_input_made_to_require_grad, leaves(((4, 4), False)), COMPILERS[compiler])


# ------------------------------------ found by a blind probe (2026-12-02): set_ / .data


def _set_to_another_input(x, y):
    with torch.no_grad():
        x.set_(y)  # x aliases y afterwards
    return x * 2


def _data_of_intermediate(x):
    t = x * 3
    t.data = x.data * 2
    return t + 1


def _data_of_input(x, w):
    x.data = x.data.t().contiguous()  # new values, no version bump
    return x @ w


def _set_to_a_smaller_tensor(x, w):
    with torch.no_grad():
        x.set_(torch.zeros(2, 2, dtype=x.dtype))
    return x.sum() * w


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn, make",
    [
        (_set_to_another_input, leaves(((4, 4), False), ((4, 4), False))),
        (_data_of_intermediate, leaves(((4, 4), True))),
        (_data_of_input, leaves(((4, 4), True), ((4, 4), True))),
        (_set_to_a_smaller_tensor, leaves(((4, 4), False), ((4, 4), True))),
    ],
    ids=["set_to_input", "data_of_intermediate", "data_of_input", "set_smaller"],
)
def test_set_and_data_assignment(fn: Any, make: Any, compiler: str) -> None:
    """``x.set_(y)`` and ``x.data = y`` on an input: the caller's tensor gets the new
    storage (it was left unchanged: the write was dropped without a word)."""
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _made_in_inference_mode(x):
    with torch.inference_mode():
        y = x * 2
    return y, x * 3


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_output_made_in_an_inference_mode_block(compiler: str) -> None:
    """An output made inside ``torch.inference_mode()`` is an inference tensor, as eager's
    (the trace raised "Inference tensors do not track version counter")."""
    assert_like_eager(_made_in_inference_mode, leaves(((4, 4), True)), COMPILERS[compiler])


def _matmul_out_of_autocast(x, y):
    with torch.autocast("cpu", enabled=False):
        return x @ y


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_backward_of_a_block_out_of_autocast_keeps_float32(compiler: str) -> None:
    """Called under bf16 autocast, a block with autocast disabled: eager's backward runs
    outside the forward's autocast, so its matmul's gradient is float32 (the compiled one
    was rounded to bf16)."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        ts = [torch.randn(4, 4, requires_grad=True) for _ in range(2)]
        return ts, ts

    assert_like_eager(
        _matmul_out_of_autocast,
        make,
        COMPILERS[compiler],
        ctx=lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    )


def _times_item(x, s):
    return x * s.item()


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_item_read_by_the_backward(compiler: str) -> None:
    """``x * s.item()``: the backward needs the data-dependent float, which nothing can
    recompute; min-cut saves it (it failed: "can be neither saved nor recomputed")."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        return [x, torch.tensor(1.5, dtype=torch.float64)], [x]

    assert_like_eager(_times_item, make, COMPILERS[compiler], calls=2)


def _view_of_an_identity_function_output(x0):
    t3 = Half.apply(x0)  # eager: a view of x0 made in the Function; backward g / 2
    return t3.expand(2, 4, 4), x0.mT.clamp(-0.5, 0.5)[::2]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_view_of_a_custom_function_output_keeps_its_backward(compiler: str) -> None:
    """Seed 8210: a view of a custom Function's output that views an input is rebuilt as
    a view of the input whose gradient still passes through the Function's backward (it
    bypassed it: gradient 1 instead of 0.5)."""
    assert_like_eager(
        _view_of_an_identity_function_output, leaf_clone(4, 4), COMPILERS[compiler], calls=2
    )


def _view_of_identity_function_on_an_intermediate(x0):
    t1 = x0 * 1
    t3 = Half.apply(t1)  # a view of t1 made in the Function: backward g / 2
    return (t3[0],)  # t3[0]._base is t1: rebuilt from it, the gradient skipped Half


def _view_of_identity_function_and_its_input(x0):
    t1 = torch.lerp(x0, x0.exp(), 0.3)
    t3 = Half.apply(t1)
    return t3[0], t1, t3.t()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_view_of_identity_function_on_an_intermediate, _view_of_identity_function_and_its_input]
)
def test_view_of_a_custom_function_output_of_an_intermediate(fn: Any, compiler: str) -> None:
    """Seed 9465: a view of a custom Function's output that is itself a view of the
    Function's input (an intermediate) keeps the Function's backward: the gradient was
    twice eager's."""
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _input_through_to_and_detached(x1):
    t1 = x1.to(torch.float64)  # already float64: x1 itself
    return x1.detach(), t1, x1


def _detached_before_its_viewed_twin(x0):
    t2 = torch.where(x0 > 0, x0, x0.exp())
    return t2.detach(), t2.unsqueeze(0), t2


def _detached_and_a_view_of_the_unreturned_original(x0):
    t1 = torch.maximum(x0, x0)
    return t1.detach(), t1.chunk(2, -1)[1]  # the chunk's base is t1, not t1.detach()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _input_through_to_and_detached,
        _detached_before_its_viewed_twin,
        _detached_and_a_view_of_the_unreturned_original,
    ],
    ids=["to", "view", "base"],
)
@pytest.mark.parametrize("ctx", [contextlib.nullcontext, torch.no_grad], ids=["grad", "no_grad"])
def test_one_graph_value_for_detached_and_plain_outputs(fn: Any, ctx: Any, compiler: str) -> None:
    """Seeds 8262, 8166, 9099: the graph returns one value for ``t`` and ``t.detach()``.
    An output the runtime rebuilds (the input itself) is never the one detached; of two
    graph outputs, the one another output views stays the graph's; an intermediate base
    (``t`` unreturned) is never a detached output."""
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], ctx=ctx, calls=2)
    assert_like_eager(fn, leaves(((4, 4), False)), COMPILERS[compiler], ctx=ctx, calls=2)


def _detached_first_then_twice_the_original(x0):
    t1 = x0 * 1.5
    x0.add_(x0)
    return t1.detach(), x0, t1, t1  # the last two are one object, the first another


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
def test_detached_output_is_not_the_original_returned_twice(rg: bool, compiler: str) -> None:
    """Seed 9495: of one graph value returned as ``t.detach()``, ``t``, ``t``, the runtime
    kept the first for the graph's and detached ``t``: ``t is t`` held for the wrong pair."""
    make = leaf_clone(4, 4) if rg else leaves(((4, 4), False))
    assert_like_eager(
        _detached_first_then_twice_the_original,
        make,
        COMPILERS[compiler],
        calls=2,
        after=lambda outs: outs[2].mul_(2),
    )


def _view_of_a_detached_leaf_beside_the_original(x0):
    t1 = -x0
    t2 = t1.detach().requires_grad_()  # one graph value with t1
    return t2[:, 1], t1  # t1 keeps its history (seed 21248: it lost it, and x0 its grad)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_original_beside_a_detached_leaf_of_it(compiler: str) -> None:
    fn = _view_of_a_detached_leaf_beside_the_original
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], calls=2)
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], ctx=torch.no_grad)


def _views_of_a_custom_function_intermediate(x1):
    t3 = SavedSquare.apply(x1.abs())
    return t3.view_as(t3), t3.squeeze()


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_a_custom_function_intermediate_can_be_written(compiler: str) -> None:
    """Seed 8018: views of a custom Function's fresh output are rebuilt from it (the
    caller may write them in place, as in eager), not returned as views made inside the
    compiled Function (autograd refused the write: "a function that returns multiple
    views")."""
    assert_like_eager(
        _views_of_a_custom_function_intermediate,
        leaves(((4, 4), True)),
        COMPILERS[compiler],
        after=lambda outs: outs[0].mul_(2),
        calls=2,
    )


def _saved_by_an_unreached_op(x0):
    y = x0 * 2
    z = y.sin().detach()  # sin saves y, but nothing differentiates through it
    return y, z


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_output_saved_by_an_unreached_op_may_be_written(compiler: str) -> None:
    """Soak seed 8339: eager checks only what a backward the outputs reach saved; an
    output saved by an op outside that backward may be written before backward."""
    assert_like_eager(
        _saved_by_an_unreached_op,
        leaves(((4, 4), True)),
        COMPILERS[compiler],
        after=lambda outs: outs[0].mul_(2),
        calls=2,
    )


def _output_resized_by_out_under_no_grad(x0):
    t = x0.logsumexp(-1, keepdim=True)
    u = x0 @ x0
    with torch.no_grad():
        torch.mul(u.sum(), 2, out=t)  # resized to 0-d, after its node was recorded
    return t, u


def _output_resized_alone(x0):
    t = x0.sin().sum(-1, keepdim=True)
    with torch.no_grad():
        torch.add(x0.sum(), 1, out=t)
    return (t,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_output_resized_by_out_under_no_grad, _output_resized_alone])
def test_an_output_resized_by_out_after_its_node_was_recorded(fn: Any, compiler: str) -> None:
    """Soak seed 40845: eager's call runs and its backward raises "invalid gradient" (the
    node expects the old shape); aotgrad's trace raised it at the call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (eager's warning on resizing an out= tensor)
        assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


# ---------------- a leaf view written beside an overlapping view of its base (90000-)
# Eager's leaf view ``x2 = l[2:6]; x2.requires_grad_()`` is a leaf no more once a write
# with grad through another view of ``l`` gives ``l`` a history: a write to it is then
# allowed (soak 95610, 96643, 98119: refused, where eager runs). Without that write, or
# with it under no_grad, eager refuses, and so does aotgrad.


def _overlapping_leaf_views():
    l1 = torch.randn(8, 4, dtype=torch.float64)
    x1, x2 = l1[0:4], l1[2:6]
    x2.requires_grad_()
    w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x1, x2, w], [x2, w]


def _sibling_written_with_grad_first(x1, x2, w):
    x1 += w.sum()
    x2[:, 1:3].add_(1)
    return x1 * 2, x2 * 3


def _sibling_written_under_no_grad_first(x1, x2, w):
    with torch.no_grad():
        x1 += w.sum()
    x2[:, 1:3].add_(1)  # x2 is still a leaf: eager refuses
    return x1 * 2


def _leaf_view_written_first(x1, x2, w):
    x2.mul_(2)  # eager refuses
    x1 += w.sum()
    return x1


# (through torch.compile, Dynamo's own fakification of x2 fails, backend="eager" too)
@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
@pytest.mark.parametrize(
    "fn",
    [
        _sibling_written_with_grad_first,
        _sibling_written_under_no_grad_first,
        _leaf_view_written_first,
    ],
)
def test_a_leaf_view_beside_a_sibling_written_with_grad(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, _overlapping_leaf_views, COMPILERS[compiler], calls=2)


def _saved_then_turned_off(x0):
    t = x0.pow(2)  # pow saves x0
    x0.requires_grad_(False)
    return (t,)


def _saved_then_detached_in_place(x0):
    t = x0.norm()
    x0.detach_()
    return t, x0.contiguous()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_saved_then_turned_off, _saved_then_detached_in_place])
def test_a_saved_leaf_taken_out_of_autograd_is_still_checked(fn: Any, compiler: str) -> None:
    """Soak seeds 90403, 96239: eager's backward still runs the node that saved the leaf
    (its accumulator then skips the leaf), so a write to the leaf after the call fails
    the backward's saved-tensor check; the trace's backward skipped that node."""
    made: list[Any] = []

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        made.append(x)
        return [x], [x]

    assert_like_eager(fn, make, COMPILERS[compiler], after=lambda outs: made[-1].mul_(2))


def _second_half() -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
        return [leaf.clone()[4:]], [leaf]

    return make


def _restrided_then_read(x):
    x.as_strided_((4, 4), (1, 4))
    return (x.cos(),)


def _restrided_with_offset_then_read(x):
    x.as_strided_((2, 4), (4, 1), x.storage_offset() + 4)
    return x.exp(), x.sin().sum()


def _transposed_then_read(x):
    x.t_()
    return (x.cos() * x,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_restrided_then_read, _restrided_with_offset_then_read, _transposed_then_read]
)
def test_a_restrided_view_input_saved_for_the_backward(fn: Any, compiler: str) -> None:
    """Soak seed 90254: a view input (offset into a larger storage) restrided by the
    function and saved for the backward was saved as a compact copy, which the backward
    reads at the storage offsets it had: setStorage out of bounds."""
    assert_like_eager(fn, _second_half(), COMPILERS[compiler], calls=2)


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


def _output_saved_by_an_unreached_write(x0, x1):
    t1 = x1 @ x1
    t2 = x0.mean()
    x0[1:3].mul_(t2)  # mul_ saves t2; the outputs' backward does not reach it
    return t1.narrow(-1, 1, 2), t2


def _overlapping_rows_of_a_clone() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(8, 4, requires_grad=True)  # float32: autocast's matmul is bfloat16
    b = leaf.clone()
    return [b[0:4], b[2:6]], [leaf]


def _input_saved_by_an_unreached_op(x0):
    t1 = torch.sigmoid(x0)  # saves its result
    torch.maximum(t1, x0)  # saves x0; nothing returned reaches it
    x0.clamp(-0.5, 0.5)
    return x0, torch.cat([t1, t1])


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_an_output_saved_only_by_an_unreached_node_may_be_written(compiler: str) -> None:
    """Soak seed 104345: the compiled node saved the output (the write's gradient needs
    it), and autograd's check on its saved tensors failed the whole backward after the
    caller wrote it; eager's fails only where the backward reads it."""
    assert_like_eager(
        _output_saved_by_an_unreached_write,
        _overlapping_rows_of_a_clone,
        COMPILERS[compiler],
        ctx=lambda: torch.autocast("cpu"),
        after=lambda outs: outs[1].mul_(2),
        calls=2,
    )


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_an_input_saved_only_by_an_unreached_node_may_be_written(compiler: str) -> None:
    """Soak seeds 108681, 108424: min-cut saved the input (eager's unreached nodes save
    it; sigmoid, the one its backward runs, saves its result), so a write to the input
    after the call failed the backward where eager's runs."""
    made: list[Any] = []

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        made.append(leaf.clone())
        return [made[-1]], [leaf]

    def write_input(outs: Any) -> None:
        with torch.no_grad():
            made[-1].mul_(2)

    assert_like_eager(_input_saved_by_an_unreached_op, make, COMPILERS[compiler], after=write_input)


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


def _relu_of_a_slice_of_a_fresh_output(x1):
    t1 = x1.cumsum(-1)
    t1[1:3].relu_()  # relu's saved result is a view of t1, at the count before the write
    return x1, t1


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_saved_view_of_a_fresh_output_written_inside(compiler: str) -> None:
    """Soak seed 102748: the saved view of an output the graph made (at count 0, under
    the Function's no_grad) was read after the output's count was set to eager's 1:
    autograd took that for a write and raised "view was created in no_grad mode"."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
        return [leaf[2:6].t()], [leaf]

    assert_like_eager(_relu_of_a_slice_of_a_fresh_output, make, COMPILERS[compiler], calls=2)


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
