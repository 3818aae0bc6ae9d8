"""The runtime's layout of a traced function (``runtime.ForwardLayout``): from the
trace's metadata and alias plan, how the runtime rebuilds each output that aliases an
input or an intermediate, writes the inputs back and sets version counts, before the
partition adds what it saved (``program.build_program``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from . import alias, trace
from .errors import UnsupportedError
from .runtime import ForwardLayout, OutputAlias
from .runtime.output_pieces import PIECE_BASES
from .vocab import IN_MUTATES_DATA


def layout_of_trace(
    metadata: trace.TraceMetadata,
    fake_args: Sequence[Any],
    tangent_outputs: list[int],
    num_saved_tensors: int = 0,
    num_saved_symints: int = 0,
    num_tokens: int = 0,
) -> ForwardLayout:
    """The runtime's instructions, from the alias plan of the traced function."""
    plan = metadata.plan
    facts = plan.facts
    aliases = _output_aliases(metadata, fake_args)
    metadata_mutations = {
        i: facts.input_view[i] for i, v in enumerate(plan.inputs) if v in alias.METADATA_WRITE
    }
    bindings = _view_bindings(_specs(aliases, metadata_mutations, facts), fake_args)
    return ForwardLayout(
        num_user_outputs=len(metadata.outputs),
        mutated_inputs=plan.mutated_inputs,
        tangent_outputs=tangent_outputs,
        num_saved_tensors=num_saved_tensors,
        num_saved_symints=num_saved_symints,
        num_tokens=num_tokens,
        num_intermediate_bases=len(plan.intermediate_bases),
        mutation_with_grad=[
            plan.inputs[i] in alias.DIFFERENTIABLE_WRITE for i in plan.mutated_inputs
        ],
        metadata_mutations=metadata_mutations,
        metadata_with_grad=_metadata_with_grad(
            facts, metadata_mutations, metadata.metadata_recorded
        ),
        version_deltas=_version_deltas(facts),
        output_aliases=aliases,
        bindings=bindings,
        new_leaves=_new_leaves(metadata, facts),
        made_leaves=[k for k, out in enumerate(metadata.outputs) if out.made_leaf],
        fresh_outputs=_fresh_outputs(metadata),
        **_custom_and_stale_views(metadata),
        view_bases=facts.output_view_base,
        same_as=facts.output_same_as,
        inference_outputs=sorted(facts.output_inference),
        output_versions=facts.output_version,
        requires_grad_changes=metadata.requires_grad_changes,
        left_then_written=metadata.left_then_written,
        requires_grad_flag_off=metadata.requires_grad_flag_off,
        **_views_read_by_node(metadata),
        detached_outputs=metadata.detached_outputs,
        data_outputs=metadata.data_outputs,
        **_views_remade_after_writes(metadata),
        inner_leaves=metadata.inner_leaves,
        enable_grad=not metadata.grad_mode,
        grad_mode_after=metadata.grad_mode_after,
        storage_resizes=facts.input_storage_resize,
        storage_sets=sorted(facts.input_storage_set),
        relaid_inputs=metadata.relaid_inputs,
        metadata_steps=metadata.metadata_steps,
        **_grad_bookkeeping(metadata),
    )


def _views_remade_after_writes(metadata: Any) -> dict[str, Any]:
    """Outputs viewing inputs that the epilogue remakes after the writes: of an input
    ``set_()`` to another's storage, of the root base (made before a write to another
    input of the storage; ``program`` adds those the joint trace finds)."""
    return {
        "views_of_set_inputs": metadata.views_of_set_inputs,
        "views_past_write": metadata.views_before_sibling_write,
    }


def _grad_bookkeeping(metadata: Any) -> dict[str, Any]:
    """What the runtime does to the caller's tensors' gradients: ``retain_grad()``, the
    function's hooks on inputs and outputs, the views remade through hooked views."""
    return {
        "retained_grads": metadata.retained_grads,
        "fed_outputs": metadata.fed_outputs,
        "input_hooks": metadata.input_hooks,
        "early_input_hooks": metadata.early_input_hooks,
        "hooks_before_call": metadata.hooks_before_call,
        "output_hooks": metadata.output_hooks,
        "hooked_views": metadata.hooked_views,
    }


