"""Blind recompile fidelity, function programs (dtype, shape, strides, requires_grad, grad mode,
scalars, containers): one aot_function / torch.compile object called again and again with
inputs whose metadata changes between calls; every call must observe what eager observes.
Builders, runners and the known-open table: ``blind_recompile_harness``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from blind_recompile_harness import (
    AUTOCAST,
    BF16,
    F16,
    F32,
    F64,
    FN_COMPILERS,
    I64,
    INFER,
    NOGRAD,
    NULL,
    A,
    check_program,
    chlast,
    clone,
    dictarg,
    disjoint,
    expand,
    inference,
    leaf,
    listarg,
    mul,
    offs,
    overlapping,
    registry,
    run_sequence,
    same_leaf_twice,
    same_twice,
    sin2,
    step,
    stepclone,
    tclone,
    tview,
    two_clones,
    val,
    with_scalar,
)
from eager_oracle import _differences

PROGRAMS, prog, progp = registry()


# dtype
prog("dtype_f32_f64_f32", sin2, A(leaf(3, dtype=F32)), A(leaf(3)), A(leaf(3, dtype=F32)))
prog(
    "dtype_bf16_f16_f32", sin2, A(leaf(4, dtype=BF16)), A(leaf(4, dtype=F16)), A(leaf(4, dtype=F32))
)
prog(
    "dtype_int_then_float",
    lambda x: x * 2 + 1,
    A(leaf(3, dtype=I64)),
    A(leaf(3)),
    A(leaf(3, dtype=I64)),
)
prog(
    "dtype_int_truediv",
    lambda x: x / 2,
    A(leaf(3, dtype=I64)),
    A(leaf(3, dtype=F32)),
    A(leaf(3, dtype=I64)),
)
prog("dtype_int_floordiv", lambda x: x // 2, A(leaf(3, dtype=I64)), A(leaf(3, dtype=F64, rg=False)))
prog(
    "dtype_bool_input",
    lambda x: x.sum() + 1,
    A(leaf(5, dtype=torch.bool)),
    A(leaf(5, dtype=I64)),
    A(leaf(5)),
)
prog(
    "dtype_mixed_promotion",
    mul,
    A(leaf(3, dtype=F32), leaf(3)),
    A(leaf(3), leaf(3, dtype=F32)),
    A(leaf(3, dtype=F32), leaf(3, dtype=F32)),
)
prog("dtype_int_times_float", mul, A(leaf(3, dtype=I64), leaf(3)), A(leaf(3), leaf(3, dtype=I64)))
prog(
    "dtype_to_f64_alias",
    lambda x: x.to(torch.float64),
    A(leaf(3)),
    A(leaf(3, dtype=F32)),
    A(clone(3)),
)
prog(
    "dtype_float_alias",
    lambda x: x.float(),
    A(leaf(3, dtype=F32)),
    A(leaf(3)),
    A(clone(3, dtype=F32)),
)
prog(
    "dtype_type_as",
    lambda x, y: x.type_as(y),
    A(leaf(3), leaf(3, dtype=F32)),
    A(leaf(3), leaf(3)),
    A(clone(3), leaf(3, dtype=F16)),
)
prog(
    "dtype_branch",
    lambda x: x * 2 if x.dtype == torch.float64 else x * 3,
    A(leaf(3)),
    A(leaf(3, dtype=F32)),
    A(leaf(3)),
)
prog(
    "dtype_view_as_int",
    lambda x: x.view(torch.int64) + 0,
    A(leaf(3, rg=False)),
    A(leaf(3, dtype=F32, rg=False)),
)
prog(
    "dtype_inplace_int_add_float",
    lambda x: x.add_(1.5),
    A(leaf(3, dtype=F32, rg=False)),
    A(leaf(3, dtype=I64)),
    A(leaf(3, rg=False)),
)
prog(
    "dtype_inplace_downcast",
    lambda x, y: x.add_(y),
    A(leaf(3, dtype=F32, rg=False), leaf(3)),
    A(leaf(3, rg=False), leaf(3, dtype=F32)),
)

# shape / rank
prog("shape_sizes", sin2, A(leaf(3, 4)), A(leaf(5, 6)), A(leaf(3, 4)))
prog("shape_rank", sin2, A(leaf(4)), A(leaf(2, 3)), A(leaf(2, 3, 4)), A(leaf(4)))
prog("shape_size1_broadcast", lambda x: x + x.sum(0), A(leaf(3, 4)), A(leaf(1, 4)), A(leaf(3, 1)))
prog(
    "shape_zero_size",
    lambda x: x.exp().sum(1),
    A(leaf(3, 4)),
    A(leaf(0, 4)),
    A(leaf(3, 0)),
    A(leaf(3, 4)),
)
prog("shape_0dim_1dim", lambda x: x * x, A(leaf()), A(leaf(1)), A(leaf(3)), A(leaf()))
prog("shape_squeeze", lambda x: x.squeeze() * 2, A(leaf(3, 1, 4)), A(leaf(1, 1, 1)), A(leaf(3, 4)))
prog("shape_view_flat", lambda x: x.view(-1), A(clone(3, 4)), A(tclone(3, 4)), A(clone(2, 2)))
prog("shape_reshape_flat", lambda x: x.reshape(-1), A(clone(3, 4)), A(tclone(3, 4)), A(clone(3, 4)))
prog(
    "shape_branch",
    lambda x: x.sum() if x.shape[0] > 3 else x * 2,
    A(leaf(5)),
    A(leaf(2)),
    A(leaf(7)),
)
prog(
    "shape_dim_branch",
    lambda x: x.sum(-1) if x.dim() > 1 else x.cumsum(0),
    A(leaf(3)),
    A(leaf(2, 3)),
    A(leaf(4)),
)
prog(
    "shape_numel_branch",
    lambda x: x.new_zeros(()) if x.numel() == 0 else x.mean(),
    A(leaf(3)),
    A(leaf(0)),
    A(leaf(2)),
)
prog(
    "shape_matmul_ranks",
    lambda a, b: a @ b,
    A(leaf(3), leaf(3)),
    A(leaf(2, 3), leaf(3)),
    A(leaf(4, 2, 3), leaf(3, 5)),
    A(leaf(3), leaf(3)),
)
prog("shape_max_dim", lambda x: x.max(0), A(leaf(3, 4)), A(leaf(5)), A(leaf(2, 2)))
prog("shape_expand_out", lambda x: x.expand(3, 4), A(leaf(4)), A(leaf(1, 4)), A(leaf(3, 1)))
prog(
    "shape_broadcast_inplace",
    lambda x, y: x.add_(y),
    A(leaf(3, 4, rg=False), leaf(4)),
    A(leaf(4, rg=False), leaf(3, 4)),
    A(leaf(3, 4, rg=False), leaf(1)),
)
prog("shape_unbind", lambda x: x.unbind(0), A(clone(2, 3)), A(clone(3, 2)), A(clone(1, 4)))
prog("shape_split", lambda x: x.split(2), A(clone(4)), A(clone(5)), A(clone(2, 3)))

# strides / contiguity / offsets
prog("stride_transposed", sin2, A(leaf(3, 4)), A(tview(4, 3)), A(leaf(3, 4)))
prog("stride_step", sin2, A(leaf(6, 4)), A(step(6, 4)), A(step(7, 4)))
prog("stride_expand0", lambda x: x * 2 + x.sum(0), A(leaf(3, 4)), A(expand(3, 4)), A(leaf(3, 4)))
prog(
    "stride_chlast",
    lambda x: (x * 2).relu(),
    A(leaf(2, 3, 4, 5)),
    A(chlast(2, 3, 4, 5)),
    A(leaf(2, 3, 4, 5)),
)
prog(
    "stride_chlast_conv",
    lambda x, w: torch.nn.functional.conv2d(x, w),
    A(leaf(1, 2, 5, 5), leaf(3, 2, 3, 3)),
    A(chlast(1, 2, 5, 5), leaf(3, 2, 3, 3)),
)
prog("stride_offset", lambda x: x.cumsum(0), A(leaf(5)), A(offs(6)), A(leaf(5)))
prog(
    "stride_clone_preserve",
    lambda x: x.clone() + 0 * 0,
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(chlast(1, 2, 3, 4)),
)
prog(
    "stride_clone_out",
    lambda x: x.clone(),
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(step(6, 3)),
    A(chlast(1, 2, 3, 4)),
)
prog(
    "stride_ones_like",
    lambda x: torch.ones_like(x) + x,
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(leaf(3, 4)),
)
prog(
    "stride_empty_like_fill",
    lambda x: torch.empty_like(x).fill_(2) * x,
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(chlast(1, 2, 3, 4)),
)
prog(
    "stride_contiguous_alias",
    lambda x: x.contiguous(),
    A(clone(3, 4)),
    A(tclone(4, 3)),
    A(clone(3, 4)),
)
prog(
    "stride_contig_branch",
    lambda x: x * 2 if x.is_contiguous() else x * 3,
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(leaf(3, 4)),
)
prog("stride_t_out", lambda x: x.t(), A(clone(3, 4)), A(tclone(4, 3)), A(stepclone(6, 2)))
prog("stride_select_out", lambda x: x[0], A(clone(3, 4)), A(tclone(4, 3)), A(clone(3)))
prog(
    "stride_inplace_view_input",
    lambda x: x.mul_(2),
    A(clone(3, 4)),
    A(tclone(4, 3)),
    A(stepclone(6, 4)),
    A(clone(3, 4)),
)
prog(
    "stride_inplace_expanded",
    lambda x: x.add_(1),
    A(leaf(3, 4, rg=False)),
    A(expand(3, 4, rg=False)),
    A(leaf(3, 4, rg=False)),
)
prog(
    "stride_sum_keepdim",
    lambda x, k: x.sum(1, keepdim=k),
    with_scalar(leaf(3, 4), True),
    with_scalar(tview(4, 3), False),
    with_scalar(leaf(3, 4), True),
)

# requires_grad / leaf-ness / aliasing
prog("rg_toggle", sin2, A(leaf(3)), A(leaf(3, rg=False)), A(leaf(3)))
prog(
    "rg_two_inputs",
    mul,
    A(leaf(3), leaf(3, rg=False)),
    A(leaf(3, rg=False), leaf(3)),
    A(leaf(3, rg=False), leaf(3, rg=False)),
    A(leaf(3), leaf(3)),
)
prog("rg_leaf_clone_view", sin2, A(leaf(3)), A(clone(3)), A(offs(4)), A(leaf(3, rg=False)))
prog(
    "rg_branch",
    lambda x: x * 2 if x.requires_grad else x * 3,
    A(leaf(3)),
    A(leaf(3, rg=False)),
    A(leaf(3)),
)
prog("rg_return_input", lambda x: x, A(leaf(3)), A(clone(3)), A(leaf(3, rg=False)))
prog("rg_return_input_and_out", lambda x: (x, x * 2), A(clone(3)), A(leaf(3)), A(leaf(3, rg=False)))
prog("rg_detach_out", lambda x: (x.detach(), x + 1), A(leaf(3)), A(clone(3)), A(leaf(3, rg=False)))
prog(
    "rg_requires_grad_inside",
    lambda x: x.detach().requires_grad_() * 2,
    A(leaf(3)),
    A(leaf(3, rg=False)),
    A(clone(3)),
)
prog(
    "rg_requires_grad_inside_out",
    lambda x: (lambda y: (y, y * x))(x.detach().clone().requires_grad_()),
    A(leaf(3)),
    A(leaf(3, rg=False)),
)
prog("alias_same_twice_mul", mul, same_twice(3), two_clones(3), same_twice(3))
prog("alias_same_leaf_twice", mul, same_leaf_twice(3), A(leaf(3), leaf(3)), same_leaf_twice(3))
prog(
    "alias_inplace_same_twice", lambda a, b: a.add_(b), two_clones(3), same_twice(3), two_clones(3)
)
prog("alias_inplace_then_read", lambda a, b: (a.mul_(2), b + 1)[1], two_clones(3), same_twice(3))
prog(
    "alias_overlap_views", lambda a, b: (a.mul_(2), b * 1)[1], disjoint(), overlapping(), disjoint()
)
prog(
    "alias_overlap_both_write",
    lambda a, b: (a.add_(1), b.mul_(3)),
    disjoint(),
    overlapping(),
    disjoint(),
)
prog(
    "mut_leaf_error",
    lambda x: x.mul_(2),
    A(clone(3)),
    A(leaf(3)),
    A(leaf(3, rg=False)),
    A(clone(3)),
)
prog("mut_view_of_leaf", lambda x: x.mul_(2), A(offs(4, rg=False)), A(offs(4)), A(stepclone(6)))
prog(
    "mut_nograd_inside",
    lambda x: _nograd_add(x),
    A(leaf(3)),
    A(leaf(3, rg=False)),
    A(clone(3)),
    A(leaf(3)),
)


def _nograd_add(x):
    with torch.no_grad():
        x.add_(1)
    return x * 2


prog(
    "mut_nograd_return_input",
    lambda x: (_nograd_add(x), x)[1],
    A(leaf(3)),
    A(clone(3)),
    A(leaf(3, rg=False)),
)
prog(
    "mut_data_write",
    lambda x: (x.data.mul_(2), x * 1)[1],
    A(leaf(3)),
    A(leaf(3, rg=False)),
    A(clone(3)),
)
prog(
    "mut_int_input",
    lambda x, y: (x.add_(1), y * 2)[1],
    A(leaf(3, dtype=I64), leaf(3)),
    A(leaf(3, dtype=I64), leaf(3, rg=False)),
)
prog("mut_resize_like", lambda x: x.t_(), A(clone(3, 4)), A(clone(2, 5)), A(clone(3)))
prog("mut_0size", lambda x: x.add_(1), A(clone(0, 3)), A(clone(2, 3)), A(clone(0)))

# grad mode / autocast / inference
prog("mode_nograd", sin2, (A(leaf(3)), NULL), (A(leaf(3)), NOGRAD), (A(leaf(3)), NULL))
prog("mode_inference", sin2, (A(leaf(3)), INFER), (A(leaf(3)), NULL), (A(leaf(3, rg=False)), INFER))
prog(
    "mode_inference_inputs",
    lambda x: x * 2,
    A(inference(3)),
    A(leaf(3)),
    (A(inference(3)), INFER),
    A(inference(3)),
)
prog(
    "mode_inference_mut",
    lambda x: x.add_(1),
    (A(inference(3)), INFER),
    A(inference(3)),
    A(leaf(3, rg=False)),
)
prog(
    "mode_nograd_mut_leaf",
    lambda x: x.mul_(2),
    (A(leaf(3)), NOGRAD),
    (A(clone(3)), NULL),
    (A(leaf(3)), NOGRAD),
)
prog(
    "mode_nograd_view_out",
    lambda x: x[1:],
    (A(clone(3)), NOGRAD),
    (A(clone(3)), NULL),
    (A(leaf(3)), NOGRAD),
)
prog(
    "mode_autocast_mm",
    lambda a, b: a @ b,
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), NULL),
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), AUTOCAST),
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), NULL),
)
prog(
    "mode_autocast_f64",
    lambda a, b: (a @ b).sin(),
    (A(leaf(3, 4), leaf(4, 2)), AUTOCAST),
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), AUTOCAST),
    (A(leaf(3, 4), leaf(4, 2)), NULL),
)
prog(
    "mode_autocast_nograd",
    lambda a: torch.nn.functional.linear(a, a),
    (A(leaf(3, 3, dtype=F32)), AUTOCAST),
    (A(leaf(3, 3, dtype=F32)), NOGRAD),
    (A(leaf(3, 3, dtype=F32)), NULL),
)
prog(
    "mode_enable_grad_inside",
    lambda x: _enable(x),
    (A(leaf(3)), NOGRAD),
    (A(leaf(3)), NULL),
    (A(leaf(3, rg=False)), NOGRAD),
)
prog(
    "mode_is_grad_enabled_branch",
    lambda x: x * 2 if torch.is_grad_enabled() else x * 3,
    (A(leaf(3)), NULL),
    (A(leaf(3)), NOGRAD),
    (A(leaf(3)), NULL),
)
prog(
    "mode_set_grad_enabled_arg",
    lambda x, f: _set_grad(x, f),
    with_scalar(leaf(3), True),
    with_scalar(leaf(3), False),
    with_scalar(leaf(3), True),
)


def _enable(x):
    with torch.enable_grad():
        return x * 2


def _set_grad(x, f):
    with torch.set_grad_enabled(f):
        return x.exp()


# python scalars / containers
prog(
    "scalar_value",
    lambda x, s: x * s,
    with_scalar(leaf(3), 2.0),
    with_scalar(leaf(3), 3.0),
    with_scalar(leaf(3), -1),
)
prog(
    "scalar_int_float",
    lambda x, s: x + s,
    with_scalar(leaf(3, dtype=I64), 2),
    with_scalar(leaf(3, dtype=I64), 2.5),
    with_scalar(leaf(3, dtype=I64), True),
)
prog(
    "scalar_bool_branch",
    lambda x, f: x.sin() if f else x.cos(),
    with_scalar(leaf(3), True),
    with_scalar(leaf(3), False),
    with_scalar(leaf(3), True),
)
prog(
    "scalar_reshape_n",
    lambda x, n: x.reshape(n, -1),
    with_scalar(leaf(12), 2),
    with_scalar(leaf(12), 3),
    with_scalar(leaf(12), 5),
)
prog(
    "scalar_pow",
    lambda x, p: x.abs() ** p,
    with_scalar(leaf(3), 2),
    with_scalar(leaf(3), 0.5),
    with_scalar(leaf(3), 1),
    with_scalar(leaf(3), 0),
)
prog(
    "scalar_topk_k",
    lambda x, k: x.topk(k).values,
    with_scalar(leaf(5), 2),
    with_scalar(leaf(5), 3),
    with_scalar(leaf(5), 6),
)
prog(
    "scalar_none_or_tensor",
    lambda x, y: x if y is None else x * y,
    A(leaf(3), val(None)),
    A(leaf(3), leaf(3)),
    A(leaf(3), val(None)),
)
prog(
    "scalar_tensor_or_number",
    lambda x, y: x * y,
    A(leaf(3), val(2.0)),
    A(leaf(3), leaf()),
    A(leaf(3), val(2.0)),
)
prog(
    "scalar_0dim_int_tensor",
    lambda x, i: x * i,
    A(leaf(3), lambda: (torch.tensor(2), None)),
    A(leaf(3), lambda: (torch.tensor(3), None)),
    A(leaf(3), lambda: (torch.tensor(2.5), None)),
)
prog("scalar_item", lambda x: x * x.sum().item(), A(leaf(3)), A(leaf(4)))
prog(
    "container_list_len",
    lambda xs: sum(x.sin() for x in xs),
    listarg((3,), (3,)),
    listarg((3,), (3,), (3,)),
    listarg((3,)),
)
prog(
    "container_tuple_shapes",
    lambda xs: torch.cat(list(xs)),
    listarg((2,), (3,), kind=tuple),
    listarg((4,), (1,), kind=tuple),
    listarg((2, 2), (1, 2), kind=tuple),
)
prog(
    "container_list_rg",
    lambda xs: xs[0] * xs[1],
    listarg((3,), (3,)),
    listarg((3,), (3,), rg=False),
    listarg((3,), (3,)),
)
prog(
    "container_dict_keys",
    lambda d: sum(v * (i + 1) for i, v in enumerate(d.values())),
    dictarg(a=(3,), b=(3,)),
    dictarg(b=(3,), a=(3,)),
    dictarg(a=(3,)),
)
prog(
    "container_dict_get",
    lambda d: d["x"] * 2 + d.get("y", 0),
    dictarg(x=(3,)),
    dictarg(x=(3,), y=(3,)),
    dictarg(x=(2,)),
)
prog(
    "container_list_mut",
    lambda xs: (xs[0].mul_(2), xs[1] + 1)[1],
    listarg((3,), (3,), rg=False),
    listarg((3,), (2,), rg=False),
)


@pytest.mark.parametrize("comp", FN_COMPILERS)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_recompile_like_eager(name, comp, request):
    check_program(PROGRAMS, name, comp, request)


def test_harness_sees_a_stale_graph():
    """The comparison is not vacuous: a 'compiler' that keeps serving the first call's
    answer for a changed dtype, or the first Python scalar, is caught."""

    def stale(fn):
        first: dict[str, Any] = {}

        def g(*args):
            if "dtype" not in first:
                first["dtype"] = args[0].dtype
                first["rest"] = args[1:]
            return fn(args[0].to(first["dtype"]), *first["rest"])

        return g

    for name in ("dtype_f32_f64_f32", "scalar_bool_branch"):
        fn, steps = PROGRAMS[name]
        eager = run_sequence(fn, steps, None)
        assert _differences(eager, run_sequence(fn, steps, stale)), name
