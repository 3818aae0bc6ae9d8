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

Another written input's new value may read the input after its write (``x.t_();
w.copy_(x * 3)``): the runtime passes that value through a link onto ``x``'s node before
it writes ``w`` (``PostWrite.values``), so ``x``'s node also sees what ``w``'s later uses
pass back; ``x``'s gradient from the link is then less what reaches it through ``w``'s
new value from the reads after ``w``'s own write (``_less_through_values``), which come
back to it that way. A chain (``v`` reads ``w``'s value, which reads ``x``'s) takes one
link per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .. import alias
from ..alias.classify import RETURNS_NEW_VALUE
from ..autograd_walks import reaches_node
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
    written = _written_values(meta)
    skip = {*excluded, *meta.requires_grad_changes, *meta.left_then_written}
    skip |= {*meta.metadata_steps}
    found = []
    for i, c in enumerate(call):
        # (metadata alone: recorded, or of a view whose node the change rebuilds)
        laid = plan.inputs[i] == alias.InputVerdict.METADATA
        ok = written(i, c) or (
            laid and (_recorded(plan, i) or getattr(c, "_base", None) is not None)
        )
        if ok and i not in skip and _new_node(c, initial[i]) and c.requires_grad:
            found.append(i)
    return found


def _written_values(meta: TraceMetadata) -> Any:
    """Whether input ``i`` (its traced tensor ``c``) gets its written value with a node:
    written with autograd recording (its new value a tangent output), or a view in the
    caller written without grad (its node rebuilt from its base's on its next read,
    ``_JointTrace._copies``)."""
    tangents = set(meta.tangent_outputs)
    start = len(meta.outputs) + meta.num_intermediate_bases
    values = {i: start + m for m, i in enumerate(meta.mutated_inputs)}

    def written(i: int, c: Any) -> bool:
        verdict = meta.plan.inputs[i]
        if verdict in _WRITES:
            return values.get(i) in tangents
        return verdict == alias.InputVerdict.DATA and getattr(c, "_base", None) is not None

    return written


