"""Saves beside the outputs: a forward value that shares storage with an output (the
output, a view of it, the base it views) is one the caller can write after the call
(``out.mul_(2)``). Eager's backward reads none of that storage where eager saved none
of it (``t1 = x @ x; return t1.tanh(), t1``: tanh saves its result, not ``t1``), so the
write reaches neither eager's gradient nor its saved-tensor check. A partition that
saved ``t1`` to recompute ``tanh`` from would read the written value (autograd's check
raises "modified by an inplace operation"). So where eager's backward reads nothing of
an output's storage, the forward values the joint's backward reads that are computed
from that storage (eager's saves there) are marked ``EAGER_SAVE_KEY``: the partitioner
saves them (``MUST_SAVE``), and needs nothing of the output's storage in the backward.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.fx as fx

from ..fx_views import view_root
from ..vocab import EAGER_SAVE_KEY, PARTITIONER_TAG, TRACED_BY_FORWARD

__all__ = ["mark_saves_beside_outputs"]


def mark_saves_beside_outputs(gm: fx.GraphModule, num_outputs: int) -> list[fx.Node]:
    """Mark (``EAGER_SAVE_KEY``) the forward values read by the backward of joint graph
    ``gm`` computed from the storage of its first ``num_outputs`` forward outputs (the
    user outputs and the intermediate bases they view), for each output storage the
    backward reads nothing of; returns them."""
    outs = gm.graph.output_node().args[0]
    if not isinstance(outs, (list, tuple)):
        return []
    forward = {n for n in gm.graph.nodes if n.meta.get(PARTITIONER_TAG) == TRACED_BY_FORWARD}
    roots = {view_root(o) for o in outs[:num_outputs] if isinstance(o, fx.Node)}
    roots = {r for r in roots if r.op == "call_function" and r in forward}
    if not roots:
        return []
    storage = {n: view_root(n) for n in gm.graph.nodes if n.op == "call_function" and n in forward}
    read = {n for n in forward if any(_in_backward(u, forward) for u in n.users)}
    roots -= {storage[n] for n in read if n in storage}
    if not roots:
        return []
    members = [n for n, r in storage.items() if r in roots]
    marked = [n for n in _downstream(members, forward) if n in read and _is_tensor(n)]
    for n in marked:
        n.meta[EAGER_SAVE_KEY] = True
    return marked


def _in_backward(user: fx.Node, forward: set[fx.Node]) -> bool:
    return user.op != "output" and user not in forward


def _downstream(start: Iterable[fx.Node], forward: set[fx.Node]) -> set[fx.Node]:
    """The forward nodes computed from ``start`` (``start`` included)."""
    seen: set[fx.Node] = set()
    stack = list(start)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        stack.extend(u for u in n.users if u in forward)
    return seen


def _is_tensor(node: fx.Node) -> bool:
    return isinstance(node.meta.get("val"), torch.Tensor)
