"""``as_strided`` and ``out=`` resizes on inputs' storages, compared with eager
(``eager_oracle.assert_like_eager``): what functionalization alone gets wrong or refuses
(an ``as_strided`` after the first step of a written view chain, ``as_strided_scatter``
into a non-contiguous base that requires grad, a storage offset read after the input was
written), and the writes aotgrad refuses because a compiled graph would lose them.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, DirtyMul, Half, ViewOf, assert_like_eager, leaf_clone


@pytest.fixture(autouse=True)
def _quiet_resize_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="An output with one or more elements")
        yield


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


def _columns(rg: bool) -> Any:
    """Two disjoint column views of one clone of a leaf: ``b[:, :4]``, ``b[:, 4:]``."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(4, 8).requires_grad_(rg)
        b = leaf.clone()
        return [b[:, :4], b[:, 4:]], [leaf] if rg else []

    return make


def _rows_at_offset(rg: bool) -> Any:
    """One input at storage offset 8: ``b[2:6]`` of an (8, 4) clone."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(8, 4).requires_grad_(rg)
        return [leaf.clone()[2:6]], [leaf] if rg else []

    return make


def _transposed(rg: bool) -> Any:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(4, 4).requires_grad_(rg)
        x = torch.empty_strided((4, 4), (1, 4), dtype=torch.float64)
        with torch.no_grad():
            x.copy_(leaf)
        return [x, _r(4, 4)], []

    return make


# ------------------------------------------------- out= resizes written through a view


def _out_resized_past_its_view(x1, x0):
    # x1 becomes contiguous; x1[:, 1:3] resized to [4, 1] covers elements 1..4 of the
    # storage, two of them outside the view: eager writes them all
    t2 = x0.logsumexp(-1, keepdim=True)
    x1.transpose_(0, 1)
    with torch.no_grad():
        torch.sin(t2, out=x1[:, 1:3])
    return (x1,)


def _out_scalar_into_a_row(x1, x0):
    x1.transpose_(0, 1)
    with torch.no_grad():
        torch.mul(x0.sum(), 2, out=x1[1])
    return x1 + 0


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_out_resized_past_its_view, _out_scalar_into_a_row])
@pytest.mark.parametrize("ctx", [torch.no_grad, contextlib.nullcontext], ids=["no_grad", "grad"])
def test_out_resize_after_a_metadata_change(fn: Any, ctx: Any, compiler: str) -> None:
    assert_like_eager(fn, _transposed(False), COMPILERS[compiler], calls=2, ctx=ctx)


# ------------------------------------------- out= resizes laid out as eager's kernels lay them


def _out_sin_of_a_transposed_input_into_its_view(x0):
    # eager resizes [1, 4, 4] to [4, 4] with the result's strides (1, 4): every element
    # of x0 becomes sin(x0) where it is (soak 29260); contiguous strides would transpose
    t1 = x0.unsqueeze(0)
    torch.sin(x0.clone(), out=t1)
    return t1, t1.narrow(-1, 1, 2), x0


def _out_abs_permuted_into_a_row_view(x0):
    # abs.out is no structured kernel, but TensorIterator restrides its resized out too
    v = x0.t().reshape(-1)[:16].unsqueeze(0)  # x0 is column-major: a view
    with torch.no_grad():
        torch.abs(x0.t().clone().t(), out=v)  # the result is column-major too
    return v, x0 * 1


def _out_mm_column_major_into_an_input(x0):
    # mm lays its result as its operands suggest: the resized out is laid alike
    with torch.no_grad():
        torch.mm(x0.t().clone(), x0.clone(), out=x0.t().reshape(2, 8)[:1])
    return x0 * 1


def _out_add_column_major_into_an_input_view(x0):
    t = x0.t().reshape(16)[2:14].unsqueeze(1)  # [12, 1] resized to [4, 2], strides (1, 4)
    with torch.no_grad():
        torch.add(x0.clone()[:, :2], 1, out=t)
    return t, x0 + 0


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _out_sin_of_a_transposed_input_into_its_view,
        _out_abs_permuted_into_a_row_view,
        _out_mm_column_major_into_an_input,
        _out_add_column_major_into_an_input_view,
    ],
)
@pytest.mark.parametrize("ctx", [torch.no_grad, contextlib.nullcontext], ids=["no_grad", "grad"])
def test_out_resize_takes_the_result_layout(fn: Any, ctx: Any, compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.empty_strided((4, 4), (1, 4), dtype=torch.float64).copy_(_r(4, 4))
        return [x], []

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, ctx=ctx)


# ------------------------- views of an intermediate taken before its metadata changed


def _squeezed_before_transpose(x0):
    t1 = torch.maximum(x0, x0)
    t2 = t1.squeeze()  # taken before t1.transpose_: keeps the old layout (soak 31484)
    t1.transpose_(0, 1)
    return (t2.squeeze(), t1[1:], t2.detach())


def _sliced_before_and_after_unsqueeze(x0):
    t1 = x0 * 2
    a = t1[1:]
    t1.unsqueeze_(0)
    b = t1[0, 1:]
    t1.squeeze_(0)
    return a, b, t1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_squeezed_before_transpose, _sliced_before_and_after_unsqueeze])
@pytest.mark.parametrize("rg", [True, False])
def test_views_taken_before_a_metadata_change_keep_their_layout(
    fn: Any, rg: bool, compiler: str
) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = _r(4, 4).requires_grad_(rg)
        return [x], [x] if rg else []

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


# ------------------------------------------ strides of size-1 dims of rebuilt views


def _strided_slice_of_a_split_output(x0):
    a, _ = x0.split(2)
    return a.view_as(a), a[::2]  # [1, 4] with stride (8, 1) in eager (soak 33855)


def _strided_slice_of_an_unbind_output(x0):
    a, _, _, _ = x0.unbind(0)
    return a[::4].unsqueeze(0), a


def _view_as_of_a_chunk_of_a_reduction(x0):
    t1 = x0.sum(0, keepdim=True)
    _, m = t1.chunk(2, -1)
    return (m.view_as(m),)  # [1, 2]: eager's view lays the size-1 dim (2, 1) (soak 33212)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _strided_slice_of_a_split_output,
        _strided_slice_of_an_unbind_output,
        _view_as_of_a_chunk_of_a_reduction,
    ],
)
def test_views_of_multi_output_views_keep_size_one_strides(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], calls=2)


def _leaf_4x4() -> tuple[list[Any], list[torch.Tensor]]:
    x = _r(4, 4).requires_grad_()
    return [x], [x]


def _unsqueezed_custom_view(x0):
    t = Half.apply(x0)
    return t.unsqueeze(0).transpose(0, 1), t.view(-1)  # (4, 1, 4) strides (4, 16, 1)


def _expanded_custom_view(x0):
    t = ViewOf.apply(x0[0].unsqueeze(0).expand(2, 4))
    return t, t.mT, t.view_as(t)  # stride (0, 1): the size-1 dim's stride survives


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_unsqueezed_custom_view, _expanded_custom_view])
@pytest.mark.parametrize("make", [leaf_clone(4, 4), _leaf_4x4], ids=["clone", "leaf"])
def test_views_of_custom_function_outputs_keep_size_one_strides(
    fn: Any, make: Any, compiler: str
) -> None:
    """A custom Function's view of an input, viewed further: the runtime rebuilt it
    through another custom Function, whose output autograd makes ``view_as`` of it,
    recomputing the strides of size-1 dims (soak 35890, 33606, 37981)."""
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


# ----------------------------------------------------------- as_strided of a view


def _as_strided_of_a_view_written(x):
    t = (x * 2)[1:]
    v = t.as_strided((2, 2), (4, 1))
    v.mul_(2)
    return t, v


def _as_strided_of_a_split_output(x):
    a, _ = x.split(2)
    v = a.as_strided((2, 2), (1, 2))
    with torch.no_grad():
        v.t().mul_(3)
    return x + 0


def _as_strided_of_an_input_view_written(x):
    v = x[1:3].as_strided((2, 2), (1, 2))
    with torch.no_grad():
        v.add_(1)
    return x * 1, v


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _as_strided_of_a_view_written,
        _as_strided_of_a_split_output,
        _as_strided_of_an_input_view_written,
    ],
)
@pytest.mark.parametrize("rg", [True, False])
def test_as_strided_of_a_view_is_taken_from_its_base(fn: Any, rg: bool, compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(4, 4).requires_grad_(rg)
        return [leaf.clone()], [leaf] if rg else []

    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _write_split_output_through_as_strided(x):
    a, _ = x.split(2)
    a.as_strided((2, 2), (1, 2)).mul_(2)  # eager: a view of one of several outputs
    return x


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_as_strided_of_a_split_output_raises_as_eager(compiler: str) -> None:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(4, 4).requires_grad_(True)
        return [leaf.clone()], [leaf]

    assert_like_eager(_write_split_output_through_as_strided, make, COMPILERS[compiler])


# --------------------------------- as_strided_scatter into a non-contiguous input


def _restrided_column_view_written(x3, x4):
    x3.as_strided_((4, 4), (8, 1))  # the same elements, other geometry
    t = x3.detach()
    with torch.no_grad():
        t[1:3].zero_()
    return x3 * 1, x4 + 0


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("rg", [True, False])
def test_restrided_non_contiguous_input_written(rg: bool, compiler: str) -> None:
    assert_like_eager(_restrided_column_view_written, _columns(rg), COMPILERS[compiler], calls=2)


# ------------------------------------------ storage offsets after the input was written


def _own_offset_after_a_write(x):
    x.mul_(2)  # the traced value now starts at offset 0, the caller's at 8
    return x.as_strided((2, 2), (1, 2)) * 1, x.as_strided((2, 2), (1, 2))


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_as_strided_after_a_write_reads_the_callers_elements(compiler: str) -> None:
    assert_like_eager(
        _own_offset_after_a_write, _rows_at_offset(False), COMPILERS[compiler], calls=2
    )


# ------------------------------- a written input that requires grad keeps its geometry
# The function runs on a copy of such an input; a dense copy at offset 0 made
# as_strided_ with the caller's offset, or into a column slice's gaps, read other
# elements than eager (twice-called fidelity programs, seed 20063).


def _gapped(rg: bool) -> Any:
    """An (2, 2) input with strides (4, 1) over a 4x4 clone: elements 2, 3, 6 are gaps."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = _r(4, 4).requires_grad_(rg)
        x = leaf.clone()
        x.as_strided_((2, 2), (4, 1))
        return [x], [leaf] if rg else []

    return make


