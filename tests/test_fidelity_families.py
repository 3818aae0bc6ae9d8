"""Families of programs the fidelity generator found after the issue's own cases, each
compared with eager (``eager_oracle.assert_like_eager``): ``out=`` views eager resizes,
leaf inputs taken out of autograd, version counters of views of intermediates, and views
of an input that gains autograd history through another view of its base.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
import torch

from eager_oracle import (
    COMPILERS,
    DirtyMul,
    assert_like_eager,
    leaf_clone,
    leaves,
)


@pytest.fixture(autouse=True)
def _quiet_resize_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="An output with one or more elements")
        yield


# ---------------------------------------------------------------- out= views eager resizes


def _out_diagonal_no_grad(x0, x1):
    with torch.no_grad():
        torch.sin(x1.sum(), out=x1.diagonal())  # a [4] view resized to [] (one element)
    return x1 * x0


def _out_transposed_slice(x):
    t = x * 1
    v = t[::2]
    torch.sin(v.sum(), out=v.t())
    return t, v


def _out_view_of_intermediate_then_read(x):
    t = x.clone()
    torch.cos(t.sum(0), out=t[1:3].diagonal())  # [2] view, [4] result: restrided in place
    return t.sum(1), t


def _out_input_resized(x, o):
    torch.mul(x, 2, out=o)  # o has 2 elements: eager resizes it to x's shape
    return o, o.sum()


OUT_VIEWS = {
    "input_resized": (_out_input_resized, leaves(((3, 4), False), ((2,), False))),
    "no_grad_into_input_diagonal": (_out_diagonal_no_grad, leaves(((4, 4), True), ((4, 4), False))),
    "transposed_slice_of_intermediate": (_out_transposed_slice, leaf_clone(4, 4)),
    "grows_a_view_of_an_intermediate": (_out_view_of_intermediate_then_read, leaf_clone(4, 4)),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(OUT_VIEWS))
def test_out_view_resized_as_eager(case: str, compiler: str) -> None:
    fn, make = OUT_VIEWS[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_out_view_resized_outside_grad_mode(mode: str) -> None:
    ctx = {"no_grad": torch.no_grad, "inference_mode": torch.inference_mode}[mode]
    make = leaves(((4, 4), False), ((4, 4), True))
    for compiler in COMPILERS.values():
        assert_like_eager(_out_diagonal_no_grad, make, compiler, ctx=ctx)


# ------------------------------------------------------- leaf inputs leaving autograd


def _leaf_requires_grad_false(x0):
    x0.requires_grad_(False)
    t = x0 * 2
    with torch.no_grad():
        x0.sub_(t.sum())
    return t


def _leaf_requires_grad_false_kw(x0, x1):
    x0.requires_grad_(requires_grad=False)
    return x0 * x1, x0.view(-1)


def _leaf_requires_grad_false_after_use(x0, x1):
    y = x0 * x1  # recorded with grad before the flag changes
    x0.requires_grad_(False)
    return y, x0 + 1


LEAF_OFF = {
    "then_written_under_no_grad": (_leaf_requires_grad_false, leaves(((3,), True))),
    "keyword_and_a_view_output": (
        _leaf_requires_grad_false_kw,
        leaves(((2, 3), True), ((2, 3), True)),
    ),
    "after_a_recorded_use": (
        _leaf_requires_grad_false_after_use,
        leaves(((3,), True), ((3,), True)),
    ),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(LEAF_OFF))
def test_requires_grad_false_on_a_leaf_input(case: str, compiler: str) -> None:
    fn, make = LEAF_OFF[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


# ------------------------------------------- version counters of views of intermediates


def _views_of_written_intermediate(x):
    t = x * 2
    v = t[0]
    t.mul_(2)
    return v, t.t()


def _view_written_through_another_view(x):
    t = torch.mm(x, x)
    t.t().add_(1)
    return t.view(-1), t.unsqueeze(0)


VERSIONS = {
    "two_views_of_an_intermediate_written_after": (
        _views_of_written_intermediate,
        leaves(((3, 3), False)),
    ),
    "written_through_a_transpose": (_view_written_through_another_view, leaves(((3, 3), False))),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(VERSIONS))
def test_version_of_views_of_intermediates(case: str, compiler: str) -> None:
    fn, make = VERSIONS[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


# ----------------------------------- a view of an input gains grad through its base


def _disjoint_views(rg_source: bool) -> Any:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        src = torch.randn(4, 4, dtype=torch.float64, requires_grad=rg_source)
        base = torch.randn(8, 4, dtype=torch.float64).clone()
        top, bottom = base[:4], base[4:]
        return [src.clone() if rg_source else src, top, bottom], [src] if rg_source else []

    return make


def _write_one_return_the_other(src, top, bottom):
    top.copy_(src)  # eager: the base, and so ``bottom``, now has autograd history
    return top * 1, bottom.unsqueeze(0), bottom.squeeze()


# Dynamo itself fails on this program (``backend="eager"`` raises "False != True").
@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
@pytest.mark.parametrize("rg_source", [True, False])
def test_view_of_input_gains_grad_through_its_base(compiler: str, rg_source: bool) -> None:
    assert_like_eager(
        _write_one_return_the_other, _disjoint_views(rg_source), COMPILERS[compiler], calls=2
    )


def _detach_in_place(x0, x1):
    t = x0 * x1
    x1.detach_()  # under inference mode eager leaves requires_grad as it was
    return t, x1


def _flag_off(x0, x1):
    t = x0 * x1
    x1.requires_grad_(False)  # under inference mode eager turns it off all the same
    return t, x1


@pytest.mark.parametrize("fn", [_detach_in_place, _flag_off], ids=["detach_", "requires_grad_"])
@pytest.mark.parametrize("mode", ["grad", "inference_mode"])
def test_input_leaves_autograd_under_each_mode(fn: Any, mode: str) -> None:
    ctx = torch.inference_mode if mode == "inference_mode" else contextlib.nullcontext
    make = leaves(((3,), True), ((3,), True))
    for compiler in COMPILERS.values():
        assert_like_eager(fn, make, compiler, ctx=ctx, calls=2)


def _detach_clone_after_use(x0):
    t1 = x0.sum()
    x0.detach_()  # t1 was computed before: its gradient still reaches the leaf (seed 9164)
    return x0.transpose(0, 1), t1.expand(2), t1


def _flag_off_leaf_after_use(x0):
    t1 = x0.sum()
    x0.requires_grad_(False)  # eager's AccumulateGrad then skips the leaf: no gradient
    return x0 * 2, t1


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_input_detached_after_use_keeps_what_it_computed(compiler: str) -> None:
    assert_like_eager(_detach_clone_after_use, leaf_clone(4, 4), COMPILERS[compiler], calls=2)
    make = leaves(((4, 4), True))
    assert_like_eager(_flag_off_leaf_after_use, make, COMPILERS[compiler], calls=2)


def _out_overlapping_its_input(x0):
    t1 = -x0
    torch.mul(t1, 2, out=t1.t())  # eager: "...refer to a single memory location" (seed 9047)
    return (t1,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
def test_out_overlapping_an_input_raises_as_eager(rg: bool, compiler: str) -> None:
    make = leaves(((4, 4), rg))
    assert_like_eager(_out_overlapping_its_input, make, COMPILERS[compiler], calls=2)
    assert_like_eager(
        _out_overlapping_its_input, make, COMPILERS[compiler], ctx=torch.inference_mode
    )


def _stale_save_off_the_path(x0, x1, x2):
    x0.addcmul_(x0, x0)  # saves x0, then writes it: stale, but only x0's history reads it
    return (torch.mm(x1, x2),)


def _stale_save_on_the_path(x0, x1, x2):
    x0.addcmul_(x0, x0)
    return torch.mm(x1, x2), x0 * 1  # the caller's backward reaches the stale read


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_stale_save_off_the_path, _stale_save_on_the_path])
def test_stale_saved_tensor_raises_only_where_eager_reads_it(fn: Any, compiler: str) -> None:
    """Seed 9096: a saved tensor written afterwards fails eager's check only when its
    backward runs; the compiled backward raised whatever the caller differentiated."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        l0, x1, x2 = (torch.randn(4, 4, dtype=torch.float64) for _ in range(3))
        l0.requires_grad_(True)
        x2.requires_grad_(True)
        return [l0.clone().t(), x1, x2], [l0, x2]

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _views_of_an_input_a_function_wrote(x0, x1):
    t1 = DirtyMul.apply(x1)  # x1 now carries DirtyMul's history
    t3 = x1[0]  # an ordinary view of x1, made outside the Function
    return x1[1:3], t3.squeeze(), t1.detach()


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_an_input_a_custom_function_marked_dirty(compiler: str) -> None:
    """Seed 9141: a view of an input a custom Function wrote (``mark_dirty``) is an
    ordinary view: eager lets the caller write it in place (it came back as the output of
    a routing Function, which autograd refuses to let be written)."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        l0, l1 = (torch.randn(4, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
        return [l0.clone(), l1.clone()], [l0, l1]

    assert_like_eager(
        _views_of_an_input_a_function_wrote,
        make,
        COMPILERS[compiler],
        calls=2,
        after=lambda outs: outs[1].mul_(2),
    )


def _overlapping_views_reshaped_and_a_new_leaf(x0, x1):
    x1.detach().requires_grad_()  # a leaf made inside, not returned
    x0.squeeze_(0)
    x1.t_()
    return (x1,)


def _disjoint_views_written_in_enable_grad(x0, x1):
    with torch.enable_grad():
        x0.t().copy_(x1 * 2)  # the caller made x0 with grad on: eager lets it be written
    return x0.sum()


def _views_of_one_base(rows: tuple[slice, slice]) -> Any:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
        base = leaf.clone()
        return [base[rows[0]], base[rows[1]]], [leaf]

    return make


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_one_base_written_in_a_no_grad_call(compiler: str) -> None:
    """Seeds 9130, 9336: called under no_grad with inputs the caller made (with grad on)
    as views of one base: the traced members were made under the caller's no_grad, so
    eager's view checks fired where eager's own did not."""
    overlapping = _views_of_one_base((slice(0, 4), slice(2, 6)))
    disjoint = _views_of_one_base((slice(0, 4), slice(4, 8)))
    for fn, make in (
        (_overlapping_views_reshaped_and_a_new_leaf, overlapping),
        (_disjoint_views_written_in_enable_grad, disjoint),
        (_disjoint_views_written_in_enable_grad, overlapping),
    ):
        assert_like_eager(fn, make, COMPILERS[compiler], ctx=torch.no_grad)
        assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _branches_on_grad_mode(x0):
    with torch.enable_grad():
        with torch.no_grad():
            inner = torch.is_grad_enabled()  # False, under inference mode too
        outer = torch.is_grad_enabled()
    return x0 * (2 if inner else 3) * (5 if outer else 7)


def _branch_on_grad_mode_writing_views_of_one_base(x0, x1):
    x1.mul_(2)
    if torch.is_grad_enabled():  # False under inference mode (seed 9522)
        x0.add_(100)
    return (x0 * 1,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("mode", ["inference_mode", "no_grad", "grad"])
def test_grad_mode_blocks_as_eager_sees_them(mode: str, compiler: str) -> None:
    """Under inference mode the trace runs each torch call in a no_grad block of its own;
    the function's own grad-mode switches went through one too, which undid them."""
    ctx = {
        "inference_mode": torch.inference_mode,
        "no_grad": torch.no_grad,
        "grad": contextlib.nullcontext,
    }[mode]
    compiled = COMPILERS[compiler]
    assert_like_eager(_branches_on_grad_mode, leaves(((3,), True)), compiled, ctx=ctx)
    disjoint = _views_of_one_base((slice(0, 4), slice(4, 8)))
    assert_like_eager(_branch_on_grad_mode_writing_views_of_one_base, disjoint, compiled, ctx=ctx)


