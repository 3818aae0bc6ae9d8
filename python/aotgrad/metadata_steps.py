"""An input's in-place metadata changes (``t_()``, ``as_strided_``) made partly under
no_grad and partly with grad: the steps autograd records, and those it does not.

The runtime replayed an input's new metadata as one ``as_strided_`` from the caller's
layout, recorded by autograd or not. Eager records each change made with grad from the
layout the input had then: ``x.as_strided_(..)`` under no_grad, then ``x.transpose_(0,
1)`` with grad, gives ``x`` a node that transposes from the no_grad layout, not one that
maps the caller's layout onto the final one; a view of ``x`` returned got another
gradient, silently (soak 40282). ``MetadataSteps`` notes each change of an input while
tracing, with whether autograd records it; ``mixed()`` gives, per input whose changes
mix both, the layouts to replay in order, consecutive ones of one kind merged (the last
of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .alias.views import ViewSpec
from .errors import EagerRefusal

__all__ = ["MetadataSteps"]


class MetadataSteps:
    def __init__(self, inputs: Sequence[Any]) -> None:
        #: Per input's stand-in (by id): its position and its storage offset at the start.
        self.inputs = {
            id(t): (k, t.storage_offset())
            for k, t in enumerate(inputs)
            if isinstance(t, torch.Tensor)
        }
        self.steps: dict[int, list[tuple[ViewSpec, bool]]] = {}
        #: Tensors autograd rebuilds from their base since their last change, by id
        #: (``rebuilt``): a synthetic base's member is replayed as changed unrecorded
        #: (``alias.synthetic_base``).
        self.rebuilt_ids: set[int] = set()
        #: Leaf inputs that require grad relaid under no_grad (``note_relaid_leaf``), by id.
        self.relaid_leaves: set[int] = set()

    def note(self, t: Any) -> None:
        """``t`` had its metadata changed in place: if an input, its layout now, and
        whether autograd recorded the change (grad mode on, ``t`` requiring grad)."""
        self.rebuilt_ids.discard(id(t))
        known = self.inputs.get(id(t))
        if known is None:
            return
        position, start = known
        recorded = torch.is_grad_enabled() and t.requires_grad
        self.steps.setdefault(position, []).append((ViewSpec.at(t, start), recorded))

    def rebuilt(self, tensors: Sequence[Any]) -> None:
        """``tensors``: restrided past their elements (``restrides.Reachers``), now
        rebuilt by autograd from their base as a plain ``as_strided`` after a write."""
        self.rebuilt_ids.update(id(t) for t in tensors)

    def recorded_last(self) -> list[int]:
        """The inputs whose last change autograd recorded: one that did not require grad
        when the call began may by then (a write with grad gave it a history)."""
        return [position for position, steps in self.steps.items() if steps[-1][1]]

    def mixed(self) -> dict[int, list[tuple[ViewSpec, bool]]]:
        out = {}
        for position, steps in self.steps.items():
            merged: list[tuple[ViewSpec, bool]] = []
            for spec, recorded in steps:
                if merged and merged[-1][1] == recorded:
                    merged[-1] = (spec, recorded)
                else:
                    merged.append((spec, recorded))
            if len(merged) > 1:
                out[position] = merged
        return out

    def note_relaid_leaf(self, t: Any, leaves: frozenset[int], views: frozenset[int]) -> None:
        """``t``, a leaf input that requires grad and is no view (``leaves``, ``views``: the
        stand-ins' ids; a leaf view's change is replayed on its base, ``synthetic_base``),
        had its metadata changed under no_grad: a later read of it with grad is refused
        (``refuse_read``)."""
        if id(t) in leaves and id(t) not in views and not torch.is_grad_enabled():
            self.relaid_leaves.add(id(t))

    def refuse_read(self, args: Any, result: Any) -> None:
        """Raises ``EagerRefusal`` where ``result`` was computed with grad from a leaf input
        relaid under no_grad (``note_relaid_leaf``): eager's gradient for that read has the
        leaf's new layout (its accumulator's metadata is taken then), the compiled
        Function's the layout it was called with (soak 124227). The call runs eagerly."""
        if not (isinstance(result, torch.Tensor) and result.grad_fn is not None):
            return
        if any(isinstance(a, torch.Tensor) and id(a) in self.relaid_leaves for a in args):
            if result._is_view():  # (an output view is made of the caller's tensor)
                self.relaid_leaves.add(id(result))
                return
            raise EagerRefusal(
                "a leaf input that requires grad, its metadata changed in place under "
                "no_grad, is read with grad after: its gradient would be laid out as the "
                "call found it, not as eager's"
            )
