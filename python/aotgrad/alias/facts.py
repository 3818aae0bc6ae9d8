"""Raw alias and mutation facts about a traced function's inputs and outputs.

Collected once, by the tracer's metadata pass, from the functional tensors the
function ran on: which inputs it wrote (data, metadata, under no_grad), how
often (their version counters), which inputs share storage, and per output
whether it is an input, a view of one, or a view of an intermediate. The
facts are columns of the alias table (``docs/node_table.md``); the
classification of them runs in Rust (``aotgrad.alias.classify``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..autograd_walks import accumulated_variable, walk_finds
from ..inference_views import through_dtype_view
from ..vocab import (  # the bits: Rust's (alias/facts.rs), read by aotgrad.vocab
    IN_GRAD_MODE,
    IN_IS_LEAF,
    IN_KEEP_IN_GRAPH,
    IN_MUTATES_DATA,
    IN_MUTATES_METADATA,
    IN_MUTATIONS_HIDDEN,
    IN_NEW_VALUE_REQUIRES_GRAD,
    IN_REQUIRES_GRAD,
    OUT_ALIASES_INPUT,
    OUT_BASE_IS_OUTPUT,
    OUT_BASE_REQUIRES_GRAD,
    OUT_IS_INPUT,
    OUT_IS_TENSOR,
    OUT_REINTERPRETED,
    OUT_REQUIRES_GRAD,
    OUT_STORAGE_CHANGED,
    OUT_VIEW_OF_INTERMEDIATE,
)
from .reinterpret import by_view_dtype, reinterpreted_spec
from .storage import byte_range, overlap_groups
from .views import ViewSpec, _plain, eager_layout


@dataclass
class AliasFacts:
    """The alias table's columns, plus the view metadata the runtime replays."""

    input_flags: list[int] = field(default_factory=list)
    input_storage: list[int] = field(default_factory=list)
    #: In-place ops per input (eager bumps its version counter this often).
    input_version_delta: list[int] = field(default_factory=list)
    #: The new sizes/strides/offset of inputs whose metadata changed.
    input_view: dict[int, ViewSpec] = field(default_factory=dict)
    output_flags: list[int] = field(default_factory=list)
    output_input: list[int] = field(default_factory=list)
    output_base: list[int] = field(default_factory=list)
    output_base_output: list[int] = field(default_factory=list)
    #: Per aliasing output, its view of the input or intermediate it aliases.
    output_view: dict[int, ViewSpec] = field(default_factory=dict)
    #: Per output that is one piece of a multi-output view (``a, b = t.chunk(2)``): its
    #: node's identity in the trace and its output number. Pieces of one node returned
    #: together are rebuilt by one node (``OutputAlias.piece``), as eager's share one.
    output_piece: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: Inputs written under no_grad only whose metadata the function changed with grad
    #: (``x[:, 1:].add_(1)`` under no_grad, then ``x.t_()``): their node is a relayout
    #: of the one they came with, which their hooks sit on (soak 227717).
    input_data_unrecorded: set[int] = field(default_factory=set)
    #: Per aliasing output made by a multi-output view op (``unbind``) or under
    #: ``no_grad``: autograd's creation meta, which decides whether eager lets it be
    #: written in place; the rebuilt view gets the same.
    output_creation_meta: dict[int, Any] = field(default_factory=dict)
    #: Of those made under ``no_grad``, the ones with a ``grad_fn`` all the same (a view
    #: taken with grad on of a view made under ``no_grad``: the meta is inherited).
    output_tracked_view: set[int] = field(default_factory=set)
    #: Of those, the ones whose history stops short of any input or leaf (a piece of
    #: ``t.split(2)`` taken with grad of ``t`` made under ``no_grad``: autograd takes
    #: ``t`` for a leaf and its node passes the gradient nowhere).
    output_stops_short: set[int] = field(default_factory=set)
    #: Outputs with a ``grad_fn`` (autograd history) as the function returned them.
    output_has_grad_fn: set[int] = field(default_factory=set)
    #: Outputs made inside a ``torch.inference_mode()`` block: inference tensors in eager.
    output_inference: set[int] = field(default_factory=set)
    #: Per output that is an earlier output object (``return t, t``), that output.
    output_same_as: dict[int, int] = field(default_factory=dict)
    #: Views of an intermediate that is a leaf requiring grad (made inside the function).
    output_base_leaf: set[int] = field(default_factory=set)
    #: Views of an intermediate that left autograd after they were made (``v = t[0];
    #: t.detach_()``): eager's keep their history, which their base no longer has.
    output_history_past_base: set[int] = field(default_factory=set)
    #: Outputs a custom ``autograd.Function`` made.
    output_custom: set[int] = field(default_factory=set)
    #: Of those, the ones that are no view (``DirtyMul.apply(t)`` of an intermediate
    #: ``t``): the graph may return a view there (``t.t_()`` before it), eager does not.
    output_custom_fresh: set[int] = field(default_factory=set)
    #: Per custom Function output that views an input's bytes (the Function returned its
    #: input, a view of it, or wrote it with ``mark_dirty``): the input, and the view.
    custom_view_of_input: dict[int, tuple[int, ViewSpec]] = field(default_factory=dict)
    #: Outputs that are stale views made under no_grad (reading their ``grad_fn`` raises)
    #: of another output: that output and the view.
    stale_view_of_output: dict[int, tuple[int, ViewSpec]] = field(default_factory=dict)
    #: Outputs that are views made under no_grad (whatever their verdict).
    output_no_grad_view: set[int] = field(default_factory=set)
    #: Outputs that are detached aliases of an input (``t = x.detach()``) given a history
    #: by a write autograd tracked (``t.mul_(w)``, ``w`` requiring grad): eager's has a
    #: ``grad_fn`` and no ``._base``. Plain outputs of the graph, in ``custom_view_of_input``
    #: too: the runtime returns a detached alias of the real input, its gradient routed
    #: into the graph's output (``alias.views.routed_detached``).
    #: 1 a detached alias, 2 a view of one (as ``output_detached``).
    written_detached: dict[int, int] = field(default_factory=dict)
    #: Of those views of one (2), the ones whose ``._base`` is another output, a written
    #: detached alias (1): ``t = x.detach(); t.add_(w); return t[:, 1], t``.
    written_detached_base: dict[int, int] = field(default_factory=dict)
    #: Custom Function outputs (``custom_view_of_input``) made of another such output
    #: through views only (``t = Half.apply(x); return t.squeeze(), t``): that output.
    custom_view_base: dict[int, int] = field(default_factory=dict)
    #: Stale views (``custom_view_of_input``) whose ``._base`` is a detached alias of the
    #: input, neither the input nor an output (``t = x.detach().requires_grad_()``,
    #: ``v = t.t()`` under no_grad, ``x.unsqueeze_(0)``): made of such an alias.
    stale_view_of_detached: set[int] = field(default_factory=set)
    #: Per output that is a view: the output its ``._base`` is, or -1 (an intermediate,
    #: an input): ``t1.detach(), Half.apply(t1)``, the second's base is no output.
    output_view_base: dict[int, int] = field(default_factory=dict)
    #: Per output that is fresh or a view of an intermediate, written in place inside the
    #: function (through it or another view of its base): its version counter.
    output_version: dict[int, int] = field(default_factory=dict)
    #: Per output aliasing an input that eager does not return as a view of that input:
    #: 1 a detached alias (``x.detach()``: no ``._base``), 2 a view of one (``x.detach().t()``).
    output_detached: dict[int, int] = field(default_factory=dict)
    #: Of the views of detached aliases, those whose detached alias is an earlier output.
    output_detached_base: dict[int, int] = field(default_factory=dict)
    #: Views whose history ends at another output that is a leaf view
    #: (``t = x[1:]; t.requires_grad_(); return t, t.t()``): that output.
    output_leaf_base: dict[int, int] = field(default_factory=dict)
    #: Inputs whose storage has no bytes when the function is called, or that the function
    #: resizes (``inductor.resize_storage_bytes_``, as FSDP2 does): the bytes after the call.
    input_storage_resize: dict[int, int] = field(default_factory=dict)
    #: Inputs given another storage (``x.set_(y)``; ``x.data = y`` is traced as one):
    #: counted as written (their new value is a forward output); the runtime ``set_``s
    #: the caller's tensor to it instead of copying into it.
    input_storage_set: set[int] = field(default_factory=set)

    def columns(self) -> tuple[list[int], ...]:
        return (
            self.input_flags,
            self.input_storage,
            self.output_flags,
            self.output_input,
            self.output_base,
            self.output_base_output,
        )