def _views_read_by_node(metadata: Any) -> dict[str, list[int]]:
    """Leaf views whose own flag the function turned off, and views of ``split`` /
    ``unbind`` whose node it never reads: autograd must not read it either."""
    return {
        "own_requires_grad": metadata.own_requires_grad,
        "node_unread_views": metadata.node_unread_views,
    }


def _metadata_with_grad(
    facts: alias.AliasFacts, metadata_mutations: dict, recorded: Sequence[int] = ()
) -> list[int]:
    """Inputs whose new metadata autograd records: they require grad, and the change was
    not hidden from autograd; or the function gave one a history before changing it
    (``x.add_(w); x.as_strided_(..)``, ``x`` without grad: ``recorded``)."""
    visible = alias.facts.IN_REQUIRES_GRAD
    hidden = alias.facts.IN_MUTATIONS_HIDDEN
    return [
        i
        for i in metadata_mutations
        if (facts.input_flags[i] & visible and not facts.input_flags[i] & hidden) or i in recorded
    ]


def _custom_and_stale_views(metadata: trace.TraceMetadata) -> dict[str, Any]:
    """The ``ForwardLayout`` fields of outputs eager returns as custom-Function views
    (``custom_views``) or as stale views (``stale_views``: of them, the ones made under
    no_grad, and the stale views of an intermediate the function returns too:
    ``with no_grad: v = t[:2]``; ``t.mul_(2)``; ``return v, t``)."""
    facts = metadata.plan.facts
    stale = [k for k, out in enumerate(metadata.outputs) if out.stale_custom_view]
    # a stale view whose ``._base`` is another output, not the input itself (a detached
    # alias of it: ``t = x.detach().requires_grad_(); v = t.t(); t.add_(1)`` under
    # no_grad): made of that output (``stale_output_views``), not early of the input
    of_output = {
        k
        for k, (j, _) in facts.stale_view_of_output.items()
        if metadata.plan.outputs[j] != alias.OutputVerdict.IS_INPUT
    }
    return {
        "stale_views": {
            k: None if k in of_output else facts.custom_view_of_input.get(k) for k in stale
        },
        "stale_no_grad": frozenset(k for k in stale if k in facts.output_no_grad_view),
        "stale_of_detached": frozenset(k for k in stale if k in facts.stale_view_of_detached),
        "stale_output_views": {
            k: src for k, src in facts.stale_view_of_output.items() if k in stale
        },
        "custom_views": {k: src for k, src in facts.custom_view_of_input.items() if k not in stale},
        "detached_custom_views": facts.written_detached,
        "detached_view_bases": facts.written_detached_base,
        "custom_view_bases": facts.custom_view_base,
        # a custom Function's output of an intermediate: its count (a view of one written
        # before shares its counter: ``t.sub_(t)``, ``Half.apply(t)``) is set before the
        # compiled Function returns it (after, autograd would take the view for a stale one)
        "custom_versions": [
            k
            for k in sorted(facts.output_custom)
            if k not in stale and k not in facts.custom_view_of_input
        ],
    }


def _version_deltas(facts: alias.AliasFacts) -> dict[int, int]:
    """Per input, the version count the function adds. Every in-place op bumps eager's
    counter, also one that changes nothing (squeeze_(0) of a dim that is not 1); a
    written input's is kept when 0 (batch norm's running statistics, ``x.data = y``,
    ``x.data.add_(1)``): the runtime's own write or set_ counts one."""
    return {
        i: d
        for i, d in enumerate(facts.input_version_delta)
        if d > 0 or i in facts.input_storage_set or facts.input_flags[i] & IN_MUTATES_DATA
    }


def _base_output(k: int, metadata: trace.TraceMetadata) -> int:
    """The user output output ``k`` is made of (``OutputAlias.base_output``), or -1."""
    facts = metadata.plan.facts
    made_of = metadata.views_of_outputs.get(k, -1)
    return facts.output_detached_base.get(k, facts.output_leaf_base.get(k, made_of))