def _new_node(c: Any, initial: Any) -> bool:
    """Whether the traced input ``c`` left the function with a node other than its own."""
    return isinstance(c, torch.Tensor) and c.grad_fn is not None and c.grad_fn is not initial


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
    #: Each input's new-value tangent (position), where every one has one and no
    #: synthetic-base member is linked: the runtime takes the gradient it handed the
    #: node out of that tangent instead (``passed`` stays empty).
    tangents: list[int] = field(default_factory=list)
    #: Written inputs whose new value reads a linked input after its write (``x1.t_();
    #: x2.copy_(x1 * 3)``), each with that input: the runtime passes the value through
    #: a link onto that input's node before writing it (``PostWriteLink.onto_value``).
    values: dict[int, int] = field(default_factory=dict)
    #: The outputs (tangent positions) that read a linked input after its write: the
    #: runtime links those alone (another output, the caller's tensor stays the
    #: Function's own: a fed output's link of a written value has its edge there).
    readers: list[int] = field(default_factory=list)


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
    reads after the write. In a backward pass where the link hands it to the input's
    node, it comes back through the write's node into the new value's tangent: where
    each linked input has such a tangent, the runtime takes it out of that tangent
    (``PostWrite.tangents``: right also through a hook that is not linear, registered on
    the input before the write); otherwise what it passes on to ``needs`` is computed
    beside the gradients and the runtime takes that out of them (see the module
    docstring). One pass over the history before the write computes it; where that
    raises (a checkpointed region differentiates once), nothing is linked."""
    n_needs = len(needs)
    base = list(grads[:n_needs])
    if not linked or len(grads) != n_needs + len(linked):
        return base, PostWrite()
    found, tensors = _read_after_write(meta, linked, diff_outs, tangents, grads[n_needs:], bases)
    if not found.inputs:
        return base, PostWrite()
    if found.values:
        try:
            with torch._C._DisableAutocast():
                _less_through_values(meta, found, tensors, diff_outs)
        except (RuntimeError, NotImplementedError):
            return base, PostWrite()
    if not bases and all(p >= 0 for p in found.tangents):
        return base, found
    found.tangents = []
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
    bases: dict[int, int] | None = None,
) -> tuple[PostWrite, list[Any]]:
    """The linked inputs some output reads after the write (and no other input's new
    value, but those of ``_value_readers``), with the gradient at each one's node from
    those reads; their tensors."""
    found = PostWrite()
    tensors = []
    allowed, onto = (set(), {}) if bases else _value_readers(meta, linked, diff_outs)
    for (i, t), at_node in zip(linked, at_nodes, strict=True):
        own, of_value = _own_tangent(meta, i, t, diff_outs)
        if at_node is None or not _read_after(meta, t, own, diff_outs, allowed=allowed):
            continue
        through = _through_own(diff_outs[own], t, tangents[own]) if own >= 0 else 0
        if through is None:
            continue
        found.inputs.append(i)
        start = len(meta.outputs) + meta.num_intermediate_bases
        found.readers += [
            p
            for p in reaching(diff_outs, [t.grad_fn])
            if p != own and meta.tangent_outputs[p] < start and p not in found.readers
        ]
        relaid = own >= 0 and diff_outs[own] is not t
        found.tangents.append(-1 if relaid else of_value)
        tensors.append(t)
        found.grads.append(at_node - through)
    found.values = {
        _written_input(meta, diff_outs, p): i for p, i in onto.items() if i in found.inputs
    }
    return found, tensors


def _through_own(value: Any, t: Any, tangent: Any) -> Any:
    """What the new value's tangent passes to ``t``'s node: the tangent itself where the
    value is ``t``; for an input the function re-laid (``x.as_strided_(...)``: its value
    is written back in the caller's layout, ``trace.functional.layout_anchors``), what
    reaches ``t`` from the value in that layout (0 where none does). None where that
    cannot be computed (a checkpointed region differentiates once): not linked."""
    if value is t:
        return tangent
    try:
        with torch._C._DisableAutocast():
            (through,) = torch.autograd.grad(
                [value], [t], [tangent], allow_unused=True, retain_graph=True
            )
    except (RuntimeError, NotImplementedError):
        return None
    return 0 if through is None else through


def _own_tangent(meta: TraceMetadata, i: int, t: Any, diff_outs: Sequence[Any]) -> tuple[int, int]:
    """The tangent position of input ``i``'s own tensor as the function leaves it (its
    new value's; for a member the function returns, that output's), and of its new
    value alone (-1: none, only its metadata changed)."""
    start = len(meta.outputs) + meta.num_intermediate_bases
    value = start + meta.mutated_inputs.index(i) if i in meta.mutated_inputs else -1
    of_value = meta.tangent_outputs.index(value) if value in meta.tangent_outputs else -1
    own = of_value
    if own < 0:  # (a member the function returns: that output is its tensor)
        own = next((p for p, o in enumerate(diff_outs) if o is t), -1)
    return own, of_value


def _read_after(
    meta: TraceMetadata,
    t: Any,
    own: int,
    diff_outs: Sequence[Any],
    *,
    some: bool = True,
    allowed: set[int] = frozenset(),  # type: ignore[assignment]
) -> bool:
    """Whether some output reads ``t`` after its write (``some=False``: or none), and no
    written input's new value but those ``allowed`` (positions in ``diff_outs``)."""
    start = len(meta.outputs) + meta.num_intermediate_bases
    later = [p for p in reaching(diff_outs, [t.grad_fn]) if p != own]
    return (bool(later) or not some) and all(
        meta.tangent_outputs[p] < start or p in allowed for p in later
    )


def _value_readers(
    meta: TraceMetadata, linked: Sequence[tuple[int, Any]], diff_outs: Sequence[Any]
) -> tuple[set[int], dict[int, int]]:
    """The written inputs' new values (positions in ``diff_outs``) that read exactly one
    linked input's tensor after its write without going through another's, and that
    input per value: the runtime links each onto that input's node before writing it
    (soak 246825: ``x1.t_(); x2[:, 1:3].copy_(x1.sum())``, the gradient at the caller's
    ``x1`` was None); a chain (``x3`` reads ``x2``'s value, which reads ``x1``) passes
    through one link per step. Inputs of a synthetic base are left out (their writes
    go through the base)."""
    start = len(meta.outputs) + meta.num_intermediate_bases
    nodes = {id(t.grad_fn): i for i, t in linked if t.grad_fn is not None}
    found: dict[int, int] = {}
    for p, o in enumerate(diff_outs):
        if meta.tangent_outputs[p] < start or o.grad_fn is None:
            continue
        first = _first_linked(o.grad_fn, nodes) - {_written_input(meta, diff_outs, p)}
        if len(first) == 1:
            found[p] = next(iter(first))
    return set(found), found


