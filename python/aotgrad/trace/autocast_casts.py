"""Autocast's cast cache, as eager keeps it, inside the joint trace.

Under autocast, eager casts a float32 leaf that requires grad (a weight) once per
autocast region and reuses that cast for every later op of the region
(``cached_cast`` in ATen): two matmuls of one weight share one ``_to_copy`` node, and the
backward sums their gradients in the lower precision before casting the sum back to
float32. Casting at each use instead sums the two casts' float32 gradients: a
different rounding of the same gradient (``x @ w`` twice under bfloat16: eager's
gradient of ``x`` -1.0859375, a trace without the cache -1.087890625).

torch's ``make_fx`` turns the cache off while it traces, and functionalization wraps
every input in a tensor that is never a leaf, so the cache would not take it anyway.
The joint trace puts both back for the inputs eager's cache takes: the caller's cache
setting is restored while the function runs (its own ``autocast`` blocks then set
theirs as in eager), and each input that is a float32 leaf requiring grad in the
caller, not a view, runs as a leaf of the trace where an op of the function ran under
autocast (``cached_cast_inputs``): the input itself, or, where the function writes it
without grad, the copy it runs on (``leaf_copies``: eager's stale cast after the write).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from typing import Any

import torch

from ..autocast_state import autocast_enabled_anywhere
from .functional import to_functional

__all__ = [
    "as_cached_leaves",
    "autocast_casts_in",
    "cached_cast_inputs",
    "cast_cache_as",
    "leaf_copies",
    "leaves_as_compiled",
]


@contextlib.contextmanager
def cast_cache_as(enabled: bool) -> Iterator[None]:
    """Autocast's cast cache on or off (the caller's setting) for the block."""
    before = torch.is_autocast_cache_enabled()
    torch.set_autocast_cache_enabled(enabled)
    try:
        yield
    finally:
        torch.set_autocast_cache_enabled(before)


def _cached_by_eager(t: Any) -> bool:
    """Whether eager's autocast caches casts of ``t``: a float32 leaf that requires
    grad and is no view (ATen's ``cached_cast``; the target dtype is the region's)."""
    if not (isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.requires_grad):
        return False
    try:
        return t.is_leaf and not t._is_view()
    except RuntimeError:  # (a view whose node cannot be rebuilt: no leaf)
        return False


def leaves_as_compiled(inputs: Sequence[Any]) -> Callable[[Sequence[Any]], bool]:
    """A check that a call's arguments are, where eager's autocast caches casts, what
    ``inputs`` (the ones compiled for) were: per argument, whether eager caches its
    casts. Parameters are left out (always leaves: a call need not pay for them)."""
    slots = [i for i, a in enumerate(inputs) if not isinstance(a, torch.nn.Parameter)]
    expected = [_cached_by_eager(inputs[i]) for i in slots]

    def same(args: Sequence[Any]) -> bool:
        return [_cached_by_eager(args[i]) for i in slots] == expected

    return same


def autocast_casts_in(gm: Any) -> bool:
    """Whether a Dynamo graph may cast under autocast: the caller's autocast is on (Dynamo
    guards that state: it is the same at every call), or the graph (or one of its
    subgraphs) enters an autocast block of its own."""
    from torch.amp.autocast_mode import _enter_autocast

    if autocast_enabled_anywhere():
        return True
    graphs = [m.graph for m in gm.modules() if isinstance(m, torch.fx.GraphModule)]
    return any(n.target is _enter_autocast for g in graphs for n in g.nodes)


def cached_cast_inputs(calls: Any, wrapped: Sequence[Any]) -> list[int]:
    """The inputs whose casts eager's autocast caches, where an op of the function ran
    under autocast (``calls``: the ``EagerCalls`` of the metadata trace, over the stand-ins
    ``wrapped``): float32 leaves that require grad in the caller, not views, not a
    synthetic base (no tensor of the caller's)."""
    if not calls.autocast_seen:
        return []
    skip = calls.views | calls.synthetic.bases
    return [
        i
        for i, w in enumerate(wrapped)
        if id(w) in calls.leaves and id(w) not in skip and w.dtype == torch.float32
    ]


def as_cached_leaves(
    wrapped: list[Any], primals: Sequence[Any], cached: Iterable[int], skip: Container[int]
) -> list[Any]:
    """``wrapped`` (the functional inputs), with each input whose casts eager caches
    (``cached``) wrapped again as a leaf that requires grad; ``skip``: inputs the
    function runs on a copy of."""
    out = list(wrapped)
    for i in cached:
        if i in skip:
            continue
        with torch.no_grad():
            leaf = to_functional(primals[i].detach())
        out[i] = leaf.requires_grad_()
    return out


def leaf_copies(
    call: Sequence[Any], written: Iterable[int], cached: Container[int]
) -> dict[int, Any]:
    """Per input the function writes without grad (``written``: those it runs on a
    copy of), whose casts eager caches (``cached``), that copy as a leaf. Eager reuses
    the cast it made before the write (``with no_grad(): w.add_(1)`` between two uses of
    ``w`` in one region: the second reads the old ``w``), and the gradient of both uses
    reaches ``w`` through that cast. The trace takes the input's gradient with respect
    to the leaf: the copy's own backward passes it through unchanged."""
    return {
        i: call[i].detach().requires_grad_()
        for i in written
        if i in cached and call[i]._base is None
    }
