"""The symbolic-shape guards a compiled specialisation relies on, kept with it in the
caches.

Under Dynamo with dynamic shapes, tracing and compiling a graph may specialise a symbol
(``x.split(3, 1)`` makes the last piece's width ``s1 - 6`` a constant once something
reads it): the trace adds a guard to Dynamo's shape environment, and Dynamo checks it
before reusing the graph. A specialisation taken from a cache was not traced again, so
its guards were never added: Dynamo reused the graph for a width the compiled backward
had never seen ("invalid gradient ... got [5, 7] but expected [5, 9]"; a wrong value
where the shapes happen to agree). So the guards on the graph's symbolic inputs are kept
with each entry (as the expression torch's FX-graph cache keeps), an entry whose guards
do not hold for this call's sizes is a miss, and a hit adds them to the environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import guarding_hint_or_throw, has_guarding_hint

__all__ = ["guards_of", "usable"]


def _symints(args: Sequence[Any]) -> list[torch.SymInt]:
    """The inputs that are backed symbols (the graph's size inputs under Dynamo)."""
    return [a for a in args if isinstance(a, torch.SymInt) and has_guarding_hint(a)]


def guards_of(fake_mode: Any, args: Sequence[Any]) -> str | None:
    """The guards on ``args``' symbols in ``fake_mode``'s shape environment now, as an
    expression over them; None where there are none."""
    shape_env = getattr(fake_mode, "shape_env", None)
    symints = _symints(args)
    if shape_env is None or not symints:
        return None
    guards = shape_env.get_pruned_guards(symints)
    return shape_env.produce_guards_expression(placeholders=symints, guards=guards) or None


def usable(expr: str | None, fake_mode: Any, args: Sequence[Any]) -> bool:
    """Whether an entry whose guards are ``expr`` serves a call on ``args``: its guards
    hold for their sizes (checked on the hints: a miss adds nothing); then they are added
    to the shape environment, as the trace would have added them."""
    if not expr:
        return True
    shape_env = getattr(fake_mode, "shape_env", None)
    symints = _symints(args)
    if shape_env is None or not symints:
        return False
    hints = [guarding_hint_or_throw(s) for s in symints]
    if not shape_env.evaluate_guards_expression(expr, hints):
        return False
    return bool(shape_env.evaluate_guards_expression(expr, symints))
