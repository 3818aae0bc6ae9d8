"""Which tensors overlap in memory: inputs that share a storage but touch disjoint
bytes (``x[0]`` and ``x[1]``) are independent; overlapping ones written by the
function need a synthetic base."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def byte_range(t: torch.Tensor) -> tuple[int, int] | None:
    """[start, end) of the bytes ``t`` can touch in its storage; None if empty, or
    unknown (symbolic sizes: callers treat unknown as overlapping)."""
    items = (*t.shape, *t.stride(), t.storage_offset())
    if any(isinstance(v, torch.SymInt) for v in items):
        return (0, 1 << 62)  # int() would specialise the symbol
    if t.numel() == 0:
        return None
    item = t.element_size()
    extent = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    start = t.storage_offset() * item
    return start, start + extent * item


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` may touch a common byte (real or fake tensors).
    Conservative: interleaved strided views (``x[:, 0]`` / ``x[:, 1]``) count as overlapping."""
    if a.untyped_storage()._cdata != b.untyped_storage()._cdata:
        return False  # (the raw storage handle: safe on fakes, unlike data_ptr)
    ra, rb = byte_range(a), byte_range(b)
    if ra is None or rb is None:
        return False
    return ra[0] < rb[1] and rb[0] < ra[1]


def self_overlapping(t: torch.Tensor) -> bool:
    """Whether two of ``t``'s elements may share a memory location (``as_strided((4, 3),
    (1, 1))``, an ``expand``): its dims sorted by stride, one whose stride does not pass
    every location the smaller ones reach. Symbolic sizes or strides: False (unknown)."""
    dims = [(st, s) for s, st in zip(t.shape, t.stride()) if s != 1]
    if any(isinstance(v, torch.SymInt) for d in dims for v in d) or t.numel() == 0:
        return False
    reach = 0
    for stride, size in sorted(dims):
        if stride <= reach:
            return True
        reach += (size - 1) * stride
    return False


def overlap_groups(tensors: Sequence[Any], storage_ids: Sequence[int]) -> list[int]:
    """Per tensor, a group id: tensors in one group share a storage and are connected by
    overlaps. ``storage_ids`` says which tensors share a storage."""
    parent = list(range(len(tensors)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    by_storage: dict[int, list[int]] = {}
    for i, s in enumerate(storage_ids):
        by_storage.setdefault(s, []).append(i)
    for members in by_storage.values():
        for x, i in enumerate(members):
            for j in members[x + 1 :]:
                if overlaps(tensors[i], tensors[j]):
                    parent[root(j)] = root(i)
    return [root(i) for i in range(len(tensors))]
