"""Stage 3 from Python's side: joint FX graph → node table → Rust partition → split."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from .. import _rust, roles
from ..errors import PartitionError
from ..roles import is_tangent
from ..split import split_joint
from ..table import to_table
from ..vocab import IN_BACKWARD, IN_FORWARD, SAVED_REASONS, STATIC_KEY, Flag, SavedReason
from .reorder import has_checkpoint_tags, mimic_autograd_order
from .symbols import missing_bindings


@dataclass
class PartitionResult:
    """A partition decision over the rows of a node table, with the fx nodes it refers to."""

    nodes: list[fx.Node]
    placement: np.ndarray
    saved: np.ndarray
    saved_reason: np.ndarray
    recomputed: np.ndarray
    saved_bytes: int
    #: uint32[N]: ``rep[i] != i`` when CSE merged row ``i`` into the earlier row
    #: ``rep[i]`` (row ``i`` is then in neither graph; ``split_joint`` needs it)
    rep: np.ndarray

    def saved_nodes(self) -> list[fx.Node]:
        return [self.nodes[i] for i in self.saved]

    def recomputed_nodes(self) -> list[fx.Node]:
        return [self.nodes[i] for i in self.recomputed]

    def reasons(self) -> list[str]:
        return [SAVED_REASONS[r] for r in self.saved_reason]

    @classmethod
    def from_raw(cls, nodes: list[fx.Node], raw: Any) -> PartitionResult:
        """From the Rust ``Partition`` (its columns are native-order bytes)."""
        return cls(
            nodes=nodes,
            placement=_as_array(raw.placement, np.uint8),
            saved=_as_array(raw.saved, np.uint32),
            saved_reason=_as_array(raw.saved_reason, np.uint8),
            recomputed=_as_array(raw.recomputed, np.uint32),
            saved_bytes=int(raw.saved_bytes),
            rep=_as_array(raw.rep, np.uint32),
        )

    def with_symbol_bindings(self, joint: fx.GraphModule) -> PartitionResult:
        """This decision, also saving the nodes that bind the size symbols its saved
        values and the tangents mention (``symbols``); itself when none is missing."""
        saved = self.saved_nodes()
        tangents = [n for n in joint.graph.find_nodes(op="placeholder") if is_tangent(n)]
        extra = missing_bindings(joint, saved, tangents)
        if not extra:
            return self
        row_of = {n: i for i, n in enumerate(self.nodes)}
        rows = [int(self.rep[row_of[n]]) for n in extra if n in row_of]
        rows = [r for r in dict.fromkeys(rows) if self.placement[r] & IN_FORWARD]
        # Tensors first, then SymInts: the bindings lead the SymInts, as in torch.
        n_tensors = sum(isinstance(n.meta.get("val"), torch.Tensor) for n in saved)
        placement = self.placement.copy()
        placement[rows] |= IN_FORWARD | IN_BACKWARD
        reason = SavedReason.SYMBOLIC_SIZE
        return dataclasses.replace(
            self,
            placement=placement,
            saved=np.insert(self.saved, n_tensors, rows).astype(np.uint32),
            saved_reason=np.insert(self.saved_reason, n_tensors, [reason] * len(rows)).astype(
                np.uint8
            ),
        )

    def split(
        self, joint: fx.GraphModule, num_fwd_outputs: int
    ) -> tuple[fx.GraphModule, fx.GraphModule]:
        """The forward and backward GraphModules this decision describes. Where values of
        checkpointed regions are recomputed, each is recomputed just before the backward
        first reads it, as the autograd engine does (``reorder``)."""
        fw, bw = split_joint(
            joint, self.nodes, self.placement, self.saved, num_fwd_outputs, rep=self.rep
        )
        if has_checkpoint_tags(self.recomputed_nodes()):
            mimic_autograd_order(bw)
        return fw, bw


def _as_array(buf: Any, dtype: Any) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype) if not isinstance(buf, np.ndarray) else buf


def partition_joint(
    joint_module: fx.GraphModule, *, num_fwd_outputs: int, kind: str = "min_cut", **options: Any
) -> PartitionResult:
    """Run a Rust partitioner on ``joint_module`` and return its decision (no graphs built)."""
    table, nodes = joint_table(joint_module, num_fwd_outputs)
    store = _rust.GraphStore.from_table(table)
    if kind == "min_cut":
        raw = _rust.partition_min_cut(store, _rust.PartitionOptions(**options))
    elif kind == "default":
        raw = _rust.partition_default(store, _rust.PartitionOptions(**options))
    else:
        raise ValueError(f"unknown partition kind {kind!r}")
    result = PartitionResult.from_raw(nodes, raw)
    # Only a graph with symbolic values (SymInt nodes, symbolic sizes) can leave a size
    # symbol unbound: a static one skips the walk over its saved values.
    if np.any(table.flags & np.uint32(Flag.SYMINT | Flag.SYMBOLIC_SIZE)):
        result = result.with_symbol_bindings(joint_module)
    return result


def joint_table(joint_module: fx.GraphModule, num_fwd_outputs: int) -> tuple[Any, list[fx.Node]]:
    """The node table of a joint graph at a partitioner's door: a graph torch traced gets
    its placeholders' roles stamped first (``roles.adopt``)."""
    roles.adopt(joint_module)
    return to_table(joint_module, num_fwd_outputs=num_fwd_outputs)


