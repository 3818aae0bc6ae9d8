"""The joint pass: forward and backward of the function traced into one graph
(``JointGraph``), the backward recorded by ``torch.autograd.grad`` on tangent placeholders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.utils._python_dispatch import _disable_current_modes

from .. import alias
from ..autograd_walks import reaches_node
from ..eager_calls import EagerCalls
from ..fx_views import view_root
from ..hops import refuse_deferred_autograd_errors
from ..input_hooks import hooks_on_linked_nodes, take_off_hooks
from ..overlapping_writes import OVERLAP_IN_BACKWARD
from ..vocab import PARTITIONER_TAG, TRACED_BY_FORWARD
from .autocast_casts import as_cached_leaves, cast_cache_as, leaf_copies
from .cleanup import (
    clean,
    flatten_codegen,
    mark_roles,
    mark_saved_as_input,
    tensorify_scalars,
)
from .custom_function_saves import custom_function_saves
from .decompositions import with_trace_decompositions
from .failures import trace_errors
from .functional import (
    EffectChain,
    clone_in_callers_layout,
    flat_call,
    from_functional,
    in_layout_of,
    layout_anchors,
    new_value,
    to_functional,
    tracing_modes,
)
from .graphs import JointGraph, TraceMetadata
from .output_saves import mark_saves_beside_outputs
from .post_write_reads import (
    PostWrite,
    hook_bypassed_views,
    initial_nodes,
    linked_by_value,
    post_write_split,
    views_after_relaid,
    views_past_write,
    written_with_new_node,
)
from .saved_reads import SavedReads, leads, reaching, saving_links, version_sharing


def _needs_grad(p: Any) -> bool:
    return isinstance(p, torch.Tensor) and p.requires_grad


def _tangent_like(o: torch.Tensor) -> torch.Tensor:
    # Tangents are contiguous; the runtime makes the real ones contiguous too.
    return torch.empty(o.shape, dtype=o.dtype, device=o.device)


def _views_alike(fake: Any, view: Any) -> bool:
    """Whether eager's autograd rebuilds views taken of the input before its metadata
    change as the trace's view of a clone would: the input is a view in the caller (then
    from its base), or the change keeps its elements (``t_()``: from the input's new
    node, which passes every element on; one that drops elements, ``as_strided_`` of
    fewer, drops their gradient in eager, as the input's own node does in the trace)."""
    if fake._is_view():
        return True
    at = fake.storage_offset()
    layouts = [(tuple(fake.shape), tuple(fake.stride()), at)]
    layouts.append((tuple(view.size), tuple(view.stride), at + view.offset))
    if not all(isinstance(n, int) for size, stride, o in layouts for n in (*size, *stride, o)):
        return False
    if fake.numel() > 1 << 20:
        return False
    extent = max(
        o + sum((n - 1) * s for n, s in zip(size, stride)) + 1 for size, stride, o in layouts
    )
    with _disable_current_modes():
        storage = torch.arange(max(extent, 1))
        before, after = (storage.as_strided(*layout) for layout in layouts)
        return torch.equal(before.flatten().sort().values, after.flatten().sort().values)


#: What autograd's engine raises of a gradient a node returned, in eager's backward.
_ENGINE_REFUSALS = (
    "returned an invalid gradient",
    "returned an incorrect number of gradients",
    "but the corresponding forward input was not a Variable",
    # an output resized by an ``out=`` write after its node was recorded
    "invalid gradient at index",
)
#: Autograd's error for an op without a derivative (``NotImplementedError``).
_NOT_IMPLEMENTED = "is not implemented"
#: Autograd's error reaching the accumulator of a leaf a write with grad made a view
#: of the graph's interior (``EagerCalls.interior_nodes``).
_MOVED_INTO_INTERIOR = "leaf variable has been moved into the graph interior"


def _extra_edges(edges: Sequence[Any], t: Any, primal: Any) -> list[Any]:
    """The gradient edges of a leaf input's stand-in ``t`` that the ``primal``'s gradient
    does not take in already: ``edges`` (taken before each ``requires_grad_(False)`` /
    ``detach_()``) and ``t``'s own now, each once, less those through the primal's node
    (autograd keeps one accumulator per leaf while a graph holds it; a stand-in that
    runs on a clone is a new leaf once re-enabled, its earlier history the clone's)."""
    target = torch.autograd.graph.get_gradient_edge(primal).node
    kept: list[Any] = []
    for e in [*edges, torch.autograd.graph.get_gradient_edge(t)]:
        if not any(e.node is k.node for k in kept) and not reaches_node(e.node, target):
            kept.append(e)
    return kept


def _after_hooks(t: Any) -> list[Any] | None:
    """For a tensor with hooks, a list the gradient after them lands in: a hook
    registered last (``autograd.grad`` captures a tensor's gradient before its hooks;
    eager's retain hook runs after every one). None for one without hooks."""
    if not t._backward_hooks:
        return None
    seen: list[Any] = [None]

    def note(g: Any) -> None:
        seen[0] = g

    t.register_hook(note)
    return seen


def _summed(a: Any, b: Any) -> Any:
    """Two gradients of one tensor, either None where it got none."""
    return b if a is None else a if b is None else a + b


def _tag_traced_by_forward() -> None:
    """Tag the nodes traced so far as the forward's, as torch's joint tracer does: the
    default partition computes the later ones in the backward (``vocab.PARTITIONER_TAG``)."""
    mode = get_proxy_mode()
    if mode is not None:
        for node in mode.tracer.graph.nodes:
            node.meta.setdefault(PARTITIONER_TAG, TRACED_BY_FORWARD)


class _JointTrace(SavedReads):
    """What one joint trace learns as it runs: the forward decides which inputs run on a
    clone and how many effect tokens it leaves; the backward, which inputs it writes and
    whether it reads a saved tensor that was written after it was saved."""

    #: Outputs only such nodes read: no op of the backward graph reads them.
    outputs_read_by_dead_ends: frozenset[int] | set[int] = frozenset()
    #: The caller's autocast cast-cache setting (``make_fx`` turns it off while tracing).
    cast_cache: bool = True
    #: Inputs written without grad that run on a leaf copy (``autocast_casts.leaf_copies``).
    leaf_copies: dict[int, Any] = {}
    #: Outputs retained and computed from (``input_hooks.RetainedThrough``): their whole
    #: gradients (backward outputs), and the tangents that reach each.
    retained_totals: list[Any] = []
    #: The whole gradient at each output others are computed from (``fed_outputs``).
    fed_totals: list[Any] = []
    retained_tangents: dict[int, tuple[int, ...]] = {}
    #: Inputs written with autograd that outputs read after the write (``post_write_reads``).
    post_write: list[int] = []
    #: Hooks on those inputs' nodes after the write, left for the runtime.
    post_write_hooks: list[tuple[int, Any]] = []
    #: Hooks registered in the forward (``InputHooks.traced_hooks``).
    traced_hooks: list[Any] = []
    #: Members of a synthetic base likewise (``synthetic_base._linkable``): (position,
    #: tensor, its base's input), named in the link after the traced inputs.
    post_write_members: list[tuple[int, Any, int]] = []
    #: Those linked, the gradients their reads pass to each, and what those pass on
    #: to each primal (``(primal, value)``): backward outputs, last.
    post_write_found: PostWrite = PostWrite()
    post_write_passed: list[tuple[int, Any]] = []
    #: Written view inputs whose node eager's write bypasses (``hook_bypassed_views``).
    hook_bypassed: tuple[list[int], list[int]] = ([], [])
    views_past_write: list[int] = []
    views_after_relaid: list[int] = []
    initial: list[Any] = []

    def __init__(self, fn: Callable[..., Any], fake_args: Sequence[Any], meta: TraceMetadata):
        self.fn = fn
        self.fake_args = fake_args
        self.metadata = meta
        # Inputs that require grad and are written: the function runs on a clone, so that
        # autograd.grad differentiates with respect to the value from before the write.
        # So do those it detach_()es: what it computed from them before still reaches
        # the caller's tensor (requires_grad_(False) on a leaf stops its gradient: eager's
        # AccumulateGrad skips a leaf that no longer requires grad).
        self.requires_grad = [getattr(a, "requires_grad", False) for a in fake_args]
        self.cloned = self._cloned(meta)
        self.num_tokens = 0
        self.written_in_backward: list[int] = []
        self.backward_version_deltas: list[int] = []
        self.stale: list[str] = []
        # the backward nodes that read a stale saved tensor, and the tangents (by
        # position) whose outputs reach one: eager raises only if its backward runs them
        self.stale_nodes: list[Any] = []
        self.stale_tangents: tuple[int, ...] = ()
        # accumulators of leaves moved into the graph's interior (``EagerCalls.interior_nodes``)
        self.interior_nodes: list[Any] = []
        self.relaid = meta.relaid_inputs
        self.packed: set[int] = set()
        self.packed_views: dict[int, list[Any]] = {}
        self.readers: dict[int, list[Any]] = {}  # per saved tensor (by id), nodes reading it
        self.dead_reads: set[int] = set()  # saved tensors read by ``_read_dead_ends`` (ids)
        # outputs and intermediate bases eager saves, and the tangents whose backward reads
        # them (eager checks their version only where its backward reaches such a read)
        self.saved_outputs: dict[int, tuple[int, ...]] = {}
        self.saved_bases: dict[int, tuple[int, ...]] = {}
        # inputs that share eager's version counter (views of one base): a write to one
        # makes what was saved of another stale; traced, each input has a counter of its own
        self.sharing = version_sharing(fake_args)
        self.call: list[Any] = []
        self.primals: list[Any] = []
        self.relaid_bases: dict[int, int] = {}
        self.inner_leaves: list[Any] = []
        self.edges_dropped: list[Any] = []
        self.detached_from: dict[int, Any] = {}
        self.data_reads: dict[int, Any] = {}
        # inputs eager saved (itself or a view of it) at the version the call leaves it,
        # whose saved value the backward reads: per input, the backward nodes reading it
        self.saved_inputs: dict[int, list[Any]] = {}
        # inputs eager saves, True: only as themselves (its backward reads them then)
        self.saved_whole: dict[int, bool] = {}
        # inputs eager's backward reads (itself, a view or a detach() of one, saved by a
        # node the outputs' backward runs); the others are marked for min-cut
        # (``UNREAD_KEY``): saved, a write after the call would fail autograd's check
        self.eager_reads: set[int] = set()
        self.final_versions: list[int] = []
        self.watched_inputs: dict[int, tuple[int, ...]] = {}
        self.watched_leads: dict[int, tuple[int, ...]] = {}
        self.saving_links: tuple[tuple[int, ...], ...] = ()

    def _cloned(self, meta: TraceMetadata) -> set[int]:
        """The inputs the function runs on a clone of (see ``__init__``)."""
        detached = {
            i
            for i, flag in meta.requires_grad_changes.items()
            if not flag and i not in meta.requires_grad_flag_off
        }
        return {
            i
            for i, v in enumerate(meta.plan.inputs)
            if self.requires_grad[i] and (v != alias.InputVerdict.UNMUTATED or i in detached)
        }

    def run(self, primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        """The traced function: the forward, then the backward of its differentiable
        outputs (``JointGraph`` says what it returns)."""
        plan = self.metadata.plan
        fp = [to_functional(p) for p in primals]
        cached = self.metadata.cached_casts
        fp = as_cached_leaves(fp, primals, cached, {*self.cloned, *self.relaid})
        ft = [to_functional(t) for t in tangents]
        chain = EffectChain()
        with torch.enable_grad():
            call, copies = self._copies(fp)
            self.leaf_copies = leaf_copies(call, self._written_without_grad(), set(cached))
            call = [self.leaf_copies.get(i, c) for i, c in enumerate(call)]
            anchors = layout_anchors(call, self.relaid)
            bases = {}
            seen_as_views = [i for i in self._seen_as_views() if i not in copies]
            for i, view in layout_anchors(call, seen_as_views).items():
                bases[i], call[i] = call[i], view
            anchors.update((i, bases[i]) for i in anchors if i in bases)
            bases.update(copies)
        self.call = call
        self.primals = fp
        self.relaid_bases = {id(base): i for i, base in bases.items()}
        outs = self._forward(call)
        self.final_versions = [self._version_of(c) for c in call]
        fwd_tokens = chain.finish()
        saved_outputs = [k for k, o in enumerate(outs) if self._shares_saved(o)]
        saved_bases = [
            s for s, k in enumerate(plan.intermediate_bases) if self._is_saved(outs[k]._base)
        ]
        _tag_traced_by_forward()
        self.num_tokens = len(fwd_tokens)
        chain = EffectChain()  # the backward orders its own effects
        fwd_values = [
            *outs,
            *(outs[k]._base for k in plan.intermediate_bases),
            *(new_value(call, anchors, i) for i in self.metadata.mutated_inputs),
        ]
        per_primal = self._backward(fp, ft, call, fwd_values)
        diff_outs = [fwd_values[i] for i in self.metadata.tangent_outputs]
        source = self.detached_from
        self.outputs_read_by_dead_ends = {
            k for k in saved_outputs if {id(outs[k]), id(source.get(id(outs[k])))} & self.dead_reads
        }
        self.saved_outputs = {
            k: self._reading_shared(diff_outs, outs[k], source.get(id(outs[k])))
            for k in saved_outputs
        }
        bases = fwd_values[len(outs) :]
        self.saved_bases = {
            s: self._reading(diff_outs, bases[s], source.get(id(bases[s]))) for s in saved_bases
        }
        fwd = [from_functional(v) for v in fwd_values]
        bwd = [from_functional(g) for g in per_primal]
        # Inputs the backward writes (a custom Function's backward updating a saved input):
        # their new values follow the gradients; the runtime copies them in.
        bwd += [from_functional(call[i]) for i in self.written_in_backward]
        bwd += [from_functional(g) for g in self._totals_and_link()]
        return fwd + fwd_tokens, bwd + chain.finish()

    def _seen_as_views(self) -> list[int]:
        """Inputs whose metadata the function changes are seen as views of their clone
        (``run`` replaces ``call[i]``; these are their indices): the change (``x.as_strided_``,
        ``x.t_()``) leaves the value's history alone, and autograd rebuilds views taken
        before it from the clone, whose layout never changes, as eager's does from the
        storage (``_views_alike``: where it does); the runtime records the change on the
        caller's tensor, as eager does. A relaid input's value is that clone."""
        meta = self.metadata
        # (a base the function detach_()es stays one: detach_() of a view raises)
        detached = {*meta.requires_grad_changes, *meta.left_then_written}
        return [
            i
            for i, view in meta.plan.facts.input_view.items()
            if (i in self.relaid or i in self.cloned)
            and _views_alike(self.fake_args[i], view)
            and (i not in detached or self.fake_args[i]._is_view())
        ]

    def _written_without_grad(self) -> list[int]:
        """Inputs that run on a copy only because the function writes them, without
        grad: no metadata change, no ``requires_grad_`` / ``detach_``."""
        meta = self.metadata
        other = {*meta.requires_grad_changes, *meta.left_then_written, *self.relaid}
        plain = (alias.InputVerdict.DATA, alias.InputVerdict.DATA_IN_GRAPH)
        return [i for i in self.cloned if meta.plan.inputs[i] in plain and i not in other]

    def _copies(self, fp: list[Any]) -> tuple[list[Any], dict[int, Any]]:
        """What the function runs on: each cloned input's copy, laid out as the caller's
        storage (``clone_in_callers_layout``), and, per such input, the copy of the
        storage its copy views. That copy is the input's view in the caller's layout
        already: it is not seen as a view again (a second as_strided step would ban writes
        through it), and views of it are the input's."""
        call, copies = [], {}
        # (a view in the caller written without grad is one of its copy: eager rebuilds
        # its node from its base's on the next read, ``post_write_reads``)
        rebuilt = {i for i in self._written_without_grad() if self.fake_args[i]._is_view()}
        for i, p in enumerate(fp):
            c = clone_in_callers_layout(p) if i in self.cloned else p
            if c is not p and c._base is not None:
                copies[i] = c._base
            elif i in rebuilt and c is not p and p.requires_grad:
                c = copies.setdefault(i, c).view_as(c)
            call.append(c)
        return call, copies

    def _forward(self, call: list[Any]) -> list[Any]:
        """The function, under the caller's grad mode (its own enable_grad / no_grad
        blocks decide what has autograd history, as in eager), saved tensors checked;
        then the inputs it wrote and read after (``written_with_new_node``)."""
        initial = initial_nodes(call)
        calls = EagerCalls.for_inputs(call, self.fake_args)
        calls.input_hooks.traced = frozenset(id(call[i]) for i in self.metadata.traced_hook_inputs)
        early = [*self.metadata.early_input_hooks, *self.metadata.hooks_before_call]
        calls.input_hooks.early = frozenset(id(call[i]) for i, _ in early)
        with (
            torch.set_grad_enabled(self.metadata.grad_mode),
            cast_cache_as(self.cast_cache),
            torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack),
            custom_function_saves(self._pack, self._unpack),
        ):
            outs = flat_call(self.fn, call, self.fake_args, calls)
        take_off_hooks(calls.input_hooks.traced_hooks, outs, self.metadata.caller_fed)
        excluded = {*self.leaf_copies}
        excluded |= self.metadata.plan.facts.input_storage_set
        self.post_write = written_with_new_node(self.metadata, call, initial, excluded)
        self.traced_hooks = calls.input_hooks.traced_hooks
        self.initial = initial
        self.views_past_write = views_past_write(self.metadata, call, initial, outs)
        self.views_after_relaid = views_after_relaid(self.metadata, call, initial, outs)
        self.post_write_members = list(calls.synthetic.post_write)
        self.inner_leaves = [calls.new_leaves[j] for j in self.metadata.inner_leaf_positions]
        self.detached_from = calls.detached_from
        self.data_reads = calls.data_reads
        # leaves turned off and on again: their gradient gathers every edge they had
        self.edges_off = {
            i: _extra_edges(calls.edges_off[id(c)], c, self.primals[i])
            for i, c in enumerate(call)
            if id(c) in calls.edges_off and c.requires_grad
        }
        # and those left off: eager's engine runs the nodes to their accumulators (their
        # saved tensors are checked) and skips the leaf
        self.edges_dropped = [
            e
            for c in call
            if id(c) in calls.edges_off and not c.requires_grad
            for e in calls.edges_off[id(c)]
        ]
        if calls.overlap_nodes:  # eager's backward raises where it passes one
            self.stale.append(OVERLAP_IN_BACKWARD)
            self.stale_nodes += calls.overlap_nodes
        self.interior_nodes = calls.interior_nodes
        return outs

    # Saved tensors keep their version: one written after it was saved fails eager's
    # check when the backward reads it, so the compiled backward raises as eager does
    # (the trace itself goes on: the forward alone must still work).

    def _grad(self, outs: list[Any], needs: list[Any], tangents: list[Any]) -> Sequence[Any]:
        """``autograd.grad``; where autograd's engine refuses a gradient it computed (the
        shape check after an input's metadata changed under no_grad; a custom Function's
        backward that returns too many gradients, or one for a non-tensor input), eager
        raises that in its backward: so does the compiled one, and the forward still
        works."""
        try:
            with torch._C._DisableAutocast():
                return torch.autograd.grad(
                    outs, needs, tangents, allow_unused=True, retain_graph=True
                )
        except NotImplementedError as e:
            if _NOT_IMPLEMENTED not in str(e):
                raise
            return self._grad_where_implemented(outs, needs, tangents, str(e))
        except RuntimeError as e:
            if not any(m in str(e) for m in _ENGINE_REFUSALS):
                raise
            self.stale, self.stale_nodes = [str(e)], [None]
            return ()

    def _grad_where_implemented(
        self, outs: list[Any], needs: list[Any], tangents: list[Any], message: str
    ) -> Sequence[Any]:
        """An output whose history has an op without a derivative (``torch.unique`` of
        a tensor that requires grad): eager raises only in a backward that reaches it, so
        the compiled backward raises for those outputs' tangents and differentiates the
        others."""

        def fails(k: int) -> bool:
            try:
                with torch._C._DisableAutocast():
                    torch.autograd.grad(
                        outs[k], needs, tangents[k], allow_unused=True, retain_graph=True
                    )
            except NotImplementedError:
                return True
            return False

        failing = [k for k in range(len(outs)) if fails(k)]
        keep = [k for k in range(len(outs)) if k not in failing]
        self.stale.append(message)
        self.stale_nodes += [outs[k].grad_fn for k in failing]
        if not keep:
            return ()
        with torch._C._DisableAutocast():
            return torch.autograd.grad(
                [outs[k] for k in keep], needs, [tangents[k] for k in keep], allow_unused=True
            )

    def _backward(
        self, fp: list[Any], ft: list[Any], call: list[Any], fwd_values: list[Any]
    ) -> list[Any]:
        """One gradient per primal (None where it needs none), then one per inner leaf
        (``InnerLeaf``), recording which inputs
        the backward writes and how many times."""
        # (an input written without grad may run on a leaf copy: its gradient is the input's)
        fp = [self.leaf_copies.get(i, p) for i, p in enumerate(fp)]
        needs = [p for p in fp if _needs_grad(p)]
        # their gradients follow the primals' (``InnerLeaf``); one the function turned off
        # (``requires_grad_(False)``) has none: eager's accumulator skips a leaf that
        # does not require grad
        needs += [t for t in self.inner_leaves if t.requires_grad]
        earlier = [(i, e) for i, edges in self.edges_off.items() for e in edges]
        needs += [e for _, e in earlier]
        diff_outs = [fwd_values[i] for i in self.metadata.tangent_outputs]
        self.hook_bypassed = hook_bypassed_views(
            self.metadata, call, self.initial, diff_outs, self.fake_args
        )
        # then, their gradients dropped: eager's backward runs the nodes to them too
        needs += self.edges_dropped
        linked = linked_by_value(self.metadata, call, self.post_write, diff_outs)
        self.post_write_hooks = hooks_on_linked_nodes(self.traced_hooks, call, linked, diff_outs)
        retained = self._retained_through(fwd_values, diff_outs)
        needs += retained
        needs += [fwd_values[k] for k in self.metadata.fed_outputs]  # (``fed_outputs``)
        n_totals = len(retained) + len(self.metadata.fed_outputs)
        hooked = [_after_hooks(t) for t in retained]
        refuse_deferred_autograd_errors(diff_outs)
        versions = alias.facts.versions(call)
        grads: Sequence[Any] = ()
        if needs and diff_outs:
            # eager's backward runs where the caller calls it, outside the forward's
            # autocast: its ops keep the dtypes of what they differentiate (an
            # autocast(enabled=False) block's matmul has a float32 backward)
            grads = self._grad_and_post_write(diff_outs, needs, ft, call, fp)
            self._read_dead_ends(diff_outs, needs)
        if self.interior_nodes:  # after the saved tensors' checks, as eager's engine
            self.stale.append(_MOVED_INTO_INTERIOR)
            self.stale_nodes += self.interior_nodes
        if self.stale:
            self.stale_tangents = reaching(diff_outs, self.stale_nodes)
        self._note_saved_reads(fp, diff_outs)
        after = alias.facts.versions(call)
        for i, (a, b) in enumerate(zip(versions, after)):
            if a != b:
                self.written_in_backward.append(i)
                self.backward_version_deltas.append(b - a)
        per_input, totals = self._laid_out(fp, grads, earlier, n_totals)
        if retained:
            self.retained_totals = [
                (h[0] if h and h[0] is not None else total) for h, total in zip(hooked, totals)
            ]
        self.fed_totals = list(totals[len(retained) :])
        self.post_write_passed = self._passed_on(fp, earlier, n_totals)
        return per_input

    def _laid_out(
        self, fp: list[Any], grads: Sequence[Any], earlier: list[tuple[int, Any]], n_retained: int
    ) -> tuple[list[Any], list[Any]]:
        """Gradients in the order ``_backward`` asks for them (primals, inner leaves, edges
        taken off, edges dropped, retained outputs), laid out as the backward's outputs:
        one per primal (None where it needs none) and inner leaf, and one per retained
        output."""
        it = iter(grads)
        per_primal = [
            (next(it, None) if isinstance(p, torch.Tensor) and p.requires_grad else None)
            for p in fp
        ]
        per_leaf = [next(it, None) if t.requires_grad else None for t in self.inner_leaves]
        for i in self._metadata_first():
            if per_primal[i] is not None:
                per_primal[i] = in_layout_of(per_primal[i], fp[i], self.fake_args[i])
        for i, _ in earlier:
            per_primal[i] = _summed(per_primal[i], next(it, None))
        for _ in self.edges_dropped:
            next(it, None)
        return per_primal + per_leaf, [next(it, None) for _ in range(n_retained)]

    def _grad_and_post_write(
        self, diff_outs: list[Any], needs: list[Any], ft: list[Any], call: list[Any], fp: list
    ) -> list[Any]:
        """``_grad``, and the gradients at written inputs' nodes after their writes
        (``post_write_reads``; what those pass on: ``_passed_on``)."""
        linked = [(i, call[i]) for i in self.post_write]
        members = self.post_write_members
        linked += [(len(call) + k, t) for k, (_, t, _) in enumerate(members)]
        grads = self._grad(diff_outs, needs + [t for _, t in linked], ft)
        bases = {len(call) + k: b for k, (_, _, b) in enumerate(members)}
        grads, self.post_write_found = post_write_split(
            self.metadata, linked, diff_outs, ft, needs, grads, bases
        )
        return grads

    def _note_saved_reads(self, fp: list[Any], diff_outs: list[Any]) -> None:
        """After the backward's trace: per saved input, the tangents whose backward reads
        it and the Function inputs its reading nodes lead to (Function inputs, then inner
        leaves); the tangents sharing a node that saved a tensor."""
        self.watched_inputs = {
            i: reaching(diff_outs, nodes) for i, nodes in self.saved_inputs.items()
        }
        ends = [(j, p) for j, p in enumerate(fp) if _needs_grad(p)]
        ends += [(len(fp) + k, t) for k, t in enumerate(self.inner_leaves) if t.requires_grad]
        self.watched_leads = leads(self.saved_inputs, ends)
        self.saving_links = saving_links(diff_outs, self.readers)

    def saved_checks(self) -> dict[str, Any]:
        """The ``JointGraph`` fields of eager's checks of what its backward saved."""
        return {
            "backward_error": self.stale[0] if self.stale else None,
            "backward_error_tangents": self.stale_tangents,
            "watched_inputs": self.watched_inputs,
            "watched_leads": self.watched_leads,
            "saving_links": self.saving_links,
        }

    def grad_routing(self) -> dict[str, Any]:
        """The ``JointGraph`` fields that route gradients (``retained_tangents`` on)."""
        # (members renumbered: the runtime passes those linked, in this order, after the
        # graph's inputs)
        n = len(self.call)
        members = [i - n for i in self.post_write_found.inputs if i >= n]
        inputs = [i if i < n else n + members.index(i - n) for i in self.post_write_found.inputs]
        return {
            "retained_tangents": self.retained_tangents,
            "post_write_inputs": tuple(inputs),
            "post_write_members": tuple(self.post_write_members[k][0] for k in members),
            "post_write_passed": tuple(i for i, _ in self.post_write_passed),
            "post_write_hooks": list(self.post_write_hooks),
            "post_write_tangents": tuple(self.post_write_found.tangents),
            "post_write_values": dict(self.post_write_found.values),
            "post_write_readers": tuple(sorted(self.post_write_found.readers)),
            "unhooked_view_writes": tuple(self.hook_bypassed[0]),
            "hooked_view_reads": tuple(self.hook_bypassed[1]),
            "views_past_write": tuple(self.views_past_write),
            "views_after_relaid": tuple(self.views_after_relaid),
        }

    def _totals_and_link(self) -> list[Any]:
        """The backward's last outputs: the retained outputs' and the fed outputs'
        totals, then the post-write link's (``_post_write_outputs``)."""
        return [*self.retained_totals, *self.fed_totals, *self._post_write_outputs()]

    def _post_write_outputs(self) -> list[Any]:
        """The backward's outputs for the link: per linked input its node's gradient,
        then what those pass on to each primal (``JointGraph.post_write_passed``)."""
        return [*self.post_write_found.grads, *(g for _, g in self.post_write_passed)]

    def _passed_on(
        self, fp: list[Any], earlier: list[tuple[int, Any]], n_retained: int
    ) -> list[tuple[int, Any]]:
        """What the linked inputs' gradients pass on (``PostWrite.passed``, one per
        gradient the backward asks for), laid out as the backward's outputs
        (``_laid_out``): (position among the gradients per primal and inner leaf, then
        the retained totals, value), where anything."""
        passed = self.post_write_found.passed
        if not passed:
            return []
        per_input, retained = self._laid_out(fp, passed, earlier, n_retained)
        found = list(enumerate(per_input)) + list(enumerate(retained, len(per_input)))
        return [(k, g) for k, g in found if g is not None]

    def _retained_through(self, fwd_values: list[Any], diff_outs: list[Any]) -> list[Any]:
        """The outputs the function ``retain_grad()``s and computes more from: the
        backward also differentiates with respect to each (the caller's part and the
        function's: eager's ``.grad``), last; the tangents that reach each."""
        through = [fwd_values[k] for k in self.metadata.retained_grads[2]]
        self.retained_tangents = {
            k: reaching(diff_outs, [o.grad_fn])
            for k, o in zip(self.metadata.retained_grads[2], through)
        }
        return through

    def _metadata_first(self) -> list[int]:
        """Inputs the function made require grad after changing their metadata (see
        ``functional.in_layout_of``)."""
        meta = self.metadata
        return [
            i
            for i, flag in meta.requires_grad_changes.items()
            if flag
            and meta.plan.inputs[i] in alias.METADATA_WRITE
            and not self.fake_args[i].requires_grad
            and i not in meta.metadata_recorded
        ]

    def refuse_backward_mutations(self) -> None:
        """Inputs the backward writes that the forward writes too, or that require grad:
        not supported (the rule table refuses)."""
        plan = self.metadata.plan
        refused = [
            i
            for i in self.written_in_backward
            if plan.inputs[i] != alias.InputVerdict.UNMUTATED or self.requires_grad[i]
        ]
        if refused:
            alias.refuse_backward_mutations(plan, refused)


def trace_joint(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    metadata: TraceMetadata,
    decompositions: dict[Any, Any] | None = None,
    static_inputs: Sequence[int] = (),
) -> JointGraph:
    """Trace forward and backward of ``fn`` into one graph (see ``JointGraph``)."""
    state = _JointTrace(fn, fake_args, metadata)
    state.cast_cache = torch.is_autocast_cache_enabled()

    def joint(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        return state.run(primals, tangents)  # make_fx names placeholders after these

    with fake_mode:
        fake_tangents = [
            _tangent_like(metadata.fake_fwd_outputs[i]) for i in metadata.tangent_outputs
        ]
    with tracing_modes(fake_mode), trace_errors(fn):
        gm = make_fx(joint, decomposition_table=with_trace_decompositions(decompositions))(
            list(fake_args), fake_tangents
        )
    state.refuse_backward_mutations()
    flatten_codegen(gm)
    clean(gm)
    tensorify_scalars(gm, fake_mode)
    unread = [i for i in range(len(fake_args)) if i not in state.eager_reads]
    mark_roles(gm, len(fake_args), metadata.mutated_inputs, static_inputs, unread)
    num_user_outputs = len(metadata.outputs)
    first_value = num_user_outputs + metadata.num_intermediate_bases
    saved_as_input = [i for i in state.watched_inputs if i not in _relaid_inputs(metadata)]
    mark_saved_as_input(gm, first_value, metadata.mutated_inputs, saved_as_input)
    mark_saves_beside_outputs(gm, first_value)
    return JointGraph(
        gm=gm,
        metadata=metadata,
        fake_mode=fake_mode,
        fake_primals=list(fake_args),
        fake_tangents=fake_tangents,
        num_user_outputs=num_user_outputs,
        num_fwd_outputs=first_value + len(metadata.mutated_inputs) + state.num_tokens,
        num_tokens=state.num_tokens,
        backward_mutations=dict(zip(state.written_in_backward, state.backward_version_deltas)),
        **state.grad_routing(),
        **state.saved_checks(),
        saved_whole=tuple(sorted(i for i, only in state.saved_whole.items() if only)),
        saved_outputs={
            k: ts
            for k, ts in state.saved_outputs.items()
            if ts and (_read_by_backward(gm, k) or k in state.outputs_read_by_dead_ends)
        },
        saved_bases={
            s: ts
            for s, ts in state.saved_bases.items()
            if ts and _read_by_backward(gm, num_user_outputs + s)
        },
    )


def _relaid_inputs(metadata: TraceMetadata) -> set[int]:
    """The inputs whose metadata or storage the function changes: the epilogue does more
    than copy their new value into the caller's tensor."""
    plan = metadata.plan
    facts = plan.facts
    return {
        *(i for i, v in enumerate(plan.inputs) if v in alias.METADATA_WRITE),
        *metadata.relaid_inputs,
        *facts.input_storage_set,
        *facts.input_storage_resize,
    }


def _read_by_backward(gm: fx.GraphModule, k: int) -> bool:
    """Whether the joint graph's backward reads forward output ``k``, the value it views
    or a forward view of that (one version counter): eager saved it for a backward node
    the outputs reach. One saved by an op
    whose backward the outputs never reach (``y.sin().detach()`` saves ``y``) is never
    checked by eager, so it is not watched."""
    outs = gm.graph.output_node().args[0]
    node = outs[k] if isinstance(outs, (list, tuple)) and k < len(outs) else None
    stack, seen = [view_root(node)], set()
    while stack:
        n = stack.pop()
        if not isinstance(n, fx.Node) or n in seen:
            continue
        seen.add(n)
        for user in n.users:
            if user.op == "output":
                continue
            if user.meta.get(PARTITIONER_TAG) != TRACED_BY_FORWARD:
                return True
            if getattr(user.target, "is_view", False):
                stack.append(user)
    return False
