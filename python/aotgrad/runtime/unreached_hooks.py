"""Hooks on inputs the backward gives no gradient, kept from being called.

Eager's engine never reaches an input whose gradient nothing computes (``y`` of
``return x * 2, y * 3`` when only the first output is differentiated, or a ``y`` the
function never reads): its node is not part of the pass, so its hooks are not called and
its ``.grad`` stays None. The compiled call is one node with an edge to every input, and
the engine runs the node behind each edge, handing it None: a hook ``lambda g: g * 2``
on such an input raised ``TypeError`` (blind caller-side suite), and a post-accumulate
hook ran with ``.grad`` None (an optimizer step in it).

So for each input the compiled backward gives None, its Python hooks are wrapped for the
rest of the pass: a tensor hook handed None is skipped (one handed a gradient, from
another path into the same input, runs), a post-accumulate hook is skipped unless the
pass accumulated into ``.grad``; the engine's callback at the end of the pass puts the
hooks back. A non-leaf input's hooks are found through the tensor, noted at the call
(``hooked_non_leaves``); a leaf's through its accumulator node.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..input_hooks import defined_only

__all__ = ["hooked_non_leaves", "quiet_unreached"]


def hooked_non_leaves(args: Sequence[Any]) -> dict[int, weakref.ref] | None:
    """The non-leaf tensor inputs with Python hooks (``register_hook``), by position."""
    found = None
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a._backward_hooks and a.grad_fn is not None:
            found = found or {}
            found[i] = weakref.ref(a)
    return found


def _only_if_accumulated(hook: Callable[..., Any], t: torch.Tensor) -> Callable[..., Any]:
    before = t.grad
    version = before._version if before is not None else None

    def hook_after_accumulation(tensor: Any) -> Any:
        grad = tensor.grad
        if grad is None or (grad is before and grad._version == version):
            return None
        return hook(tensor)

    return hook_after_accumulation


def _input_of(ctx: Any, i: int, hooked: dict[int, weakref.ref] | None) -> Any:
    edges = ctx.next_functions
    if i >= len(edges):  # (soak 252950: fewer edges than gradients under Dynamo)
        return None
    node = edges[i][0]
    if node is not None and hasattr(node, "variable"):  # (a leaf's accumulator)
        return node.variable
    ref = hooked.get(i) if hooked else None
    return ref() if ref is not None else None


def quiet_unreached(ctx: Any, grads: Sequence[Any], hooked: dict[int, weakref.ref] | None) -> None:
    """Wraps, for this pass, the hooks of each input ``grads`` gives None (see above)."""
    undo = []
    for i, g in enumerate(grads):
        if g is not None or not ctx.needs_input_grad[i]:
            continue
        t = _input_of(ctx, i, hooked)
        if t is None:
            continue
        for name in ("_backward_hooks", "_post_accumulate_grad_hooks"):
            hooks = getattr(t, name, None)
            if not hooks:
                continue
            kept = dict(hooks)
            for key, hook in kept.items():
                hooks[key] = (
                    functools.partial(defined_only, hook)
                    if name == "_backward_hooks"
                    else _only_if_accumulated(hook, t)
                )
            undo.append((hooks, kept))
    if undo:
        torch.autograd.Variable._execution_engine.queue_callback(lambda: _put_back(undo))


def _put_back(undo: list[tuple[dict, dict]]) -> None:
    for hooks, kept in undo:
        for key, hook in kept.items():
            if key in hooks:  # (one removed during the pass stays removed)
                hooks[key] = hook
