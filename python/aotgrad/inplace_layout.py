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
"""

from __future__ import annotations

from typing import Any

import torch


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
