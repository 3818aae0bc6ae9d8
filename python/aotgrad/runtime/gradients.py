"""The tangents the compiled backward takes and the gradients it gives back, made what
eager's engine passes.

The backward graph was traced with plain, contiguous tangents: a gradient that arrives
lazily conjugated or negated, or with other strides, is made so first (``plain_tangent``),
and an output no gradient reached gets zeros, made only when the backward runs
(``zeros_like``). Of the backward's results, an input reached only through outputs no
gradient reached gets None, as eager's nodes give it (``unreached_to_none``); gradients
that are views of one buffer become buffers of their own, since autograd's accumulator
keeps the one it is given as ``.grad`` and adds to it in place later (``unshared``); an
input the backward writes gets its new value copied in, at eager's version count
(``write_back``). The training function (``training.py``) uses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch


def plain_tangent(g: torch.Tensor) -> torch.Tensor:
    """``g`` as the trace's tangent placeholder was: contiguous, and without a conjugate
    or negative bit. The gradient of an output the runtime regenerates as ``t.conj()`` (or
    ``.imag`` of one) of a graph output reaches the backward through ``ConjBackward``
    lazily conjugated; ``view_as_real`` of it in the graph (the gradient of a real input
    added to a complex value) raises, and a compiled kernel reading its bytes would miss
    the bit."""
    if g.is_conj():
        g = g.resolve_conj()
    if g.is_neg():
        g = g.resolve_neg()
    return g.contiguous()


def zeros_like(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    """A zero tangent for ``t``, made only if needed (contiguous, as the graph expects)."""
    shape, dtype, device = t.shape, t.dtype, t.device
    return lambda: torch.zeros(shape, dtype=dtype, device=device)


def unreached_to_none(
    grads: Sequence[Any], deps: Sequence[tuple[int, ...]], missing: set[int]
) -> tuple[Any, ...]:
    """None for each gradient whose tangents all went unused."""
    return tuple(
        None if k < len(deps) and deps[k] and missing.issuperset(deps[k]) else g
        for k, g in enumerate(grads)
    )


def unshared(grads: tuple[Any, ...]) -> tuple[Any, ...]:
    """``grads``, those that are views of a storage another one holds copied: autograd's
    accumulator keeps a gradient it is the only holder of as the input's ``.grad`` and
    adds later ones to it in place, so two views of one buffer (the graph's
    ``t.t()`` and ``t.t().expand(())`` for two inputs) became two ``.grad`` sharing it,
    and the second backward added each one's gradient to both (soak 130846). Eager's
    engine passes one view per input of a buffer it holds."""
    if not any(type(g) is torch.Tensor and g._is_view() for g in grads):
        return grads
    seen: set[int] = set()
    out = list(grads)
    for k, g in enumerate(grads):
        if type(g) is not torch.Tensor or g.layout != torch.strided:
            continue  # (a subclass's storage is its inner tensors')
        ptr = g.untyped_storage().data_ptr()
        if ptr in seen and g._is_view():
            out[k] = g.clone()
        seen.add(ptr)
    return tuple(out)


def write_back(inputs: Sequence[torch.Tensor], values: Sequence[Any], deltas: Any) -> None:
    """Copy the backward's new values into the inputs it wrote; version counters as eager's."""
    for t, value, delta in zip(inputs, values, deltas):
        v0 = t._version
        with torch.no_grad():
            t.copy_(value)
        torch._C._autograd._unsafe_set_version_counter((t,), (v0 + delta,))


def plus(a: Any, b: Any) -> Any:
    """``a + b``, either None: the other."""
    return b if a is None else a if b is None else a + b
