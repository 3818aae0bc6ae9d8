"""Tensor subclasses at the boundary of the trace.

A traceable wrapper subclass (``TwoTensor``, ``DTensor``, any tensor with
``__tensor_flatten__`` / ``__tensor_unflatten__``) is a property of the values that
enter and leave a compiled function, not of its graph. A call whose arguments hold
one is turned into a call of a *plain* function over the subclasses' inner tensors
(flattened recursively, to any depth), compiled by an ordinary ``AotFunction`` (the
"child", one per input layout): the joint graph, the node table, the Rust core and
both partitioners only ever see plain tensors.

::

    user args (subclasses) --flatten--> leaves --child AotFunction--> plain outs --rebuild--> outputs
                                          |                              ^
    traced plain function:   leaves --unflatten--> subclasses --fn--> subclass outs --flatten--+

What each subclass hook means here:

====================================== ==================================================
hook                                   used for
====================================== ==================================================
``t.__tensor_flatten__()``             ``(inner attribute names, ctx)``: the inputs' and
                                       outputs' layouts (``Layout``), recursively
``cls.__tensor_unflatten__(inner,      rebuilding a subclass from its inner tensors: the
ctx, outer_size, outer_stride)``       inputs inside the traced function (over fake /
                                       functional inner tensors), the outputs at runtime
                                       with the layout recorded while tracing, the inputs'
                                       gradients in the backward
``t.__coerce_tangent_metadata__()``    applied to a runtime gradient of a subclass output
                                       before it is flattened into the child's tangents
====================================== ==================================================

Autograd crosses the boundary through two small ``autograd.Function`` s: ``_Flatten``
(a subclass to its leaves; backward rebuilds the subclass gradient) and ``_Unflatten``
(leaves to a subclass; backward flattens the subclass gradient). The child's guard
key covers the leaves (dtype, sizes, strides, requires_grad, aliasing, written or
not); the layout key (``Layout.key``: each subclass's type, flatten ctx, outer size
and stride, nested) selects the child. Writes to a subclass input are writes to its
inner tensors, which the child replays on the caller's inner tensors.

Subclasses aotgrad refuses (``UnsupportedError`` naming the type, raised before any
tracing so nothing can abort the process): those in ``_REFUSED`` and tensor
subclasses with a ``__torch_dispatch__`` but no flatten protocol.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch._subclasses.functional_tensor
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from .errors import UnsupportedError

#: Plain tensor types: a call holding only these (and non-tensors) never comes here.
_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})


#: The tracer's own tensors: plain values inside a trace.
_TRACING_TYPES = (
    torch._subclasses.FakeTensor,
    torch._subclasses.functional_tensor.FunctionalTensor,
)


def _refused() -> dict[type, str]:
    from torch.nested._internal.nested_tensor import NestedTensor

    return {
        NestedTensor: (
            "its ragged size is a nested int that aotgrad's fake inputs cannot carry yet "
            "(torch's fake tensors abort the process on it)"
        ),
    }


_REFUSED: dict[type, str] | None = None


@dataclass(frozen=True)
class Layout:
    """How one subclass value flattens: its type, flatten ctx, outer size and stride,
    and its inner tensors' layouts (``None`` for a plain inner tensor)."""

    cls: type
    ctx: Any
    outer_size: tuple[Any, ...]
    outer_stride: tuple[Any, ...]
    attrs: tuple[str, ...]
    inner: tuple[Layout | Const | None, ...]
    #: Plain tensors at the leaves.
    n_leaves: int

    @property
    def key(self) -> tuple[Any, ...]:
        """Hashable: what a compiled child assumed about this value."""
        return (
            self.cls,
            _hashable(self.ctx),
            self.outer_size,
            self.outer_stride,
            self.attrs,
            tuple(None if i is None else i.key for i in self.inner),
        )

    def describe(self) -> str:
        inner = ", ".join("Tensor" if i is None else i.describe() for i in self.inner)
        return f"{self.cls.__qualname__}({inner})"


@dataclass(frozen=True)
class Const:
    """A non-tensor inner attribute (``DTensor``'s ``device_mesh``): kept in the layout,
    passed to ``__tensor_unflatten__`` as it is, keyed by its hash (or identity)."""

    value: Any

    @property
    def key(self) -> tuple[Any, ...]:
        try:
            hash(self.value)
        except TypeError:
            return ("const", id(self.value))
        return ("const", self.value)

    def describe(self) -> str:
        return type(self.value).__qualname__


def _hashable(ctx: Any) -> Any:
    try:
        hash(ctx)
    except TypeError:
        return ("repr", repr(ctx))
    return ctx


def is_subclass(x: Any) -> bool:
    return type(x) not in _PLAIN and isinstance(x, torch.Tensor) and _wrapper(x)


