"""Backward passes through independent outputs of one call, one after the other.

``a, b = f(x, w); a.sum().backward(); b.sum().backward()`` where ``a`` and ``b`` share
no autograd node in eager (``x.sin()``, ``w.cos()``): eager's second pass runs, since
the first freed only the nodes it went through. The compiled call is one node, whose
saved tensors autograd frees after the first pass: the second raised "backward through
the graph a second time" (blind accumulation suite).

Eager's second pass raises only where it runs a node the first freed that saved a
tensor. The trace knows, per such node, the outputs whose graphs reach it
(``trace.saved_reads.saving_links``), so the tangents fall into components: two are in
one when some saving node is reached by both (``chunk`` pieces each through ``exp``
share only ``SplitBackward``, which saves nothing: two components, though ``x``'s
gradient depends on both). After a pass without ``retain_graph`` that reached some
components and left another untouched, the saved tensors are kept for a later pass
that reaches only untouched components; a pass that reaches a component touched before
raises eager's error (its nodes were freed), and the kept tensors go once every
component was reached. A call whose outputs form one component (``loss, logits``) keeps
nothing: autograd frees its saved tensors after the first pass, as eager frees the nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .saved_tensors import BACKWARD_TWICE

__all__ = ["IndependentOutputs", "tangent_components"]


def tangent_components(links: Sequence[Sequence[int]], n: int) -> list[frozenset[int]]:
    """The tangents ``0..n-1`` grouped: two are in one group when some entry of ``links``
    (the tangents reaching one saving node) holds both, directly or through others."""
    parent = list(range(n))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for deps in links:
        deps = [d for d in deps if d < n]
        for d in deps[1:]:
            parent[root(d)] = root(deps[0])
    groups: dict[int, set[int]] = {}
    for k in range(n):
        groups.setdefault(root(k), set()).add(k)
    return [frozenset(g) for g in groups.values()]


class IndependentOutputs:
    """The saved tensors of a call kept across passes through independent outputs."""

    def __init__(self, components: list[frozenset[int]]) -> None:
        self.components = components

    def kept(self, ctx: Any, reached: set[int]) -> list[Any] | None:
        """The saved tensors a pass reaching ``reached`` reuses from an earlier pass, or
        None (none kept: autograd's own, or its error). Raises eager's error where the
        pass reaches a component an earlier pass went through."""
        kept = getattr(ctx, "kept_saved", None)
        if kept is None:
            return None
        if reached & ctx.touched:
            raise RuntimeError(BACKWARD_TWICE)
        saved, versions = kept
        for t, v in zip(saved, versions):
            if isinstance(t, torch.Tensor) and t._version != v:
                raise RuntimeError(MODIFIED)
        return list(saved)

    def keep(self, ctx: Any, saved: Sequence[Any], reached: set[int]) -> None:
        """After a pass without ``retain_graph`` that reached ``reached``: keep ``saved``
        while a component is still untouched; drop it once none is."""
        touched = getattr(ctx, "touched", frozenset())
        for c in self.components:
            if c & reached:
                touched = touched | c
        ctx.touched = touched
        if all(c <= touched for c in self.components):
            ctx.kept_saved = None
        elif getattr(ctx, "kept_saved", None) is None:
            versions = [t._version if isinstance(t, torch.Tensor) else None for t in saved]
            ctx.kept_saved = (list(saved), versions)


MODIFIED = (
    "one of the variables needed for gradient computation has been modified by an inplace "
    "operation: a tensor a compiled call saved, between two backward passes through its "
    "independent outputs"
)
