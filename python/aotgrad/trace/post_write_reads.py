"""Reads of a written input after the write: eager's gradient at the input's new node.

``x.mul_(2); return (x * w).sin()``: in eager, the output's history goes through the
node the write gave ``x`` (``MulBackward`` of the write), so ``torch.autograd.grad(out,
x)``, ``x.retain_grad()`` or a hook registered on ``x`` after the call see what the
reads after the write pass back to it (likewise after a metadata change autograd
records, ``x.t_()``). The compiled Function reads ``x`` as it was when
called: the runtime's write-back (``x.copy_(new)``) gives ``x`` a new node that only the
new value's gradient reaches, and those observers see nothing.

So the joint trace also differentiates the outputs with respect to each such input as
the function leaves it (a backward output, computed from the user
outputs' tangents), and the runtime routes the outputs through a node that passes that
gradient to the caller's tensor after its write (``runtime.post_write_link``). The total
gradient stays the same: what that gradient passes on through the history before the
write is a backward output too (``post_write_split``), which the runtime takes out of
the gradients in a pass where the link handed it to the input's node, since it then
comes back through the write's node into the new value's tangent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import alias
from .graphs import TraceMetadata
from .saved_reads import reaching


def initial_nodes(call: Sequence[Any]) -> list[Any]:
    """Each input's node before the function runs (compared after it: a recorded write)."""
    return [c.grad_fn if isinstance(c, torch.Tensor) else None for c in call]


def written_with_new_node(
    meta: TraceMetadata,
    call: Sequence[Any],
    initial: Sequence[Any],
    excluded: set[int],
) -> list[int]:
    """Inputs the function gave a new node that the runtime gives the caller's tensor
    alike: written with autograd recording (the new value is the traced tensor itself,
    written back by a recorded ``copy_``, and gets a tangent), or re-laid in a way
    autograd records (``t_``, ``unsqueeze_`` of an input that requires grad, replayed
    so), or both; views in the caller too (the write-back through the view gives the
    caller's view and its base new nodes, as eager's write did). Not: a
    ``requires_grad`` change, changes mixing recorded and unrecorded steps, or what
    ``excluded`` names (a view written under no_grad runs on a copy there: not linked)."""
    plan = meta.plan
    tangents = set(meta.tangent_outputs)
    start = len(meta.outputs) + meta.num_intermediate_bases
    values = {i: start + m for m, i in enumerate(meta.mutated_inputs)}
    skip = {*excluded, *meta.requires_grad_changes, *meta.left_then_written}
    skip |= {*meta.metadata_steps, *meta.relaid_inputs}
    found = []
    for i, c in enumerate(call):
        verdict = plan.inputs[i]
        if verdict in _WRITES:
            ok = values.get(i) in tangents
        else:
            ok = verdict == alias.InputVerdict.METADATA and _recorded(plan, i)
        if (
            not ok
            or i in skip
            or not isinstance(c, torch.Tensor)
            or not c.requires_grad
            or c.grad_fn is None
            or c.grad_fn is initial[i]
        ):
            continue
        found.append(i)
    return found


_WRITES = (
    alias.InputVerdict.DATA_DIFFERENTIABLE,
    alias.InputVerdict.DATA_AND_METADATA_DIFFERENTIABLE,
)


def _recorded(plan: Any, i: int) -> bool:
    """A metadata change the runtime replays with autograd recording (an input that
    requires grad, the change not hidden from autograd: ``layout_of_trace``)."""
    flags = plan.facts.input_flags[i]
    return bool(
        flags & alias.facts.IN_REQUIRES_GRAD and not flags & alias.facts.IN_MUTATIONS_HIDDEN
    )


@dataclass
class PostWrite:
    """What ``post_write_split`` found: the inputs linked, the gradient the outputs'
    reads after the write pass to each one's node, and per entry of ``needs`` what that
    gradient passes on through the history before the write (None: nothing)."""

    inputs: list[int] = field(default_factory=list)
    grads: list[Any] = field(default_factory=list)
    passed: list[Any] = field(default_factory=list)


