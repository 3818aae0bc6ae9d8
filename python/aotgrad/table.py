"""Joint FX graph → node table: flat columns, no Python object per node.

The format is ``docs/node_table.md`` (version 4); Rust reads the columns
zero-copy and validates them (``aotgrad._rust.GraphStore.from_table``). Its codes
(version, kinds, flag bits) are Rust's, read at import by ``aotgrad.vocab``.

``to_table`` makes one pass over the graph's nodes. Facts that depend only on
the op (its interned name, RANDOM / VIEW / IMPURE / COMPUTE_INTENSIVE) are
computed once per target and cached; byte sizes come from
``meta["tensor_meta"]`` when present (cheap to read) and from ``meta["val"]``
otherwise. ``const_hash`` (the constant arguments, for CSE) is cached per
target and argument structure. An 8,000-node joint graph converts in about
20 ms.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx as fx
from torch._ops import HigherOrderOperator, OpOverload
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, optimization_hint
from torch.fx.passes.shape_prop import TensorMetadata
from torch.utils.checkpoint import CheckpointPolicy

from .errors import UnsupportedError, table_error
from .roles import PRIMAL, ROLE_KEY, TANGENT
from .vocab import (
    AC_GRAPH_ID_KEY,
    EAGER_SAVE_KEY,
    FORMAT_VERSION,
    GET_ATTR_OP,
    MUTATED_KEY,
    PARTITIONER_TAG,
    PLACEHOLDER_OP,
    RECOMPUTE_KEY,
    SAVED_AS_INPUT_KEY,
    STATIC_KEY,
    TRACED_BY_FORWARD,
    UNREAD_KEY,
    Flag,
    Kind,
)

#: Byte size assumed for a dimension with no size hint (an unbacked symbol).
UNHINTED_DIM = 4096


@dataclass
class NodeTable:
    """The columns of a node table (``docs/node_table.md``) as numpy arrays."""

    kind: np.ndarray  # uint8[N]
    op: np.ndarray  # uint32[N]
    arg_ptr: np.ndarray  # uint32[N + 1]
    arg_idx: np.ndarray  # uint32[E]
    nbytes: np.ndarray  # uint64[N]
    const_hash: np.ndarray  # uint64[N]
    flags: np.ndarray  # uint32[N]
    region: np.ndarray  # int32[N]
    outputs: np.ndarray  # int32[M]
    op_names: list[str]
    num_fwd_outputs: int
    version: int = FORMAT_VERSION

    COLUMNS = (
        ("kind", np.uint8),
        ("op", np.uint32),
        ("arg_ptr", np.uint32),
        ("arg_idx", np.uint32),
        ("nbytes", np.uint64),
        ("const_hash", np.uint64),
        ("flags", np.uint32),
        ("region", np.int32),
        ("outputs", np.int32),
    )

    def __len__(self) -> int:
        return len(self.kind)

    def args(self, node: int) -> list[int]:
        return self.arg_idx[self.arg_ptr[node] : self.arg_ptr[node + 1]].tolist()

    @classmethod
    def from_columns(cls, columns: dict[str, Any]) -> NodeTable:
        """From ``GraphStore.to_columns()`` (bytes per column) or a dict of arrays."""
        arrays = {
            name: np.frombuffer(columns[name], dtype=dtype)
            if isinstance(columns[name], (bytes, bytearray, memoryview))
            else np.ascontiguousarray(columns[name], dtype=dtype)
            for name, dtype in cls.COLUMNS
        }
        return cls(
            **arrays,
            op_names=list(columns["op_names"]),
            num_fwd_outputs=int(columns["num_fwd_outputs"]),
            version=int(columns.get("version", FORMAT_VERSION)),
        )

    @classmethod
    def from_store(cls, store: Any) -> NodeTable:
        """The columns of an ``aotgrad._rust.GraphStore`` (flags include TANGENT_DERIVED)."""
        return cls.from_columns(store.to_columns())


#: How many recent constant patterns each target keeps for the inline check
#: (a transformer's ops have at most ~10 patterns each; most have one).
_RECENT = 16


class _ConstCache:
    """The ``const_hash`` cache of one target's calls (see ``_Builder.const_hash``).

    ``recent`` holds the last few distinct entries ``((types, key), hash, reprs)``,
    newest first, checked by equality in ``to_table`` (no hashing); ``entries``
    maps every key seen to ``(types, hash, reprs)``.
    """

    __slots__ = ("entries", "recent")

    def __init__(self) -> None:
        self.recent: list[tuple[tuple[Any, Any], int, Any]] = []
        self.entries: dict[Any, tuple[Any, int, Any]] = {}

    def remember(self, types: Any, key: Any, h: int, reprs: Any) -> None:
        self.recent.insert(0, ((types, key), h, reprs))
        del self.recent[_RECENT:]


@dataclass
class _Builder:
    """Interned op names and per-target facts, filled while converting one graph."""

    compute_intensive: frozenset[Any]
    op_names: list[str] = field(default_factory=lambda: [PLACEHOLDER_OP, GET_ATTR_OP])
    #: by ``id(target)`` (targets outlive the conversion: the graph holds them):
    #: (op id, op flags, the const_hash cache of the target's calls)
    facts: dict[int, tuple[int, int, _ConstCache]] = field(default_factory=dict)

    def op_facts(self, target: Any) -> tuple[int, int, _ConstCache]:
        """(op id, op flags, const cache) of a call_function target; made once per target."""
        name, bits = _describe_op(target)
        if target in self.compute_intensive or (
            isinstance(target, OpOverload) and target.overloadpacket in self.compute_intensive
        ):
            bits |= Flag.COMPUTE_INTENSIVE
        self.op_names.append(name)
        facts = (len(self.op_names) - 1, int(bits), _ConstCache())
        self.facts[id(target)] = facts
        return facts

    def const_hash(
        self, node: fx.Node, row: int, op_id: int, key: Any, types: Any, cache: _ConstCache
    ) -> int:
        """The ``const_hash`` of call ``node`` (row ``row``) when its constants are not
        those of one of the target's recent calls (``to_table`` checks that inline).

        ``key`` is the node's arguments with every node replaced by None
        (``map_arg`` with ``list.append``), ``types`` the type of every leaf
        (``map_aggregate`` with ``type``; ``fx.Node`` for a node). The hash is
        stable across processes: a BLAKE2b digest of the op name and the
        arguments' canonical form (``_Walk``). Two calls share a cache entry
        only if their ``key`` and ``types`` are equal and, where the arguments
        hold a float zero, the ``repr`` of every leaf (``1 == 1.0 == True`` and
        ``0.0 == -0.0`` in Python; a None is a node or the constant): then their
        constants are the same. ``key`` is only hashed or compared once
        ``types`` shows no SymFloat/SymBool in it (their ``__hash__`` and
        ``__eq__`` would add guards to the shape environment) and no object of
        an unknown type (its equality cannot be trusted).
        """
        try:
            _map_aggregate(types, _KNOWN_LEAF_TYPES.__getitem__)
            known = True
        except KeyError:
            known = False
        if known:
            try:
                e = cache.entries.get(key)
            except TypeError:  # unhashable (a slice, a non-nested SymInt)
                e = None
            if (
                e is not None
                and e[0] == types
                and (e[2] is None or e[2] == _map_aggregate(key, repr))
            ):
                cache.remember(types, key, e[1], e[2])
                return e[1]
        walk = _Walk()
        try:
            canon = walk.canonical((node._args, node._kwargs))
        except _Unreliable:
            return _UNIQUE_TAG ^ row
        text = repr((self.op_names[op_id], canon)).encode()
        h = int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")
        if known and walk.cacheable:
            reprs = _map_aggregate(key, repr) if walk.signed_zero else None
            try:
                cache.entries[key] = (types, h, reprs)
            except TypeError:  # unhashable: no cache
                return h
            cache.remember(types, key, h, reprs)
        return h


#: Where a row's constants cannot be hashed reliably (an object of unknown
#: type, a SymInt result with unbacked symbols), its ``const_hash`` is this
#: xor the row id: no other row has it.
_UNIQUE_TAG = 0xA076_1D64_78BD_642F
_NODE_MARK = ("node",)
_NAMED_CONSTANTS = (torch.dtype, torch.device, torch.layout, torch.memory_format)
_SYM_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)
#: Leaf types whose ``==`` is exact within the type and whose hash is safe
#: (a dict, for ``__getitem__`` as a C-level membership test over a structure).
_KNOWN_LEAF_TYPES = dict.fromkeys(
    (fx.Node, type(None), bool, int, float, complex, str, type(Ellipsis), *_NAMED_CONSTANTS)
)
# torch's C implementation of ``map_aggregate``: ``fn`` on every leaf.
_map_aggregate = getattr(torch._C, "_fx_map_aggregate", fx.node.map_aggregate)


class _Unreliable(Exception):
    """A constant argument that cannot be hashed reliably."""


class _Walk:
    """One canonical-form walk over a call's arguments (see ``_Builder.const_hash``)."""

    __slots__ = ("cacheable", "signed_zero")

    def __init__(self) -> None:
        self.cacheable = True  # no NaN (never equal to itself), no SymInt
        self.signed_zero = False  # a float zero: the cache compares leaf reprs

    def canonical(self, v: Any) -> Any:
        """A tuple of primitives naming ``v``'s value and type; nodes become a marker."""
        t = type(v)
        if t is fx.Node:
            return _NODE_MARK
        if t is str:
            return ("str", v)
        if t is int or t is bool or v is None:
            return (t.__name__, v)
        if t is float or t is complex:
            if v != v:
                self.cacheable = False
            elif v == 0:
                self.signed_zero = True
            parts = (v,) if t is float else (v.real, v.imag)
            return (t.__name__, *(x.hex() for x in parts))
        if isinstance(v, (tuple, list)):  # immutable_list, torch.Size
            return ("tuple" if isinstance(v, tuple) else "list", *map(self.canonical, v))
        if isinstance(v, dict):  # kwargs, in key order: equal dicts, equal hashes
            if not all(type(k) is str for k in v):
                raise _Unreliable
            return ("dict", *((k, self.canonical(v[k])) for k in sorted(v)))
        if isinstance(v, _NAMED_CONSTANTS):
            return (t.__name__, str(v))
        if isinstance(v, _SYM_TYPES):  # same expression, same value
            self.cacheable = False
            return ("sym", t.__name__, str(v))
        if t is slice:
            return ("slice", *map(self.canonical, (v.start, v.stop, v.step)))
        if v is Ellipsis:
            return ("ellipsis",)
        raise _Unreliable


