"""Exact serialisation of GraphModules for the on-disk cache.

``pickle`` of a GraphModule keeps only its Python code and re-traces that code
when loaded: node names change (``add`` becomes ``add_tensor``), all-constant
calls are folded into ``_tensor_constant`` attributes, and node metadata is
lost. A graph read back that way is a different graph to Inductor, whose
FX-graph cache is keyed by the code, so a second process missed it and
generated every kernel again. Here a graph is stored node by node — op, name,
target, arguments, and the metadata compilers read besides the fake values —
and rebuilt exactly; the fake values are restored by the caller (the cache
propagates fake inputs, as a fresh compilation would have them).

Operators are stored by name (``aten::add.Tensor``, higher-order ops by their
``torch.ops.higher_order`` name) and looked up again when loaded, so loading
needs the same custom operators registered, as running the graph would.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch.fx._lazy_graph_module import _LazyGraphModule

from .vocab import (
    AC_GRAPH_ID_KEY,
    EAGER_SAVE_KEY,
    MUTATED_KEY,
    PARTITIONER_TAG,
    RECOMPUTE_KEY,
    ROLE_KEY,
    SAVED_AS_INPUT_KEY,
    STATIC_KEY,
    UNREAD_KEY,
)

#: Node metadata kept (besides ``val``, restored by fake propagation): what compilers,
#: the partitioner's tags and the report read.
KEPT_META = frozenset(
    {
        "stack_trace",
        "seq_nr",
        "original_aten",
        RECOMPUTE_KEY,
        AC_GRAPH_ID_KEY,
        PARTITIONER_TAG,
        "is_backward",
        "custom",
        "user_visible_output_idxs",
        ROLE_KEY,
        MUTATED_KEY,
        SAVED_AS_INPUT_KEY,
        STATIC_KEY,
        UNREAD_KEY,
        EAGER_SAVE_KEY,
    }
)


@dataclass(frozen=True)
class _NodeRef:
    name: str


@dataclass
class GraphRecord:
    """One GraphModule: its nodes in order, its attributes read by ``get_attr`` nodes
    (tensors, or nested GraphRecords for higher-order ops' subgraphs), its codegen."""

    nodes: list[tuple[str, str, Any, tuple[Any, ...], dict[str, Any], dict[str, Any]]]
    attributes: dict[str, Any]
    codegen: Any


def record_of(gm: fx.GraphModule) -> GraphRecord:
    nodes = []
    attributes: dict[str, Any] = {}
    for n in gm.graph.nodes:
        if n.op in ("get_attr", "call_module"):
            value = _getattr_path(gm, str(n.target))
            attributes[str(n.target)] = (
                record_of(value) if isinstance(value, fx.GraphModule) else value
            )
        meta = {k: v for k, v in n.meta.items() if k in KEPT_META}
        nodes.append((n.op, n.name, n.target, n.args, n.kwargs, meta))
    return GraphRecord(nodes, attributes, gm.graph._codegen)


def graph_of(record: GraphRecord) -> fx.GraphModule:
    root = torch.nn.Module()
    for path, value in record.attributes.items():
        _setattr_path(root, path, graph_of(value) if isinstance(value, GraphRecord) else value)
    graph = fx.Graph()
    graph._codegen = record.codegen
    env: dict[str, fx.Node] = {}

    def resolve(a: Any) -> Any:
        return env[a.name] if isinstance(a, _NodeRef) else a

    for op, name, target, args, kwargs, meta in record.nodes:
        node = graph.create_node(
            op,
            target,
            fx.node.map_aggregate(args, resolve),
            fx.node.map_aggregate(kwargs, resolve),
            name=name,
        )
        if node.name != name:
            raise ValueError(f"node {name!r} came back named {node.name!r}")
        node.meta.update(meta)
        env[name] = node
    # its Python code is generated when first run or read: a warm start that reloads
    # the compiled code by its recorded key never needs it
    return _LazyGraphModule(root, graph)


def dumps(obj: Any) -> bytes:
    """Pickle ``obj``, with every GraphModule in it stored as a :class:`GraphRecord`."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def loads(data: bytes) -> Any:
    """Inverse of :func:`dumps`: GraphRecords come back as GraphModules."""
    return _Unpickler(io.BytesIO(data)).load()


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, fx.GraphModule):
            return graph_of, (record_of(obj),)
        return NotImplemented

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, fx.Node):
            return ("node", obj.name)
        if isinstance(obj, OpOverload):
            return ("op", obj.name())
        if isinstance(obj, OpOverloadPacket):
            return ("packet", obj._qualified_op_name)
        if isinstance(obj, HigherOrderOperator):
            return ("hop", obj.name())
        return None


class _Unpickler(pickle.Unpickler):
    def persistent_load(self, pid: Any) -> Any:
        kind, name = pid
        if kind == "node":
            return _NodeRef(name)
        if kind == "hop":
            return getattr(torch.ops.higher_order, name)
        namespace, _, rest = name.partition("::")
        opname, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, namespace), opname)
        if kind == "packet":
            return packet
        return getattr(packet, overload or "default")


def _getattr_path(root: Any, path: str) -> Any:
    for part in path.split("."):
        root = getattr(root, part)
    return root


def _setattr_path(root: torch.nn.Module, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        if not hasattr(root, part):
            root.add_module(part, torch.nn.Module())
        root = getattr(root, part)
    if isinstance(value, torch.nn.Module):
        root.add_module(last, value)
    elif isinstance(value, torch.nn.Parameter):
        root.register_parameter(last, value)
    elif isinstance(value, torch.Tensor):
        root.register_buffer(last, value)
    else:
        setattr(root, last, value)