def versions(wrapped: Sequence[Any]) -> list[int]:
    return [w._version if isinstance(w, torch.Tensor) else 0 for w in wrapped]


def snapshot(wrapped: Sequence[Any]) -> list[tuple[int, Any]]:
    """Per input, its version counter and autograd node before the function runs: a
    write that leaves the node as it was was hidden from autograd (under ``no_grad``, or
    through a ``detach()``ed alias)."""
    return [
        (w._version, grad_fn_of(w)) if isinstance(w, torch.Tensor) else (0, None) for w in wrapped
    ]


def _storage_set(w: Any) -> bool:
    """Whether the input ``w`` (a functional wrapper) was given another storage (``set_``)."""
    return isinstance(w, FunctionalTensor) and bool(
        torch._functionalize_was_storage_changed(w.elem)  # type: ignore[attr-defined]
    )


def _unwrap(t: FunctionalTensor) -> Any:
    torch._sync(t)
    return t.elem


def written_with_grad(flags: int) -> bool:
    """An input written with a value that requires grad (autograd records the write)."""
    return bool(flags & IN_MUTATES_DATA and flags & IN_NEW_VALUE_REQUIRES_GRAD) and not (
        flags & IN_MUTATIONS_HIDDEN
    )


#: Nodes of in-place metadata changes (``t_``, ``transpose_``, ``squeeze_``...).
_RELAYOUTS = ("TBackward", "TransposeBackward", "PermuteBackward", "SqueezeBackward")
_RELAYOUTS += ("UnsqueezeBackward", "AsStridedBackward")


