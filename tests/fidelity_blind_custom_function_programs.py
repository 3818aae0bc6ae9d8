"""The programs of ``test_fidelity_blind_custom_functions`` (``CASES``: name -> (program,
inputs, options)): custom ``torch.autograd.Function`` inside the compiled function with
aliasing, mutation and grad modes, written from the family description alone by a helper
that had not read the implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from eager_oracle import SaveOut

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