def _wrapper(x: torch.Tensor) -> bool:
    if isinstance(x, _TRACING_TYPES):
        return False
    if is_traceable_wrapper_subclass(x):
        return True
    if type(x).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        raise UnsupportedError(
            f"tensor subclass {type(x).__qualname__} has a __torch_dispatch__ but no "
            "__tensor_flatten__/__tensor_unflatten__: aotgrad cannot trace through it"
        )
    return False


def any_subclass(values: Sequence[Any]) -> bool:
    """Whether a call holds a subclass aotgrad must flatten; raises ``UnsupportedError``
    for one it refuses (before anything is traced)."""
    found = False
    for x in values:
        if is_subclass(x):
            check_supported(x)
            found = True
    return found


def check_supported(x: torch.Tensor) -> None:
    global _REFUSED
    if _REFUSED is None:
        _REFUSED = _refused()
    reason = _REFUSED.get(type(x))
    if reason is not None:
        raise UnsupportedError(f"tensor subclass {type(x).__qualname__} is not supported: {reason}")
    for attr in x.__tensor_flatten__()[0]:
        inner = getattr(x, attr)
        if is_subclass(inner):
            check_supported(inner)


# ---------------------------------------------------------------- flatten / unflatten


def layout_of(t: torch.Tensor) -> Layout:
    attrs, ctx = t.__tensor_flatten__()
    inner = []
    n = 0
    for attr in attrs:
        x = getattr(t, attr)
        sub: Layout | Const | None
        if not isinstance(x, torch.Tensor):
            sub = Const(x)
        elif is_traceable_wrapper_subclass(x):
            sub = layout_of(x)
            n += sub.n_leaves
        else:
            sub = None
            n += 1
        inner.append(sub)
    return Layout(type(t), ctx, tuple(t.size()), tuple(t.stride()), tuple(attrs), tuple(inner), n)


def leaves(t: torch.Tensor, layout: Layout, out: list[Any]) -> list[Any]:
    """The plain tensors inside ``t`` (laid out as ``layout``), depth first."""
    for attr, sub in zip(layout.attrs, layout.inner, strict=True):
        x = getattr(t, attr)
        if sub is None:
            out.append(x)
        elif isinstance(sub, Layout):
            leaves(x, sub, out)
    return out


def rebuild(layout: Layout, flat: Sequence[Any], start: int = 0) -> torch.Tensor:
    """The subclass ``layout`` describes, from its leaves ``flat[start:]``."""
    inner = {}
    i = start
    for attr, sub in zip(layout.attrs, layout.inner, strict=True):
        if sub is None:
            inner[attr] = flat[i]
            i += 1
        elif isinstance(sub, Const):
            inner[attr] = sub.value
        else:
            inner[attr] = rebuild(sub, flat, i)
            i += sub.n_leaves
    return layout.cls.__tensor_unflatten__(
        inner, layout.ctx, layout.outer_size, layout.outer_stride
    )


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


def _rebuild_gradient(
    layout: Layout, metas: Sequence[tuple[Any, ...]], grads: Sequence[Any]
) -> Any:
    """The gradient of a subclass value from its leaves' gradients (None: zeros)."""
    given = [g for g in grads if g is not None]
    if not given:
        return None
    device = given[0].device
    full = [
        torch.zeros(shape, dtype=dtype, device=device) if g is None else g
        for g, (shape, dtype) in zip(grads, metas, strict=True)
    ]
    return rebuild(layout, full)


class _Flatten(torch.autograd.Function):
    """A subclass to its leaves, differentiably. ``fresh`` decides which leaves are
    returned as new tensors (a tensor the caller holds must not become this node's
    output: autograd would rewrite its history); ``grad_layout()``, asked in the
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
        ctx.metas = [(x.shape, x.dtype) for x in out]
        return tuple(fresh(x) for x in out)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:  # type: ignore[override]
        layout = ctx.grad_layout() or ctx.layout
        return None, None, None, _rebuild_gradient(layout, ctx.metas, grads)


class _Unflatten(torch.autograd.Function):
    """Leaves to a subclass, differentiably."""

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, layout: Layout, seen: Callable[[Layout], None] | None, *flat: torch.Tensor
    ) -> Any:
        ctx.layout, ctx.seen = layout, seen
        return rebuild(layout, flat)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:  # type: ignore[override]
        return (None, None, *_flatten_gradient(ctx.layout, grad, ctx.seen))


class _PlainGradient(torch.autograd.Function):
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


def _as_traced() -> None:
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
    for i, (x, layout) in enumerate(zip(flat, layouts, strict=True)):
        if layout is None:
            out.append(x)
        elif grad and x.requires_grad:
            out.extend(_Flatten.apply(layout, _detached, lambda i=i: grad_layouts.get(i), x))
        else:
            out.extend(leaves(x, layout, []))
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
        if grad and any(isinstance(p, torch.Tensor) and p.requires_grad for p in part):
            seen = None if grad_layouts is None else functools.partial(grad_layouts.__setitem__, k)
            out.append(_Unflatten.apply(layout, seen, *part))
        else:
            out.append(rebuild(layout, part))
    return out


# ---------------------------------------------------------------- the child function


@dataclass
class _Outputs:
    """What the traced function returned: its pytree spec and each output's layout."""

    spec: Any = None
    layouts: tuple[Layout | None, ...] = ()
    #: Per subclass argument, how the traced backward laid out its gradient.
    grad_layouts: dict[int, Layout] = dataclasses.field(default_factory=dict)


