"""Stage 6b — the epilogue: what runs after the compiled forward. Input mutations
(metadata, then data) applied to the real inputs, their version counters set as
eager's, and outputs that alias inputs or intermediates rebuilt as real views
(``aotgrad.alias`` decides which)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..alias import OutputVerdict, ViewSpec
from ..alias.reinterpret import reinterpreted_view, view_over
from ..alias.storage import byte_range
from ..alias.views import (
    Evaluator,
    custom_view_of,
    detached_alias,
    leaf_if_readable,
    no_grad_view_of,
    regenerate,
    routed_detached,
    routed_view,
    stale_custom_view,
    stale_custom_view_of,
    stale_multi_output_view_of,
    stale_no_grad_view_of,
    view_of_detached_leaf,
)
from ..input_hooks import register_hooks, retain_grads
from .input_writes import InputWrites, _alias, _made_early
from .layout import ForwardLayout, OutputAlias
from .output_pieces import PIECE_BASES, pieces_of, plain

_NO_GRAD_MODE = torch._C._autograd.CreationMeta.NO_GRAD_MODE
_MULTI_OUTPUT = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE


def _identity(spec: ViewSpec) -> ViewSpec:
    return spec


class Epilogue(InputWrites):
    """What runs after the compiled forward: input mutations (metadata, then data)
    applied to the real inputs, their version counters set as eager's, and aliased
    outputs rebuilt as real views of their inputs or intermediate bases."""

    #: Routes the outputs onto written inputs' new nodes (training only, when needed).
    link: Any = None
    #: ``FedOutputsLink``'s routing where there is no ``link`` onto written inputs: it
    #: runs before the writes, so a written input's new value computed from an output
    #: is copied in through that output's link (``x += t; return x, t``).
    link_first: Any = None
    #: ``FedOutputsLink.onto_views``, where the function computes outputs from a view.
    fed_views: Any = None

    def __init__(self, layout: ForwardLayout) -> None:
        self.layout = layout
        self.n_user = layout.num_user_outputs
        self.values_start = layout.num_user_outputs + layout.num_intermediate_bases
        self.versioned = list(layout.version_deltas.items())
        self.rebuilt = {a.index for a in layout.output_aliases}
        self.written_with_grad = {
            i for i, g in zip(layout.mutated_inputs, layout.mutation_with_grad) if g
        }
        self.aliases_first = [a for a in layout.output_aliases if a.base_output < 0]
        # views of a view made under no_grad (2: its gradient ends at that view): made
        # of such a view of the caller's tensor once written, as eager's (soak 95360)
        self.no_grad_roots = {
            a.index
            for a in layout.output_aliases
            if a.before_requires_grad == 2 and a.creation_meta == _NO_GRAD_MODE
        }
        self.before_requires_grad = [
            a
            for a in layout.output_aliases
            if a.before_requires_grad and a.index not in self.no_grad_roots
        ]
        # inputs whose metadata the function changed without grad, then made require grad
        self.metadata_first = [
            i
            for i, flag in layout.requires_grad_changes.items()
            if flag and i in layout.metadata_mutations and i not in layout.metadata_with_grad
        ]
        self.aliases_last = [a for a in layout.output_aliases if a.base_output >= 0]
        self.piece_groups = _piece_groups(self.aliases_first, self.no_grad_roots)
        self.piece_of = {a.index: g for g, ms in self.piece_groups.items() for a in ms}
        self._note_leaf_bases(layout)
        self.rebuilt |= {*layout.stale_views, *layout.custom_views}
        specs = [a.view for a in layout.output_aliases if a.view is not None]
        specs += layout.metadata_mutations.values()
        specs += [v[1] for v in layout.stale_views.values() if v is not None]
        specs += [v[1] for v in layout.custom_views.values()]
        self.static = all(s.static for s in specs)

    def _note_leaf_bases(self, layout: ForwardLayout) -> None:
        """Views of leaves made inside: their bases to make leaves after the views taken
        before ``requires_grad_()`` (``views_before_leaf``, of a base that is no user
        output; ``views_before_output_leaf``, per user output)."""
        inner = {self.n_user + s for leaf in layout.inner_leaves for s in leaf.bases}
        # views of an intermediate base that is a leaf made inside (a base of its own
        # among the graph's outputs: not a user output, not an input)
        slots = (
            OutputVerdict.ALIAS_OF_INTERMEDIATE,
            OutputVerdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
        )
        aliases = layout.output_aliases
        bases = {self.n_user + a.source for a in aliases if a.base_leaf and a.verdict in slots}
        self.leaf_bases = sorted(bases - inner)
        self.views_before_leaf = [a for a in aliases if a.before_base_leaf and a.verdict in slots]
        self.views_before_output_leaf: dict[int, list[Any]] = {}
        of_output = OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT
        for a in aliases:
            if a.before_base_leaf and a.verdict == of_output:
                self.views_before_output_leaf.setdefault(a.source, []).append(a)

    def prepare(self, args: Sequence[Any]) -> list[int]:
        """Before the graph runs: inputs the function makes require grad do (views of
        them it took before are made first, ``early_views``); inputs resized by the
        function get the storage it gave them (the graph reads and writes them as if it
        had); their version counters."""
        self.early_views(args)
        for i, (_, reached) in self.layout.left_then_written.items():
            if not reached and args[i].requires_grad and leaf_if_readable(args[i]):
                # a leaf nothing was computed from before: out of autograd before the
                # graph (its gradient node would be reached once the write moved it inside)
                args[i].requires_grad_(False)
        for i, flag in self.layout.requires_grad_changes.items():
            if flag:  # before the graph runs: autograd then records it, as in eager
                if args[i].requires_grad and not leaf_if_readable(args[i]):
                    args[i].detach_()  # ``x.detach_(); x.requires_grad_()``: a new leaf
                args[i].requires_grad_(True)
            elif i in self.layout.requires_grad_flag_off and not args[i].requires_grad:
                # on for a while inside the function: on while the graph runs, off after
                args[i].requires_grad_(True)
        for i, flag in self.layout.own_requires_grad.items():
            args[i].requires_grad_(flag)
        for i in self.layout.storage_resizes:
            t = args[i]
            if t.untyped_storage().nbytes() == 0 and t.numel():
                torch.ops.inductor.resize_storage_bytes_(t, byte_range(t)[1])
        # Inference tensors have no version counter (-1: nothing to set).
        return [-1 if args[i].is_inference() else args[i]._version for i, _ in self.versioned]

    def change_metadata_first(self, args: Sequence[Any]) -> dict[int, tuple]:
        """Inputs without grad the function changed the metadata of and then made require
        grad (``x.unsqueeze_(0); x.requires_grad_()``): eager's leaf has the new metadata,
        its gradient the new shape. Their change is made before the graph runs (and
        ``prepare`` makes them leaves); the graph reads them in their old layout
        (``in_old_layouts``), through a node that takes its gradient into the new one.
        Returns those old layouts; the epilogue does not change them again, and writes
        their new values (in the old layout: ``trace.functional.layout_anchors``) there."""
        if not self.metadata_first or not self.static:
            return {}
        old = {}
        for i in self.metadata_first:
            t = args[i]
            if t.requires_grad or t.is_inference():
                continue
            old[i] = (tuple(t.shape), t.stride(), t.storage_offset())
            self._replay_metadata(t, self.layout.metadata_mutations[i], i, {})
        _made_early.metadata_first = old
        return old

    def early_views(self, args: Sequence[Any]) -> None:
        """Views of inputs the function made require grad, taken before it did
        (``OutputAlias.before_requires_grad``), made of the caller's tensors while they
        do not: eager's have no ``grad_fn`` once the flag is on, and a gradient that stops
        at them. Held for this call (``_made_early``; a call does not interleave with
        another of the same compiled function on one thread)."""
        if not self.before_requires_grad:
            return
        spec = _identity if self.static else Evaluator(self.layout.bindings, args).spec
        made = {}
        for a in self.before_requires_grad:
            view = spec(a.view) if a.before_requires_grad == 1 else None
            made[a.index] = (_view_of(args[a.source], view), view, args[a.source]._version)
        _made_early.views = made

    def __call__(
        self,
        args: Sequence[Any],
        fwd: Sequence[Any],
        before: list[int],
        leaves: Sequence[Any] = (),
        members: Sequence[Any] = (),
    ) -> tuple:
        layout = self.layout
        spec = _identity if self.static else Evaluator(layout.bindings, args).spec
        register_hooks(args, layout.early_input_hooks)  # (on the nodes the inputs have now)
        # made before the writes below, which make them stale as eager's are
        late = {k for k, src in layout.stale_views.items() if src and self._stale_late(args, k)}
        early = {
            k: (no_grad_view_of if k in layout.stale_no_grad else custom_view_of)(
                _requiring_grad(args[src[0]], k in layout.stale_of_detached), spec(src[1])
            )
            for k, src in layout.stale_views.items()
            if src is not None and k not in late
        }
        # views of an input whose metadata the function changes are made of it as it was
        # (their specs are relative to that); once the change moves the version count,
        # autograd rebuilds their nodes from the base, as eager's (not through the new
        # metadata, whose node passes gradient only to the elements it covers). Not of a
        # leaf: its gradient takes the shape the view's base had (eager's: the new one)
        laid = {
            i: _alias(args[i])
            for i in layout.metadata_mutations
            if not (args[i].requires_grad and leaf_if_readable(args[i])) and self._keeps_autograd(i)
        }
        own = fwd  # (the compiled Function's: its node holds the retained totals' slots)
        if self.link_first is not None:
            fwd = self.link_first(fwd)
        kept = self._write_inputs(args, fwd, spec, before)
        if self.link is not None:  # (the outputs onto the written inputs' new nodes)
            fwd = self.link([*args, *members], fwd)
        register_hooks(args, layout.post_write_hooks)  # (on those new nodes)
        if leaves:
            fwd = self._leaf_bases(fwd, leaves)
        outs = self._rebuild_outputs(args, fwd, spec, leaves, kept, laid)
        _views_of_written_inputs(outs, args, layout, spec)
        self._stale_outputs(outs, early, spec, (args, late))
        of_leaves = self._custom_views_of_leaves(args, outs, leaves, spec) if leaves else set()
        self._custom_views(args, outs, of_leaves, spec)
        if self.fed_views is not None:  # (outputs computed from a view onto the view)
            self._views_of_linked(args, fwd, outs, spec)
        if layout.inference_outputs:
            with torch.inference_mode():
                for k in layout.inference_outputs:
                    outs[k] = outs[k].clone()
        if layout.data_outputs:
            _data_outputs(outs, layout.data_outputs)
        self._merged_and_same(outs, fwd)
        written = {self.values_start + p: i for p, i in enumerate(layout.mutated_inputs)}
        retain_grads(outs, args, layout.retained_grads, own, written)
        for hooked in layout.hooked_views:
            hooked.remake(outs)
        register_hooks(args, layout.input_hooks)
        register_hooks(outs, layout.output_hooks)
        return tuple(outs)

    def _views_of_linked(
        self, args: Sequence[Any], fwd: Sequence[Any], outs: list, spec: Any
    ) -> None:
        """The fed-views link (``fed_views``), then the views of another output made again
        where the link replaced that output (``return t5.unsqueeze(0), t5, v`` with
        ``t5`` computed from the view ``v``): made of the output before, their gradient
        skipped the link, and the gradient at ``v`` missed it (soak 251811)."""
        before = list(outs)
        self.fed_views(args, outs, fwd)
        versions = self.layout.output_versions
        for a in self.layout.output_aliases:
            of = a.of_user_output
            if of >= 0 and outs[of] is not before[of] and outs[a.index] is before[a.index]:
                outs[a.index] = self._rebuild(a, args, fwd, outs, spec, versions.get(a.index))

    def _merged_and_same(self, outs: list, fwd: Sequence[Any]) -> None:
        """Merged outputs that are another output's or base's tensor, detached; then the
        outputs that are the same object as an earlier one, after that one is final (a
        detached alias of its own, ``t.detach()`` returned twice beside ``t``)."""
        layout = self.layout
        if layout.merged_outputs:
            merged, same = layout.merged_outputs, layout.same_as
            taken = {id(o) for j, o in enumerate(outs) if j not in merged and j not in same}
            taken |= {id(b) for b in fwd[self.n_user : self.values_start]}
            for k in merged:
                if id(outs[k]) in taken:
                    outs[k] = outs[k].detach()
        for k, first in layout.same_as.items():
            outs[k] = outs[first]

    def _stale_outputs(
        self, outs: list, early: dict[int, Any], spec: Any, late: tuple[Sequence[Any], set[int]]
    ) -> None:
        """Outputs eager returns as stale views: made early (of inputs), made late (of
        inputs written with grad: ``late``, the args and those outputs), made of another
        output before its last write (``stale_output_views``), or a stale copy."""
        layout = self.layout
        args, made_late = late
        for k in layout.stale_views:
            if k in layout.same_as:  # the earlier output, made once (one version count)
                continue
            stale = early.get(k)
            if stale is None and k in layout.stale_output_views:
                j, view = layout.stale_output_views[k]
                made = (
                    stale_no_grad_view_of
                    if k in layout.stale_no_grad
                    else stale_multi_output_view_of
                )
                stale = made(outs[j], spec(view))
            version = layout.output_versions.get(k, 0)
            if stale is None and self._stale_of_output(outs, k, version):
                stale = stale_custom_view_of(outs[layout.view_bases[k]], version)
            elif stale is None and k in made_late:
                i, view = layout.stale_views[k]
                stale = stale_custom_view_of(args[i], version, spec(view))
            outs[k] = stale if stale is not None else stale_custom_view(outs[k], version)

    def _keeps_autograd(self, i: int) -> bool:
        """Whether input ``i`` stays in autograd (not taken out by ``detach_()`` or
        ``requires_grad_(False)``): views of one taken out have no node to rebuild."""
        return self.layout.requires_grad_changes.get(i) is not False

    def _stale_late(self, args: Sequence[Any], k: int) -> bool:
        """Whether the stale custom view ``k`` of an input is made after the writes: the
        input, without grad when called, was written with grad before the Function made
        the view (eager's then views the input, which requires grad by then)."""
        i = self.layout.stale_views[k][0]
        late = i in self.written_with_grad and not args[i].requires_grad
        return late and self.layout.output_versions.get(k, 0) >= 1

    def _stale_of_output(self, outs: list, k: int, version: int) -> bool:
        """Whether the stale custom view ``k`` is made of the output eager's has for
        ``._base``: one settled here, of the same layout, that requires grad."""
        layout = self.layout
        j = layout.view_bases.get(k, -1)
        if j < 0 or j in layout.stale_views or j in layout.custom_views or version < 1:
            return False
        base, out = outs[j], outs[k]
        return (
            isinstance(base, torch.Tensor)
            and base.requires_grad
            and not base._is_view()
            and base.shape == out.shape
            and base.stride() == out.stride()
            and base.storage_offset() == out.storage_offset()
        )

    def _custom_views(self, args: Sequence[Any], outs: list, done: set[int], spec: Any) -> None:
        """Custom-Function views of inputs (``layout.custom_views``), their gradient routed
        into the graph's output; a view of a detached alias another output is
        (``t = x.detach(); t.add_(x); return t, t[:, 1]``) is made of that output, last."""
        layout, last = self.layout, []
        for k, (i, view) in layout.custom_views.items():
            if k in done:
                continue
            kind = layout.detached_custom_views.get(k)
            if k in layout.detached_view_bases or k in layout.custom_view_bases:
                last.append((k, i, view))
            elif kind:
                outs[k] = routed_detached(args[i], spec(view), outs[k], kind)
            else:
                outs[k] = routed_view(args[i], spec(view), outs[k])
        for k, i, view in last:
            made_of = layout.detached_view_bases.get(k, layout.custom_view_bases.get(k))
            with torch.enable_grad():
                outs[k] = view_over(outs[made_of], spec(view), args[i])

    def _returned_leaves(
        self, args: Sequence[Any], fwd: Sequence[Any], spec: Any, outs: list, leaves: Sequence[Any]
    ) -> set[int]:
        """Inner leaves returned: their stand-ins, given the value (an alias of an input,
        ``x.detach().requires_grad_()``, rebuilt first), before other outputs view them;
        and views of one that shares an input's bytes, made of the stand-in. Returns the
        outputs made here."""
        aliases = {a.index: a for a in self.layout.output_aliases}
        made: set[int] = set()
        for leaf, stand_in in zip(self.layout.inner_leaves, leaves):
            made.update(leaf.outputs)
            for k in leaf.outputs:
                if leaf.input_view is not None:  # the input's view: its bytes already
                    outs[k] = stand_in
                    continue
                value = outs[k]
                if k in aliases:
                    value = self._rebuild(aliases[k], args, fwd, outs, spec)
                stand_in.data = value.detach()
                if k in aliases:  # the input's bytes: eager's leaf counts its writes
                    _set_version(stand_in, value._version)
                outs[k] = stand_in
            # (a synthetic base's member is the caller's tensor: the base's bytes)
            given = bool(leaf.outputs) or leaf.member is not None or leaf.input_view is not None
            for k in leaf.views:  # views of a leaf that shares an input's bytes
                a = aliases.get(k)
                if a is not None and a.verdict == OutputVerdict.ALIAS_OF_INPUT:
                    if not given and stand_in.shape == args[a.source].shape:
                        # the leaf itself is not returned: it is the input's bytes
                        # (``x.detach().requires_grad_()``), viewed as the input is
                        stand_in.data = args[a.source].detach()
                        _set_version(stand_in, args[a.source]._version)
                        given = True
                    if not given:  # viewed otherwise: the view stays the input's alias
                        continue
                    # (made under no_grad in eager: a view autograd does not track, unless
                    # taken with grad on of a view of the input made so: ``tracked``)
                    untracked = a.untracked and not a.tracked
                    with torch.no_grad() if untracked else contextlib.nullcontext():
                        outs[k] = view_over(stand_in, spec(a.view), args[a.source])
                    made.add(k)
        return made

    def _custom_views_of_leaves(
        self, args: Sequence[Any], outs: list, leaves: Sequence[Any], spec: Any
    ) -> set[int]:
        """A custom Function's views of an inner leaf (``Half.apply(t)``), as eager's:
        views of the stand-in (the leaf), their gradient routed into the graph's output.
        The stand-in has the leaf's value where it is returned (``_returned_leaves``), the
        bytes of an input (``x.detach().requires_grad_()``) or the whole of such a view;
        otherwise the output stays the graph's. Returns the outputs made here."""
        made: set[int] = set()
        for leaf, stand_in in zip(self.layout.inner_leaves, leaves):
            given = bool(leaf.outputs)
            for k, view in leaf.custom_views.items():
                whole = view.size == tuple(leaf.shape) and view.offset == 0
                of_input = self.layout.custom_views.get(k)
                if not given and of_input is not None:
                    source = args[of_input[0]]
                    if tuple(source.shape) == tuple(leaf.shape):
                        stand_in.data = source.detach()
                        # eager's detach shares the input's counter: its count, too
                        _set_version(stand_in, source._version)
                        given = True
                if not given and whole and view.stride == tuple(outs[k].stride()):
                    stand_in.data = outs[k].detach()
                    given = True
                if given:
                    outs[k] = routed_view(stand_in, spec(view), outs[k])
                    made.add(k)
        return made

    def _leaf_bases(self, fwd: Sequence[Any], leaves: Sequence[Any]) -> Sequence[Any]:
        """Intermediate bases that are inner leaves: the stand-in, given their value, so
        that the outputs viewing them view the leaf the gradient fills."""
        fwd = list(fwd)
        for leaf, stand_in in zip(self.layout.inner_leaves, leaves):
            for s in leaf.bases:
                stand_in.data = fwd[self.n_user + s].detach()
                fwd[self.n_user + s] = stand_in
        return fwd

    def _rebuild_outputs(
        self,
        args: Sequence[Any],
        fwd: Sequence[Any],
        spec: Any,
        leaves: Sequence[Any] = (),
        kept: dict[int, Any] | None = None,
        laid: dict[int, Any] | None = None,
    ) -> list[Any]:
        """The user outputs: fresh ones with eager's version count, aliases rebuilt as
        real views, leaves made inside the function requiring grad (an inner leaf
        returned is its stand-in, the one its gradient fills, before views are made of it)."""
        layout = self.layout
        outs = list(fwd[: self.n_user])
        made = self._returned_leaves(args, fwd, spec, outs, leaves) if leaves else set()
        versions = layout.output_versions
        for k, v in versions.items():
            if k not in self.rebuilt:
                _set_version(outs[k], v)
        if self.leaf_bases:
            fwd = list(fwd)
            for k in self.leaf_bases:
                fwd[k] = fwd[k].detach()
            for a in self.views_before_leaf:  # taken before the base required grad
                outs[a.index] = _view_of(fwd[self.n_user + a.source], spec(a.view))
                made.add(a.index)
            for k in self.leaf_bases:
                fwd[k].requires_grad_(True)
        self._new_leaves_first(outs, fwd, spec, made)
        # views of an input made before it left autograd (detach_()) keep their history
        now = [laid.get(i, t) for i, t in enumerate(args)] if laid else args
        old = [kept.get(i, t) for i, t in enumerate(now)] if kept else now
        self._rebuild_first(args, (old, now), fwd, outs, spec, made)
        for k in layout.new_leaves:
            if k not in self.rebuilt and k not in made and not outs[k].is_leaf:
                # computed from an input on for a while (``t = x * 2; x.requires_grad_();
                # t.requires_grad_(); x.detach_()``): eager's is the leaf it made
                outs[k] = outs[k].detach()
            # rebuilt as an alias (``x.detach().requires_grad_()``), or a view made under
            # no_grad of a tensor that requires grad, whose flag is its base's until
            # ``requires_grad_()`` gives it one (an accumulator of its own)
            if not outs[k].requires_grad or (k in layout.made_leaves and outs[k].is_leaf):
                outs[k].requires_grad_(True)
        # views of another output (``a.base_output``) last: made of that output as the
        # caller gets it (rebuilt, a leaf that requires grad)
        for a in self.aliases_last:
            if a.index not in made:
                outs[a.index] = self._rebuild(a, args, fwd, outs, spec, versions.get(a.index))
        return outs

    def _rebuild_first(
        self,
        args: Sequence[Any],
        old_now: tuple[Sequence[Any], Sequence[Any]],
        fwd: Sequence[Any],
        outs: list,
        spec: Any,
        made: set,
    ) -> None:
        """The aliases that are no view of another output, into ``outs``: of the inputs
        as they were (``old``: before a ``detach_()``) where they require grad, as they
        are now (``now``) otherwise."""
        old, now = old_now
        versions = self.layout.output_versions
        early = getattr(_made_early, "views", {}) if self.before_requires_grad else {}
        _made_early.views = {}
        pieces: dict[int, dict[int, Any]] = {}  # (``output_pieces``: per group, this call)
        for a in self.aliases_first:
            if a.index in early:  # (``early_views``) of it, or a view of it
                e = _unwritten_since(args[a.source], *early[a.index])
                with torch.enable_grad():
                    outs[a.index] = e if a.before_requires_grad == 1 else _view_of(e, spec(a.view))
            elif a.index in self.no_grad_roots:
                with torch.no_grad():
                    root = _view_of(args[a.source], None)
                with torch.enable_grad():
                    outs[a.index] = _view_of(root, spec(a.view))
            elif a.index not in made:
                of_input = a.verdict == OutputVerdict.ALIAS_OF_INPUT
                source = (old if a.requires_grad else now) if of_input else args
                piece = self._piece(a, (source, fwd), spec, pieces)
                outs[a.index] = (
                    piece
                    if piece is not None
                    else self._rebuild(a, source, fwd, outs, spec, versions.get(a.index))
                )

    def _new_leaves_first(self, outs: list, fwd: Sequence[Any], spec: Any, made: set) -> None:
        """Leaves made inside that the graph returns, before the aliases are rebuilt: views
        of them (``t[:, 1]``) are views of a leaf; those taken before ``requires_grad_()``
        made it one are made first, as eager's: leaves that require grad through their
        base, with no node (``made``)."""
        layout = self.layout
        bases = fwd[self.n_user : self.values_start]
        for k in layout.new_leaves:
            if k not in self.rebuilt and not outs[k].requires_grad:
                shared = any(o is outs[k] for j, o in enumerate(outs) if j != k) or any(
                    b is outs[k] for b in bases
                )
                if k in layout.merged_outputs and shared:
                    # ``t.detach().requires_grad_()`` returned with ``t``: one graph value
                    outs[k] = outs[k].detach()
                for a in self.views_before_output_leaf.get(k, ()):
                    outs[a.index] = _view_of(outs[k], spec(a.view))
                    made.add(a.index)
                outs[k].requires_grad_(True)

    def _piece(
        self, a: OutputAlias, sources: tuple[Sequence[Any], Sequence[Any]], spec: Any, made: dict
    ) -> Any:
        """Output ``a`` as one of the pieces of a multi-output view its group makes with
        one node (``output_pieces``), or None: rebuilt alone. ``sources``: the inputs,
        the forward's outputs (an intermediate base's slot)."""
        group = self.piece_of.get(a.index)
        if group is None:
            return None
        members = self.piece_groups[group]
        versions = self.layout.output_versions
        if group not in made:
            args, fwd = sources
            of_input = a.verdict == OutputVerdict.ALIAS_OF_INPUT
            base = args[a.source] if of_input else fwd[self.n_user + a.source]
            if not base.requires_grad or any(m.index in versions for m in members):
                made[group] = {}
            else:
                views = pieces_of(base, [spec(m.view) for m in members])
                made[group] = {m.index: v for m, v in zip(members, views)}
        return made[group].get(a.index)

    def _rebuild(
        self,
        a: OutputAlias,
        args: Sequence[Any],
        fwd: Sequence[Any],
        outs: list,
        spec: Any,
        version: int | None = None,
    ) -> Any:
        if a.verdict == OutputVerdict.IS_INPUT:
            return args[a.source]
        if a.verdict == OutputVerdict.ALIAS_OF_INPUT:
            base = args[a.source]
        elif a.verdict == OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT:
            base = outs[a.source]
        else:
            base = fwd[self.n_user + a.source]
        if version is not None:  # the base's, before the view records it
            _set_version(base, version, views=not base.requires_grad)
        assert a.view is not None
        meta = a.creation_meta
        if a.base_output >= 0:  # a view of that output, at the input's bytes
            with torch.no_grad() if a.untracked else contextlib.nullcontext():
                out = view_over(outs[a.base_output], spec(a.view), base)
            if a.index in self.layout.made_leaves and out.is_leaf:  # (``s[0].requires_grad_()``)
                out.requires_grad_(True)
            if meta is not None and out._is_view():  # (a piece of ``t.chunk(2)``)
                torch._C._autograd._set_creation_meta(out, meta)
            return out
        if a.detached:
            leaf = a.index in self.layout.new_leaves
            if a.detached == 2 and leaf and a.index not in self.layout.made_leaves:
                no_grad = a.creation_meta == _NO_GRAD_MODE
                return view_of_detached_leaf(base, spec(a.view), no_grad)
            out = detached_alias(base, spec(a.view), a.detached, a.requires_grad, leaf)
            if meta == _MULTI_OUTPUT and out._is_view():  # (``t.detach().chunk(2)[1]``)
                torch._C._autograd._set_creation_meta(out, meta)
            return out
        if a.routed:  # its history, which the base lost, is the graph's output's
            return routed_view(base, spec(a.view), outs[a.index])
        requires_grad = a.requires_grad or (a.grad_through_base and base.requires_grad)
        with torch.enable_grad() if a.with_grad else contextlib.nullcontext():
            out = regenerate(base, spec(a.view), requires_grad, no_grad=a.untracked)
        if a.of_leaf_view and out.is_leaf and out.requires_grad:
            with torch.enable_grad():
                out = out[...]
        if a.tracked and out.requires_grad:
            # eager's is a view (with grad on) of a view made under no_grad: its grad_fn
            # ends at that view, which autograd takes for a leaf, not at the base (an alias
            # keeps every stride; view_as would recompute those of size-1 dims)
            with torch.enable_grad():
                out = out[...]
        if meta is not None and out._is_view():
            torch._C._autograd._set_creation_meta(out, meta)
        return out


def _piece_groups(aliases: Sequence[OutputAlias], apart: set) -> dict[int, list[OutputAlias]]:
    """The outputs rebuilt together as pieces of one multi-output view of an input
    (``OutputAlias.piece``), per group: plain views that require grad (anything else
    about one, and it is rebuilt alone), groups of two or more."""
    groups: dict[int, list[OutputAlias]] = {}
    for a in aliases:
        plain_piece = (
            a.piece is not None
            and a.verdict in PIECE_BASES
            and a.creation_meta == _MULTI_OUTPUT
            and a.requires_grad
            and a.view is not None
            and plain(a.view)
            and a.index not in apart
            and not (a.detached or a.routed or a.untracked or a.with_grad)
            and not (a.of_leaf_view or a.grad_through_base or a.before_requires_grad)
        )
        if plain_piece:
            groups.setdefault(a.piece[0], []).append(a)
    return {g: ms for g, ms in groups.items() if len(ms) > 1}


def _requiring_grad(t: Any, detached: bool = False) -> Any:
    """``t``, or where it does not require grad (or eager's view is of such an alias:
    ``detached``) an alias of its bytes (its version counter too) that does: the base of
    a stale view eager returns, which requires grad (a view of
    ``t.detach().requires_grad_()`` made inside the function)."""
    return t if t.requires_grad and not detached else t.detach().requires_grad_(True)


def in_old_layouts(args: Sequence[Any], old: dict[int, tuple]) -> Sequence[Any]:
    """``args``, those in ``old`` (``Epilogue.change_metadata_first``) as views of
    themselves in their old layout, recorded by autograd."""
    if not old:
        return args
    out = list(args)
    with torch.enable_grad():
        for i, layout in old.items():
            out[i] = args[i].as_strided(*layout)
    return out


def _unwritten_since(source: Any, e: Any, view: Any, version: int) -> Any:
    """An early view (``Epilogue.early_views``) of ``source``, made again while ``source``
    does not require grad where the epilogue wrote it since: eager's was taken after the
    write, and its node is not rebuilt for it (ours would be, from the now grad-requiring
    leaf: an ``AsStridedBackward0`` where eager's view has none, soak 124519)."""
    if source._version == version or not (source.requires_grad and source.is_leaf):
        return e
    source.requires_grad_(False)
    try:
        return _view_of(source, view)
    finally:
        source.requires_grad_(True)


def _view_of(t: Any, view: Any) -> Any:
    """A view of ``t``: at ``view`` (a static ``ViewSpec``), or the whole of it."""
    if view is None:
        return t.view_as(t)
    if view.reinterpret is not None:  # (another dtype, a conj bit: alias.reinterpret)
        return reinterpreted_view(t, view)
    return t.as_strided(view.size, view.stride, t.storage_offset() + view.offset)


def _set_version(t: Any, version: int, views: bool = False) -> None:
    """A fresh output's version counter (a view's only with ``views``: autograd takes the
    change of a view requiring grad for a write to its base after the view was made)."""
    if (
        isinstance(t, torch.Tensor)
        and not t.is_inference()
        and (views or not t._is_view())
        and t._version != version
    ):
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))