def _product_of_an_autocast_result(x0, x1):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        t2 = torch.mm(x1, x1)  # bfloat16
    x0.matmul(t2)  # unused; eager: "expected m1 and m2 to have the same dtype" (seed 9438)
    return (x0 * 2,)


def _linear_of_mixed_dtypes(x0, x1):
    torch.nn.functional.linear(x0, x1)  # unused: the graph never runs it
    return x0 * x1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_product_of_an_autocast_result, _linear_of_mixed_dtypes])
@pytest.mark.parametrize("mode", ["grad", "autocast"])
def test_matrix_product_of_two_dtypes_as_eager(fn: Any, mode: str, compiler: str) -> None:
    """Fake kernels of the matrix products check no dtypes: eager raises where the trace
    ran (and under an enclosing autocast neither raises)."""
    ctx = (
        (lambda: torch.autocast("cpu", dtype=torch.bfloat16))
        if mode == "autocast"
        else contextlib.nullcontext
    )

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x0 = torch.randn(4, 4, requires_grad=True)  # float32: the trace's mm gives float32
        return [x0, torch.randn(4, 4, dtype=torch.float64)], [x0]

    assert_like_eager(fn, make, COMPILERS[compiler], ctx=ctx, calls=2)


def _save_one_view_write_the_other(x0, x1):
    t1 = x0.abs()  # saves x0
    with torch.no_grad():
        x1.sin_()  # x0 and x1 views of one base: one version counter in eager (seed 9612)
    return (t1,)


