"""Fake tensors for tracing: the fake mode and the fakes of real inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode


def make_fake_mode(dynamic: bool) -> FakeTensorMode:
    """A fake mode for tracing. It always has a ShapeEnv: without one, torch records the
    *value* of 0-dim integer/float64 CPU inputs and bakes it into the graph unguarded
    (``torch.narrow(x, 0, torch.tensor(1), 2)`` would then ignore a later start); with one,
    such a use is data-dependent and refused with a TraceError."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(
        shape_env=ShapeEnv(), static_shapes=not dynamic, allow_non_fake_inputs=False
    )


def fakify(fake_mode: FakeTensorMode, flat_args: Sequence[Any], *, dynamic: bool) -> list[Any]:
    """Real tensors → fakes of ``fake_mode``; fakes and SymInts of that mode pass through."""
    out: list[Any] = []
    for a in flat_args:
        if isinstance(a, torch.Tensor) and not isinstance(a, torch._subclasses.FakeTensor):
            out.append(fake_mode.from_tensor(a, static_shapes=not dynamic))
        else:
            out.append(a)
    return out
