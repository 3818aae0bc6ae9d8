"""Outputs the function computes other outputs from: eager's gradient at such an output.

``h = layer(x); return h, head(h)``: in eager, the second output's history goes through
``h``'s node, so ``torch.autograd.grad(logits, h)`` (Grad-CAM), ``h.retain_grad()`` and a
hook registered on ``h`` after the call see what ``head(h)`` passes back to it. The
compiled Function's outputs are its own, side by side: ``autograd.grad`` raised that
``h`` was not used, ``h.grad`` stayed None, a hook saw the caller's part only.

So the joint trace also differentiates with respect to each such output (its total, a
backward output), and the runtime routes the outputs computed from it through a node
that hands ``h``'s caller tensor what they pass back (``runtime.fed_outputs_link``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ..alias import facts
from ..autograd_walks import reaches_output, walk_finds
from ..vocab import OutputVerdict


def fed_outputs(
    outs: Sequence[Any],
    bases: Sequence[Any],
    linkable: Sequence[bool],
    retained: tuple[list[int], list[int], dict[int, tuple[int, ...]]],
    movable: frozenset[int] = frozenset(),
    written: Sequence[Any] = (),
) -> dict[int, tuple[int, ...]]:
    """Per output another is computed from, the forward values (user outputs, then
    intermediate bases, then the ``written`` inputs' new values: ``x += h; return h``,
    soak 246196) computed from it. Only outputs the runtime can link
    (``linkable``: the compiled Function's own, or views of an intermediate it returns),
    returned once, not ``input_hooks.RetainedThrough``'s (``retain_grad()``-ed, fresh),
    not hooked by the function unless the hooks move to the caller's tensor
    (``movable``, by id: ``input_hooks.caller_fed_outputs``; the link then hands it what
    the others pass back, and its hooks run on the sum, before the caller's)."""
    values = [*outs, *bases, *written]
    start = len(outs) + len(bases)
    found: dict[int, tuple[int, ...]] = {}
    for k, o in enumerate(outs):
        if not _candidate(k, o, outs, linkable, retained, movable):
            continue
        node, nr = facts.grad_fn_of(o), o.output_nr
        users = tuple(
            j
            for j, v in enumerate(values)
            if _differentiable(v)
            and v is not o
            and v._base is not o  # (a view of it: remade of the caller's tensor)
            and (g := facts.grad_fn_of(v)) is not node
            and reaches_output(g, node, nr)
        )
        if any(j >= start for j in users):
            users = _past_written(values, users, start, node, nr)
        if users:
            found[k] = users
    return found


def _past_written(
    values: Sequence[Any], users: tuple[int, ...], start: int, node: Any, nr: int
) -> tuple[int, ...]:
    """``users``, among them written inputs' new values (from ``start`` on), where the
    others may read the output through those: one that does only that (``x += h; y = x *
    2``) leaves it out, as its gradient reaches the output through the written input's
    node (``post_write_link``) and the value's link; one that reads it both ways keeps
    the others and leaves the values out (their part would reach the output twice; known
    open: the caller's later uses of ``x`` then do not reach ``h``)."""
    through = {id(facts.grad_fn_of(values[j])) for j in users if j >= start}
    kept = [j for j in users if j >= start]
    for j in users:
        if j >= start:
            continue
        g = facts.grad_fn_of(values[j])
        direct = reaches_output(g, node, nr, through)
        if direct and _through_any(g, through):
            return tuple(j for j in users if j < start)
        if direct:
            kept.append(j)
    return tuple(sorted(kept))


def _through_any(grad_fn: Any, nodes: set[int]) -> bool:
    """Whether the graph from ``grad_fn`` passes through one of ``nodes`` (ids)."""
    return walk_finds(grad_fn, lambda n: id(n) in nodes)


def _candidate(
    k: int,
    o: Any,
    outs: Sequence[Any],
    linkable: Sequence[bool],
    retained: tuple,
    movable: frozenset[int],
) -> bool:
    return (
        linkable[k]
        and _differentiable(o)
        and (not o._backward_hooks or id(o) in movable)
        and k not in retained[2]  # (``RetainedThrough``; a remade view that is retained
        # is linked: ``input_hooks.retained_grads`` leaves it here)
        and next(j for j, x in enumerate(outs) if x is o) == k  # (once: as its first)
    )


def _differentiable(t: Any) -> bool:
    return (
        isinstance(t, torch.Tensor)
        and t.requires_grad
        and facts.grad_fn_of(t) not in (None, facts.STALE_VIEW)
    )


def views_of_outputs(outs: Sequence[Any], plan: Any) -> dict[int, int]:
    """Outputs that view an input and that the function made of another such output
    (``t = x.as_strided(...); return t, t.chunk(2)[1].t()``), each with that output:
    eager's history goes through its node (a hook on it, ``autograd.grad`` with respect
    to it see the view's part), so the runtime makes the view of the caller's output
    (``OutputAlias.base_output``) rather than of the input. Only outputs made of the
    input itself serve as bases."""
    af = plan.facts
    plain = [
        k
        for k, v in enumerate(plan.outputs)
        if v == OutputVerdict.ALIAS_OF_INPUT
        and _differentiable(outs[k])
        and k not in af.output_custom
        and k not in af.output_detached
        and k not in af.output_leaf_base
        and next(j for j, x in enumerate(outs) if x is outs[k]) == k
    ]
    made_of = {
        j: [
            k
            for k in plain
            if k != j
            and outs[k] is not outs[j]
            and plan.output_source[k] == plan.output_source[j]
            and reaches_output(
                facts.grad_fn_of(outs[j]), facts.grad_fn_of(outs[k]), outs[k].output_nr
            )
        ]
        for j in plain
    }
    bases = {k for k in plain if not made_of[k]}
    # (a chain of views of the input passes through one output made of the input itself:
    # a second one would be made of the first)
    found = {}
    for j, ks in made_of.items():
        ks = [k for k in ks if k in bases]
        if ks:
            found[j] = ks[0]
    return found
