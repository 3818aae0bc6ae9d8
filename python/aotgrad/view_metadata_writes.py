"""In-place metadata changes of views (``t_``, ``transpose_``, ``squeeze_``, ``unsqueeze_``,
``swapdims_``, ``swapaxes_``, ``as_strided_``) while tracing, with autograd's record of
the view kept true.

Autograd regenerates a view's node, and the gradient of a write through it, from its
record of how the view was made. In eager a view of a plain tensor is recorded as an
``as_strided`` of its current geometry, so ``v.t_()`` is seen. The traced stand-ins are
functional wrappers, whose views are recorded as the chain of view ops that made them;
an in-place metadata change does not extend that chain, so ``v = x[0:4]; v.t_();
v.mul_(w)`` gave the gradient of the untransposed view (silently wrong).

Here the call runs as eager's does (functionalization records the change, autograd
bumps the version), and then the Python object ``v`` is given a fresh autograd view
made by the out-of-place op from an alias taken before the call, whose record is the
whole chain; its functional value stays the one the call changed (an input's metadata
change is read from it)."""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor

from .errors import UnsupportedError, run_eagerly
from .inplace_checks import written_tensor

__all__ = ["METADATA_WRITES", "EarlierViews", "leaf_view_of_gradless", "write_metadata"]

#: In-place by name, writing metadata only, and the out-of-place op that makes the view.
METADATA_WRITES = {
    "t_": "t",
    "transpose_": "transpose",
    "squeeze_": "squeeze",
    "unsqueeze_": "unsqueeze",
    "swapdims_": "swapdims",
    "swapaxes_": "swapaxes",
    "as_strided_": "as_strided",
}


def _stale_record(t: Any, eager_view: bool) -> bool:
    """Whether autograd would regenerate ``t``'s node from a record the call makes stale:
    a view of a functional wrapper, tracked by autograd."""
    if not (isinstance(t, FunctionalTensor) and t._is_view()):
        return False
    # under no_grad and inference mode too, for a view autograd tracks (eager's record of
    # it is its geometry whatever the mode: a later use with grad regenerates its node)
    return (torch.is_grad_enabled() and not torch.is_inference_mode_enabled()) or (
        eager_view
        and torch._C._autograd._get_creation_meta(t) == torch._C._autograd.CreationMeta.DEFAULT
    )


def _alias_before(t: Any) -> Any:
    """An autograd view of ``t`` as it is, taken before the metadata change. A view that
    requires grad through its base is replayed from the base (``_view_func``): not as
    ``t.view_as(t)``, which reads ``t``'s node and so rebuilds it. Eager's node of a view
    whose gradless base was given a history through another view (``b[0].add_(w)``
    beside ``v = b[1:]``) stays unset until read, and the in-place call on it then raises
    "a leaf Variable that requires grad is being used in an in-place operation." (the
    call below raises it, as eager's does, where nothing read the node since)."""
    if (
        torch.is_grad_enabled()
        and t._is_view()
        and t._base is not None
        and t._base.requires_grad
        and torch._C._autograd._get_creation_meta(t) == _DEFAULT
    ):
        return t._view_func(t._base)
    return t.view_as(t)


def leaf_view_of_gradless(t: Any) -> bool:
    """Whether ``t`` is a view that requires grad of a base that does not, a leaf of its
    own (``x1 = b[2:6]; x1.requires_grad_()``)."""
    return t.requires_grad and t._base is not None and not t._base.requires_grad and t.is_leaf


def write_metadata(
    func: Any,
    args: Any,
    kwargs: dict,
    fresh_from: Any = None,
    eager_view: bool = True,
    rebase: bool = False,
) -> Any:
    """``func(*args, **kwargs)``, an in-place metadata change of ``args[0]`` (a name in
    ``METADATA_WRITES``); ``fresh_from(t)`` makes the view after the call where it is
    not the out-of-place op on an alias taken before it. ``eager_view``: whether ``t`` is
    a view in eager too (an input the trace sees as a view of its clone is not: under
    no_grad, eager's autograd ignores its change). ``rebase``: the functional value too
    is the fresh view's (an unrecorded ``as_strided_``: eager's next node is an
    ``as_strided`` of the base, so its view chain must not pass through the old
    geometry, ``alias.views.eager_layout``)."""
    t = args[0]
    if not (rebase or _stale_record(t, eager_view)):
        return func(*args, **kwargs)
    with torch.inference_mode(False), torch.enable_grad():
        alias = _alias_before(t) if fresh_from is None else None
    result = func(*args, **kwargs)
    if result is not t:
        return result
    with torch.inference_mode(False), torch.enable_grad():
        if alias is not None:
            fresh = getattr(alias, METADATA_WRITES[func.__name__])(*args[1:], **kwargs)
        else:
            fresh = fresh_from(t)
    if t.requires_grad and not fresh.requires_grad:
        # a view made a leaf of its own (``b[2:6].requires_grad_()``, its base without
        # grad) stays one, as eager's does
        fresh.requires_grad_(True)
    creation = torch._C._autograd._get_creation_meta(t)
    # the Python object keeps its identity (callers hold it) and its attributes (its
    # functional value among them); only its autograd tensor changes
    torch._C._swap_tensor_impl(t, fresh)
    torch._C._autograd._set_creation_meta(t, creation)
    if rebase:
        t.elem = fresh.elem
    return t


