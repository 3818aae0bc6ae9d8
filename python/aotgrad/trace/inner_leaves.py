"""The leaves the function makes that an output or a written input is computed from
(``trace.InnerLeaf``): the runtime passes a leaf of its own into the compiled Function
per such tensor, which the backward's gradient for it reaches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import alias
from ..autograd_walks import reaches_leaf
from ..eager_calls import EagerCalls
from ..errors import UnsupportedError


def inner_leaves(outs: Sequence[Any], calls: EagerCalls, written: Sequence[Any] = ()) -> list[int]:
    """Of the leaves the function makes (``t = x.detach().requires_grad_()``, a factory
    called with ``requires_grad=True``: ``calls.new_leaves``), in order, the positions of
    those an output, or the new value of a ``written`` input, is computed from
    (``t.cumsum(-1)``; not a view of ``t``, rebuilt at runtime as a view of the leaf
    itself). Eager's output requires grad and its backward fills ``t.grad``. Also a leaf
    view moved into the graph's interior since (its base written with grad, then itself
    written by a custom Function: ``EagerCalls.leaf_nodes``): what was computed from it
    before still requires grad, as eager's does."""
    found: list[int] = []
    for j, leaf in enumerate(calls.new_leaves):
        held = calls.leaf_nodes.get(id(leaf))
        for o in [*outs, *written]:
            if not isinstance(o, torch.Tensor):
                continue
            if o._is_view() and o._base is leaf and not alias.facts.made_by_custom_function(o):
                continue
            # read as eager would not: a view whose grad_fn eager refuses to read (a no_grad
            # view written with grad on) is not computed from anything here
            grad_fn = alias.facts.grad_fn_of(o)
            if grad_fn is None or grad_fn is alias.facts.STALE_VIEW:
                continue
            if reaches_leaf(grad_fn, leaf, held):
                if not all(isinstance(n, int) for n in leaf.shape):
                    raise UnsupportedError(
                        "an output is computed from a tensor the function made a leaf that "
                        "requires grad, with symbolic sizes: not supported; make the leaf "
                        "outside the compiled function and pass it in"
                    )
                found.append(j)
                break
    return found
