"""Eager's dtype refusals that fake kernels let through.

The meta kernels of the matrix products check shapes, not dtypes: on fakes,
``x.matmul(t)`` with ``x`` float32 and ``t`` bfloat16 (from an autocast block) returns a
float32 result, where eager raises "expected m1 and m2 to have the same dtype". So a
matrix product whose tensor arguments have more than one dtype is replayed on small CPU
zeros of the same shapes and dtypes, under the caller's autocast state, and eager's own
kernel decides; so is a call with ``out=`` (the fake kernels cast into an ``out=``
tensor of a dtype eager refuses: ``torch.add(x, x, out=o_long)``), and an in-place op
on a real tensor with a complex argument (``y.mul_(1j)``: functionalization makes it
``mul`` then a cast back into ``y`` that drops the imaginary part, where eager raises
"result type ComplexFloat can't be cast to the desired output type Float") (never above
``_REPLAY_LIMIT`` elements, never with symbolic sizes, never for tensors off the CPU
under an autocast of their device: the CPU replay could not mirror it).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_unflatten

from .errors import EagerRefusal

__all__ = ["dtype_error"]

#: Matrix products by name (torch.*, Tensor.*, torch.nn.functional.*).
_PRODUCTS = frozenset(
    {
        "mm", "matmul", "__matmul__", "__rmatmul__", "bmm", "addmm", "addmm_", "baddbmm",
        "baddbmm_", "addbmm", "addbmm_", "mv", "addmv", "addmv_", "dot", "vdot", "linear",
        "inner", "outer", "ger", "tensordot", "einsum", "chain_matmul", "bilinear",
    }
)  # fmt: skip
#: The in-place operators (``y *= z``): Tensor methods whose names do not end in "_".
_IN_PLACE_OPERATORS = frozenset(
    {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__", "__idiv__"}
)
_REPLAY_LIMIT = 1 << 16
#: What eager's dtype refusals say.
# (``NotImplementedError`` is a ``RuntimeError``: a kernel without that dtype, "nansum_cpu"
# not implemented for 'Long')
_DTYPE_WORDS = ("dtype", "scalar type", "can't be cast", "floating point type", "implemented for '")


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in t.shape)


def _with_out(kwargs: dict) -> bool:
    return bool(kwargs) and isinstance(kwargs.get("out"), (torch.Tensor, tuple, list))


def _complex_into_real(func: Any, args: Any, kwargs: dict) -> bool:
    """An in-place op (``y.mul_(1j)``, ``y *= z``) on a tensor that is not complex, with
    a complex argument."""
    name = getattr(func, "__name__", "")
    in_place = (name.endswith("_") and not name.startswith("_")) or name in _IN_PLACE_OPERATORS
    if not in_place or not args or not isinstance(args[0], torch.Tensor) or args[0].is_complex():
        return False
    flat, _ = tree_flatten((args[1:], kwargs))
    return any(
        isinstance(a, complex) or (isinstance(a, torch.Tensor) and a.is_complex()) for a in flat
    )


def dtype_error(func: Any, args: Any, kwargs: dict) -> EagerRefusal | None:
    """What eager raises for a matrix product of tensors of several dtypes, for an
    ``out=`` tensor of a dtype eager refuses (``torch.add(x, x, out=o_long)``,
    ``torch.sort(x, out=(v, i_float))``), or for an in-place op that would write a
    complex result into a real tensor, if anything."""
    product = getattr(func, "__name__", "") in _PRODUCTS
    if not product and not _with_out(kwargs) and not _complex_into_real(func, args, kwargs):
        return None
    flat, spec = tree_flatten((args, kwargs))
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    if product and not _with_out(kwargs) and len({t.dtype for t in tensors}) < 2:
        return None
    if not all(_static(t) and t.numel() <= _REPLAY_LIMIT for t in tensors):
        return None
    devices = {t.device.type for t in tensors} - {"cpu", "meta"}
    if any(torch.is_autocast_enabled(d) for d in devices):
        return None
    with _disable_current_modes(), torch.no_grad():
        replay = [
            torch.zeros(x.shape, dtype=x.dtype) if isinstance(x, torch.Tensor) else x for x in flat
        ]
        r_args, r_kwargs = tree_unflatten(replay, spec)
        try:
            func(*r_args, **r_kwargs)
        except RuntimeError as e:
            if any(m in str(e) for m in _DTYPE_WORDS):
                return EagerRefusal(str(e))
        except Exception:  # the op refuses the stand-ins otherwise: no dtype verdict
            pass
    return None
