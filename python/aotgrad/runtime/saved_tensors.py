"""What the compiled ``autograd.Function`` saves for its backward, and how.

The forward graph returns the saved values after the user's outputs; before they go to
``ctx.save_for_backward`` some are replaced so that autograd's checks on saved tensors,
and the backward's reads, match eager's:

- a saved (view of a) mutated input is a copy: the epilogue writes the input after the
  graph (``copies_of_mutated_inputs``; with its whole storage where the backward reads it
  through ``as_strided``);
- a saved (view of a) written input's new value is that view of the caller's tensor
  (``aliases_of_written_inputs``): eager saved the input, and sees later writes to it;
- a saved view of an output whose version count was just set to eager's is a detached
  alias (``views_of_outputs_detached``);
- a user output eager saves (``layout.watched_outputs``) is kept on ``ctx`` off autograd's
  check (``keep_loose``): the backward checks it only where the caller's backward reaches
  a read of it, as eager's does; ``saved_tensors`` gives them all back in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

__all__ = [
    "BACKWARD_TWICE",
    "aliases_of_written_inputs",
    "copies_of_mutated_inputs",
    "data_of_inputs",
    "keep_loose",
    "save",
    "saved_tensors",
    "views_of_new_data",
    "views_of_outputs_detached",
]


def copies_of_mutated_inputs(
    saved: Sequence[Any], mutated_args: Sequence[torch.Tensor], by_storage: Sequence[int] = ()
) -> list[Any]:
    """The backward must see an input's value from before the function mutated it:
    a saved tensor that is (a view of) a mutated input is saved as a copy, since the
    mutation is applied to the input itself right after the forward (and its version
    counter moves, which autograd's saved-tensor check would take for a later write).
    One the backward reads through ``as_strided`` on its storage (``by_storage``) is
    copied with its whole storage, at its offset and strides."""
    storages = {t.untyped_storage().data_ptr() for t in mutated_args}
    return [
        (_with_storage_copied(s) if j in by_storage else s.clone())
        if isinstance(s, torch.Tensor) and s.untyped_storage().data_ptr() in storages
        else s
        for j, s in enumerate(saved)
    ]


def aliases_of_written_inputs(
    saved: Sequence[Any],
    found: dict[int, int],
    inputs: Sequence[torch.Tensor],
    new_values: Sequence[Any],
    by_storage: Sequence[int] = (),
) -> list[Any]:
    """Saved tensors that are (views of) a written input's new value (``found``: per
    saved tensor, the entry of ``inputs`` and ``new_values``), where eager's backward
    reads the input itself: saved as the same view of the input's storage, which the
    epilogue writes the new value into right after. So a write autograd does not count
    (``x.data.mul_(2)``, by the caller or by the next call on ``x``) reaches the backward
    as it reaches eager's. A ``.data`` alias, with a version counter of its own: the
    epilogue's write, and the checks eager makes on ``x`` (``layout.watched_inputs``),
    are not autograd's saved-tensor check. Kept as the graph made it where the new
    value's layout is not the input's (no view of the input has the saved layout), and
    where the backward reads it through ``as_strided`` on its storage (``by_storage``)
    at another storage offset than the input's."""
    out = list(saved)
    for j, m in found.items():
        s, x, value = out[j], inputs[m], new_values[m]
        if (
            not isinstance(s, torch.Tensor)
            or is_traceable_wrapper_subclass(x)  # (a DTensor's as_strided is not a view)
            or x is value
            or s.dtype != x.dtype
            or value.dtype != x.dtype
            or value.size() != x.size()
            or value.stride() != x.stride()
            or s.untyped_storage().data_ptr() != value.untyped_storage().data_ptr()
            or (j in by_storage and x.storage_offset() != value.storage_offset())
        ):
            continue
        offset = x.storage_offset() + s.storage_offset() - value.storage_offset()
        out[j] = x.data.as_strided(s.size(), s.stride(), offset)
    return out


def data_of_inputs(views: dict[int, int], args: Sequence[Any]) -> list[tuple]:
    """Per saved view of an input (``layout.saved_input_views``: saved position → input),
    the caller's input and where its data is now (storage, sizes, strides, offset)."""
    return [(j, args[i], _where(args[i])) for j, i in views.items()]