def writes_unrecorded(w: Any) -> bool:
    """Whether every write to the traced input ``w`` was made under no_grad or inference
    mode (autograd recorded none)."""
    return isinstance(w, FunctionalTensor) and bool(
        torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(_unwrap(w))
    )


def _data_unrecorded(w: Any, grad_fn_before: Any) -> bool:
    """Whether ``w``'s data writes were all made under no_grad and its node is its first
    behind metadata changes' nodes only (autograd recorded the relayouts, not the writes;
    a custom Function's ``mark_dirty`` leaves its own node in the chain)."""
    if not isinstance(w, FunctionalTensor) or grad_fn_before is None:
        return False
    if not writes_unrecorded(w):
        return False
    node = grad_fn_of(w)
    for _ in range(64):
        if node is grad_fn_before:
            return True
        if node is None or not type(node).__name__.startswith(_RELAYOUTS):
            return False
        if not node.next_functions:
            return False
        node = node.next_functions[0][0]
    return False


def _input_flags(
    w: Any, original: Any, grad_fn_before: Any, grad_mode: bool, keep_in_graph: bool
) -> int:
    flags = IN_GRAD_MODE if grad_mode else 0
    if not isinstance(original, torch.Tensor):
        return flags
    if original.requires_grad:
        flags |= IN_REQUIRES_GRAD
    if original.is_leaf:
        flags |= IN_IS_LEAF
    if not isinstance(w, FunctionalTensor):
        return flags
    elem = _unwrap(w)
    data = torch._functionalize_has_data_mutation(elem) or _storage_set(w)  # type: ignore[attr-defined]
    meta = torch._functionalize_has_metadata_mutation(elem)  # type: ignore[attr-defined]
    if data:
        flags |= IN_MUTATES_DATA
        if keep_in_graph:
            flags |= IN_KEEP_IN_GRAPH
        if w.requires_grad:
            flags |= IN_NEW_VALUE_REQUIRES_GRAD
    if meta:
        flags |= IN_MUTATES_METADATA
    # Hidden from autograd: the input's autograd node is what it was (written under
    # no_grad, or through a detach()ed alias). Not "every write under no_grad": a custom
    # Function's forward writes under no_grad and mark_dirty() makes autograd see it.
    if (data or meta) and (
        grad_fn_of(w) is grad_fn_before
        # detach_() / requires_grad_(False): the input left autograd inside the function
        or (original.requires_grad and not w.requires_grad)
        # ... and came back a leaf (requires_grad_()): a write autograd would record on
        # it was refused as it ran (EagerCalls), so the one here went through a detach()
        or (original.is_leaf and original.requires_grad and w.requires_grad and w.is_leaf)
        or (
            data
            and grad_fn_of(w) is None  # detach_() then written under no_grad
            and torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(elem)
        )
    ):
        flags |= IN_MUTATIONS_HIDDEN
    return flags


