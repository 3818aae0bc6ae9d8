"""Backward order for activation checkpointing: recompute each value just before its first use.

The split copies backward nodes in joint-graph order, so every value the backward
recomputes from a checkpointed region lands at the top of the backward graph,
before the first gradient op: all the regions' activations come back to life at
once and the backward's peak is what checkpointing meant to avoid. The autograd
engine instead recomputes a region when its gradient is first needed.
``mimic_autograd_order`` does the same to a backward graph: the nodes that read
a tangent (directly or not) and the impure ones keep their order, and every
other node (a recomputation) moves to just before its first such reader.

Before (three checkpointed blocks)::

    recompute block 0, recompute block 1, recompute block 2, grads block 2, grads block 1, ...

After::

    recompute block 2, grads block 2, recompute block 1, grads block 1, ...

Complexity: ``O(N log N)`` (each node is moved once; a sort per anchor over the
nodes it pulls in). Reference: ``reordering_to_mimic_autograd_engine`` in
``torch._functorch.partitioners``.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.fx as fx

from ..roles import is_tangent
from ..vocab import RECOMPUTE_KEY


def has_checkpoint_tags(nodes: Iterable[fx.Node]) -> bool:
    """Whether any of ``nodes`` carries a checkpoint tag (it was traced in a checkpoint region)."""
    return any(RECOMPUTE_KEY in n.meta for n in nodes)


def _is_impure(node: fx.Node) -> bool:
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return bool(target._schema.is_mutable)
    return node.is_impure()


def mimic_autograd_order(gm: fx.GraphModule) -> bool:
    """Reorder backward graph ``gm`` in place (see the module docs); True if a node moved."""
    graph = gm.graph
    nodes = list(graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    placed: set[fx.Node] = set()
    derived: set[fx.Node] = set()  # reads a tangent, directly or not
    anchors: list[fx.Node] = []
    last_placeholder: fx.Node | None = None
    for n in nodes:
        if n.op == "placeholder":
            placed.add(n)
            last_placeholder = n
            if is_tangent(n):
                derived.add(n)
            continue
        if any(a in derived for a in n.all_input_nodes):
            derived.add(n)
        if n in derived or n.op == "output" or _is_impure(n):
            anchors.append(n)
    if last_placeholder is None or not derived:
        return False

    order: list[fx.Node] = []
    for anchor in anchors:
        stack = [anchor]
        if anchor.op == "output":  # what no anchor read (dead code) stays before it
            stack += [n for n in reversed(nodes) if n not in placed]
        pulled: list[fx.Node] = []
        while stack:
            n = stack.pop()
            if n in placed:
                continue
            placed.add(n)
            pulled.append(n)
            stack.extend(n.all_input_nodes)
        pulled.sort(key=index.__getitem__)
        order.extend(pulled)
    if order == nodes[len(nodes) - len(order) :]:
        return False
    cursor = last_placeholder
    for n in order:
        if n.prev is not cursor:
            cursor.append(n)
        cursor = n
    gm.recompile()
    return True
