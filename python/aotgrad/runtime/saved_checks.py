"""Eager's checks of the tensors its backward saved, made by the compiled backward where
autograd's own cannot be: outputs kept loose, inputs, intermediate bases and outputs
rebuilt as views (``layout.watched_*``). Each is checked at the version the call left it,
only where the caller's backward reaches a read of it (the tangents that lead there), and
for inputs only in a pass that runs a node reading it (``layout.watched_leads``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

__all__ = ["check_reached", "check_read", "reads_run"]


def check_reached(watched: Iterable[tuple[Any, int, set[int]]], missing: Any, what: str) -> None:
    """Eager's saved-tensor check for the outputs, inputs and bases it saves
    (``layout.watched_outputs``, ...): each ``(tensor, version, tangents)`` whose
    tangents' backward reads it, where the caller's backward reached one of them."""
    for t, v, ts in watched:
        if ts.issubset(missing):
            continue
        if not t.is_inference() and t._version != v:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified "
                f"by an inplace operation: [{t.dtype} {list(t.shape)}], which is {what} "
                f"of the compiled function, is at version {t._version}; expected version "
                f"{v} instead"
            )


def reads_run(node: Any, watched: Iterable[tuple[Any, int, set[int], Any]]) -> list[Any]:
    """The watched inputs whose reads eager's engine runs in this pass: the nodes reading
    them lead to a Function input the pass runs (``autograd.grad`` wrt another input
    skips them: ``layout.watched_leads``), or to none of them."""
    found = []
    for t, v, ts, leads in watched:
        if leads and not any(_runs(node, j) for j in leads):
            continue
        found.append((t, v, ts))
    return found


def _runs(node: Any, j: int) -> bool:
    nxt = node.next_functions[j][0] if j < len(node.next_functions) else None
    if nxt is None:
        return False
    try:
        return torch._C._will_engine_execute_node(nxt)
    except RuntimeError:  # (a leaf ``autograd.grad`` asks for: its gradient is captured)
        return True


def check_read(loose: Any, versions: Iterable[tuple[int, int]], read: Callable[[], Any]) -> None:
    """The saved outputs and views of outputs kept loose (``layout.saved_of_outputs``):
    each ``(position, version the call left it at)`` written since must not be one this
    pass's backward reads (``read()``: asked only then), as autograd's own check would
    have it."""
    if not isinstance(loose, dict):
        return
    moved = [(j, loose[j], v) for j, v in versions if j in loose and loose[j]._version != v]
    moved = [(j, t, v) for j, t, v in moved if not t.is_inference()]
    if not moved:
        return
    reads = read()
    for j, t, v in moved:
        if j in reads:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified "
                f"by an inplace operation: [{t.dtype} {list(t.shape)}], which is an output "
                f"(or a view of one) of the compiled function, is at version {t._version}; "
                f"expected version {v} instead"
            )