def _with_context(h: int, custom: Any) -> int:
    """``h`` combined with a node's ``meta["custom"]`` stream and memory pool (torch's
    CSE compares them too): calls on different streams are different values."""
    if not isinstance(custom, dict):
        return h
    context = (custom.get("stream", 0), custom.get("mempool"), custom.get("mempool_device"))
    if context == (0, None, None):
        return h
    text = repr((h, tuple(map(str, context)))).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _unbacked(val: Any) -> bool:
    """Whether a SymInt/SymFloat/SymBool value has unbacked symbols (as torch's CSE, such
    a node is never merged: its readers' metadata name its own symbol)."""
    try:
        return isinstance(val, _SYM_TYPES) and bool(free_unbacked_symbols(val))
    except Exception:  # no shape environment to ask: assume the worst
        return True


#: ``x.item()``: a Python float Dynamo passes as a 0-dim tensor is read back with it.
_ITEM = torch.ops.aten._local_scalar_dense.default

_SIDE_EFFECTS: frozenset[Any] = frozenset(getattr(fx.node, "_side_effectful_functions", ()))

_CHECKPOINT_FLAGS = {
    CheckpointPolicy.MUST_SAVE: int(Flag.MUST_SAVE),
    CheckpointPolicy.PREFER_SAVE: int(Flag.MUST_SAVE),
    CheckpointPolicy.MUST_RECOMPUTE: int(Flag.MUST_RECOMPUTE),
    CheckpointPolicy.PREFER_RECOMPUTE: int(Flag.MUST_RECOMPUTE),
    # offloaded activations are kept (on the host), never recomputed
    CheckpointPolicy.MUST_CPU_OFFLOAD: int(Flag.MUST_SAVE),
    CheckpointPolicy.PREFER_CPU_OFFLOAD: int(Flag.MUST_SAVE),
}

