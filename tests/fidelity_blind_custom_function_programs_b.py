"""More programs of ``test_fidelity_blind_custom_functions`` (part 2), registered in
``fidelity_blind_custom_function_programs.CASES``."""

from __future__ import annotations

import torch

from fidelity_blind_custom_function_programs import (
    AutocastMM,
    DirtyAdd,
    GradModeFwd,
    Ident,
    InplaceGrad,
    InplaceGradTwo,
    Multi,
    Needs,
    NoMat,
    NoneForW,
    SaveInter,
    SaveOut,
    ScalarArg,
    TView,
    _write_first,
    case,
    clone1,
    clone2,
    flip_flags,
    flip_one,
    fp32_2,
    leaf1,
    leaf2,
    overlap,
    view_input,
    zero_dim,
    zero_dim_clone,
)


@case(leaf2)
def c40_backward_none_for_w(x, w):
    return NoneForW.apply(x, w)


@case(clone1)
def c41_inplace_grad_in_backward(x):
    y = InplaceGrad.apply(x)
    return y, y * 3


@case(clone2)
def c42_inplace_grad_shared_for_two(x, w):
    return InplaceGradTwo.apply(x, w).sin()


@case(clone1)
def c43_inplace_grad_on_view_output(x):
    y = InplaceGrad.apply(x)
    return y.t()


# --- scalars, 0-dim ------------------------------------------------------------------------


@case(zero_dim)
def c44_zero_dim_ident(x):
    return Ident.apply(x), SaveOut.apply(x)


@case(zero_dim_clone)
def c45_zero_dim_dirty(x):
    return DirtyAdd.apply(x) * 2


@case(clone1)
def c46_python_scalar_args(x):
    return ScalarArg.apply(x, 3, 0.5), ScalarArg.apply(x, -2.0, 1)


# --- grad modes ----------------------------------------------------------------------------


@case(clone1, ctx=torch.no_grad)
def c47_called_under_no_grad(x):
    y = SaveOut.apply(x)
    return y, Ident.apply(x)


@case(clone1, ctx=torch.inference_mode)
def c48_called_under_inference_mode(x):
    return SaveOut.apply(x * 2)


@case(clone1)
def c49_no_grad_block_inside(x):
    with torch.no_grad():
        y = SaveOut.apply(x)
    return y, SaveOut.apply(x)


@case(clone1, ctx=torch.no_grad)
def c50_enable_grad_inside_no_grad(x):
    with torch.enable_grad():
        y = SaveOut.apply(x)
    return y


@case(clone1)
def c51_grad_mode_seen_by_forward_backward(x):
    return GradModeFwd.apply(x)


@case(clone1)
def c52_inference_mode_block_inside(x):
    with torch.inference_mode():
        y = Ident.apply(x * 2)
    return x * 2, y.clone()


@case(clone1, ctx=torch.no_grad)
def c53_dirty_under_no_grad(x):
    return DirtyAdd.apply(x)


# --- autocast --------------------------------------------------------------------------------


