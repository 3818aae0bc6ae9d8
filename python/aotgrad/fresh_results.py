"""Results eager makes tensors of their own that the trace would make views.

Traced with the Python dispatcher on, ``matmul`` runs torch's Python decomposition,
which ends a batched product with ``bmm(...).view(shape)``: a view of the ``bmm``
result, so the output of ``x @ y`` (3-d and up) would come back as a view of an
intermediate (``._is_view()``, a ``._base`` eager's has not). ATen's kernel ends with
``_unsafe_view``, which autograd does not track as a view; so does this: the result,
where it is such a view, goes through ``_unsafe_view`` (same values and layout, no
``._base``, its own version counter, as eager's). So does ``max_pool1d`` without a
gradient to record: eager's CPU kernel makes a tensor; traced, the op takes the path
eager takes for tensor subclasses (``max_pool1d_with_indices(...)[0]``, a view).
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["fresh_result"]

_MATMUL = frozenset(
    {torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__}
)


_MAX_POOL_1D = frozenset({torch.nn.functional.max_pool1d, torch.max_pool1d})


def _fresh_in_eager(func: Any, args: Any) -> bool:
    if func in _MATMUL:
        return True
    if func in _MAX_POOL_1D and args and isinstance(args[0], torch.Tensor):
        # eager's CPU kernel, where no gradient is recorded; traced (a tensor subclass)
        # and otherwise, ``max_pool1d_with_indices(...)[0]``, a view of its result
        x = args[0]
        return x.device.type == "cpu" and not (x.requires_grad and torch.is_grad_enabled())
    return False


def _in_checkpoint() -> bool:
    """A non-reentrant ``torch.utils.checkpoint`` region is running (its saved-tensor
    hooks are the innermost)."""
    hooks = torch._C._autograd._top_saved_tensors_default_hooks(True)
    if not hooks:
        return False
    name = getattr(hooks[0], "__qualname__", "")
    return name.startswith(("_checkpoint_hook", "_recomputation_hook"))


def fresh_result(func: Any, args: Any, result: Any) -> Any:
    """``result`` of ``func(*args)``, made a tensor of its own where eager's is."""
    if torch.compiler.is_dynamo_compiling() or _in_checkpoint():
        # (a torch.cond branch Dynamo traces: not a call of ours; a checkpointed region,
        # whose recomputation in the backward runs without this mode: the same ops both
        # times, or checkpoint's check of the saved tensors fails)
        return result
    if not isinstance(result, torch.Tensor) or not result._is_view():
        return result
    if not _fresh_in_eager(func, args):
        return result
    base = result._base
    if any(base is a or base is getattr(a, "_base", None) for a in args):
        return result  # (a view of an argument: not the decomposition's intermediate)
    return torch.ops.aten._unsafe_view(result, result.shape)
