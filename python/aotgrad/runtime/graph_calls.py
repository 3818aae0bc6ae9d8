"""How the runtime calls a compiled graph, forward or backward: boxed (one list of
arguments, ``BoxedFn``), with autocast off and with an error it raises marked as the
graph's.

The graphs hold the casts autocast made while they were traced, so they run with the
caller's autocast off. An error a forward graph raises as it runs (an index out of range
that only the values show) is marked: where the runtime had changed nothing of the
caller's before it, the call then runs eagerly, and the caller gets eager's error after
the function's earlier writes (``eager_replay``). The training and the inference
functions (``training.py``, ``inference.py``) both call their graphs this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import mark_raised_by_graph

BoxedFn = Callable[[list[Any]], Any]


def without_autocast(f: BoxedFn) -> BoxedFn:
    """``f`` run with autocast off. The compiled graphs hold the casts autocast made
    while they were traced; run under the caller's autocast, their ops would be cast
    again (and an ``autocast(enabled=False)`` block inside the function undone)."""

    def run(args: list[Any]) -> Any:
        if torch._C._is_any_autocast_enabled():
            with torch._C._DisableAutocast():
                return f(args)
        return f(args)

    return run


def marking_failures(fw: BoxedFn) -> BoxedFn:
    """``fw``, an error it raises as it runs marked ``errors.raised_by_graph`` (eager's
    raise comes after the function's earlier writes: ``eager_replay``)."""

    def run(args: list[Any]) -> Any:
        try:
            return fw(args)
        except Exception as e:
            mark_raised_by_graph(e)
            raise

    return run
