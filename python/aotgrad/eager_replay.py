"""A call whose trace raised the function's own error runs the function eagerly.

Eager raises part way through a function, with what the function did before the raise
done: inputs written, their version counts moved, a parameter's value changed. A trace
raises before anything runs, so the caller's tensors would come back untouched where
eager's are not (a module's parameter, written and then refused in-place with grad,
keeps eager's new value and version across calls). Where tracing raised an error that
is not aotgrad's verdict (``errors.raised_while_tracing``: what the function raised, an
``EagerRefusal``), the call runs the user's function on the caller's tensors instead:
eager raises its own error with its own effects.

Where eager does not raise (the trace's error was aotgrad's gap), the call has run as
eager runs it: its result is returned, with an ``EagerReplayWarning`` naming the
error, once per compiled function. Either way the guard key is remembered: the trace
depends on the key alone, so later calls with it run eagerly without tracing again.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

from .autocast_state import autocast_state_kept
from .errors import (
    EagerReplayWarning,
    HookedViewRead,
    UnderFunctorchTransform,
    raised_by_graph,
    raised_while_tracing,
)

__all__ = ["EagerReplays", "replaying"]


class EagerReplays:
    """The guard keys of one compiled function whose calls run eagerly."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        #: Guard key → the error its trace raised.
        self.keys: dict[tuple, BaseException] = {}
        self._warned = False

    @staticmethod
    def replays(error: BaseException) -> bool:
        return raised_while_tracing(error)

    def add(self, key: tuple, error: BaseException) -> None:
        self.keys[key] = error

    @staticmethod
    def replays_run(error: BaseException, layout: Any) -> bool:
        """A compiled graph raised as it ran (``errors.raised_by_graph``: values decide,
        an index out of range) where the runtime changed nothing of the caller's before
        it: eager's run raises after the function's earlier writes."""
        if isinstance(error, torch.OutOfMemoryError):
            return False  # (eager would need the memory too)
        return raised_by_graph(error) and not layout.writes_before_graph

    def run_once(self, flat: Sequence[Any], shape: Any, why: BaseException) -> Any:
        """The function on the caller's arguments, this call only (values decided, or
        the caller's hooks: ``why``)."""
        args, kwargs = _arguments(flat, shape)
        with autocast_state_kept():
            result = self.fn(*args, **kwargs)
        if isinstance(why, (HookedViewRead, UnderFunctorchTransform)):
            self._warn(f"this call has {why}")
        else:
            self._warn("running its compiled graph raised, where eager PyTorch does not")
        return result

    def run(self, key: tuple, flat: Sequence[Any], shape: Any) -> Any:
        """The function on the caller's arguments (``flat``, with their pytree spec or
        count ``shape``), as eager runs it."""
        args, kwargs = _arguments(flat, shape)
        with autocast_state_kept():
            result = self.fn(*args, **kwargs)
        error = self.keys[key]
        first = str(error).splitlines()[0][:400] if str(error) else ""
        self._warn(
            f"tracing it raised {type(error).__name__}: {first}, where eager PyTorch runs it"
        )
        return result

    def _warn(self, what: str) -> None:
        if not self._warned:
            self._warned = True
            name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
            warnings.warn(
                f"aotgrad: ran {name} eagerly: {what} (a gap in aotgrad: please report it)",
                EagerReplayWarning,
                stacklevel=5,
            )


def _arguments(flat: Sequence[Any], shape: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments from their flat list and pytree spec (or count)."""
    if isinstance(shape, int):
        return tuple(flat), {}
    return pytree.tree_unflatten(list(flat), shape)


def replaying(run: Callable[..., Any], fn: Callable[..., Any], layout: Any) -> Callable[..., Any]:
    """``run`` (a compiled graph's call under Dynamo, whose guards cover the trace); where
    the graph raises as it runs (``EagerReplays.replays_run``), Dynamo's graph ``fn``
    runs eagerly instead: eager's error with eager's earlier writes."""
    if layout.writes_before_graph:
        return run

    def call(*args: Any) -> Any:
        try:
            return run(*args)
        except Exception as e:
            if not EagerReplays.replays_run(e, layout):
                raise
        with autocast_state_kept():
            return fn(*args)

    return call
