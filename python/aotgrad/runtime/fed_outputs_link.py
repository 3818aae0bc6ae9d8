"""The outputs computed from another output, routed through that output's tensor.

``h = layer(x); return h, head(h)``: eager's ``head(h)`` has a history through ``h``'s
node, so ``torch.autograd.grad(logits, h)``, ``h.retain_grad()`` and hooks registered on
``h`` after the call see what ``head(h)`` passes back to it. The compiled Function
returns both side by side. Per such output ``h`` (``trace.fed_outputs``, upstream
first), ``FedOutputsLink`` passes the values computed from it through ``_ReadsOfOutput``,
an identity with one more edge, to ``h``'s tensor. Its backward hands ``h`` the
gradient they pass back (``c``: the compiled backward's total at ``h``, run with their
gradients and none for ``h``); the engine adds it to the caller's part and runs ``h``'s
hooks on the sum, as eager's. The Function's backward then takes ``c`` out of ``h``'s
gradient (``less_handed``): its graph adds what the outputs computed from ``h`` pass
back itself. Everything is linear, so totals are unchanged, hooks that scale
included.

Computing ``c`` runs the compiled backward once more, so a link hands it only in a
pass that can see it (``post_write_link.observed``); a plain ``backward()`` with no
hook or retained gradient on ``h`` passes straight through, at no extra cost.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch

from ..trace.fed_outputs import upstream_first
from .layout import ForwardLayout
from .post_write_link import PROBE, observed

__all__ = ["FedOutputsLink", "less_handed"]


def _task() -> int:
    return torch._C._current_graph_task_id()


def less_handed(ctx: Any, grads: tuple[Any, ...]) -> tuple[Any, ...]:
    """``grads`` less what the links handed the fed outputs in this pass."""
    handed = _handed(ctx)
    if not handed:
        return grads
    less = list(grads)
    for k, c in handed.items():
        if less[k] is not None and c is not None:
            less[k] = less[k] - c
    return tuple(less)


def _handed(ctx: Any) -> dict[int, Any]:
    """What the links handed the fed outputs in the pass running now (by output)."""
    task, handed = getattr(ctx, "fed_handed", (None, None))
    return handed if task == _task() else {}


class _Link:
    """One fed output's link for one call: the Function's node, its plan (to run the
    backward), the output's position, those computed from it, and the tangents'
    positions and metadata."""

    def __init__(self, plan: Any, node: Any, k: int, users: list[int], metas: list) -> None:
        self.plan, self.node, self.k, self.users, self.metas = plan, node, k, users, metas
        self.watched: list[Any] = []

    def handed(self, grads: Sequence[Any]) -> Any:
        """What the users' gradients ``grads`` pass back to the output (None where this
        pass cannot see it), recorded on the node for its backward."""
        if all(g is None for g in grads) or not observed(self.watched):
            return None
        node, plan = self.node, self.plan
        before = _handed(node)
        position = {k: j for j, k in enumerate(plan.tangent_outputs)}
        given = {}
        for k, g in zip(self.users, grads, strict=True):
            if g is not None and k in position:  # (less what a later link handed it)
                given[position[k]] = g - before[k] if before.get(k) is not None else g
        if not given:
            return None
        outs = plan.backward_kept(node, given, self.metas)
        start = plan.fed_totals_start(node.num_inputs)
        c = outs[start + list(plan.fed_outputs).index(self.k)]
        node.fed_handed = (_task(), {**before, self.k: c})
        return c


class _ReadsOfOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, link: _Link, probe: Any, fed: Any, *users: Any) -> Any:
        ctx.link = link
        ctx.set_materialize_grads(False)
        return tuple(t.view_as(t) if t._is_view() else t.detach() for t in users)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        return (None, None, ctx.link.handed(grads), *grads)


class FedOutputsLink:
    """Per call: the values computed from each fed output passed through
    ``_ReadsOfOutput`` onto its tensor (``layout.fed_outputs``, upstream first)."""

    def __init__(self, plan: Any, layout: ForwardLayout) -> None:
        self.plan = plan
        self.order = upstream_first(layout.fed_outputs)
        self.fed = layout.fed_outputs
        self.tangent_outputs = list(layout.tangent_outputs)

    def __call__(self, fwd: Sequence[Any]) -> Sequence[Any]:
        node = next((fwd[k].grad_fn for k in self.order if _differentiable(fwd[k])), None)
        if node is None or not hasattr(node, "symints"):  # (not the Function's node)
            return fwd
        metas = [(fwd[k].shape, fwd[k].dtype, fwd[k].device) for k in self.tangent_outputs]
        fwd = list(fwd)
        with torch.enable_grad():
            for k in self.order:
                users = [j for j in self.fed[k] if _differentiable(fwd[j])]
                if not users or not _differentiable(fwd[k]):
                    continue
                link = _Link(self.plan, node, k, users, metas)
                link.watched = [weakref.ref(fwd[k])]
                outs = _ReadsOfOutput.apply(link, PROBE, fwd[k], *(fwd[j] for j in users))
                for j, o in zip(users, outs, strict=True):
                    fwd[j] = o
        return fwd


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None