def collect(
    wrapped: Sequence[Any],
    originals: Sequence[Any],
    outputs: Sequence[Any],
    before: Sequence[tuple[int, Any]],
    *,
    grad_mode: bool,
    keep_in_graph: bool,
    input_aliases: dict[int, tuple[Any, Any]] | None = None,
    inference: bool = False,
) -> AliasFacts:
    """The facts of one run of a function on functional wrappers ``wrapped`` of the fake
    inputs ``originals``, which returned ``outputs``; ``before`` is the wrappers'
    ``snapshot`` from before the run; ``inference``: traced for a call under inference
    mode. Call inside the tracing modes."""
    facts = AliasFacts()
    input_of_storage = _collect_inputs(facts, wrapped, originals, before, grad_mode, keep_in_graph)
    input_index = {id(w): k for k, w in enumerate(wrapped) if isinstance(w, torch.Tensor)}
    output_index: dict[int, int] = {}
    for j, o in enumerate(outputs):
        if isinstance(o, torch.Tensor):
            output_index.setdefault(id(o), j)
    base_groups: dict[int, int] = {}
    # the inputs' own grad_fns: a custom Function that marked an input dirty is one
    dirty = {id(grad_fn_of(w)) for w in wrapped if isinstance(w, torch.Tensor)}
    tensors = [w for w in wrapped if isinstance(w, torch.Tensor)]
    roots = {id(w) for w in tensors} | {id(w._base) for w in tensors if w._base is not None}
    aliases = {k: of for k, (_, of) in (input_aliases or {}).items()}
    roots |= set(aliases)
    for j, o in enumerate(outputs):
        flags, inp, base, base_out = _output_row(
            o, input_index, input_of_storage, originals, output_index, base_groups, dirty, roots
        )
        flags = _note_reinterpreted(facts, j, o, flags, (inp, originals, wrapped), inference)
        reinterpreted = j in facts.output_view  # (its view: _note_reinterpreted)
        facts.output_flags.append(flags)
        facts.output_input.append(inp)
        facts.output_base.append(base)
        facts.output_base_output.append(base_out)
        if isinstance(o, torch.Tensor):
            _routed_output_facts(
                facts, j, o, input_of_storage, input_index, originals, dirty, roots
            )
        _output_view_facts(facts, j, o, flags, originals[inp] if inp >= 0 else None, reinterpreted)
        if isinstance(o, torch.Tensor):
            _output_object_facts(facts, j, o, flags, inp, wrapped, output_index, aliases)
            _stale_view_of_output(facts, j, o, output_index)
            _stale_view_of_detached(facts, j, o, roots, output_index)
    _view_base_facts(facts, outputs, output_index)
    return facts


def _output_view_facts(
    facts: AliasFacts, j: int, o: Any, flags: int, base: Any, reinterpreted: bool
) -> None:
    """Output ``j``'s view of the input ``base`` it aliases, or of its intermediate base
    (``output_view``; a ``reinterpreted`` one's is in already), and what eager's base is."""
    viewed = flags & OUT_ALIASES_INPUT and not flags & OUT_IS_INPUT
    if viewed and not reinterpreted:
        shown, through = eager_layout(o, base)
        facts.output_view[j] = ViewSpec.of(shown, base, check_base=False, through=through)
    elif flags & OUT_VIEW_OF_INTERMEDIATE:
        base = o._base
        if not reinterpreted:
            shown, through = eager_layout(o, base)
            facts.output_view[j] = ViewSpec.of(shown, base, check_base=True, through=through)
        if base.requires_grad and grad_fn_of(base) is None:
            facts.output_base_leaf.add(j)  # ``t = y.detach().requires_grad_(); t[1:]``
        elif not base.requires_grad and grad_fn_of(o) not in (None, STALE_VIEW):
            facts.output_history_past_base.add(j)


def _view_base_facts(
    facts: AliasFacts, outputs: Sequence[Any], output_index: dict[int, int]
) -> None:
    """Which output each view's ``._base`` is (``output_view_base``,
    ``written_detached_base``)."""
    for j, o in enumerate(outputs):
        if isinstance(o, torch.Tensor) and o._is_view():
            facts.output_view_base[j] = output_index.get(id(o._base), -1)
    for j, kind in facts.written_detached.items():
        k = output_index.get(id(outputs[j]._base), -1) if kind == 2 else -1
        if k >= 0 and facts.written_detached.get(k) == 1:
            facts.written_detached_base[j] = k
    routed = facts.custom_view_of_input
    nodes = {
        (id(grad_fn_of(outputs[k])), outputs[k].output_nr): k
        for k in routed
        if k not in facts.written_detached
    }
    for j in routed:
        k = _viewed_through(outputs[j], nodes) if j not in facts.written_detached else None
        if k is not None and k != j and routed[k][0] == routed[j][0]:
            facts.custom_view_base[j] = k


def _viewed_through(o: Any, nodes: dict[tuple[int, int], int]) -> int | None:
    """The output (``nodes``: (id of its node, its output number) → output) ``o`` views
    through view nodes only; None: none. (A multi-output Function's outputs share one
    node: the edge's output number tells them apart.)"""
    fn = grad_fn_of(o)
    for _ in range(16):
        if fn is None or fn is STALE_VIEW or type(fn).__name__ not in _VIEW_BACKWARDS:
            return None
        if not fn.next_functions:
            return None
        fn, nr = fn.next_functions[0]
        k = nodes.get((id(fn), nr))
        if k is not None:
            return k
    return None


_NO_GRAD_MODE = torch._C._autograd.CreationMeta.NO_GRAD_MODE
_MULTI_OUTPUT = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE


