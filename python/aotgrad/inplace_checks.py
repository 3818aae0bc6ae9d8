"""Eager's refusals of in-place calls that tracing would let through.

Functionalization turns ``x.t().add_(x)`` into ``add`` + ``copy``, so eager's memory
overlap checks (TensorIterator's "some elements of the input tensor and the written-to
tensor refer to a single memory location", "more than one element of the written-to
tensor refers to a single memory location") never run; and the traced stand-in of a
leaf input is not a leaf, so autograd's "a leaf Variable that requires grad is being
used in an in-place operation" (or a view of one) does not fire. ``inplace_error``
answers what eager would raise, if anything, for one in-place or ``out=`` call:

- overlap: the call is replayed on small CPU tensors with the same sizes, strides and
  storage offsets, the tensors that share the written tensor's storage sharing one
  storage there too, so eager's own check decides (only where an overlap is possible:
  another argument on the written tensor's storage, or a written tensor that is not
  dense and non-overlapping; never above ``_REPLAY_LIMIT`` elements);
- leaves: the written tensor is (a view of) the stand-in of a leaf that requires grad,
  under grad mode.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._prims_common import is_non_overlapping_and_dense_or_false
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten, tree_unflatten

from .errors import EagerRefusal, NeedsSyntheticBase
from .ordered_copies import basic_index, copied_value, copy_order
from .overlapping_writes import FILLS

__all__ = [
    "DETACH_VIEW",
    "inplace_error",
    "raise_leaf_in_overlap",
    "setitem_copy_error",
    "written_tensor",
    "zero_dim_mask",
]

#: Eager's error for ``detach_()`` of a view.
DETACH_VIEW = (
    "Can't detach views in-place. Use detach() instead. If you are using "
    "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set as True, "
    "gradients are views of DDP buckets, and hence detach_() cannot be called on these "
    "gradients. To fix this error, please refer to the Optimizer.zero_grad() function in "
    "torch/optim/optimizer.py as the solution."
)

#: In-place by name, but no write autograd or TensorIterator checks.
_NOT_WRITES = frozenset({"requires_grad_", "detach_", "share_memory_", "retain_grad_"})
_REPLAY_LIMIT = 1 << 20


def _is_inplace(func: Any) -> bool:
    name = getattr(func, "__name__", "")
    return name.endswith("_") and not name.startswith("_") and name not in _NOT_WRITES


def _static(t: torch.Tensor) -> bool:
    return all(isinstance(n, int) for n in (*t.shape, *t.stride(), t.storage_offset()))


def _extent(t: torch.Tensor) -> int:
    """Elements of storage ``t`` reaches (past its offset)."""
    if t.numel() == 0:
        return t.storage_offset()
    return t.storage_offset() + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1


def _overlap_error(
    func: Any, args: Any, kwargs: dict, written: torch.Tensor
) -> EagerRefusal | None:
    flat, spec = tree_flatten((args, kwargs))
    tensors = [t for t in flat if isinstance(t, torch.Tensor)]
    if not all(_static(t) for t in tensors):
        return None
    ref = StorageWeakRef(written.untyped_storage())
    shared = [t for t in tensors if StorageWeakRef(t.untyped_storage()) == ref]
    name = getattr(func, "__name__", "")
    if (
        all(t is written for t in shared)
        and is_non_overlapping_and_dense_or_false(written)
        and (len(shared) == 1 or name not in _GATHERING)
    ):
        return None
    if any(t.dtype != written.dtype for t in shared):
        return None
    need = max(_extent(t) for t in shared)
    if need > _REPLAY_LIMIT or any(t.numel() > _REPLAY_LIMIT for t in tensors):
        return None
    with _disable_current_modes(), torch.no_grad():
        storage = torch.zeros(need, dtype=written.dtype)
        r_args, r_kwargs = _replay_args(flat, spec, ref, storage, torch.zeros)
        try:
            func(*r_args, **r_kwargs)
        except RuntimeError as e:
            if "single memory location" in str(e):
                return EagerRefusal(str(e))
            return None
        except Exception:  # the op itself refuses the stand-ins: no overlap verdict
            return None
        if _reads_back(name, shared, written) and any(_chooses_positions(t, ref) for t in tensors):
            return EagerRefusal(_CHOSEN_POSITIONS)
        if name not in FILLS and _repeats_locations(written, need):
            return EagerRefusal(_REPEATED_LOCATIONS)
        if _order_dependent(func, flat, spec, written, need):
            return _ordered(func, flat, spec, written, need)
    return None


#: In-place ops that read a tensor argument at positions other than the one they write
#: (through an index or a mask): the written tensor passed again is no elementwise read.
_GATHERING = frozenset(
    {"masked_scatter_", "index_copy_", "index_add_", "index_put_", "index_reduce_"}
    | {"scatter_", "scatter_add_", "scatter_reduce_", "put_", "__setitem__"}
)
_CHOSEN_POSITIONS = (
    "an in-place call reading the tensor it writes (or a view of its memory) at positions "
    "an index or mask tensor chooses: whether eager's kernel reads an element before or "
    "after writing it depends on those values, which a traced graph does not know"
)
_REPEATED_LOCATIONS = (
    "an in-place call on a view whose elements share memory in a layout eager's overlap "
    "check cannot judge (an as_strided with steps shorter than its rows): eager writes "
    "each element in turn, a location as often as elements land on it; a traced graph "
    "writes it once"
)


def _reads_back(name: str, shared: list[torch.Tensor], written: torch.Tensor) -> bool:
    """Whether the call reads the written storage beyond the written tensor's own
    elements: another argument on it that is not one value put everywhere (a 0-dim
    tensor a fill or an assignment writes: read once, or rewritten with itself)."""
    others = list(shared)
    mine = next((k for k, t in enumerate(others) if t is written), None)
    if mine is not None:
        del others[mine]
    if not others:
        return False
    return not (all(t.dim() == 0 for t in others) and (name in FILLS or name == "__setitem__"))


def _chooses_positions(t: torch.Tensor, ref: Any) -> bool:
    """Whether ``t`` is an index or a mask (not on the written storage): its values, which
    the replay does not have, choose the positions the call reads and writes."""
    return (
        not (t.dtype.is_floating_point or t.dtype.is_complex)
        and StorageWeakRef(t.untyped_storage()) != ref
    )


def _repeats_locations(written: torch.Tensor, need: int) -> bool:
    """Whether two elements of ``written`` are one memory location, where no dimension
    of stride 0 says so (those: ``overlapping_writes``). Called with the modes off."""
    if written.numel() < 2 or any(s == 0 for s, n in zip(written.stride(), written.shape) if n > 1):
        return False
    if is_non_overlapping_and_dense_or_false(written):
        return False
    places = torch.arange(need).as_strided(
        written.shape, written.stride(), written.storage_offset()
    )
    return places.unique().numel() < written.numel()


def _ordered(func: Any, flat: list[Any], spec: Any, written: Any, need: int) -> EagerRefusal:
    """The refusal of an order-dependent call: a ``copy_``'s with eager's order, where
    it is fixed (``ordered_copies``). Called with the modes off."""
    refusal = EagerRefusal(_ORDER_DEPENDENT)
    if getattr(func, "__name__", "") != "copy_" or len(flat) < 2:
        return refusal
    ref = StorageWeakRef(written.untyped_storage())

    def replay(storage: torch.Tensor) -> tuple[Any, Any]:
        r_args, r_kwargs = _replay_args(flat, spec, ref, storage, torch.zeros)
        func(*r_args, **r_kwargs)
        return r_args[0], r_args[1]

    return copy_order(written, replay, need, _ORDER_DEPENDENT) or refusal


_ORDER_DEPENDENT = (
    "an in-place call whose input overlaps the tensor it writes in a layout eager's "
    "overlap check cannot judge (not dense): eager's result depends on the order its "
    "kernel writes the elements in, which a traced graph (reading every input before "
    "writing) does not reproduce"
)
#: In-place ops drawing random numbers: two replays differ anyway.
_RANDOM = ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_")
_RANDOM += ("cauchy_", "log_normal_")


def _order_dependent(
    func: Any, flat: list[Any], spec: Any, written: torch.Tensor, need: int
) -> bool:
    """Whether eager's in-place call, run on distinct values over one storage, leaves
    that storage other than the traced graph does (every input read before the write):
    an input overlapping the written tensor where eager's check passed it. Called with
    the modes off."""
    dtype = written.dtype
    if getattr(func, "__name__", "") in _RANDOM or dtype.is_complex:
        return False
    # distinct, and none 0 or 1 (an add of 0 or a product with 1 would hide a stale read)
    numbers = torch.arange(2, need + 2)
    values = (numbers % 2 if dtype == torch.bool else numbers).to(dtype)
    ref = StorageWeakRef(written.untyped_storage())
    after = []
    for read_first in (False, True):
        storage = values.clone()
        # the graph's order: inputs read before the write (copies), the written one not
        copied = written if read_first else None
        r_args, r_kwargs = _replay_args(flat, spec, ref, storage, torch.ones, copied)
        try:
            func(*r_args, **r_kwargs)
        except Exception:
            return False
        after.append(storage)
    if dtype.is_floating_point:
        return not torch.allclose(after[0], after[1], rtol=0, atol=0, equal_nan=True)
    return not torch.equal(after[0], after[1])


def _replay_args(
    flat: list[Any],
    spec: Any,
    ref: Any,
    storage: torch.Tensor,
    fill: Any,
    reads_first_but: Any = None,
) -> tuple[Any, Any]:
    """``(args, kwargs)`` for a replay on small CPU tensors: the tensors on the storage
    ``ref`` as views of ``storage`` at their sizes, strides and offsets, the others
    ``fill(shape)``. With ``reads_first_but`` (the written tensor), the views but it are
    copies: read before the write, as a traced graph reads them."""
    stand_in: dict[int, torch.Tensor] = {}
    for t in flat:
        if not isinstance(t, torch.Tensor) or id(t) in stand_in:
            continue
        if StorageWeakRef(t.untyped_storage()) != ref:
            stand_in[id(t)] = fill(t.shape, dtype=t.dtype)
            continue
        view = storage.as_strided(t.shape, t.stride(), t.storage_offset())
        copy = reads_first_but is not None and t is not reads_first_but
        stand_in[id(t)] = view.clone() if copy else view
    replay = [stand_in[id(x)] if isinstance(x, torch.Tensor) else x for x in flat]
    return tree_unflatten(replay, spec)


def written_tensor(func: Any, args: Any, kwargs: dict) -> torch.Tensor | None:
    """The tensor ``func(*args, **kwargs)`` writes in place (its ``out=`` or its first
    argument), if it is an in-place or ``out=`` call."""
    out = kwargs.get("out") if kwargs else None
    if isinstance(out, torch.Tensor):
        return out
    if args and isinstance(args[0], torch.Tensor) and _is_inplace(func):
        return args[0]
    return None


def inplace_error(
    func: Any,
    args: Any,
    kwargs: dict,
    leaves: frozenset[int],
    leaf_views: frozenset[int] = frozenset(),
) -> EagerRefusal | None:
    """What eager raises for ``func(*args, **kwargs)`` before running it, if it is an
    in-place call that tracing would let through; ``leaves``: ``id``s of the stand-ins of
    leaf inputs that require grad; ``leaf_views``: of inputs that are views of such a
    leaf in the caller (``l[:4]`` passed in: not a view in the trace)."""
    out = kwargs.get("out") if kwargs else None
    if isinstance(out, torch.Tensor):  # ``torch.mul(t, 2, out=t.t())``: the overlap check
        return _overlap_error(func, args, kwargs, out)
    if not args or not isinstance(args[0], torch.Tensor) or not _is_inplace(func):
        return None
    written = args[0]
    if (leaves or leaf_views) and torch.is_grad_enabled() and written.requires_grad:
        if id(written) in leaves:
            return EagerRefusal(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        views = leaves | leaf_views
        if id(written) in leaf_views or (written._base is not None and id(written._base) in views):
            return EagerRefusal(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation."
            )
    return _overlap_error(func, args, kwargs, written)


def setitem_copy_error(args: Any) -> EagerRefusal | None:
    """``t[index] = value`` with a basic index and a tensor on ``t``'s storage: eager's
    ``copy_`` of ``value`` into the view ``t[index]``, checked as that copy (its partial
    overlap refused; its order, where the check cannot judge, kept: ``ordered_copies``)."""
    if len(args) != 3:
        return None
    t, index, value = args
    if not isinstance(t, torch.Tensor) or not isinstance(value, torch.Tensor):
        return None
    if not _static(t):
        return None
    if StorageWeakRef(t.untyped_storage()) != StorageWeakRef(value.untyped_storage()):
        return None
    if not basic_index(index):  # eager's index_put_, checked as the assignment itself
        return _overlap_error(torch.Tensor.__setitem__, (t, index, value), {}, t)
    view = t[index]
    source = copied_value(value, view)
    if source is None:
        return None
    return _overlap_error(torch.Tensor.copy_, (view, source), {}, view)


def leaves_sharing_storage(pairs: Any, leaves_only: bool = True) -> dict[int, int]:
    """Of (stand-in, caller's tensor) pairs, the leaves (``leaves_only``, else all) on a
    storage another input shares
    (``l[2:6]`` made a leaf beside ``l[0:4]``): stand-in id → its position among the
    pairs. One that requires no grad yet is a leaf too: ``requires_grad_()`` in the
    function makes it one autograd refuses to write, until a write with grad through
    another input makes it a view with a history (seed 113739)."""
    storages: dict[Any, list[int]] = {}
    for k, (_, o) in enumerate(pairs):
        storages.setdefault(StorageWeakRef(o.untyped_storage()), []).append(k)
    shared = {k for ks in storages.values() if len(ks) > 1 for k in ks}
    return {
        id(a): k for k, (a, o) in enumerate(pairs) if k in shared and (o.is_leaf or not leaves_only)
    }


def leaf_in_overlap(refusal: Exception, written: Any, shared: dict[int, int]) -> Exception:
    """``refusal`` of a write to (a view of) a leaf input: where that leaf shares its
    storage with another input, eager's verdict depends on what the function wrote
    through the others (a write with grad to a view of the common base gives the leaf a
    history: it is a leaf no more). The function is traced again over the common base
    (``alias.synthetic_base``), whose members are made as the caller's, and autograd
    decides there."""
    if not str(refusal).startswith(("a leaf Variable", "a view of a leaf Variable")):
        return refusal
    for t in (written, getattr(written, "_base", None)):
        k = shared.get(id(t)) if t is not None else None
        if k is not None:
            return NeedsSyntheticBase(
                f"input {k}, a leaf sharing storage with another input, is written",
                [k],
                whole_storage=[k],
            )
    return refusal


def raise_leaf_in_overlap(
    error: Exception, func: Any, args: Any, kwargs: Any, shared: dict[int, int]
) -> None:
    """Raise ``leaf_in_overlap``'s ``NeedsSyntheticBase`` for autograd's own refusal
    ``error`` of a write to a leaf on a storage another input shares (one
    ``requires_grad_()`` made a leaf in the function, which the checks before the call
    do not know: seed 113739)."""
    if not shared:
        return
    setitem = func is torch.Tensor.__setitem__ and args
    written = args[0] if setitem else written_tensor(func, args, kwargs or {})
    found = leaf_in_overlap(error, written, shared)
    if found is not error:
        raise found from error


def zero_dim_mask(args: Any) -> bool:
    """``__setitem__(x, mask, v)``: a 0-dim ``x``, a 0-dim bool mask, a number or a
    0-dim tensor for value."""
    if len(args) != 3:
        return False
    x, key, value = args
    return (
        isinstance(x, torch.Tensor)
        and x.dim() == 0
        and isinstance(key, torch.Tensor)
        and key.dtype == torch.bool
        and key.dim() == 0
        and (
            isinstance(value, (int, float, bool))
            or (isinstance(value, torch.Tensor) and value.dim() == 0)
        )
    )
