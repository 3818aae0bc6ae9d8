"""What eager's autograd says about a view and its node, for the calls the trace makes
(``eager_calls``): whether its path to its base is view ops only, whether it requires grad
through its base (made under ``no_grad``), and a restrided view rebuilt on its base.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

import torch

__all__ = [
    "PAST_REINTERPRETED",
    "VIEW_NODES",
    "from_base",
    "inherits_requires_grad",
    "reads_as_base",
    "requires_grad_by_base",
    "restrided_view",
    "views_only",
]

#: Autograd nodes of view ops (the name without its trailing number).
VIEW_NODES = frozenset(
    {
        "AliasBackward",
        "AsStridedBackward",
        "DiagonalBackward",
        "ExpandBackward",
        "PermuteBackward",
        "SelectBackward",
        "SliceBackward",
        "SplitBackward",
        "SplitWithSizesBackward",
        "SqueezeBackward",
        "TBackward",
        "TransposeBackward",
        "UnbindBackward",
        "UnfoldBackward",
        "UnsafeViewBackward",
        "UnsqueezeBackward",
        "ViewBackward",
    }
)


def views_only(t: torch.Tensor, hooked: Container[int] = ()) -> bool:
    """Whether autograd's path from the view ``t`` to its base is view ops only (not a
    custom Function that returned a view, whose backward eager runs), none of them in
    ``hooked`` (ids of nodes a hook sits on: eager's gradient passes through it). With
    grad on, reading ``t.grad_fn`` raises as eager's view of ``t`` would (a view of one
    of several outputs whose base was written)."""
    if not (t.requires_grad and torch.is_grad_enabled()):
        return True  # no autograd history is made
    if t.grad_fn is None:  # taken before its base required grad: eager's ends at it
        return False
    node, stop = t.grad_fn, t._base.grad_fn
    while node is not None and node is not stop:
        if type(node).__name__.rstrip("0123456789") not in VIEW_NODES or id(node) in hooked:
            return False
        following = [n for n, _ in node.next_functions if n is not None]
        if len(following) != 1:
            return False
        node = following[0]
        if stop is None and type(node).__name__ == "AccumulateGrad":
            return True
    return True


def from_base(t: Any, hooked: Container[int] = ()) -> bool:
    """Whether ``as_strided`` of the view ``t`` may be taken from ``t._base`` instead
    (``EagerCalls._as_strided``): requiring grad as its base does or not at all, through
    view ops only and no hooked node (``views_only``: soak 241072, ``v.register_hook(h);
    v.as_strided(...)`` skipped ``h``), reading the base's bytes as it does (not
    ``view_as_real(x)``: its ``as_strided`` is of float elements, soak 122223)."""
    return (
        isinstance(t, torch.Tensor)
        and t._base is not None
        and reads_as_base(t)
        and (t.requires_grad == t._base.requires_grad or not t.requires_grad)
        and views_only(t, hooked)
    )


def inherits_requires_grad(t: torch.Tensor) -> bool:
    """A view made under no_grad of a tensor that requires grad: it says it requires grad
    (its base does) but has no accumulator until ``requires_grad_()`` makes it a leaf
    of its own."""
    if not t._is_view():
        return False
    if torch._C._autograd._get_creation_meta(t) != torch._C._autograd.CreationMeta.NO_GRAD_MODE:
        return False
    try:
        return t.grad_fn is None
    except RuntimeError:  # a stale one (its base written with grad): eager's call reads none
        return False


def requires_grad_by_base(o: torch.Tensor) -> bool:
    """A leaf view whose base requires grad (made under ``no_grad``): it requires grad
    whatever its own flag says, so ``requires_grad_(False)`` changes nothing."""
    return o._is_view() and o._base is not None and o._base.requires_grad


def gradless_view(t: torch.Tensor) -> bool:
    """A view that neither requires grad nor has a base that does, of a base of its own
    dtype: an in-place restride of it is as one made under no_grad (nothing records it,
    and ``restrided_view`` makes it of its base)."""
    base = t._base
    return (
        base is not None and base.dtype == t.dtype and not (t.requires_grad or base.requires_grad)
    )


#: ``x.real.as_strided_(...)`` with grad past the view's elements: eager's gradient
#: reaches only the view's elements (``as_strided``'s backward), the trace's (of the
#: base's bytes as floats) the others too (soak 141884). The call runs eagerly.
PAST_REINTERPRETED = (
    "as_strided_ with grad on a view that reads its base's bytes as another dtype "
    "(x.real, view_as_real(x)) reaches elements outside the view"
)


def reads_as_base(t: torch.Tensor) -> bool:
    """The view ``t`` reads its base's bytes as the base does (same dtype, conj and neg
    bits): an ``as_strided`` of the base can stand for it (not of ``x.real`` or
    ``view_as_real(x)``: float elements of a complex base, soak 122223, 141884)."""
    base = t._base
    return (t.dtype, t.is_conj(), t.is_neg()) == (base.dtype, base.is_conj(), base.is_neg())


def restrided_view(t: torch.Tensor) -> torch.Tensor:
    """``t`` after ``as_strided_``, as a view of its base (an ``as_strided`` after a view
    chain's first step is banned under functionalization)."""
    return t._base.as_strided(t.size(), t.stride(), t.storage_offset())
