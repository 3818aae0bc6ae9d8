"""Stage 3, after the cut: every size symbol the backward's inputs mention is bound by one.

The cut may save a SymInt that is an expression of symbols (a numel,
``8*s0*(s1 - 2)**2``) or a tensor whose shape mentions symbols, without saving
those symbols themselves. Inductor's backward needs each of them bound by an input
of its own: to name its size variables, and to write the guards of its FX-graph
cache entry, which would otherwise read the symbol from the forward's sources
(``L['args'][0].size()[0]``) and fail on a cache hit in the next process. As
torch's partitioner does, the node that binds each such symbol — a SymInt input of
the joint graph, or the node that made an unbacked symbol — is saved too, with the
other SymInts, bindings first.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import sympy
import torch
import torch.fx as fx
from torch.fx.experimental.symbolic_shapes import find_symbol_binding_fx_nodes

_SYM = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _exprs(val: Any) -> Iterator[sympy.Expr]:
    """Every symbolic expression in a value, as traced and after the shape
    environment's replacements (a size traced as ``s1`` may since be known as
    ``s0 + 1``: both sides' symbols must be bound)."""
    if isinstance(val, torch.Tensor):
        items: Iterable[Any] = (*val.shape, *val.stride(), val.storage_offset())
    elif isinstance(val, (tuple, list)):
        items = val
    else:
        items = (val,)
    for item in items:
        if isinstance(item, _SYM):
            yield item.node._expr
            yield item.node.expr
        elif isinstance(item, (tuple, list)):
            yield from _exprs(item)


def free_symbols_of(val: Any) -> set[sympy.Symbol]:
    out: set[sympy.Symbol] = set()
    for expr in _exprs(val):
        out |= expr.free_symbols
    return out


def _bound_by(node: fx.Node) -> sympy.Symbol | None:
    val = node.meta.get("val")
    if isinstance(val, torch.SymInt) and isinstance(val.node._expr, sympy.Symbol):
        return val.node._expr
    return None


def missing_bindings(
    joint: fx.GraphModule, saved: Sequence[fx.Node], tangents: Sequence[fx.Node]
) -> list[fx.Node]:
    """The joint graph's nodes binding the symbols that ``saved`` and ``tangents`` (the
    backward's inputs) mention and no saved SymInt binds, in a deterministic order."""
    bound = {s for n in saved if (s := _bound_by(n)) is not None}
    needed: set[sympy.Symbol] = set()
    for n in (*saved, *tangents):
        needed |= free_symbols_of(n.meta.get("val"))
    needed -= bound
    if not needed:
        return []
    bindings = find_symbol_binding_fx_nodes(joint.graph)
    # A symbol with no binding node (a graph made by hand) is left to the compiler.
    found = [bindings[s] for s in sorted(needed, key=lambda s: s.name) if s in bindings]
    return list(dict.fromkeys(found))
