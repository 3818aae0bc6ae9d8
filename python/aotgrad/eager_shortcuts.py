"""Calls whose eager kernel takes a shortcut that the traced decomposition does not.

``F.dropout(x, 1.0, training=True)``: eager's kernel returns ``x * 0`` without drawing
(``at::native::dropout`` on a probability of 1), so the global generator is where it
was; torch's decomposition draws a full Bernoulli mask first, so a compiled call moved
the caller's generator on and every later random number differed (blind RNG suite:
``dropout_p_one``, ``module_dropout_p_one``). The trace makes the product eager makes.
(A probability of 0, or eval mode, returns ``x`` itself in eager and in the trace.)
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["as_eager_runs"]

#: ``F.dropout(input, p, training, inplace)``; ``torch.dropout(input, p, train)`` and
#: ``torch.dropout_`` (in place).
_DROPOUT = inspect.signature(F.dropout)
_ATEN_DROPOUTS = {torch.dropout: False, torch.dropout_: True}


def as_eager_runs(func: Any, args: Any, kwargs: Any) -> tuple[Any, Any, Any]:
    """``(func, args, kwargs)`` to trace for ``func(*args, **kwargs)``: the product eager's
    dropout kernel makes for a probability of 1 in training (no draw), else as given."""
    found = _dropout_call(func, args, kwargs or {})
    if found is None:
        return func, args, kwargs
    x, p, training, inplace = found
    if not (training and isinstance(p, (int, float)) and p == 1 and isinstance(x, torch.Tensor)):
        return func, args, kwargs
    if x.numel() == 0:
        return func, args, kwargs
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    return (torch.Tensor.mul_ if inplace else torch.mul), (x, zero), {}


def _dropout_call(func: Any, args: Any, kwargs: dict) -> tuple[Any, Any, Any, bool] | None:
    """``(input, p, training, inplace)`` of a dropout call, or None."""
    try:
        if func is F.dropout:
            bound = _DROPOUT.bind(*args, **kwargs)
            bound.apply_defaults()
            a = bound.arguments
            return a["input"], a["p"], a["training"], bool(a["inplace"])
        if func in _ATEN_DROPOUTS:
            x, p, train = (*args, *kwargs.values())[:3]
            return x, p, train, _ATEN_DROPOUTS[func]
    except (TypeError, ValueError):  # (called otherwise: the op raises its own error)
        return None
    return None
