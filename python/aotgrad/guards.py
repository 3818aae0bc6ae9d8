"""Guards: what a compiled artefact assumed about its call, checked cheaply on every call.

A compiled graph is specialised on grad mode, which inputs require grad, input
dtypes/devices/shapes/strides (only ranks and size relations under
``dynamic=True``), which inputs share storage, and the values of non-tensor
arguments. ``call_key`` turns one call into a hashable key; equal keys may
share a compiled artefact. ``describe_change`` says which assumption differs
between two keys, for the recompilation-limit error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch


def _dynamic_shape(t: torch.Tensor) -> tuple[Any, ...]:
    # Sizes 0 and 1 are specialised; equal sizes share one symbol (duck sizing).
    first: dict[int, int] = {}
    pattern = []
    for d, s in enumerate(t.shape):
        if s < 2:
            pattern.append(("const", s))
        else:
            pattern.append(("sym", first.setdefault(s, d)))
    return tuple(pattern)


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.data_ptr() == b.data_ptr()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
    )


def alias_groups(tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """Per tensor input: (index of the first input sharing its storage, index of the first
    input that is the very same view of it — same data pointer, sizes, strides, dtype).

    A storage is identified by its base address (``data_ptr - storage_offset * itemsize``),
    which costs three attribute reads and no Python storage object."""
    first: dict[int, int] = {}
    out: list[tuple[int, int]] = []
    for i, t in enumerate(tensors):
        p = t.data_ptr()
        base = p - t.storage_offset() * t.element_size() if p else -1 - i  # empty: unique
        j = first.setdefault(base, i)
        if j == i:
            out.append((i, i))
            continue
        same = next((k for k in range(i) if out[k][0] == j and _same_view(tensors[k], t)), i)
        out.append((j, same))
    return tuple(out)


def call_key(flat_args: Sequence[Any], *, dynamic: bool, extra: Any = ()) -> tuple:
    """The guard key of one call (see the module docstring)."""
    tensors: list[torch.Tensor] = []
    parts: list[Any] = []
    for a in flat_args:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            shape = _dynamic_shape(a) if dynamic else (a.shape, a.stride())
            parts.append((a.dtype, a.device, a.requires_grad, shape))
        else:
            try:
                hash(a)
                parts.append(("const", type(a), a))
            except TypeError:
                parts.append(("const-id", type(a), id(a)))
    aliases = alias_groups(tensors) if len(tensors) > 1 else ()
    mode = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
    return (mode, tuple(parts), aliases, extra)


_FIELD_NAMES = ("grad mode / inference mode", "inputs", "input aliasing", "module state")


def describe_change(old: tuple, new: tuple) -> str:
    """Name the first assumption that differs between two call keys."""
    for name, a, b in zip(_FIELD_NAMES, old, new):
        if a == b:
            continue
        if name == "inputs" and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    return f"input {i}: {_describe_input(x, y)}"
        return f"{name} changed"
    return "nothing (identical keys)"


def _describe_input(x: Any, y: Any) -> str:
    if x[0] in ("const", "const-id") or y[0] in ("const", "const-id"):
        return f"non-tensor argument value {x[-1]!r} -> {y[-1]!r}"
    labels = ("dtype", "device", "requires_grad", "shape/stride")
    for label, a, b in zip(labels, x, y):
        if a != b:
            return f"{label} {a} -> {b}"
    return "changed"
