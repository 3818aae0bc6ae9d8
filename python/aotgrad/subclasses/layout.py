"""How a subclass value flattens (``Layout``): its type, flatten ctx, outer size and
stride, inner tensors, nested to any depth; its leaves, and rebuilding it from them
(a jagged ``NestedTensor``'s nested int tied while tracing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch._subclasses.functional_tensor
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..errors import UnsupportedError

#: Plain tensor types: a call holding only these (and non-tensors) never comes here.
_PLAIN = frozenset({torch.Tensor, torch.nn.Parameter})


#: The tracer's own tensors: plain values inside a trace.
TRACING_TYPES = (
    torch._subclasses.FakeTensor,
    torch._subclasses.functional_tensor.FunctionalTensor,
)


def _sizes_key(sizes: tuple[Any, ...]) -> tuple[Any, ...]:
    """Outer sizes or strides as a key: a nested int (a jagged ``NestedTensor``'s ragged
    size, ``j1``, new for every offsets tensor) is keyed by its coefficient only; the
    ragged structure itself is the offsets leaf, which the child's guards cover."""
    return tuple(("nested int", _nested_coeff(s)) if is_nested_int(s) else s for s in sizes)


def is_nested_int(s: Any) -> bool:
    return isinstance(s, torch.SymInt) and s.node.is_nested_int()


def _constant_nested_int(s: Any) -> bool:
    """A nested int of eager tensors (not a shape-environment symbol hinted by one)."""
    from torch.nested._internal.nested_int import NestedIntNode

    return isinstance(s, torch.SymInt) and isinstance(s.node, NestedIntNode)


def _nested_coeff(s: torch.SymInt) -> Any:
    return s.node.nested_int_coeff()


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
        sizes = (_sizes_key(self.outer_size), _sizes_key(self.outer_stride))
        if ragged([self]):
            # (a nested tensor's outer size and stride are its leaves': batch = offsets'
            # size - 1, the rest the values'; the child's guards cover those)
            sizes = (len(self.outer_size), sizes[0][self.ctx["ragged_idx"]])
        return (
            self.cls,
            _hashable(self.ctx),
            sizes,
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
    if isinstance(x, TRACING_TYPES):
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
    """Raises ``UnsupportedError`` for an inner tensor aotgrad cannot flatten (a
    ``__torch_dispatch__`` subclass without the flatten protocol), at any depth."""
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
    _tie_nested_int(layout, inner)
    return layout.cls.__tensor_unflatten__(
        inner, layout.ctx, layout.outer_size, layout.outer_stride
    )


def _tie_nested_int(layout: Layout, inner: dict[str, Any]) -> None:
    """While tracing, a jagged ``NestedTensor``'s fake offsets (or lengths) take the
    caller's nested int as their memo, in place of the symbol fakeifying gave them (a
    symbol no proxy of this trace tracks: size arithmetic on it fails); a constant nested
    int needs no proxy. (``__tensor_unflatten__`` sets the memo of fake inner tensors,
    not of a trace's functional ones.)"""
    from torch._subclasses.functional_tensor import mb_unwrap_functional_tensor
    from torch.nested._internal.nested_tensor import NestedTensor

    if layout.cls is not NestedTensor:
        return
    source = inner.get("_lengths")
    if source is None:
        source = inner["_offsets"]
    fake = mb_unwrap_functional_tensor(source)
    ragged = layout.outer_size[layout.ctx["ragged_idx"]]
    if (
        isinstance(fake, torch._subclasses.FakeTensor)
        and not _constant_nested_int(fake.nested_int_memo)
        and _constant_nested_int(ragged)
    ):
        fake.nested_int_memo = ragged


def ragged(layouts: Sequence[Layout | None]) -> bool:
    return any(lay is not None and any(is_nested_int(s) for s in lay.outer_size) for lay in layouts)