def _save_then_write_the_same_tensor_passed_twice(x0, x1):
    t1 = x0.exp()  # saves its result... and x0.abs() saves x0
    t2 = x0.abs()
    with torch.no_grad():
        x1.mul_(2)
    return t1, t2


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_inputs_sharing_a_version_counter(compiler: str) -> None:
    """A write to one input makes what was saved of another stale when the two share
    eager's version counter (views of one base, one tensor passed twice): eager's
    backward raises; traced, each input had a counter of its own."""
    disjoint = _views_of_one_base((slice(0, 4), slice(4, 8)))

    def twice() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        x = leaf.clone()
        return [x, x], [leaf]

    compiled = COMPILERS[compiler]
    assert_like_eager(_save_one_view_write_the_other, disjoint, compiled, calls=2)
    assert_like_eager(_save_then_write_the_same_tensor_passed_twice, twice, compiled, calls=2)


def _mask_assign_zero_dim(x0, x1):
    t = x0 * 2
    t[t > 0] = 0.0  # eager reads the 0-dim mask's value; traced it was data-dependent
    with torch.no_grad():
        x1[x1 > 0] = x0.detach()  # seeds 9387, 9669
    return t, x1


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_boolean_mask_assignment_on_a_zero_dim_tensor(compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x0 = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
        x1 = torch.tensor(0.5, dtype=torch.float64)
        return [x0, x1], [x0]

    assert_like_eager(_mask_assign_zero_dim, make, COMPILERS[compiler], calls=2)


def _shrunk_then_written(x1):
    x1.as_strided_((2, 2), (4, 1))  # covers other bytes: written back in the caller's layout
    x1[0].sin_()
    return (x1.diagonal(),)


def _shrunk_under_no_grad_then_written(x0):
    with torch.no_grad():
        x0.as_strided_((2, 2), (4, 1))
        t1 = x0.tanh()
    x0[:, 0].mul_(t1.sum())  # eager's backward: "CopySlices returned an invalid gradient"
    return x0.sin(), x0, t1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_shrunk_then_written, _shrunk_under_no_grad_then_written])
