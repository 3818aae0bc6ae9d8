"""The programs of ``test_fidelity_blind_custom_functions`` (``CASES``: name -> (program,
inputs, options)): custom ``torch.autograd.Function`` inside the compiled function with
aliasing, mutation and grad modes, written from the family description alone by a helper
that had not read the implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

DT = torch.float64

# --- custom Functions ------------------------------------------------------------------


class Ident(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


class TView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.t()

    @staticmethod
    def backward(ctx, g):
        return g.t() * 2


class SliceView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x[1:]

    @staticmethod
    def backward(ctx, g):
        out = g.new_zeros((g.shape[0] + 1, *g.shape[1:]))
        out[1:] = g
        return out


class Multi(torch.autograd.Function):
    """Several outputs: a tensor, a Python int, None, a 0-dim tensor."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, 7, None, x.sum()

    @staticmethod
    def backward(ctx, g0, g1, g2, g3):
        return g0 * 2 + g3


class WithArgmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(0)
        mask = x > 0
        ctx.mark_non_differentiable(idx, mask)
        ctx.save_for_backward(mask)
        return x.relu(), idx, mask

    @staticmethod
    def backward(ctx, g, gi, gm):
        (mask,) = ctx.saved_tensors
        return g * mask


class NonDiffFloat(torch.autograd.Function):
    """A float output marked non-differentiable next to a differentiable one."""

    @staticmethod
    def forward(ctx, x):
        a = x * 2
        b = x.detach() + 1
        ctx.mark_non_differentiable(b)
        return a, b

    @staticmethod
    def backward(ctx, ga, gb):
        return ga * 2


