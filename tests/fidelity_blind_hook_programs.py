"""The programs of ``test_fidelity_blind_hooks`` (``CASES``: name -> (program, inputs,
options)), written from the family description alone by a helper that had not read the
implementation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from eager_oracle import DirtyMul, Half, SavedSquare, ViewOf

DT = torch.float64


def _shape_dep(g: torch.Tensor) -> torch.Tensor:
    return g + g.sum(0, keepdim=True)


def _triple(g: torch.Tensor) -> torch.Tensor:
    return g * 3


def _plus1(g: torch.Tensor) -> torch.Tensor:
    return g + 1


# --- argument makers -------------------------------------------------------------------


def leaf2():
    x = torch.randn(4, 4, dtype=DT, requires_grad=True)
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [x, w], [x, w]


def clone2():
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [leaf.clone(), w], [leaf, w]


def overlap():
    leaf = torch.randn(6, 4, dtype=DT, requires_grad=True)
    b = leaf.clone()
    return [b[0:4], b[2:6].t()], [leaf]


def disjoint():
    leaf = torch.randn(8, 4, dtype=DT, requires_grad=True)
    b = leaf.clone()
    return [b[0:4], b[4:8]], [leaf]


def same_twice():
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    x = leaf.clone()
    return [x, x], [leaf]


def clone_and_buffer():
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    s = torch.randn(4, 4, dtype=DT)
    return [leaf.clone(), s], [leaf]


def leaf_and_buffer():
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    s = torch.randn(4, 4, dtype=DT)
    return [leaf, s], [leaf]


def view_of_leafclone():
    leaf = torch.randn(4, 4, dtype=DT, requires_grad=True)
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    return [leaf.clone().t(), w], [leaf, w]


CASES: dict[str, tuple[Callable, Callable, dict[str, Any]]] = {}


def case(make: Callable, **kw: Any) -> Callable[[Callable], Callable]:
    def deco(fn: Callable) -> Callable:
        CASES[fn.__name__] = (fn, make, kw)
        return fn

    return deco


# --- hooks on intermediates / outputs ----------------------------------------------------


@case(clone2)
def p01_shape_dep_hook_on_intermediate(x, w):
    y = x * w
    y.register_hook(_shape_dep)
    return y.sin()


@case(leaf2)
def p02_shape_dep_hook_on_output(x, w):
    y = x * w
    y.register_hook(_shape_dep)
    return y, y.cos()


@case(clone2)
def p03_hook_on_view_of_intermediate_not_returned(x, w):
    y = x * w
    v = y[1:]
    v.register_hook(_shape_dep)
    return (v * 2).sum(0), y.exp()


@case(clone2)
def p04_hook_on_view_of_intermediate_returned(x, w):
    y = x * w
    v = y.t()
    v.register_hook(_shape_dep)
    return v, y


@case(clone2)
def p05_hook_returning_none_on_intermediate(x, w):
    seen = []
    y = x + w
    y.register_hook(lambda g: seen.append(g.shape) and None)
    return y * y


@case(clone2)
def p06_hook_removed_on_intermediate(x, w):
    y = x * w
    h = y.register_hook(_triple)
    z = y.sin()
    h.remove()
    return z, y


@case(clone2)
def p07_two_hooks_order_on_intermediate(x, w):
    y = x * w
    y.register_hook(_triple)
    y.register_hook(_plus1)  # (g*3)+1, not (g+1)*3
    return y.tanh()


@case(clone2)
def p08_hook_then_inplace_on_intermediate(x, w):
    y = x * 2
    y.register_hook(_shape_dep)
    y.mul_(w)
    return y


@case(clone2)
def p09_inplace_then_hook_on_intermediate(x, w):
    y = x * 2
    y.mul_(w)
    y.register_hook(_shape_dep)
    return y


@case(clone2)
def p10_hook_on_intermediate_view_then_base_written(x, w):
    y = x * 2
    v = y[0]
    v.register_hook(_triple)
    y.add_(w)
    return v, y


@case(clone2)
def p11_hook_on_view_then_view_written(x, w):
    y = x * 2
    v = y[1:3]
    v.register_hook(_triple)
    v.mul_(w[1:3])
    return y


# --- hooks on inputs combined with writes -------------------------------------------------


@case(clone2)
def p12_hook_input_then_add_(x, w):
    x.register_hook(_shape_dep)
    x.add_(w)
    return x


@case(clone2)
def p13_hook_input_then_copy_(x, w):
    x.register_hook(_triple)
    x.copy_(w * 2)
    return x, w.sin()


@case(clone2)
def p14_hook_input_then_index_put_(x, w):
    x.register_hook(_shape_dep)
    idx = torch.tensor([0, 2])
    x.index_put_((idx,), w[1:3] * 3)
    return x * 2


@case(clone2)
def p15_index_put_then_hook_input(x, w):
    idx = torch.tensor([1, 3])
    x.index_put_((idx,), w[0:2], accumulate=True)
    x.register_hook(_shape_dep)
    return x, x[1]


@case(leaf2)
def p16_hook_leaf_input_returned_view(x, w):
    x.register_hook(_shape_dep)
    return x[1:], x.t(), w * x


@case(clone2)
def p17_unsqueeze_then_hook_input(x, w):
    x.unsqueeze_(0)
    x.register_hook(lambda g: g * 2 + g.sum(1, keepdim=True))
    return x, x.squeeze(0) * w


@case(view_of_leafclone)
def p18_hook_then_t_on_transposed_input_not_returned(x, w):
    x.register_hook(_shape_dep)
    x.t_()
    return x * w


# --- overlapping / disjoint views of one base --------------------------------------------


@case(overlap)
def p19_overlap_hook_x0_write_x1(x0, x1):
    x0.register_hook(_shape_dep)
    x1.mul_(2)
    return x0 + x1


@case(overlap)
def p20_overlap_hook_x1_returned(x0, x1):
    x1.register_hook(_shape_dep)
    return x1, x0 * 3


@case(overlap)
def p21_overlap_write_x0_then_hook_x1(x0, x1):
    x0.add_(1)
    x1.register_hook(_triple)
    return x1.sum(0), x0


@case(disjoint)
def p22_disjoint_two_hooks(x0, x1):
    x0.register_hook(_triple)
    x1.register_hook(_shape_dep)
    return x0 * x1


@case(disjoint)
def p23_disjoint_hook_and_copy_(x0, x1):
    x0.register_hook(_shape_dep)
    x1.copy_(x0 * 2)
    return x1, x0


@case(same_twice)
def p24_same_tensor_twice_hooked(a, b):
    a.register_hook(_shape_dep)
    return a * b, b


@case(same_twice)
def p25_same_tensor_twice_written(a, b):
    a.register_hook(_triple)
    b.mul_(2)
    return a, b


# --- retain_grad (the oracle compares .grad of returned / argument tensors) ---------------


@case(clone2)
def p26_retain_grad_output(x, w):
    y = x * w
    y.retain_grad()
    return y, y.sin()


@case(clone2)
def p27_retain_grad_nonleaf_input(x, w):
    x.retain_grad()
    return x * w


@case(clone2)
def p28_retain_grad_input_then_inplace(x, w):
    x.retain_grad()
    x.mul_(w)
    return x


@case(clone2)
def p29_retain_grad_output_view(x, w):
    y = x * w
    v = y[1:]
    v.retain_grad()
    return v, y


@case(overlap)
def p30_retain_grad_overlapping_input(x0, x1):
    x1.retain_grad()
    x0.mul_(2)
    return x1 * 3


@case(clone2)
def p31_retain_grad_and_hook_on_output(x, w):
    y = x * w
    y.register_hook(_triple)
    y.retain_grad()
    y.register_hook(_plus1)
    return y


@case(clone2)
def p32_retain_grad_output_then_detach_(x, w):
    y = x * w
    y.retain_grad()
    z = y * 2
    y.detach_()
    return z, y


# --- post-accumulate-grad hooks on leaves ------------------------------------------------


@case(leaf2)
def p33_post_acc_sgd_step(x, w):
    def step(p):
        with torch.no_grad():
            p.sub_(0.1 * p.grad)

    x.register_post_accumulate_grad_hook(step)
    return x * w


@case(leaf2)
def p34_post_acc_scales_grad(x, w):
    x.register_post_accumulate_grad_hook(lambda p: p.grad.mul_(2))
    w.register_hook(_triple)
    return x * w, x


@case(leaf_and_buffer)
def p35_post_acc_writes_buffer(x, s):
    def hook(p):
        s.add_(p.grad)

    x.register_post_accumulate_grad_hook(hook)
    return (x * s).sum(0)


# --- detach / no_grad / closures -----------------------------------------------------------


@case(clone2)
def p36_detach_view_written_hook(x, w):
    d = x.detach()
    x.register_hook(_shape_dep)
    d.mul_(2)
    return x * w, d


@case(clone_and_buffer)
def p37_hook_closes_over_buffer_written_later(x, s):
    x.register_hook(lambda g: g * s)
    s.add_(1)  # eager's hook sees s at backward time
    return x * 2


@case(clone2, ctx=torch.no_grad)
def p38_no_grad_hook_raises(x, w):
    y = x * w
    y.register_hook(_triple)
    return y


@case(clone2, ctx=torch.no_grad)
def p39_no_grad_conditional_hook(x, w):
    y = x * w
    if y.requires_grad:
        y.register_hook(_triple)
    x.add_(1)
    return y, x


@case(clone2)
def p40_hook_in_no_grad_block_on_input(x, w):
    with torch.no_grad():
        x.register_hook(_triple)
    return x, x * w


# --- custom Functions ----------------------------------------------------------------------


@case(clone2)
def p41_half_output_hooked(x, w):
    y = Half.apply(x * w)
    y.register_hook(_shape_dep)
    return y


@case(clone2)
def p42_savedsquare_grad_fn_hooked(x, w):
    y = SavedSquare.apply(x + w)
    y.grad_fn.register_hook(lambda gi, go: (gi[0] * 2,))
    return y


@case(clone2)
def p43_dirtymul_then_hook(x, w):
    y = DirtyMul.apply(x)
    y.register_hook(_shape_dep)
    return y, w * 2


@case(clone2)
def p44_viewof_hooked_input(x, w):
    x.register_hook(_triple)
    v = ViewOf.apply(x)
    v.register_hook(_shape_dep)
    return v, x * w


@case(clone2)
def p45_savedsquare_grad_fn_prehook(x, w):
    y = SavedSquare.apply(x * w)
    y.grad_fn.register_prehook(lambda go: (go[0] + 1,))
    return y.sin()


@case(clone2)
def p46_hook_returns_inplace_modified(x, w):
    y = x * w
    y.register_hook(lambda g: g.clamp(min=0))
    return y.exp()


@case(leaf2)
def p47_hook_on_leaf_used_twice(x, w):
    x.register_hook(_shape_dep)
    return x * x, x * w


@case(clone2)
def p48_retain_grad_input_returned_twice_and_view(x, w):
    x.retain_grad()
    x.register_hook(_shape_dep)
    return x, x, x[0] * w[0]


@case(clone2)
def p49_retain_grad_view_of_input_then_input_written(x, w):
    v = x[0]
    v.retain_grad()
    x.mul_(w)
    return v, x


@case(overlap)
def p50_overlap_t_on_view_input_then_hook(x0, x1):
    x1.t_()
    x1.register_hook(_shape_dep)
    return x1, x0 * 2


@case(overlap)
def p51_detach_inplace_on_view_input_raises(x0, x1):
    y = x0 * 2
    x1.detach_()
    return y


@case(overlap)
def p52_dirtymul_on_view_input_hooked(x0, x1):
    y = DirtyMul.apply(x1)
    y.register_hook(_triple)
    return y, x0


@case(clone2)
def p53_hook_on_unsqueezed_intermediate_view(x, w):
    y = x * w
    v = y.unsqueeze(0)
    v.register_hook(lambda g: g + g.sum(1, keepdim=True))
    v.unsqueeze_(0)
    return v, y.sum()


@case(clone2)
def p54_hook_then_retain_grad_on_output(x, w):
    y = x * w
    y.register_hook(_triple)
    y.retain_grad()
    return y


@case(clone2)
def p55_hook_then_t_on_clone_input_not_returned(x, w):
    x.register_hook(_shape_dep)
    x.t_()
    return x * w


@case(clone2)
def p56_retain_grad_then_hook_on_output(x, w):
    y = x * w
    y.retain_grad()
    y.register_hook(_triple)
    return y


@case(clone2)
def p57_hook_on_input_view_then_index_put_on_view(x, w):
    v = x[1:3]
    v.register_hook(_shape_dep)
    v.index_put_((torch.tensor([0]),), w[0:1] * 2)
    return x, v


@case(clone2)
def p58_retain_grad_output_view_of_written_input(x, w):
    x.mul_(w)
    v = x.diagonal()
    v.retain_grad()
    return v, x[0]


@case(leaf2)
def p59_post_acc_on_leaf_returned_and_viewed(x, w):
    x.register_post_accumulate_grad_hook(lambda p: p.grad.add_(1))
    return x, x.t(), x * w


@case(same_twice)
def p60_same_tensor_twice_retain_and_hook(a, b):
    a.retain_grad()
    b.register_hook(_shape_dep)
    return a * 2, b.sin()


@case(clone2, ctx=torch.no_grad)
def p61_no_grad_input_hook_raises(x, w):
    x.register_hook(_triple)
    return x * w


@case(overlap)
def p62_overlap_retain_both_write_x1(x0, x1):
    x0.retain_grad()
    x1.retain_grad()
    x1.add_(1)
    return x0 * 2, x1


@case(clone2)
def p63_detach_then_hook_on_detached_raises(x, w):
    d = x.detach()
    d.register_hook(_triple)
    return x * w
