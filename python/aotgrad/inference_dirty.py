"""A custom Function's ``ctx.mark_dirty`` under the caller's inference mode.

``mark_dirty`` bumps the version counter of each tensor it names once the Function's
forward returns (``THPFunction``'s ``_mark_dirty``), beside the bump of the write itself.
Under inference mode a tensor taken of a normal one through ``view(dtype)`` is eager's
inference tensor, with no counter (``inference_views``): ``DirtyMul.apply(x.view(
torch.float64))`` leaves ``x._version`` where it was. Traced (outside inference mode) it
is a functional view sharing ``x``'s counter: ``uncounted_alias_write`` keeps the write's
count, and ``uncounted_dirty_marks`` the mark's (the counts recorded as ``mark_dirty``
names them, put back when ``apply`` returns).

``Function.apply`` and ``FunctionCtx.mark_dirty`` are wrapped while some thread is inside
``uncounted_dirty_marks``, and do more than torch's only in such a thread.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.autograd.function import Function, FunctionCtx

from .inference_views import through_dtype_view
from .uncounted_writes import restore

__all__ = ["uncounted_dirty_marks"]

_marks = threading.local()
_install_lock = threading.Lock()


@contextlib.contextmanager
def uncounted_dirty_marks() -> Iterator[None]:
    """In this thread, ``mark_dirty`` moves no counter of a tensor taken through
    ``view(dtype)`` (an inference tensor in eager). The wrappers are in place only while
    some thread is inside (counted): outside, ``apply`` is torch's own."""
    _enter()
    before = getattr(_marks, "tracing", False)
    _marks.tracing = True
    try:
        yield
    finally:
        _marks.tracing = before
        _leave()


#: torch's ``Function.apply`` and ``FunctionCtx.mark_dirty`` while wrapped, and how many
#: threads are inside ``uncounted_dirty_marks``
_originals: list[Any] = []
_inside = [0]


def _enter() -> None:
    with _install_lock:
        if not _inside[0]:
            _originals[:] = [Function.__dict__["apply"], FunctionCtx.__dict__["mark_dirty"]]
            Function.apply = classmethod(_applying)  # type: ignore[assignment,method-assign]
            FunctionCtx.mark_dirty = _marking  # type: ignore[method-assign]
        _inside[0] += 1


def _leave() -> None:
    with _install_lock:
        _inside[0] -= 1
        if not _inside[0]:
            Function.apply, FunctionCtx.mark_dirty = _originals  # type: ignore[method-assign]


def _applying(cls: Any, *args: Any, **kwargs: Any) -> Any:
    """``Function.apply``; tracing, the counts ``mark_dirty`` recorded put back after."""
    apply = _originals[0].__get__(None, cls)  # (a C classmethod in some versions)
    if not getattr(_marks, "tracing", False):
        return apply(*args, **kwargs)
    outer = getattr(_marks, "counts", None)
    _marks.counts = counts = []
    try:
        return apply(*args, **kwargs)
    finally:
        _marks.counts = outer
        restore(counts)


def _marking(ctx: Any, *args: torch.Tensor) -> None:
    """``FunctionCtx.mark_dirty``; tracing, the counts of tensors through ``view(dtype)``
    recorded (before the bump that follows the forward)."""
    counts = getattr(_marks, "counts", None)
    if counts is not None and getattr(_marks, "tracing", False):
        counts += [
            (t, t._version) for t in args if isinstance(t, torch.Tensor) and through_dtype_view(t)
        ]
    _originals[1](ctx, *args)