def _first_linked(node: Any, nodes: dict[int, int]) -> set[int]:
    """The linked inputs (``nodes``: node id -> input) whose node the graph from ``node``
    (not itself) reaches first, through no other linked node."""
    found: set[int] = set()
    stack = [n for n, _ in node.next_functions]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        if id(n) in nodes:
            found.add(nodes[id(n)])
            continue
        stack.extend(m for m, _ in n.next_functions)
    return found


def _written_input(meta: TraceMetadata, diff_outs: Sequence[Any], p: int) -> int:
    """The input whose new value is ``diff_outs[p]``."""
    start = len(meta.outputs) + meta.num_intermediate_bases
    return meta.mutated_inputs[meta.tangent_outputs[p] - start]


def _less_through_values(
    meta: TraceMetadata, found: PostWrite, tensors: list[Any], diff_outs: Sequence[Any]
) -> None:
    """A linked input's gradient less what a written value that reads it
    (``PostWrite.values``) passes to it from the reads after that value's own write: the
    link onto that input's node hands those to its node, they come back through its
    write's node into the value's tangent, and the value's link hands them on."""
    at = {i: k for k, i in enumerate(found.inputs)}
    raw = list(found.grads)
    value_of = {
        _written_input(meta, diff_outs, p): p
        for p in range(len(diff_outs))
        if meta.tangent_outputs[p] >= len(meta.outputs) + meta.num_intermediate_bases
    }
    for j, i in found.values.items():
        k = at.get(j)
        if k is None or raw[k] is None:  # (no reads after that write: nothing comes back)
            continue
        (through,) = torch.autograd.grad(
            [diff_outs[value_of[j]]],
            [tensors[at[i]]],
            [raw[k]],
            allow_unused=True,
            retain_graph=True,
        )
        if through is not None:
            found.grads[at[i]] = found.grads[at[i]] - through


def linked_by_value(
    meta: TraceMetadata, call: Sequence[Any], linked: Sequence[int], diff_outs: Sequence[Any]
) -> list[int]:
    """The inputs of ``linked`` (``written_with_new_node``) whose node after the write
    gets every gradient eager's does at the caller's tensor: their new value's tangent,
    and what the link hands it (``PostWrite.tangents``) where outputs read it after the
    write; not those another written input's new value reads after the write."""
    found = []
    for i in linked:
        own, of_value = _own_tangent(meta, i, call[i], diff_outs)
        if of_value >= 0 and _read_after(meta, call[i], own, diff_outs, some=False):
            found.append(i)
    return found


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


def hook_bypassed_views(
    meta: TraceMetadata,
    call: Sequence[Any],
    initial: Sequence[Any],
    diff_outs: Sequence[Any],
    fake_args: Sequence[Any],
) -> tuple[list[int], list[int]]:
    """Inputs that are views in the caller, written with autograd recording (or without:
    their node is rebuilt from the base's, ``written_with_new_node``), whose node from
    before the call eager's backward runs only for the function's reads before the
    write: the write's node (``CopySlices`` of the base) hands the rest to the base's
    node directly, so a hook the caller registered on the view before the call sees
    those reads' gradient only. Those no output reads before the write (the runtime
    passes a fresh view of the base for them where hooked: the hooks never run, as in
    eager's), then those some output does (a hooked one runs eagerly)."""
    written = _written_values(meta)
    found = {}
    for i, c in enumerate(call):
        if (
            written(i, c)
            and getattr(fake_args[i], "_is_view", lambda: False)()
            and initial[i] is not None
            and _new_node(c, initial[i])
        ):
            # (traced as a view too, the write's node is its base's: every edge into
            # the view's node is a read)
            found[i] = (
                initial[i],
                _NO_EDGE if c._is_view() else _first_write(c.grad_fn, initial[i]),
            )
    if not found:
        return [], []
    read = _read_before_write(diff_outs, {id(n): w for n, w in found.values()})
    # (a write whose node is not found: as if read, the conservative side)
    read_at = [i for i, (n, w) in found.items() if id(n) in read or w is None]
    return [i for i in found if i not in read_at], read_at


_NO_EDGE = object()


def _first_write(node: Any, start: Any) -> Any:
    """The node of the first write after ``start``: along the written tensor's own
    edges (an in-place op's first), the one whose edge leads to ``start``."""
    while node is not None and node.next_functions:
        after = node.next_functions[0][0]
        if after is start:
            return node
        node = after
    return None