class EarlierViews:
    """The views a traced function made (weakly held), and those whose root's metadata it
    changed after (``changed``): eager rebuilds their nodes as an ``as_strided`` of the
    root at their geometry, autograd's replay of their view ops on the relaid root gives
    another shape (``x.unsqueeze(0)`` after ``x.as_strided_((2, 2), ...)``: the backward
    raised "invalid gradient") or fails (``t()`` of a 3-d tensor)."""

    def __init__(self) -> None:
        self.views: list[weakref.ref] = []
        #: Per view made before its root's metadata changed (by id), a weak reference.
        self.relaid: dict[int, weakref.ref] = {}
        #: Whether the function changed any metadata in place.
        self.changes = False
        #: Per root (by id) of an input that is no view in the caller, whose metadata the
        #: function changed: the input's stand-in. Eager's earlier views of it are rebuilt
        #: as an ``as_strided`` of the input as it is now (with its new node, where the
        #: change was recorded).
        self.rebuilt_from: dict[int, Any] = {}
        #: Of those roots, the ones a change autograd did not record was made to (under
        #: no_grad): a write with grad through an earlier view of them is refused
        #: (autograd records it through the view's old chain; eager's misroutes it).
        self.unrecorded: set[int] = set()
        #: Per view made (by id): a weak reference and its version count then.
        self.made_at: dict[int, tuple[weakref.ref, int]] = {}

    def note(self, result: Any) -> None:
        for t in result if isinstance(result, (tuple, list)) else (result,):
            if isinstance(t, FunctionalTensor) and t._is_view():
                # (one without grad too: a write with grad through it records on its root)
                self.views.append(weakref.ref(t))
                if t.requires_grad:
                    self.made_at[id(t)] = (self.views[-1], t._version)

    def written_since_made(self, t: Any) -> bool:
        """Whether the version count of the view ``t`` (made by the function) moved since
        it was made: a write to its storage after (through another input of the caller's
        storage too: ``shared_counters``). Eager then rebuilds its node from its root's."""
        ref, version = self.made_at.get(id(t), (None, None))
        return ref is not None and ref() is t and t._version != version

    def changed(self, t: Any, plain_input: bool = False, restride: bool = False) -> None:
        """``t``'s metadata changes in place: the views of its root so far are relaid.
        ``plain_input``: ``t`` is the stand-in of an input that is no view in the caller;
        ``restride``: by ``as_strided_`` (a write through an earlier view is refused as
        after an unrecorded change: its gradient is routed otherwise than eager's)."""
        self.changes = True
        root = t._base if t._is_view() else t
        if plain_input:
            self.rebuilt_from[id(root)] = t
            if restride or not (torch.is_grad_enabled() and t.requires_grad):
                self.unrecorded.add(id(root))
        for ref in self.views:
            v = ref()
            if v is not None and v is not t and v._base is root:
                self.relaid[id(v)] = ref

    def is_relaid(self, t: Any) -> bool:
        ref = self.relaid.get(id(t))
        return ref is not None and ref() is t

    def stand_ins(
        self,
        args: Any,
        kwargs: dict,
        written: Any,
        keep: frozenset[int],
        roots: frozenset[int],
        of_inputs: bool = False,
    ) -> Any:
        """``(args, kwargs)`` with each relaid view (made by the function, with eager's
        default creation meta) replaced by what eager's is: an ``as_strided`` of its root
        at its geometry. Not ``written`` (functionalization refuses a write through
        ``as_strided`` of a relaid root): a write with grad through it is refused where
        its gradient would be misrouted (``_refuse_write``). (The nodes are never read
        here: reading one that autograd must rebuild can block inside autograd.) ``keep``: ids
        never replaced (the inputs' stand-ins, which the checks know by id); ``roots``:
        ids of the inputs' stand-ins and their bases (a write through a view of one is
        recorded right: the input's change of metadata gave its views a fresh record);
        ``of_inputs``: views of those too, for an op autograd failed to run on them (its
        replay of their view ops on the input's new geometry: ``x.reshape(2, -1)``, then
        ``x.as_strided_(..)``, then a read of the reshaped view)."""

        grad_write = torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and a.requires_grad
            for a in torch.utils._pytree.tree_leaves((args, kwargs))
        )

        def stand_in(t: Any) -> Any:
            if not (isinstance(t, FunctionalTensor) and t._is_view()):
                return t
            if not t.requires_grad and not (t is written and grad_write):
                return t  # (a view without grad, written with a value that has it: recorded)
            if id(t) in keep or not self.is_relaid(t):
                return t
            creation = torch._C._autograd._get_creation_meta(t)
            if creation != _DEFAULT:  # made under no_grad, of several outputs...: eager's
                return t  # node raises when read after the change, as the trace's does
            source = self.rebuilt_from.get(id(t._base))
            if source is not None and source is not t:
                if t is written:
                    if id(t._base) in self.unrecorded:
                        _refuse_write(t, frozenset(), grad_write)
                    return t
                with torch.enable_grad():
                    return source.as_strided(t.size(), t.stride(), t.storage_offset())
            if id(t._base) in roots and not of_inputs:
                return t  # (of an input: substituted, it lost its identity and offsets)
            if t is written:
                _refuse_write(t, roots, grad_write)
                return t
            with torch.enable_grad():
                view = t._base.as_strided(t.size(), t.stride(), t.storage_offset())
            torch._C._autograd._set_creation_meta(view, creation)
            return view

        return torch.utils._pytree.tree_map(stand_in, (args, kwargs))


