"""In-place metadata changes of views (``t_``, ``transpose_``, ``squeeze_``, ``unsqueeze_``,
``swapdims_``, ``swapaxes_``, ``as_strided_``) while tracing, with autograd's record of
the view kept true.

Autograd regenerates a view's node, and the gradient of a write through it, from its
record of how the view was made. In eager a view of a plain tensor is recorded as an
``as_strided`` of its current geometry, so ``v.t_()`` is seen. The traced stand-ins are
functional wrappers, whose views are recorded as the chain of view ops that made them;
an in-place metadata change does not extend that chain, so ``v = x[0:4]; v.t_();
v.mul_(w)`` gave the gradient of the untransposed view (silently wrong).

Here the call runs as eager's does (functionalization records the change, autograd
bumps the version), and then the Python object ``v`` is given a fresh autograd view
made by the out-of-place op from an alias taken before the call, whose record is the
whole chain; its functional value stays the one the call changed (an input's metadata
change is read from it)."""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.functional_tensor import FunctionalTensor

__all__ = ["METADATA_WRITES", "write_metadata"]

#: In-place by name, writing metadata only, and the out-of-place op that makes the view.
METADATA_WRITES = {
    "t_": "t",
    "transpose_": "transpose",
    "squeeze_": "squeeze",
    "unsqueeze_": "unsqueeze",
    "swapdims_": "swapdims",
    "swapaxes_": "swapaxes",
    "as_strided_": "as_strided",
}


def _stale_record(t: Any, eager_view: bool) -> bool:
    """Whether autograd would regenerate ``t``'s node from a record the call makes stale:
    a view of a functional wrapper, tracked by autograd."""
    if not (isinstance(t, FunctionalTensor) and t._is_view() and t.requires_grad):
        return False
    # under no_grad and inference mode too, for a view autograd tracks (eager's record of
    # it is its geometry whatever the mode: a later use with grad regenerates its node)
    return (torch.is_grad_enabled() and not torch.is_inference_mode_enabled()) or (
        eager_view
        and torch._C._autograd._get_creation_meta(t) == torch._C._autograd.CreationMeta.DEFAULT
    )


def write_metadata(
    func: Any, args: Any, kwargs: dict, fresh_from: Any = None, eager_view: bool = True
) -> Any:
    """``func(*args, **kwargs)``, an in-place metadata change of ``args[0]`` (a name in
    ``METADATA_WRITES``); ``fresh_from(t)`` makes the view after the call where it is
    not the out-of-place op on an alias taken before it. ``eager_view``: whether ``t`` is
    a view in eager too (an input the trace sees as a view of its clone is not: under
    no_grad, eager's autograd ignores its change)."""
    t = args[0]
    if not _stale_record(t, eager_view):
        return func(*args, **kwargs)
    with torch.inference_mode(False), torch.enable_grad():
        alias = t.view_as(t) if fresh_from is None else None
    result = func(*args, **kwargs)
    if result is not t:
        return result
    with torch.inference_mode(False), torch.enable_grad():
        if alias is not None:
            fresh = getattr(alias, METADATA_WRITES[func.__name__])(*args[1:], **kwargs)
        else:
            fresh = fresh_from(t)
    creation = torch._C._autograd._get_creation_meta(t)
    # the Python object keeps its identity (callers hold it) and its attributes (its
    # functional value among them); only its autograd tensor changes
    torch._C._swap_tensor_impl(t, fresh)
    torch._C._autograd._set_creation_meta(t, creation)
    return t
