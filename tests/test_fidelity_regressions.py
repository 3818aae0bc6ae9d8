"""The fidelity issue's cases, each compared with eager PyTorch.

Each case was a silently wrong answer, a refusal of a program eager runs, or a crash;
each must observe what eager observes (``eager_oracle.assert_like_eager``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition
from eager_oracle import COMPILERS, DirtyMul, Half, assert_like_eager, leaf_clone, leaves


class HalfView(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view(-1)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g.view(2, 3) * 0.5


def _mul_return(a):
    a.mul_(2)
    return a


def _add_return(a):
    a.add_(1)
    return a


def _detach_then_mutate(a):
    tmp = a.detach()
    a.mul_(2)
    return a, tmp


def _detached_view_of_intermediate(x):
    x = x + 1
    a = x.transpose(0, 1)
    return a.detach(), a


def _views_and_detached_select(x):
    out = x * 2
    return out.view(-1), out, out[0].detach()


def _enable_grad_block(x):
    with torch.enable_grad():
        y = x * 2
    return x + 1, y


def _requires_grad_on_view(a):
    return a.view(-1).requires_grad_(True)


def _requires_grad_on_fresh(a):
    return (a * 2).requires_grad_(True), a + 1


def _add_grad_value(x, y):
    x.add_(y)
    return x * 2


def _autocast_off_block(a, b):
    with torch.autocast("cpu", enabled=False):
        return torch.mm(a, b)


def _t_on_input(a):
    a.t_()
    return a * 2


def _t_and_return(a):
    a.transpose_(0, 1)
    return a


def _unsqueeze_squeeze(a):
    a.unsqueeze_(0)
    b = a * 3
    a.squeeze_(0)
    return b


def _as_strided_input(a):
    a.as_strided_((3, 2), (1, 3))
    return a.sum(0)


def _detach_write_leaf(a):
    a.detach().mul_(2)
    return a * 3


def _unbind(a):
    return a.unbind(0)


def _split(a):
    return (a * 1).split(1, 0)


def _grad_mode_branch(x):
    return x * 2 if torch.is_grad_enabled() else x * 3


def _view_under_no_grad(x):
    with torch.no_grad():
        t = x[::2]
    return t, x * 1


def _requires_grad_on_input(x):
    x.requires_grad_()
    return x * 2


def _unreached_write(x0, x1):
    x1.zero_()
    return x0.sin()


def _twice(x):
    t = x * 2
    return t, t


def _t_and_detached(x):
    t = x * 2
    return t, t.detach()


def _detached_outputs(x, y):
    return x.detach(), y.detach().t(), y.detach().requires_grad_()


def _written_output(x):
    y = x * 2
    y.mul_(3)
    return y


CASES = {
    "1 mutated input returned (mul_)": (_mul_return, leaf_clone(3, 3), {}),
    "1 mutated input returned (add_)": (_add_return, leaf_clone(3, 3), {}),
    "2 detach then mutate": (_detach_then_mutate, leaf_clone(3, 3), {}),
    "3 custom Function returning its input": (
        lambda x: Half.apply(x),
        leaves(((3, 3), True)),
        {},
    ),
    "3 custom Function returning a view": (
        lambda x: HalfView.apply(x),
        leaves(((2, 3), True)),
        {},
    ),
    "4 detached view of an intermediate": (
        _detached_view_of_intermediate,
        leaves(((2, 3), True)),
        {},
    ),
    "4 views and a detached select": (_views_and_detached_select, leaves(((2, 3), True)), {}),
    "5 enable_grad under no_grad": (
        _enable_grad_block,
        leaves(((3,), True)),
        {"ctx": torch.no_grad},
    ),
    "6 requires_grad_ on a view of an input": (_requires_grad_on_view, leaves(((3,), False)), {}),
    "6 requires_grad_ on a fresh tensor": (_requires_grad_on_fresh, leaves(((3,), False)), {}),
    "7 x.add_(y), y requires grad": (
        _add_grad_value,
        leaves(((3,), False), ((3,), True)),
        {},
    ),
    "7 x.add_(y) inside enable_grad under no_grad": (
        lambda x, y: _enable_grad_block(_add_grad_value(x, y))[1],
        leaves(((3,), False), ((3,), True)),
        {"ctx": torch.no_grad},
    ),
    "8 autocast(enabled=False) inside autocast": (
        _autocast_off_block,
        lambda: ([torch.randn(4, 4), torch.randn(4, 4)], []),
        {"ctx": functools.partial(torch.autocast, "cpu", dtype=torch.bfloat16)},
    ),
    "10 in-place write to an unbind output": (
        _unbind,
        leaf_clone(3, 3),
        {"after": lambda outs: outs[0].mul_(2)},
    ),
    "10 in-place write to a split output": (
        _split,
        leaves(((2, 3), True)),
        {"after": lambda outs: outs[1].add_(1)},
    ),
    "11 t_() on an input that requires grad": (_t_on_input, leaf_clone(2, 3), {}),
    "11 transpose_() on an input that requires grad, returned": (
        _t_and_return,
        leaf_clone(2, 3),
        {},
    ),
    "11 unsqueeze_/squeeze_ on an input that requires grad": (
        _unsqueeze_squeeze,
        leaf_clone(2, 3),
        {},
    ),
    "11 as_strided_ on an input that requires grad": (_as_strided_input, leaf_clone(2, 3), {}),
    "11 t_() on a leaf that requires grad (eager raises)": (
        _t_on_input,
        leaves(((2, 3), True)),
        {},
    ),
    "12 a.detach().mul_(2) on a leaf": (_detach_write_leaf, leaves(((3,), True)), {}),
    "is_grad_enabled() inside, no input requires grad": (
        _grad_mode_branch,
        leaves(((2,), False)),
        {},
    ),
    "mark_dirty custom Function": (lambda x: DirtyMul.apply(x), leaf_clone(3), {}),
    "mark_dirty custom Function on a leaf (eager raises)": (
        lambda x: DirtyMul.apply(x),
        leaves(((3,), True)),
        {},
    ),
    "a view made under no_grad returned": (_view_under_no_grad, leaves(((4,), True)), {}),
    "requires_grad_() on an input": (_requires_grad_on_input, leaves(((3,), False)), {}),
    "an input written, no output depends on it": (
        _unreached_write,
        lambda: (lambda l0, l1: ([l0.clone(), l1.clone()], [l0, l1]))(
            torch.randn(3, dtype=torch.float64, requires_grad=True),
            torch.randn(3, dtype=torch.float64, requires_grad=True),
        ),
        {},
    ),
    "the same output twice": (_twice, leaves(((3,), True)), {}),
    "t and t.detach() under no_grad": (
        _t_and_detached,
        leaves(((3,), True)),
        {"ctx": torch.no_grad},
    ),
    "detached aliases of inputs": (_detached_outputs, leaves(((2, 2), False), ((2, 2), True)), {}),
    "an output written inside the function (version)": (_written_output, leaves(((3,), True)), {}),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(CASES))
def test_case_matches_eager(case: str, compiler: str) -> None:
    fn, make_args, kw = CASES[case]
    assert_like_eager(fn, make_args, COMPILERS[compiler], calls=2, **kw)


def _overlapping_views() -> tuple[list[Any], list[torch.Tensor]]:
    base = torch.randn(4, 4)
    return [base[:3], base[1:]], []


def _mul_and_t(a, b):
    a.mul_(2)
    b.t_()
    return a + 1


@pytest.mark.parametrize("compiler", list(COMPILERS)[:2])
def test_9_overlapping_views_written_and_transposed(compiler: str) -> None:
    assert_like_eager(_mul_and_t, _overlapping_views, COMPILERS[compiler], calls=2)


def _resize_copy_free(x, y):
    torch.ops.inductor.resize_storage_bytes_(x, y.numel() * y.element_size())
    x.copy_(y)
    out = x * 2
    torch.ops.inductor.resize_storage_bytes_(x, 0)
    return out


def _resize_copy(x, y):
    torch.ops.inductor.resize_storage_bytes_(x, y.numel() * y.element_size())
    x.copy_(y)
    return x + 1


def _empty_storage(requires_grad: bool) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.empty(4)
        x.untyped_storage().resize_(0)
        y = torch.arange(4.0, requires_grad=requires_grad)
        return [x, y], [y] if requires_grad else []

    return make


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("fn", [_resize_copy, _resize_copy_free])
def test_storage_resized_from_zero_bytes_like_fsdp(fn, keep: bool, requires_grad: bool) -> None:
    """An input with a 0-byte storage, resized inside the function, filled, maybe freed
    again (FSDP2's pattern): used to segfault; now equal to eager."""

    def compiler(f: Callable) -> Callable:
        return aotgrad.aot_function(f, aotgrad.nop, keep_inference_input_mutations=keep)

    assert_like_eager(fn, _empty_storage(requires_grad), compiler, calls=2)


# ------------------------------------------------------------ inputs written in the backward


class WriteSavedInBackward(torch.autograd.Function):
    """The backward updates a saved forward input that needs no grad (a running buffer)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(buf)
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (buf,) = ctx.saved_tensors
        buf.add_(1)
        buf.mul_(2)
        return g * buf, None


class WriteGradInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        g.mul_(3)
        return g


@torch.library.custom_op("aotgrad_test::scale_and_count", mutates_args=())
def scale_and_count(x: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    return x * 2


@scale_and_count.register_fake
def _(x: torch.Tensor, counter: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _count_setup(ctx: Any, inputs: tuple, output: Any) -> None:
    ctx.save_for_backward(inputs[1])


def _count_backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
    (counter,) = ctx.saved_tensors
    counter.add_(1)
    return g * 2, None


scale_and_count.register_autograd(_count_backward, setup_context=_count_setup)


BACKWARD_WRITES = {
    "custom Function writes a saved input": lambda x, buf: WriteSavedInBackward.apply(x, buf),
    "custom Function writes the incoming gradient": lambda x, buf: (
        WriteGradInBackward.apply(x) + buf
    ),
    "torch.library op's backward writes a saved input": lambda x, buf: scale_and_count(x, buf),
}


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", list(BACKWARD_WRITES))
def test_input_written_in_the_backward(case: str, compiler: str) -> None:
    assert_like_eager(
        BACKWARD_WRITES[case], leaves(((3,), True), ((3,), False)), COMPILERS[compiler], calls=2
    )


# ----------------------------------------------------- written inputs that overlap in memory


def _dynamic_aot(fn: Callable) -> Callable:
    return aotgrad.aot_function(fn, aotgrad.nop, dynamic=True)


def _dynamic_dynamo(fn: Callable) -> Callable:
    torch._dynamo.reset()
    return torch.compile(fn, backend="aotgrad_eager", dynamic=True)


class _AsModule(torch.nn.Module):
    def __init__(self, fn: Callable) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> tuple[Any, ...]:
        out = self.fn(*args)
        return out if isinstance(out, tuple) else (out,)


def _simplified(fn: Callable) -> Callable:
    """aot_module_simplified outside Dynamo, compiled for the first call's inputs."""
    box: dict[str, Any] = {}

    def call(*args: Any) -> Any:
        if "f" not in box:
            box["f"] = aotgrad.aot_module_simplified(_AsModule(fn), list(args), aotgrad.nop)
        out = box["f"](*args)
        return out[0] if len(out) == 1 else out

    return call


SYNTHETIC_COMPILERS = {
    **COMPILERS,
    "aot_function-dynamic": _dynamic_aot,
    "dynamo-aotgrad_eager-dynamic": _dynamic_dynamo,
    "aot_module_simplified": _simplified,
}


def _one_group(requires_grad: bool) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        leaf = torch.randn(4, 4, dtype=torch.float64, requires_grad=requires_grad)
        base = leaf.clone() if requires_grad else leaf
        return [base[:3], base[1:]], [leaf] if requires_grad else []

    return make


def _two_groups() -> tuple[list[Any], list[torch.Tensor]]:
    b1, b2 = torch.randn(4, 4), torch.randn(4, 4)
    return [b1[:3], b1[1:], b2[:3], b2[1:], torch.randn(3, 4)], []


def _write_one(a, b):
    a.mul_(2)
    return a + b


def _write_two_groups(a, b, c, d, e):
    a.mul_(2)
    d.add_(1)
    return a + b + c + d + e


@pytest.mark.parametrize("compiler", list(SYNTHETIC_COMPILERS))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_written_overlapping_inputs_one_group(compiler: str, requires_grad: bool) -> None:
    assert_like_eager(_write_one, _one_group(requires_grad), SYNTHETIC_COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", list(SYNTHETIC_COMPILERS))
def test_written_overlapping_inputs_two_groups_on_two_storages(compiler: str) -> None:
    assert_like_eager(_write_two_groups, _two_groups, SYNTHETIC_COMPILERS[compiler], calls=2)


def test_synthetic_base_recompiles_when_the_overlap_changes() -> None:
    """The members' layout is baked into the graph: another overlap is another entry."""
    g = aotgrad.aot_function(_write_one, aotgrad.nop, dynamic=True)
    for rows in (3, 2):
        base, ref = torch.randn(4, 4), None
        ref = base.clone()
        out = g(base[:rows], base[1 : rows + 1])
        ref_out = _write_one(ref[:rows], ref[1 : rows + 1])
        assert torch.equal(out, ref_out) and torch.equal(base, ref)
    assert g.compilations == 2


@pytest.mark.parametrize("partition_fn", [default_partition, min_cut_rematerialization_partition])
def test_output_written_inside_and_saved_for_backward_still_backpropagates(partition_fn) -> None:
    """An output written in place inside the function that the backward also reads (relu_
    saves its result): its version is left as saved, so autograd's check passes
    (regression: setting eager's count made the backward raise)."""

    def f(x):
        y = x + 1
        y.relu_()
        return y

    x = torch.randn(5, dtype=torch.float64, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    aotgrad.aot_function(f, aotgrad.nop, partition_fn=partition_fn)(x).sum().backward()
    f(xe).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)


def _member_made_to_require_grad(x3, x4):
    with torch.no_grad():
        x4[:, 1:3].copy_(x3.sum())  # x3, x4 overlap: passed as one synthetic base
    x4.requires_grad_(True)
    return x3 * 1, x4


def _output_from_member_made_to_require_grad(x3, x4):
    with torch.no_grad():
        x4[:, 1:3].copy_(x3.sum())
    x4.requires_grad_(True)
    return x3 * 1, x4 * 2


def _overlapping_rows() -> tuple[list[Any], list[torch.Tensor]]:
    b = torch.randn(8, 4, dtype=torch.float64)
    x3, x4 = b[0:4], b[2:6]
    return [x3, x4], [x4]  # x4.grad: filled by the backward once it requires grad


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_synthetic_base_member_made_to_require_grad(compiler: str) -> None:
    """``requires_grad_()`` on a member of a synthetic base reaches the caller's tensor
    (soak seeds 20011, 22367)."""
    assert_like_eager(_member_made_to_require_grad, _overlapping_rows, COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_output_from_a_member_made_to_require_grad(compiler: str) -> None:
    """Its gradient fills the caller's ``x4.grad``: the caller's tensor is passed into
    the compiled Function for the traced member (``trace.InnerLeaf.member``); aotgrad
    refused this by name before (soak seed 53761)."""
    assert_like_eager(
        _output_from_member_made_to_require_grad, _overlapping_rows, COMPILERS[compiler], calls=2
    )


def _matmul_with_a_scalar(x):
    return (x @ x.sum(),)


def _slice_of_a_scalar(x):
    return (x.sum()[1:],)


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if c.startswith("aot_function")])
@pytest.mark.parametrize("fn", [_matmul_with_a_scalar, _slice_of_a_scalar])
def test_errors_torch_decompositions_word_otherwise_are_eagers(fn: Any, compiler: str) -> None:
    """torch's decompositions raise AssertionError / RuntimeError where eager raises
    RuntimeError / IndexError (soak seeds 24777, 21302): the caller gets eager's.
    (Through Dynamo, its own fake run raises first, with ``backend="eager"`` too.)"""
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler])


# ------------------ one detach() result returned twice beside the tensor it detaches
# One graph value for ``t`` and ``t.detach()``: the runtime detached the repeated output
# after it had copied the first occurrence's object, so the two occurrences were
# distinct objects, and under no_grad the second was ``t`` itself (soak 53241).


def _detached_twice_around(x):
    t = x.tanh()
    d = t.detach()
    return d, t, d


def _tensor_twice_around(x):
    t = x * 2
    d = t.detach()
    return t, d, t


def _detached_twice_first(x):
    t = x.sin()
    d = t.detach()
    return d, d, t, t.detach()


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_detached_twice_around, _tensor_twice_around, _detached_twice_first]
)
@pytest.mark.parametrize("ctx", [torch.no_grad, functools.partial(torch.enable_grad)])
def test_an_output_returned_twice_is_one_object(fn: Any, ctx: Any, compiler: str) -> None:
    assert_like_eager(fn, leaf_clone(4, 4), COMPILERS[compiler], ctx=ctx, calls=2)
