"""Placeholder roles: whether a joint graph's input is a primal or a tangent.

The tracer (``aotgrad.trace``) stamps each placeholder's role in
``node.meta[ROLE_KEY]``; the split copies it onto the forward and backward
graphs' placeholders, and every later stage (the node table, the split, the
backward's reorder, the Inductor glue, the report) reads it from there, never
from the node's name. Names still follow torch's ``primals_N`` / ``tangents_N``
so that torch's own tooling reads aotgrad's graphs, but they carry no meaning
for aotgrad.

A joint graph that aotgrad did not trace (torch's ``aot_function`` calling an
aotgrad partitioner) carries no roles: ``adopt`` stamps them once, at the
partitioner's door, by torch's own rule for torch's graphs.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch.fx as fx

# The ``meta`` key of a placeholder's role and its two values (spelled in ``vocab``).
from .vocab import PRIMAL_ROLE as PRIMAL
from .vocab import ROLE_KEY
from .vocab import TANGENT_ROLE as TANGENT


def role_of(node: fx.Node) -> str | None:
    """The role stamped on ``node`` (None: none; a node that is not a placeholder)."""
    return node.meta.get(ROLE_KEY)


def is_tangent(node: fx.Node) -> bool:
    """Whether ``node`` is a placeholder stamped as a tangent."""
    return node.meta.get(ROLE_KEY) == TANGENT


def stamp(placeholders: Iterable[fx.Node], num_primals: int) -> None:
    """Stamp the first ``num_primals`` placeholders primals and the rest tangents (the
    order of a joint graph's inputs: ``(primals, tangents)``)."""
    for i, node in enumerate(placeholders):
        node.meta[ROLE_KEY] = PRIMAL if i < num_primals else TANGENT


def adopt(gm: fx.GraphModule) -> None:
    """Stamp the placeholders of a joint graph traced by torch's AOT Autograd, which
    carries no aotgrad roles: torch decides its own graphs' roles (its ``_is_tangent``),
    and aotgrad takes its word for them, once, here. A graph whose placeholders all have
    roles is left as it is."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    unstamped = [p for p in placeholders if ROLE_KEY not in p.meta]
    if not unstamped:
        return
    from torch._functorch._aot_autograd.utils import _is_tangent as torch_is_tangent

    for node in unstamped:
        node.meta[ROLE_KEY] = TANGENT if torch_is_tangent(node) else PRIMAL
