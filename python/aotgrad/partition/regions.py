"""Regions: ``invoke_subgraph`` calls (``torch.compiler.nested_compile_region``)
partitioned once per region and stitched into the joint graph.

A transformer is N calls of one block. Marked as a region, each call reaches the
joint graph as two ``invoke_subgraph`` nodes sharing two subgraphs: a forward node
(the block's forward) and a backward node whose subgraph is the block's whole joint
(it recomputes the forward). Left so, every block is recomputed in the backward. Here
each distinct joint subgraph is partitioned once, by the partitioner the caller chose
(min-cut, default, memory budget), into a forward that also returns what it saves and
a backward that takes those: every call's forward node runs the former, its backward
node the latter, fed from the forward node's extra outputs. The joint graph's own
partition then saves those values across the forward/backward boundary like any
other, and Inductor compiles each region's forward and backward once (its cache
keys on the identifier given here, one per distinct region).

The rewrite works on the joint graph in place, only after every region was
partitioned: a region that cannot be (no matching forward node, an unexpected
signature) leaves the graph as traced.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from .. import roles

_INVOKE = torch.ops.higher_order.invoke_subgraph


@dataclass
class _Region:
    """One distinct region, partitioned: its forward and backward subgraphs."""

    fw_name: str
    bw_name: str
    num_fwd_outputs: int
    num_saved: int


def _hops(gm: fx.GraphModule) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_function" and n.target is _INVOKE]


def _pairs(hops: list[fx.Node]) -> list[tuple[fx.Node, fx.Node]]:
    """(forward node, backward node): a backward node's operands begin with its forward
    node's (the primals), followed by the tangents."""
    pairs = []
    forwards = {tuple(n.args[2:]): n for n in hops}
    for b in hops:
        for n_primals in range(len(b.args) - 3, 0, -1):
            f = forwards.get(tuple(b.args[2 : 2 + n_primals]))
            if f is not None and f is not b:
                pairs.append((f, b))
                break
    return pairs


def _joint_of(gm: fx.GraphModule, b: fx.Node, n_primals: int) -> tuple[fx.GraphModule, int]:
    """The backward node's subgraph (outputs: the primals' gradients, then the forward's
    outputs) as a joint graph the partitioners take: roles stamped, the forward's
    outputs first. Returns it and its number of forward outputs."""
    sub = getattr(gm, b.args[0].target)
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    out = graph.graph_copy(sub.graph, env)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    grads, fw_outs = outs[:n_primals], outs[n_primals:]
    graph.output((*fw_outs, *grads))
    placeholders = graph.find_nodes(op="placeholder")
    for i, p in enumerate(placeholders):  # torch's names too, for torch's partitioners
        p._rename(f"primals_{i + 1}" if i < n_primals else f"tangents_{i - n_primals + 1}")
        p.target = p.name
    roles.stamp(placeholders, n_primals)
    return fx.GraphModule(sub, graph), len(fw_outs)


def _partition(
    gm: fx.GraphModule, b: fx.Node, n_primals: int, partition_fn: Callable[..., Any], k: int
) -> _Region:
    joint, n_fw = _joint_of(gm, b, n_primals)
    inputs = [p.meta.get("val") for p in joint.graph.find_nodes(op="placeholder")]
    fw, bw = partition_fn(joint, inputs, num_fwd_outputs=n_fw)
    n_saved = len(fw.graph.output_node().args[0]) - n_fw
    n_tangents = len(b.args) - 2 - n_primals
    if len(bw.graph.find_nodes(op="placeholder")) != n_saved + n_tangents:
        raise ValueError("a region's backward does not take its saved values and tangents")
    region = _Region(f"aotgrad_region_fw_{k}", f"aotgrad_region_bw_{k}", n_fw, n_saved)
    gm.register_module(region.fw_name, fw)
    gm.register_module(region.bw_name, bw)
    return region


def _rewire(gm: fx.GraphModule, f: fx.Node, b: fx.Node, n_primals: int, r: _Region) -> None:
    """``f`` runs the region's forward and returns the saved values too; ``b`` runs its
    backward on them; users of ``b``'s recomputed forward outputs read ``f``'s."""
    graph = gm.graph
    fw = getattr(gm, r.fw_name)
    saved_vals = [
        getattr(v, "meta", {}).get("val")
        for v in fw.graph.output_node().args[0][r.num_fwd_outputs :]
    ]
    with graph.inserting_before(f):
        fw_attr = graph.get_attr(r.fw_name)
    f.args = (fw_attr, r.fw_name, *f.args[2:])
    old = f.meta.get("val")
    if isinstance(old, (tuple, list)):
        f.meta["val"] = (*old, *saved_vals)
    saved = []
    with graph.inserting_after(f):
        for i in reversed(range(r.num_saved)):
            node = graph.call_function(operator.getitem, (f, r.num_fwd_outputs + i))
            node.meta["val"] = saved_vals[i]
            saved.insert(0, node)
    with graph.inserting_before(b):
        bw_attr = graph.get_attr(r.bw_name)
    tangents = b.args[2 + n_primals :]
    for user in list(b.users):
        if user.target is operator.getitem and user.args[1] >= n_primals:
            index = user.args[1] - n_primals
            twin = next(
                (u for u in f.users if u.target is operator.getitem and u.args[1] == index), None
            )
            if twin is None:
                with graph.inserting_after(f):
                    twin = graph.call_function(operator.getitem, (f, index))
                twin.meta = dict(user.meta)
            user.replace_all_uses_with(twin)
            graph.erase_node(user)
    b.args = (bw_attr, r.bw_name, *saved, *tangents)
    old = b.meta.get("val")
    if isinstance(old, (tuple, list)):
        b.meta["val"] = tuple(old[:n_primals])


def stitch(gm: fx.GraphModule, partition_fn: Callable[..., Any]) -> int:
    """Partition every distinct region of the joint graph ``gm`` once with
    ``partition_fn`` and stitch the results in; returns how many calls were stitched."""
    hops = _hops(gm)
    if not hops:
        return 0
    pairs = _pairs(hops)
    regions: dict[str, _Region] = {}
    plan = []
    for f, b in pairs:
        n_primals = len(f.args) - 2
        target = b.args[0].target
        if target not in regions:
            regions[target] = _partition(gm, b, n_primals, partition_fn, len(regions))
        plan.append((f, b, n_primals, regions[target]))
    for f, b, n_primals, r in plan:
        _rewire(gm, f, b, n_primals, r)
    gm.graph.eliminate_dead_code()
    gm.delete_all_unused_submodules()
    gm.graph.lint()
    gm.recompile()
    return len(plan)
