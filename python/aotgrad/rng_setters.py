"""What a compiled graph cannot repeat, run eagerly: the function setting the random
number generator's state.

A traced graph draws from the generator as the function did, but a Python call that
sets its state (``torch.manual_seed(3)``, ``torch.set_rng_state(s)``, a
``torch.random.fork_rng()`` block, which restores it on the way out) runs once, while
tracing: every later call would draw other numbers than eager's (blind I1: a second
call differed without a word). Such calls from the user's code stop the trace and the
calls run eagerly, with an ``EagerReplayWarning`` (they were refused; ``torch.compile``
breaks the graph there instead, so its graphs never hold one); torch's own
(checkpointing replays the state it saved) are let through. So is a
``torch.Generator`` the function makes itself and draws from: the graph would keep the
one made while tracing and carry on drawing from it (``GeneratorsSeen``).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import torch

from .errors import UnsupportedError, run_eagerly

_SETTERS = (
    (torch, "manual_seed"),
    (torch, "seed"),
    (torch, "set_rng_state"),
    (torch.random, "manual_seed"),
    (torch.random, "seed"),
    (torch.random, "set_rng_state"),
    (torch.random, "fork_rng"),
)


def _from_torch(frame: Any) -> bool:
    name = frame.f_globals.get("__name__", "")
    return name == "torch" or name.startswith("torch.")


def _refusing(name: str, setter: Callable[..., Any]) -> Callable[..., Any]:
    """``setter`` (``name``: where users find it), refused when called from user code."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if not _from_torch(sys._getframe(1)):
            raise run_eagerly(
                UnsupportedError(
                    f"the function calls {name}(): a compiled graph cannot set the random "
                    "number generator's state on every call as eager does (it would draw "
                    "other numbers from the second call on); run eagerly (set it outside the "
                    "compiled function to compile it)"
                )
            )
        return setter(*args, **kwargs)

    return call


@contextlib.contextmanager
def refusing_rng_setters() -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for owner, name in _SETTERS:
            setter = getattr(owner, name)
            named = f"{owner.__name__}.{name}"
            stack.enter_context(mock.patch.object(owner, name, _refusing(named, setter)))
        yield


class GeneratorsSeen:
    """The generators random ops were given while tracing, held weakly: one the function
    made itself is gone once it returns (``refuse_made_inside``)."""

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []

    def note(self, g: Any) -> None:
        if isinstance(g, torch.Generator):
            self.refs.append(weakref.ref(g))

    def refuse_made_inside(self) -> None:
        if any(r() is None for r in self.refs):
            raise run_eagerly(
                UnsupportedError(
                    "the function makes a torch.Generator and draws from it: a compiled graph "
                    "would keep drawing from the one made while tracing, not a fresh one per "
                    "call as eager does; run eagerly (make it outside the function and pass it "
                    "in to compile it)"
                )
            )
