"""Outputs that view a member of a synthetic base, remade as eager's views of the
caller's member.

The trace rebuilds each member of an overlap group as a view of the group's base
(``alias.synthetic_base``), so an output taken of a member (``return x1[0]``) is a view of
that base. Eager's is a view of the caller's member: its ``._base`` is the member, and its
node leads through the member's, which is what ``autograd.grad(out, x1)`` asks for. So
while tracing, ``views_of_detached`` and ``views_of_members`` find these outputs and the
layout eager gives them; after each call, the synthetic base remakes them of the caller's
member (``of_member``), those that require grad only where eager's is a plain view
(``remakeable``). A member's ``Layout`` is defined here, since both stages record by it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..autograd_walks import reaches_node
from .reinterpret import Reinterpret, by_view_dtype, reinterpreted_spec, reinterpreted_view
from .views import ViewSpec, eager_layout, starts_with

#: (size, stride, absolute storage offset) of a member.
Layout = tuple[tuple[int, ...], tuple[int, ...], int]

_CREATION = torch._C._autograd.CreationMeta


def layout(t: torch.Tensor) -> Layout:
    """``t``'s size, stride and absolute storage offset."""
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


def views_of_detached(
    groups: Sequence[Any], built: dict[int, Any], outs: Sequence[Any]
) -> dict[int, tuple[int, Layout]]:
    """Outputs that are views of a detached member of ``groups`` (the synthetic base's
    ``_Group``s; ``SyntheticBase.member_views``), requiring no grad, at static layouts (as
    eager lays them out: ``eager_layout``)."""
    detached = {id(built[i]): i for g in groups for i, d in zip(g.members, g.detached or ()) if d}
    found = {}
    for j, o in enumerate(outs):
        if not isinstance(o, torch.Tensor) or o.requires_grad or not o._is_view():
            continue
        i = detached.get(id(o._base))
        if i is None or not _reads_alike(o, built[i]):
            continue
        shown, through = eager_layout(o, built[i])
        laid = layout(shown)
        if not through and all(isinstance(v, int) for v in (*laid[0], *laid[1], laid[2])):
            found[j] = (i, laid)
    return found


def _member_view(o: Any, m: Any, base: Any) -> Layout | ViewSpec | None:
    """Output ``o``, a view of member ``m`` (of the group's ``base``), as the runtime makes
    it of the caller's member: eager's layout (static), or a ``ViewSpec`` where it reads
    the bytes otherwise (``view_as_complex(x3.view(4, 2, 2))``: soak 250696); None where
    neither is made."""
    shown, through = eager_layout(o, base)
    if through:
        return None
    if not _reads_alike(o, m):
        spec = reinterpreted_spec(o, m, check_base=False, shown=shown, dtype_view=by_view_dtype(o))
        static = spec is not None and all(
            isinstance(v, int) for v in (*spec.size, *spec.stride, spec.offset)
        )
        return spec if static else None
    laid = layout(shown)
    return laid if all(isinstance(v, int) for v in (*laid[0], *laid[1], laid[2])) else None


def of_member(member: torch.Tensor, view: Layout | ViewSpec) -> torch.Tensor:
    """The view ``view`` (``_member_view``) of the caller's ``member``."""
    if isinstance(view, ViewSpec):
        return reinterpreted_view(member, view)
    return member.as_strided(*view)


def _reads_alike(view: Any, member: Any) -> bool:
    """Whether ``view`` reads its bytes as ``member`` does (the remade views are
    ``as_strided`` of the member: not a ``view(torch.complex128)``, ``view_as_complex``
    or conj of it, which came back in the member's dtype: soak 250696)."""
    return Reinterpret.of(view) == Reinterpret.of(member)


_REMADE = (_CREATION.DEFAULT, _CREATION.MULTI_OUTPUT_NODE)


def remakeable(out: Any, member: Any) -> bool:
    """Whether output ``out`` (``SyntheticBase.member_grad_views``) is remade of ``member``:
    the call records grad, both require grad, and ``out`` is a plain view (the default
    creation meta, or a multi-output op's: ``x1.split(2)[1]``; no hooks, not retaining its
    gradient). Reading the ``grad_fn`` of another view (one a custom Function made, its
    base since written) raises: not one."""
    if not (
        torch.is_grad_enabled()
        and isinstance(out, torch.Tensor)
        and member.requires_grad
        and out.requires_grad
        and out._is_view()
        and torch._C._autograd._get_creation_meta(out) in _REMADE
    ):
        return False
    try:
        return out.grad_fn is not None and not out._backward_hooks and not out.retains_grad
    except RuntimeError:
        return False


def _same_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two functional tensors are views of one base (functionalization gives the
    views of one base one storage)."""
    try:
        return a.untyped_storage()._cdata == b.untyped_storage()._cdata
    except RuntimeError:
        return False


def _through(view: Any, member: Any) -> bool:
    """Whether ``view``'s node leads through ``member``'s: not where a write to the group
    after the view was taken made autograd rebuild the view's node from the base."""
    try:
        node = member.grad_fn
        return node is None or reaches_node(view.grad_fn, node)  # (a leaf: its own)
    except RuntimeError:
        return False


def views_of_members(
    groups: Sequence[Any],
    built: dict[int, Any],
    bases: Sequence[Any],
    outs: Sequence[Any],
    member_of_view: Callable[[Any], int | None] = lambda _: None,
    unwritten_since: Callable[[Any], bool] = lambda _: False,
) -> dict[int, tuple[int, Layout]]:
    """Outputs that are views taken through a member that is not detached (``return
    x1[0]``): eager's pass through that member's node, which is what
    ``autograd.grad(out, x1)`` asks for, and their ``._base`` is the member's (one that
    requires no grad too: ``t1.expand(2)`` of ``t1 = x1.detach()`` passed beside ``x1``);
    the graph's are views of the group's base. Output index → (member position, eager's
    layout); static layouts only."""
    from torch._C import _functionalization
    from torch._subclasses.functional_tensor import FunctionalTensor

    members = []
    for g, base in zip(groups, bases):
        detached = g.detached or (False,) * len(g.members)
        members += [(i, built[i], base) for i, d in zip(g.members, detached) if not d]
    found = {}
    for j, o in enumerate(outs):
        if not isinstance(o, FunctionalTensor) or not o._is_view():
            continue
        sequence = _functionalization.get_view_meta_sequence(o.elem)
        taken_of = member_of_view(o)
        # (taken of the member after the group's last write: an ``as_strided`` of it has
        # one view op of the base, as the member has, and the trace's node skips the
        # member's; eager's goes through it, soak 247773)
        since = taken_of is not None and unwritten_since(o)
        for i, m, base in members:
            if taken_of is not None and i != taken_of:
                continue
            # (a member of another group can have the same view ops of its own base)
            if o is m or not isinstance(m, FunctionalTensor) or not _same_storage(o, m):
                continue
            own = _functionalization.get_view_meta_sequence(m.elem)
            if since or (own and len(sequence) > len(own) and starts_with(sequence, own)):
                if o.requires_grad and not (since or _through(o, m)):  # (taken before a
                    break  # write: of the base)
                view = _member_view(o, m, base)
                if view is not None:
                    found[j] = (i, view)
                break
    return found
