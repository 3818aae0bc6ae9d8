"""One version counter for inputs that share one in the caller, while tracing.

Views of one tensor share its version counter: in eager, a write to ``b[:4]`` (even under
``no_grad``, even a metadata change such as ``t_()``) moves the counter ``b[4:]`` reads.
What autograd decides from that counter follows: a view of ``b[4:]`` made under
``no_grad`` before the write raises when its ``grad_fn`` is read, a tensor saved from
``b[4:]`` fails the backward. Traced, each input is a stand-in of its own, with a counter of
its own, unless the function writes it with grad (then the inputs are views of one
synthetic base: ``alias.siblings.join_siblings``).

``SharedCounters`` keeps the stand-ins' counters moving together: after each call it adds
what each member of a group gained to the others, and keeps count of those additions so
that the inputs' version deltas can leave them out (``own``): each is the member's own
writes, which the runtime sums per caller tensor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef


def _root(t: torch.Tensor) -> torch.Tensor:
    return t._base if t._is_view() and t._base is not None else t


class SharedCounters:
    """Groups of stand-ins whose caller tensors share a version counter."""

    def __init__(self, pairs: Sequence[tuple[Any, Any]] = ()) -> None:
        by_root: dict[int, list[Any]] = {}
        for stand_in, original in pairs:
            if isinstance(original, torch.Tensor) and not original.is_inference():
                by_root.setdefault(id(_root(original)), []).append(stand_in)
        #: Only groups whose stand-ins do not share a storage (a counter) already.
        self.groups = [
            g for g in by_root.values() if len({StorageWeakRef(t.untyped_storage()) for t in g}) > 1
        ]
        #: Per stand-in (by id), what ``sync`` added to its counter.
        self.added: dict[int, int] = {}

    def versions(self) -> list[list[int]]:
        return [[t._version for t in g] for g in self.groups]

    def sync(self, before: list[list[int]]) -> None:
        """Add to each member what the others gained since ``before``."""
        for group, was in zip(self.groups, before):
            gained = [t._version - v for t, v in zip(group, was)]
            total = sum(gained)
            if not total:
                continue
            for t, own in zip(group, gained):
                extra = total - own
                if extra:
                    torch._C._autograd._unsafe_set_version_counter((t,), (t._version + extra,))
                    self.added[id(t)] = self.added.get(id(t), 0) + extra

    def own(self, snapshot: Sequence[tuple[int, Any]], stand_ins: Sequence[Any]) -> list:
        """``snapshot`` (``alias.facts.snapshot`` of ``stand_ins``, from before the call)
        with what ``sync`` added counted in: the version deltas read against it are each
        input's own (the runtime sums them per caller tensor). The counters themselves
        stay as they are: views made after a write recorded them."""
        return [(v + self.added.get(id(w), 0), *rest) for (v, *rest), w in zip(snapshot, stand_ins)]