def _new_leaves(metadata: Any, facts: Any) -> list[int]:
    """The outputs that are leaves the function made; an output that is an earlier one
    is that one once it is final (``same_as``: ``t2`` of ``t2, t1, t2`` where ``t2 =
    t1.detach().requires_grad_()``, one graph value for the three)."""
    return [
        k
        for k, out in enumerate(metadata.outputs)
        if out.new_leaf and k not in facts.output_same_as
    ]


def _output_aliases(metadata: trace.TraceMetadata, fake_args: Sequence[Any]) -> list[OutputAlias]:
    """How the runtime rebuilds each output that aliases an input or an intermediate."""
    plan = metadata.plan
    facts = plan.facts
    _refuse_views_without_history(metadata)
    pieces = _pieces(plan)
    return [
        OutputAlias(
            k,
            v,
            plan.output_source[k],
            facts.output_view.get(k),
            out.requires_grad,
            facts.output_creation_meta.get(k),
            facts.output_detached.get(k, 0),
            base_output=_base_output(k, metadata),
            base_leaf=k in facts.output_base_leaf,
            before_base_leaf=k in facts.output_base_leaf and k not in facts.output_has_grad_fn,
            routed=k in facts.output_history_past_base,
            tracked=k in facts.output_tracked_view,
            untracked=_untracked_view(k, facts),
            with_grad=not metadata.grad_mode and k in facts.output_has_grad_fn,
            of_leaf_view=_of_leaf_view(k, v, out, metadata, fake_args),
            before_requires_grad=metadata.views_before_requires_grad.get(k, 0),
            grad_through_base=(
                v == alias.OutputVerdict.ALIAS_OF_INPUT
                and metadata.grad_mode
                and not out.requires_grad
                and not getattr(fake_args[plan.output_source[k]], "requires_grad", True)
                and k not in facts.output_creation_meta
                and k not in facts.output_detached
            ),
            piece=pieces.get(k),
        )
        for k, (v, out) in enumerate(zip(plan.outputs, metadata.outputs))
        if v != alias.OutputVerdict.NON_ALIAS
    ]


def _pieces(plan: Any) -> dict[int, tuple[int, int]]:
    """``OutputAlias.piece`` of each output that is one of several pieces of one
    multi-output view returned (distinct output numbers, one base and verdict), plain
    views (no detach, no output returned twice)."""
    facts = plan.facts
    nodes: dict[int, list[int]] = {}
    for k, (node, _) in facts.output_piece.items():
        if (
            plan.outputs[k] in PIECE_BASES
            and k not in facts.output_detached
            and k not in facts.output_same_as
        ):
            nodes.setdefault(node, []).append(k)
    out = {}
    for members in nodes.values():
        numbers = {facts.output_piece[k][1] for k in members}
        of_input = alias.OutputVerdict.ALIAS_OF_INPUT
        sources = {(plan.outputs[k] == of_input, plan.output_source[k]) for k in members}
        if len(members) > 1 and len(numbers) == len(members) and len(sources) == 1:
            group = len({g for g, _ in out.values()})
            out.update({k: (group, facts.output_piece[k][1]) for k in members})
    return out


_CM = torch._C._autograd.CreationMeta


def _refuse_views_without_history(metadata: trace.TraceMetadata) -> None:
    """A view of an input taken while the input did not require grad
    (``x.requires_grad_(False); v = x[1:]; x.requires_grad_(True)``), returned: eager's
    view requires grad through its base yet has no ``grad_fn`` (its gradient stops at
    the view). Not rebuilt so: refused by name."""
    facts = metadata.plan.facts
    for k, (v, out) in enumerate(zip(metadata.plan.outputs, metadata.outputs)):
        if v != alias.OutputVerdict.ALIAS_OF_INPUT or not metadata.grad_mode:
            continue
        i = metadata.plan.output_source[k]
        if (
            i in metadata.requires_grad_flag_off
            and metadata.requires_grad_changes.get(i, True)
            and out.requires_grad
            and facts.output_view.get(k) is not None
            and k not in facts.output_has_grad_fn
            and k not in facts.output_creation_meta
            and k not in facts.output_detached
        ):
            raise UnsupportedError(
                f"output {k} is a view of input {i} taken while "
                "the input did not require grad, which requires grad again by the return: "
                "eager's view has no grad_fn; not supported (return a .clone() of it)"
            )


