"""The metadata pass: run the function once on fakes, functionalized, and learn what its
outputs are (which need tangents, which are new leaves) and the alias facts that
``aotgrad.alias`` classifies (which inputs it writes, which outputs view what)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef

from .. import alias
from ..alias.siblings import link_siblings
from ..autograd_walks import reaches, reaches_node
from ..eager_calls import EagerCalls, in_inference_mode
from ..errors import UnsupportedError
from ..hook_calls import hooks_of_unused_pieces
from ..input_hooks import (
    PostAccumulate,
    caller_fed_outputs,
    hooked_leaf_outputs,
    hooks_of_outputs,
    linked_rebuilt_outputs,
    on_node_returned,
    post_hooks_of_made_leaves,
    retained_grads,
    retained_written_inputs,
    views_through_output_hooks,
)
from ..vocab import LINKABLE
from .autocast_casts import cached_cast_inputs
from .failures import trace_errors
from .fed_outputs import fed_outputs, views_of_outputs
from .functional import (
    EffectChain,
    flat_call,
    from_functional,
    to_functional_detached,
    tracing_modes,
)
from .graphs import InnerLeaf, OutputInfo, TraceMetadata
from .inference_records import normal_storages, refuse_custom_records_in_inference_mode
from .inner_leaves import inner_leaves
from .post_write_reads import views_before_sibling_write


def _empty_storage(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.numel() > 0 and a.untyped_storage().nbytes() == 0


def _covers_same_bytes(a: Any, b: Any) -> bool:
    """Whether two layouts of one storage cover the same elements: the same count, each
    dense (no overlap, no gap) from the same first element. Unknown (symbolic): no."""
    try:
        if a.numel() != b.numel():
            return False
        if a.numel() == 0:
            return True
        dense = torch._prims_common.is_non_overlapping_and_dense_or_false
        return bool(
            dense(a)
            and dense(b)
            and a.storage_offset() == b.storage_offset()
            and all(s >= 0 for s in (*a.stride(), *b.stride()))
        )
    except Exception:  # a data-dependent or symbolic size: write back in the caller's layout
        return False


_RESIZE_OPS = (
    torch.ops.inductor.resize_storage_bytes_,
    torch.ops.inductor.resize_storage_bytes_.default,
)


class _StorageResizes(torch.overrides.TorchFunctionMode):
    """Records ``inductor.resize_storage_bytes_`` calls on the inputs (or views of them):
    under functionalization the op resizes the traced value directly, so nothing else
    remembers it. ``last``: input index → the size it was last resized to."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        super().__init__()
        self.index = {id(t): i for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
        self.last: dict[int, int] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in _RESIZE_OPS and args:
            t = args[0]
            i = self.index.get(id(t), self.index.get(id(t._base), -1))
            if i >= 0:
                size = args[1] if len(args) > 1 else kwargs["new_size"]
                if not isinstance(size, int):
                    raise UnsupportedError(
                        f"input {i}'s storage is resized to a symbolic size: not supported"
                    )
                self.last[i] = size
        return func(*args, **(kwargs or {}))


def _left_then_written(
    wrapped: Sequence[Any], fake_args: Sequence[Any], outs: Sequence[Any], calls: Any, facts: Any
) -> dict[int, tuple[bool, bool]]:
    """Inputs ``detach_()`` or ``requires_grad_(False)`` took out of autograd that a write
    then gave a history (``x.detach_(); x.mul_(w)``): whether it was
    ``requires_grad_(False)``, and whether what the function returns or writes was
    computed from the input before (its gradient node is reached). Eager writes a tensor
    that no longer requires grad: a leaf among them counts as one that does not (no leaf
    written: no refusal)."""
    left = {}
    for i, w in enumerate(wrapped):
        grad_fn = alias.facts.grad_fn_of(w) if isinstance(w, torch.Tensor) else None
        if id(w) not in calls.left_autograd or grad_fn in (None, alias.facts.STALE_VIEW):
            continue
        ends = [grad_fn, *(alias.facts.grad_fn_of(o) for o in outs if isinstance(o, torch.Tensor))]
        node = calls.input_detached.get(id(w), (None, 0))[0]
        reached = any(
            (reaches(g, {id(w)}) or (node is not None and reaches_node(g, node)))
            for g in ends
            if g not in (None, alias.facts.STALE_VIEW)
        )
        left[i] = (id(w) in calls.flag_off, reached)
        if fake_args[i].is_leaf:
            facts.input_flags[i] &= ~alias.facts.IN_REQUIRES_GRAD
    return left


def _check_new_leaf_inputs(
    outs: Sequence[Any],
    wrapped: Sequence[Any],
    rg_changes: dict[int, bool],
    calls: Any,
    before: Any,
) -> None:
    """A non-leaf input ``detach_()``ed and made to require grad is a new leaf, which the
    runtime makes of the caller's tensor before the graph runs. Refused where the graph
    cannot give eager's gradients: an output computed from the input before the
    ``detach_()`` (eager's gradient reaches the input's history), or from the new leaf
    when the input was written before the ``detach_()``."""
    grad_fns = [
        g
        for o in outs
        if isinstance(o, torch.Tensor)
        and (g := alias.facts.grad_fn_of(o)) not in (None, alias.facts.STALE_VIEW)
    ]
    for i, flag in rg_changes.items():
        w = wrapped[i]
        if not flag or id(w) not in calls.input_detached:
            continue
        node, version = calls.input_detached[id(w)]
        old = any(reaches_node(g, node) for g in grad_fns)
        new = version > before[i][0] and any(reaches(g, {id(w)}) for g in grad_fns)
        if old or new:
            raise UnsupportedError(
                f"input {i} is detach_()ed and made to require grad inside the function, and "
                + (
                    "an output is computed from it before the detach_()"
                    if old
                    else "it was written before, and an output is computed from the new leaf"
                )
                + ": not supported (its gradients would not reach the caller's tensors)"
            )


def _input_view(
    leaf: Any, wrapped: Sequence[Any], calls: EagerCalls
) -> tuple[int, Any, bool] | None:
    """A new leaf that is a view of an input's root, or of a ``detach()`` of the input
    (``detached_from``): the input's position, the view's static layout relative to it,
    and whether through the detached alias (``InnerLeaf.input_view``). A view of an
    input's alias without grad (``gradless_bases``) is one of the input."""
    if not leaf._is_view():
        return None
    detached_from = calls.detached_from
    root = calls.gradless.aliases.get(id(leaf._base), (None, leaf._base))[1]
    of = detached_from.get(id(root))
    for i, w in enumerate(wrapped):
        if not isinstance(w, torch.Tensor):
            continue
        if w is root or (w._is_view() and w._base is root) or of is w:
            # (relative to the input's value: a write moves it to offset 0, and may lay
            # it out otherwise, where the caller's coordinates are lost)
            value, view = from_functional(w), from_functional(leaf)
            if tuple(value.stride()) != tuple(w.stride()):
                return None
            spec = alias.ViewSpec.at(view, value.storage_offset())
            return (i, spec, of is w) if spec.static else None
    return None


def _inner_leaf_facts(
    outs: Sequence[Any],
    calls: EagerCalls,
    found: list[int],
    bases: Sequence[Any],
    wrapped: Sequence[Any],
) -> list[InnerLeaf]:
    new_leaves, members = calls.new_leaves, calls.synthetic.member_leaves
    out = []
    for j in found:
        leaf = new_leaves[j]
        fake = from_functional(leaf)
        member = members.get(id(leaf))
        of_input = None
        if member is None:
            of_input = _input_view(leaf, wrapped, calls)
        if member is not None or of_input is not None:
            out.append(_leaf_of_callers_tensor(outs, leaf, fake, member, of_input))
            continue
        out.append(
            InnerLeaf(
                tuple(int(n) for n in leaf.shape),
                fake.dtype,
                fake.device,
                [k for k, o in enumerate(outs) if o is leaf],
                [s for s, b in enumerate(bases) if b is leaf],
                [
                    k
                    for k, o in enumerate(outs)
                    if isinstance(o, torch.Tensor) and o._is_view() and o._base is leaf
                ],
                {
                    k: alias.ViewSpec.of(o, leaf, check_base=False)
                    for k, o in enumerate(outs)
                    if isinstance(o, torch.Tensor)
                    and o._is_view()
                    and o._base is leaf
                    and alias.facts.made_by_custom_function(o)
                },
            )
        )
    return out


def _leaf_of_callers_tensor(
    outs: Sequence[Any], leaf: Any, fake: Any, member: int | None, of_input: Any
) -> InnerLeaf:
    """A leaf that is the caller's tensor (a synthetic base's member the caller made a
    leaf, ``member``) or a view of it (``of_input``, ``InnerLeaf.input_view``): the
    outputs that view its base and reach its gradient are rebuilt as views of it."""
    views = [
        k
        for k, o in enumerate(outs)
        if isinstance(o, torch.Tensor)
        and o is not leaf
        and o._is_view()
        and o._base is leaf._base
        and alias.facts.grad_fn_of(o) not in (None, alias.facts.STALE_VIEW)
        and reaches(o.grad_fn, {id(leaf)})
    ]
    shape = tuple(int(n) for n in leaf.shape)
    returned = [] if member is not None else [k for k, o in enumerate(outs) if o is leaf]
    return InnerLeaf(
        shape, fake.dtype, fake.device, returned, [], views, member=member, input_view=of_input
    )


def _inherits_grad(o: Any, inputs: set[int]) -> bool:
    """A view of an input that requires grad made under no_grad requires grad without a
    history: no new leaf (rebuilt as the input's view), unless ``requires_grad_()`` made
    it require grad (its input does not)."""
    return o._is_view() and id(o._base) in inputs and o._base.requires_grad


def _output_info(o: Any, inputs: set[int] = frozenset(), made_leaf: bool = False) -> OutputInfo:
    if not isinstance(o, torch.Tensor):
        return OutputInfo(False, False, False)
    rg = bool(o.requires_grad)
    if rg and o.layout is not torch.strided:
        raise UnsupportedError(
            f"an output that requires grad has layout {o.layout}: aotgrad differentiates "
            "strided tensors only; return it dense (.to_dense()) and convert it outside"
        )
    grad_fn = alias.facts.grad_fn_of(o)
    if rg and grad_fn is alias.facts.STALE_VIEW:
        return OutputInfo(True, True, False, stale_custom_view=True)
    # (a view made under no_grad of an input that requires grad, made a leaf of its own
    # by ``requires_grad_()``: ``made_leaf``)
    if rg and grad_fn is None and (made_leaf or not _inherits_grad(o, inputs)):
        return OutputInfo(True, True, False, new_leaf=True, made_leaf=made_leaf)
    return OutputInfo(True, rg, rg and (o.is_floating_point() or o.is_complex()))


def _outputs_info(
    outs: Sequence[Any],
    wrapped: Sequence[Any],
    fake_args: Sequence[Any] = (),
    new_leaves: Sequence[Any] = (),
) -> list[OutputInfo]:
    input_index = {id(w) for w in wrapped if isinstance(w, torch.Tensor)}
    made = {id(t) for t in new_leaves}
    normal = normal_storages(wrapped, fake_args)
    return [
        _input_output_info(o)
        if id(o) in input_index
        else _inference_view_info()
        if _inference_view(o, normal)
        else _output_info(o, input_index, id(o) in made)
        for o in outs
    ]


def _inference_view(o: Any, normal: set[Any]) -> bool:
    """Under inference mode, a view of a tensor the function computed: an inference
    tensor's view, which does not require grad even where its base does
    (``t.requires_grad_()``). ``normal``: the storages of the inputs that are no inference
    tensors (``x.detach().requires_grad_()`` is a normal tensor, and so are its views)."""
    return (
        (in_inference_mode() or torch.is_inference_mode_enabled())
        and isinstance(o, torch.Tensor)
        and o._is_view()
        and StorageWeakRef(o.untyped_storage()) not in normal
    )


def _inference_view_info() -> OutputInfo:
    return OutputInfo(True, False, False)


def _input_output_info(o: Any) -> OutputInfo:
    """An output that is an input object: the runtime returns the real input itself."""
    rg = bool(o.requires_grad)
    return OutputInfo(True, rg, rg and (o.is_floating_point() or o.is_complex()))


def _requires_grad_changes(
    wrapped: Sequence[Any],
    fake_args: Sequence[Any],
    outs: Sequence[Any],
    calls: Any,
    grad_mode: bool,
) -> tuple[dict[int, bool], list[int]]:
    """``requires_grad_()`` / ``detach_()`` on an input (not a write of a value that
    requires grad: that input gets its history from the write, which the runtime replays).
    A non-leaf input ``detach_()``ed, then made to require grad, is a new leaf: True.
    Also the inputs that required grad for a while (``_required_grad_for_a_while``):
    False (and they are turned off by ``requires_grad_(False)``, second)."""
    for_a_while = _required_grad_for_a_while(wrapped, fake_args, outs, calls) if grad_mode else []
    changes = {
        i: bool(w.requires_grad)
        for i, (w, a) in enumerate(zip(wrapped, fake_args))
        if isinstance(a, torch.Tensor)
        and (not w.requires_grad or alias.facts.grad_fn_of(w) is None)
        and (bool(w.requires_grad) != bool(a.requires_grad) or (w.requires_grad and not a.is_leaf))
    }
    return {**changes, **dict.fromkeys(for_a_while, False)}, for_a_while


def _required_grad_for_a_while(
    wrapped: Sequence[Any],
    fake_args: Sequence[Any],
    outs: Sequence[Any],
    calls: Any,
) -> list[int]:
    """Inputs without grad the function made require grad and turned off again
    (``x.requires_grad_(); t = x * 2; x.requires_grad_(False)``), where an output has a
    history: eager's outputs computed from them meanwhile have one, so the runtime turns
    the caller's tensor on before the graph and off after (``requires_grad_(False)``;
    eager's accumulator then skips it, as the graph gives it no gradient)."""
    if not calls.turned_on:
        return []
    if not any(isinstance(o, torch.Tensor) and o.requires_grad for o in outs):
        return []
    return [
        i
        for i, (w, a) in enumerate(zip(wrapped, fake_args))
        if id(w) in calls.turned_on and not w.requires_grad and not a.requires_grad
    ]


def _dirty_by_custom_function(w: Any) -> bool:
    """Last written by a custom Function (``mark_dirty``) that autograd recorded (``w``:
    an input's stand-in, or a SymInt)."""
    return isinstance(w, torch.Tensor) and isinstance(
        alias.facts.grad_fn_of(w), torch.autograd.function.BackwardCFunction
    )


def _finish_facts(
    facts: Any, fake_args: Sequence[Any], resized: dict[int, int], wrapped: Sequence[Any]
) -> None:
    """What the run's facts leave out: under inference mode autograd records nothing (no
    write is one it sees), except a custom Function's ``mark_dirty`` in an
    ``enable_grad`` block, whose check on a leaf that requires grad is Python's and runs
    there too; elsewhere the views of one base that eager links through it; inputs with
    empty storage and the storage sizes set inside."""
    if in_inference_mode():
        seen = alias.facts.IN_REQUIRES_GRAD | alias.facts.IN_NEW_VALUE_REQUIRES_GRAD
        facts.input_flags = [
            f if _dirty_by_custom_function(w) else f & ~seen
            for f, w in zip(facts.input_flags, wrapped)
        ]
    else:
        link_siblings(facts, fake_args)
    facts.input_storage_resize = {
        **{i: 0 for i, a in enumerate(fake_args) if _empty_storage(a)},
        **resized,
    }


def _relaid_inputs(plan: Any, wrapped: Sequence[Any], fake_args: Sequence[Any]) -> list[int]:
    """Written inputs whose new metadata covers other bytes (``TraceMetadata.relaid_inputs``)."""
    return [
        i
        for i in plan.mutated_inputs
        if plan.inputs[i] in alias.METADATA_WRITE
        and not _covers_same_bytes(wrapped[i], fake_args[i])
    ]


def _classify(
    facts: Any, fake_args: Sequence[Any], resized: dict[int, int], calls: Any, wrapped: Any
) -> Any:
    """The alias plan of the run's facts; then a refusal the run kept (eager's own
    refusals, which classifying raises, come first)."""
    _finish_facts(facts, fake_args, resized, wrapped)
    plan = alias.classify(facts)
    if calls.restrides.refusal is not None:
        raise calls.restrides.refusal
    for i in plan.mutated_inputs:
        if alias.storage.self_overlapping(fake_args[i]):
            raise UnsupportedError(
                f"input {i} is written in place and its elements overlap each other in "
                "memory (an as_strided view with overlapping strides): eager's result "
                "depends on the order it visits memory; not supported (write a copy)"
            )
    return plan


def _views_before_requires_grad(
    plan: Any,
    outs: Sequence[Any],
    wrapped: Sequence[Any],
    fake_args: Sequence[Any],
    changes: dict,
    grad_mode: bool,
) -> dict[int, int]:
    """Outputs viewing an input passed without grad that the function made require grad,
    taken before (``v = x[0]; x.requires_grad_(); return v, v.diagonal()``): eager's view
    has no ``grad_fn`` and its gradient stops at it, not at ``x`` (rebuilt as a view of
    the caller's ``x``, it reached ``x``, silently: soak 53779, 53055). Per such output:
    1, the view itself (no ``grad_fn``); 2, a view of it whose gradient ends there
    (``OutputAlias.before_requires_grad``)."""
    found: dict[int, int] = {}
    if not grad_mode or in_inference_mode():  # (nothing differentiates them)
        return found
    for k, verdict in enumerate(plan.outputs):
        if verdict != alias.OutputVerdict.ALIAS_OF_INPUT:
            continue
        i = plan.output_source[k]
        o = outs[k]
        if not (changes.get(i) and not fake_args[i].requires_grad and o.requires_grad):
            continue
        if not o._is_view() or k in plan.facts.output_detached:
            continue  # (``x.detach().requires_grad_()``: a leaf of its own, no view)
        grad_fn = alias.facts.grad_fn_of(o)
        if grad_fn is alias.facts.STALE_VIEW:
            continue
        if grad_fn is None:
            found[k] = 1
        elif not reaches(grad_fn, {id(wrapped[i])}):
            found[k] = 2
    return found


def _detached(fake_args: Sequence[Any]) -> list[Any]:
    """The inputs that require grad, detached (``functional.to_functional_detached``)."""
    return [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in fake_args]


def _nothing() -> Any:
    return contextlib.nullcontext()


def collect_metadata(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    *,
    keep_input_mutations: bool = False,
) -> TraceMetadata:
    """Run ``fn`` once on fakes, functionalized; record and classify mutations and output
    facts (``aotgrad.alias``). ``keep_input_mutations``: a forward-only graph writes them."""
    grad_mode = torch.is_grad_enabled()
    shape_env = fake_mode.shape_env
    # Data-dependent ops (nonzero, item) make unbacked symbols here; only the traced run's
    # belong in the graph, so this run's are not left pending.
    suppress_pending = shape_env.ignore_fresh_unbacked_symbols() if shape_env else _nothing()
    detached = _detached(fake_args)
    with tracing_modes(fake_mode), suppress_pending, trace_errors(fn):
        wrapped = [to_functional_detached(a, d) for a, d in zip(fake_args, detached)]
        before = alias.facts.snapshot(wrapped)
        calls, resizes, outs = _run(fn, wrapped, fake_args)
        refuse_custom_records_in_inference_mode(outs, wrapped, fake_args)
        outputs = _outputs_info(outs, wrapped, fake_args, calls.new_leaves)
        before = calls.counters.own(before, wrapped)  # (each input's own version delta)
        rg_changes, for_a_while = _requires_grad_changes(wrapped, fake_args, outs, calls, grad_mode)
        _check_new_leaf_inputs(outs, wrapped, rg_changes, calls, before)
        keep = keep_input_mutations
        facts = _alias_facts(wrapped, fake_args, outs, before, calls, grad_mode, keep)
        left = _left_then_written(wrapped, fake_args, outs, calls, facts)
        plan = _classify(facts, fake_args, resizes.last, calls, wrapped)
        cut = _views_before_requires_grad(plan, outs, wrapped, fake_args, rg_changes, grad_mode)
        inner = inner_leaves(outs, calls, [wrapped[i] for i in plan.mutated_inputs])
        bases = [outs[k]._base for k in plan.intermediate_bases]
        relaid = _relaid_inputs(plan, wrapped, fake_args)
        retained, fed, made_of = _gradient_routes(calls, outs, bases, wrapped, fake_args, plan)
        # in the caller's layout (see layout_anchors): the input's own fake has it
        new_values = [fake_args[i] if i in relaid else wrapped[i] for i in plan.mutated_inputs]
        fake_fwd = [from_functional(o) for o in [*outs, *bases, *new_values]]
        leaves = _inner_leaf_facts(outs, calls, inner, bases, wrapped)
    metadata = TraceMetadata(
        outputs,
        fake_fwd[: len(outs)],
        plan,
        fake_fwd,
        grad_mode,
        rg_changes,
        [i for i, w in enumerate(wrapped) if id(w) in calls.flag_off] + for_a_while,
        relaid,
        # (results of detach(), not the inputs')
        [k for k, o in enumerate(outs) if any(o is t for t in calls.detached)],
        inner,
        leaves,
        left,
        retained,
        views_before_requires_grad=cut,
        grad_mode_after=None if calls.grad_mode_after == grad_mode else calls.grad_mode_after,
        fed_outputs=fed,
        views_of_outputs=made_of,
        **_output_sources(outs, wrapped, fake_args, plan, calls),
    )
    with trace_errors(fn):  # (the hooks' verdicts: an EagerRefusal replays eagerly)
        return _with_hooks(metadata, calls, wrapped, outs, fake_args)


def _output_sources(
    outs: Sequence[Any], wrapped: Sequence[Any], fake_args: Sequence[Any], plan: Any, calls: Any
) -> dict[str, Any]:
    """Outputs whose source the runtime remakes as eager's: an input's ``.data``, a view
    of an input ``set_()`` to another's storage, or of one made before a write to another
    input of its storage."""
    return {
        "data_outputs": _data_outputs(outs, calls, plan),
        "views_of_set_inputs": _views_of_set_inputs(outs, wrapped, plan),
        "views_before_sibling_write": views_before_sibling_write(
            outs, wrapped, fake_args, plan, calls
        ),
    }


def _data_outputs(outs: Sequence[Any], calls: Any, plan: Any) -> dict[int, tuple[int, bool, int]]:
    """Outputs that are an input's ``.data`` or a view of one (not the same as an earlier
    output): per output, which ``.data`` (numbered), whether it is that tensor itself,
    and its version count (``TraceMetadata.data_outputs``)."""
    seen: set[int] = set()
    groups: dict[int, int] = {}
    found = {}
    for k, o in enumerate(outs):
        if id(o) in seen or plan.outputs[k] != alias.OutputVerdict.ALIAS_OF_INPUT:
            continue
        seen.add(id(o))
        data = o if id(o) in calls.data_reads else o._base
        if data is not None and id(data) in calls.data_reads:
            group = groups.setdefault(id(data), len(groups))
            found[k] = (group, data is o, o._version)
    return found


def _views_of_set_inputs(outs: Sequence[Any], wrapped: Sequence[Any], plan: Any) -> dict:
    """Outputs the graph returns as they are that view an input ``set_()`` to another
    one's storage (``TraceMetadata.views_of_set_inputs``): output → input."""
    inputs = {id(wrapped[i]): i for i in plan.facts.input_storage_set}
    return {
        k: inputs[id(o._base)]
        for k, o in enumerate(outs)
        if plan.outputs[k] == alias.OutputVerdict.NON_ALIAS
        and isinstance(o, torch.Tensor)
        and id(o._base) in inputs
        and not o.requires_grad
    }


def _alias_facts(
    wrapped: Sequence[Any],
    fake_args: Sequence[Any],
    outs: Sequence[Any],
    before: Any,
    calls: Any,
    grad_mode: bool,
    keep: bool,
) -> Any:
    """``alias.collect`` on what the run left (``keep``: input mutations stay in the graph)."""
    facts = alias.collect(
        wrapped,
        fake_args,
        outs,
        before,
        grad_mode=grad_mode,
        keep_in_graph=keep,
        input_aliases=calls.gradless.aliases,
        inference=in_inference_mode(),
    )
    _rebuilt_views(facts, outs, calls.earlier)
    return facts


def _rebuilt_views(facts: Any, outs: Sequence[Any], earlier: Any) -> None:
    """Outputs viewing an input through an ``as_strided`` (``ViewSpec.through``) that a
    later write or metadata change of their storage made eager rebuild: their node is one
    ``as_strided`` of the root's (every element it covers gets gradient), not the chain
    they were taken through (``o = x.diagonal().as_strided(...); x.t_()``)."""
    for j, spec in facts.output_view.items():
        o = outs[j]
        if spec.through and (earlier.written_since_made(o) or earlier.is_relaid(o)):
            facts.output_view[j] = dataclasses.replace(spec, through=())


def _run(fn: Callable[..., Any], wrapped: Sequence[Any], fake_args: Sequence[Any]) -> Any:
    """``fn`` on the functional stand-ins: what it called (``EagerCalls``), the storage
    resizes it made, its outputs."""
    chain = EffectChain()
    calls = EagerCalls.for_inputs(wrapped, fake_args, share_counters=True)
    with _StorageResizes(wrapped) as resizes, calls.restrides.refusing():
        outs = flat_call(fn, wrapped, calls=calls)
        calls.restrides.finish()
        calls.remade.check(None, (), None, outs)
    chain.finish()
    calls.generators.refuse_made_inside()
    return calls, resizes, outs


def _gradient_routes(
    calls: Any,
    outs: Sequence[Any],
    bases: Sequence[Any],
    wrapped: Sequence[Any],
    fake_args: Sequence[Any],
    plan: Any,
) -> tuple[tuple[list[int], list[int], dict], dict[int, tuple[int, ...]], dict[int, int]]:
    """``input_hooks.retained_grads``, with the written inputs that retain grad among
    the values the backward computes whole (``retained_written_inputs``); then the
    outputs others (or written inputs' new values) are computed from (``fed_outputs``), of
    those the runtime can link;
    then the views of inputs made of another output (``views_of_outputs``). Under the
    trace's modes (reading a stale view's node replays it)."""
    fresh = [v == alias.OutputVerdict.NON_ALIAS for v in plan.outputs]
    linkable = [f or v in LINKABLE for f, v in zip(fresh, plan.outputs)]
    written, made_of = plan.mutated_inputs, views_of_outputs(outs, plan)
    retained = retained_grads(calls.retained, outs, wrapped, written, fresh, linkable, made_of)
    start = len(bases) + len(outs)
    retained[2].update(retained_written_inputs(calls.retained, wrapped, fake_args, plan, start))
    traced = calls.input_hooks.traced_hooks
    movable = frozenset(  # (a rebuilt view's hooks are registered on it: ``hooks_of_outputs``)
        id(o)
        for o, f in zip(outs, linkable)
        if f
        and isinstance(o, torch.Tensor)
        and o._backward_hooks
        and len(on_node_returned(traced, o)) == len(o._backward_hooks)
    )
    written_values = [wrapped[i] for i in written]
    fed = fed_outputs(outs, bases, linkable, retained, movable, written_values)
    return retained, fed, made_of


def _early_hooks(
    hooks: list[tuple[int, Any]],
    untouched: set[int],
    facts: Any,
    recorded: list[int],
    kept: set,
    views: set[int],
) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
    """Hooks on an input whose metadata the function changes (``t_()``), registered
    before anything touched it, where the input is not also written with grad or is no
    view in the caller: eager's sits on the caller's node as it was, which every
    gradient to the input reaches (through the change's and the write's nodes too; a
    view's write hands its gradient to the base's node instead). Traced, it sat on the
    primal, whose gradient ``autograd.grad`` takes before its hooks: it never ran (blind
    probe p18, p55; with a write after the change too, blind
    ``clone__Haclamp_tmeta_mulw``). The runtime registers them on the caller's tensor
    before it replays the change. Returns (the others, those)."""
    return _untouched_hooks(
        hooks, untouched, set(facts.input_view) - (set(recorded) & views) - kept
    )


def _beside_written(fake_args: Sequence[Any], views: set[int], written: Sequence[int]) -> set[int]:
    """Inputs that are views in the caller, not written themselves, of a base another
    written input views: the write moves their shared version count, so autograd rebuilds
    their nodes (a piece of ``chunk`` raises on reading it). A hook the function put on
    one before is on its node as it was: the runtime registers it before the write-back
    (soak 252645: registered after it, under inference mode, it raised)."""
    bases = {id(fake_args[j]._base) for j in written if j in views}
    return {i for i in views if i not in written and id(fake_args[i]._base) in bases}


def _view_hooks(
    hooks: list[tuple[int, Any]], untouched: set[int], written_views: set[int], kept: set
) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
    """Hooks on an input that is a view in the caller and that the function writes with
    grad, registered before anything touched it: eager's sits on the view's node from
    before the call, which sees the gradient of the function's reads before the write
    only (the write's node hands the rest to the base's); traced, it saw all of it (blind
    ``t__Halin_sin``). The runtime registers them on the caller's view before the call,
    where the view writes' handling of the caller's hooks takes them in
    (``call_inputs.unhooked_views``). Returns (the others, those)."""
    return _untouched_hooks(hooks, untouched, written_views - kept)


def _untouched_hooks(
    hooks: list[tuple[int, Any]], untouched: set[int], inputs: set[int]
) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
    """Of ``hooks`` (``(input, hook)``), the ones registered before anything touched
    their input (``untouched``: by position), on one of ``inputs``, and not run after
    accumulation: (the others, those)."""
    taken = [
        (i, h)
        for n, (i, h) in enumerate(hooks)
        if n in untouched and i in inputs and not isinstance(h, PostAccumulate)
    ]
    return [h for h in hooks if h not in taken], taken


def _hooks_of_relaid_inputs_returned(
    plan: Any, traced: set[int], hooks: Sequence[tuple[int, Any]]
) -> list[tuple[int, Any]]:
    """``(output, hook)`` for an input returned itself whose metadata the function changed
    (``t_()``) and whose hook stays in the trace: the runtime replays the change on the
    caller's tensor, a node of its own that the output's gradient reaches outside the
    graph; eager's hook, registered after the change, sits on it. One output per input:
    an input returned twice is one object, whose hook eager registered once (121437)."""
    relaid = set(plan.facts.input_view) & traced
    first: dict[int, int] = {}
    for k, v in enumerate(plan.outputs):
        if v is alias.OutputVerdict.IS_INPUT and plan.facts.output_input[k] in relaid:
            first.setdefault(plan.facts.output_input[k], k)
    return [
        (k, h)
        for i, k in first.items()
        for j, h in hooks
        if j == i and not isinstance(h, PostAccumulate)
    ]


def _with_hooks(
    metadata: TraceMetadata, calls: Any, wrapped: Sequence[Any], outs: Any, fake_args: Sequence
) -> TraceMetadata:
    """The hooks the runtime registers (``aotgrad.input_hooks``): on the inputs the
    function does not write, and on the outputs it rebuilds as views; and the inputs
    whose autocast casts eager caches; the leaf views whose own flag it turned off."""
    plan = metadata.plan
    facts = plan.facts
    hooks, kept, untouched = calls.input_hooks.of_inputs(wrapped)
    # (a write autograd does not see leaves the input's node as it was: the runtime's hook
    # on the caller's tensor sees every gradient reaching it, as eager's)
    recorded = [
        i
        for i in plan.mutated_inputs
        if alias.facts.written_with_grad(facts.input_flags[i])
        and i not in facts.input_data_unrecorded
    ]
    views = {i for i, a in enumerate(fake_args) if isinstance(a, torch.Tensor) and a._is_view()}
    hooks, metadata.early_input_hooks = _early_hooks(hooks, untouched, facts, recorded, kept, views)
    beside = _beside_written(fake_args, views, plan.mutated_inputs)
    hooks, early = _untouched_hooks(hooks, untouched, beside - kept)
    metadata.early_input_hooks += early
    # (written with autograd recording; or under no_grad and not re-laid: the write moves
    # the view's version count, so autograd rebuilds its node on its next read, past the
    # one the hook sits on: soak 250879)
    seen = {i for i in set(recorded) & views if not alias.facts.writes_unrecorded(wrapped[i])}
    seen |= (set(plan.mutated_inputs) & views) - set(facts.input_view)
    hooks, metadata.hooks_before_call = _view_hooks(hooks, untouched, seen, kept)
    written = {*recorded, *facts.input_view}
    traced = {i for i, h in hooks if i in written and not isinstance(h, PostAccumulate)} | kept
    metadata.input_hooks = [
        (i, h) for i, h in hooks if isinstance(h, PostAccumulate) or i not in traced
    ]
    metadata.traced_hook_inputs = sorted(traced)
    metadata.cached_casts = cached_cast_inputs(calls, wrapped)
    metadata.node_unread_views = calls.stale_views.unread(wrapped)
    metadata.own_requires_grad = {
        i: calls.own_flags[id(w)] for i, w in enumerate(wrapped) if id(w) in calls.own_flags
    }
    rebuilt = [
        k
        for k, v in enumerate(plan.outputs)
        if v not in (alias.OutputVerdict.NON_ALIAS, alias.OutputVerdict.IS_INPUT)
        and k not in facts.output_custom
    ]
    traced_hooks = calls.input_hooks.traced_hooks
    fed = caller_fed_outputs(traced_hooks, outs, plan.outputs, metadata.fed_outputs)
    linked_views = linked_rebuilt_outputs(traced_hooks, outs, rebuilt, metadata.fed_outputs)
    metadata.caller_fed = sorted(
        {k for k, _ in fed} | {*hooked_leaf_outputs(traced_hooks, outs)} | {*linked_views}
    )
    metadata.output_hooks = hooks_of_outputs(traced_hooks, outs, rebuilt) + fed
    metadata.output_hooks += post_hooks_of_made_leaves(calls.input_hooks.made_leaf_post, outs)
    metadata.hooked_views = views_through_output_hooks(traced_hooks, outs, rebuilt)
    metadata.output_hooks += _hooks_of_relaid_inputs_returned(plan, traced - set(recorded), hooks)
    metadata.output_hooks += hooks_of_unused_pieces(calls.hook_calls, outs, rebuilt)
    metadata.metadata_steps = calls.metadata_steps.mixed()
    metadata.metadata_recorded = calls.metadata_steps.recorded_last()
    return metadata
