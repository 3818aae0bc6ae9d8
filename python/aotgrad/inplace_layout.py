"""An in-place write keeps its tensor's strides, traced as in eager.

Functionalization turns ``v.masked_fill_(m, x)`` into ``v = masked_fill(v, m, x)``: the
new value takes the strides the out-of-place op gives (``masked_fill``, ``lerp`` and
others return contiguous tensors), not ``v``'s. Where ``v`` is a transposed view
(``x.t().masked_fill_(...)``), the base regenerated from it comes out transposed, and
every later op on the base follows that layout: ``torch.where(x > 0, x, x)`` returned
strides ``(1, 4)`` where eager's are ``(4, 1)``, and a later ``.view(-1)`` raised where
eager's runs (soak 38415, 22745, 27790, 37969).

``keep_layout(t)``, after an in-place write to the functional stand-in ``t``, gives
``t``'s value ``t``'s own strides (an ``empty_strided`` and a ``copy`` in the graph,
only where they differ).

That is too late where ``t`` is a view whose chain back to its base cannot take another
layout: functionalization propagates the write to the base inside the write itself,
through each view op's inverse, and the inverse of ``view`` is a ``view``. After ``t =
x.reshape(2, -1); t.t_()``, ``t[t > 0] = 0`` gave ``t`` a contiguous value, transposed
back to strides ``(1, 2)``, which no ``view`` makes ``x``'s ``(4, 4)``: the write raised
"Cannot view a tensor with shape ..." where eager's runs (seed 111287).
``keeping_layout(t)``, around such a write, computes the in-place op's functional form
on a transposed view and writes its value into ``t`` with ``copy_`` (whose value keeps
``t``'s strides), below autograd: autograd records the op itself.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.utils._python_dispatch import TorchDispatchMode


def _static(values: Any) -> bool:
    return all(isinstance(v, int) for v in values)


def _differs(t: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether ``value`` lays out ``t``'s elements otherwise (strides of size-1 dims
    aside)."""
    if not (_static(t.shape) and _static(t.stride()) and _static(value.stride())):
        return False
    return any(size > 1 and a != b for size, a, b in zip(t.shape, t.stride(), value.stride()))


def keep_layout(t: Any) -> None:
    """Give the functional stand-in ``t``'s value ``t``'s strides, after a write."""
    elem = getattr(t, "elem", None)
    if elem is None or not torch._is_functional_tensor(elem):
        return
    torch._sync(t)
    value = torch._from_functional_tensor(elem)
    if value.shape != t.shape or not _differs(t, value):
        return
    # under no_grad: the replacement is no write autograd would see, and it leaves "all
    # writes under no_grad" as the function's own writes left it
    with torch.no_grad():
        fixed = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        fixed.copy_(t.detach())
        torch._sync(fixed)
        torch._functionalize_replace(elem, torch._from_functional_tensor(fixed.elem))
        torch._functionalize_commit_update(elem)


def _functional_form(func: Any) -> Any:
    """The out-of-place overload of the in-place aten op ``func`` whose value
    functionalization writes back (``masked_fill`` of ``masked_fill_``), if it has one:
    not for metadata writes, random fills, or ``copy_`` (its value keeps the strides)."""
    tags = getattr(func, "tags", ())
    if torch.Tag.inplace not in tags or torch.Tag.inplace_view in tags:
        return None
    if torch.Tag.nondeterministic_seeded in tags or func is torch.ops.aten.copy_.default:
        return None
    namespace, _, name = func._schema.name.partition("::")
    if namespace != "aten" or not name.endswith("_"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    return getattr(packet, func._overloadname, None) if packet is not None else None


def _transposed_view(t: Any) -> bool:
    """A functional view, dense but not contiguous (static): a write's value laid out
    otherwise may not pass back through its chain's ``view`` inverses."""
    return (
        isinstance(t, FunctionalTensor)
        and t._is_view()
        and _static(t.shape)
        and _static(t.stride())
        and not t.is_contiguous()
        and is_non_overlapping_and_dense_or_false(t)
    )


class _KeptLayouts(TorchDispatchMode):
    """In-place aten ops on a transposed functional view, as their functional form with
    the value copied in (module docstring)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        functional = _functional_form(func)
        if functional is None or not args or not _transposed_view(args[0]):
            return func(*args, **kwargs)
        t = args[0]
        value = functional(*args, **kwargs)
        if not isinstance(value, torch.Tensor) or value.shape != t.shape:
            return func(*args, **kwargs)  # (not an in-place op's value: the op itself)
        # (copied in whatever its strides: computing the op twice would leave a dead
        # node, and a second set of unbacked sizes for a data-dependent one)
        torch.ops.aten.copy_.default(t, value)
        return t


def keeping_layout(written: Any) -> Any:
    """A context for the call writing ``written`` in place: where ``written`` is a
    functional view, its writes keep their strides as functionalization propagates them."""
    if isinstance(written, FunctionalTensor) and written._is_view():
        return _KeptLayouts()
    return contextlib.nullcontext()
