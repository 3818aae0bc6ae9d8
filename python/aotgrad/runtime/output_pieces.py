"""Pieces of one multi-output view of an input, returned together (``a, b =
x.chunk(2); return a, b``), rebuilt by one autograd node, as eager's share one.

Eager's ``chunk`` (``split``, ``unbind``) records one node for all its pieces; when a
backward reaches it through one piece, it runs, and the caller's hooks on the other
pieces are called with None (``b.register_hook(h)``, then a backward through ``a``
only). Rebuilt one by one, each piece had a node of its own that no gradient reached:
the hook was never called (a hook that reads the gradient raised in eager, not here).
The group's pieces come out of one custom node whose backward puts each gradient into
the base's elements the piece views (as ``SplitBackward`` does), with the creation
meta eager gives pieces (an in-place write to one raises eager's error).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..alias.views import ViewSpec, _view
from ..vocab import OutputVerdict

__all__ = ["PIECE_BASES", "pieces_of", "plain"]

_MULTI_OUTPUT = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE
#: Verdicts of the pieces rebuilt together: of an input, of an intermediate base.
PIECE_BASES = (
    OutputVerdict.ALIAS_OF_INPUT,
    OutputVerdict.ALIAS_OF_INTERMEDIATE,
    OutputVerdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
)


class _Pieces(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, base: torch.Tensor, *specs: ViewSpec) -> tuple[torch.Tensor, ...]:
        ctx.layout = (tuple(base.shape), tuple(base.stride()))
        ctx.specs = specs
        ctx.set_materialize_grads(False)
        return tuple(_view(base, s) for s in specs)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        shape, stride = ctx.layout
        given = [g for g in grads if g is not None]
        if not given:
            return (None, *(None for _ in ctx.specs))
        extent = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
        flat = given[0].new_zeros(max(extent, 1))
        total = flat.as_strided(shape, stride, 0)
        for s, g in zip(ctx.specs, grads):
            if g is not None:
                flat.as_strided(s.size, s.stride, s.offset).add_(g)
        return (total, *(None for _ in ctx.specs))


def plain(spec: ViewSpec) -> bool:
    """Whether ``spec`` is an ``as_strided`` of the base itself (nothing taken through,
    no reinterpretation, static): what ``pieces_of`` rebuilds."""
    return not spec.through and spec.reinterpret is None and spec.static


def pieces_of(base: torch.Tensor, specs: Sequence[ViewSpec]) -> list[torch.Tensor]:
    """The views ``specs`` of ``base`` (plain ones), made by one node with eager's
    creation meta for pieces of a multi-output view."""
    with torch.enable_grad():
        out = list(_Pieces.apply(base, *specs))
    for t in out:
        torch._C._autograd._set_creation_meta(t, _MULTI_OUTPUT)
    return out