def _stale_view_of_output(
    facts: AliasFacts, j: int, o: torch.Tensor, output_index: dict[int, int]
) -> None:
    """Output ``j``, a view made under no_grad (``output_no_grad_view``) or by an op with
    several view outputs (``split``), a stale one of another output
    (``stale_view_of_output``)."""
    base = o._base if o._is_view() else None
    meta = torch._C._autograd._get_creation_meta(o) if base is not None else None
    if meta not in (_NO_GRAD_MODE, _MULTI_OUTPUT):
        return
    if meta == _NO_GRAD_MODE:
        facts.output_no_grad_view.add(j)
    k = output_index.get(id(base), -1)
    if k >= 0 and k != j and grad_fn_of(o) is STALE_VIEW and not _reinterprets(o, base):
        shown, through = eager_layout(o, base)
        facts.stale_view_of_output[j] = (
            k,
            ViewSpec.of(shown, base, check_base=True, through=through),
        )


def _stale_view_of_detached(
    facts: AliasFacts, j: int, o: torch.Tensor, roots: set[int], output_index: dict[int, int]
) -> None:
    """Output ``j``, a stale view of an input's bytes (``custom_view_of_input``) whose
    ``._base`` is neither an input (nor its base: ``roots``) nor an output: a detached
    alias of the input (``stale_view_of_detached``)."""
    if j not in facts.custom_view_of_input or grad_fn_of(o) is not STALE_VIEW:
        return
    base = o._base if o._is_view() else None
    if base is not None and id(base) not in roots and id(base) not in output_index:
        facts.stale_view_of_detached.add(j)


def _note_leaf_base(facts: AliasFacts, j: int, grad_fn: Any, output_index: dict[int, int]) -> None:
    """Output ``j`` (a view of an input) whose history accumulates into another output, a
    leaf view of the input (``AliasFacts.output_leaf_base``)."""
    found: list[int] = []

    def output_leaf(node: Any) -> bool:
        k = output_index.get(id(accumulated_variable(node)), -1)
        if k >= 0 and k != j:
            found.append(k)
        return bool(found)

    if walk_finds(grad_fn, output_leaf):
        facts.output_leaf_base[j] = found[0]


def _routed_output_facts(
    facts: AliasFacts,
    j: int,
    o: torch.Tensor,
    input_of_storage: dict[Any, list[int]],
    input_index: dict[int, int],
    originals: Sequence[Any],
    dirty: set[int],
    roots: set[int],
) -> None:
    """Output ``j``'s facts as a plain graph output that the runtime returns as an alias
    of an input's bytes, its gradient routed into the graph's output: a detached alias
    written with a history, a custom Function's output."""
    candidates = input_of_storage.get(StorageWeakRef(o.untyped_storage()))
    if candidates and id(o) not in input_index and _written_detached(o, roots):
        facts.written_detached[j] = 2 if o._is_view() else 1
        k = _containing_input(o, candidates, originals)
        facts.custom_view_of_input[j] = (k, _routed_view(facts, o, originals[k], k))
    elif made_by_custom_function(o, through_views=candidates is not None, dirty=dirty):
        facts.output_custom.add(j)
        if not o._is_view() and not candidates:
            facts.output_custom_fresh.add(j)
        if candidates and id(o) not in input_index:
            k = _containing_input(o, candidates, originals)
            facts.custom_view_of_input[j] = (k, _routed_view(facts, o, originals[k], k))


def _routed_view(facts: AliasFacts, o: Any, base: Any, k: int) -> ViewSpec:
    """The view of the input ``k`` (``base``) a routed output ``o`` is, placed where the
    input's traced value starts, as an aliasing output's view is; one that reads its bytes
    otherwise (``ViewOf.apply(x.imag)``) with its ``Reinterpret``."""
    if _reinterprets(o, base):
        spec = reinterpreted_spec(o, base, check_base=False)
        if spec is not None:
            return spec
    shown, through = (o, []) if k in facts.input_view else eager_layout(o, base)
    return ViewSpec.of(shown, base, check_base=False, through=through)


def _collect_inputs(
    facts: AliasFacts,
    wrapped: Sequence[Any],
    originals: Sequence[Any],
    before: Sequence[tuple[int, Any]],
    grad_mode: bool,
    keep_in_graph: bool,
) -> dict[Any, list[int]]:
    """The inputs' facts (flags, storages, version deltas, new metadata) into ``facts``;
    returns the inputs (by position) of each storage the wrappers have."""
    storage_ids: dict[Any, int] = {}
    input_of_storage: dict[Any, list[int]] = {}
    storage_of_input: list[int] = []
    for k, (w, a) in enumerate(zip(wrapped, originals)):
        flags = _input_flags(w, a, before[k][1], grad_mode, keep_in_graph)
        facts.input_flags.append(flags)
        if isinstance(a, torch.Tensor):
            ref = StorageWeakRef(a.untyped_storage())
            storage_of_input.append(storage_ids.setdefault(ref, len(storage_ids)))
            input_of_storage.setdefault(StorageWeakRef(w.untyped_storage()), []).append(k)
        else:
            storage_of_input.append(-1 - k)
        if _storage_set(w):
            facts.input_storage_set.add(k)
        facts.input_version_delta.append(
            (w._version if isinstance(w, torch.Tensor) else 0) - before[k][0]
        )
        if flags & IN_MUTATES_METADATA:
            facts.input_view[k] = ViewSpec.of(w, a, check_base=False)
            unrecorded = written_with_grad(flags) and not a._is_view()
            if unrecorded and _data_unrecorded(w, before[k][1]):
                facts.input_data_unrecorded.add(k)
    # Inputs count as aliased (one storage id) only where their bytes overlap.
    facts.input_storage = overlap_groups(originals, storage_of_input)
    return input_of_storage