_DEFAULT = torch._C._autograd.CreationMeta.DEFAULT


def _refuse_write(t: Any, roots: frozenset[int], grad_write: bool = False) -> None:
    """A write with grad through ``t``, a view made before its root (an intermediate)
    changed metadata in place: autograd records it by replaying ``t``'s view ops on the
    root's new geometry, which routes the gradient to other elements than eager's
    (``v = t[0]; t.t_(); v.add_(y)``: ``y``'s gradient would be a row of the cotangent,
    eager's is a column). The calls run eagerly (``EagerReplayWarning``) rather than with
    a wrong gradient. ``grad_write``: the value written requires grad (a view without
    grad of an input without grad: ``v = x.view_as(x); x.t_(); v.copy_(y)``)."""
    if torch.is_grad_enabled() and (t.requires_grad or grad_write) and id(t._base) not in roots:
        raise run_eagerly(
            UnsupportedError(
                "a write with grad through a view taken before the function changed its "
                "base's metadata in place (t_/transpose_/unsqueeze_/as_strided_...): autograd "
                "would replay the view on the new geometry and misroute the gradient; run "
                "eagerly (take the view after the change, or write the base, to compile it)"
            )
        )


def left_autograd_views(args: Any, kwargs: Any, left: set[int]) -> frozenset[int]:
    """Ids of the views among ``(args, kwargs)`` of a tensor that left autograd (``left``:
    ids) that still require grad (autograd may have to rebuild their nodes)."""
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    return frozenset(
        id(t)
        for t in flat
        if isinstance(t, FunctionalTensor)
        and t._is_view()
        and id(t._base) in left
        and t.requires_grad
    )


def views_left_autograd(e: RuntimeError) -> bool:
    """Whether ``e`` is autograd's failure to rebuild the node of a view whose base left
    autograd (``requires_grad_(False)``, ``detach_()``) and was then written: it replays
    the traced view's ops on the base, which no longer records a node (eager's, made by
    plain view ops, is an ``as_strided`` node leading nowhere)."""
    return "new_fn INTERNAL ASSERT" in str(e)


def stand_ins_left_autograd(
    func: Any, args: Any, kwargs: dict, left: frozenset[int], new_leaves: list
) -> Any:
    """``(args, kwargs)`` with each view of ``left`` (``left_autograd_views``, taken before
    the failed call, which cleared their nodes) replaced by what eager's is for what
    follows: a tensor of its value that requires grad, its gradient reaching nothing the
    caller passed (eager's ``as_strided`` node has no next edge): a leaf the function
    makes (``new_leaves``: outputs computed from it require grad, with a node, as eager's).
    A write through such a view is refused (its history cannot be recorded the same way)."""
    written = written_tensor(func, args, kwargs)

    def stand_in(t: Any) -> Any:
        if id(t) not in left:
            return t
        if t is written:
            raise UnsupportedError(
                "a write (or in-place metadata change) through a view that requires grad "
                "of a tensor that does not (whose base left autograd, requires_grad_(False) "
                "or detach_(), or a view the caller made require grad, overlapping a written "
                "input), after its base was written: not supported"
            )
        leaf = t.detach().requires_grad_()
        new_leaves.append(leaf)
        return leaf

    return torch.utils._pytree.tree_map(stand_in, (args, kwargs))
