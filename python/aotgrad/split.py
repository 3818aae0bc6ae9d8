"""Stage 4 — split: a partition decision + the joint FX graph → forward and backward GraphModules.

Each graph is built in one pass over the joint graph's nodes. Conventions follow
torch's AOT Autograd so that Inductor and torch's runtime read our graphs:

* forward: every primal as a placeholder; outputs = the joint's forward outputs,
  then the saved values (tensors first, then SymInts);
* backward: one placeholder per saved value (same order), then the tangents;
  outputs = the joint's gradient outputs (``None`` where there is none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.node import map_arg

from .errors import GraphError
from .roles import is_tangent
from .vocab import IN_BACKWARD, IN_FORWARD

# Node.__setattr__ re-indexes the node in its graph's lookup table on every attribute
# write; setting args and kwargs in one call through the C-level updater that the
# `args`/`kwargs` setters use (and `meta` without the re-index, which is not keyed on
# it) makes building a graph about twice as fast. Falls back to the setters if a
# future torch lacks the updater.
_UPDATE = getattr(fx.Node, "_update_args_kwargs", None)


def _copy_node(graph: fx.Graph, node: fx.Node, env: dict[fx.Node, fx.Node]) -> fx.Node:
    # create_node without args, then assign them: skips create_node's pytree walk.
    new = graph.create_node(node.op, node.target, name=node.name)
    lookup = env.__getitem__
    args = map_arg(node.args, lookup)
    kwargs = map_arg(node.kwargs, lookup)
    if _UPDATE is not None:
        _UPDATE(new, args, kwargs)
        object.__setattr__(new, "meta", dict(node.meta))
    else:
        new.args = args  # type: ignore[assignment]
        new.kwargs = kwargs  # type: ignore[assignment]
        new.meta = dict(node.meta)
    env[node] = new
    return new


def _placeholder(graph: fx.Graph, node: fx.Node, env: dict[fx.Node, fx.Node], name: str) -> None:
    new = graph.placeholder(name)
    new.meta = dict(node.meta)
    env[node] = new


def _map_outputs(values: Sequence[Any], env: dict[fx.Node, fx.Node], which: str) -> list[Any]:
    out = []
    for v in values:
        if isinstance(v, fx.Node):
            if v not in env:
                raise GraphError(f"the {which} graph's output {v.name} was not placed in it")
            out.append(env[v])
        else:
            out.append(v)
    return out


def split_joint(
    joint: fx.GraphModule,
    nodes: Sequence[fx.Node],
    placement: Sequence[int],
    saved: Sequence[int],
    num_fwd_outputs: int,
    rep: Sequence[int] | np.ndarray | None = None,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Build the forward and backward graphs.

    ``nodes[i]`` is the joint graph's node for table row ``i``; ``placement[i]``
    has bit 0 when the node is computed in the forward, bit 1 when the backward
    reads or recomputes it; ``saved`` lists the rows passed from forward to
    backward, in order. ``rep`` (the partition's, after CSE): ``rep[i] != i``
    when row ``i`` computes the same value as the earlier row ``rep[i]``; its
    readers then read that row's copy (row ``i`` itself is in neither graph).
    """
    outputs = list(joint.graph.output_node().args[0])  # type: ignore[arg-type]
    saved_nodes = [nodes[i] for i in saved]
    fw = _Half("forward")
    bw = _Half("backward")
    # Backward placeholders first: saved values in order, then tangents (below). A saved
    # value is never named like a tangent: torch's tooling tells tangents by name.
    for n in saved_nodes:
        name = n.name if not n.name.startswith("tangents") else f"saved_{n.name}"
        _placeholder(bw.graph, n, bw.env, name)
    _place_nodes(nodes, placement, set(saved_nodes), _merged_rows(rep), fw, bw)
    fw.graph.output(tuple(fw.outputs(outputs[:num_fwd_outputs]) + fw.outputs(saved_nodes)))
    bw.graph.output(tuple(bw.outputs(outputs[num_fwd_outputs:])))
    return _LazyGraphModule(joint, fw.graph), _LazyGraphModule(joint, bw.graph)


class _Half:
    """One of the two graphs being built, and the joint node → its node there."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.graph = fx.Graph()
        self.env: dict[fx.Node, fx.Node] = {}

    def outputs(self, values: Sequence[Any]) -> list[Any]:
        return _map_outputs(values, self.env, self.which)


def _merged_rows(rep: Sequence[int] | np.ndarray | None) -> dict[int, int]:
    """Row → its representative, for the rows CSE merged into an earlier one."""
    if rep is None:
        return {}
    reps = np.asarray(rep)
    rows = np.flatnonzero(reps != np.arange(len(reps)))
    return dict(zip(rows.tolist(), reps[rows].tolist(), strict=True))


def _place_nodes(
    nodes: Sequence[fx.Node],
    placement: Sequence[int],
    saved: set[fx.Node],
    merged: dict[int, int],
    fw: _Half,
    bw: _Half,
) -> None:
    """Copy every row into the graph(s) its placement names, in order: a placeholder by
    its role, a merged row as its representative, a saved value into the forward only."""
    for i, node in enumerate(nodes):
        if merged and i in merged:  # stand-in: the representative (an earlier row)
            r = nodes[merged[i]]
            for env in (fw.env, bw.env):
                if r in env:
                    env[node] = env[r]
            continue
        if node.op == "placeholder":
            half = bw if is_tangent(node) else fw
            _placeholder(half.graph, node, half.env, node.name)
            continue
        where = placement[i]
        if where & IN_FORWARD:
            _copy_node(fw.graph, node, fw.env)
        if where & IN_BACKWARD and node not in saved:
            try:
                _copy_node(bw.graph, node, bw.env)
            except KeyError as e:
                raise GraphError(
                    f"backward node {node.name} reads {e.args[0]}, which is neither saved, "
                    "a tangent, nor recomputed"
                ) from None
