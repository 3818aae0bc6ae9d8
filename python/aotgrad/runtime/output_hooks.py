"""Hooks the caller registers on the compiled Function's outputs see only real gradients.

One compiled node stands for what eager computed with several: ``a = x * 2; b = x * 3``
are two nodes in eager, two outputs of one node here. A backward through ``a`` alone
runs that node with no gradient for ``b``, and autograd calls ``b``'s hooks with None
(a recording hook raised ``'NoneType' object has no attribute 'clone'``; eager never
calls it: ``b``'s own node never runs). So the Function's backward class gives each
output's hook dict one that wraps what it holds: a hook is skipped where the gradient
is None, as eager's engine never reaches it. (Registered through
``Tensor.register_hook``, which asks the node to take the tensor's dict once:
``_register_hook_dict``.)
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any

import torch

from ..input_hooks import defined_only

__all__ = ["hooks_on_defined_gradients"]

_REGISTER_HOOK_DICT = torch._C._FunctionBase._register_hook_dict


class _DefinedOnlyHooks(OrderedDict):
    """A tensor's hook dict whose hooks are skipped on no gradient."""

    def __setitem__(self, key: Any, hook: Any) -> None:
        super().__setitem__(key, functools.partial(defined_only, hook))


def _register_hook_dict(node: Any, tensor: torch.Tensor) -> None:
    hooks = tensor._backward_hooks
    wrapped = _DefinedOnlyHooks()
    for k, h in (hooks or {}).items():
        wrapped[k] = h
    tensor._backward_hooks = wrapped
    _REGISTER_HOOK_DICT(node, tensor)


def hooks_on_defined_gradients(function: type) -> type:
    """``function`` (an ``autograd.Function``) whose outputs' hooks skip no gradient."""
    function._backward_cls._register_hook_dict = _register_hook_dict  # type: ignore[attr-defined]
    return function
