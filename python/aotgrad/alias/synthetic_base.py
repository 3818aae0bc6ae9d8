"""Synthetic bases: inputs that overlap in memory, one of them written by the function.

Traced as separate inputs, ``f(x[0], x)`` writing through the first would leave
the graph's copy of the second stale. So the graph instead takes one input
for the whole group — their common base — and rebuilds each member inside
the graph as an ``as_strided`` view of it; functionalization then propagates
the write to every member, the graph returns the base's new value and the
runtime copies it into the real base.

The base is the members' common ``._base`` (autograd differentiates through
it), or, when they have none in common and none requires grad, a flat view
of their whole storage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import UnsupportedError
from .storage import overlap_groups
from .views import set_metadata


def _storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@dataclass(frozen=True)
class SyntheticBase:
    #: Graph-input positions of the members (replaced by the base).
    members: tuple[int, ...]
    #: (size, stride, absolute storage offset) of each member.
    views: tuple[tuple[tuple[int, ...], tuple[int, ...], int], ...]
    #: True: the base is the members' common ``._base``; False: a flat storage view.
    common_base: bool
    num_inputs: int
    #: Members whose sizes/strides/offset the function changed (``t_()``), and the new
    #: (size, stride, absolute offset): recorded while tracing, replayed on the real ones.
    new_views: dict[int, tuple[tuple[int, ...], tuple[int, ...], int]] = field(
        default_factory=dict, compare=False
    )

    @classmethod
    def of(cls, tensors: Sequence[Any], written: Sequence[int], *, dynamic: bool) -> SyntheticBase:
        """The synthetic base for the overlap groups of the ``written`` graph inputs."""
        storage = [
            _storage_id(t) if isinstance(t, torch.Tensor) else -1 - i for i, t in enumerate(tensors)
        ]
        groups = overlap_groups(tensors, storage)
        wanted = {groups[i] for i in written}
        members = tuple(i for i, g in enumerate(groups) if g in wanted)
        names = ", ".join(map(str, members))
        if dynamic:
            raise UnsupportedError(
                f"inputs {names} overlap in memory and one is written in place: synthetic "
                "bases are not supported with dynamic=True"
            )
        if len({_storage_id(tensors[i]) for i in members}) != 1:
            raise UnsupportedError(f"inputs {names} written in place overlap across storages")
        roots = {id(_root(tensors[i])) for i in members}
        common = len(roots) == 1
        if not common and any(tensors[i].requires_grad for i in members):
            raise UnsupportedError(
                f"inputs {names} overlap in memory, one is written in place, one requires "
                "grad and they are not views of one common tensor: not supported"
            )
        if len({tensors[i].dtype for i in members}) != 1:
            raise UnsupportedError(f"inputs {names} overlap in memory with different dtypes")
        views = tuple(
            (tuple(tensors[i].shape), tuple(tensors[i].stride()), tensors[i].storage_offset())
            for i in members
        )
        return cls(members, views, common, len(tensors))

    def base(self, tensors: Sequence[Any]) -> torch.Tensor:
        first = tensors[self.members[0]]
        if self.common_base:
            return _root(first)
        n = first.untyped_storage().nbytes() // first.element_size()
        return first.as_strided((n,), (1,), 0)

    def replay_metadata(self, tensors: Sequence[Any]) -> None:
        """Give the real members the metadata the function gave them (``b.t_()``)."""
        for i, (size, stride, offset) in self.new_views.items():
            set_metadata(tensors[i], size, stride, offset)

    def prepare(self, tensors: Sequence[Any]) -> list[Any]:
        """The graph's inputs for one call: the base, then the non-members."""
        member_set = set(self.members)
        return [self.base(tensors), *(t for i, t in enumerate(tensors) if i not in member_set)]

    def wrap(self, flat_fn: Callable[..., Any]) -> Callable[..., Any]:
        """``flat_fn`` taking the base and the non-members, rebuilding the members."""
        members, views, n = self.members, self.views, self.num_inputs
        new_views = self.new_views

        def with_base(base: torch.Tensor, *others: Any) -> Any:
            rest = iter(others)
            built = dict(zip(members, (base.as_strided(*v) for v in views)))
            out = flat_fn(*(built[i] if i in built else next(rest) for i in range(n)))
            for i, v in zip(members, views):
                t = built[i]
                now = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
                if now != v:
                    new_views[i] = now
            return out

        with_base.__qualname__ = getattr(flat_fn, "__qualname__", "with_base")
        return with_base


def _root(t: torch.Tensor) -> torch.Tensor:
    return t if t._base is None else t._base
