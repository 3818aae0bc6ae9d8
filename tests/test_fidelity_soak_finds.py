"""Programs the fidelity soak and blind probes found, one test per family, each compared
with eager (``eager_oracle.assert_like_eager``); the seeds are the soak's
(``benches/fidelity_soak.py``), replayable with ``tests/fidelity_programs.py SEED ENTRY``.

Later finds, by family: ``test_fidelity_saved_tensor_checks`` (saved tensors written after
the call), ``test_fidelity_returned_view_bases`` (``._base``, leaf-ness and ``grad_fn`` of
returned views), ``test_fidelity_leaf_view_beside_sibling`` (a leaf view written beside an
overlapping view of its base).
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
import torch

from eager_oracle import (
    COMPILERS,
    Half,
    SavedSquare,
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
