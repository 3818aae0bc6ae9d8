"""The hooks registered on the module ``aot_module`` compiles, run as eager runs them.

Traced, a module's own hooks ran once, at trace time, on stand-in tensors a hook cannot
read (``register_full_backward_hook`` logged one call where eager logs one per backward;
a forward hook recording activations kept unreadable tensors; blind suites 5 and 6).
Eager's ``Module.__call__`` runs them around ``forward``: forward pre-hooks, forward
hooks, and the full backward hooks through autograd nodes on the inputs and outputs.
``call_with_hooks`` calls the module itself, its ``forward`` for that call the compiled
one, so that torch's own machinery runs every hook on every call, with the module as its
argument; the trace (``traced_forward``) runs ``forward`` without them.

Hooks on submodules cannot run around a compiled call: a trace runs them once, on
stand-ins (a forward hook recording a submodule's activations kept one unreadable
``FunctionalTensor`` where eager's keeps one real tensor per call). Those torch's own
utilities register (``weight_norm``, ``spectral_norm``, pruning, quantization
observers: the value they compute is the graph's) stay traced; a submodule with a hook
of the user's runs the calls eagerly (``refuse_submodule_hooks``: an
``EagerReplayWarning`` names it; ``torch.compile`` traces such hooks with their effects).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

from .errors import EagerRefusal

__all__ = [
    "call_with_hooks",
    "has_own_hooks",
    "refuse_submodule_hooks",
    "traced_forward",
    "users_hooks",
]

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


def _defined_in(hook: Any) -> str:
    """The module that defines ``hook`` (a function, partial, bound method or object)."""
    while hasattr(hook, "func") and callable(hook.func):  # (functools.partial)
        hook = hook.func
    hook = getattr(hook, "__func__", hook)
    module = getattr(hook, "__module__", None)
    return module if isinstance(module, str) else type(hook).__module__


def users_hooks(mod: torch.nn.Module) -> list[tuple[str, str, Any]]:
    """``(submodule name, kind, hook)`` for every hook of the user's on a submodule of
    ``mod`` (not ``mod`` itself: its own run around the compiled call) or registered
    globally for every module."""
    from torch.nn.modules import module as torch_module

    found: list[tuple[str, str, Any]] = []
    for name, sub in mod.named_modules(remove_duplicate=True):
        for kind in _HOOK_DICTS if name else ():
            found += [(name, kind, h) for h in (getattr(sub, kind, None) or {}).values()]
    for kind in _HOOK_DICTS:
        found += [
            ("(every module)", kind, h) for h in getattr(torch_module, "_global" + kind).values()
        ]
    return [(n, k, h) for n, k, h in found if not _defined_in(h).startswith("torch.")]


def refuse_submodule_hooks(mod: torch.nn.Module) -> None:
    """Before a trace of ``mod``'s forward: an ``EagerRefusal`` (the calls run eagerly)
    where a submodule has a hook of the user's (see the module's docstring)."""
    hooks = users_hooks(mod)
    if hooks:
        name, kind, hook = hooks[0]
        what = getattr(hook, "__qualname__", None) or type(hook).__name__
        raise EagerRefusal(
            f"submodule {name!r} has a hook ({kind.strip('_')[:-1]} {what}): eager runs it "
            "on every call with the call's tensors, a trace would run it once on stand-ins; "
            'the calls run eagerly (torch.compile(backend="aotgrad") traces hooks with '
            "their effects)"
        )
