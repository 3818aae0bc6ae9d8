"""Writes through a conjugate or negative view under functionalization.

Eager's ``x.conj().mul_(2)`` writes ``x``'s bytes: ``x`` stays a plain tensor. torch's
functionalization gives ``x`` its new value through the inverse of the ``_conj`` view,
``_conj(new)``: a tensor with the conjugate bit set where ``x`` has none (``_neg_view``
likewise sets the negative bit). Its values are right, but every tensor then taken of
``x``'s storage carries the bit: ``view_as_real(x)`` and ``x.view(dtype)`` raise
"doesn't work on unresolved conjugated tensors" where eager runs, and ``x.imag``
comes out with a negative bit eager's has not. (torch's own AOT Autograd and
``torch.func.functionalize`` raise the same.)

``ResolvingFunctionalMode`` is the tracer's ``FunctionalTensorMode``: after a write
through a tensor with either bit, the written storage's root gets its value resolved
(``clone``: a plain tensor of the same values, one node in the graph), so the tensors
made of it carry the bits eager's do. Other writes cost one schema check.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.utils._pytree import tree_flatten


class ResolvingFunctionalMode(FunctionalTensorMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_dispatch__(func, types, args, kwargs)
        schema = getattr(func, "_schema", None)
        if schema is not None and schema.is_mutable:
            for t in _written(schema, args, kwargs or {}):
                if isinstance(t, FunctionalTensor) and (t.is_conj() or t.is_neg()):
                    _resolve(t._base if t._base is not None else t)
        return out


def _written(schema: Any, args: Any, kwargs: dict) -> list[Any]:
    written = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(a.name)
        written += tree_flatten(value)[0]
    return written


def _resolve(root: Any) -> None:
    """``root``'s functional value, given the bits ``root`` itself shows: where the write
    set a bit it has not, a resolved copy of it, committed as its storage's value."""
    if not isinstance(root, FunctionalTensor):
        return
    elem = root.elem
    torch._sync(elem)
    value = torch._from_functional_tensor(elem)
    if (value.is_conj(), value.is_neg()) == (root.is_conj(), root.is_neg()):
        return
    if root.is_conj() or root.is_neg():
        return  # (a root with a bit of its own: left as torch makes it)
    torch._functionalize_replace(elem, value.clone())
    torch._functionalize_commit_update(elem)
