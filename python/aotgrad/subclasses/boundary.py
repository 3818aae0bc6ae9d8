"""Autograd across the boundary of the trace: subclass values to their leaves and back,
differentiably (``_Flatten`` / ``_Unflatten``), their gradients rebuilt or flattened
with them; plain inputs kept to plain gradients."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..errors import UnsupportedError
from .layout import Layout, is_subclass, layout_of, leaves, rebuild


def _flatten_gradient(
    layout: Layout, grad: Any, seen: Callable[[Layout], None] | None = None
) -> list[Any]:
    """A gradient of a subclass value as its leaves (None: no gradient). A runtime
    tangent of an output (``seen`` None) is coerced to the traced layout
    (``__coerce_tangent_metadata__``); an input's gradient in the traced backward keeps
    the layout it came with (a ``DTensor`` parameter's may be ``Partial`` where the
    parameter is ``Replicate``: eager keeps it so), which ``seen`` is told."""
    if grad is None:
        return [None] * layout.n_leaves
    coerce = getattr(grad, "__coerce_tangent_metadata__", None)
    if coerce is not None and seen is None:
        grad = coerce()
    if type(grad) is not layout.cls:
        raise UnsupportedError(
            f"a gradient of a {layout.cls.__qualname__} value arrived as "
            f"{type(grad).__qualname__}: aotgrad traced it as {layout.describe()}"
        )
    got = layout_of(grad)
    if got.n_leaves != layout.n_leaves:
        raise UnsupportedError(
            f"a gradient of a {layout.describe()} value is laid out as {got.describe()}"
        )
    if seen is not None:
        seen(got)
    return leaves(grad, got, [])


def _differentiable(x: Any) -> bool:
    """A leaf that carries gradient: floating or complex, and not empty (a jagged
    ``NestedTensor``'s seqlen metadata are float tensors of shape ``(n, 0)``, kept as they
    are, as its offsets)."""
    return (
        isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.numel() > 0
    )


def _rebuild_gradient(
    layout: Layout, kept: Sequence[Any], metas: Sequence[tuple[Any, ...]], grads: Sequence[Any]
) -> Any:
    """The gradient of a subclass value from its differentiable leaves' gradients (None:
    zeros); ``kept`` holds the value's own non-differentiable leaves (None where
    differentiable): a gradient rebuilt on them keeps a ``NestedTensor``'s offsets, and so
    its nested int, as eager's does."""
    given = [g for g in grads if g is not None]
    if not given:
        return None
    device = given[0].device
    diff = iter(
        torch.zeros(shape, dtype=dtype, device=device) if g is None else g
        for g, (shape, dtype) in zip(grads, metas, strict=True)
    )
    full = [next(diff) if k is None else k for k in kept]
    if torch.is_grad_enabled() and any(g.requires_grad for g in given):
        # a backward with create_graph: the gradient keeps its leaves' history (a double
        # backward reaches the compiled backward, which says it does not support it;
        # rebuilt plainly, the wrapper had none and the second pass found nothing)
        return _Unflatten.apply(layout, None, *full)
    return rebuild(layout, full)