@case(fp32_2)
def c54_autocast_block_custom_mm(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = AutocastMM.apply(a, b)
        z = a @ y.float()
    return y, z


@case(fp32_2)
def c55_autocast_disabled_nested(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ b
        with torch.autocast("cpu", enabled=False):
            z = AutocastMM.apply(y.float(), b)
    return y, z


@case(fp32_2)
def c56_autocast_custom_fwd_dtype(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = SaveOut.apply(a @ b)
    return y


# --- second call with other requires_grad flags ------------------------------------------------


@case(flip_one)
def c57_ident_flag_flip(x):
    y = Ident.apply(x)
    return y, x


@case(flip_flags)
def c58_backward_none_flag_flip(x, w):
    return NoneForW.apply(x, w)


@case(flip_one)
def c59_dirty_flag_flip(x):
    y = x * 1
    return DirtyAdd.apply(y), y


# --- more aliasing around the Function ----------------------------------------------------


@case(clone1)
def c60_ident_output_written_input_returned(x):
    y = Ident.apply(x)
    y.add_(2)
    return x


@case(clone1)
def c61_input_written_after_ident(x):
    y = Ident.apply(x)
    x.mul_(3)
    return y, x


@case(clone1)
def c62_save_input_written_after_raises_at_backward(x):
    y = SaveInter.apply(x)
    x.add_(1)
    return y


@case(view_input)
def c63_tview_of_view_input_written(x):
    y = TView.apply(x)
    y.mul_(2)
    return y


@case(clone1)
def c64_dirty_then_ident_then_view(x):
    y = DirtyAdd.apply(x)
    z = Ident.apply(y)
    return z[0], z


@case(clone2)
def c65_dirty_on_clone_input_with_saved_other(x, w):
    y = Needs.apply(w, x)
    DirtyAdd.apply(x)
    return y, x


@case(leaf1)
def c66_nomat_view_outputs_only_second_used(x):
    _a, b = NoMat.apply(x)
    return b.t()


@case(clone1)
def c67_ident_detach_inplace_output(x):
    y = Ident.apply(x * 2)
    z = y * 3
    y.detach_()
    return y, z


@case(overlap)
def c68_dirty_on_x1_read_x0(x0, x1):
    DirtyAdd.apply(x1)
    return x0 * 2


@case(clone1)
def c69_multi_and_write_int_path(x):
    a, _n, _none, s = Multi.apply(x)
    a.add_(s)
    return a, s


@case(clone1, ctx=torch.no_grad)
def c70_enable_grad_ident_returned(x):
    with torch.enable_grad():
        y = Ident.apply(x)
    return y, x


@case(clone1)
def c71_no_grad_dirty_inside(x):
    y = x * 2
    with torch.no_grad():
        DirtyAdd.apply(y)
    return y


@case(fp32_2)
def c72_autocast_custom_ident(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = Ident.apply(a @ b)
        with torch.autocast("cpu", enabled=False):
            z = TView.apply(y) @ b
    return y, z


@case(flip_one)
def c73_save_output_flag_flip(x):
    y = SaveOut.apply(x)
    return y, y.detach()


@case(zero_dim_clone)
def c74_zero_dim_inplace_grad_backward(x):
    return InplaceGrad.apply(x), Multi.apply(x)[3]


@case(clone2)
def c75_needs_input_grad_same_tensor_twice(x, w):
    return Needs.apply(x, x), w


@case(leaf1)
def c76_ident_on_leaf_written_raises(x):
    y = Ident.apply(x)
    y.add_(1)
    return y


class Twice(torch.autograd.Function):
    """Returns its input twice."""

    @staticmethod
    def forward(ctx, x):
        return x, x

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * 2 + gb * 3


class SelfAndRow(torch.autograd.Function):
    """Returns its input and a view of it."""

    @staticmethod
    def forward(ctx, x):
        return x, x[0]

    @staticmethod
    def backward(ctx, ga, gb):
        out = ga * 2
        out[0] += gb
        return out


class NonDiffAlias(torch.autograd.Function):
    """A non-differentiable output that is a view of the input."""

    @staticmethod
    def forward(ctx, x):
        v = x.t()
        ctx.mark_non_differentiable(v)
        return x * 2, v

    @staticmethod
    def backward(ctx, g, gv):
        return g * 2


def _write_second(outs):
    outs[1].add_(1)


def _write_all_inputs_like(outs):
    for o in outs:
        if isinstance(o, torch.Tensor):
            o.mul_(2)
            break


@case(clone1, after=_write_first)
def c77_tview_output_written_by_caller(x):
    return TView.apply(x)


@case(clone1, after=_write_second)
def c78_saved_input_returned_written_by_caller(x):
    return SaveInter.apply(x), x


@case(clone1, after=_write_first)
def c79_saved_output_written_by_caller(x):
    return SaveOut.apply(x)


@case(clone1, after=_write_first)
def c80_dirty_output_written_by_caller(x):
    return DirtyAdd.apply(x)


@case(clone1)
def c81_twice_same_input(x):
    a, b = Twice.apply(x)
    return a, b


@case(clone1)
def c82_twice_write_one(x):
    a, b = Twice.apply(x * 1)
    a.mul_(2)
    return a, b


@case(clone1)
def c83_self_and_row(x):
    a, r = SelfAndRow.apply(x)
    return a, r


@case(leaf1)
def c84_self_and_row_on_leaf(x):
    a, r = SelfAndRow.apply(x)
    return r * 2, a.sum()


@case(clone1)
def c85_non_diff_alias_view(x):
    a, v = NonDiffAlias.apply(x)
    return a, v


@case(clone1)
def c86_non_diff_alias_written(x):
    a, v = NonDiffAlias.apply(x * 1)
    v.add_(1)
    return a, v


@case(clone1, after=_write_second)
def c87_multi_sum_written_by_caller(x):
    a, _n, _none, s = Multi.apply(x)
    return a, s


@case(flip_one, ctx=torch.no_grad)
def c88_enable_grad_dirty_flag_flip(x):
    with torch.enable_grad():
        y = DirtyAdd.apply(x * 1)
    return y


@case(flip_flags)
def c89_autocast_flag_flip(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = AutocastMM.apply(x.float(), w.float().t())
    return y


class CastingMM(torch.autograd.Function):
    """a @ b whose backward casts the gradient back to each input's dtype."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        ga = (g.float() @ b.float().t()).to(a.dtype)
        gb = (a.float().t() @ g.float()).to(b.dtype)
        return ga, gb


class AmpFwd(torch.autograd.Function):
    """torch.amp.custom_fwd(cast_inputs=float32): runs in float32 inside an autocast region."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.t(), a.t() @ g


class AmpFwdPlain(torch.autograd.Function):
    """torch.amp.custom_fwd without cast_inputs: forward keeps the caller's autocast state."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return (g @ b.t().to(g.dtype)).to(a.dtype), (a.t().to(g.dtype) @ g).to(b.dtype)


@case(fp32_2)
def c90_autocast_casting_mm(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = CastingMM.apply(a, b)
        z = y @ a
    return y, z


@case(fp32_2)
def c91_autocast_custom_fwd_cast_inputs(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = AmpFwd.apply(a.to(torch.bfloat16), b)
        z = a @ b
    return y, z


@case(fp32_2)
def c92_autocast_custom_fwd_plain(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = AmpFwdPlain.apply(a, b)
    return y, y.float().sin()


@case(fp32_2)
def c93_autocast_disabled_inside_then_casting_mm(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = a @ b
        with torch.autocast("cpu", enabled=False):
            y = CastingMM.apply(h, b.to(h.dtype))
        z = Ident.apply(y) @ b
    return z
