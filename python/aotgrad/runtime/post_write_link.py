"""The outputs routed through the nodes that written inputs get from their write.

``x.mul_(2); return (x * w).sin()``: eager's output reaches ``x``'s new node, so
``torch.autograd.grad(out, x)``, ``x.retain_grad()`` and hooks registered on ``x`` after
the call see the gradient the reads after the write pass to it. The compiled Function's
outputs reach only the node ``x`` had when called. After the epilogue has written the
inputs (``x.copy_(new)``: ``x``'s new node leads into the Function's new-value output; a
replayed ``t_()`` recorded by autograd: into the node ``x`` had),
``PostWriteLink`` passes the outputs through ``_ReadsAfterWrite``, an identity whose
backward hands each such input the gradient the compiled backward computes for its node
(``trace.post_write_reads``); the Function's own backward then takes what that gradient
passes on out of its gradients, since it comes back through the writes' nodes: totals
are unchanged.

Computing that gradient runs the compiled backward once more, so the link hands it on
only in a pass that can see it (``observed``): one that asks for some gradients
(``torch.autograd.grad``, ``backward(inputs=...)``: it may ask for the input's), or where
the caller's tensor retains its gradient or has hooks. A plain ``backward()`` passes the
outputs' gradients straight through, at no extra cost, with eager's totals.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.graph import get_gradient_edge

from .layout import ForwardLayout

__all__ = ["PROBE", "PostWriteLink", "observed"]

#: (the Function's node, the tangent positions of the linked outputs) -> the gradient
#: at each linked input's node
PostGrads = Callable[[Any, dict[int, Any]], Sequence[Any]]


#: A leaf nothing is computed from but the link: a pass that asks for every leaf's
#: gradient (``backward()``) runs every node it reaches, this one's accumulator too; a
#: pass that asks for some (``autograd.grad``, ``inputs=``) runs only those on their paths.
PROBE = torch.zeros((), requires_grad=True)
#: Its accumulator, held here: read once (``get_gradient_edge`` costs a call's worth).
_PROBE_NODE = get_gradient_edge(PROBE).node


def observed(watched: Sequence[Any]) -> bool:
    """Whether this backward pass can see the gradient at a linked input's node."""
    if not torch._C._will_engine_execute_node(_PROBE_NODE):
        return True
    for ref in watched:
        t = ref()
        if t is None:
            continue
        # (a view's node hands its gradient on to its base's new node: eager's base, its
        # gradient retained or hooked, sees it)
        for seen in (t, t._base) if t._is_view() else (t,):
            if seen.retains_grad or seen._backward_hooks:
                return True
    return False


class _ReadsAfterWrite(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, link: tuple, n: int, probe: Any, *ts: Any) -> Any:
        # link: (post_grads, the Function's node, tangent positions, weak references to
        # the caller's written tensors)
        ctx.link, ctx.n = link, n
        ctx.set_materialize_grads(False)
        # (a view stays one, as the Function returned it: a custom Function's view of an
        # intermediate is a view in eager too, soak 201599)
        return tuple(t.view_as(t) if t._is_view() else t.detach() for t in ts[n:])

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        post_grads, node, positions, watched = ctx.link
        given = {p: g for p, g in zip(positions, grads, strict=True) if g is not None}
        seen = given and observed(watched)
        to_inputs = list(post_grads(node, given)) if seen else [None] * ctx.n
        return (None, None, None, *to_inputs, *grads)


class PostWriteLink:
    """Per call, after the inputs' writes: the graph's differentiable user outputs and
    intermediate bases, passed through ``_ReadsAfterWrite`` onto the written inputs'
    new nodes (``layout.post_write_inputs``)."""

    def __init__(self, post_grads: PostGrads, layout: ForwardLayout) -> None:
        self.post_grads = post_grads
        self.inputs = layout.post_write_inputs
        start = layout.num_user_outputs + layout.num_intermediate_bases
        self.tangent_outputs = list(layout.tangent_outputs)
        readers = set(layout.post_write_readers)
        self.linked = [
            (j, k) for j, k in enumerate(self.tangent_outputs) if k < start and j in readers
        ]
        positions = {k: j for j, k in enumerate(self.tangent_outputs)}
        self.values = {  # written input -> (its value's tangent position, linked input)
            w: (positions[start + layout.mutated_inputs.index(w)], i)
            for w, i in layout.post_write_values.items()
        }

    def onto_value(self, args: Sequence[Any], w: int, value: Any) -> Any:
        """Input ``w``'s new value, before its write, through a link onto the node of the
        linked input it reads after that one's write (written or re-laid by now): that
        node gets what the value's gradient passes to it, as eager's does."""
        p, i = self.values[w]
        target, node = args[i], value.grad_fn
        if not (_differentiable(value) and hasattr(node, "symints")):
            return value
        if not (target.requires_grad and target.grad_fn is not None):
            return value
        at = self.inputs.index(i)

        def to_target(node: Any, given: dict[int, Any]) -> list[Any]:
            return [self.post_grads(node, given)[at]]

        # (watching every linked input: a pass that sees one sees all, so a chain's
        # links hand on together, ``x``'s node getting what ``w``'s value reads of it)
        watched = [weakref.ref(args[k]) for k in self.inputs]
        with torch.enable_grad():
            link = (to_target, node, [p], watched)
            (out,) = _ReadsAfterWrite.apply(link, 1, PROBE, target, value)
        return out

    def __call__(
        self, args: Sequence[Any], fwd: Sequence[Any], also: Sequence[Any] = ()
    ) -> Sequence[Any]:
        """Link ``fwd``'s readers onto the written inputs' nodes (``also``: more tensors
        whose hooks or retained gradient make a pass see them: the fed outputs a written
        value's link hands to, ``FedOutputsLink.written_fed``)."""
        linked = [(j, k) for j, k in self.linked if _differentiable(fwd[k])]
        if not linked:
            return fwd
        node = fwd[linked[0][1]].grad_fn
        if not hasattr(node, "symints"):  # (not the compiled Function's node: unlinked)
            return fwd
        # the nodes the epilogue's recorded writes and metadata changes made; where one
        # made none, nothing is linked (the Function's gradients then stay whole)
        targets = [args[i] for i in self.inputs]
        if not all(t.requires_grad and t.grad_fn is not None for t in targets):
            return fwd
        watched = [weakref.ref(t) for t in (*targets, *also)]
        positions = [j for j, _ in linked]
        with torch.enable_grad():
            link = (self.post_grads, node, positions, watched)
            outs = _ReadsAfterWrite.apply(
                link, len(targets), PROBE, *targets, *(fwd[k] for _, k in linked)
            )
        fwd = list(fwd)
        for (_, k), o in zip(linked, outs, strict=True):
            fwd[k] = o
        return fwd


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None
