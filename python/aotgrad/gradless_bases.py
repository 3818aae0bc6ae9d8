"""Inputs that are views requiring grad of a base that does not
(``l = torch.randn(8, 4); x = l[2:6]; x.requires_grad_()``).

Eager's views of such an input made without history (under ``no_grad``) are views of
``l``: they require no grad, and a later view or write of theirs with grad on records
nothing about them. The trace's stand-in for ``x`` is a leaf (or, where the function
writes it, a view of a copy that requires grad), so its views would say they require
grad through it: autograd then raises for a write under ``no_grad`` followed by a view
with grad ("A view was created in no_grad mode and its base ... has been modified
inplace") where eager runs, and outputs require grad where eager's do not.

Such views are made of a detached alias of the stand-in instead, which the alias facts
read as the input (``aliases``): the runtime returns them as views of the caller's
tensor, whose ``._base`` is eager's.

An input that requires no grad is left alone: its views gain a history when the base is
written with grad (``x0[1:3].add_(w)`` beside an earlier ``t = x1[0]``), as eager's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class GradlessBases:
    #: The stand-ins of inputs that are views of a base that requires no grad, and of the
    #: copies a written input's stand-in views (by id).
    stand_ins: frozenset[int] = frozenset()
    #: Per detached alias views were made of (by id): it (kept alive), and the stand-in it
    #: aliases (``alias.facts.collect``: a view of it is a view of the input).
    aliases: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    #: Per stand-in in ``stand_ins``, its autograd node when the function starts: a write
    #: with grad gives it another, and eager's base a history (its views require grad).
    start_nodes: dict[int, Any] = field(default_factory=dict)
    #: Per stand-in, its version count when the function starts.
    start_versions: dict[int, int] = field(default_factory=dict)

    @classmethod
    def of_inputs(cls, pairs: Sequence[tuple[Any, Any]]) -> GradlessBases:
        """From (stand-in, caller's tensor) pairs."""
        members = [
            t
            for a, o in pairs
            if o._is_view() and not o._base.requires_grad
            for t in (a, a._base)  # (a cloned input's copy views a copy of its storage)
            if t is not None
        ]
        return cls(
            frozenset(id(t) for t in members),
            start_nodes={id(t): t.grad_fn for t in members},
            start_versions={id(t): t._version for t in members},
        )

    def made(self, func: Any, args: Any, kwargs: dict, result: Any) -> Any:
        """``result`` of ``func(*args, **kwargs)``, or, where it is a view without history
        of such an input that requires grad, the same view of a detached alias of it."""
        of = self._stand_in(args)
        if of is None:
            return result
        views = result if isinstance(result, (tuple, list)) else (result,)
        if not any(_view_without_history(r) for r in views):
            return result
        alias = args[0].detach()
        self.aliases[id(alias)] = (alias, of)
        return func(alias, *args[1:], **kwargs)

    def _stand_in(self, args: Any) -> Any:
        """The stand-in ``args[0]`` is or views, if it is one of ``stand_ins`` and requires
        grad, not written with grad since the function started (one that does not
        require grad, or was written so, has a history from the write as eager's base
        does, and its views require grad as eager's do)."""
        if not self.stand_ins or not args or not isinstance(args[0], torch.Tensor):
            return None
        t = args[0]
        of = t if id(t) in self.stand_ins else t._base
        if of is None or id(of) not in self.stand_ins or not of.requires_grad:
            return None
        if of._is_view() and of._version != self.start_versions[id(of)]:
            # written since (with grad or not): its node is rebuilt, another one; reading
            # it here, inside an op the trace dispatches, could be inside that rebuild
            # of it, whose lock it takes again: a hang (soak 239762)
            return None
        try:
            return of if of.grad_fn is self.start_nodes[id(of)] else None
        except RuntimeError:  # a stale view
            return None


def _view_without_history(r: Any) -> bool:
    """A view that would say it requires grad through its base only."""
    if not (isinstance(r, torch.Tensor) and r._is_view()):
        return False
    try:
        return r.grad_fn is None
    except RuntimeError:  # a stale one: left as it is
        return False