def _restrided_to_its_own_geometry(x):
    x.as_strided_((2, 2), (4, 1))
    return x * 2


def _restrided_into_its_gaps(x):
    x.as_strided_((2,), (1,), 2)
    return x * 2


def _restrided_at_the_callers_offset(x):
    x.as_strided_((2, 2), (4, 1), 8)
    return x * 2


def _viewed_at_the_callers_offset_then_written(x):
    y = x.as_strided((2, 2), (4, 1), 8)
    x.mul_(2)
    return y + 0, x * 1


def _viewed_then_written_then_returned(x):
    y = x.as_strided((2, 2), (4, 1), 8)
    x.mul_(2)
    return y  # not read after the write: rebuilt in the caller's storage (seed 37421)


def _written_through_its_as_strided_view(x):
    y = x.as_strided((2, 2), (4, 1), 8)
    y.mul_(2)  # scattered into the input's value at the caller's coordinates
    return y + 0, x * 1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn, make",
    [
        (_written_through_its_as_strided_view, _rows_at_offset),
        (_viewed_then_written_then_returned, _rows_at_offset),
        (_restrided_to_its_own_geometry, _gapped),
        (_restrided_into_its_gaps, _gapped),
        (_restrided_at_the_callers_offset, _rows_at_offset),
        (_viewed_at_the_callers_offset_then_written, _rows_at_offset),
    ],
    ids=[
        "written_through_it",
        "returned",
        "own_geometry",
        "into_gaps",
        "callers_offset",
        "viewed_then_written",
    ],
)
@pytest.mark.parametrize("rg", [True, False])
@pytest.mark.parametrize("ctx", [torch.no_grad, contextlib.nullcontext], ids=["no_grad", "grad"])
def test_a_restrided_input_reads_the_callers_elements(
    fn: Any, make: Any, rg: bool, ctx: Any, compiler: str
) -> None:
    """Or is refused, where the traced value of a written input would not lie as the
    caller's tensor does: an as_strided view of it taken before the write, unless the
    function runs on a copy (the input requires grad, called with grad on). Dynamo runs
    that view apart from the write."""
    kw = dict(ctx=ctx, calls=2)
    if (
        fn is _viewed_at_the_callers_offset_then_written
        and (not rg or ctx is torch.no_grad)
        and compiler.startswith("aot_function")
    ):
        with ctx(), pytest.raises(UnsupportedError, match="as_strided view of it was taken"):
            aotgrad.aot_function(fn, aotgrad.nop)(*make(rg)()[0])
        with ctx():
            fn(*make(rg)()[0])  # eager runs it
        return
    assert_like_eager(fn, make(rg), COMPILERS[compiler], **kw)


