"""The backward of a pass that reaches some of the outputs only.

Eager's engine never runs the part of the backward an unreached output feeds: its
gradient is nothing, not a zero tensor. The compiled backward takes one tangent per
output, and a zero tangent is not nothing: ``0 * inf`` is nan (``return loss,
x.sqrt()`` then ``loss.backward()``: the unused ``sqrt``'s derivative at a negative
input made the input's gradient nan; blind training-patterns probe), ``0.0 + -0.0`` is
``+0.0``. So a pass with unreached tangents runs the backward graph with those pruned:
each is a structural zero, carried through the ops known to be linear in it (a
gradient is linear in the tangents), dropped from sums, and made a real zero only
where an op is not known to be; what then reads none of the reached tangents is dead
code. Built and compiled once per set of unreached tangents (``PrunedBackwards``).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import fx

from ..hook_calls import TENSOR_HOOK

__all__ = ["PrunedBackwards", "without_tangents"]

aten = torch.ops.aten

#: Ops whose result is zero when their first argument is (a view of it, a reduction, a
#: conversion, a copy): the unreached tangent's part stays nothing.
_OF_FIRST = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.expand.default,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.squeeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.unsqueeze.default,
    aten.slice.Tensor,
    aten.select.int,
    aten.as_strided.default,
    aten.narrow.default,
    aten.clone.default,
    aten.neg.default,
    aten.sum.default,
    aten.sum.dim_IntList,
    aten.mean.default,
    aten.mean.dim,
    aten.cumsum.default,
    aten.flip.default,
    aten.repeat.default,
    aten._to_copy.default,
    aten.alias.default,
    aten.index_select.default,
    aten.mul.Scalar,
    aten.div.Scalar,
    aten.div.Tensor,  # (a zero numerator; a zero divisor is made real)
    torch.ops.prims.convert_element_type.default,
    TENSOR_HOOK,  # (eager's engine calls no hook where no gradient flows)
}

#: Ops zero when any of their tensor arguments is (products).
_PRODUCTS = {
    aten.mul.Tensor,
    aten.mm.default,
    aten.bmm.default,
    aten.matmul.default,
    aten.mv.default,
    aten.dot.default,
    aten.outer.default,
}

_SUMS = {aten.add.Tensor: 1, aten.sub.Tensor: -1}


class _Zero:
    """A structural zero, in place of a node's value (its fake, for a real one)."""

    def __init__(self, val: Any) -> None:
        self.val = val


def without_tangents(
    gm: fx.GraphModule, n_tangents: int, tangents: list[int], n_grads: int
) -> fx.GraphModule | None:
    """A copy of the backward ``gm`` (placeholders: saved values, symbols, then its
    ``n_tangents`` tangents) that reads none of the tangents at ``tangents``: each input
    gradient only they fed is None (the first ``n_grads`` outputs), any other output
    they alone fed a real zero. None where the graph has symbolic shapes the zeros
    would need."""
    new = fx.Graph()
    env: dict[fx.Node, Any] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    first = len(placeholders) - n_tangents
    pruned = {placeholders[first + p] for p in tangents}
    try:
        for node in gm.graph.nodes:
            if node.op == "output":
                outs = node.args[0]
                flat = [_output(new, env, o, k, n_grads) for k, o in enumerate(outs)]
                new.output(type(outs)(flat) if isinstance(outs, (tuple, list)) else flat[0])
            elif node in pruned:
                env[node] = _Zero(node.meta.get("val"))
                copied = new.placeholder(node.name)
                copied.meta = dict(node.meta)
            else:
                env[node] = _copy(new, node, env)
    except _Symbolic:
        return None
    new.eliminate_dead_code()
    return fx.GraphModule(gm, new)


class _Symbolic(Exception):
    """A zero to make real whose shape is symbolic: the graph is left unpruned."""


def _copy(new: fx.Graph, node: fx.Node, env: dict) -> Any:
    """``node`` in the new graph, or a structural zero where its value is one."""
    zeros = [a for a in _tensor_args(node.args) if isinstance(env.get(a), _Zero)]
    if node.op == "call_function" and zeros:
        zero = _propagated(new, node, env, zeros)
        if zero is not None:
            return zero
    return new.node_copy(node, lambda a: _real(new, env[a]))


def _propagated(new: fx.Graph, node: fx.Node, env: dict, zeros: list[fx.Node]) -> Any:
    """What ``node`` is when some tensor arguments are structural zeros: a zero, another
    argument, or None (the op runs with the zeros made real)."""
    target, args = node.target, node.args
    val = node.meta.get("val")
    if target is operator.getitem:
        return _Zero(val)
    if target in _OF_FIRST and args and args[0] in zeros:
        return _Zero(val)
    if target in _PRODUCTS:
        return _Zero(val)
    if isinstance(getattr(target, "__name__", None), str) and target.__name__.endswith(
        "_backward.default"
    ):
        return _Zero(val) if args and args[0] in zeros else None
    if target in _SUMS and len(args) == 2:
        return _sum_with_zero(new, node, env, zeros)
    if target is aten.where.self and all(a in zeros for a in args[1:]):
        return _Zero(val)
    if target is aten.cat.default and all(a in zeros for a in args[0]):
        return _Zero(val)
    return None