def _partition(
    kind: str, joint_module: fx.GraphModule, num_fwd_outputs: int, options: dict[str, Any]
) -> tuple[fx.GraphModule, fx.GraphModule]:
    # Building ~10^4 fx nodes trips the cyclic GC's full collections, each a walk over
    # every live object (fake tensors included): pause it for this allocation burst.
    with gc_paused():
        result = partition_joint(
            joint_module, num_fwd_outputs=num_fwd_outputs, kind=kind, **options
        )
        return result.split(joint_module, num_fwd_outputs)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic garbage collector inside the block (restored after)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# The keyword arguments torch 2.15's own partitioners take, accepted as they are:
# - static_lifetime_input_indices / static_lifetime_input_nodes: the parameters and
#   buffers, free to save (marked on their placeholders);
# - compiler (min-cut; "inductor" by default): which compiler fuses the recomputed ops.
#   aotgrad's cost table assumes a fusing compiler whatever the name; it must be a str.
_TORCH_KWARGS = frozenset(
    {"static_lifetime_input_indices", "static_lifetime_input_nodes", "compiler"}
)


def mark_static_inputs(joint_module: fx.GraphModule, indices: Any, nodes: Any = None) -> None:
    """Flag the primals at ``indices``, and the placeholders ``nodes`` (parameters and
    buffers), ``STATIC_INPUT``. Primals are a joint graph's leading placeholders, so
    primal ``i`` is placeholder ``i``."""
    placeholders = joint_module.graph.find_nodes(op="placeholder")
    for i in indices or ():
        placeholders[i].meta[STATIC_KEY] = True
    for node in nodes or ():
        node.meta[STATIC_KEY] = True


def _torch_options(joint_module: fx.GraphModule, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Apply torch's keyword arguments; return aotgrad's own options."""
    compiler = kwargs.get("compiler", "inductor")
    if not isinstance(compiler, str):
        raise PartitionError(f"partition option compiler must be a str, got {compiler!r}")
    mark_static_inputs(
        joint_module,
        kwargs.get("static_lifetime_input_indices"),
        kwargs.get("static_lifetime_input_nodes"),
    )
    return {k: v for k, v in kwargs.items() if k not in _TORCH_KWARGS}


def default_partition(
    joint_module: fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int, **kwargs: Any
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Save every forward value the backward reads; recompute nothing but SymFloats
    (free from the sizes they are made of; a saved one keeps Inductor from caching
    the backward)."""
    return _partition(
        "default", joint_module, num_fwd_outputs, _torch_options(joint_module, kwargs)
    )


def min_cut_rematerialization_partition(
    joint_module: fx.GraphModule,
    _joint_inputs: Any,
    compiler: str = "inductor",
    *,
    num_fwd_outputs: int,
    **kwargs: Any,
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Choose saved values by a max-flow min-cut over byte sizes, recomputing cheap ops
    in the backward where that saves memory (the policy torch.compile users rely on).
    Parameters (``static_lifetime_input_indices``, or primals traced with
    ``meta["aotgrad_static_input"]``) are free to save. ``compiler``: see
    ``_torch_options``."""
    options = _torch_options(joint_module, {**kwargs, "compiler": compiler})
    return _partition("min_cut", joint_module, num_fwd_outputs, options)
