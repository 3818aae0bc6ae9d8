"""Blind programs over ``TwoTensor`` inputs (and TwoTensors of TwoTensors or of
wrapper subclasses): each runs eagerly and through aotgrad, comparing outputs, the inputs
after the call and every leaf's gradient (see ``subclass_blind_harness``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.testing._internal.subclasses import WrapperSubclass
from torch.testing._internal.two_tensor import TwoTensor

from eager_oracle import SaveOut
from subclass_blind_harness import (
    _Double,
    _DoubleInPlace,
    _nested_two,
    _two,
    _write_first_output,
    check_program,
    mk,
    registry,
)

# (program, entry) -> why it differs from eager (filled from the runs)
XFAIL: dict[tuple[str, str], str] = {
    ("t_meta_t_", "aotgrad_eager"): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_transpose_",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_unsqueeze_",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_meta_and_write",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_requires_grad_on_output",
        "aot_function",
    ): "requires_grad_() on an output made in the function: output is not a leaf (eager: leaf)",
    (
        "t_requires_grad_on_output",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_with_wrapper_subclass",
        "aot_function",
    ): "backward raises UnsupportedError: gradient of WrapperSubclass output arrives as TwoTensor",
    (
        "t_with_wrapper_subclass",
        "aotgrad_eager",
    ): "backward raises UnsupportedError: gradient of WrapperSubclass output arrives as TwoTensor",
    (
        "t_aliased_inputs_write_view",
        "aot_function",
    ): "TwoTensor base and its view as inputs, view written: UnsupportedError (not seen as views of one tensor)",
    (
        "t_aliased_inputs_write_view",
        "aotgrad_eager",
    ): "TwoTensor base and its view as inputs, view written: UnsupportedError (not seen as views of one tensor)",
    (
        "t_custom_function_mark_dirty",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    (
        "t_requires_grad_on_input",
        "aotgrad_eager",
    ): "Dynamo refuses the program (Unsupported); aot_eager too",
    ("t_meta_t_", "aotgrad"): "Dynamo refuses t_ on a TwoTensor input (Unsupported); aot_eager too",
}

PROGRAMS, program = registry()


# ----------------------------------------------------------------------------- programs


# TwoTensor: inputs that are leaves, clones of leaves, without grad


@program(mk("T", "T"), mk("T", "T", seed=1))
def t_leaves(x, y):
    return (x * y).sin() + x


@program(mk("Tc"))
def t_clone_of_leaf(x):
    return x.exp() * 2


@program(mk("T0", "T"))
def t_one_without_grad(x, y):
    return x * y, x + 1


@program(mk("T0", "T0"))
def t_no_grad_inputs(x, y):
    return x.mm(y.t()).relu()


# TwoTensor: written in place


@program(mk("Tc"))
def t_write_whole(x):
    x.mul_(2)
    return x.sin()


@program(mk("Tc"))
def t_write_slice(x):
    x[0].add_(1)
    return x * 2


@program(mk("Tc"))
def t_write_transposed_view(x):
    x.t().mul_(3)
    return x.sum(0)


@program(mk("Tc"))
def t_write_under_no_grad(x):
    with torch.no_grad():
        x.add_(1)
    return x * x


@program(mk("T0", "T"))
def t_write_value_requiring_grad(x, y):
    x.copy_(y * 2)
    return x.cos()


@program(mk("T0", "T"))
def t_write_slice_value_requiring_grad(x, y):
    x[1:].add_(y[1:])
    return x.sum()


@program(mk("T"))
def t_write_leaf_raises(x):
    x.add_(1)
    return x * 2


@program(mk("T"))
def t_write_leaf_under_no_grad(x):
    with torch.no_grad():
        x.mul_(0.5)
    return x * 2


@program(mk("Tc"))
def t_write_and_return_input(x):
    x.add_(1)
    return x


@program(mk("T0"))
def t_write_no_grad_input(x):
    x.mul_(3)
    return x + 1


# TwoTensor: metadata mutation


@program(mk("Tc"))
def t_meta_t_(x):
    x.t_()
    return x * 2


@program(mk("T0"))
def t_meta_transpose_(x):
    x.transpose_(0, 1)
    return x + 1


@program(mk("Tc"))
def t_meta_unsqueeze_(x):
    x.unsqueeze_(0)
    return x.sum()


@program(mk("T0"))
def t_meta_and_write(x):
    x.t_()
    x[0].add_(1)
    return x.clone()


# TwoTensor: outputs that are the input or its views, several, detached, mixed


@program(mk("T"), mk("T0"))
def t_return_input(x):
    return x


@program(mk("Tc"))
def t_return_input_and_result(x):
    return x, x * 2


@program(mk("Tc"))
def t_view_as(x):
    return x.view_as(x)


@program(mk("Tc"))
def t_index0(x):
    return x[0]


@program(mk("Tc"), mk("T"))
def t_transpose_out(x):
    return x.transpose(0, 1)


@program(mk("T", "T"))
def t_several_outputs(x, y):
    return x.sin(), x.cos() * y, (x + y).sum()


@program(mk("T"))
def t_detached_outputs(x):
    return x.detach(), x.sin().detach(), x * 2


@program(mk("T", "T0", "T"))
def t_from_several_inputs(x, y, z):
    return torch.cat([x, y, z]), torch.stack([x * z, y])


@program(mk("T", "P0"))
def t_mixed_plain_without_grad(x, p):
    return x * p + p.sum(), p * 2


@program(mk("T", "P"), refusal_ok=True)
def t_mixed_plain_with_grad(x, p):
    return x * p + p.sin()


@program(mk("T0"))
def t_requires_grad_on_output(x):
    y = x * 2
    y.requires_grad_()
    return y, y * 3


@program(mk("T", "W"))
def t_with_wrapper_subclass(x, w):
    return x.sin() * 2, (w * 3).exp().sum(1)


@program(mk(("T", (2, 3))))
def t_nested_two_tensor_mm(x):
    inner = TwoTensor(x, x * 2)
    return (inner * inner).mm(inner.t())


@program(mk("T"))
def t_custom_function(x):
    return _Double.apply(x).sin()


@program(mk("Tc"))
def t_custom_function_saving(x):
    return SaveOut.apply(x * 0.5) + x


# TwoTensor: second calls


@program(mk("T"), mk("T0"), mk("T"))
def t_second_call_requires_grad(x):
    return x.tanh() * x


@program(mk("T"), mk(("T", (5, 2)), seed=2), mk(("T", (3, 4, 2)), seed=3))
def t_second_call_shapes(x):
    return (x * x).sum(0)


@program(mk("Tc"), mk("T0"), mk("Tc", seed=4))
def t_second_call_writes(x):
    x.mul_(2)
    return x + 1


# TwoTensor: calls under no_grad / inference_mode


@program(mk("T", "T"), ctx=torch.no_grad)
def t_under_no_grad(x, y):
    return x * y + x


@program(mk("T"), ctx=torch.inference_mode)
def t_under_inference_mode(x):
    return x.sin()


@program(mk("T0"), ctx=torch.inference_mode)
def t_write_under_inference_mode(x):
    x.add_(1)
    return x * 2


@program(_nested_two(True), _nested_two(False, seed=1))
def tt_nested_write(x):
    x.add_(1)
    return (x * x).sum(0), x.t()


@program(_nested_two(True))
def tt_nested_views(x):
    return x[0], x.view_as(x), x.detach()


@program(mk("Tc"), post=_write_first_output)
def t_caller_writes_returned_view(x):
    return x[1], x * 2


def _write_first_output_with_grad(outs: list[Any], args: list[Any]) -> None:
    outs[0].mul_(10)


@program(mk("Tc"), post=_write_first_output_with_grad)
def t_caller_writes_returned_view_with_grad(x):
    return x[1]


@program(mk("Tc"), post=_write_first_output)
def t_caller_writes_returned_input(x):
    return x


def _base_and_view(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((4, 3), True)
        base = leaf.clone()
        return [base, base[1:]], [leaf]

    return make


@program(_base_and_view())
def t_aliased_inputs_write_view(b, v):
    v.mul_(2)
    return b.sin()


@program(mk("Tc"), mk("T0"), mk("Tc", seed=4))
def t_second_call_writes_no_grad_block(x):
    with torch.no_grad():
        x.add_(1)
    return x * x


@program(mk("T0", "T"), mk("T", "T", seed=1), mk("T0", "T", seed=2))
def t_second_call_leaf_raises_then_not(x, y):
    x.add_(y)
    return x.sum()


def _wrapped_two(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        x = TwoTensor(WrapperSubclass(torch.randn(3, 2)), WrapperSubclass(torch.randn(3, 2)))
        x.requires_grad_()
        return [x], [x]

    return make


@program(_wrapped_two())
def t_two_tensor_of_wrappers(x):
    return (x * x).sum(0), x.t()


@program(mk("T0"), mk("T0", seed=1))
def t_no_grad_write_and_view(x):
    x[0].zero_()
    return x[1:], x.sum()


class _WithIndex(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = torch.zeros(x.shape[0], dtype=torch.int64)
        ctx.mark_non_differentiable(idx)
        return x.sin(), idx

    @staticmethod
    def backward(ctx, g, _):
        return g * 3


@program(mk("Tc"))
def t_custom_function_mark_dirty(x):
    return _DoubleInPlace.apply(x) + 1


@program(mk("T"))
def t_custom_function_non_differentiable(x):
    y, idx = _WithIndex.apply(x)
    return y, idx


@program(mk("T"))
def t_same_output_twice(x):
    y = x * 2
    return y, y, y[0]


@program(mk("Tc"))
def t_detach_then_write(x):
    x.detach().add_(1)
    return x * 2


@program(mk("T0"))
def t_requires_grad_on_input(x):
    x.requires_grad_()
    return x * 2


@program(mk("T", "T"))
def t_where(x, y):
    return torch.where(x > 0, x, y * 2)


@program(mk("T"), _nested_two(True, seed=1), mk(("T0", (2, 2)), seed=2))
def t_second_call_other_layout(x):
    return x.exp() - x


@program(mk("Tc", "T"))
def t_write_then_view_output(x, y):
    x.mul_(y)
    return x[0], x.t()


@program(mk(("T", (2, 3, 4))))
def t_bmm_and_reductions(x):
    return torch.bmm(x, x.transpose(1, 2)).mean(-1), x.amax(1), x.norm()


@program(mk("T"))
def t_leaf_write_under_no_grad_returned(x):
    with torch.no_grad():
        x.mul_(2)
    return x, x * 3


@program(mk("T", "T0"))
def t_view_of_no_grad_input(x, y):
    return y[0], x * 2, y.expand(2, 3, 4)


def _view_input(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((4, 3), True)
        return [leaf.clone().t()], [leaf]

    return make


@program(_view_input(), _view_input(seed=1))
def t_input_is_view_written(x):
    x.add_(1)
    return x * x


@program(mk(("T", (2, 3))), mk(("T", (2, 3)), seed=1))
def t_chain_of_views(x):
    y = x * 2
    v = y.view(3, 2)[1:].t()
    return v, y


@program(mk("T", ("T0", (4,))))
def t_broadcast_two_subclasses(x, y):
    return x * y, (x + y).mean(0)


@program(mk(("T", (4, 4))))
def t_matmul_softmax(x):
    return (x @ x.t()).softmax(-1), torch.linalg.vector_norm(x, dim=1)


def _inner_aliased(view: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(0)
        t = torch.randn(3)
        return [TwoTensor(t, t.view(3) if view else t)], []

    return make


@program(_inner_aliased(False), _inner_aliased(True))
def t_inner_aliased_written(x):
    x.mul_(2)
    return x + 1, x[0].clone()


@program(mk("Tc", "T"), ctx=torch.no_grad)
def t_write_clone_under_no_grad_call(x, y):
    x.add_(y)
    return x * 2


@program(mk("Tc"), ctx=torch.inference_mode)
def t_write_clone_under_inference_mode(x):
    x.mul_(2)
    return x.cos()


def _same_twice(seed: int = 0) -> Callable[[], tuple[list[Any], list[Any]]]:
    def make() -> tuple[list[Any], list[Any]]:
        torch.manual_seed(seed)
        leaf = _two((3,), True)
        x = leaf.clone()
        return [x, x], [leaf]

    return make


@program(_same_twice())
def t_duplicate_written_input(x, y):
    x.add_(1)
    return x * y


# ----------------------------------------------------------------------------- tests


CASES = [(n, e) for n, p in PROGRAMS.items() for e in p.entries]
INDUCTOR = [
    "t_leaves",
    "t_write_whole",
    "t_meta_t_",
    "t_several_outputs",
    "t_write_under_no_grad",
    "t_custom_function_saving",
]


@pytest.mark.parametrize(("name", "entry"), CASES + [(n, "aotgrad") for n in INDUCTOR])
def test_program(name: str, entry: str, request: pytest.FixtureRequest) -> None:
    if (name, entry) in XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL[(name, entry)]))
    check_program(PROGRAMS, name, entry)