def _sum_with_zero(new: fx.Graph, node: fx.Node, env: dict, zeros: list[fx.Node]) -> Any:
    """``a + b`` (or ``a - b``, ``alpha`` 1) with one or both structural zeros: the other
    one (negated), where it has the result's shape and dtype; else None."""
    a, b = node.args
    if a in zeros and b in zeros:
        return _Zero(node.meta.get("val"))
    if node.kwargs.get("alpha", 1) != 1:
        return None
    other = b if a in zeros else a
    if not _same_layout(other, node):
        return None
    value = env[other]
    if a in zeros and _SUMS[node.target] < 0:
        made = new.call_function(aten.neg.default, (value,))
        made.meta = dict(node.meta)
        return made
    return value


def _same_layout(a: Any, node: fx.Node) -> bool:
    va, vn = getattr(a, "meta", {}).get("val"), node.meta.get("val")
    return (
        isinstance(va, torch.Tensor)
        and isinstance(vn, torch.Tensor)
        and va.shape == vn.shape
        and va.dtype == vn.dtype
    )


def _tensor_args(args: Any) -> list[fx.Node]:
    found: list[fx.Node] = []
    fx.map_arg(args, lambda a: found.append(a) or a)
    return found


def _real(new: fx.Graph, value: Any) -> Any:
    """A real value for ``value``: a zero tensor made in the graph for a structural zero."""
    if not isinstance(value, _Zero):
        return value
    return _zeros(new, value.val)


def _zeros(new: fx.Graph, val: Any) -> fx.Node:
    if not isinstance(val, torch.Tensor):
        raise _Symbolic
    if any(not isinstance(s, int) for s in (*val.shape, *val.stride())):
        raise _Symbolic
    made = new.call_function(
        aten.full.default,
        (list(val.shape), 0),
        {"dtype": val.dtype, "layout": torch.strided, "device": val.device, "pin_memory": False},
    )
    made.meta["val"] = val.new_zeros(val.shape)
    return made


def _output(new: fx.Graph, env: dict, o: Any, k: int, n_grads: int) -> Any:
    if not isinstance(o, fx.Node):
        return o
    value = env[o]
    if isinstance(value, _Zero):
        return None if k < n_grads else _zeros(new, value.val)
    return value


class PrunedBackwards:
    """The compiled backward per set of unreached tangents, built on first use
    (``without_tangents``, then ``compile``); the full one where pruning does not apply."""

    def __init__(
        self,
        gm: fx.GraphModule,
        n_tangents: int,
        compile: Callable[[fx.GraphModule], Any],
        totals_gm: fx.GraphModule | None = None,
    ) -> None:
        self.gm, self.n_tangents, self.compile = gm, n_tangents, compile
        self.made: dict[tuple[tuple[int, ...], int], Any] = {}
        self.read_sets: dict[tuple[tuple[int, ...], int], frozenset[int]] = {}
        # the backward the links run (``fed_outputs_link.backward_for_links``: the fed
        # outputs' totals, the gradients at linked inputs' nodes): compiled on first use
        self.totals_gm, self._totals = totals_gm, None

    def with_totals(self) -> Any:
        """The compiled backward the links run (None: none is linked)."""
        if self.totals_gm is not None and self._totals is None:
            self._totals = self.compile(self.totals_gm)
        return self._totals

    def reads(self, missing: tuple[int, ...], n_grads: int, n_saved: int) -> frozenset[int]:
        """The saved tensors (by position, of the first ``n_saved`` inputs) the backward
        for a pass without the tangents ``missing`` reads."""
        key = (missing, n_grads)
        if key not in self.read_sets:
            gm = self.gm
            if missing:
                gm = without_tangents(gm, self.n_tangents, list(missing), n_grads) or gm
            placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"][:n_saved]
            self.read_sets[key] = frozenset(j for j, p in enumerate(placeholders) if p.users)
        return self.read_sets[key]

    def for_pass(self, missing: tuple[int, ...], n_grads: int, full: Any) -> Any:
        key = (missing, n_grads)
        if key not in self.made:
            pruned = without_tangents(self.gm, self.n_tangents, list(missing), n_grads)
            self.made[key] = full if pruned is None else self._compiled(pruned, full)
        return self.made[key]

    def _compiled(self, pruned: fx.GraphModule, full: Any) -> Any:
        try:
            return self.compile(pruned)
        except Exception as e:  # (the full backward still runs: said, not silent)
            warnings.warn(
                f"aotgrad: the backward without the unreached outputs' tangents failed to "
                f"compile ({type(e).__name__}: {e}); the full backward runs, those outputs' "
                "parts computed with zero tangents",
                stacklevel=2,
            )
            return full
