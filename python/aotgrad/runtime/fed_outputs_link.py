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

A written input's new value computed from ``h`` (``x += h``) is linked before the
write, so the caller's ``x`` has a history through ``h``'s tensor; where the function
reads ``x`` after the write, the reads are linked onto ``x``'s node
(``post_write_link``) and reach ``h`` that way, and the value's link is one of two
(``part``: its own, before the writes; the others', after).

Computing ``c`` runs the compiled backward once more, so a link hands it only in a
pass that can see it (``post_write_link.observed``); a plain ``backward()`` with no
hook or retained gradient on ``h`` passes straight through, at no extra cost.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch import fx

from ..vocab import LINKABLE, OutputVerdict
from .layout import ForwardLayout
from .post_write_link import PROBE, observed

__all__ = [
    "FedOutputsLink",
    "backward_for_links",
    "backward_without_totals",
    "less_handed",
    "less_handed_given",
    "less_handed_inputs",
    "task",
    "totals_reading_saved",
]


def task() -> int:
    """The backward pass running now."""
    return torch._C._current_graph_task_id()


def less_handed(ctx: Any, grads: Sequence[Any]) -> tuple[Any, ...]:
    """The outputs' ``grads`` less what the links handed the fed outputs in this pass."""
    return _less(grads, [(k, c) for k, c in _handed(ctx).items() if isinstance(k, int)])


def less_handed_given(
    ctx: Any, given: dict[int, Any], tangent_outputs: Sequence[int]
) -> dict[int, Any]:
    """``given`` (tangents by position, for another link's run of the backward) less what
    the links handed the fed outputs in this pass."""
    handed = _handed(ctx)
    if not handed:
        return given
    less = dict(given)
    for j, g in given.items():
        c = handed.get(tangent_outputs[j])
        if g is not None and c is not None:
            less[j] = g - c
    return less


def less_handed_inputs(ctx: Any, grads: Sequence[Any]) -> tuple[Any, ...]:
    """The inputs' gradients ``grads`` less what the links of fed views of them handed
    the views' nodes in this pass (it reaches the inputs through those)."""
    return _less(grads, [(k[1], c) for k, c in _handed(ctx).items() if isinstance(k, tuple)])


def _less(grads: Sequence[Any], handed: list[tuple[int, Any]]) -> tuple[Any, ...]:
    less = list(grads)
    for i, c in handed:
        if less[i] is not None and c is not None:
            less[i] = less[i] - c
    return tuple(less)


def _handed(ctx: Any) -> dict[int, Any]:
    """What the links handed the fed outputs in the pass running now (by output)."""
    when, handed = getattr(ctx, "fed_handed", (None, None))
    return handed if when == task() else {}


class _Link:
    """One fed output's link for one call: the Function's node, its plan (to run the
    backward), the output's position, those computed from it, the tangents' metadata;
    where the Function takes what it hands back out (``slot``: the output itself, or for
    a view of an intermediate its base, ``view_of``)."""

    def __init__(self, plan: Any, node: Any, k: int, users: list[int]) -> None:
        self.plan, self.node, self.k, self.users = plan, node, k, users
        self.slot = k
        self.watched: list[Any] = []
        self.view_of: Any = None
        self.freed = self.reads_saved = False
        #: One of two links of one output (its written-value users' and the others'):
        #: what each hands adds up.
        self.sibling = False

    def handed(self, grads: Sequence[Any]) -> Any:
        """What the users' gradients ``grads`` pass back to the output (None where this
        pass cannot see it), recorded on the node for its backward. A pass that hands it
        on without ``retain_graph`` ran eager's nodes between the users and the output:
        eager freed what they saved, and a later pass through them raises."""
        if self.freed:
            raise RuntimeError(_FREED)
        if all(g is None for g in grads) or not self._seen():
            return None
        keep = torch._C._autograd._get_current_graph_task_keep_graph()
        self.freed = not keep and self.reads_saved
        node, plan = self.node, self.plan
        before = _handed(node)
        position = {k: j for j, k in enumerate(plan.tangent_outputs)}
        given = {}
        for k, g in zip(self.users, grads, strict=True):
            if g is not None and k in position:  # (less what a later link handed it)
                given[position[k]] = g - before[k] if before.get(k) is not None else g
        if not given:
            return None
        if plan.replays(node):  # (create_graph: with its graph, ``double_backward``)
            by_output = {plan.tangent_outputs[j]: g for j, g in given.items()}
            c = plan.replay.output_gradient(node, by_output, self.k)
        else:
            outs = plan.backward_kept(node, given)
            c = outs[plan.fed_totals_start(node.num_inputs) + list(plan.fed_outputs).index(self.k)]
        amount = c if self.view_of is None else self._into_base(c)
        if amount is None:
            return None
        handed = dict(before)
        earlier = handed.get(self.slot)
        if earlier is not None and self.view_of is None and not self.sibling:
            # (links of views of this output ran first and handed its node their part,
            # which ``c`` counts too: the output gets the rest)
            handed[self.slot], c = c, c - earlier
        else:
            handed[self.slot] = amount if earlier is None else earlier + amount
        node.fed_handed = (task(), handed)
        # (a copy: the engine may hand the tensor itself to the output's hooks, and one
        # that writes its gradient in place, ``g.mul_(2)``, would change what was handed)
        return c.clone() if c is handed[self.slot] else c

    def _seen(self) -> bool:
        """Whether this pass can see the gradient at the output: eager's runs the
        output's node (``post_write_link.observed``), where the engine runs the node
        the caller's tensor has (a pass asking for some gradients may not)."""
        t = self.watched[0]()
        if t is None or not observed(self.watched):
            return False
        return torch._C._will_engine_execute_node(t.grad_fn)

    def _into_base(self, c: Any) -> Any:
        """What ``c``, handed to the view, passes on to the Function's base output (the
        view's geometry taken again of a stand-in for the base: the view's own node
        would run the caller's hooks on it, and retain it, once more)."""
        view, base = self.watched[0](), self.view_of()
        if view is None or base is None:
            return None
        with torch.enable_grad():
            stand_in = base.detach().requires_grad_()
            again = stand_in.as_strided(view.size(), view.stride(), view.storage_offset())
        create = torch.is_grad_enabled()
        (found,) = torch.autograd.grad(again, stand_in, c, create_graph=create)
        return found


_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward. (raised as eager raises it: an earlier pass handed an output of a "
    "compiled call what the outputs computed from it pass back, without retain_graph)"
)


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
    ``_ReadsOfOutput`` onto its tensor (``layout.fed_outputs``, upstream first): the
    Function's own outputs' on its outputs (``__call__``), then views of intermediates'
    on the caller's views, once made (``onto_views``)."""

    @classmethod
    def for_layout(cls, plan: Any, layout: ForwardLayout) -> FedOutputsLink | None:
        """The link where the trace found fed outputs (beside the post-write link too:
        outside it, which takes what this one hands out of its tangents)."""
        if not layout.fed_outputs:
            return None
        return cls(plan, layout)

    def after(self, apply: Any) -> Any:
        """``apply`` (the Function's), its outputs linked."""

        def applied(*args: Any) -> Any:
            return self(apply(*args))

        return applied

    def __init__(self, plan: Any, layout: ForwardLayout) -> None:
        self.plan = plan
        self.fed = layout.fed_outputs
        self.values_start = layout.num_user_outputs + layout.num_intermediate_bases
        self.views = _linkable_views(layout)
        self.reading = layout.fed_reading_saved
        # (a custom Function's output of an intermediate is the Function's own too)
        fresh = {*layout.fresh_outputs, *layout.custom_versions}
        self.order = [k for k in upstream_first(self.fed) if k in fresh]

    def __call__(
        self, fwd: Sequence[Any], own: Sequence[Any] | None = None, part: str | None = None
    ) -> Sequence[Any]:
        """Link ``fwd`` (``own``: the Function's outputs, where another link wraps them;
        ``part``: ``"written"``, only the written inputs' new values, before their writes,
        or ``"rest"``, the others, after the link onto the written inputs' nodes)."""
        node = self._node(fwd if own is None else own)
        if node is None:
            return fwd
        fwd = list(fwd)
        for k in self.order:
            users = self.fed[k]
            if part is not None:
                users = [j for j in users if (j >= self.values_start) == (part == "written")]
            if users:
                link = _Link(self.plan, node, k, list(users))
                link.sibling = part is not None  # (the other part links k too)
                self._link(link, fwd, fwd)
        return fwd

    def written_fed(self, fwd: Sequence[Any]) -> list[Any]:
        """The fed outputs whose link takes in a written input's new value (in ``fwd``)."""
        return [
            fwd[k]
            for k in self.order
            if any(j >= self.values_start for j in self.fed[k]) and _differentiable(fwd[k])
        ]

    def links_written(self) -> bool:
        """Whether some output's link takes in a written input's new value."""
        return any(j >= self.values_start for users in self.fed.values() for j in users)

    def onto_views(self, args: Sequence[Any], outs: list[Any], fwd: Sequence[Any]) -> None:
        """Link the fed views (the caller's ``outs``, made of ``fwd`` or ``args``)."""
        node = self._node(fwd) if self.views else None
        if node is None:
            return
        for k, (slot, users) in self.views.items():
            link = _Link(self.plan, node, k, users)
            if slot == _CUSTOM:  # (the caller's view routes into output k itself)
                self._link(link, outs, outs)
                continue
            link.slot = slot
            base = args[slot[1]] if isinstance(slot, tuple) else fwd[slot]
            if isinstance(base, torch.Tensor) and base.requires_grad:
                link.view_of = weakref.ref(base)
                self._link(link, outs, outs)

    def _link(self, link: _Link, at: list[Any], out: list[Any]) -> None:
        """Pass ``at``'s users of ``link`` through it onto ``at[link.k]``, into ``out``."""
        link.reads_saved = link.k in self.reading
        users = [j for j in link.users if _differentiable(at[j])]
        if not users or not _differentiable(at[link.k]):
            return
        link.users = users
        link.watched = [weakref.ref(at[link.k])]
        with torch.enable_grad():
            outs = _ReadsOfOutput.apply(link, PROBE, at[link.k], *(at[j] for j in users))
        for j, o in zip(users, outs, strict=True):
            out[j] = o

    def _node(self, fwd: Sequence[Any]) -> Any:
        node = next((fwd[k].grad_fn for k in self.fed if _differentiable(fwd[k])), None)
        if node is None:
            node = next((o.grad_fn for o in fwd if _differentiable(o)), None)
        return node if hasattr(node, "symints") else None  # (else not the Function's)


def _linkable_views(layout: ForwardLayout) -> dict[int, tuple[Any, list[int]]]:
    """The fed views of an intermediate the runtime links, each with its base's
    position among the forward's outputs: those computed from only by the Function's
    own user outputs that are not fed themselves (a link on the caller's view comes
    after the others, which must not wrap what it wraps)."""
    n_user = layout.num_user_outputs
    fresh = set(layout.fresh_outputs)
    # (views the runtime makes of the caller's output: their gradient reaches it anyway)
    made_of = {a.index: a.base_output for a in layout.output_aliases}
    # (views of a user output: made again of the linked output, ``Epilogue._views_of_linked``)
    of_user = {a.index: a.of_user_output for a in layout.output_aliases}
    found: dict[int, Any] = {}
    for a in layout.output_aliases:
        fed = layout.fed_outputs.get(a.index, ())
        users = [j for j in fed if made_of.get(j) != a.index and of_user.get(j, -1) not in fed]
        if not users or a.verdict not in LINKABLE:
            continue
        if a.detached or a.base_leaf or a.routed or a.base_output >= 0:
            continue
        if not all(j < n_user and j in fresh and j not in layout.fed_outputs for j in users):
            continue
        if a.verdict == OutputVerdict.ALIAS_OF_INPUT:
            if not _untouched_input(layout, a):
                continue
            found[a.index] = (("input", a.source), users)  # (out of the input's gradient)
        elif a.verdict == OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT:
            found[a.index] = (a.source, users)
        else:
            found[a.index] = (n_user + a.source, users)
    # a custom Function's view of an input (``t = Half.apply(x); return t, t.sin()``):
    # the caller's ``t`` (``routed_view``) routes its gradient into output ``t`` itself
    # (where its users are the Function's own user outputs, as for the views above)
    own = {*fresh, *layout.custom_versions}
    for k in layout.custom_views:
        fed = layout.fed_outputs.get(k, ())
        users = [j for j in fed if of_user.get(j, -1) not in fed]
        if k in layout.detached_custom_views or k in layout.custom_view_bases or not users:
            continue
        if all(j < n_user and j in own and j not in layout.fed_outputs for j in users):
            found[k] = (_CUSTOM, users)
    return found


#: ``_linkable_views``'s slot for a custom Function's view of an input.
_CUSTOM = "custom"


def _untouched_input(layout: ForwardLayout, a: Any) -> bool:
    """A plain view of an input the function neither writes nor re-lays (a piece of a
    multi-output view too: ``tracked`` for its creation meta, a view with grad all the
    same)."""
    i = a.source
    changed = {*layout.mutated_inputs, *layout.metadata_mutations, *layout.version_deltas}
    tracked = a.tracked and a.creation_meta != _MULTI_OUTPUT
    return i not in changed and not (a.grad_through_base or a.untracked or tracked)


_MULTI_OUTPUT = torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None


def upstream_first(fed: dict[int, tuple[int, ...]]) -> list[int]:
    """The fed outputs, each before those computed from it (the runtime links them in
    this order: a link's edge goes to the tensor the earlier links made)."""
    order: list[int] = []
    seen: set[int] = set()

    def visit(k: int) -> None:
        if k in seen:
            return
        seen.add(k)
        for u, users in fed.items():  # (those it is computed from first)
            if k in users:
                visit(u)
        order.append(k)

    for k in sorted(fed):
        visit(k)
    return order


def backward_without_totals(gm: fx.GraphModule, layout: ForwardLayout) -> fx.GraphModule:
    """The backward ``gm`` without the fed outputs' totals (None in their places, what
    only they read gone): the one a plain pass runs. ``gm`` where there are none."""
    if not layout.fed_outputs:
        return gm
    start = _totals_start(layout)
    graph = fx.Graph()
    outs = list(graph.graph_copy(gm.graph, {}))  # type: ignore[arg-type]
    for p in range(start, start + len(layout.fed_outputs)):
        outs[p] = None
    graph.output(tuple(outs))
    graph.eliminate_dead_code()
    return fx.GraphModule(gm, graph)


def backward_for_links(gm: fx.GraphModule, layout: ForwardLayout) -> fx.GraphModule | None:
    """The backward a link's run before the Function's own runs (``backward_kept``):
    only the fed outputs' totals and the gradients at the linked inputs' nodes (None in
    the others' places), what only the others read gone. So a hook the function
    registered where only those read (on an input before its write) is called once per
    pass, by the Function's own backward, as eager's (blind written-input hooks). None
    where nothing is linked."""
    if not layout.fed_outputs and not layout.post_write_inputs:
        return None
    start = _totals_start(layout)
    keep = range(start, start + len(layout.fed_outputs) + len(layout.post_write_inputs))
    graph = fx.Graph()
    outs = list(graph.graph_copy(gm.graph, {}))  # type: ignore[arg-type]
    graph.output(tuple(o if p in keep else None for p, o in enumerate(outs)))
    graph.eliminate_dead_code()
    return fx.GraphModule(gm, graph)


def totals_reading_saved(gm: fx.GraphModule, layout: ForwardLayout) -> frozenset[int]:
    """The fed outputs whose total in the backward ``gm`` (with them) reads a saved
    value: eager's nodes between the users and the output saved something (``mm``
    saves its operands; ``sum`` nothing), which a pass without ``retain_graph`` frees."""
    if not layout.fed_outputs:
        return frozenset()
    placeholders = gm.graph.find_nodes(op="placeholder")
    saved = set(placeholders[: layout.num_saved_tensors])
    reads: dict[fx.Node, bool] = {}
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            reads[node] = node in saved
        elif node.op != "output":
            reads[node] = any(reads[a] for a in node.all_input_nodes)
    outs = list(gm.graph.output_node().args[0])  # type: ignore[arg-type]
    start = _totals_start(layout)
    return frozenset(
        k
        for p, k in enumerate(layout.fed_outputs)
        if isinstance(outs[start + p], fx.Node) and reads[outs[start + p]]
    )


def _totals_start(layout: ForwardLayout) -> int:
    """Where the fed outputs' totals start among the backward's outputs."""
    start = len(layout.grad_tangents) + len(layout.backward_mutations)
    return start + len(layout.retained_grads[2])
