"""Under inference mode autograd records nothing, except a custom Function applied in an
``enable_grad`` block to a tensor that requires grad: such calls run eagerly."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .. import alias
from ..autograd_walks import accumulated_variable
from ..eager_calls import in_inference_mode
from ..errors import EagerRefusal


def normal_storages(wrapped: Sequence[Any], fake_args: Sequence[Any]) -> set[Any]:
    """The storages of inputs that are no inference tensors (one the caller made under
    inference mode is): their views and aliases are normal tensors in eager."""
    return {
        StorageWeakRef(w.untyped_storage())
        for k, w in enumerate(wrapped)
        if isinstance(w, torch.Tensor) and not (k < len(fake_args) and fake_args[k].is_inference())
    }


def refuse_custom_records_in_inference_mode(
    outs: Sequence[Any], wrapped: Sequence[Any], fake_args: Sequence[Any]
) -> None:
    """Under inference mode autograd records nothing, except a custom Function applied
    in an ``enable_grad`` block to a tensor that requires grad: its output, a normal tensor
    (the input itself, a view of it) or one it computed (an inference tensor, which the
    Function's ``apply`` gives its node all the same, where no op of torch's records:
    ``SavedSquare.apply(x)``), has its backward, which the inference graph has not. The
    call runs eagerly (``EagerRefusal``: ``eager_replay``)."""
    if not in_inference_mode():
        return
    normal = normal_storages(wrapped, fake_args)
    for o in outs:
        if not isinstance(o, torch.Tensor):
            continue
        computed = StorageWeakRef(o.untyped_storage()) not in normal
        # (a computed output's views are inference tensors of their own: no node)
        for t in (o,) if computed else (o, o._base):
            node = None if t is None else alias.facts.grad_fn_of(t)
            if computed and not _applied_to_normal(node, wrapped, normal):
                continue
            if isinstance(node, torch.autograd.function.BackwardCFunction):
                raise EagerRefusal(
                    "a custom autograd Function applied with grad enabled under inference "
                    "mode records its backward, which a graph traced for inference mode "
                    "does not have"
                )


def _applied_to_normal(node: Any, wrapped: Sequence[Any], normal: set[Any]) -> bool:
    """Whether the custom Function node ``node`` was applied to a normal tensor that
    requires grad under inference mode: an input, a view of one (through view nodes only:
    under inference mode no other op of torch's records), a leaf of an input's bytes; or
    to a tensor without an edge (a view made under inference mode has none, as eager's)."""
    if not isinstance(node, torch.autograd.function.BackwardCFunction):
        return False
    inputs = {id(alias.facts.grad_fn_of(w)) for w in wrapped if isinstance(w, torch.Tensor)}
    stack = [n for n, _ in node.next_functions]
    while stack:
        n = stack.pop()
        if n is None:  # (a view of an input made under inference mode has no edge)
            return True
        variable = accumulated_variable(n)
        if variable is not None:
            if StorageWeakRef(variable.untyped_storage()) in normal:
                return True
        elif id(n) in inputs:
            return True
        elif type(n).__name__ in alias.facts._VIEW_BACKWARDS:
            stack.extend(m for m, _ in n.next_functions)
    return False