def _of_leaf_view(
    k: int, v: Any, out: Any, metadata: trace.TraceMetadata, fake_args: Sequence[Any]
) -> bool:
    """Output ``k`` views an input without grad, requires grad and has a ``grad_fn``: a
    view of a view ``requires_grad_()`` made a leaf (``OutputAlias.of_leaf_view``)."""
    facts = metadata.plan.facts
    if v != alias.OutputVerdict.ALIAS_OF_INPUT or not out.requires_grad:
        return False
    i = metadata.plan.output_source[k]
    return (
        not getattr(fake_args[i], "requires_grad", True)
        and not metadata.requires_grad_changes.get(i, False)
        and k in facts.output_has_grad_fn
        and k not in facts.output_creation_meta
        and k not in facts.output_detached
    )


def _untracked_view(k: int, facts: Any) -> bool:
    """Output ``k`` is a view autograd does not track in eager: made in no_grad or
    inference mode, taken with grad of one so (a piece of ``t.split(2)``: its node
    passes the gradient nowhere), or by a custom Function run under no_grad (its creation meta says
    "in a custom Function", yet it has no ``grad_fn``, or only a view's of it)."""
    meta = facts.output_creation_meta.get(k)
    if meta in (_CM.NO_GRAD_MODE, _CM.INFERENCE_MODE) or k in facts.output_stops_short:
        return True
    return meta == _CM.IN_CUSTOM_FUNCTION and (
        k in facts.output_tracked_view or k not in facts.output_has_grad_fn
    )


def _specs(aliases: Sequence[Any], metadata_mutations: dict, facts: Any) -> list[Any]:
    """Every view spec the runtime evaluates at each call: the output aliases', the
    inputs' new metadata, the custom-Function and stale views' (soak 72438)."""
    specs = [a.view for a in aliases if a.view is not None] + list(metadata_mutations.values())
    routed = [*facts.custom_view_of_input.values(), *facts.stale_view_of_output.values()]
    return specs + [view for _, view in routed if view is not None]


def _view_bindings(specs: list[Any], fake_args: Sequence[Any]) -> list[Any]:
    """The input sizes that the symbolic sizes of rebuilt views and of inputs' new
    metadata are read from; refused when one of them depends on data."""
    bindings = [] if all(s.static for s in specs) else alias.views.bindings_of(fake_args)
    unbound = alias.views.unbound_symbols(specs, bindings)
    if unbound:
        raise UnsupportedError(
            "an output that views an input or intermediate, or an input's new metadata, "
            f"has data-dependent sizes or offset ({', '.join(sorted(map(str, unbound)))}): "
            "not supported; return a copy (.clone()) instead"
        )
    return bindings


def _fresh_outputs(metadata: trace.TraceMetadata) -> list[int]:
    """User outputs the graph computes afresh (no alias, no custom Function's view, not the same
    object as another output, not a reinterpreting view), and the intermediate bases
    (never views in eager; the graph may return one: a transpose of what it wrote)."""
    plan = metadata.plan
    facts = plan.facts
    return [
        k
        for k, (v, out) in enumerate(zip(plan.outputs, metadata.outputs))
        if out.is_tensor
        and v == alias.OutputVerdict.NON_ALIAS
        and (k not in facts.output_custom or k in facts.output_custom_fresh)
        and k not in facts.output_same_as
        # a reinterpreting view (another dtype, a conj bit) the runtime does not rebuild
        # (alias.reinterpret: symbolic sizes, a layout it cannot take) is returned as computed
        and not facts.output_flags[k]
        & (alias.facts.OUT_ALIASES_INPUT | alias.facts.OUT_VIEW_OF_INTERMEDIATE)
    ] + [len(metadata.outputs) + j for j in range(metadata.num_intermediate_bases)]