def _read_before_write(diff_outs: Sequence[Any], writes: dict[Any, Any]) -> set[int]:
    """Of ``writes`` (a node from before the call → its first write's node), the
    (``id`` of the) nodes another node the outputs reach reads too, or the write
    through an edge other than its own."""
    read: set[int] = set()
    stack, seen = [getattr(o, "grad_fn", None) for o in diff_outs], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for k, (after, _) in enumerate(node.next_functions):
            if id(after) in writes and (node is not writes[id(after)] or k > 0):
                read.add(id(after))
            stack.append(after)
    return read


def views_past_write(
    meta: TraceMetadata, call: Sequence[Any], initial: Sequence[Any], outs: Sequence[Any]
) -> list[int]:
    """Outputs that view an input that is a view in the caller and that the function
    gave a new node (a write, with grad or without), taken before that write: eager
    rebuilds their nodes from the base's, past the input's new one (``v = x[0];
    x.add_(1); return v``: ``autograd.grad(v, x)`` after the call is None there). The
    runtime makes them views of the base (``Epilogue``)."""
    return [
        k
        for k, o, c in _views_of_new_nodes(meta, call, initial, outs)
        if c._base is not None and not reaches_node(o.grad_fn, c.grad_fn)
    ]


def _views_of_new_nodes(
    meta: TraceMetadata, call: Sequence[Any], initial: Sequence[Any], outs: Sequence[Any]
) -> list[tuple[int, Any, Any]]:
    """(output, its tensor, the input's traced tensor) per output with history viewing
    an input the function left with a new node."""
    plan = meta.plan
    found = []
    for k, o in enumerate(outs):
        if plan.outputs[k] != alias.OutputVerdict.ALIAS_OF_INPUT:
            continue
        i = plan.output_source[k]
        c = call[i] if 0 <= i < len(call) else None
        if (
            _new_node(c, initial[i])
            and isinstance(o, torch.Tensor)
            and o is not c
            and o.grad_fn is not None
        ):
            found.append((k, o, c))
    return found


def views_after_relaid(
    meta: TraceMetadata, call: Sequence[Any], initial: Sequence[Any], outs: Sequence[Any]
) -> list[int]:
    """Outputs viewing an input whose metadata the function changed with autograd
    recording (``x.as_strided_(...)``, ``t_()``), taken after the change: eager's node
    reaches the input's new one (``autograd.grad(x.t(), x)`` after the call sees it).
    The runtime makes them of the input as the function leaves it, not as it was
    (``Epilogue._rebuild_outputs``)."""
    plan = meta.plan
    return [
        k
        for k, o, c in _views_of_new_nodes(meta, call, initial, outs)
        if plan.inputs[plan.output_source[k]] in alias.METADATA_WRITE
        and reaches_node(o.grad_fn, c.grad_fn)
    ]


def views_before_sibling_write(
    outs: Sequence[Any], wrapped: Sequence[Any], fake_args: Sequence[Any], plan: Any, calls: Any
) -> tuple[int, ...]:
    """Outputs viewing an input that is a view in the caller, made before a write to
    another input of the caller's storage (``v = x0[0]; x1.mul_(2)`` under ``no_grad``,
    ``x0``, ``x1`` views of one base): the shared version count moved, so eager rebuilds
    their nodes from the root base's, past ``x0``'s (``autograd.grad(v, x0)`` after the
    call is None). The runtime makes them views of the root (``views_past_write``)."""
    written = {i for i, v in enumerate(plan.inputs) if v in RETURNS_NEW_VALUE}
    roots: dict[int, set[int]] = {}
    for i, f in enumerate(fake_args):
        if isinstance(f, torch.Tensor) and f._is_view():
            roots.setdefault(id(f._base), set()).add(i)
    found = []
    for k, o in enumerate(outs):
        if plan.outputs[k] != alias.OutputVerdict.ALIAS_OF_INPUT:
            continue
        i = plan.output_source[k]
        f = fake_args[i] if 0 <= i < len(fake_args) else None
        siblings = roots.get(id(f._base), set()) - {i} if isinstance(f, torch.Tensor) else set()
        if siblings & written and o is not wrapped[i] and calls.earlier.written_since_made(o):
            found.append(k)
    return tuple(found)
