"""Views taken inside the function's own ``torch.inference_mode()`` block of a tensor
made outside it (an input, an intermediate).

Eager's is a normal tensor (no inference tensor) viewing its base, which requires grad
where the base does and has no history: a view made under no_grad, but for the creation
meta autograd's later errors name ("A view was created in inference mode..."). Traced on
functional tensors, the view op fails ("Cannot set version_counter for inference
tensor": the functional wrapper shares its base's version counter, which an inference
tensor has none of). ``normal_view`` makes it as eager's: under no_grad outside
inference mode, its creation meta set to inference mode's.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_flatten

__all__ = ["failed_inference_view", "normal_view"]

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
