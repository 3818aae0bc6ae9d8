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

from torch.utils import _pytree as pytree

from .errors import EagerReplayWarning, raised_while_tracing

__all__ = ["EagerReplays"]


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

    def run(self, key: tuple, flat: Sequence[Any], shape: Any) -> Any:
        """The function on the caller's arguments (``flat``, with their pytree spec or
        count ``shape``), as eager runs it."""
        if isinstance(shape, int):
            args, kwargs = tuple(flat), {}
        else:
            args, kwargs = pytree.tree_unflatten(list(flat), shape)
        result = self.fn(*args, **kwargs)
        if not self._warned:
            self._warned = True
            error = self.keys[key]
            name = getattr(self.fn, "__qualname__", type(self.fn).__name__)
            warnings.warn(
                f"aotgrad: ran {name} eagerly: tracing it raised "
                f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"
                ", where eager PyTorch runs it (a gap in aotgrad: please report it)",
                EagerReplayWarning,
                stacklevel=4,
            )
        return result
