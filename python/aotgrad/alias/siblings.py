"""Inputs joined to their written siblings' alias group: disjoint views of one base
(``b[:4]``, ``b[4:]``; ``b.chunk(2)``) that eager links through the base where one of
them is written, so the trace must see them as one (a synthetic base); the rest stay
independent inputs (``alias.storage``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..vocab import IN_MUTATES_DATA, IN_MUTATES_METADATA
from .facts import AliasFacts, written_with_grad


def link_siblings(facts: AliasFacts, originals: Sequence[Any]) -> None:
    """Joins to the written inputs' alias groups the disjoint views of their base that
    eager links through it (``join_siblings``): a write autograd records, or any write
    beside a view autograd made otherwise that moves the version counter (not one through
    ``.data``). Not under inference mode, where autograd records and checks nothing."""
    flags = facts.input_flags
    facts.input_storage = join_siblings(
        facts.input_storage,
        originals,
        [k for k, f in enumerate(flags) if written_with_grad(f)],
        [
            k
            for k, f in enumerate(flags)
            if f & (IN_MUTATES_DATA | IN_MUTATES_METADATA) and _version_moved(facts, k)
        ],
    )


def _version_moved(facts: AliasFacts, k: int) -> bool:
    """Whether input ``k``'s version counter moved: a write through ``.data`` (a tensor
    with a counter of its own) leaves the view's base and siblings as they were, and eager
    reads a multi-output view beside it without a check."""
    deltas = facts.input_version_delta
    return k >= len(deltas) or deltas[k] != 0


def _default_view(t: torch.Tensor) -> bool:
    """A view autograd made plainly (not under no_grad, by a multi-output op, in a
    custom Function), or no view."""
    meta = torch._C._autograd.CreationMeta
    return not t._is_view() or torch._C._autograd._get_creation_meta(t) == meta.DEFAULT


def join_siblings(
    ids: Sequence[int], tensors: Sequence[Any], with_grad: Sequence[int], written: Sequence[int]
) -> list[int]:
    """``ids`` (``overlap_groups``) with inputs joined to the disjoint views of their
    ``._base`` (same storage and dtype) where eager links them through it:

    * an input in ``with_grad`` (written with a value that requires grad) to every such
      view: autograd records the write on the base, and eager rebuilds every view of it
      from the new node (``b[4:]`` requires grad after ``b[:4].add_(w)``, its gradient
      reaching ``w`` as zeros);
    * an input in ``written`` (any write) to those autograd made otherwise (a ``chunk()``
      output, a view made under no_grad or in a custom Function): eager's check on reading
      one after its base was written raises.

    Traced as separate inputs, none of this would happen."""
    ids = list(ids)
    grad = set(with_grad)
    for k in written:
        base = tensors[k]._base
        if base is None:
            continue
        for j, t in enumerate(tensors):
            if (
                not isinstance(t, torch.Tensor)
                or t._base is not base
                or t.dtype != tensors[k].dtype
            ):
                continue
            if k in grad or not _default_view(t):
                old = ids[j]
                ids = [ids[k] if g == old else g for g in ids]
    return ids
