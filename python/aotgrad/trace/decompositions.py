"""Decompositions every trace applies, on top of the caller's table: ops that
functionalization emits with arguments torch's own kernels refuse.

**``as_strided_scatter`` into a non-contiguous base that requires grad.** A write
through a view chain that starts with ``as_strided`` (``x.as_strided_(...)`` on an
input, then a write to a slice of it) is replayed on the base by ``as_strided_scatter``,
whose kernel refuses a non-contiguous ``self`` that requires grad (an internal assert:
its autograd formula assumes contiguous storage). Eager never calls it (it writes the
bytes in place), and below functionalization no autograd runs: the same result is
built from a contiguous copy of the base's whole storage, scattered into, and viewed
with the base's own geometry (what the kernel does itself, after its assert).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["with_trace_decompositions"]

aten = torch.ops.aten


def _as_strided_scatter(
    theirs: Callable[..., Any] | None,
    self: torch.Tensor,
    src: torch.Tensor,
    size: Any,
    stride: Any,
    storage_offset: Any = None,
) -> Any:
    if self.is_contiguous():
        # the caller's decomposition, or torch's kernel
        return NotImplemented if theirs is None else theirs(self, src, size, stride, storage_offset)
    numel = self.untyped_storage().nbytes() // self.element_size()
    whole = aten.clone.default(aten.as_strided.default(self, [numel], [1], 0))
    offset = self.storage_offset() if storage_offset is None else storage_offset
    whole = aten.as_strided_scatter.default(whole, src, size, stride, offset)
    return aten.as_strided.default(whole, self.shape, self.stride(), self.storage_offset())


_TRACE_DECOMPOSITIONS = {aten.as_strided_scatter.default: _as_strided_scatter}


def with_trace_decompositions(table: dict[Any, Any] | None) -> dict[Any, Any]:
    """The caller's decomposition table with aotgrad's own entries added; where both
    name an op, aotgrad's hands the cases it does not fix to the caller's."""
    merged = dict(table or {})
    for op, fix in _TRACE_DECOMPOSITIONS.items():
        merged[op] = functools.partial(fix, merged.get(op))
    return merged