def leaving_grad_mode(run: Callable[..., Any], layout: ForwardLayout) -> Callable[..., Any]:
    """``run``, then grad mode as the function leaves it where that is not the call's
    (``torch.set_grad_enabled(False)`` at its end, not undone: eager's caller goes on
    without grad; ``layout.grad_mode_after``)."""
    after = layout.grad_mode_after
    if after is None:
        return run

    def run_and_leave(*args: Any) -> Any:
        outs = run(*args)
        torch._C._set_grad_enabled(after)
        return outs

    return run_and_leave


def _data_outputs(outs: list, data: dict[int, tuple[int, bool, int]]) -> None:
    """Outputs that are an input's ``.data`` or views of one (``layout.data_outputs``),
    made of a ``.data`` of their own: eager's has a version counter of its own, which
    the caller's writes to it move (not the input's, whose saved values eager's backward
    checks). One per ``.data`` read: the one returned, else one over the whole storage
    the views see."""
    shared: dict[int, Any] = {}
    for k, (group, itself, _) in data.items():
        if itself:
            shared[group] = outs[k].data
    for k, (group, itself, _) in data.items():
        if group not in shared:
            o = outs[k]
            shared[group] = (o._base if o._base is not None else o).data
        d = shared[group]
        if not itself:
            with torch.no_grad():
                outs[k] = d.as_strided(outs[k].size(), outs[k].stride(), outs[k].storage_offset())
    for k, (group, itself, version) in data.items():
        if itself:
            outs[k] = shared[group]
        _set_version(outs[k], version)