class NoMat(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        out = None
        if ga is not None:
            out = ga * 2
        if gb is not None:
            out = gb * 3 if out is None else out + gb * 3
        return out


class NoMatFlag(torch.autograd.Function):
    """Backward records which gradients were None as a value change."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, ga, gb):
        return (ga if ga is not None else 0) + (100.0 if gb is None else gb)


class Needs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gx = g * w if ctx.needs_input_grad[0] else None
        gw = g * x * 5 if ctx.needs_input_grad[1] else None
        return gx, gw


class SaveOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


class SaveInter(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        s = x.sin()
        ctx.save_for_backward(s, x)
        return s * s

    @staticmethod
    def backward(ctx, g):
        s, x = ctx.saved_tensors
        return g * 2 * s * x.cos()


class CtxAttrs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, alpha, mode):
        ctx.alpha = alpha
        ctx.mode = mode
        ctx.shape = tuple(x.shape)
        return x * alpha

    @staticmethod
    def backward(ctx, g):
        r = g * ctx.alpha
        if ctx.mode == "twice":
            r = r * 2
        return r.reshape(ctx.shape), None, None


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x * x * g


class DirtyAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 4


class DirtyTwo(torch.autograd.Function):
    """Writes its input in place and returns it with a fresh second output."""

    @staticmethod
    def forward(ctx, x, w):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x, x * w

    @staticmethod
    def backward(ctx, gx, gy):
        return gx * 2, gy


class NoneForW(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x * w.detach()

    @staticmethod
    def backward(ctx, g):
        return g * 2, None


class InplaceGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        g.mul_(2)
        g.add_(1)
        return g


class InplaceGradTwo(torch.autograd.Function):
    """Backward writes its incoming gradients in place and returns them for two inputs."""

    @staticmethod
    def forward(ctx, x, w):
        return x + w

    @staticmethod
    def backward(ctx, g):
        g.mul_(3)
        return g, g


class ScalarArg(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k, b):
        ctx.k = k
        return x * k + b

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None, None


class GradModeFwd(torch.autograd.Function):
    """Forward that looks at the grad mode (eager runs forward under no_grad)."""

    @staticmethod
    def forward(ctx, x):
        return x * (2.0 if torch.is_grad_enabled() else 5.0)

    @staticmethod
    def backward(ctx, g):
        return g * (7.0 if torch.is_grad_enabled() else 11.0)


class AutocastMM(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        return g @ b.t(), a.t() @ g


# --- argument makers -------------------------------------------------------------------


def leaf1():
    x = torch.randn(4, 3, dtype=DT, requires_grad=True)
    return [x], [x]


def sq_leaf1():
    x = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [x], [x]


def clone1():
    leaf = torch.randn(4, 3, dtype=DT, requires_grad=True)
    return [leaf.clone()], [leaf]


def leaf2():
    x = torch.randn(4, 3, dtype=DT, requires_grad=True)
    w = torch.randn(4, 3, dtype=DT, requires_grad=True)
    return [x, w], [x, w]


def clone2():
    leaf = torch.randn(4, 3, dtype=DT, requires_grad=True)
    w = torch.randn(4, 3, dtype=DT, requires_grad=True)
    return [leaf.clone(), w], [leaf, w]


def view_input():
    leaf = torch.randn(5, 3, dtype=DT, requires_grad=True)
    return [leaf.clone()[1:]], [leaf]


def overlap():
    leaf = torch.randn(6, 3, dtype=DT, requires_grad=True)
    b = leaf.clone()
    return [b[0:4], b[2:6]], [leaf]


def nograd1():
    return [torch.randn(4, 3, dtype=DT)], []


def mixed():
    x = torch.randn(4, 3, dtype=DT, requires_grad=True)
    w = torch.randn(4, 3, dtype=DT)
    return [x, w], [x]


def zero_dim():
    x = torch.tensor(1.5, dtype=DT, requires_grad=True)
    return [x], [x]


def zero_dim_clone():
    leaf = torch.tensor(0.7, dtype=DT, requires_grad=True)
    return [leaf.clone()], [leaf]


def fp32_2():
    a = torch.randn(4, 4, requires_grad=True)
    b = torch.randn(4, 4, requires_grad=True)
    return [a, b], [a, b]


def flip_flags():
    """First call: x requires grad and w not; second call: the other way round."""
    flip_flags.n += 1
    first = flip_flags.n % 2 == 1
    x = torch.randn(4, 3, dtype=DT, requires_grad=first)
    w = torch.randn(4, 3, dtype=DT, requires_grad=not first)
    return [x, w], [t for t in (x, w) if t.requires_grad]


flip_flags.n = 0


def flip_one():
    """First call: x requires grad; second call: it does not."""
    flip_one.n += 1
    x = torch.randn(4, 3, dtype=DT, requires_grad=flip_one.n % 2 == 1)
    return [x], [x] if x.requires_grad else []


flip_one.n = 0

CASES: dict[str, tuple[Callable, Callable, dict[str, Any]]] = {}


def case(make: Callable, **kw: Any) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        CASES[fn.__name__] = (fn, make, kw)
        return fn

    return deco


def _write_first(outs):
    outs[0].add_(1)


# --- returning the input / a view of it -------------------------------------------------


@case(leaf1)
def c01_ident_on_leaf(x):
    return Ident.apply(x)


@case(clone1)
def c02_ident_on_clone_returned_with_input(x):
    y = Ident.apply(x)
    return y, x


@case(clone1)
def c03_ident_then_write_output(x):
    y = Ident.apply(x)
    y.mul_(2)
    return y


@case(clone1, after=_write_first)
def c04_ident_output_written_by_caller(x):
    return Ident.apply(x * 1)


@case(clone1)
def c05_tview_on_clone(x):
    y = TView.apply(x)
    return y, y.sum(1)


@case(clone1)
def c06_tview_then_write_view(x):
    y = TView.apply(x)
    y.add_(1)
    return y, x


@case(view_input)
def c07_slice_view_of_view_input(x):
    return SliceView.apply(x)


@case(clone1)
def c08_view_of_custom_output_returned(x):
    y = Ident.apply(x * 2)
    return y[1:], y


@case(clone1)
def c09_detach_of_custom_output(x):
    y = SaveOut.apply(x)
    d = y.detach()
    return y, d


@case(clone1)
def c10_detach_then_write_detached(x):
    y = Ident.apply(x * 2)
    d = y.detach()
    d.mul_(3)
    return y


@case(overlap)
def c11_ident_on_overlapping_views(x0, x1):
    return Ident.apply(x0), TView.apply(x1)


@case(nograd1)
def c12_ident_on_no_grad_input(x):
    return Ident.apply(x), SliceView.apply(x)


# --- several outputs / non-differentiable ------------------------------------------------


@case(clone1)
def c13_multi_outputs(x):
    a, n, none, s = Multi.apply(x)
    return a, n, none, s


@case(clone1)
def c14_multi_outputs_partly_used(x):
    a, n, _none, _s = Multi.apply(x)
    return a * n


@case(leaf1)
def c15_argmax_mark_non_differentiable(x):
    y, idx, mask = WithArgmax.apply(x)
    return y, idx, mask


@case(clone1)
def c16_non_diff_float_output_written(x):
    a, b = NonDiffFloat.apply(x)
    b.mul_(2)
    return a, b


@case(clone1)
def c17_non_diff_float_used_downstream(x):
    a, b = NonDiffFloat.apply(x)
    return a * b


# --- set_materialize_grads(False) ---------------------------------------------------------


@case(clone1)
def c18_nomat_one_output_used(x):
    a, _b = NoMat.apply(x)
    return a


@case(clone1)
def c19_nomat_both_outputs(x):
    a, b = NoMat.apply(x)
    return a, b.sum()


@case(clone1)
def c20_nomat_flag_second_unused(x):
    a, _b = NoMatFlag.apply(x)
    return a * 2


@case(clone1)
def c21_nomat_flag_second_detached(x):
    a, b = NoMatFlag.apply(x)
    return a, b.detach()


# --- needs_input_grad ---------------------------------------------------------------------


@case(mixed)
def c22_needs_input_grad_mixed(x, w):
    return Needs.apply(x, w)


@case(flip_flags)
def c23_needs_input_grad_flags_flip(x, w):
    return Needs.apply(x, w)


@case(clone2)
def c24_needs_input_grad_w_detached(x, w):
    return Needs.apply(x, w.detach())


# --- saved tensors ------------------------------------------------------------------------


@case(clone1)
def c25_save_output_then_write_output(x):
    y = SaveOut.apply(x)
    return y * 1, y


@case(clone1)
def c26_save_output_written_raises(x):
    y = SaveOut.apply(x)
    y.add_(1)
    return y


@case(clone1)
def c27_save_input_then_write_input_raises(x):
    y = Once.apply(x)
    x.mul_(2)
    return y


@case(clone1)
def c28_save_intermediate(x):
    return SaveInter.apply(x), x


@case(leaf1)
def c29_ctx_attrs_scalars(x):
    return CtxAttrs.apply(x, 2.5, "twice"), CtxAttrs.apply(x, -1.0, "once")


@case(clone1)
def c30_once_differentiable(x):
    return Once.apply(x).sum(0)


# --- mark_dirty ---------------------------------------------------------------------------


@case(clone1)
def c31_dirty_on_clone_input(x):
    y = DirtyAdd.apply(x)
    return y


@case(clone1)
def c32_dirty_on_clone_input_not_returned(x):
    y = DirtyAdd.apply(x)
    return y * 2


@case(view_input)
def c33_dirty_on_view_input(x):
    return DirtyAdd.apply(x)


@case(overlap)
def c34_dirty_on_overlapping_view(x0, x1):
    y = DirtyAdd.apply(x0)
    return y, x1 * 2


@case(clone2)
def c35_dirty_two_outputs(x, w):
    a, b = DirtyTwo.apply(x, w)
    return a, b, x


@case(clone1)
def c36_dirty_on_intermediate_view(x):
    y = x * 2
    v = y[1:]
    DirtyAdd.apply(v)
    return y


@case(leaf1)
def c37_dirty_on_leaf_raises(x):
    return DirtyAdd.apply(x)


@case(nograd1)
def c38_dirty_on_no_grad_input(x):
    return DirtyAdd.apply(x)


@case(mixed)
def c39_dirty_on_buffer_with_grad_value(x, w):
    DirtyAdd.apply(w)
    return x * w


# --- backward returning None / writing its gradient ---------------------------------------


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


@case(fp32_2, ctx=lambda: torch.autocast("cpu", dtype=torch.bfloat16))
def c94_called_under_autocast(a, b):
    return CastingMM.apply(a, b), AmpFwd.apply(a, b)


class ItemScale(torch.autograd.Function):
    """Forward reads a Python float off its input (.item()) and keeps it on ctx."""

    @staticmethod
    def forward(ctx, x):
        ctx.s = float(x.sum())
        return x * ctx.s

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s


class Fresh(torch.autograd.Function):
    """An output made from scratch, unrelated to the input."""

    @staticmethod
    def forward(ctx, x):
        return torch.ones(2, dtype=x.dtype), x + 1

    @staticmethod
    def backward(ctx, g1, g2):
        return g2 + g1.sum()


class BigGrad(torch.autograd.Function):
    """Backward returns a gradient larger than the input (eager sums it down)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.expand(2, *g.shape)


class FloatGrad(torch.autograd.Function):
    """Backward returns a float32 gradient for a float64 input (eager casts it)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.float() * 2


class GradForScalar(torch.autograd.Function):
    """Backward returns a tensor for a non-tensor input (eager raises)."""

    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g, g


class Unmarked(torch.autograd.Function):
    """Writes its input in place without mark_dirty."""

    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class DetachOut(torch.autograd.Function):
    """Returns x.detach(): an alias eager doesn't track as a view."""

    @staticmethod
    def forward(ctx, x):
        return x.detach()

    @staticmethod
    def backward(ctx, g):
        return g * 5


class Raises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise ValueError("no backward")


class ListArg(torch.autograd.Function):
    """Tensors in a list argument: invisible to autograd."""

    @staticmethod
    def forward(ctx, x, ws):
        return x + sum(ws)

    @staticmethod
    def backward(ctx, g):
        return g, None


@case(clone1)
def c95_item_in_forward(x):
    return ItemScale.apply(x)


@case(clone1)
def c96_fresh_output(x):
    a, b = Fresh.apply(x)
    return a, b


@case(clone1)
def c97_backward_grad_larger_than_input(x):
    return BigGrad.apply(x)


@case(clone1)
def c98_backward_grad_float32(x):
    return FloatGrad.apply(x)


@case(clone1)
def c99_backward_grad_for_scalar_raises(x):
    return GradForScalar.apply(x, 2.0)


@case(clone1)
def c100_unmarked_inplace_on_input(x):
    return Unmarked.apply(x), x


@case(clone1)
def c101_detach_output(x):
    y = DetachOut.apply(x)
    return y, x


@case(clone1)
def c102_detach_output_written(x):
    y = DetachOut.apply(x * 1)
    y.mul_(2)
    return y


@case(clone1)
def c103_backward_raises(x):
    return Raises.apply(x).sin()


@case(mixed)
def c104_tensors_in_list_arg(x, w):
    return ListArg.apply(x, [w, w * 2])


class Recompute(torch.autograd.Function):
    """Checkpoint-style: forward computes under enable_grad on a detached copy, backward
    differentiates it with torch.autograd.grad."""

    @staticmethod
    def forward(ctx, x):
        with torch.enable_grad():
            xd = x.detach().requires_grad_()
            y = xd.sin() * xd
        ctx.save_for_backward(xd, y)
        return y.detach()

    @staticmethod
    def backward(ctx, g):
        xd, y = ctx.saved_tensors
        (gx,) = torch.autograd.grad(y, xd, g)
        return gx


class Nested(torch.autograd.Function):
    """Forward calls another Function."""

    @staticmethod
    def forward(ctx, x):
        return SaveOut.apply(x) + 1

    @staticmethod
    def backward(ctx, g):
        return g * 9


class SaveNone(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(None, x, w if w.requires_grad else None)
        return x * w

    @staticmethod
    def backward(ctx, g):
        _none, x, w = ctx.saved_tensors
        return g * 2, (g * x if w is not None else None)


class ExtraNones(torch.autograd.Function):
    """Backward returns more values than inputs, the extra ones None."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2, None, None


class SaveView(torch.autograd.Function):
    """Saves a view of its input."""

    @staticmethod
    def forward(ctx, x):
        v = x[0]
        ctx.save_for_backward(v)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (v,) = ctx.saved_tensors
        return g * 2 + v.sum()


class NoMatNonDiff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        i = x.argmin(1)
        ctx.mark_non_differentiable(i)
        return x * 4, i

    @staticmethod
    def backward(ctx, g, gi):
        assert gi is None
        return None if g is None else g * 4


@case(overlap)
def c105_dirty_on_x0_return_both(x0, x1):
    DirtyAdd.apply(x0)
    return x0, x1


@case(clone1)
def c106_dirty_on_custom_view_output_raises(x):
    y = SliceView.apply(x * 1)
    return DirtyAdd.apply(y)


@case(clone1)
def c107_save_view_then_write_input_raises(x):
    y = SaveView.apply(x)
    x[1].mul_(2)
    return y


@case(clone1)
def c108_save_view_then_write_other_row(x):
    y = SaveView.apply(x)
    return y, x[0]


@case(clone1)
def c109_recompute_style(x):
    return Recompute.apply(x), x.cos()


@case(clone1)
def c110_nested_function(x):
    return Nested.apply(x)


@case(flip_flags)
def c111_save_none_flag_flip(x, w):
    return SaveNone.apply(x, w)


@case(clone1)
def c112_backward_extra_nones(x):
    return ExtraNones.apply(x)


@case(clone1)
def c113_nomat_non_diff(x):
    y, i = NoMatNonDiff.apply(x)
    return y, i


@case(clone1)
def c114_nomat_non_diff_only_index(x):
    _y, i = NoMatNonDiff.apply(x)
    return x * i.double().sum()


def nograd_base_view():
    base = torch.randn(6, 3, dtype=DT)
    w = torch.randn(4, 3, dtype=DT, requires_grad=True)
    return [base[1:5], w], [w]


@case(nograd_base_view)
def c115_needs_grad_on_gradless_view(x, w):
    y = Needs.apply(x, w)
    x.add_(1)
    return y, x


@case(nograd_base_view)
def c116_dirty_gradless_view_with_grad_value(x, w):
    x.mul_(w)
    DirtyAdd.apply(x)
    return x


@case(mixed)
def c117_once_differentiable_gradless_second(x, w):
    return Once.apply(x) + Once.apply(w)


@case(clone2)
def c118_dirty_two_fresh_written_by_caller(x, w):
    a, b = DirtyTwo.apply(x, w)
    b.add_(1)
    return a, b


def flip_overlap():
    """Overlapping views of a base that requires grad on the first call only."""
    flip_overlap.n += 1
    leaf = torch.randn(6, 3, dtype=DT, requires_grad=flip_overlap.n % 2 == 1)
    b = leaf.clone()
    return [b[0:4], b[2:6]], [leaf] if leaf.requires_grad else []


flip_overlap.n = 0


def flip_zero_dim():
    flip_zero_dim.n += 1
    x = torch.tensor(0.3, dtype=DT, requires_grad=flip_zero_dim.n % 2 == 0)
    return [x, 2.5], [x] if x.requires_grad else []


flip_zero_dim.n = 0


@case(flip_overlap)
def c119_dirty_overlap_flag_flip(x0, x1):
    DirtyAdd.apply(x1)
    return x0 * 2, Ident.apply(x1)


@case(flip_zero_dim)
def c120_zero_dim_python_scalar_flag_flip(x, k):
    return ScalarArg.apply(x, k, 1.0), CtxAttrs.apply(x, k, "twice")


@case(clone1, ctx=torch.inference_mode)
def c121_dirty_under_inference_mode(x):
    y = x * 2
    return DirtyAdd.apply(y), Multi.apply(y)[0]


@case(flip_one)
def c122_nomat_flag_flip(x):
    a, _b = NoMatFlag.apply(x)
    return a


@case(flip_one)
def c123_inplace_grad_backward_flag_flip(x):
    return InplaceGrad.apply(x).t(), x


@case(clone1)
def c124_no_grad_block_then_grad_on_same_function(x):
    with torch.no_grad():
        a = TView.apply(x)
    b = TView.apply(x)
    return a, b, a + b


@case(clone1)
def c125_enable_grad_inside_no_grad_inside(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = Needs.apply(x, y)
    return z, y


@case(fp32_2)
def c126_autocast_dirty_on_bf16_intermediate(a, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = a @ b
        DirtyAdd.apply(h)
    return h
