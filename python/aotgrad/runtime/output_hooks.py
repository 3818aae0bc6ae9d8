"""Hooks the caller registers on the compiled Function's outputs see only real gradients.

One compiled node stands for what eager computed with several: ``a = x * 2; b = x * 3``
are two nodes in eager, two outputs of one node here. A backward through ``a`` alone
runs that node with no gradient for ``b``, and autograd calls ``b``'s hooks with None
(a recording hook raised ``'NoneType' object has no attribute 'clone'``; eager never
calls it: ``b``'s own node never runs). So the Function's backward class gives each
output's hook dict one that wraps what it holds: a hook is skipped where the gradient
is None, as eager's engine never reaches it. (Registered through
``Tensor.register_hook``, which asks the node to take the tensor's dict once:
``_register_hook_dict``.) An output that other outputs are computed from inside the
graph (``fed_on``) keeps torch's plain dict: eager's hook would see the gradient from
those too, which the compiled backward adds inside; it is called as before (with None
where the caller gives it none), and a warning says what it sees.
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict
from typing import Any

import torch

from ..input_hooks import defined_only

__all__ = ["fed_on", "hooks_on_defined_gradients"]

_REGISTER_HOOK_DICT = torch._C._FunctionBase._register_hook_dict


def _counts_calls(hook: Any) -> bool:
    """A hook of ``register_multi_grad_hook(..., mode="all")``: it counts one call per
    tensor whose node the engine runs (each output of the compiled node), None included,
    before it calls the user's function (skipped on None, it never did)."""
    return getattr(hook, "__module__", None) == "torch.autograd.graph" and getattr(
        hook, "__qualname__", ""
    ).startswith("register_multi_grad_hook.")


class _DefinedOnlyHooks(OrderedDict):
    """A tensor's hook dict whose hooks are skipped on no gradient."""

    def __setitem__(self, key: Any, hook: Any) -> None:
        if _counts_calls(hook):
            super().__setitem__(key, hook)
        else:
            super().__setitem__(key, functools.partial(defined_only, hook))


def _register_hook_dict(node: Any, tensor: torch.Tensor) -> None:
    if tensor.output_nr in type(node)._fed_on:
        warnings.warn(
            "aotgrad: a hook registered on an output of a compiled call that its other "
            "outputs are computed from sees only the gradient given to that output, not "
            "the part that flows back through the others (eager's does); register it "
            "inside the compiled function",
            stacklevel=3,
        )
        _REGISTER_HOOK_DICT(node, tensor)
        return
    hooks = tensor._backward_hooks
    wrapped = _DefinedOnlyHooks()
    for k, h in (hooks or {}).items():
        wrapped[k] = h
    tensor._backward_hooks = wrapped
    _REGISTER_HOOK_DICT(node, tensor)


def hooks_on_defined_gradients(function: type, fed_on: frozenset[int]) -> type:
    """``function`` (an ``autograd.Function``) whose outputs' hooks skip no gradient, but
    for those of ``fed_on`` (``fed_on``)."""
    backward = function._backward_cls  # type: ignore[attr-defined]
    backward._register_hook_dict = _register_hook_dict
    backward._fed_on = fed_on
    return function


def fed_on(gm: Any, n_outputs: int, differentiated: Any = None) -> frozenset[int]:
    """The first ``n_outputs`` outputs of graph ``gm`` that another of them is computed
    from (one pass from the outputs back, each node's reached outputs as a bit mask).
    ``differentiated``: the outputs the backward takes a gradient for (others, a view the
    runtime remakes of another output, feed none through the graph)."""
    outs = list(gm.graph.output_node().args[0])[:n_outputs]
    reach: dict[Any, int] = {}
    for k, o in enumerate(outs):
        if hasattr(o, "op") and (differentiated is None or k in differentiated):
            reach[o] = reach.get(o, 0) | (1 << k)
    for node in reversed(gm.graph.nodes):
        bits = reach.get(node, 0)
        if bits:
            for a in node.all_input_nodes:
                reach[a] = reach.get(a, 0) | bits
    found = set()
    for k, o in enumerate(outs):
        if hasattr(o, "op") and reach.get(o, 0) & ~(1 << k):  # (its own bit, or none)
            found.add(k)  # (another output's nodes reach it; or it is returned twice)
    return frozenset(found)