_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool)
# plain ints for the hot loop (enum arithmetic is slow)
_PRIMAL, _TANGENT, _CALL, _GET_ATTR = (
    int(Kind.PRIMAL),
    int(Kind.TANGENT),
    int(Kind.CALL),
    int(Kind.GET_ATTR),
)
_SYMBOLIC_SIZE = int(Flag.SYMBOLIC_SIZE)
_SYMINT = int(Flag.SYMINT)
_NON_TENSOR = int(Flag.NON_TENSOR)
_MULTI_OUTPUT = int(Flag.MULTI_OUTPUT)
_MUTATED_INPUT = int(Flag.MUTATED_INPUT)
_STATIC_INPUT = int(Flag.STATIC_INPUT)
_MUST_SAVE = int(Flag.MUST_SAVE)
_BACKWARD_REGION = int(Flag.BACKWARD_REGION)
#: ``meta`` key and value torch's joint tracer (and aotgrad's) set on the nodes the
#: forward traced; the nodes after the last of them were traced by the backward.
_NO_ROLE = object()
# torch's C implementation of ``map_arg``: calls ``fn`` on every node in a
# nested argument (tuples, lists, dicts, slices), in order.
_map_arg = getattr(torch._C, "_fx_map_arg", fx.node.map_arg)


