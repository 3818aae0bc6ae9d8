"""The hooks registered on the module ``aot_module`` compiles, run as eager runs them.

Traced, a module's own hooks ran once, at trace time, on stand-in tensors a hook cannot
read (``register_full_backward_hook`` logged one call where eager logs one per backward;
a forward hook recording activations kept unreadable tensors; blind suites 5 and 6).
Eager's ``Module.__call__`` runs them around ``forward``: forward pre-hooks, forward
hooks, and the full backward hooks through autograd nodes on the inputs and outputs.
``call_with_hooks`` calls the module itself, its ``forward`` for that call the compiled
one, so that torch's own machinery runs every hook on every call, with the module as its
argument; the trace (``traced_forward``) runs ``forward`` without them.

Hooks on submodules stay traced: they run inside the compiled graph's trace, once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["call_with_hooks", "has_own_hooks", "traced_forward"]

_HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_hooks",
    "_backward_pre_hooks",
    "_backward_hooks",
)
_lock = threading.RLock()


def has_own_hooks(mod: torch.nn.Module) -> bool:
    """Whether hooks are registered on ``mod`` itself (not on its submodules)."""
    return any(getattr(mod, name, None) for name in _HOOK_DICTS)


class _Compiled:
    """The ``forward`` set on the module for one call: the compiled call; it keeps the
    module's own ``forward`` (an instance attribute, if the user set one) for the trace."""

    def __init__(self, run: Callable[..., Any], own: Any) -> None:
        self.run = run
        self.own = own

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)


def traced_forward(mod: torch.nn.Module) -> Callable[..., Any]:
    """What the trace calls: the module with its hooks where it has none of its own, else
    its ``forward`` (the runtime runs the hooks around the compiled call)."""
    if not has_own_hooks(mod):
        return mod
    current = mod.__dict__.get("forward")
    if isinstance(current, _Compiled):
        current = current.own
    return current if current is not None else type(mod).forward.__get__(mod)


def call_with_hooks(mod: torch.nn.Module, run: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """``mod(*args, **kwargs)`` with ``run`` as its forward: torch runs the hooks."""
    with _lock:
        own = mod.__dict__.get("forward")
        mod.forward = _Compiled(run, own)  # type: ignore[method-assign]
        try:
            return mod(*args, **kwargs)
        finally:
            if own is None:
                del mod.forward
            else:
                mod.forward = own  # type: ignore[method-assign]
