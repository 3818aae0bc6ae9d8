"""Blind recompile fidelity, function programs (global state, promotion, dynamic sizes, branches
on metadata and global state): one aot_function / torch.compile object called again and again
with inputs whose metadata changes between calls; every call must observe what eager observes.
Builders, runners and the known-open table: ``blind_recompile_harness``.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

from blind_recompile_harness import (
    AUTOCAST,
    AUTOCAST_F16,
    AUTOCAST_OFF,
    DEFAULT_F64,
    DETERMINISTIC,
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
    inference,
    leaf,
    mul,
    offs,
    registry,
    step,
    stepclone,
    tview,
    with_scalar,
)

PROGRAMS, prog, progp = registry()


# more: global state, promotion, dynamic sizes, branches on metadata, after-call writes


def _tpair(overlap):
    def make():
        x = torch.randn(3, 3, dtype=F64, requires_grad=True)
        c = x.clone()
        if overlap:
            return [c, c.t()], [x]
        y = torch.randn(3, 3, dtype=F64, requires_grad=True)
        return [c, y.clone().t()], [x, y]

    return make


def _baseview(same):
    def make():
        x = torch.randn(4, dtype=F64, requires_grad=True)
        c = x.clone()
        if same:
            return [c, c[1:3]], [x]
        y = torch.randn(4, dtype=F64, requires_grad=True)
        return [c, y.clone()[1:3]], [x, y]

    return make


def _inf_inside(x):
    with torch.inference_mode():
        y = x * 2
    return y + 1, x * 3


def _add_out(outs):
    outs[0].add_(1)


def _mul_out_nograd(outs):
    with torch.no_grad():
        outs[0].mul_(2)


prog(
    "global_default_dtype",
    lambda x: x + torch.ones(3),
    A(leaf(3, dtype=F32)),
    (A(leaf(3, dtype=F32)), DEFAULT_F64),
    A(leaf(3, dtype=F32)),
)
prog(
    "global_default_dtype_arange",
    lambda x: x * torch.arange(3.0),
    (A(leaf(3, dtype=F32)), DEFAULT_F64),
    A(leaf(3, dtype=F32)),
)
prog(
    "global_default_dtype_tensor",
    lambda x: x * torch.tensor(2.5),
    A(leaf(3, dtype=F16)),
    (A(leaf(3, dtype=F16)), DEFAULT_F64),
    A(leaf(3, dtype=F16)),
)
prog(
    "promo_0dim_vs_1dim",
    mul,
    A(leaf(3, dtype=F32), leaf(dtype=F64)),
    A(leaf(3, dtype=F32), leaf(1, dtype=F64)),
    A(leaf(3, dtype=F32), leaf(dtype=F64)),
)
prog(
    "promo_int0dim_float",
    mul,
    A(leaf(3, dtype=F32), leaf(dtype=I64)),
    A(leaf(3, dtype=I64), leaf(dtype=F32)),
    A(leaf(3, dtype=I64), leaf(1, dtype=F16)),
)
prog(
    "promo_where",
    lambda c, a, b: torch.where(c, a, b),
    A(leaf(4, dtype=torch.bool), leaf(4, dtype=F32), leaf(4)),
    A(leaf(4, dtype=torch.bool), leaf(4), leaf(4, dtype=F32)),
    A(leaf(4, dtype=torch.bool), leaf(4, dtype=F32), leaf(dtype=F64)),
)
prog(
    "dyn_sizes_many",
    lambda x: (x * 2).sum(0),
    A(leaf(3, 2)),
    A(leaf(4, 2)),
    A(leaf(5, 2)),
    A(leaf(1, 2)),
    A(leaf(0, 2)),
)
prog(
    "dyn_sizes_broadcast",
    lambda x, y: x + y,
    A(leaf(3), leaf(3)),
    A(leaf(4), leaf(4)),
    A(leaf(5), leaf(1)),
    A(leaf(1), leaf(6)),
    A(leaf(6), leaf(6)),
)
prog(
    "dyn_view_out_sizes",
    lambda x: x[1:],
    A(clone(3)),
    A(clone(4)),
    A(clone(5)),
    A(offs(6)),
    A(clone(1)),
)
prog(
    "dyn_mut_sizes",
    lambda x: x.mul_(2),
    A(clone(3)),
    A(clone(4)),
    A(clone(5)),
    A(stepclone(8)),
    A(clone(1)),
)
prog(
    "dyn_int_arg",
    lambda x, n: x[:n] * n,
    with_scalar(leaf(6), 2),
    with_scalar(leaf(6), 3),
    with_scalar(leaf(6), 4),
    with_scalar(leaf(6), 1),
    with_scalar(leaf(6), 0),
)
prog(
    "dyn_int_arange",
    lambda x, n: x[:n] + torch.arange(n),
    with_scalar(leaf(6), 2),
    with_scalar(leaf(6), 3),
    with_scalar(leaf(6), 5),
)
prog(
    "dyn_float_arg",
    lambda x, s: x * s + s,
    with_scalar(leaf(3), 0.5),
    with_scalar(leaf(3), 1.5),
    with_scalar(leaf(3), 2.5),
    with_scalar(leaf(3), float("inf")),
)
prog(
    "dyn_stride_sizes",
    lambda x: x.t().contiguous(),
    A(leaf(2, 3)),
    A(leaf(3, 4)),
    A(tview(5, 4)),
    A(step(10, 3)),
)
prog(
    "index_dtype",
    lambda x, i: x[i],
    A(leaf(5), lambda: (torch.tensor([0, 2, 4]), None)),
    A(leaf(5), lambda: (torch.tensor([True, False, True, False, True]), None)),
    A(leaf(5), lambda: (torch.tensor([1, 1], dtype=torch.int32), None)),
)
prog(
    "index_put_dtype",
    lambda x, i, v: x.index_put_((i,), v),
    A(clone(5), lambda: (torch.tensor([0, 2]), None), leaf(2)),
    A(clone(5), lambda: (torch.tensor([True, False, True, False, False]), None), leaf(2)),
    A(clone(5), lambda: (torch.tensor([0, 0]), None), leaf(2)),
)
prog(
    "complex_then_real",
    lambda x: (x * x).abs(),
    A(leaf(3, dtype=torch.complex64)),
    A(leaf(3, dtype=F32)),
    A(leaf(3, dtype=torch.complex128)),
)
prog(
    "complex_conj_input",
    lambda x: x * 2,
    A(lambda: (torch.randn(3, dtype=torch.complex64), None)),
    A(lambda: (torch.randn(3, dtype=torch.complex64).conj(), None)),
    A(lambda: ((t := torch.randn(3, dtype=torch.complex128, requires_grad=True)).conj(), t)),
)
prog(
    "neg_view_input",
    lambda x: x + 1,
    A(lambda: (torch.randn(3, dtype=torch.complex64).conj().imag, None)),
    A(lambda: (torch.randn(3, dtype=torch.complex64).imag, None)),
)
prog(
    "branch_is_leaf",
    lambda x: x * 2 if x.is_leaf else x * 3,
    A(leaf(3)),
    A(clone(3)),
    A(leaf(3, rg=False)),
    A(offs(4)),
)
prog(
    "branch_grad_fn",
    lambda x: x * 2 if x.grad_fn is None else x * 3,
    A(leaf(3)),
    A(clone(3)),
    A(leaf(3)),
)
prog(
    "branch_is_inference",
    lambda x: x * 2 if x.is_inference() else x * 3,
    A(leaf(3)),
    A(inference(3)),
    A(leaf(3, rg=False)),
)
prog(
    "branch_stride",
    lambda x: x.sum(0) if x.stride(0) == 1 else x.sum(1),
    A(leaf(3, 4)),
    A(tview(4, 3)),
    A(leaf(3, 4)),
)
prog(
    "branch_storage_offset",
    lambda x: x * x.storage_offset(),
    A(leaf(4)),
    A(offs(5)),
    A(lambda: ((t := torch.randn(6, dtype=F64, requires_grad=True))[2:], t)),
)
prog(
    "branch_data_tensor_bool",
    lambda x, f: x * 2 if f else x * 3,
    A(leaf(3), lambda: (torch.tensor(True), None)),
    A(leaf(3), lambda: (torch.tensor(False), None)),
)
prog(
    "branch_is_parameter",
    lambda x: x * 2 if isinstance(x, nn.Parameter) else x * 3,
    A(leaf(3)),
    A(lambda: ((p := nn.Parameter(torch.randn(3, dtype=F64))), p)),
    A(leaf(3)),
)
prog(
    "branch_value_item",
    lambda x: x * 2 if x.sum().item() > 0 else x * 3,
    A(lambda: ((t := torch.ones(3, dtype=F64, requires_grad=True)), t)),
    A(lambda: ((t := -torch.ones(3, dtype=F64).requires_grad_()), t)),
)
prog(
    "after_write_view_out",
    lambda x: x[:2],
    (A(clone(4)), NULL, _add_out),
    (A(leaf(4, rg=False)), NULL, _add_out),
    (A(offs(5)), NULL, _add_out),
)
prog(
    "after_write_detach_out",
    lambda x: x.detach(),
    (A(leaf(3)), NULL, _add_out),
    (A(clone(3)), NULL, _add_out),
    (A(leaf(3, rg=False)), NULL, _add_out),
)
prog(
    "after_write_input_out",
    lambda x: x,
    (A(clone(3)), NULL, _add_out),
    (A(leaf(3)), NULL, _add_out),
    (A(leaf(3, rg=False)), NULL, _add_out),
)
prog(
    "after_write_nograd_view",
    lambda x: x.view(-1),
    (A(clone(2, 2)), NULL, _mul_out_nograd),
    (A(leaf(2, 2)), NULL, _mul_out_nograd),
    (A(clone(4)), NOGRAD, _mul_out_nograd),
)
prog(
    "after_write_fresh_out",
    lambda x: x * 2,
    (A(leaf(3)), NULL, _add_out),
    (A(leaf(3, rg=False)), NOGRAD, _add_out),
    (A(leaf(3)), NULL, _add_out),
)
prog(
    "rg_input_requires_grad_",
    lambda x: x.requires_grad_() * 2,
    A(leaf(3, rg=False)),
    A(leaf(3)),
    A(clone(3)),
    A(leaf(3, rg=False)),
)
prog(
    "rg_retain_grad_inside",
    lambda x: (x.retain_grad(), x * x)[1],
    A(clone(3)),
    A(leaf(3)),
    A(clone(3)),
)
prog(
    "alias_transposed_pair",
    lambda a, b: (a.mul_(2), b + 0)[1],
    _tpair(True),
    _tpair(False),
    _tpair(True),
)
prog(
    "alias_base_and_view",
    lambda a, b: (b.mul_(2), a * 1)[1],
    _baseview(True),
    _baseview(False),
    _baseview(True),
)
prog(
    "mode_autocast_dtypes",
    lambda a, b: a @ b,
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), AUTOCAST),
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), AUTOCAST_F16),
    (A(leaf(3, 4, dtype=F32), leaf(4, 2, dtype=F32)), AUTOCAST_OFF),
)
prog(
    "mode_autocast_mut",
    lambda a, b: a.add_(b @ b),
    (A(leaf(2, 2, dtype=F32, rg=False), leaf(2, 2, dtype=F32)), AUTOCAST),
    (A(leaf(2, 2, dtype=F32, rg=False), leaf(2, 2, dtype=F32)), NULL),
)
prog(
    "mode_inference_inside",
    lambda x: _inf_inside(x),
    A(leaf(3)),
    (A(leaf(3)), NOGRAD),
    A(inference(3)),
)
prog(
    "mode_nograd_rg_out",
    lambda x: (x * 2).requires_grad_(),
    (A(leaf(3, rg=False)), NULL),
    (A(leaf(3)), NOGRAD),
    (A(leaf(3)), NULL),
)
prog(
    "ret_python_values",
    lambda x: (x.sum(), x.shape[0], x.dtype is torch.float32),
    A(leaf(3)),
    A(leaf(4, dtype=F32)),
    A(leaf(2)),
)
prog(
    "list_none_member",
    lambda xs: sum(x * 2 for x in xs if x is not None),
    A(lambda: ([torch.randn(3, dtype=F64), None], None)),
    A(lambda: ([None, torch.randn(3, dtype=F64)], None)),
    A(lambda: ([torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)], None)),
)
prog(
    "list_aliasing_members",
    lambda xs: (xs[0].add_(1), xs[1] * 1)[1],
    A(lambda: ([(t := torch.randn(3, dtype=F64)), t], None)),
    A(lambda: ([torch.randn(3, dtype=F64), torch.randn(3, dtype=F64)], None)),
    A(lambda: ([(t := torch.randn(3, dtype=F64)), t[:]], None)),
)


# branches on further metadata and global state (what a guard must cover)

SCALE = [2.0]
GLOBAL_T = torch.ones(3, dtype=F64)


def _set_scale(v):
    @contextlib.contextmanager
    def c():
        old = SCALE[0]
        SCALE[0] = v
        try:
            yield
        finally:
            SCALE[0] = old

    return c


@contextlib.contextmanager
def _global_t_times3():
    GLOBAL_T.mul_(3)
    try:
        yield
    finally:
        GLOBAL_T.div_(3)


def _retained():
    def make():
        t = torch.randn(3, dtype=F64, requires_grad=True)
        c = t.clone()
        c.retain_grad()
        return [c], [t]

    return make


def with_grad_set():
    def make():
        x = torch.randn(3, dtype=F64, requires_grad=True)
        x.grad = torch.ones(3, dtype=F64)
        return [x], [x]

    return make


def with_attr():
    def make():
        x = torch.randn(3, dtype=F64, requires_grad=True)
        x.tag = 5
        return [x], [x]

    return make


def bumped_version():
    def make():
        x = torch.randn(3, dtype=F64)
        x.add_(0)
        return [x], []

    return make


def _br(pred):
    return lambda x: x * 2 if pred(x) else x * 3


prog(
    "branch_is_view",
    _br(lambda x: x._base is not None),
    A(leaf(4)),
    A(offs(5)),
    A(clone(4)),
    A(lambda: ((t := torch.randn(4, dtype=F64, requires_grad=True)).clone()[:], t)),
)
prog(
    "branch_is_conj",
    _br(lambda x: x.is_conj()),
    A(leaf(3, dtype=torch.complex64, rg=False)),
    A(lambda: (torch.randn(3, dtype=torch.complex64).conj(), None)),
)
prog(
    "branch_is_neg",
    _br(lambda x: x.is_neg()),
    A(leaf(3, rg=False)),
    A(lambda: (torch.randn(3, dtype=torch.complex64).conj().imag, None)),
)
prog(
    "branch_version",
    _br(lambda x: x._version > 0),
    A(leaf(3, rg=False)),
    bumped_version(),
    A(leaf(3, rg=False)),
)
prog("branch_grad_is_none", _br(lambda x: x.grad is None), A(leaf(3)), with_grad_set(), A(leaf(3)))
prog("branch_python_attr", _br(lambda x: hasattr(x, "tag")), A(leaf(3)), with_attr(), A(leaf(3)))
prog("branch_retains_grad", _br(lambda x: x.retains_grad), A(clone(3)), _retained(), A(clone(3)))
prog(
    "branch_storage_nbytes",
    _br(lambda x: x.untyped_storage().nbytes() > 32),
    A(leaf(4)),
    A(offs(5)),
    A(step(8)),
)
prog(
    "branch_chlast_contig",
    _br(lambda x: x.is_contiguous(memory_format=torch.channels_last)),
    A(leaf(1, 2, 3, 4)),
    A(chlast(1, 2, 3, 4)),
    A(leaf(1, 2, 3, 4)),
)
prog(
    "branch_autocast_enabled",
    lambda x: x * 2 if torch.is_autocast_enabled("cpu") else x * 3,
    (A(leaf(3, dtype=F32)), NULL),
    (A(leaf(3, dtype=F32)), AUTOCAST),
    (A(leaf(3, dtype=F32)), NULL),
)
prog(
    "branch_autocast_dtype",
    lambda x: x * 2 if torch.get_autocast_dtype("cpu") == torch.bfloat16 else x * 3,
    (A(leaf(3, dtype=F32)), AUTOCAST),
    (A(leaf(3, dtype=F32)), AUTOCAST_F16),
)
prog(
    "branch_default_dtype",
    lambda x: x * 2 if torch.get_default_dtype() == torch.float32 else x * 3,
    (A(leaf(3)), NULL),
    (A(leaf(3)), DEFAULT_F64),
    (A(leaf(3)), NULL),
)
prog(
    "branch_inference_mode_enabled",
    lambda x: x * 2 if torch.is_inference_mode_enabled() else x * 3,
    (A(leaf(3)), NULL),
    (A(leaf(3)), INFER),
    (A(leaf(3)), NULL),
)
prog(
    "branch_deterministic",
    lambda x: x * 2 if torch.are_deterministic_algorithms_enabled() else x * 3,
    (A(leaf(3)), NULL),
    (A(leaf(3)), DETERMINISTIC),
    (A(leaf(3)), NULL),
)
prog(
    "branch_is_floating",
    _br(lambda x: x.is_floating_point()),
    A(leaf(3)),
    A(leaf(3, dtype=I64)),
    A(leaf(3, dtype=F16)),
)
prog(
    "global_python_scalar",
    lambda x: x * SCALE[0],
    (A(leaf(3)), NULL),
    (A(leaf(3)), _set_scale(5.0)),
    (A(leaf(3)), NULL),
)
prog(
    "global_tensor_value",
    lambda x: x * GLOBAL_T,
    (A(leaf(3)), NULL),
    (A(leaf(3)), _global_t_times3),
    (A(leaf(3)), NULL),
)


@pytest.mark.parametrize("comp", FN_COMPILERS)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_recompile_like_eager(name, comp, request):
    check_program(PROGRAMS, name, comp, request)