def _describe_op(target: Any) -> tuple[str, Flag]:
    """The interned name and the op-level flags of a call_function target."""
    bits = Flag(0)
    if target in _SIDE_EFFECTS:
        bits |= Flag.IMPURE
    if isinstance(target, OpOverload):
        schema = target._schema
        if torch.Tag.nondeterministic_seeded in target.tags:
            bits |= Flag.RANDOM
        if schema.is_mutable:
            bits |= Flag.IMPURE
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            bits |= Flag.VIEW
        return str(target), bits
    if isinstance(target, HigherOrderOperator):
        return f"higher_order.{target.name()}", bits
    module = getattr(target, "__module__", None) or type(target).__module__
    qualname = getattr(target, "__qualname__", None) or getattr(target, "__name__", repr(target))
    return f"{module}.{qualname}", bits


def _hinted(size: Any) -> int:
    """An int for a possibly symbolic size, without adding guards."""
    try:
        return int(optimization_hint(size, fallback=UNHINTED_DIM))
    except Exception:  # no hint and no fallback path: assume a typical size
        return UNHINTED_DIM


def _tensor_nbytes(shape: Sequence[Any], dtype: torch.dtype) -> tuple[int, int]:
    numel = math.prod(shape)
    if type(numel) is int:
        return numel * dtype.itemsize, 0
    return _hinted(numel) * dtype.itemsize, _SYMBOLIC_SIZE


def _value_facts(val: Any) -> tuple[int, int]:
    """(nbytes, value flags) of a node's ``meta["val"]`` (the slow, general path).

    A tensor: its bytes. A SymInt/SymBool or Python number: SYMINT; a SymFloat:
    SYMINT and NON_TENSOR (no partitioner saves one by choice), SYMINT alone when it has
    unbacked symbols (``x.item()``: it cannot be recomputed, so it must be saveable).
    A tuple/list: MULTI_OUTPUT, the bytes of the tensors in it (nested lists
    included), NON_TENSOR if it holds none. Anything else (None, missing):
    NON_TENSOR.
    """
    if isinstance(val, torch.Tensor):
        return _tensor_nbytes(val.shape, val.dtype)
    if isinstance(val, torch.SymFloat):  # recomputed, never saved (see docs/node_table.md)
        # unless data-dependent (``x.item()``): nothing recomputes it, so it is saved
        return 0, _SYMINT if _unbacked(val) else _SYMINT | _NON_TENSOR
    if isinstance(val, _SCALARS):
        return 0, _SYMINT
    if isinstance(val, (tuple, list)):
        total, bits, has_tensor = 0, _MULTI_OUTPUT, False
        for item in val:
            if isinstance(item, (torch.Tensor, tuple, list)):
                nb, b = _value_facts(item)
                total += nb
                bits |= b & _SYMBOLIC_SIZE
                has_tensor = has_tensor or not b & _NON_TENSOR
        return total, bits if has_tensor else bits | _NON_TENSOR
    return 0, _NON_TENSOR


def _placeholder_kind(node: fx.Node, row: int, role: Any) -> int:
    if role is None:
        role = node.meta.get(ROLE_KEY, PRIMAL)  # unstamped: an input, as for any fx graph
    if role == PRIMAL:
        return _PRIMAL
    if role == TANGENT:
        return _TANGENT
    if role is _NO_ROLE:
        raise table_error("kind", row, f"no role given for placeholder {node.name} (too few roles)")
    raise table_error(
        "kind", row, f"placeholder {node.name} has role {role!r}, not 'primal' or 'tangent'"
    )