def _output_object_facts(
    facts: AliasFacts,
    j: int,
    o: torch.Tensor,
    flags: int,
    inp: int,
    wrapped: Sequence[Any],
    output_index: dict[int, int],
    aliases: dict[int, Any],
) -> None:
    """Output ``j``'s facts as an object: the same as an earlier output, inference tensor,
    version count, detached alias of an input, autograd's creation meta. ``aliases``:
    detached aliases of inputs' stand-ins that eager's views do not go through
    (``EagerCalls.gradless_aliases``), each to its stand-in."""
    first = output_index.get(id(o), j)
    if first != j:
        facts.output_same_as[j] = first
    if o.is_inference():
        facts.output_inference.add(j)
    elif not flags & OUT_ALIASES_INPUT and o._version:
        facts.output_version[j] = o._version
    if flags & OUT_ALIASES_INPUT and not flags & OUT_IS_INPUT:
        base = o._base if o._base is None else aliases.get(id(o._base), o._base)
        if base is None:
            facts.output_detached[j] = 1
        elif base is not wrapped[inp] and base is not wrapped[inp]._base:
            facts.output_detached[j] = 2
            k = output_index.get(id(base), -1)
            if k >= 0 and k != j:  # a view of another output (``t = x.detach(); t.t()``)
                facts.output_detached_base[j] = k
    grad_fn = grad_fn_of(o)
    if grad_fn is not None and grad_fn is not STALE_VIEW:
        facts.output_has_grad_fn.add(j)
        if flags & OUT_ALIASES_INPUT and j not in facts.output_detached:
            _note_leaf_base(facts, j, grad_fn, output_index)
    if j in facts.output_view and o._is_view():
        meta = torch._C._autograd._get_creation_meta(o)
        if meta != torch._C._autograd.CreationMeta.DEFAULT:
            facts.output_creation_meta[j] = meta
            if grad_fn_of(o) is not None:
                facts.output_tracked_view.add(j)
                if _stops_short(grad_fn):
                    facts.output_stops_short.add(j)
            if meta == _MULTI_OUTPUT and grad_fn is not None and grad_fn is not STALE_VIEW:
                facts.output_piece[j] = (id(grad_fn), o.output_nr)


