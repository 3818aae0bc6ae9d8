"""Reductions written into an ``out=`` tensor of another dtype, computed as eager does.

Eager's ``torch.sum(a, 0, out=x)`` reduces in ``x``'s dtype (``a`` cast first: a float
input summed into an int64 ``out`` is truncated, then summed; float32 summed into float64
keeps what float32 would cancel). Functionalization turns the call into the functional
reduction in ``a``'s dtype and a copy into ``x``, which casts after: other values,
silently (blind dtype-writes suite: ``out_sum_float_into_int``,
``out_mean_f32_into_f64``...). The trace asks for eager's dtype itself: the ``dtype=``
of the ops that take one, the input cast first for ``std`` / ``var``; where eager's
kernel refuses that dtype, its error (``dtype_checks``)."""

from __future__ import annotations

from typing import Any

import torch

#: Ops whose ``out=`` variant computes in the out tensor's dtype, given as ``dtype=``.
_WITH_DTYPE = frozenset(
    {torch.sum, torch.nansum, torch.prod, torch.mean, torch.nanmean, torch.cumsum, torch.cumprod}
)
#: Ops without ``dtype=`` that compute in the out tensor's (floating) dtype.
_CAST_INPUT = frozenset({torch.std, torch.var})


def in_eagers_dtype(func: Any, args: Any, kwargs: Any) -> tuple[Any, Any]:
    """``(args, kwargs)`` of ``func``, asking for the dtype eager's ``out=`` variant
    computes in where it is not the one the functional op would have. Called once
    eager's refusals were checked (``dtype_checks.dtype_error``: ``nansum`` into int64
    raises, where the functional op and a cast would run)."""
    if not kwargs or not (func in _WITH_DTYPE or func in _CAST_INPUT):
        return args, kwargs
    out = kwargs.get("out")
    if not isinstance(out, torch.Tensor) or not args or not isinstance(args[0], torch.Tensor):
        return args, kwargs
    want = out.dtype
    if kwargs.get("dtype") is not None or args[0].dtype == want:
        return args, kwargs
    if func in _CAST_INPUT:
        return (args[0].to(want), *args[1:]), kwargs
    return args, {**kwargs, "dtype": want}