@pytest.mark.parametrize("rg", [True, False])
def test_input_shrunk_by_as_strided_then_written(fn: Any, rg: bool, compiler: str) -> None:
    """Seeds 10085, 10159: with an input that requires grad, the trace failed (a view(4,
    4) of the layout anchor replayed on the shrunk input), or raised at the call what
    eager raises in its backward."""
    make = leaf_clone(4, 4) if rg else leaves(((4, 4), False))
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _relu_in_place_of_an_input(x0, x2):
    t1 = x2 * 2
    x0.t().relu_()  # relu saves its result: x0's bytes, at the version the call leaves
    return t1, x0.reshape(2, -1)


def _matmul_of_an_input(x0, x2):
    return x2 * 3, x0.view(-1), x2 @ x0  # mm saves x0; outs[1] views it


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_relu_in_place_of_an_input, _matmul_of_an_input])
@pytest.mark.parametrize("written", [0, 1])
def test_input_saved_by_eager_and_written_after_the_call(
    fn: Any, written: int, compiler: str
) -> None:
    """Seed 9835: an input eager's backward saves (itself or a view of it), written
    after the call: eager's backward raises when it reaches that saved tensor (not when
    the caller differentiates only outputs whose backward never reads it)."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        l0, x2 = (torch.randn(4, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
        return [l0.clone(), x2], [l0, x2]

    def write(outs: list[Any]) -> None:
        with torch.no_grad():
            outs[written].mul_(2)

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, after=write)


def _write_in_enable_grad_block(x0, x1, x3):
    with torch.enable_grad():
        x1.lerp_(x3, 0.5)  # x1 gains x3's history, under a no_grad call too (seed 10253)
    return x0, x1.t(), x1.transpose(0, 1)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rows", [(slice(0, 4), slice(2, 6)), (slice(0, 4), slice(4, 8))])
def test_input_written_in_an_enable_grad_block_of_a_no_grad_call(rows: Any, compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
        x3 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
        base = leaf.clone()
        return [base[rows[0]], base[rows[1]], x3], [leaf, x3]

    assert_like_eager(_write_in_enable_grad_block, make, COMPILERS[compiler], ctx=torch.no_grad)


def _views_of_a_saved_intermediate(x0):
    t2 = torch.sigmoid(x0 * 2)  # sigmoid saves its result, returned only through views
    return t2[:, 1], t2.view_as(t2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("written", [0, 1, None])
def test_intermediate_saved_by_eager_written_through_a_view(written: Any, compiler: str) -> None:
    """Seed 10491: an intermediate eager saves, returned only as views and written
    through one after the call: eager's backward raises; the compiled one ran."""

    def write(outs: list[Any]) -> None:
        if written is not None:
            with torch.no_grad():
                outs[written].mul_(2)

    make = leaf_clone(4, 4)
    assert_like_eager(
        _views_of_a_saved_intermediate, make, COMPILERS[compiler], calls=2, after=write
    )