def _of_root(o: Any) -> Any:
    """``o``, a view of a written view input taken before the write, as a view of its
    root base (``layout.views_past_write``): eager rebuilds its node from the base's new
    one, past the input's."""
    root = o._base
    if root is None or not o.requires_grad or o.grad_fn is None or _reinterprets(o, root):
        return o
    with torch.enable_grad():
        return _made_alike(root.as_strided(o.size(), o.stride(), o.storage_offset()), o)


def _made_alike(view: Any, o: Any) -> Any:
    """``view``, remade for the view ``o``, with ``o``'s creation meta (an ``unbind``
    output's: eager's in-place check on it raises)."""
    meta = torch._C._autograd._get_creation_meta(o) if o._is_view() else None
    if meta is not None and meta != _CREATION_DEFAULT:
        torch._C._autograd._set_creation_meta(view, meta)
    return view


_CREATION_DEFAULT = torch._C._autograd.CreationMeta.DEFAULT


def _through(t: Any, o: Any, view: Any) -> Any:
    """``o``, a view of the input ``t`` taken after the function re-laid it, made of ``t``
    as re-laid (``layout.views_after_relaid``): eager's node reaches ``t``'s new one,
    through the layouts its chain's ``as_strided`` s were taken of (``ViewSpec.through``
    of ``view``, its spec: ``t.diagonal().as_strided(...)`` passes gradient only to the
    diagonal). Not a view reinterpreting the bytes (``view_as_complex``, a conj bit):
    left as made."""
    if not o.requires_grad or o.grad_fn is None or not t.requires_grad or _reinterprets(o, t):
        return o
    at = o.storage_offset() - view.offset  # (where the input started: specs count from it)
    with torch.enable_grad():
        for s in view.through:
            t = t.as_strided(s.size, s.stride, at + s.offset)
        return _made_alike(t.as_strided(o.size(), o.stride(), o.storage_offset()), o)


def _reinterprets(o: Any, t: Any) -> bool:
    return o.dtype != t.dtype or o.is_conj() or o.is_neg()


def _views_of_written_inputs(
    outs: list, args: Sequence[Any], layout: ForwardLayout, spec: Any
) -> None:
    """Outputs viewing an input as eager's do after the input's write: taken after it
    re-laid the input, of the input as re-laid (``views_after_relaid``); taken before a
    write, of the root base (``layout.views_past_write``: last, a later write rebuilds a
    view taken after a re-lay too); of an input ``set_()`` to another's storage, of that
    input (its base and version counter: ``views_of_set_inputs``)."""
    if layout.views_after_relaid:
        made = {a.index: a for a in layout.output_aliases}
        for k in layout.views_after_relaid:
            a = made[k]
            outs[k] = _through(args[a.source], outs[k], spec(a.view))
    for k in layout.views_past_write:
        outs[k] = _of_root(outs[k])
    for k, i in layout.views_of_set_inputs.items():
        with torch.no_grad():
            outs[k] = args[i].as_strided(outs[k].size(), outs[k].stride(), outs[k].storage_offset())
