"""Copies whose source overlaps the tensor they write, in eager's element order.

``t[1].copy_(t[:, 0])`` or ``t[1] = t[:, 0]``: the source is not dense, so eager's
overlap check cannot judge and lets the copy run; its CPU kernel writes the elements one
after another, and a later element reads a location an earlier one already wrote
(``t[1, 1]`` gets ``t[1, 0]``'s new value). A traced graph reads the whole source
before writing: a different result (silently, for ``t[1] = t[:, 0]``).

Eager's own kernel decides the order: the copy is replayed once on a small CPU storage
holding each location's own number (``inplace_checks``), which leaves in each written
element the number of the location whose original value eager puts there. The call is
then made from a fresh source holding those values: a contiguous copy of the source,
gathered under ``no_grad`` (its node stays the ``clone``'s, so the gradient is eager's
``copy_`` gradient: the written gradient to the source, whatever the order).

Only where eager's order is fixed: CPU (a GPU kernel writes in parallel), one thread
(at most ``GRAIN_SIZE`` elements), and a dtype that holds every location's number
exactly; elsewhere the call stays refused (``inplace_checks._ORDER_DEPENDENT``).
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import EagerRefusal

__all__ = ["OrderedCopy", "basic_index", "copied_value", "copy_order", "ordered_args"]

#: ``at::internal::GRAIN_SIZE``: above it a CPU kernel may split the elements across
#: threads, whose order is not fixed.
GRAIN_SIZE = 32768


class OrderedCopy(EagerRefusal):
    """A copy eager runs in an order a traced graph does not reproduce, with the order:
    ``index[i]``, the source element (of the source broadcast to the written shape,
    flattened) whose original value eager leaves in written element ``i``."""

    def __init__(self, message: str, index: list[int]) -> None:
        super().__init__(message)
        self.index = index


def _exact(dtype: torch.dtype, need: int) -> bool:
    """Whether ``dtype`` holds 0..need-1 exactly (as the replay's location numbers)."""
    if dtype == torch.bool or dtype.is_complex:
        return False
    numbers = torch.arange(need)
    return bool(torch.equal(numbers.to(dtype).to(torch.int64), numbers))


def copy_order(written: torch.Tensor, replay: Any, need: int, message: str) -> EagerRefusal | None:
    """The ``OrderedCopy`` of a ``copy_`` into ``written`` whose result depends on eager's
    order, or None where that order is not fixed. ``replay(storage)`` runs eager's copy on
    views of ``storage`` (returning the stand-ins of the written tensor and the source).
    Called with the modes off."""
    if written.device.type != "cpu" or written.numel() > GRAIN_SIZE:
        return None
    if not _exact(written.dtype, need):
        return None
    numbers = torch.arange(need)
    storage = numbers.to(written.dtype)
    dst, src = replay(storage)
    if not isinstance(src, torch.Tensor) or src.untyped_storage().data_ptr() != (
        storage.untyped_storage().data_ptr()
    ):
        return None
    left = dst.reshape(-1).to(torch.int64).tolist()
    places = numbers.as_strided(src.shape, src.stride(), src.storage_offset())
    first: dict[int, int] = {}
    for k, place in enumerate(places.expand(dst.shape).reshape(-1).tolist()):
        first.setdefault(place, k)
    if not all(place in first for place in left):
        return None
    return OrderedCopy(message, [first[place] for place in left])


def basic_index(index: Any) -> bool:
    """Whether ``t[index]`` is a view (no tensor, list or bool in the index)."""
    items = index if isinstance(index, tuple) else (index,)
    return all(
        i is None or i is Ellipsis or isinstance(i, (int, slice, torch.SymInt)) for i in items
    )


def copied_value(value: torch.Tensor, view: torch.Tensor) -> torch.Tensor | None:
    """``value`` as ``t[index] = value`` copies it into ``view`` (eager's ``copy_to``):
    less the leading dimensions of size one beyond ``view``'s, expanded to its shape
    (so eager's overlap check sees a broadcast source); None for a 0-dim CPU value,
    which eager writes with ``fill_`` (read before any write)."""
    if value.shape == view.shape:
        return value
    if value.dim() == 0 and value.device.type == "cpu":
        return None
    while value.dim() > view.dim() and value.shape[0] == 1:
        value = value.squeeze(0)
    return value.expand(view.shape)


def ordered_args(func: Any, args: Any, refusal: OrderedCopy) -> tuple[Any, ...]:
    """The arguments of ``func`` (``copy_`` or ``__setitem__``) with the source made
    fresh, in eager's order (``ordered_source``): the call then reads nothing it writes."""
    if func is torch.Tensor.__setitem__:
        t, index, value = args
        view = t[index]
        return (t, index, ordered_source(view, copied_value(value, view), refusal.index))
    return (args[0], ordered_source(args[0], args[1], refusal.index), *args[2:])


def ordered_source(dst: torch.Tensor, src: torch.Tensor, index: list[int]) -> torch.Tensor:
    """A fresh source for ``dst.copy_(...)`` holding what eager's ordered copy of ``src``
    leaves in ``dst``, whose gradient is ``src``'s in eager's ``copy_`` (traced)."""
    fresh = src.expand(dst.shape).clone(memory_format=torch.contiguous_format)
    at = torch.tensor(index, dtype=torch.int64, device=fresh.device)
    with torch.no_grad():
        fresh.copy_(fresh.reshape(-1)[at].view(dst.shape))
    return fresh
