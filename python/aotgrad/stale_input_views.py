"""Inputs that are views autograd cannot rebuild once written: made by an op with several
view outputs (``unbind``, ``split``), under ``no_grad`` of a tensor that requires grad,
or inside a custom Function.

Eager: after a write to such a view, its base or another view of the base (under
``no_grad``: a write with grad raises at once), reading the view's ``grad_fn`` raises
("Output 0 of Unbind is a view and its base or another view of its base has been modified
inplace. This view is the output of a function that returns multiple views..."), and so
does every op that records autograd on it, which reads it. The trace's stand-in for the
input is no view of anything: the write leaves it usable, and the compiled call returned
gradients where eager raises (blind probe, multi-output views). Each such call raises
eager's error instead (an ``EagerRefusal``: the call runs eagerly, which raises it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from .alias.views import node_unreadable
from .errors import EagerRefusal

__all__ = ["StaleInputViews", "reads_node"]

_CM = torch._C._autograd.CreationMeta
#: Creation metas whose views autograd refuses to rebuild after a write.
_NOT_REBUILT = (_CM.MULTI_OUTPUT_NODE, _CM.NO_GRAD_MODE, _CM.IN_CUSTOM_FUNCTION)
#: ``t.grad_fn`` / ``t.is_leaf``, as a function mode sees them (their getters).
_NODE_READS = (torch._C.TensorBase.__dict__["grad_fn"], torch._C.TensorBase.__dict__["is_leaf"])
#: Calls that read the tensor's ``grad_fn`` inside, unseen by a function mode
#: (``register_hook``: "Accessing grad_fn refreshes a stale view"). A hook on an input
#: whose metadata the function changed (``t_()``, ``as_strided_``) stays in the trace
#: (``trace.metadata._with_hooks``), on the stand-in, whose node reads without error.
_NODE_READING_CALLS = (torch.Tensor.register_hook,)


_WRITTEN = (
    "a view made by a function returning multiple views, in no_grad mode or inside a "
    "custom Function (or a view of one) is being modified inplace with grad mode enabled"
)


def reads_node(func: Any) -> bool:
    """Whether ``func`` reads its tensor's ``grad_fn`` (the getter, ``is_leaf``,
    ``register_hook``), which a function mode sees without autograd recording."""
    return getattr(func, "__self__", None) in _NODE_READS or func in _NODE_READING_CALLS


def _eager_message(o: torch.Tensor) -> str | None:
    """What reading the ``grad_fn`` of the caller's view ``o`` (a fake) raises once it
    is written: asked of ``o`` itself, its version count moved for the question only."""
    version = o._version
    torch._C._autograd._unsafe_set_version_counter((o,), (version + 1,))
    try:
        o.grad_fn  # noqa: B018 (the read is the question)
    except RuntimeError as e:
        return str(e)
    finally:
        torch._C._autograd._unsafe_set_version_counter((o,), (version,))
    return None


def _returned_itself(func: Any, outs: Sequence[Any], args: Any, kwargs: dict) -> bool:
    """``func`` returned its tensor argument itself without writing it (``x.to(x.dtype)``,
    ``contiguous()``): autograd recorded nothing. (An in-place op returns it too, written.)"""
    if len(outs) != 1 or not args or outs[0] is not args[0] or "out" in kwargs:
        return False
    name = getattr(func, "__name__", "")
    return not (name.endswith("_") and not name.endswith("__")) and not name.startswith("__i")


@dataclass
class StaleInputViews:
    #: Per watched stand-in (by id): it, its version count when the function starts
    #: (None: written before the call), and eager's error once it moves.
    watched: dict[int, tuple[Any, int | None, str]] = field(default_factory=dict)
    #: The watched stand-ins whose node the function read (by id), stale or not.
    node_read: set[int] = field(default_factory=set)
    #: The stand-ins of every input that is such a view, with grad or not (by id).
    unwritable: frozenset[int] = frozenset()

    @classmethod
    def of_inputs(cls, pairs: Sequence[tuple[Any, Any]]) -> StaleInputViews:
        """From (stand-in, caller's tensor) pairs: the inputs that are such views and
        require grad."""
        watched = {}
        unwritable = frozenset(
            id(a)
            for a, o in pairs
            if o._is_view() and torch._C._autograd._get_creation_meta(o) in _NOT_REBUILT
        )
        for a, o in pairs:
            if not (o.requires_grad and o._is_view()):
                continue
            if torch._C._autograd._get_creation_meta(o) not in _NOT_REBUILT:
                continue
            message = _eager_message(o)
            if message is not None:
                # written before the call: any read of its node raises (version None)
                watched[id(a)] = (a, None if node_unreadable(o) else a._version, message)
        return cls(watched, unwritable=unwritable)

    def write_refusal(self, written: Any, args: Any, kwargs: Any) -> EagerRefusal | None:
        """Eager's refusal of an in-place call with grad (its data or, ``t_()``,
        ``squeeze_()``, its metadata) on such an input or a view the function made of it:
        autograd's check of the write reads the view's creation (eager's view of the
        view inherits it), where the trace's stand-in is no view of anything (soak
        239018: ``x4.as_strided(...).squeeze_(0)`` of an ``unbind`` output ran)."""
        if not self.unwritable or not isinstance(written, torch.Tensor):
            return None
        root = written._base if written._is_view() else written
        if id(root) not in self.unwritable or not torch.is_grad_enabled():
            return None
        tensors = [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]
        if not any(t.requires_grad for t in tensors):
            return None
        return EagerRefusal(_WRITTEN)

    def refusal(
        self, func: Any, args: Any, kwargs: Any, result: Any, *, records: bool = True
    ) -> EagerRefusal | None:
        """Eager's error for ``func``, which returned ``result``, if it read the node of a
        watched input written since the function started: it recorded autograd on one
        (its result requires grad, grad mode on; ``records``: False where autograd records
        nothing, a trace for inference mode), or read its ``grad_fn`` / ``is_leaf``."""
        if not reads_node(func):
            outs = result if isinstance(result, (tuple, list)) else (result,)
            recorded = (
                records
                and torch.is_grad_enabled()
                and any(isinstance(r, torch.Tensor) and r.requires_grad for r in outs)
                and not _returned_itself(func, outs, args, kwargs or {})
            )
            if not recorded:
                return None
        for t in tree_leaves((args, kwargs or {})):
            entry = self.watched.get(id(t)) if isinstance(t, torch.Tensor) else None
            if entry is None:
                continue
            self.node_read.add(id(t))
            if entry[1] is None or entry[0]._version != entry[1]:
                return EagerRefusal(entry[2])
        return None

    def unread(self, wrapped: Sequence[Any]) -> list[int]:
        """The watched inputs (by position among ``wrapped``) whose node the function
        never read: the runtime may pass them to autograd detached (``runtime.call_inputs.readable_inputs``)."""
        return [
            i
            for i, w in enumerate(wrapped)
            if id(w) in self.watched and id(w) not in self.node_read
        ]