def post_write_split(
    meta: TraceMetadata,
    linked: list[tuple[int, Any]],
    diff_outs: Sequence[Any],
    tangents: Sequence[Any],
    needs: Sequence[Any],
    grads: Sequence[Any],
    bases: dict[int, int] | None = None,
) -> tuple[list[Any], PostWrite]:
    """The joint backward's gradients (``grads``: one per ``needs``, then one per linked
    input's node as the function leaves it) and what the link needs (``PostWrite``).
    ``linked``: (key, tensor) per input that may be linked: the input's position, or
    for a member of a synthetic base the number of inputs plus its place in
    ``JointGraph.post_write_members``, ``bases`` naming each one's group's base.

    The gradient at the node from the reads after the write is what reaches it less the
    input's own new-value tangent (the new value is the node's tensor); an input another
    written input's new value reads after the write is left out, and so is one no output
    reads after the write. What it passes on to ``needs`` is computed beside the
    gradients: in a backward pass where the link hands it to the input's node, it comes
    back through the write's node into the new value's tangent, and the runtime takes it
    out of the gradients (see the module docstring). One pass over the history before
    the write computes it; where that raises (a checkpointed region differentiates
    once), nothing is linked."""
    n_needs = len(needs)
    base = list(grads[:n_needs])
    if not linked or len(grads) != n_needs + len(linked):
        return base, PostWrite()
    found, tensors = _read_after_write(meta, linked, diff_outs, tangents, grads[n_needs:])
    if not found.inputs:
        return base, PostWrite()
    try:
        with torch._C._DisableAutocast():
            _less_through_members(found, tensors, bases or {})
            found.passed = list(
                torch.autograd.grad(
                    tensors,
                    needs,
                    found.grads,
                    allow_unused=True,
                    retain_graph=True,
                )
            )
    except (RuntimeError, NotImplementedError):
        return base, PostWrite()
    return base, found


def _read_after_write(
    meta: TraceMetadata,
    linked: list[tuple[int, Any]],
    diff_outs: Sequence[Any],
    tangents: Sequence[Any],
    at_nodes: Sequence[Any],
) -> tuple[PostWrite, list[Any]]:
    """The linked inputs some output reads after the write (and no other input's new
    value), with the gradient at each one's node from those reads; their tensors."""
    start = len(meta.outputs) + meta.num_intermediate_bases
    positions = meta.tangent_outputs
    written = set(meta.mutated_inputs)
    found = PostWrite()
    tensors = []
    for (i, t), at_node in zip(linked, at_nodes, strict=True):
        # (the input's own new-value tangent; none where only its metadata changed, nor
        # for a member: its group's base is the new value)
        own = positions.index(start + meta.mutated_inputs.index(i)) if i in written else -1
        readers = reaching(diff_outs, [t.grad_fn])
        later = [p for p in readers if p != own]
        if at_node is None or not later or any(positions[p] >= start for p in later):
            continue
        found.inputs.append(i)
        tensors.append(t)
        found.grads.append(at_node - tangents[own] if own >= 0 else at_node)
    return found, tensors


def _less_through_members(found: PostWrite, tensors: list[Any], bases: dict[int, int]) -> None:
    """A linked base's gradient less what its linked members' pass to it: the caller's
    member's node (rebuilt from the base's) hands that on to the base's node itself."""
    at = {i: k for k, i in enumerate(found.inputs)}
    for k, i in enumerate(found.inputs):
        b = at.get(bases.get(i, -1))
        if b is None:
            continue
        (through,) = torch.autograd.grad(
            [tensors[k]], [tensors[b]], [found.grads[k]], allow_unused=True, retain_graph=True
        )
        if through is not None:
            found.grads[b] = found.grads[b] - through