# ------------------------------------------------------------ refused, nothing written


def _view_past_the_input_then_a_write(x):
    y = x.as_strided((4, 4), (4, 1), 0)  # rows 0..3 of the storage; x is rows 2..5
    x.add_(1)  # traced, y would be rebuilt from x's own value (blind test p43)
    return y * 3


def _explicit_offset_after_a_write(x):
    x.mul_(2)  # torch's AOT Autograd reads elements 8 places off here
    return x.as_strided((2, 2), (1, 2), 9) * 1


def _view_restrided_after_a_write(x):
    x.mul_(2)
    return x[1].as_strided((2, 2), (1, 2)) * 1


def _read_past_a_written_input(x):
    x.mul_(2)
    return x.as_strided((2, 2), (1, 2), 26) * 1


@pytest.mark.parametrize(
    "fn, make",
    [
        (_read_past_a_written_input, lambda: [_r(8, 4)[2:6]]),
        (_explicit_offset_after_a_write, lambda: [_r(8, 4)[2:6]]),
        (_view_past_the_input_then_a_write, lambda: [_r(8, 4).requires_grad_().clone()[2:6]]),
        (_view_restrided_after_a_write, lambda: [_r(8, 4)[2:6]]),
    ],
    ids=[
        "read_past_a_written_input",
        "explicit_offset_after_a_write",
        "view_past_the_input_then_a_write",
        "view_restrided_after_a_write",
    ],
)
def test_lost_bytes_are_refused_and_nothing_is_written(fn: Any, make: Any) -> None:
    args = make()
    storage = args[0]._base.clone()
    with pytest.raises(UnsupportedError, match="not supported"):
        aotgrad.aot_function(fn, aotgrad.nop)(*args)
    assert torch.equal(args[0]._base, storage)
    fn(*make())  # eager runs it


