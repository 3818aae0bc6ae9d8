"""``out=`` tensors of the wrong shape, resized as eager resizes them.

Eager resizes an ``out=`` tensor whose shape differs from the result, keeping its
storage offset (the resize is no write), then writes the result into it. The new
strides are those of the result eager's functional form gives: the kernels lay a
resized ``out=`` out as their meta function lays a fresh result (TensorIterator ops
follow the inputs' layout, so ``torch.sin(x.t(), out=o)`` leaves ``o`` transposed;
``mm``, reductions, ``cat``, ``softmax`` are contiguous; ``linalg.inv`` column-major),
and the traced result has eager's strides.

Functionalization cannot replay that resize (of a view: "expected src to have a size
equal to the slice of self"; of an input: not at all), so while tracing the result is
computed without ``out=``, the ``out=`` tensor restrided in place (``as_strided_``, a
metadata change functionalization records) and the result copied in (through a view of
the same bytes taken from the base, for a view): the same bytes of the same storage are
written, as in eager. An ``out=`` of the right shape gets the result copied in. Left to
the op itself: tuples of outputs, results eager refuses to cast, a resize that needs
more storage.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .alias.views import contiguous_strides, dense_order
from .restrides import value_offset

__all__ = ["call_with_out"]


def _eager_strides(result: torch.Tensor) -> tuple[int, ...]:
    """The strides eager gives the resized ``out=`` tensor: the result's own where they
    are dense (module docstring), contiguous otherwise."""
    strides = tuple(int(s) for s in result.stride())
    if dense_order(result.shape, strides) is None:
        return contiguous_strides(result.shape)
    return strides


def _extent(shape: torch.Size, strides: tuple[int, ...]) -> int:
    """Elements from the first to one past the last one a tensor of that layout reads."""
    if any(int(n) == 0 for n in shape):
        return 0
    return 1 + sum((int(n) - 1) * s for n, s in zip(shape, strides, strict=True))


def call_with_out(
    func: Any,
    args: Any,
    kwargs: dict,
    out: torch.Tensor,
    resized: Callable[[torch.Tensor], None] | None = None,
) -> Any:
    """A call with an ``out=`` tensor, resized as eager resizes it (module docstring);
    ``resized(out)`` is told of a resize made here (a metadata change in place: views
    taken of ``out`` before it are eager's ``as_strided`` of it, seed 118218)."""
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    result = func(*args, **rest)
    if (
        not isinstance(result, torch.Tensor)
        or not torch.can_cast(result.dtype, out.dtype)
        or result.device != out.device
    ):
        return func(*args, **kwargs)  # eager's own answer (or its error)
    if result.shape == out.shape:
        out.copy_(result)
        return out
    offset = out.storage_offset()
    strides = _eager_strides(result)
    end = offset + _extent(result.shape, strides)
    if end * out.element_size() > out.untyped_storage().nbytes():
        return func(*args, **kwargs)  # eager grows the storage: not replayed
    # eager's resize of an out= view is no write (only the copy is): the write goes
    # through a view of the same bytes, then the view gets its new metadata
    at = value_offset(out)  # where the traced value holds out's first element
    target = _same_bytes(out, at, result.shape, strides)
    if target is None and out._base is not None:
        target = _same_bytes(out._base, at, result.shape, strides)
    if target is None:
        # the view's new metadata, then the write through a view of the same bytes
        # taken from the base (writing through the restrided view itself would scatter
        # into its old view, which torch supports only for contiguous views under autograd)
        with torch.autograd.grad_mode._unsafe_preserve_version_counter(out):
            out.as_strided_(result.shape, strides, offset)
        if resized is not None:
            resized(out)
        target = out if out._base is None else out._base.as_strided(result.shape, strides, offset)
        target.copy_(result)
        return out
    target.copy_(result)
    with torch.autograd.grad_mode._unsafe_preserve_version_counter(out):
        out.as_strided_(result.shape, strides, offset)
    if resized is not None:
        resized(out)
    return out


def _same_bytes(
    t: torch.Tensor, offset: int, shape: torch.Size, strides: tuple[int, ...]
) -> torch.Tensor | None:
    """The ``numel(shape)`` elements of ``t``'s storage from ``offset`` on, laid out
    with ``strides`` (dense), as a view of ``t`` made without ``as_strided``
    (functionalization bans a write through a view chain with an ``as_strided`` after
    its first step): ``t``'s dims by falling stride, the leading ones at index 0, the
    contiguous rest flattened, sliced, viewed and permuted. None where those elements
    are not all ``t``'s own, or the layout is not dense."""
    order = dense_order(shape, strides)
    n = 1
    for d in shape:
        n *= int(d)
    if order is None or n == 0 or t.numel() == 0:
        return None
    for d in reversed(range(t.dim())):
        if t.shape[d] == 1:
            t = t.select(d, 0)
    if any(s == 0 for s in t.stride()):
        return None
    t = t.permute(sorted(range(t.dim()), key=lambda d: -t.stride(d)))
    run, k = 1, t.dim()
    while k > 0 and t.stride(k - 1) == run:
        run *= t.shape[k - 1]
        k -= 1
    start = offset - value_offset(t)
    if start < 0 or start + n > run:
        return None
    flat = t[(0,) * k].reshape(-1)[start : start + n]
    inverse = sorted(range(len(order)), key=lambda i: order[i])
    return flat.view([shape[d] for d in order]).permute(inverse)
