"""Stage 6b, first part — the function's writes to its inputs, replayed on the caller's
tensors after the compiled forward: new metadata and values in eager's order, storage
sizes, version counts as eager's, and inputs taken out of autograd (``detach_()``).
``Epilogue`` (``runtime.epilogue``) runs them before it rebuilds the outputs."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from typing import Any

import torch

from ..alias import ViewSpec
from ..alias.views import leaf_if_readable, replay_metadata
from .layout import ForwardLayout

#: Per thread, the metadata ``Epilogue.change_metadata_first`` gave inputs before the graph.
_made_early = threading.local()


def _identity(spec: ViewSpec) -> ViewSpec:
    return spec


class InputWrites:
    """The input-writing half of ``Epilogue`` (its ``layout``, ``values_start``,
    ``metadata_first`` and ``versioned``)."""

    layout: ForwardLayout
    values_start: int
    metadata_first: list[int]
    versioned: list[tuple[int, int]]
    #: ``PostWriteLink.onto_value``, where a written value reads a linked input after
    #: its write (``layout.post_write_values``).
    value_link: Any = None

    def _write_inputs(
        self, args: Sequence[Any], fwd: Sequence[Any], spec: Any, before: list[int]
    ) -> dict[int, Any]:
        """The function's writes to its inputs, replayed on the caller's tensors: values,
        then metadata, storage sizes, version counts, ``detach_()``. Returns, per input
        taken out of autograd, an alias of it from before (its history kept)."""
        layout = self.layout
        relaid = layout.relaid_inputs
        targets = self._version_targets(args, before)
        # the new metadata first, the values then written through it; an input whose new
        # metadata covers other bytes gets its value in the caller's layout, then the
        # new metadata (trace.functional.layout_anchors). Metadata autograd records, of
        # an input not written itself, comes last: a write to an overlapping input after
        # it would make autograd rebuild its node from the base (see _replay_metadata).
        written = set(layout.mutated_inputs)
        late = [
            i
            for i in layout.metadata_mutations
            if i in relaid or (i in layout.metadata_with_grad and i not in written)
        ]
        done = getattr(_made_early, "metadata_first", {}) if self.metadata_first else {}
        _made_early.metadata_first = {}
        retained = self._retained_written(args, late, done, spec)
        late += list(retained)
        if self.value_link is not None:  # (re-laid before the values that read them)
            read = set(layout.post_write_values.values())
            late = [i for i in late if i not in read or i in retained]
        for i, view in layout.metadata_mutations.items():
            if i not in late and i not in done:
                self._replay_metadata(args[i], spec(view), i, targets, spec)
        for i, (flag_off, _) in layout.left_then_written.items():
            # out of autograd before the write that gives it its history (the compiled
            # Function holds the caller's tensor as it was: gradients of what the function
            # computed from it before reach its old history)
            if flag_off:
                args[i].requires_grad_(False)
            elif args[i].requires_grad:
                args[i].detach_()
        self._write_values(args, fwd, {i: v for i, v in done.items() if i in relaid}, retained)
        for i in late:
            if i in done:
                continue
            self._replay_metadata(args[i], spec(layout.metadata_mutations[i]), i, targets, spec)
        for i, after in layout.storage_resizes.items():
            torch.ops.inductor.resize_storage_bytes_(args[i], after)
        self._set_versions(args, targets)
        return self._leave_autograd(args)

    def _retained_written(
        self, args: Sequence[Any], late: list[int], done: dict, spec: Any
    ) -> dict[int, tuple]:
        """Inputs that retain grad (``retain_grad()`` by the caller, or the function at an
        earlier call) whose metadata the function changed and that it wrote with grad:
        their value is written first, through a view at the new layout, then the metadata
        (per input, that layout). The other order trips autograd's move of the retain
        hook (``out != nullptr`` in variable.cpp: a recorded write after a recorded
        ``as_strided_`` finds the hook on no node); eager's own order there raises too."""
        layout = self.layout
        found = {}
        for i, view in layout.metadata_mutations.items():
            k = layout.mutated_inputs.index(i) if i in layout.mutated_inputs else -1
            if k < 0 or i in late or i in done or not args[i].retains_grad:
                continue
            if layout.mutation_with_grad[k] or i in layout.left_then_written:
                new = spec(view)
                found[i] = (new.size, new.stride, args[i].storage_offset() + new.offset)
        return found

    def _write_values(
        self, args: Sequence[Any], fwd: Sequence[Any], relaid: dict, new_layout: dict
    ) -> None:
        """The written inputs' new values, copied into the caller's tensors (a relaid
        one whose new metadata was given before the graph, ``relaid``: in its old
        layout, which its value has; one whose metadata comes after, ``new_layout``:
        through a view at the new one, recorded by autograd)."""
        layout = self.layout
        start = self.values_start
        new_values = fwd[start : start + len(layout.mutated_inputs)]
        writes = list(zip(layout.mutated_inputs, new_values, layout.mutation_with_grad))
        if self.value_link is not None:  # (each after the input its value reads)
            writes = _after_what_they_read(writes, layout.post_write_values)
        for i, value, with_grad in writes:
            target = args[i]
            if target is value:
                continue
            if i in layout.post_write_values and self.value_link is not None:
                value = self.value_link(args, i, value)
            leaf = target.requires_grad and leaf_if_readable(target)
            if i in relaid:  # (a leaf that requires grad now: written under no_grad)
                with torch.no_grad():
                    target = target.as_strided(*relaid[i])
            elif i in new_layout:
                with torch.enable_grad():
                    target = target.as_strided(*new_layout[i])
            elif target.shape != value.shape and i not in layout.relaid_inputs:
                # resized by the function (an ``out=`` tensor of another shape): eager
                # resizes it, then writes it
                with torch.no_grad():
                    target.resize_(value.shape)
            if i in layout.storage_sets:
                with torch.no_grad():
                    target.set_(value)
            elif (with_grad or i in layout.left_then_written) and not leaf:
                # (a leaf that requires grad here was made one after the write, which
                # ``detach_()`` took out of autograd: see ``prepare``)
                # autograd records the write (CopyBackwards), under a no_grad call too
                # when the function wrote it in an enable_grad block
                with torch.enable_grad():
                    target.copy_(value)
            else:
                with torch.no_grad():
                    target.copy_(value)

    def _leave_autograd(self, args: Sequence[Any]) -> dict[int, Any]:
        """``detach_()`` / ``requires_grad_(False)`` inside the function: views returned of
        the input are made of it out of autograd, as eager's are; those made before it keep
        their history: made of an alias taken now (returned, per input)."""
        kept = {}
        for i, flag in self.layout.requires_grad_changes.items():
            if not flag:
                if args[i].requires_grad:
                    kept[i] = _alias(args[i])
                if i in self.layout.requires_grad_flag_off:
                    args[i].requires_grad_(False)
                else:
                    args[i].detach_()
        return kept

    def _replay_metadata(
        self, t: Any, view: Any, i: int, targets: dict[int, int], spec: Any = _identity
    ) -> None:
        """Input ``i``'s new metadata; recorded by autograd where the function's change was
        (then at the version count eager ends with: a later change of the count would make
        autograd rebuild the view's node from its base, as a plain ``as_strided`` that
        reads elements eager's ``as_strided_`` dropped)."""
        record = i in self.layout.metadata_with_grad
        steps = self.layout.metadata_steps.get(i)
        if steps:  # changes under no_grad and with grad, each as autograd saw it
            for earlier, recorded in steps[:-1]:
                replay_metadata(t, spec(earlier), record=recorded and record)
            view, last = steps[-1]
            view, record = spec(view), last and record
        target = targets.get(i, -1)
        if record and target > 0:
            torch._C._autograd._unsafe_set_version_counter((t,), (target - 1,))
        replay_metadata(t, view, record=record, keep_version=not record or target <= 0)

    def _version_targets(self, args: Sequence[Any], before: list[int]) -> dict[int, int]:
        """Per input, the version count eager leaves it with: views of one tensor share a
        counter, which every write through any of them bumps (-1: inference tensors)."""
        if len(self.versioned) == 1:
            (i, delta), v0 = self.versioned[0], before[0]
            return {i: v0 + delta if v0 >= 0 else -1}
        shared: dict[int, int] = {}
        for (i, delta), v0 in zip(self.versioned, before):
            root = args[i] if args[i]._base is None else args[i]._base
            shared[id(root)] = shared.get(id(root), v0) + delta
        targets = {}
        for (i, _), v0 in zip(self.versioned, before):
            t = args[i]
            targets[i] = shared[id(t if t._base is None else t._base)] if v0 >= 0 else -1
        return targets

    def _set_versions(self, args: Sequence[Any], targets: dict[int, int]) -> None:
        for i, target in targets.items():
            if target >= 0 and args[i]._version != target:
                torch._C._autograd._unsafe_set_version_counter((args[i],), (target,))


def _alias(t: Any) -> Any:
    """A view of all of ``t`` (with ``t``'s history where it has one)."""
    with torch.enable_grad() if t.requires_grad else contextlib.nullcontext():
        return t.view(t.shape)


def _after_what_they_read(writes: list[tuple], reads: dict[int, int]) -> list[tuple]:
    """``writes`` (input first) ordered so that each comes after the write of the input
    its value reads (``layout.post_write_values``; a chain in order), else as given."""
    done: set[int] = set()
    ordered: list[tuple] = []
    written = {w[0] for w in writes}
    pending = list(writes)
    while pending:
        ready = [w for w in pending if reads.get(w[0]) not in written - done]
        for w in ready or pending:  # (a cycle cannot be traced; as given, if so)
            ordered.append(w)
            done.add(w[0])
        pending = [w for w in pending if w[0] not in done]
    return ordered
