"""Writes through a conjugate or negative view under functionalization.

Eager's ``x.conj().mul_(2)`` writes ``x``'s bytes: ``x`` stays a plain tensor. torch's
functionalization gives ``x`` its new value through the inverse of the ``_conj`` view,
``_conj(new)``: a tensor with the conjugate bit set where ``x`` has none (``_neg_view``
likewise sets the negative bit). Its values are right, but every tensor then taken of
``x``'s storage carries the bit: ``view_as_real(x)`` and ``x.view(dtype)`` raise
"doesn't work on unresolved conjugated tensors" where eager runs, ``x.imag`` comes out
with a negative bit eager's has not, and where the view was taken through
``view(dtype)`` of a real tensor the inverse itself raises ("view is not supported for
conjugate view tensors"). (torch's own AOT Autograd and ``torch.func.functionalize``
raise the same.)

``ResolvingFunctionalMode`` is the tracer's ``FunctionalTensorMode``. An in-place op on
a tensor with either bit (``t``) runs on a copy of ``t``'s values, and the result, seen
with ``t``'s bits, is copied into ``t`` seen without them: where ``t`` is the flipping
view itself (``x.view(torch.complex128).conj()``), the inverse chain flips each bit
twice in a row and no inverse sees one. After any write through such a tensor (an
``out=`` one too) the written storage's root gets its value resolved where it still
carries a bit (``clone``: a plain tensor of the same values). Other writes cost one
schema check. Open: a write through a view taken of the flipping view (``[1:]``,
``.imag``) of a ``view(dtype)`` of a real tensor still meets the ``view(dtype)``
inverse with a bit, raises in the trace and runs eagerly (named by the warning).
"""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.utils._pytree import tree_flatten

_aten = torch.ops.aten


class ResolvingFunctionalMode(FunctionalTensorMode):
    #: Higher-order ops find their rules by the mode's exact type: they come here and
    #: are given ``FunctionalTensorMode``'s (``_higher_order``).
    supports_higher_order_operators = True

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if isinstance(func, torch._ops.HigherOrderOperator):
            return _higher_order(self, func, args, kwargs or {})
        schema = getattr(func, "_schema", None)
        if schema is None or not schema.is_mutable:
            return super().__torch_dispatch__(func, types, args, kwargs)
        written = [t for t in _written(schema, args, kwargs or {}) if _has_bits(t)]
        if written and _writes_self(schema, args, written):
            out = self._write_plain(func, types, args, kwargs or {})
        else:
            out = super().__torch_dispatch__(func, types, args, kwargs)
        for t in written:
            _resolve(t._base if t._base is not None else t)
        return out

    def _write_plain(self, func: Any, types: Any, args: Any, kwargs: dict) -> Any:
        """``func`` (in place on ``args[0]``, a tensor with a bit) as a write of its
        bytes through a view of them without the bits."""
        t, run = args[0], super().__torch_dispatch__
        flips = [
            f
            for f, on in ((_aten._conj.default, t.is_conj()), (_aten._neg_view.default, t.is_neg()))
            if on
        ]
        copy = run(_aten.clone.default, types, (t,), {})
        run(func, types, (copy, *args[1:]), kwargs)
        plain, bytes_ = t, copy
        for flip in flips:  # (each an involution of the bytes' meaning)
            plain = run(flip, types, (plain,), {})
            bytes_ = run(flip, types, (bytes_,), {})
        run(_aten.copy_.default, types, (plain, bytes_), {})
        return t


def _higher_order(mode: Any, func: Any, args: Any, kwargs: dict) -> Any:
    """``func`` (a higher-order op) by its ``FunctionalTensorMode`` rule, as torch runs it
    under that mode (which the caller has popped); torch's error where it has none."""
    handler = func.python_key_table.get(FunctionalTensorMode)
    if handler is None:
        raise NotImplementedError(
            f"There was no rule registered for HigherOrderOperator {func._name} and mode "
            f"{type(mode).__name__}"
        )
    return handler(mode, *args, **kwargs)


def _has_bits(t: Any) -> bool:
    return isinstance(t, FunctionalTensor) and (t.is_conj() or t.is_neg())


def _writes_self(schema: Any, args: Any, written: list[Any]) -> bool:
    """An in-place op: writes its first argument only and returns it."""
    return (
        len(written) == 1
        and bool(args)
        and args[0] is written[0]
        and len(schema.returns) == 1
        and schema.returns[0].alias_info is not None
    )


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
