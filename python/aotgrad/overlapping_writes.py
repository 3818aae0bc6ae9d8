"""In-place writes to a tensor whose elements share memory (a view of an ``expand()``).

Eager lets a few in-place ops write such a tensor (``fill_``, ``zero_``,
``masked_fill_``, ``index_fill_``: every element that shares a location writes the same
value there) and refuses the others ("more than one element of the written-to tensor
refers to a single memory location", ``inplace_checks``). Functionalization gets the
allowed ones wrong: it writes the view's new value back to the base through the inverse
of ``expand``, which *sums* the changes of the elements that share a location
(``x.expand(2, 4, 4).zero_()`` gave ``-x``, not zeros; torch's AOT Autograd gives the
same wrong value).

Here the write is made to a view of the same locations without the repeats (each
dimension of stride 0 narrowed to one element), which functionalization writes back
exactly; a mask or an index along a repeated dimension selects a location when it
selects any element there, as in eager; ``t.copy_(t)`` copies nothing, as eager's. Other overlapping writes eager allows
(``index_put_``, ``t[i] = v``) are refused by name.

A write autograd records (the tensor requires grad) makes eager's backward raise the
overlap error where it passes the write's node: the node is returned, and the compiled
backward raises as eager's does (``trace.joint``, as for a stale saved tensor).
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import EagerRefusal, UnsupportedError
from .ordered_copies import basic_index

__all__ = [
    "FILLS",
    "OVERLAP_IN_BACKWARD",
    "backward_node",
    "overlapping_setitem",
    "overlapping_write",
]

#: Eager's error in the backward of such a write (its ``CopySlices`` writes the gradient
#: into a view whose elements share memory).
OVERLAP_IN_BACKWARD = (
    "unsupported operation: more than one element of the written-to tensor refers to a "
    "single memory location. Please clone() the tensor before performing the operation."
)

#: Writes that put one value in every element (a location repeated gets it each time).
FILLS = frozenset({"fill_", "zero_", "masked_fill_", "index_fill_"})


def _overlaps(t: torch.Tensor) -> bool:
    """Whether elements of ``t`` share memory: surely (torch's check says yes), or
    through a dimension of stride 0 (where torch's check cannot tell)."""
    try:
        if torch._debug_has_internal_overlap(t) == 1:  # 0: no, 2: too hard to tell
            return True
    except Exception:  # symbolic sizes: tell from the strides
        pass
    return bool(_repeated(t))


def _repeated(t: torch.Tensor) -> list[int]:
    return [d for d, (n, s) in enumerate(zip(t.shape, t.stride())) if s == 0 and n != 1]


def overlapping_write(func: Any, args: Any, kwargs: dict) -> tuple[bool, Any]:
    """``(True, result)`` where ``func(*args, **kwargs)`` writes in place a tensor whose
    elements share memory (written here without the repeats); ``(False, None)`` for any
    other call. Call after eager's own refusals are checked (``inplace_error``); then
    ``backward_node(result)``."""
    t = args[0] if args else None
    name = getattr(func, "__name__", "")
    if not isinstance(t, torch.Tensor) or not name.endswith("_") or not _overlaps(t):
        return False, None
    repeated = _repeated(t)
    unique = t
    for d in repeated:
        unique = unique.narrow(d, 0, 1)
    if name == "copy_" and args[1:2] and args[1] is t and not _overlaps(unique):
        # ``t.copy_(t)``: eager writes nothing (the version still moves)
        return True, _write(func, t, unique, [unique], kwargs)
    if name not in FILLS or _overlaps(unique):
        raise UnsupportedError(
            f"an in-place {name} on a tensor whose elements share memory (a view of an "
            "expand()): not supported; clone() it first, as torch's warning advises"
        )
    rest = list(args[1:])
    if name == "masked_fill_":
        mask = kwargs.pop("mask", rest[0] if rest else None).expand(t.shape)
        rest = [mask.any(dim=repeated, keepdim=True) if repeated else mask, *rest[1:]]
        return True, _write(func, t, unique, rest, kwargs)
    if name == "index_fill_":
        dim, index = rest[0], rest[1]
        if dim % t.dim() in repeated:  # selects the one location there, or none
            if index.numel() == 0:
                return True, t
            return True, _write(type(t).fill_, t, unique, rest[2:], kwargs)
    return True, _write(func, t, unique, rest, kwargs)


def overlapping_setitem(args: Any) -> tuple[bool, Any]:
    """``t[index] = value`` where the view ``t[index]`` has elements that share memory:
    with a number, a fill of that view (written as ``overlapping_write`` does), as eager's
    is; with a tensor, eager's copy raises; refused for an advanced index (eager writes
    ``index_put_``'s overlapping elements one after another). ``(False, None)`` for any
    other assignment."""
    t, index, value = args
    if not isinstance(t, torch.Tensor) or not _overlaps(t):
        return False, None
    mask = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if (
        isinstance(mask, torch.Tensor)
        and mask.dtype == torch.bool
        and mask.dim() == t.dim()
        and not isinstance(value, torch.Tensor)
    ):  # ``t[t > 0] = 0.0``: eager's is a masked_fill_
        overlapping_write(type(t).masked_fill_, (t, mask, value), {})
        return True, t
    if not basic_index(index):
        raise UnsupportedError(
            "t[index] = value with an advanced index on a tensor whose elements share "
            "memory (a view of an expand()): not supported; clone() it first"
        )
    view = t[index]
    if not _overlaps(view):
        return False, None
    if isinstance(value, torch.Tensor):
        raise EagerRefusal(OVERLAP_IN_BACKWARD)
    overlapping_write(type(t).fill_, (view, value), {})
    return True, view


def _write(func: Any, t: torch.Tensor, unique: torch.Tensor, rest: list, kwargs: dict) -> Any:
    func(unique, *rest, **kwargs)
    return t


def backward_node(t: torch.Tensor) -> Any:
    """The autograd node whose backward raises in eager after an overlapping write to
    ``t`` (its base's ``CopySlices``, or ``t``'s own node), or None where autograd
    recorded nothing."""
    if not (torch.is_grad_enabled() and t.requires_grad):
        return None
    root = t if t._base is None else t._base
    return root.grad_fn