def _stops_short(grad_fn: Any) -> bool:
    """Whether every path from ``grad_fn`` ends without reaching a node past the view
    chain (each ``next_functions`` entry None: the chain starts at a view autograd takes
    for a leaf, made under ``no_grad``)."""
    stack, seen = [grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node is STALE_VIEW or id(node) in seen:
            continue
        seen.add(id(node))
        nexts = [n for n, _ in node.next_functions if n is not None]
        if not node.next_functions or (nexts and not all(_is_view_node(n) for n in nexts)):
            return False
        stack += nexts
    return True


def _is_view_node(node: Any) -> bool:
    return type(node).__name__.endswith(_VIEW_NODES)


_VIEW_NODES = (
    "SplitBackward0",
    "SplitWithSizesBackward0",
    "UnbindBackward0",
    "DiagonalBackward0",
    "SliceBackward0",
    "SelectBackward0",
    "TBackward0",
    "TransposeBackward0",
    "ViewBackward0",
    "AsStridedBackward0",
    "PermuteBackward0",
    "UnsqueezeBackward0",
    "SqueezeBackward0",
    "ExpandBackward0",
    "AliasBackward0",
    "UnfoldBackward0",
)


def _note_reinterpreted(
    facts: AliasFacts, j: int, o: Any, flags: int, inputs: tuple, inference: bool
) -> int:
    """Output ``j``'s flags, less ``OUT_REINTERPRETED`` where it is a view (or detached
    alias) of an input or intermediate that reads its bytes otherwise (another dtype, a
    conj or neg bit: ``view_as_real(t)``, ``t.conj()``, ``x.imag.detach()``) which the
    runtime rebuilds of the real base (``output_view``, with a ``Reinterpret``): eager's
    shares the base's bytes and counter, and is its view. Of an input the function
    relaid too (``x.unsqueeze_(0)``, written after: soak 72049), whose views the runtime
    makes of it as the call found it (the spec's place is in its storage). ``inputs``:
    the input ``o`` aliases, the fake inputs and their wrappers; ``inference``: traced for a call under inference
    mode, where one taken of an input through ``view(dtype)`` is eager's inference tensor
    (``_inference_dtype_view``)."""
    inp, originals, wrapped = inputs
    dtype_view = _inference_dtype_view(o, flags, inp, originals, inference)
    if not (flags & OUT_REINTERPRETED or dtype_view):
        return flags
    if flags & OUT_ALIASES_INPUT:
        base, now = originals[inp], wrapped[inp]
        if not isinstance(now, torch.Tensor):
            return flags
    elif flags & OUT_VIEW_OF_INTERMEDIATE:
        base = o._base
    else:
        return flags
    shown, through = eager_layout(o, base)
    shown = shown if flags & OUT_ALIASES_INPUT else None  # (an intermediate's: as traced)
    if shown is o and facts.input_flags[inp] & IN_MUTATES_DATA:
        return flags  # (not replayed, symbolic: its layout is the written value's)
    spec = reinterpreted_spec(
        o,
        base,
        check_base=not flags & OUT_ALIASES_INPUT,
        shown=shown,
        dtype_view=dtype_view or by_view_dtype(o),
        through=through,
    )
    if spec is None and not dtype_view:
        spec = reinterpreted_spec(o, base, check_base=not flags & OUT_ALIASES_INPUT, shown=shown)
    if spec is None:
        return flags
    facts.output_view[j] = spec
    return flags & ~OUT_REINTERPRETED


def _inference_dtype_view(o: Any, flags: int, inp: int, originals: Any, inference: bool) -> bool:
    """Output ``o`` (traced for a call under inference mode) is taken of the input it
    aliases through ``view(dtype)``, no bits on either: eager's is an inference tensor
    over the input's bytes, no view, rebuilt by ``view(dtype)`` under the caller's mode."""
    if not inference or not flags & OUT_ALIASES_INPUT or flags & OUT_IS_INPUT:
        return False
    base = originals[inp]
    bits = (o.is_conj(), o.is_neg(), base.is_conj(), base.is_neg())
    return not any(bits) and through_dtype_view(o)


def _layout(t: Any) -> tuple[Any, ...]:
    """``t``'s sizes, strides and offset, symbolic ones as expressions (compared without
    guarding)."""
    return tuple(_plain(v) for v in (*t.shape, *t.stride(), t.storage_offset()))


def _reinterprets(view: Any, base: Any) -> bool:
    """Another dtype or conj/neg bit than its base: not an ``as_strided`` of it."""
    return (
        view.dtype != base.dtype
        or view.is_conj() != base.is_conj()
        or view.is_neg() != base.is_neg()
    )


#: What ``grad_fn_of`` returns for a view autograd refuses to give a node to.
STALE_VIEW = object()


def grad_fn_of(t: Any) -> Any:
    """``t.grad_fn``; ``STALE_VIEW`` where reading it raises, as eager's does when it is
    read, for a view made by a custom Function (or in no_grad mode) whose base was
    written afterwards: the program may still run and return it, as eager's does."""
    try:
        return t.grad_fn
    except (RuntimeError, ValueError) as e:
        if isinstance(e, RuntimeError) and "modified inplace" in str(e):
            return STALE_VIEW
        # traced, autograd rebuilds the node of a view whose base changed by replaying the
        # view on the base's new metadata, which may not hold (``x.view(-1)`` after
        # ``x.t_()``, ``x.t()`` before ``x.unsqueeze_(0)``); eager's node is an
        # ``as_strided`` of the base
        with torch.enable_grad():
            return t._base.as_strided(t.size(), t.stride(), t.storage_offset()).grad_fn


def _written_detached(o: Any, roots: set[int]) -> bool:
    """An alias of an input's bytes that is a ``detach()`` result (no view), or a view of
    one, which has a history: a write autograd tracked gave it one
    (``facts.written_detached``). ``roots``: ids of the inputs' wrappers and their bases."""
    if not o._is_view():
        return grad_fn_of(o) not in (None, STALE_VIEW)
    return id(o._base) not in roots and grad_fn_of(o._base) not in (None, STALE_VIEW)


def made_by_custom_function(
    o: Any, *, through_views: bool = False, dirty: set[int] | frozenset[int] = frozenset()
) -> bool:
    """A custom ``autograd.Function``'s output (Python or C++): even when it aliases an
    input or an intermediate, its gradient must pass through the Function's own backward,
    so it is a plain output of the graph (with a tangent), not a view to rebuild.
    ``dirty``: ids of the inputs' own grad_fns; a view whose walk ends at one views an
    input the Function wrote (``mark_dirty``): the input carries the Function's history
    once written back, so the view is an ordinary view of it (eager's, written in place
    freely)."""
    grad_fn = grad_fn_of(o)
    if grad_fn is STALE_VIEW:
        return True
    start = grad_fn
    # a view of one (``Half.apply(x).expand(...)``): its gradient passes through the
    # Function's backward too. Where that Function made the view's base, the view is
    # rebuilt from the base, which keeps that path (``Square.apply(x).view_as(...)``);
    # where it returned a view of its own input (``Half.apply(t)[0]``, whose ``._base`` is
    # ``t``), rebuilding it from ``t`` would bypass it: a plain output of the graph.
    # ``through_views``: an output that views an input (always walked).
    base = o._base if o._is_view() else None
    base_fn = grad_fn_of(base) if base is not None else None
    past_base = False  # (the base: the Function's output re-laid in place, soak 210961)
    for _ in range(16 if through_views or base is not None else 1):
        if grad_fn is None:
            return False
        if isinstance(grad_fn, torch.autograd.function.BackwardCFunction) or (
            type(grad_fn).__name__ == "CppFunction"
        ):
            if grad_fn is start:
                return True
            return id(grad_fn) not in dirty and (
                through_views or not (grad_fn is base_fn or past_base)
            )
        past_base = past_base or (grad_fn is base_fn and grad_fn is not start)
        if type(grad_fn).__name__ not in _VIEW_BACKWARDS or not o._is_view():
            return False
        grad_fn = grad_fn.next_functions[0][0] if grad_fn.next_functions else None
    return False


#: Autograd nodes of view ops, walked from a view back to what it views.
_VIEW_BACKWARDS = frozenset(
    f"{name}Backward0"
    for name in (
        "View",
        "Expand",
        "AsStrided",
        "Slice",
        "Select",
        "Transpose",
        "Permute",
        "T",
        "Unsqueeze",
        "Squeeze",
        "Unflatten",
        "Diagonal",
        "Alias",
        "Unfold",
        "ViewAs",
        "Narrow",
        "Reshape",
        "Unbind",
        "Split",
        "SplitWithSizes",
        "Chunk",
    )
) | {"SqueezeBackward1", "SqueezeBackward2", "TransposeBackward1", "SelectBackward1"}


def _containing_input(o: Any, candidates: list[int], originals: Sequence[Any]) -> int:
    """Of the inputs sharing ``o``'s storage, the one whose bytes contain ``o``'s (the view
    is rebuilt from it, and autograd routes its gradient there)."""
    r = byte_range(o)
    for k in candidates:
        rk = byte_range(originals[k])
        if r is None or (rk is not None and rk[0] <= r[0] and r[1] <= rk[1]):
            return k
    return candidates[0]


def _output_row(
    o: Any,
    input_index: dict[int, int],
    input_of_storage: dict[Any, list[int]],
    originals: Sequence[Any],
    output_index: dict[int, int],
    base_groups: dict[int, int],
    dirty: set[int],
    roots: set[int],
) -> tuple[int, int, int, int]:
    if not isinstance(o, torch.Tensor):
        return 0, -1, -1, -1
    flags = OUT_IS_TENSOR | (OUT_REQUIRES_GRAD if o.requires_grad else 0)
    if isinstance(o, FunctionalTensor) and torch._functionalize_was_storage_changed(o.elem):  # type: ignore[attr-defined]
        flags |= OUT_STORAGE_CHANGED
    same = input_index.get(id(o))
    if same is not None:
        return flags | OUT_IS_INPUT | OUT_ALIASES_INPUT, same, -1, -1
    candidates = input_of_storage.get(StorageWeakRef(o.untyped_storage()))
    if made_by_custom_function(o, through_views=bool(candidates), dirty=dirty):
        return flags, -1, -1, -1
    if candidates and _written_detached(o, roots):
        return flags, -1, -1, -1
    if candidates:
        k = _containing_input(o, candidates, originals)
        if _reinterprets(o, originals[k]):
            flags |= OUT_REINTERPRETED
        return flags | OUT_ALIASES_INPUT, k, -1, -1
    base = o._base
    if base is None or is_traceable_wrapper_subclass(base):  # (``nt.values()``: its
        return flags, -1, -1, -1  # wrapper is flattened at the trace's edge, its leaves out)
    flags |= OUT_VIEW_OF_INTERMEDIATE
    if _reinterprets(o, base):
        flags |= OUT_REINTERPRETED
    if base.requires_grad:
        flags |= OUT_BASE_REQUIRES_GRAD
    group = base_groups.setdefault(id(base), len(base_groups))
    base_out = output_index.get(id(base), -1)
    if base_out >= 0:
        flags |= OUT_BASE_IS_OUTPUT
    return flags, -1, group, base_out