def to_table(
    gm: fx.GraphModule | fx.Graph,
    *,
    num_fwd_outputs: int,
    roles: Sequence[str] | None = None,
    compute_intensive: Iterable[Any] = (),
) -> tuple[NodeTable, list[fx.Node]]:
    """Convert a joint graph to a node table in one pass over its nodes.

    Arguments:
        gm: the joint graph (placeholders: primals and tangents; outputs: the
            forward outputs, then the gradients).
        num_fwd_outputs: how many of the outputs are forward outputs.
        roles: optional role (``"primal"`` / ``"tangent"``) of each placeholder,
            in order; otherwise ``meta["aotgrad_role"]`` (``aotgrad.roles``); a
            placeholder with neither is a primal. Names are never read.
        compute_intensive: ops (overloads or packets) to flag COMPUTE_INTENSIVE.

    Returns:
        ``(table, nodes)`` where ``nodes[i]`` is the fx node of row ``i``.
    """
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    b = _Builder(frozenset(compute_intensive))
    rows = _Rows()
    role_iter = iter(roles) if roles is not None else None
    output_args: Any = ()
    for node in graph.nodes:
        kind_of = node.op
        meta = node.meta
        if kind_of == "call_function":
            k, op_id, bits, ch = _call_row(b, node, len(rows.nodes), rows.arg_nodes.append)
        elif kind_of == "placeholder":
            role = next(role_iter, _NO_ROLE) if role_iter is not None else None
            k, op_id, bits, ch = _placeholder_row(node, len(rows.nodes), role)
        elif kind_of == "get_attr":
            k, op_id, bits, ch = _GET_ATTR, 1, 0, 0
            if "val" not in meta and isinstance(gm, fx.GraphModule):
                meta = {"val": operator.attrgetter(node.target)(gm)}
        elif kind_of == "output":
            output_args = node.args[0] if node.args else ()
            continue
        else:
            raise UnsupportedError(
                f"{kind_of} node {node.name} ({node.target}) in a joint graph: "
                "only placeholder, get_attr and call_function nodes are supported"
            )
        rows.add(node, meta, k, op_id, bits, ch)
    if role_iter is not None and next(role_iter, _NO_ROLE) is not _NO_ROLE:
        raise table_error("kind", None, "more roles were given than the graph has placeholders")
    return rows.table(b.op_names, output_args, num_fwd_outputs), rows.nodes


def _call_row(
    b: _Builder, node: fx.Node, row: int, collect: Callable[[fx.Node], Any]
) -> tuple[int, int, int, int]:
    """(kind, op id, op flags, const_hash) of call ``node`` (row ``row``); its argument
    nodes go to ``collect`` in order (mapped to row ids at the end)."""
    target = node.target
    f = b.facts.get(id(target))  # OpOverload.__hash__ is Python code: key by id
    op_id, bits, cache = f if f is not None else b.op_facts(target)
    # args then kwargs, nested containers flattened, repeats kept (C speed); ``key`` is
    # the arguments with every node replaced by None, ``types`` the type of every leaf.
    key = _map_arg(node._args, collect)
    types = _map_aggregate(node._args, type)
    kwargs = node._kwargs
    if kwargs:
        key = (key, _map_arg(kwargs, collect))
        types = (types, _map_aggregate(kwargs, type))
    # The constants of one of the target's recent calls? (types first: the recent keys
    # hold no SymFloat/SymBool, whose == would add guards)
    types_key = (types, key)
    for e in cache.recent:
        if types_key == e[0] and (e[2] is None or e[2] == _map_aggregate(key, repr)):
            ch = e[1]
            break
    else:
        ch = b.const_hash(node, row, op_id, key, types, cache)
    meta = node.meta
    if "custom" in meta:  # stream / memory pool context: part of the value
        ch = _with_context(ch, meta["custom"])
    if SAVED_AS_INPUT_KEY in meta:  # saved as a view of the input it is written into
        bits |= _STATIC_INPUT
    return _CALL, op_id, bits, ch


def _placeholder_row(node: fx.Node, row: int, role: Any) -> tuple[int, int, int, int]:
    """(kind, op id, flags, const_hash) of a placeholder: its role, and for a primal
    whether saving it is penalized (the function overwrites it, or eager's backward does
    not read it: ``MUTATED_INPUT``) and whether it is a parameter/buffer."""
    k = _placeholder_kind(node, row, role)
    bits = 0
    if k == _PRIMAL:
        meta = node.meta
        penalized = meta.get(MUTATED_KEY) or meta.get(UNREAD_KEY)
        bits = (_MUTATED_INPUT if penalized else 0) | (_STATIC_INPUT if meta.get(STATIC_KEY) else 0)
    return k, 0, bits, 0