def _chain_after_metadata_change(x):
    x.squeeze_(0)
    v = x.as_strided((2, 2), (1, 2))
    v.mul_(2)
    return x


def test_torch_ban_on_as_strided_chains_runs_eagerly_with_a_warning() -> None:
    """functionalization cannot trace it; eager runs it: the call is replayed eagerly
    (``EagerRefusal``), its warning naming the gap (soak 110762)."""
    x = _r(4, 4)
    got = x.clone()
    with pytest.warns(aotgrad.errors.EagerReplayWarning, match="as_strided of a view"):
        out = aotgrad.aot_function(_chain_after_metadata_change, aotgrad.nop)(got)
    want = _chain_after_metadata_change(x.clone())
    assert out is got and torch.equal(got, want) and got.stride() == want.stride()


# ------------------------------- a leaf input written by mark_dirty, then detached


def _dirty_leaf_then_detach_(x0):
    t1 = DirtyMul.apply(x0)  # eager raises here: x0 is a leaf that requires grad
    t1.detach_()
    return t1.detach()


def _dirty_leaf_then_flag_off(x0):
    DirtyMul.apply(x0)
    x0.requires_grad_(False)
    return x0 * 1


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_dirty_leaf_then_detach_, _dirty_leaf_then_flag_off])
def test_leaf_written_by_mark_dirty_raises_as_eager_after_it_left_autograd(
    fn: Any, compiler: str
) -> None:
    # (a custom Function, not as_strided: the same trace-time checks, kept beside them)
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = _r(3).requires_grad_(True)
        return [x], [x]

    assert_like_eager(fn, make, COMPILERS[compiler])


