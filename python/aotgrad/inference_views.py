"""Views taken inside the function's own ``torch.inference_mode()`` block of a tensor
made outside it (an input, an intermediate).

Eager's is a normal tensor (no inference tensor) viewing its base, which requires grad
where the base does and has no history: a view made under no_grad, but for the creation
meta autograd's later errors name ("A view was created in inference mode..."). Traced on
functional tensors, the view op fails ("Cannot set version_counter for inference
tensor": the functional wrapper shares its base's version counter, which an inference
tensor has none of). ``normal_view`` makes it as eager's: under no_grad outside
inference mode, its creation meta set to inference mode's.

One view op is the exception: ``x.view(dtype)`` (``aten.view.dtype``, to any dtype, its
own too) of a normal tensor under inference mode is an inference tensor. It shares
``x``'s bytes but is no view of it and has no version counter, nor has anything taken
of it (``x.view(torch.complex128).imag``, ``view_as_real`` of it): a write through one
changes ``x``'s values and leaves ``x._version`` where it was. Traced (outside inference
mode) it is a functional view of ``x``: ``through_dtype_view`` tells such a tensor (the
recorded view ops), ``uncounted_alias_write`` the counts a write through one must leave
as they were (the runtime keeps the traced counts: ``uncounted_writes``), and the alias
facts rebuild an output of one as eager's (``Reinterpret.dtype_view``: ``x.view(dtype)``
at run time, under the caller's inference mode).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

__all__ = ["failed_inference_view", "normal_view", "through_dtype_view", "uncounted_alias_write"]

_MESSAGE = "Cannot set version_counter for inference tensor"


def failed_inference_view(e: RuntimeError, args: Any, kwargs: dict) -> bool:
    """``e`` is the functional view op's failure on a normal tensor under inference mode."""
    if not torch.is_inference_mode_enabled() or _MESSAGE not in str(e):
        return False
    flat, _ = tree_flatten((args, kwargs))
    return any(isinstance(t, torch.Tensor) and not t.is_inference() for t in flat)


def normal_view(call: Any) -> Any:
    """``call()`` (a view op of a normal tensor) as eager runs it in inference mode."""
    with torch.inference_mode(False), torch.no_grad():
        result = call()
    flat, _ = tree_flatten(result)
    for t in flat:
        if isinstance(t, torch.Tensor) and t._is_view():
            torch._C._autograd._set_creation_meta(t, torch._C._autograd.CreationMeta.INFERENCE_MODE)
    return result


def through_dtype_view(t: Any) -> bool:
    """``t`` (a functional tensor) was taken of its storage's root through
    ``view(dtype)``."""
    from torch._C import _functionalization
    from torch._subclasses.functional_tensor import FunctionalTensor

    if not isinstance(t, FunctionalTensor):
        return False
    try:
        sequence = _functionalization.get_view_meta_sequence(t.elem)
    except RuntimeError:  # (no record of how it was made)
        return False
    return any(type(vm).__name__ == "view_dtype_ViewMeta" for vm in sequence)


def uncounted_alias_write(func: Any, args: Any, kwargs: dict) -> list[tuple[torch.Tensor, int]]:
    """Traced for a call under inference mode: where the tensor ``func`` writes in place
    is taken through ``view(dtype)`` of a tensor made outside the call, eager's is an
    inference tensor and the write moves no counter: the count to put back."""
    from .inplace_checks import written_tensor

    if func is torch.Tensor.__setitem__:
        written = args[0] if args else None
    else:
        written = written_tensor(func, args, kwargs)
    if isinstance(written, torch.Tensor) and through_dtype_view(written):
        return [(written, written._version)]
    return []
