"""Views whose node eager remakes from a base that has no history: no gradient reaches
the input through them.

Eager keeps, per view with a history, the version count its node was made at. Once a
write its node does not record moves that count (one under ``no_grad``, through the
base or another view), the next read of its node makes a new one from the view's base.
Where that base requires no grad, the new node leads nowhere: the view still requires
grad, and what is computed from it gets no gradient to where the old node led. Two
inputs' views meet it:

- a view input whose base requires no grad (``x = l[:, 4:]; x.requires_grad_()``, with
  ``l`` without grad): eager's ``t = x[::2]`` is a view of ``l``;
- an input the function took out of autograd (``x.detach_()``) after making ``t``;
- such a view passed in itself (``t`` above, across a Dynamo graph break).

The trace's views of the stand-ins keep their node (its stand-in is a leaf of its own, or
its own ``detach_()`` is undone for the graph): the input got their gradient (soak
239338, 241072). Such a call runs eagerly (``run_eagerly``) where a view read with grad,
or returned, is one of them.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from .errors import NeedsSyntheticBase, UnsupportedError, run_eagerly
from .inplace_checks import leaves_sharing_storage
from .stale_input_views import reads_node

__all__ = ["RemadeViewNodes"]

_REMADE = (
    "a view made with grad of an input (a view of a base that requires no grad, or one "
    "the function detached in place) read after a write autograd does not record: eager "
    "remakes its node from the base, and no gradient reaches the input through it; the "
    "calls run eagerly"
)


@dataclass
class RemadeViewNodes:
    #: The stand-ins of the inputs and their bases (by id).
    roots: frozenset[int] = frozenset()
    #: Of those, the ones eager's views of which are views of a base without grad.
    gradless: frozenset[int] = frozenset()
    #: Views with a history made of them (by id): each (weakly: one held would count as
    #: alive for the trace's other trackers, ``EarlierViews``), its version count when
    #: made, whether eager's base of it requires no grad whatever the function does, and
    #: its root's id.
    views: dict[int, tuple[Any, int, bool, int]] = field(default_factory=dict)
    #: Of ``roots``, those of inputs on a storage another input shares: root id → input.
    shared: dict[int, int] = field(default_factory=dict)

    def note(self, args: Any, result: Any) -> None:
        """The views with a history ``result`` holds, made of ``args[0]``, if that is one
        of ``roots`` or a view of one (an in-place call returning one again is no new
        view)."""
        t = args[0] if args else None
        if not isinstance(t, torch.Tensor) or not torch.is_grad_enabled():
            return
        root = t if id(t) in self.roots else t._base
        if root is None or id(root) not in self.roots:
            return
        for v in result if isinstance(result, (tuple, list)) else (result,):
            if (
                isinstance(v, torch.Tensor)
                and not self._holds(v)
                and v._is_view()
                and v.requires_grad
            ):
                gradless = id(root) in self.gradless
                self.views[id(v)] = (weakref.ref(v), v._version, gradless, id(root))

    def check(self, func: Any, args: Any, kwargs: Any, result: Any) -> None:
        """Runs the calls eagerly where ``func`` recorded autograd on one of ``views``
        whose node eager remakes (of a gradless base), or read its node
        (``register_hook``); the outputs are checked so too (``func`` None, ``result``
        them)."""
        recorded = False  # (the trace remakes the node of a detached input's view as
        # eager does where an op records on it: its value returned, or a hook, differ)
        if func is not None:
            outs = result if isinstance(result, (tuple, list)) else (result,)
            recorded = torch.is_grad_enabled() and any(
                isinstance(r, torch.Tensor) and r.requires_grad for r in outs
            )
            if not (recorded or reads_node(func)):
                return
            result = tree_leaves((args, kwargs or {}))
        for t in result:
            entry = self.views.get(id(t)) if isinstance(t, torch.Tensor) else None
            if entry is None or entry[0]() is not t or t._version == entry[1]:
                continue
            if entry[2] or not (recorded or t._base.requires_grad):
                raise self._refusal(entry[3])

    def _refusal(self, root: int) -> Exception:
        """Where the input shares its storage with another, the function is traced again
        over their common base (``alias.synthetic_base``): its members are made as the
        caller's are, and autograd remakes their views' nodes there as eager does."""
        k = self.shared.get(root)
        if k is None:
            return run_eagerly(UnsupportedError(_REMADE))
        return NeedsSyntheticBase(
            f"input {k}, on a storage another input shares, has a view " + _REMADE[7:],
            [k],
            whole_storage=[k],
        )

    def _holds(self, v: Any) -> bool:
        entry = self.views.get(id(v))
        return entry is not None and entry[0]() is v

    @classmethod
    def of_inputs(cls, pairs: Sequence[tuple[Any, Any]], roots: frozenset[int]) -> RemadeViewNodes:
        """From (stand-in, caller's tensor) pairs and the ids of the stand-ins and their
        bases."""
        gradless = frozenset(
            id(t)
            for a, o in pairs
            if o._is_view() and not o._base.requires_grad
            for t in (a, a._base)
            if t is not None
        )
        # such an input with a history of its own (Dynamo's graph after a break at the
        # base's ``detach_()``) is one of those views itself
        views = {
            id(a): (weakref.ref(a), a._version, True, id(a))
            for a, o in pairs
            if o._is_view() and not o._base.requires_grad and o.grad_fn is not None
        }
        shared = leaves_sharing_storage(pairs, leaves_only=False)
        by_root = {
            id(t): k
            for a, _ in pairs
            if id(a) in shared
            for k in [shared[id(a)]]
            for t in (a, a._base)
            if t is not None
        }
        return cls(roots, gradless, views, by_root)
