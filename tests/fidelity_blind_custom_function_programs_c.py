"""More programs of ``test_fidelity_blind_custom_functions`` (part 3), registered in
``fidelity_blind_custom_function_programs.CASES``."""

from __future__ import annotations

import torch

from fidelity_blind_custom_function_programs import (
    DT,
    CtxAttrs,
    DirtyAdd,
    DirtyTwo,
    Ident,
    InplaceGrad,
    Multi,
    Needs,
    NoMatFlag,
    Once,
    SaveOut,
    ScalarArg,
    SliceView,
    TView,
    case,
    clone1,
    clone2,
    flip_flags,
    flip_one,
    fp32_2,
    mixed,
    overlap,
)
from fidelity_blind_custom_function_programs_b import (
    AmpFwd,
    CastingMM,
)


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