def views_of_new_data(saved: list[Any], data: Sequence[tuple]) -> list[Any]:
    """``saved``, each view of an input (``data_of_inputs``) that the caller gave other
    data since (``x.data = y``: another storage or layout) remade as the same view of the
    new data, as eager's backward reads the input itself. Left as saved where it is no
    view of the input's old storage (a compiled graph's copy), or the new data has other
    sizes or dtype (eager's backward reads it all the same, and fails or not)."""
    for j, x, (ptr, size, stride, offset) in data:
        s = saved[j]
        now = _where(x)
        if now == (ptr, size, stride, offset) or not isinstance(s, torch.Tensor):
            continue
        if (
            s.untyped_storage().data_ptr() != ptr
            or now[1] != size
            or (x.dtype, x.device, x.is_conj(), x.is_neg())
            != (s.dtype, s.device, s.is_conj(), s.is_neg())
        ):
            continue
        at = s.storage_offset() - offset  # from the input's first element
        new = x.detach()
        if now[2] == stride:
            at += x.storage_offset()
        else:  # laid out as before: the view's strides read the same elements
            new = torch.empty_strided(size, stride, dtype=x.dtype, device=x.device).copy_(new)
        if at >= 0:
            saved[j] = new.as_strided(s.size(), s.stride(), at)
    return saved


def _where(t: torch.Tensor) -> tuple:
    return t.untyped_storage().data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset()


def views_of_outputs_detached(saved: Sequence[Any], outs: Sequence[Any]) -> Sequence[Any]:
    """Saved views of outputs whose version count was just set (eager's): saved as
    detached aliases. The graph made them under the Function's no_grad, before the count
    moved; once their base is an output that requires grad, reading the view's node (as
    unpacking it does) would take the count for a write and raise autograd's "view was
    created in no_grad mode" error."""
    bases = {id(o) for o in outs}
    if not any(isinstance(t, torch.Tensor) and id(t._base) in bases for t in saved):
        return saved
    return [
        t.detach() if isinstance(t, torch.Tensor) and id(t._base) in bases else t for t in saved
    ]


def keep_loose(
    ctx: Any, tensors: Sequence[Any], watched: Sequence[Any], at: Sequence[int] = ()
) -> Sequence[Any]:
    """User outputs eager saves (``watched``) that are saved tensors too, and the saved
    tensors at positions ``at`` (outputs or views of one: ``layout.saved_of_outputs``):
    kept on ``ctx`` as detached aliases (no cycle through the Function's node), not saved
    with autograd's check, which would fail the whole backward after a write to one (or,
    for a view the graph made under the Function's no_grad, raise that the view's base
    was written); eager's fails only where the caller's backward reaches a read of it
    (checked in the backward). Returns the tensors left to ``save_for_backward``."""
    ids = {id(o) for o in watched}
    loose = {
        j: t.detach()
        for j, t in enumerate(tensors)
        if id(t) in ids or (j in at and isinstance(t, torch.Tensor))
    }
    if not loose:
        return tensors
    ctx.loose = loose
    return [t for j, t in enumerate(tensors) if j not in loose]


def save(ctx: Any, tensors: Sequence[Any]) -> None:
    """``ctx.save_for_backward(*tensors)``, where there are any. A backward that reads no
    saved tensor runs again after the graph was freed, as eager's nodes that save nothing
    do (``x.lerp_(y, 0.5)``, ``y.clone()``): reading ``ctx.saved_tensors`` once autograd
    freed them raises "backward through the graph a second time" even where none were
    saved."""
    ctx.saves = bool(tensors)
    if tensors:
        ctx.save_for_backward(*tensors)


def saved_tensors(ctx: Any, keep: bool = False) -> list[Any]:
    """The saved tensors in the backward graph's order (``keep_loose``'s put back); the
    loose ones are dropped unless the graph is retained (or ``keep``: read before the
    node's own backward), as autograd frees the others (a later backward then raises
    autograd's error, as reading freed ones does)."""
    saved = list(ctx.saved_tensors) if ctx.saves else []
    if ctx.loose is _FREED:
        raise RuntimeError(BACKWARD_TWICE)
    if ctx.loose is not None:
        for j in sorted(ctx.loose):
            saved.insert(j, ctx.loose[j])
        if not keep and not torch._C._autograd._get_current_graph_task_keep_graph():
            ctx.loose = _FREED
    return saved


_FREED: dict[int, Any] = {}
BACKWARD_TWICE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


def _with_storage_copied(t: torch.Tensor) -> torch.Tensor:
    copy = torch.empty((0,), dtype=t.dtype, device=t.device)
    return copy.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())