def _plain_function(
    fn: Callable[..., Any], shape: Any, layouts: tuple[Layout | None, ...], record: _Outputs
) -> Callable[..., list[Any]]:
    """The function the child traces: rebuilds the subclass arguments from their
    leaves, calls ``fn`` (through the caller's pytree ``shape``), flattens its outputs
    to plain tensors and records their layouts in ``record``."""

    def plain(*args: Any) -> list[Any]:
        full = unflatten_values(args, layouts, record.grad_layouts)
        if torch.is_grad_enabled():
            full = [
                _PlainGradient.apply(x)
                if layout is None and isinstance(x, torch.Tensor) and x.requires_grad
                else x
                for x, layout in zip(full, layouts, strict=True)
            ]
        if isinstance(shape, int):
            a, kw = full, {}
        else:
            a, kw = pytree.tree_unflatten(full, shape)
        out_flat, record.spec = pytree.tree_flatten(fn(*a, **kw))
        given = {id(x) for x in args if isinstance(x, torch.Tensor)}

        def fresh(x: Any) -> Any:
            # An inner tensor the function received (``return x``) or one that requires
            # grad itself: a view, so the flatten node does not take over its history.
            if id(x) in given or x.requires_grad:
                return x.view_as(x)
            return x

        out_layouts: list[Layout | None] = []
        plain_outs: list[Any] = []
        for o in out_flat:
            if not is_subclass(o):
                out_layouts.append(None)
                plain_outs.append(o)
                continue
            layout = layout_of(o)
            out_layouts.append(layout)
            if torch.is_grad_enabled() and o.requires_grad:
                plain_outs.extend(_Flatten.apply(layout, fresh, _as_traced, o))
            else:
                plain_outs.extend(leaves(o, layout, []))
        record.layouts = tuple(out_layouts)
        return plain_outs

    plain.__qualname__ = getattr(fn, "__qualname__", type(fn).__qualname__)
    return plain


@dataclass
class _Child:
    compiled: Any  # an api.AotFunction over the leaves
    outputs: _Outputs


def _child_options(options: Any, flat: Sequence[Any], layouts: Sequence[Layout | None]) -> Any:
    """The parent's options for the child: static inputs (parameters, buffers) mapped
    to their leaves; shapes static (outer sizes are part of the layout key)."""
    static = set(options.static_inputs)
    mapped: list[int] = []
    tensor_index = 0
    leaf_index = 0
    for x, layout in zip(flat, layouts, strict=True):
        if not isinstance(x, torch.Tensor):
            continue
        n = 1 if layout is None else layout.n_leaves
        if tensor_index in static:
            mapped.extend(range(leaf_index, leaf_index + n))
        tensor_index += 1
        leaf_index += n
    return dataclasses.replace(
        options, dynamic=False, static_input_indices=mapped, num_params_buffers=0
    )


def call(parent: Any, flat: list[Any], shape: Any, state: Any, make_child: Any) -> Any:
    """Run ``parent`` (an ``api.AotFunction``) on a call holding subclasses: through the
    child compiled for this layout of its arguments (``make_child(fn, options)``: the
    api's ``AotFunction``, passed in so that this stage does not import the api)."""
    layouts = tuple(layout_of(x) if is_subclass(x) else None for x in flat)
    key = (tuple(None if lay is None else lay.key for lay in layouts), shape)
    children: dict[Any, _Child] = parent.__dict__.setdefault("subclass_children", {})
    child = children.get(key)
    if child is None:
        record = _Outputs()
        fn = _plain_function(parent.fn, shape, layouts, record)
        options = _child_options(parent.options, flat, layouts)
        child = _Child(make_child(fn, options), record)
        children[key] = child
    plain = flatten_args(flat, layouts, child.outputs.grad_layouts)
    outs = child.compiled.call_flat(plain, len(plain), state)
    rebuilt = unflatten_values(outs, child.outputs.layouts)
    return pytree.tree_unflatten(rebuilt, child.outputs.spec)