class _Rows:
    """The columns of the table being built, one row per ``add``."""

    def __init__(self) -> None:
        self.nodes: list[fx.Node] = []
        self.kind: list[int] = []
        self.op: list[int] = []
        self.arg_ptr: list[int] = [0]
        self.arg_nodes: list[fx.Node] = []  # the arguments as nodes; mapped to ids at the end
        self.nbytes: list[int] = []
        self.const_hash: list[int] = []
        self.flags: list[int] = []
        self.region: list[int] = []
        self.last_forward = -1  # the last row the forward traced (PARTITIONER_TAG)

    def add(self, node: fx.Node, meta: Any, k: int, op_id: int, bits: int, ch: int) -> None:
        """Append ``node``'s row: the given facts plus those of its value (bytes, SymInt,
        multi-output), its checkpoint policy, region and forward tag (from ``meta``)."""
        row = len(self.nodes)
        tm = meta.get("tensor_meta")
        if type(tm) is TensorMetadata:
            numel = math.prod(tm.shape)
            if type(numel) is int:
                nb = numel * tm.dtype.itemsize
            else:
                nb, vbits = _tensor_nbytes(tm.shape, tm.dtype)
                bits |= vbits
        else:
            val = meta.get("val")
            nb, vbits = _value_facts(val)
            if node.target is _ITEM and isinstance(val, torch.SymFloat):
                vbits &= ~_NON_TENSOR  # read from a tensor's data: never recomputed, saved
            bits |= vbits
            if vbits & _SYMINT and k == _CALL and _unbacked(val):
                ch = _UNIQUE_TAG ^ row
        policy = meta.get(RECOMPUTE_KEY)
        if policy is not None:
            bits |= _CHECKPOINT_FLAGS.get(policy, 0)
        if meta.get(EAGER_SAVE_KEY):  # eager's save beside an output (``output_saves``)
            bits |= _MUST_SAVE
        if meta.get(PARTITIONER_TAG) == TRACED_BY_FORWARD:
            self.last_forward = row
        self.nodes.append(node)
        self.kind.append(k)
        self.op.append(op_id)
        self.arg_ptr.append(len(self.arg_nodes))
        self.nbytes.append(nb)
        self.const_hash.append(ch)
        self.flags.append(bits)
        # a checkpoint region's id; a selective-checkpoint mode without one writes None
        rid = meta.get(AC_GRAPH_ID_KEY)
        self.region.append(rid if type(rid) is int else -1)

    def table(self, op_names: list[str], output_args: Any, num_fwd_outputs: int) -> NodeTable:
        """The columns as a ``NodeTable``: rows after the forward's last flagged
        BACKWARD_REGION, arguments and outputs mapped to row ids."""
        nodes, flags = self.nodes, self.flags
        if self.last_forward >= 0:
            for i in range(self.last_forward + 1, len(nodes)):
                flags[i] |= _BACKWARD_REGION
        ids = dict(zip(nodes, range(len(nodes)), strict=True))
        outputs: list[int] = []
        _flatten_outputs(output_args, ids, outputs)
        return NodeTable(
            kind=np.array(self.kind, dtype=np.uint8),
            op=np.array(self.op, dtype=np.uint32),
            arg_ptr=np.array(self.arg_ptr, dtype=np.uint32),
            arg_idx=self._arg_idx(ids),
            nbytes=np.array(self.nbytes, dtype=np.uint64),
            const_hash=np.array(self.const_hash, dtype=np.uint64),
            flags=np.array(flags, dtype=np.uint32),
            region=np.array(self.region, dtype=np.int32),
            outputs=np.array(outputs, dtype=np.int32),
            op_names=op_names,
            num_fwd_outputs=num_fwd_outputs,
        )

    def _arg_idx(self, ids: dict[fx.Node, int]) -> np.ndarray:
        arg_nodes = self.arg_nodes
        try:
            return np.fromiter(map(ids.__getitem__, arg_nodes), np.uint32, len(arg_nodes))
        except KeyError as e:
            j = arg_nodes.index(e.args[0])
            reader = int(np.searchsorted(np.asarray(self.arg_ptr), j, side="right")) - 1
            raise table_error(
                "arg_idx",
                reader,
                f"{self.nodes[reader].name} reads {e.args[0]}, which is not in the graph",
            ) from None


def _flatten_outputs(value: Any, ids: dict[fx.Node, int], out: list[int]) -> None:
    if isinstance(value, (tuple, list)):
        for v in value:
            _flatten_outputs(v, ids, out)
    elif isinstance(value, fx.Node):
        if value not in ids:
            raise table_error("outputs", None, f"output {value.name} is not in the graph")
        out.append(ids[value])
    else:
        out.append(-1)