# ------------------ views of an input made before (or after) its metadata is changed


def _view_then_as_strided_(x):
    t = x[::2]
    x.as_strided_((2, 2), (4, 1))
    return (t,)


def _view_then_t_(x):
    t = x[::2]
    x.t_()
    return (t, x)


def _view_then_t_then_read(x):
    t = x[::2]
    x.t_()
    return (t * 1,)


def _written_view_then_as_strided_(x):
    x.mul_(2)
    t = x[::2]
    x.as_strided_((2, 2), (4, 1))
    return (t,)


def _written_then_as_strided_then_view(x):
    x[:, 1:3].fill_(0.25)
    x.as_strided_((2, 2), (4, 1))
    return (x[1:], x.sum())


def _written_as_strided_read(x):
    x.mul_(3)
    x.as_strided_((2, 2), (4, 1))
    return (x * 2,)


def _rows_of_a_clone() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = _r(8, 4).requires_grad_(True)
    return [leaf.clone()[4:]], [leaf]


def _a_clone() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = _r(4, 4).requires_grad_(True)
    return [leaf.clone()], [leaf]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _view_then_as_strided_,
        _view_then_t_,
        _view_then_t_then_read,
        _written_view_then_as_strided_,
        _written_then_as_strided_then_view,
        _written_as_strided_read,
    ],
)
@pytest.mark.parametrize("make", [_rows_of_a_clone, _a_clone])
def test_input_restrided_in_place_keeps_eagers_gradients(fn: Any, make: Any, compiler: str) -> None:
    """An input that is a view in the caller: its ``as_strided_`` leaves its base's history
    alone, and gradients reach every element written or viewed (aotgrad's traced input was
    a base, whose ``as_strided_`` dropped the gradient of the elements it left out).
    Views made before the change are eager's (rebuilt from the input as it was), read
    after it too (autograd rebuilt them by replaying their ops on the transposed input:
    transposed gradients)."""
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _relaid_then_saved(x):
    x.as_strided_((2, 2), (4, 1))
    x.diagonal().mul_(3)
    x.relu_()  # saves its output: x
    return (x[0],)


def _leaf_unsqueezed_under_no_grad(x):
    with torch.no_grad():
        x.unsqueeze_(0)
    return (x.t(), x.detach())


def _a_scalar_leaf() -> tuple[list[Any], list[torch.Tensor]]:
    x = torch.randn((), dtype=torch.float64, requires_grad=True)
    return [x], [x]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_restrided_input_saved_then_written_by_the_caller_raises_as_eager(compiler: str) -> None:
    """The trace's view of a restrided input is still the input: what the backward saves
    of it is checked against the caller's writes after the call (eager's backward raises)."""
    assert_like_eager(
        _relaid_then_saved, _a_clone, COMPILERS[compiler], after=lambda outs: outs[0].mul_(2)
    )


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_leaf_restrided_under_no_grad_gets_a_gradient_of_its_new_shape(compiler: str) -> None:
    assert_like_eager(_leaf_unsqueezed_under_no_grad, _a_scalar_leaf, COMPILERS[compiler])


def _restrided_then_detached(x):
    y = x * 2
    x.unsqueeze_(0)
    x.detach_()
    return (y, x.dim())


def _written_restrided_then_detached(x):
    x.mul_(2)
    x.t_()
    x.detach_()
    return (x * 1,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_restrided_then_detached, _written_restrided_then_detached])
def test_input_restrided_then_detached_runs_as_eagers(fn: Any, compiler: str) -> None:
    """The trace sees a restrided input as a view of its clone, except one the function
    ``detach_()``es (eager's is a base, which it may detach in place; a view may not)."""
    assert_like_eager(fn, _a_clone, COMPILERS[compiler], calls=2)
