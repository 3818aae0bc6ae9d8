"""Build a ``GraphReport`` from a joint graph (and, when there is one, its compiled artefact).

The saved/recomputed decision and the reasons come from aotgrad's Rust
partitioner (``partition_joint``); the comparison runs aotgrad's min-cut,
aotgrad's default partition (save everything the backward reads) and, unless
told not to, torch's own min-cut partitioner on a copy of the same graph.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx

from ...partition import PartitionResult, partition_joint
from ...roles import is_tangent
from ...vocab import IN_BACKWARD, IN_FORWARD
from .grouping import group_nodes
from .model import (
    AOTGRAD_MIN_CUT,
    KINDS,
    SAVE_ALL,
    TORCH_MIN_CUT,
    UNKNOWN_REASON,
    Curve,
    GraphReport,
    Partition,
    Saved,
)

_KIND_NAME = {"min_cut": AOTGRAD_MIN_CUT, "default": SAVE_ALL}


def _shape(val: Any) -> list[Any] | None:
    if isinstance(val, torch.Tensor):
        return [int(s) if isinstance(s, int) else str(s) for s in val.shape]
    return None


def _dtype(val: Any) -> str | None:
    if isinstance(val, torch.Tensor):
        return str(val.dtype).removeprefix("torch.")
    if isinstance(val, (torch.SymInt, int)) and not isinstance(val, bool):
        return "SymInt" if isinstance(val, torch.SymInt) else "int"
    if isinstance(val, (tuple, list)):
        return "tuple"
    return None


def value_nbytes(val: Any) -> int:
    """Bytes of a tensor value (symbolic sizes by their hint); a tuple sums its tensors."""
    if isinstance(val, torch.Tensor):
        from torch.fx.experimental.symbolic_shapes import optimization_hint

        numel = val.numel()
        return int(optimization_hint(numel, fallback=4096)) * val.element_size()
    if isinstance(val, (tuple, list)):
        return sum(value_nbytes(v) for v in val)
    return 0


def _op_name(node: fx.Node) -> str:
    if node.op == "placeholder":
        return "placeholder"
    if node.op == "get_attr":
        return "get_attr"
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    return f"{getattr(t, '__module__', '')}.{getattr(t, '__qualname__', t)}".lstrip(".")


def _kind(node: fx.Node) -> str:
    if node.op == "placeholder":
        return KINDS[1] if is_tangent(node) else KINDS[0]
    return KINDS[3] if node.op == "get_attr" else KINDS[2]


def node_columns(nodes: Sequence[fx.Node], placement: Sequence[int]) -> dict[str, list[Any]]:
    """The report's node columns (without ``group``)."""
    cols: dict[str, list[Any]] = {
        k: [] for k in ("name", "op", "kind", "shape", "dtype", "nbytes", "placement")
    }
    for node, p in zip(nodes, placement, strict=True):
        val = node.meta.get("val")
        cols["name"].append(node.name)
        cols["op"].append(_op_name(node))
        cols["kind"].append(_kind(node))
        cols["shape"].append(_shape(val))
        cols["dtype"].append(_dtype(val))
        cols["nbytes"].append(value_nbytes(val))
        cols["placement"].append(int(p))
    return cols


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy with its own nodes (torch's partitioner changes the graph it is given)."""
    g = fx.Graph()
    g.output(g.graph_copy(gm.graph, {}))
    return fx.GraphModule(gm, g)


def saved_activation_bytes(fw: fx.GraphModule, num_fwd_outputs: int) -> tuple[int, int]:
    """(bytes, count) of the tensors a forward graph saves (its outputs past the forward outputs)."""
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    vals = [o.meta.get("val") for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    return sum(value_nbytes(v) for v in tensors), len(tensors)


def torch_min_cut(joint: fx.GraphModule, num_fwd_outputs: int) -> Partition:
    """torch's ``min_cut_rematerialization_partition`` on a copy of ``joint``."""
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    gm = copy_graph_module(joint)
    t0 = time.perf_counter()
    try:
        fw, _ = min_cut_rematerialization_partition(gm, None, num_fwd_outputs=num_fwd_outputs)
    except Exception as e:  # torch's partitioner is not ours to fix: show why it failed
        return Partition(TORCH_MIN_CUT, None, error=f"{type(e).__name__}: {e}"[:300])
    dt = time.perf_counter() - t0
    nbytes, count = saved_activation_bytes(fw, num_fwd_outputs)
    return Partition(TORCH_MIN_CUT, nbytes, count, dt)


def _timed_partition(joint: fx.GraphModule, num_fwd_outputs: int, kind: str):
    t0 = time.perf_counter()
    res = partition_joint(joint, num_fwd_outputs=num_fwd_outputs, kind=kind)
    return res, time.perf_counter() - t0


def _as_partition(kind: str, res: PartitionResult, dt: float) -> Partition:
    tensors = sum(1 for n in res.saved_nodes() if isinstance(n.meta.get("val"), torch.Tensor))
    return Partition(_KIND_NAME[kind], int(res.saved_bytes), tensors, dt)


def _partitions(
    joint: fx.GraphModule, num_fwd_outputs: int, kind: str, compare_torch: bool
) -> tuple[PartitionResult, list[Partition]]:
    """aotgrad's ``kind`` partition of ``joint``, and the comparison: aotgrad's min-cut first,
    then torch's (when asked for), then save-everything."""
    other = "default" if kind == "min_cut" else "min_cut"
    res, dt = _timed_partition(joint, num_fwd_outputs, kind)
    res_other, dt_other = _timed_partition(joint, num_fwd_outputs, other)
    partitions = [_as_partition(kind, res, dt), _as_partition(other, res_other, dt_other)]
    partitions.sort(key=lambda p: p.name != AOTGRAD_MIN_CUT)
    if compare_torch:
        partitions.insert(1, torch_min_cut(joint, num_fwd_outputs))
    return res, partitions


def _split(
    joint: fx.GraphModule, res: PartitionResult, num_fwd_outputs: int, notes: list[str]
) -> tuple[fx.GraphModule, fx.GraphModule] | None:
    """The forward and backward graphs of ``res``; None and a note if the split fails."""
    from ...split import split_joint

    # ``rep``: rows merged by the partitioner's CSE (results that carry it).
    rep = getattr(res, "rep", None)
    extra = {} if rep is None else {"rep": rep.tolist()}
    try:
        forward, backward = split_joint(
            joint, res.nodes, res.placement, res.saved, num_fwd_outputs, **extra
        )
    except Exception as e:  # a broken partition is worth a report too
        notes.append(f"the forward/backward split failed: {type(e).__name__}: {e}")
        return None
    return forward, backward


def _sizes(
    joint: fx.GraphModule, forward: fx.GraphModule | None, backward: fx.GraphModule | None
) -> dict[str, int]:
    """Node counts of the joint graph and of the forward and backward graphs (0: none)."""
    return {
        "joint": len(joint.graph.nodes),
        "forward": len(forward.graph.nodes) if forward is not None else 0,
        "backward": len(backward.graph.nodes) if backward is not None else 0,
    }


def collect(
    joint: fx.GraphModule,
    *,
    num_fwd_outputs: int,
    title: str = "joint graph",
    kind: str = "min_cut",
    forward: fx.GraphModule | None = None,
    backward: fx.GraphModule | None = None,
    timings: dict[str, float] | None = None,
    compare_torch: bool = True,
    curve: Sequence[tuple[float, float]] | None = None,
    notes: Sequence[str] = (),
) -> GraphReport:
    """Partition ``joint`` with aotgrad (``kind``) and describe the decision.

    ``forward``/``backward``: the graphs actually compiled (their sizes are
    reported); without them the joint graph is split here. ``curve``: memory
    versus recompute points to draw, if another tool computed them.
    """
    res, partitions = _partitions(joint, num_fwd_outputs, kind, compare_torch)
    group, groups, rule = group_nodes(res.nodes, res.placement)
    nodes = node_columns(res.nodes, res.placement)
    nodes["group"] = group
    notes = list(notes)
    if curve is None:
        curve = _frontier_points(joint, num_fwd_outputs, notes)
    if forward is None or backward is None:
        split = _split(joint, res, num_fwd_outputs, notes)
        if split is not None:  # a failed split keeps what the caller passed
            forward, backward = split
    return GraphReport(
        title=title,
        partitioner=_KIND_NAME[kind],
        grouping=rule,
        num_fwd_outputs=num_fwd_outputs,
        sizes=_sizes(joint, forward, backward),
        groups=groups,
        nodes=nodes,
        saved=[Saved(int(i), r) for i, r in zip(res.saved, res.reasons(), strict=True)],
        recomputed=[int(i) for i in res.recomputed],
        partitions=partitions,
        timings=dict(timings or {}),
        curve=Curve([(float(a), float(b)) for a, b in curve]) if curve else None,
        notes=notes,
    )


def _frontier_points(
    joint: fx.GraphModule, num_fwd_outputs: int, notes: list[str]
) -> list[tuple[float, float]] | None:
    """(activation bytes, recompute cost) per memory budget: aotgrad's frontier."""
    try:
        from ...partition import frontier

        points = frontier(joint, num_fwd_outputs=num_fwd_outputs)
    except Exception as e:  # the rest of the report still stands
        notes.append(f"the memory/recompute frontier failed: {type(e).__name__}: {e}")
        return None
    return [(float(p.activation_bytes), float(p.recompute_cost)) for p in points]


def _saved_names(fw: fx.GraphModule, num_fwd_outputs: int) -> list[str]:
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    return [o.name for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]


def collect_artifact(
    artifact: Any, *, title: str = "compiled graph", compare_torch: bool = True
) -> GraphReport | None:
    """A report of a ``CompiledArtifact`` (None for an inference artefact).

    The partitioner that made it is found by comparing what its forward graph
    saves with what aotgrad's min-cut and default partitions save. An artefact
    without its joint graph (loaded from the on-disk cache) is described from
    its forward and backward graphs alone (``collect_split``)."""
    artifact.ensure_values()  # a warm start's graphs get their values when read
    if not artifact.training:
        return None
    nfo = artifact.layout.num_fwd_outputs
    if artifact.joint is None:
        return collect_split(
            artifact.forward,
            artifact.backward,
            num_fwd_outputs=nfo,
            title=title,
            timings=artifact.timings,
        )
    compiled = _saved_names(artifact.forward, nfo)
    notes = []
    for kind in ("min_cut", "default"):
        res = partition_joint(artifact.joint, num_fwd_outputs=nfo, kind=kind)
        if [n.name for n in res.saved_nodes()] == compiled:
            break
    else:
        kind = "min_cut"
        notes.append(
            "the compiled forward graph saves other values than aotgrad's partitioners "
            "choose on this joint graph (another partition_fn?): shown is aotgrad's min-cut"
        )
    return collect(
        artifact.joint,
        num_fwd_outputs=nfo,
        title=title,
        kind=kind,
        forward=artifact.forward,
        backward=artifact.backward,
        timings=artifact.timings,
        compare_torch=compare_torch,
        notes=notes,
    )


def collect_split(
    forward: fx.GraphModule,
    backward: fx.GraphModule,
    *,
    num_fwd_outputs: int,
    title: str = "compiled graph",
    timings: dict[str, float] | None = None,
) -> GraphReport:
    """Describe a partition from its forward and backward graphs only (no joint graph,
    so no reasons and no comparison): saved = the forward's extra outputs, recomputed =
    call nodes of the forward that the backward computes again (matched by name)."""
    fw_nodes = [n for n in forward.graph.nodes if n.op != "output"]
    bw_calls = {n.name for n in backward.graph.nodes if n.op == "call_function"}
    fw_names = {n.name for n in fw_nodes}
    bw_only = [n for n in backward.graph.nodes if n.op != "output" and n.name not in fw_names]
    nodes = fw_nodes + bw_only
    placement = [IN_FORWARD | (IN_BACKWARD if n.name in bw_calls else 0) for n in fw_nodes]
    placement += [IN_BACKWARD] * len(bw_only)
    index = {n.name: i for i, n in enumerate(fw_nodes)}
    saved = [index[name] for name in _saved_names(forward, num_fwd_outputs)]
    recomputed = [
        i for i, n in enumerate(fw_nodes) if n.op == "call_function" and n.name in bw_calls
    ]
    group, groups, rule = group_nodes(nodes, placement)
    cols = node_columns(nodes, placement)
    cols["group"] = group
    compiled = Partition("compiled partition", *saved_activation_bytes(forward, num_fwd_outputs))
    return GraphReport(
        title=title,
        partitioner="unknown (no joint graph)",
        grouping=rule,
        num_fwd_outputs=num_fwd_outputs,
        sizes={
            "joint": 0,
            "forward": len(forward.graph.nodes),
            "backward": len(backward.graph.nodes),
        },
        groups=groups,
        nodes=cols,
        saved=[Saved(i, UNKNOWN_REASON) for i in saved],
        recomputed=recomputed,
        partitions=[compiled],
        timings=dict(timings or {}),
        notes=[
            "no joint graph (loaded from the on-disk cache?): described from the forward and "
            "backward graphs; reasons and the partitioner comparison need the joint graph"
        ],
    )