def _as_strided_of_a_diagonal_of_an_input(x0):
    t1 = x0.diagonal()
    # reaches x0[0, :4], off the diagonal: eager's backward gives those no gradient
    return (x0 * x0).var(0), t1.t(), t1.as_strided((2, 2), (1, 2))


def _as_strided_of_a_slice_of_an_intermediate(x0):
    t = x0 * 2
    return t[1].as_strided((2, 3), (4, 1)), t.sum()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_as_strided_of_a_diagonal_of_an_input, _as_strided_of_a_slice_of_an_intermediate]
)
def test_as_strided_of_a_view_differentiates_as_eager(fn: Any, compiler: str) -> None:
    """Seed 20262: an output ``v.as_strided(...)`` of a view ``v`` was rebuilt as one
    as_strided of the base, whose backward reaches base elements ``v`` does not cover:
    eager's (and torch's AOT Autograd's) gradient there is zero. Silently wrong before."""
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], calls=2)
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _detached_saved_result(x0):
    y = x0.exp()  # exp saves y; y.detach() shares y's version counter
    return y.sum(), y.detach()


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_detached_output_of_a_saved_tensor_written_after_the_call(compiler: str) -> None:
    """A write after the call to ``y.detach()`` is a write to what eager saved: eager's
    backward raises (a partition that recomputed exp did not)."""

    def write(outs: list[Any]) -> None:
        outs[1].add_(1)

    assert_like_eager(
        _detached_saved_result, leaves(((3,), True)), COMPILERS[compiler], calls=2, after=write
    )


def _views_made_in_an_enable_grad_block(x0):
    with torch.enable_grad():
        m = x0.unbind(0)
        d = x0.diagonal()
    return m[2], m[3].squeeze(), d.t()  # with a grad_fn in eager under a no_grad call


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_made_in_an_enable_grad_block_of_a_no_grad_call(compiler: str) -> None:
    """Seed 22830: rebuilt under the caller's no_grad, the views had no path to the
    input: the caller's backward left the leaf's gradient None, eager's filled it."""
    fn = _views_made_in_an_enable_grad_block
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], ctx=torch.no_grad, calls=2)


def _view_of_a_transpose(x0):
    return x0.t().view(-1)  # eager: RuntimeError (torch's reference raised ValueError)


def _leaf_made_inside_beside_a_number(x0):
    t = x0.detach().requires_grad_()
    return t * 2, 3, None  # non-tensor outputs beside an output computed from the leaf


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_view_of_a_transpose, _leaf_made_inside_beside_a_number])
def test_errors_and_non_tensor_outputs_as_eager(fn: Any, compiler: str) -> None:
    """Soak seeds 20062 (the error's type) and 22475 (an AttributeError on the number)."""
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], calls=2)


# ------------------------------------------- products eager returns as tensors of their own

# Traced with the Python dispatcher, torch's matmul decomposition ends with ``.view``;
# eager's kernel with ``_unsafe_view``: no ``._base``, a version counter of its own.
PRODUCTS = {
    "batched_matmul": (lambda x, y: x @ y, leaves(((2, 3, 4), True), ((2, 4, 3), False))),
    "broadcast_matmul": (lambda x, y: x.matmul(y), leaves(((2, 3, 4), True), ((4, 5), True))),
    "matrix_vector_batched": (
        lambda x, y: torch.matmul(x, y),
        leaves(((2, 3, 4), True), ((4,), True)),
    ),
    "written_after": (lambda x, y: (x @ y).mul_(2), leaves(((2, 3, 4), True), ((2, 4, 3), True))),
    "max_pool1d_without_grad": (
        lambda x: torch.nn.functional.max_pool1d(x, 2),
        leaves(((2, 3, 8), False)),
    ),
    "max_pool1d_with_grad": (
        lambda x: torch.nn.functional.max_pool1d(x, 2) * 2,
        leaves(((2, 3, 8), True)),
    ),
    "returned_with_a_view": (
        lambda x, y: (lambda p: (p, p[0]))(x @ y),
        leaves(((2, 3, 4), True), ((2, 4, 3), False)),
    ),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(PRODUCTS))
def test_products_are_not_views(case: str, compiler: str) -> None:
    fn, make = PRODUCTS[case]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_max_pool1d_under_no_grad_is_not_a_view(compiler: str) -> None:
    fn = lambda x: torch.nn.functional.max_pool1d(x, 2)  # noqa: E731
    make = leaves(((2, 3, 8), True))
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, ctx=torch.no_grad)