class _Flatten(torch.autograd.Function):
    """A subclass to its differentiable leaves, differentiably. ``fresh`` decides which
    leaves are returned as new tensors (a tensor the caller holds must not become this
    node's output: autograd would rewrite its history); ``grad_layout()``, asked in the
    backward, is how the traced gradient was laid out (None: as the value)."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any,
        layout: Layout,
        fresh: Callable[[Any], Any],
        grad_layout: Callable[[], Layout | None],
        t: torch.Tensor,
    ) -> Any:
        out = leaves(t, layout, [])
        ctx.layout, ctx.grad_layout = layout, grad_layout
        # (a leaf no gradient reached arrives as None, not zeros: a value none reached
        # gets None, as eager's leaf does, where zeros would be accumulated)
        ctx.set_materialize_grads(False)
        ctx.kept = [None if _differentiable(x) else x for x in out]
        diff = [x for x in out if _differentiable(x)]
        ctx.metas = [(x.shape, x.dtype) for x in diff]
        return tuple(fresh(x) for x in diff)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
        layout = ctx.grad_layout() or ctx.layout
        return None, None, None, _rebuild_gradient(layout, ctx.kept, ctx.metas, grads)


def flatten_differentiably(
    layout: Layout,
    fresh: Callable[[Any], Any],
    grad_layout: Callable[[], Layout | None],
    t: torch.Tensor,
) -> list[Any]:
    """``t``'s leaves, its differentiable ones through ``_Flatten``; the others (a
    ``NestedTensor``'s offsets) as they are: the same tensors, which autograd would
    have had to return as views."""
    diff = iter(_Flatten.apply(layout, fresh, grad_layout, t))
    return [next(diff) if _differentiable(x) else x for x in leaves(t, layout, [])]


class _Unflatten(torch.autograd.Function):
    """Leaves to a subclass, differentiably."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, layout: Layout, seen: Callable[[Layout], None] | None, *flat: torch.Tensor
    ) -> Any:
        ctx.layout, ctx.seen = layout, seen
        ctx.set_materialize_grads(False)
        return rebuild(layout, flat)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:  # type: ignore[override]
        return (None, None, *_flatten_gradient(ctx.layout, grad, ctx.seen))


class PlainGradient(torch.autograd.Function):
    """Identity on a plain input that requires grad, inside the traced function only:
    its gradient must be plain too (a subclass gradient of a plain input, e.g. a plain
    weight multiplied by a ``TwoTensor``, has no place among the child's outputs)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:  # type: ignore[override]
        if is_subclass(grad):
            raise UnsupportedError(
                f"the gradient of a plain tensor input is a {type(grad).__qualname__}: "
                "aotgrad gives plain inputs plain gradients only (pass that input as a "
                f"{type(grad).__qualname__} too)"
            )
        return grad


def _detached(x: torch.Tensor) -> torch.Tensor:
    return x.detach()


def as_traced() -> None:
    """An output's gradient is rebuilt as the output is laid out."""
    return None


def flatten_args(
    flat: Sequence[Any], layouts: Sequence[Layout | None], grad_layouts: dict[int, Layout]
) -> list[Any]:
    """The child's arguments: every subclass replaced by its leaves. A subclass that
    requires grad goes through ``_Flatten`` so its gradient reaches it, laid out as
    ``grad_layouts`` (per argument, filled when the child traces its backward) says."""
    out: list[Any] = []
    grad = torch.is_grad_enabled()
    seen: dict[int, list[Any]] = {}  # (one subclass passed twice: the same leaves twice)
    for i, (x, layout) in enumerate(zip(flat, layouts, strict=True)):
        if layout is None:
            out.append(x)
        elif id(x) in seen:
            out.extend(seen[id(x)])
        elif grad and x.requires_grad:
            seen[id(x)] = flatten_differentiably(
                layout, _detached, lambda i=i: grad_layouts.get(i), x
            )
            out.extend(seen[id(x)])
        else:
            seen[id(x)] = leaves(x, layout, [])
            out.extend(seen[id(x)])
    return out


def unflatten_values(
    values: Sequence[Any],
    layouts: Sequence[Layout | None],
    grad_layouts: dict[int, Layout] | None = None,
) -> list[Any]:
    """The inverse of ``flatten_args``: subclasses rebuilt (differentiably where a leaf
    requires grad; their gradients' layouts noted in ``grad_layouts``, per value)."""
    out: list[Any] = []
    i = 0
    grad = torch.is_grad_enabled()
    for k, layout in enumerate(layouts):
        if layout is None:
            out.append(values[i])
            i += 1
            continue
        part = values[i : i + layout.n_leaves]
        i += layout.n_leaves
        if grad and any(_differentiable(p) and p.requires_grad for p in part):
            seen = None if grad_layouts is None else functools.partial(grad_layouts.__setitem__, k)
            out.append(_Unflatten.apply(layout, seen, *part))
        else:
            out.append(rebuild(layout, part))
    return out
