"""Walks of the autograd graph a trace records: what a tensor's history reaches."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = [
    "accumulated_variable",
    "accumulator_of",
    "dead_ends",
    "reaches",
    "reaches_leaf",
    "reaches_node",
    "reaches_output",
    "walk_finds",
]


def walk_finds(grad_fn: Any, found: Callable[[Any], bool]) -> bool:
    """Whether a node of the autograd graph from ``grad_fn`` satisfies ``found``."""
    stack, seen = [grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        if found(node):
            return True
        seen.add(id(node))
        stack.extend(n for n, _ in node.next_functions)
    return False


def accumulated_variable(node: Any) -> Any:
    """The tensor an ``AccumulateGrad`` node fills; None for any other node (a custom
    Function's node is its ``ctx``, whose attributes, ``variable`` too, are the user's)."""
    if type(node).__name__ != "AccumulateGrad":
        return None
    return node.variable


def reaches(grad_fn: Any, leaves: set[int]) -> bool:
    """Whether the autograd graph from ``grad_fn`` accumulates into one of ``leaves`` (ids)."""

    def accumulates(node: Any) -> bool:
        variable = accumulated_variable(node)
        return variable is not None and id(variable) in leaves

    return walk_finds(grad_fn, accumulates)


def accumulator_of(grad_fns: Any, leaf: Any, held: Any = None) -> Any:
    """The ``AccumulateGrad`` node filling ``leaf`` that the graphs from ``grad_fns``
    reach (a leaf since moved into the graph's interior keeps it there), or None.
    ``held``: ``leaf``'s node, known where its variable may have been reset."""
    found: list[Any] = []

    def fills(node: Any) -> bool:
        if accumulated_variable(node) is leaf or (held is not None and node is held):
            found.append(node)
        return bool(found)

    for grad_fn in grad_fns:
        if walk_finds(grad_fn, fills):
            return found[0]
    return None


def reaches_leaf(grad_fn: Any, leaf: Any, held: Any = None) -> bool:
    """``reaches(grad_fn, {id(leaf)})``, or ``held``, ``leaf``'s ``AccumulateGrad`` node
    (``EagerCalls.leaf_nodes``), once its variable was reset (a leaf view moved into the
    graph's interior, then written in place: the node no longer names it)."""
    if held is not None and accumulated_variable(held) is None:
        return reaches_node(grad_fn, held)
    return reaches(grad_fn, {id(leaf)})


def reaches_node(grad_fn: Any, target: Any) -> bool:
    """Whether the autograd graph from ``grad_fn`` passes through the node ``target``."""
    return walk_finds(grad_fn, lambda node: node is target)


def reaches_output(
    grad_fn: Any, target: Any, output_nr: int, blocked: frozenset[int] | set[int] = frozenset()
) -> bool:
    """Whether the autograd graph from ``grad_fn`` sends gradient into output
    ``output_nr`` of the node ``target``: of a node with several outputs (``unbind``,
    ``split``), a history through a sibling output does not take in this one; through
    none of the ``blocked`` nodes (ids)."""
    stack, seen = [grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or id(node) in blocked:
            continue
        seen.add(id(node))
        for n, nr in node.next_functions:
            if n is target and nr == output_nr:
                return True
            if n is not target:
                stack.append(n)
    return False


def dead_ends(roots: list[Any], live: set[int]) -> list[Any]:
    """The nodes reachable from ``roots`` from which no node in ``live`` (ids) is: what
    ``torch.autograd.backward`` runs (every node it reaches) and ``autograd.grad`` toward
    the ``live`` nodes skips (a chain ending in a ``None`` edge: a view made under
    ``no_grad`` of a tensor that requires grad has no node to send its gradient to)."""
    reaching: dict[int, bool] = {}
    order: list[Any] = []
    stack: list[tuple[Any, bool]] = [(r, False) for r in roots if r is not None]
    while stack:  # post-order: a node after its next nodes
        node, done = stack.pop()
        if done:
            nexts = [n for n, _ in node.next_functions if n is not None]
            reaching[id(node)] = id(node) in live or any(reaching.get(id(n), False) for n in nexts)
            order.append(node)
            continue
        if id(node) in reaching:
            continue
        reaching[id(node)] = False  # (on the stack: a cycle reads it as not reaching)
        stack.append((node, True))
        stack.extend((n, False) for n, _ in node.next_functions if n is not None)
    return [n for n in order if not reaching[id(n)]]
