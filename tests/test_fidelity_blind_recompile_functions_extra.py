"""Blind recompile fidelity, function programs (the same object changed in place, layouts,
nested autocast, dynamic sizes, scalar types, meta tensors, keyword arguments): one
aot_function / torch.compile object called again and again with inputs whose metadata changes
between calls; every call must observe what eager observes. Builders, runners and the
known-open table: ``blind_recompile_harness``.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from blind_recompile_harness import (
    AUTOCAST,
    AUTOCAST_F16,
    BF16,
    F32,
    F64,
    FN_COMPILERS,
    I64,
    INFER,
    NOGRAD,
    NULL,
    A,
    _data_swap,
    _known,
    _plain,
    _rg,
    _set_to_offset,
    check_program,
    chlast,
    clone,
    expand,
    inference,
    leaf,
    mul,
    offs,
    registry,
    same_twice,
    sin2,
    stepclone,
    tclone,
    tview,
    two_clones,
    val,
    with_scalar,
)
from eager_oracle import COMPILERS, _differences

PROGRAMS, prog, progp = registry()


# the same tensor object passed again after its metadata was changed in place between calls


progp("same_obj_rg_toggle", sin2, _plain(3, rg=True), _rg(False), _rg(True))
progp("same_obj_t_", sin2, _plain(3, 4), lambda x: x.t_(), lambda x: x.t_())
progp("same_obj_t_view_out", lambda x: x[0], _plain(3, 4), lambda x: x.t_(), lambda x: x.t_())
progp(
    "same_obj_resize_",
    lambda x: x.cumsum(0),
    _plain(3),
    lambda x: x.resize_(5).copy_(torch.arange(5.0)),
    lambda x: x.resize_(2),
)
progp(
    "same_obj_resize_mut",
    lambda x: x.add_(1),
    _plain(3),
    lambda x: x.resize_(5).copy_(torch.arange(5.0)),
    lambda x: x.resize_(2, 2),
)
progp(
    "same_obj_unsqueeze_",
    lambda x: x.sum(-1),
    _plain(3, 2),
    lambda x: x.unsqueeze_(0),
    lambda x: x.squeeze_(0),
)
progp("same_obj_data_swap", sin2, _plain(3, rg=True), _data_swap(5), _data_swap(2, 2, dtype=F32))
progp(
    "same_obj_data_swap_mut",
    lambda x: x.mul_(2),
    _plain(3),
    _data_swap(5),
    _data_swap(4, dtype=F32),
)
progp("same_obj_set_offset", lambda x: x * 2, _plain(3), _set_to_offset, _set_to_offset)
progp("same_obj_set_offset_mut", lambda x: x.mul_(2), _plain(3), _set_to_offset)
progp(
    "same_obj_as_strided_",
    lambda x: x + 1,
    _plain(6),
    lambda x: x.as_strided_((3,), (2,)),
    lambda x: x.as_strided_((2,), (1,), 1),
)
progp(
    "same_obj_values",
    lambda x: x.sin(),
    _plain(3, rg=True),
    lambda x: x.mul_(3),
    lambda x: x.zero_(),
)
progp(
    "same_obj_mut_each_call", lambda x: x.add_(x.sum()), _plain(3), lambda x: None, lambda x: None
)
progp(
    "same_obj_view_out_then_mut",
    lambda x: x[:2],
    _plain(4),
    lambda x: x.mul_(2),
    lambda x: x.resize_(6).copy_(torch.arange(6.0)),
)


# more: meta/other layouts, nested autocast, grads of ints, kwargs-like containers


def _nested_autocast(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ b
    return y.float() + a.sum()


def _autocast_off_inside(a, b):
    with torch.autocast("cpu", enabled=False):
        return a @ b


prog(
    "autocast_nested_inside",
    _nested_autocast,
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), NULL),
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), AUTOCAST_F16),
    (A(leaf(2, 2), leaf(2, 2)), NULL),
)
prog(
    "autocast_off_inside",
    _autocast_off_inside,
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), AUTOCAST),
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), NULL),
    (A(leaf(2, 2, dtype=BF16), leaf(2, 2, dtype=BF16)), AUTOCAST),
)
prog(
    "autocast_bf16_inputs",
    lambda a, b: (a @ b) + a,
    (A(leaf(2, 2, dtype=BF16), leaf(2, 2, dtype=F32)), AUTOCAST),
    (A(leaf(2, 2, dtype=BF16), leaf(2, 2, dtype=F32)), NULL),
)
prog(
    "int_out_rg_in",
    lambda x: (x.argmax(), x > 0, x.long()),
    A(leaf(3)),
    A(leaf(4, rg=False)),
    A(clone(2)),
)
prog(
    "inference_input_inplace_under_infer",
    lambda x, y: x.add_(y),
    (A(inference(3), inference(3)), INFER),
    (A(inference(3), leaf(3, rg=False)), INFER),
    (A(leaf(3, rg=False), inference(3)), NULL),
)
prog(
    "inference_input_saved",
    lambda x, w: (x * w).sum(),
    A(inference(3), leaf(3)),
    A(leaf(3), leaf(3)),
    A(inference(3), leaf(3)),
)
prog(
    "bool_kwarglike_dict",
    lambda d: d["x"].sin() if d["flag"] else d["x"].cos(),
    A(lambda: ({"x": (t := torch.randn(3, dtype=F64, requires_grad=True)), "flag": True}, t)),
    A(lambda: ({"x": (t := torch.randn(3, dtype=F64, requires_grad=True)), "flag": False}, t)),
)
prog(
    "list_int_shape_arg",
    lambda x, shape: x.reshape(shape),
    A(leaf(6), val([2, 3])),
    A(leaf(6), val([3, 2])),
    A(leaf(6), val((6,))),
)
prog(
    "dtype_arg",
    lambda x, dt: x.to(dt) * 2,
    A(leaf(3), val(F32)),
    A(leaf(3), val(F64)),
    A(leaf(3), val(I64)),
)
prog(
    "string_arg",
    lambda x, mode: x.sum() if mode == "sum" else x.mean(),
    A(leaf(3), val("sum")),
    A(leaf(3), val("mean")),
)
prog(
    "none_dim_arg",
    lambda x, d: x.sum(d) if d is not None else x.sum(),
    A(leaf(2, 3), val(None)),
    A(leaf(2, 3), val(0)),
    A(leaf(2, 3), val(1)),
)
prog(
    "nan_inf_values",
    lambda x: torch.nan_to_num(x.log()),
    A(leaf(3)),
    A(lambda: ((t := torch.tensor([0.0, -1.0, 2.0], dtype=F64, requires_grad=True)), t)),
)


# more: in-place grad-state changes inside, random ops, saved inputs written after the call


@contextlib.contextmanager
def _both(a, b):
    with a, b:
        yield


def _bump_second(outs):
    with torch.no_grad():
        outs[1].add_(1)


def _rg_off_inside(x):
    x.requires_grad_(False)
    return x * 2


prog(
    "mut_then_reduce_rg_switch",
    lambda x: (x.mul_(2), x.sum())[1],
    A(leaf(3, rg=False)),
    A(clone(3)),
    A(stepclone(6)),
    A(leaf(3, rg=False)),
)
prog("rg_off_inside", _rg_off_inside, A(leaf(3)), A(leaf(3, rg=False)), A(clone(3)))
prog(
    "detach_inplace_inside",
    lambda x: x.detach_() * 2,
    A(leaf(3)),
    A(clone(3)),
    A(offs(4)),
    A(leaf(3, rg=False)),
)
prog(
    "same_output_twice",
    lambda x: (lambda y: (y, y))(x * 2),
    A(leaf(3)),
    A(leaf(3, rg=False)),
    (A(leaf(3)), NOGRAD),
)
prog("view_chain_out", lambda x: (x * 2)[1:].t()[0], A(leaf(3, 3)), A(tview(3, 4)), A(leaf(4, 2)))
prog(
    "random_rand_like",
    lambda x: x * torch.rand_like(x),
    A(leaf(3, dtype=F32)),
    A(leaf(3)),
    A(leaf(2, 2, dtype=F32)),
)
prog(
    "random_dropout_p",
    lambda x, p: torch.nn.functional.dropout(x, p),
    with_scalar(leaf(8), 0.5),
    with_scalar(leaf(8), 0.0),
    with_scalar(leaf(8), 1.0),
    with_scalar(leaf(8), 0.25),
)
prog(
    "random_bernoulli_inplace",
    lambda x: x.bernoulli_(0.5),
    A(leaf(6, rg=False)),
    A(leaf(6, dtype=F32, rg=False)),
    A(clone(6)),
)
prog(
    "saved_input_written_after",
    lambda x: (x.sin(), x[:]),
    (A(leaf(3)), NULL, _bump_second),
    (A(clone(3)), NULL, _bump_second),
    (A(leaf(3, rg=False)), NULL, _bump_second),
    (A(leaf(3)), NULL, _bump_second),
)
prog(
    "saved_output_written_after",
    lambda x: (lambda y: (y, y[:]))(x.exp()),
    (A(leaf(3)), NULL, _bump_second),
    (A(leaf(3, rg=False)), NULL, _bump_second),
    (A(leaf(3)), NULL, _bump_second),
)
prog(
    "nograd_fn_decorated",
    torch.no_grad()(lambda x: x * 2),
    A(leaf(3)),
    (A(leaf(3)), NOGRAD),
    A(clone(3)),
)
prog(
    "autocast_and_nograd",
    lambda a, b: a @ b,
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), lambda: _both(AUTOCAST(), torch.no_grad())),
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), AUTOCAST),
    (A(leaf(2, 2, dtype=F32), leaf(2, 2, dtype=F32)), NOGRAD),
)


# sizes that go dynamic after a recompile (torch.compile), then meet special cases


def sizes(fn_spec, ns):
    return [A(fn_spec(n)) for n in ns]


prog("dynsz_view_out_t", lambda x: x.t(), *sizes(lambda n: clone(n, 3), [2, 3, 4, 1, 5]))
prog(
    "dynsz_mut_view_input", lambda x: x.mul_(2), *sizes(lambda n: stepclone(2 * n, 2), [2, 3, 4, 1])
)
prog(
    "dynsz_chlast",
    lambda x: x * 2,
    *[A(chlast(1, 2, n, n)) for n in (2, 3, 4)],
    A(leaf(1, 2, 5, 5)),
    A(chlast(1, 2, 1, 1)),
)
prog(
    "dynsz_expand_in",
    lambda x: x.sum(0) * x,
    *[A(expand(n, 3)) for n in (2, 3, 4)],
    A(leaf(5, 3)),
    A(expand(1, 3)),
)
prog(
    "dynsz_reshape_view_or_copy",
    lambda x: x.reshape(-1),
    *[A(clone(n, 2)) for n in (2, 3, 4)],
    A(tclone(2, 5)),
    A(clone(1, 2)),
)
prog("dynsz_same_twice", mul, *[two_clones(n) for n in (2, 3, 4)], same_twice(5), two_clones(1))
prog(
    "dynsz_cat_outs_views",
    lambda x: (x[: x.shape[0] // 2], x[x.shape[0] // 2 :]),
    *[A(clone(n)) for n in (2, 4, 6, 1, 7)],
)
prog(
    "dynsz_broadcast_1",
    lambda x, y: x * y,
    *[A(leaf(n, 3), leaf(n, 3)) for n in (2, 3, 4)],
    A(leaf(1, 3), leaf(5, 3)),
    A(leaf(5, 3), leaf(1, 3)),
)
prog("dynsz_zero_then", lambda x: x.mean(0), *[A(leaf(n, 2)) for n in (2, 3, 4, 0, 5)])
prog("dynsz_offset", lambda x: x * 2, *[A(offs(n)) for n in (3, 4, 5)], A(leaf(6)), A(offs(2)))


# Python scalars equal as values but of other types (1 == 1.0 == True, 0.0 == -0.0)

prog(
    "scalar_1_vs_1p0",
    lambda x, s: x * s,
    with_scalar(leaf(3, dtype=I64), 1),
    with_scalar(leaf(3, dtype=I64), 1.0),
    with_scalar(leaf(3, dtype=I64), True),
)
prog(
    "scalar_true_vs_1_bool",
    lambda x, s: x + s,
    with_scalar(leaf(3, dtype=torch.bool), True),
    with_scalar(leaf(3, dtype=torch.bool), 1),
    with_scalar(leaf(3, dtype=torch.bool), 1.0),
)
prog(
    "scalar_neg_zero",
    lambda x, s: 1 / (x.abs() * s),
    with_scalar(leaf(3), 0.0),
    with_scalar(leaf(3), -0.0),
    with_scalar(leaf(3), 0.0),
)
prog(
    "scalar_neg_zero_branch",
    lambda x, s: x * 2 if str(s).startswith("-") else x * 3,
    with_scalar(leaf(3), 0.0),
    with_scalar(leaf(3), -0.0),
)
prog(
    "scalar_type_branch",
    lambda x, s: x * 2 if isinstance(s, bool) else x * 3,
    with_scalar(leaf(3), 1),
    with_scalar(leaf(3), True),
    with_scalar(leaf(3), 1.0),
)
prog(
    "scalar_float_type_branch",
    lambda x, s: x * 2 if isinstance(s, float) else x * 3,
    with_scalar(leaf(3), 1),
    with_scalar(leaf(3), 1.0),
)
prog(
    "scalar_nan",
    lambda x, s: x + s,
    with_scalar(leaf(3), float("nan")),
    with_scalar(leaf(3), 1.0),
    with_scalar(leaf(3), float("nan")),
)
prog(
    "scalar_big_int",
    lambda x, s: x + s,
    with_scalar(leaf(3, dtype=I64), 2**40),
    with_scalar(leaf(3, dtype=I64), 2**62),
    with_scalar(leaf(3, dtype=I64), 3),
)
prog(
    "tuple_vs_list_arg",
    lambda x, t: x * 2 if isinstance(t, tuple) else x * 3,
    A(leaf(3), val((1, 2))),
    A(leaf(3), val([1, 2])),
    A(leaf(3), val((1, 2))),
)
prog(
    "dtype_arg_equal_types",
    lambda x, dt: torch.zeros(2, dtype=dt) + x.sum(),
    A(leaf(3), val(torch.float32)),
    A(leaf(3), val(torch.float64)),
    A(leaf(3), val(torch.int32)),
)


prog(
    "branch_bool_item",
    lambda x: x * 2 if (x.sum() > 0).item() else x * 3,
    A(lambda: ((t := torch.ones(3, dtype=F64, requires_grad=True)), t)),
    A(lambda: ((t := -torch.ones(3, dtype=F64).requires_grad_()), t)),
)
prog(
    "scalar_int_of_tensor",
    lambda x, t: x * int(t),
    A(leaf(3), lambda: (torch.tensor(2), None)),
    A(leaf(3), lambda: (torch.tensor(3), None)),
)
prog(
    "scalar_tolist_of_tensor",
    lambda x, t: x * t.tolist(),
    A(leaf(3), lambda: (torch.tensor(2.0), None)),
    A(leaf(3), lambda: (torch.tensor(3.0), None)),
)


@pytest.mark.parametrize("comp", FN_COMPILERS)
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_recompile_like_eager(name, comp, request):
    check_program(PROGRAMS, name, comp, request)


# meta tensors between CPU calls: the oracle reads values, so these compare metadata only

META_PROGRAMS = {
    "meta_after_cpu": (lambda x: x * 2 + 1, ["cpu", "meta", "cpu"]),
    "meta_first": (lambda x: x.new_ones(x.shape).sum(0), ["meta", "cpu", "meta"]),
    "meta_view_out": (lambda x: x.t()[0], ["cpu", "meta"]),
}


def _meta_facts(g, devices):
    seen = []
    for d in devices:
        torch.manual_seed(0)
        x = torch.randn(2, 3, dtype=F64, device=d)
        try:
            o = g(x)
        except Exception as e:
            seen.append(type(e).__name__)
            continue
        seen.append(
            [
                str(o.device),
                o.dtype,
                list(o.shape),
                list(o.stride()),
                o.storage_offset(),
                None if d == "meta" else o.clone(),
            ]
        )
    return seen


@pytest.mark.parametrize("comp", FN_COMPILERS)
@pytest.mark.parametrize("name", list(META_PROGRAMS))
def test_meta_device_between_calls(name, comp, request):
    _known(name, comp, request)
    fn, devices = META_PROGRAMS[name]
    eager = _meta_facts(fn, devices)
    compiled = _meta_facts(COMPILERS[comp](fn), devices)
    diffs = _differences(eager, compiled)
    assert not diffs, "\n".join(diffs)


# keyword arguments that change between calls (given, omitted, other values and types)


def _kw_fn(x, scale=1.0, *, flag=False, extra=None):
    y = x * scale
    if flag:
        y = y.sin()
    if extra is not None:
        y = y + extra
    return y


KW_CALLS = [
    {},
    {"scale": 2.0},
    {"flag": True},
    {"scale": 3, "flag": True},
    {"extra": "tensor"},
    {"extra": "tensor", "scale": 1.0},
    {},
]


def _kw_run(g):
    seen = []
    for kw in KW_CALLS:
        torch.manual_seed(0)
        x = torch.randn(3, dtype=F64, requires_grad=True)
        e = torch.randn(3, dtype=F64, requires_grad=True)
        kw = {k: (e if v == "tensor" else v) for k, v in kw.items()}
        out = g(x, **kw)
        out.backward(torch.arange(3.0, dtype=F64))
        seen.append(
            [out.detach().clone(), x.grad.clone(), None if e.grad is None else e.grad.clone()]
        )
    return seen


@pytest.mark.parametrize("comp", FN_COMPILERS)
def test_keyword_arguments_between_calls(comp, request):
    _known("kwargs", comp, request)
    diffs = _differences(_kw_run(_kw_fn), _kw_run(COMPILERS[comp](_kw_fn)))
    assert not diffs, "\n".join(diffs)
