"""How the caller's inputs reach the compiled ``autograd.Function``: detached aliases
where autograd would read a node eager never reads (``readable_inputs``) or record an
edge eager's backward never takes (``edgeless_inputs``), fresh views of their base for
written views whose hooks eager's backward never runs (``unhooked_views``), and
stand-ins for the leaves the function makes inside itself (``stand_in_leaf``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..alias.views import node_unreadable
from ..errors import HookedViewRead, mark_raised_by_graph
from ..input_hooks import register_hooks


def readable_inputs(apply: Callable[..., Any], unread: Sequence[int]) -> Callable[..., Any]:
    """``apply``, given a detached alias of each input of ``unread`` (views of ``split``
    / ``unbind`` or made under ``no_grad``, whose node the function never reads) whose
    autograd node cannot be read (``node_unreadable``: written since it was made):
    ``autograd.Function.apply`` reads the node of every input that requires grad, which
    raises; eager reads it only where the function records autograd on it."""
    if not unread:
        return apply

    def call(*args: Any) -> Any:
        swapped = None
        for i in unread:
            a = args[i]
            if (
                isinstance(a, torch.Tensor)
                and a.requires_grad
                and a._is_view()
                and node_unreadable(a)
            ):
                swapped = swapped or list(args)
                swapped[i] = a.detach()
        return apply(*args) if swapped is None else apply(*swapped)

    return call


def unhooked_views(apply: Callable[..., Any], layout: Any) -> Callable[..., Any]:
    """``apply``, given a fresh view of its base for each hooked input of
    ``layout.unhooked_view_writes``: eager's write to a view hands the gradient to the
    base's node, past the view's node from before the call, whose hooks (registered
    before the call) never run; the compiled Function's edge would run them. Where the
    function reads such an input before its write (``layout.hooked_view_reads``),
    eager runs those hooks with the reads' gradient only: a hooked one makes the call
    run eagerly (``HookedViewRead``; none where the runtime changes the caller's
    tensors before the graph)."""
    fresh, read = layout.unhooked_view_writes, layout.hooked_view_reads
    if layout.writes_before_graph:
        read = ()
    before = layout.hooks_before_call  # (the function's own, registered as the caller's)
    if not fresh and not read and not before:
        return apply

    def call(*args: Any) -> Any:
        own = {i for i, _ in before if _gets_hooks(args[i])}
        if any(_hooked(args[i]) or i in own for i in read):
            error = HookedViewRead(
                "a view input with hooks registered before the call, read before the "
                "function writes it: eager runs those hooks with the gradient of the "
                "reads before the write only"
            )
            mark_raised_by_graph(error)
            raise error
        register_hooks(args, before)
        swapped = None
        for i in fresh:
            a = args[i]
            if _hooked(a) and a._base.requires_grad:
                swapped = swapped or list(args)
                with torch.enable_grad():
                    swapped[i] = a._base.as_strided(a.size(), a.stride(), a.storage_offset())
        return apply(*args) if swapped is None else apply(*swapped)

    return call


def _hooked(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a._is_view() and bool(a._backward_hooks)


def _gets_hooks(a: Any) -> bool:
    """Whether ``register_hooks`` hooks ``a``, a view."""
    return isinstance(a, torch.Tensor) and a._is_view() and a.requires_grad


def edgeless_inputs(apply: Callable[..., Any], gradless: Sequence[int]) -> Callable[..., Any]:
    """``apply``, given a detached alias of each input of ``gradless`` that requires
    grad (``layout.gradless_inputs``: no output's history reaches it), where another
    input still requires grad: the compiled node then has no edge to its history, which
    eager's backward from these outputs never runs (``t1 * t3`` left unused in a graph
    after a graph break: eager's backward from ``t3`` does not reach ``t1``'s node, whose
    saved tensors may have been written since)."""
    if not gradless:
        return apply
    cut = set(gradless)

    def call(*args: Any) -> Any:
        off = [i for i in gradless if isinstance(args[i], torch.Tensor) and args[i].requires_grad]
        kept = any(
            isinstance(a, torch.Tensor) and a.requires_grad
            for i, a in enumerate(args)
            if i not in cut
        )
        if not off or not kept:
            return apply(*args)
        swapped = list(args)
        for i in off:
            swapped[i] = args[i].detach()
            # (a double backward's replay runs the function on the caller's tensor, as
            # traced, ``double_backward.Replay``; soak 246639)
            setattr(swapped[i], EDGELESS, args[i])
        return apply(*swapped)

    return call


#: Attribute of ``edgeless_inputs``'s detached alias of an input that requires grad: the
#: input.
EDGELESS = "_aotgrad_edgeless"


def stand_in_leaf(leaf: Any, args: Sequence[Any]) -> torch.Tensor:
    """A leaf of the shape, dtype and device of an inner leaf (``layout.inner_leaves``),
    backed by one element (zero strides): the gradient autograd checks against it and
    accumulates into it needs no more; the epilogue gives it the leaf's value where the
    caller sees it. A view of an input made a leaf is that view of the caller's input
    (``InnerLeaf.input_view``)."""
    if leaf.input_view is not None:
        i, view, detached = leaf.input_view
        source = args[i].detach() if detached else args[i]
        # (of an input that requires grad, eager's was made under no_grad: a leaf whose
        # flag is its base's until requires_grad_() gives it one)
        with torch.no_grad() if source.requires_grad else contextlib.nullcontext():
            t = source.as_strided(view.size, view.stride, source.storage_offset() + view.offset)
        return t.requires_grad_(True)
    t = torch.empty_strided(
        leaf.shape, (0,) * len(leaf.shape), dtype=leaf.dtype, device=leaf.device
    )
    return t.requires_grad_(True)
