"""Soak finds about autograd's checks of the tensors a backward saved, each compared
with eager (``eager_oracle.assert_like_eager``): outputs, inputs and leaves written after
the call (eager's backward raises only where a node it runs saved the tensor, and still
runs the node that saved a leaf taken out of autograd), and views saved for the backward
that the function restrided or wrote. The seeds are the soak's
(``benches/fidelity_soak.py``), replayable with ``tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, DirtyMul, assert_like_eager, leaves


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


def _dirty_under_no_grad_then_saved(x0):
    with torch.no_grad():
        t2 = DirtyMul.apply(x0)  # eager's t2: an alias of x0 (its counter), not x0
    t3 = torch.addmm(x0, t2, x0)  # saves t2 (x0 requires grad)
    return x0 * 1, t2, t3.mT


def _dirty_under_no_grad_of_an_intermediate(x0):
    y = x0 * 1
    with torch.no_grad():
        t2 = DirtyMul.apply(y)
    return t2 * x0, y


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_dirty_under_no_grad_then_saved, _dirty_under_no_grad_of_an_intermediate]
)
@pytest.mark.parametrize("write", ["input", "output"])
def test_a_saved_alias_a_dirty_custom_function_made_under_no_grad(
    fn: Any, write: str, compiler: str
) -> None:
    """Soak seed 116276: applied under no_grad, a custom Function's output of an input it
    marked dirty is a new alias of the input sharing its counter; saved, then the input
    written after the call, eager's backward raises (ours ran: the saved alias was not
    known to be the input's)."""
    made: list[Any] = []

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        made.append(torch.randn(4, 4, dtype=torch.float64, requires_grad=True))
        return [made[-1]], [made[-1]]

    def write_after(outs: Any) -> None:
        with torch.no_grad():
            (made[-1] if write == "input" else outs[-1]).add_(1)

    assert_like_eager(fn, make, COMPILERS[compiler], after=write_after)


# ---------------- nodes leading nowhere: eager's backward runs them and checks what they saved
# ``torch.autograd.backward`` runs every node the outputs reach, also a chain whose edge is
# None (a view made under no_grad of a tensor that requires grad has no node): a write
# after the call to what such a node saved makes eager's backward raise. The trace's
# ``autograd.grad`` toward the inputs skipped them (soak 109962: no raise).


def _norm_of_a_no_grad_view(x0):
    with torch.no_grad():
        t1 = x0.t()  # requires grad (its base does), no node
    with torch.enable_grad():
        t3 = t1.mean().norm()  # norm saves its result
    return t3.detach(), t3


def _exp_of_a_no_grad_view(x0):
    with torch.no_grad():
        t1 = x0[1:]
    t2 = t1.exp()  # saves its result
    return t2, x0 * 2


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_norm_of_a_no_grad_view, _exp_of_a_no_grad_view])
@pytest.mark.parametrize("write", [0, 1, None])
def test_what_a_node_leading_nowhere_saved_is_checked(fn: Any, write: Any, compiler: str) -> None:
    def after(outs: Any) -> None:
        if write is not None:
            with torch.no_grad():
                outs[write].mul_(2)

    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], after=after, calls=2)


def _saved_view_of_an_output(x1, x2):
    t4 = torch.addmm(x2, x1, x2)
    t6 = t4.narrow(-1, 1, 2)
    return t6, t6.pow(2), t4, t4  # pow saves t6, a view of the output t4


def _saved_view_of_an_intermediate(x1, x2):
    t4 = x1 * x2
    t6 = t4.narrow(-1, 1, 2)
    return t6, t6.pow(2), t4.narrow(-1, 0, 1)  # two views of one intermediate


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    ("fn", "written"),
    [
        (_saved_view_of_an_output, 0),
        (_saved_view_of_an_output, 2),
        (_saved_view_of_an_output, 3),
        (_saved_view_of_an_intermediate, 0),
        (_saved_view_of_an_intermediate, 2),
    ],
)
def test_a_saved_output_rebuilt_as_a_view_is_checked(fn: Any, written: int, compiler: str) -> None:
    """Soak seed 225478: an output eager saves that the runtime rebuilds as a view (of
    another output, of an intermediate) was not checked, so a write after the call to
    it, its base or another view of that base gave a gradient where eager's backward
    raises "modified by an inplace operation"."""
    assert_like_eager(
        fn,
        leaves(((4, 4), True), ((4, 4), False)),
        COMPILERS[compiler],
        after=lambda outs: outs[written].mul_(2),
    )
