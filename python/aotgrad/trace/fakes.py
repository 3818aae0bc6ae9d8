"""Fake tensors for tracing: the fake mode and the fakes of real inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ..alias.views import node_unreadable
from ..errors import UnsupportedError
from ..input_hooks import CALLER_RETAINS


def make_fake_mode(dynamic: bool) -> FakeTensorMode:
    """A fake mode for tracing. It always has a ShapeEnv: without one, torch records the
    *value* of 0-dim integer/float64 CPU inputs and bakes it into the graph unguarded
    (``torch.narrow(x, 0, torch.tensor(1), 2)`` would then ignore a later start); with one,
    such a use is data-dependent and refused with a TraceError."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(
        shape_env=ShapeEnv(), static_shapes=not dynamic, allow_non_fake_inputs=False
    )


def fakify(
    fake_mode: FakeTensorMode,
    flat_args: Sequence[Any],
    *,
    dynamic: bool,
    static_dims: dict[int, tuple[int, ...]] | None = None,
) -> list[Any]:
    """Real tensors → fakes of ``fake_mode``; fakes and SymInts of that mode pass through.
    ``static_dims``: under ``dynamic``, per tensor (its index among the tensors), the
    sizes kept static."""
    out: list[Any] = []
    n = 0
    for a in flat_args:
        if isinstance(a, torch.Tensor) and not isinstance(a, torch._subclasses.FakeTensor):
            static = static_dims.get(n, ()) if static_dims and dynamic else ()
            out.append(_fake_of(fake_mode, a, dynamic, static))
        else:
            out.append(a)
        n += isinstance(a, torch.Tensor)
    return out


def _symbolic_context(a: torch.Tensor, static: tuple[int, ...]) -> Any:
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    return StatelessSymbolicContext(
        dynamic_sizes=[
            DimDynamic.STATIC if d in static else DimDynamic.DYNAMIC for d in range(a.dim())
        ],
        constraint_sizes=[None] * a.dim(),
    )


def _fake_of(
    fake_mode: FakeTensorMode, a: torch.Tensor, dynamic: bool, static: tuple[int, ...] = ()
) -> Any:
    """The fake of ``a`` (``static``: its dimensions kept static under ``dynamic``); of a
    view written since its node was recorded (a ``split`` output, say), marked so: reading
    that node raises in eager."""
    if not node_unreadable(a):
        if static:
            fake = fake_mode.from_tensor(a, symbolic_context=_symbolic_context(a, static))
        else:
            fake = fake_mode.from_tensor(a, static_shapes=not dynamic)
        if a.requires_grad and not a.is_leaf and a.retains_grad:
            setattr(fake, CALLER_RETAINS, True)  # (input_hooks.retained_written_inputs)
        return fake
    # ``from_tensor`` reads ``is_leaf``: read it at the version the node was recorded at
    # (``aotgrad.stale_input_views`` raises eager's error where the function reads the node)
    version = _recorded_version(a)
    if version is None:
        raise UnsupportedError(
            f"an input of shape {tuple(a.shape)} is a view whose autograd node cannot be "
            "read (of unbind/split/chunk or made under no_grad, written since): run it "
            "eagerly, or pass a fresh view"
        )
    now = a._version
    torch._C._autograd._unsafe_set_version_counter((a,), (version,))
    try:
        fake = fake_mode.from_tensor(a, static_shapes=not dynamic)
    finally:
        torch._C._autograd._unsafe_set_version_counter((a,), (now,))
    fake._aotgrad_node_unreadable = True  # (``alias.views.node_unreadable``)
    return fake


def _recorded_version(t: torch.Tensor, tries: int = 4096) -> int | None:
    """The version count at which ``t``'s view node was recorded (its node reads without
    a rebuild only at that count), found by setting its counter; None past ``tries``."""
    now = t._version
    try:
        for v in range(now - 1, max(-1, now - 1 - tries), -1):
            torch._C._autograd._unsafe_set_version_counter((t,), (v,))
            if not node_unreadable(t):
                return v
    finally:
        torch._C._autograd._unsafe_set_version_counter((t,), (now,))
    return None
