"""The one orchestrator: a flat function + its inputs → a compiled artefact.

Every entry point (``aot_function``, ``aot_module``, ``aot_module_simplified``
and the ``torch.compile`` backends through it) comes here, and only here is the
sequence of stages driven:

1. ``compile_for``: fake copies of the call's real inputs (retried as one
   synthetic base when inputs that overlap in memory are written);
2. ``compile_flat``: the caches (``cache.Slot``), else
3. ``build_program``: trace (``aotgrad.trace``) → node table, partition and
   split (``options.partition_fn``: ``aotgrad.partition``) → the runtime's
   layout; what the on-disk cache stores;
4. ``compile_program``: the compilers, wrapped in the runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

import torch
import torch.fx as fx

from . import alias, observe, trace
from .compile import (
    Compiler,
    compile_or_reload,
    fake_inputs_of,
    reporting_output_strides,
    saved_inputs_as_produced,
)
from .errors import UnsupportedError
from .frame_stack import with_frame_room
from .partition import regions
from .roles import is_tangent
from .runtime import (
    ForwardLayout,
    OutputAlias,
    make_inference_function,
    make_training_function,
)
from .vocab import IN_MUTATES_DATA


def default_partition_fn(*args: Any, **kwargs: Any) -> Any:
    """aotgrad's min-cut partitioner (imported lazily: it loads the Rust extension)."""
    from .partition import min_cut_rematerialization_partition

    return min_cut_rematerialization_partition(*args, **kwargs)


def needs_autograd(graph_inputs: Sequence[Any], inference_mode: bool = False) -> bool | None:
    """Whether a call needs the joint graph: True when grad mode is on and an input
    requires grad; False under inference mode (nothing records autograd there, whatever
    the function does); None otherwise: the function may make values that require grad
    itself (``enable_grad`` blocks, ``requires_grad_``), which the metadata pass tells."""
    if inference_mode or torch.is_inference_mode_enabled():
        return False
    if torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in graph_inputs
    ):
        return True
    return None


@dataclass
class AotOptions:
    """Everything that shapes one compilation; passed down explicitly, never read from
    globals. Built by keyword (all but the forward compiler are keyword-only)."""

    fw_compiler: Compiler
    _: KW_ONLY
    bw_compiler: Compiler | None = None
    partition_fn: Callable[..., tuple[fx.GraphModule, fx.GraphModule]] = default_partition_fn
    decompositions: dict[Any, Any] | None = None
    num_params_buffers: int = 0
    keep_inference_input_mutations: bool = False
    inference_compiler: Compiler | None = None
    dynamic: bool = False
    #: Compiled artefacts kept per function before a ``GuardError`` is raised.
    recompile_limit: int = 8
    #: Graph inputs that are parameters/buffers (free for the partitioner to save);
    #: None: the first ``num_params_buffers``.
    static_input_indices: list[int] | None = None

    @property
    def static_inputs(self) -> list[int]:
        if self.static_input_indices is not None:
            return self.static_input_indices
        return list(range(self.num_params_buffers))


@dataclass
class PartitionedProgram:
    """The traced and partitioned graphs of one specialisation, not yet compiled.

    Training: ``forward`` and ``backward`` from the partitioner (``joint`` kept for
    reports). Inference: ``forward`` is the whole forward graph, ``backward`` is None.
    """

    training: bool
    forward: fx.GraphModule
    backward: fx.GraphModule | None
    layout: ForwardLayout
    joint: fx.GraphModule | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: Per graph ("forward", "backward"), what an earlier process's compiler recorded to
    #: reload its code (``compile.compile_or_reload``): read back with the program.
    compiled: dict[str, Any] = field(default_factory=dict)
    #: Read back with a record for every graph, the nodes' fake values are restored only
    #: when something needs them (a compiler, a report, a graph log): ``ensure_values``.
    pending_values: Callable[[], None] | None = None

    def ensure_values(self) -> None:
        restore, self.pending_values = self.pending_values, None
        if restore is not None:
            restore()


@dataclass
class CompiledArtifact:
    """One compiled specialisation of a function, and what it is made of (for reports)."""

    run: Callable[..., tuple[Any, ...]]
    training: bool
    forward: fx.GraphModule
    backward: fx.GraphModule | None
    joint: fx.GraphModule | None
    layout: ForwardLayout
    timings: dict[str, float] = field(default_factory=dict)
    #: What reloads each graph's code in another process (``PartitionedProgram.compiled``),
    #: and whether it is new (compiled here, not reloaded): then the cache keeps it.
    compiled: dict[str, Any] = field(default_factory=dict)
    compiled_fresh: bool = False
    #: Gives the graphs' nodes their fake values (``PartitionedProgram.ensure_values``):
    #: call it before reading ``meta["val"]`` of an artefact a warm start reloaded.
    ensure_values: Callable[[], None] = field(default=lambda: None)


def _saved_split(fw: fx.GraphModule, num_fwd_outputs: int) -> tuple[int, int]:
    """(saved tensors, saved SymInts) from the forward graph's outputs."""
    outs = fw.graph.output_node().args[0]
    saved = list(outs)[num_fwd_outputs:]  # type: ignore[arg-type]
    n_sym = sum(
        1
        for s in saved
        if isinstance(s, fx.Node) and not isinstance(s.meta.get("val"), torch.Tensor)
    )
    return len(saved) - n_sym, n_sym


def _gc_paused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``fn`` with the cyclic GC paused: tracing and compiling allocate a burst of
    long-lived objects (fx nodes, fake tensors), and the full collections they trigger
    walk all of them again and again."""
    import functools

    from .partition.api import gc_paused

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)

    return wrapper


def _layout(
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
    specs = [a.view for a in aliases if a.view is not None] + list(metadata_mutations.values())
    bindings = _view_bindings(specs, fake_args)
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
        metadata_with_grad=_metadata_with_grad(facts, metadata_mutations),
        version_deltas=_version_deltas(facts),
        output_aliases=aliases,
        bindings=bindings,
        new_leaves=[k for k, out in enumerate(metadata.outputs) if out.new_leaf],
        fresh_outputs=_fresh_outputs(metadata),
        **_custom_and_stale_views(metadata),
        detached_custom_views=facts.written_detached,
        same_as=facts.output_same_as,
        inference_outputs=sorted(facts.output_inference),
        output_versions=facts.output_version,
        requires_grad_changes=metadata.requires_grad_changes,
        left_then_written=metadata.left_then_written,
        requires_grad_flag_off=metadata.requires_grad_flag_off,
        detached_outputs=metadata.detached_outputs,
        inner_leaves=metadata.inner_leaves,
        enable_grad=not metadata.grad_mode,
        storage_resizes=facts.input_storage_resize,
        storage_sets=sorted(facts.input_storage_set),
        relaid_inputs=metadata.relaid_inputs,
        retained_grads=metadata.retained_grads,
        input_hooks=metadata.input_hooks,
        output_hooks=metadata.output_hooks,
    )


def _metadata_with_grad(facts: alias.AliasFacts, metadata_mutations: dict) -> list[int]:
    """Inputs whose new metadata autograd records (they require grad, and the change was
    not hidden from autograd)."""
    visible = alias.facts.IN_REQUIRES_GRAD
    hidden = alias.facts.IN_MUTATIONS_HIDDEN
    return [
        i
        for i in metadata_mutations
        if facts.input_flags[i] & visible and not facts.input_flags[i] & hidden
    ]


def _custom_and_stale_views(metadata: trace.TraceMetadata) -> dict[str, Any]:
    """The ``ForwardLayout`` fields of outputs eager returns as custom-Function views
    (``custom_views``) or as stale views (``stale_views``: of them, the ones made under
    no_grad, and the stale views of an intermediate the function returns too:
    ``with no_grad: v = t[:2]``; ``t.mul_(2)``; ``return v, t``)."""
    facts = metadata.plan.facts
    stale = [k for k, out in enumerate(metadata.outputs) if out.stale_custom_view]
    return {
        "stale_views": {k: facts.custom_view_of_input.get(k) for k in stale},
        "stale_no_grad": frozenset(k for k in stale if k in facts.output_no_grad_view),
        "stale_output_views": {
            k: src for k, src in facts.stale_view_of_output.items() if k in stale
        },
        "custom_views": {k: src for k, src in facts.custom_view_of_input.items() if k not in stale},
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


def _output_aliases(metadata: trace.TraceMetadata, fake_args: Sequence[Any]) -> list[OutputAlias]:
    """How the runtime rebuilds each output that aliases an input or an intermediate."""
    plan = metadata.plan
    facts = plan.facts
    _refuse_views_without_history(metadata)
    return [
        OutputAlias(
            k,
            v,
            plan.output_source[k],
            facts.output_view.get(k),
            out.requires_grad,
            facts.output_creation_meta.get(k),
            facts.output_detached.get(k, 0),
            base_output=facts.output_detached_base.get(k, facts.output_leaf_base.get(k, -1)),
            base_leaf=k in facts.output_base_leaf,
            tracked=k in facts.output_tracked_view,
            untracked=_untracked_view(k, facts),
            with_grad=not metadata.grad_mode and k in facts.output_has_grad_fn,
            of_leaf_view=_of_leaf_view(k, v, out, metadata, fake_args),
            grad_through_base=(
                v == alias.OutputVerdict.ALIAS_OF_INPUT
                and metadata.grad_mode
                and not out.requires_grad
                and not getattr(fake_args[plan.output_source[k]], "requires_grad", True)
                and k not in facts.output_creation_meta
                and k not in facts.output_detached
            ),
        )
        for k, (v, out) in enumerate(zip(plan.outputs, metadata.outputs))
        if v != alias.OutputVerdict.NON_ALIAS
    ]


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
    inference mode, or by a custom Function run under no_grad (its creation meta says
    "in a custom Function", yet it has no ``grad_fn``, or only a view's of it)."""
    meta = facts.output_creation_meta.get(k)
    if meta in (_CM.NO_GRAD_MODE, _CM.INFERENCE_MODE):
        return True
    return meta == _CM.IN_CUSTOM_FUNCTION and (
        k in facts.output_tracked_view or k not in facts.output_has_grad_fn
    )


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
    """User outputs the graph computes afresh (no alias, no custom view, not the same
    object as another output, not a reinterpreting view), and the intermediate bases
    (never views in eager; the graph may return one: a transpose of what it wrote)."""
    plan = metadata.plan
    facts = plan.facts
    return [
        k
        for k, (v, out) in enumerate(zip(plan.outputs, metadata.outputs))
        if out.is_tensor
        and v == alias.OutputVerdict.NON_ALIAS
        and k not in facts.output_custom
        and k not in facts.output_same_as
        # a reinterpreting view (another dtype, a conj bit) is returned as computed
        and not facts.output_flags[k]
        & (alias.facts.OUT_ALIASES_INPUT | alias.facts.OUT_VIEW_OF_INTERMEDIATE)
    ] + [len(metadata.outputs) + j for j in range(metadata.num_intermediate_bases)]


def _versions_before_saving(fw: fx.GraphModule, layout: ForwardLayout) -> None:
    """A user output the backward also reads is saved by the compiled forward: it gets
    eager's version count before it is saved (``layout.versions_before_saving``), so that
    autograd's check at backward holds and the caller sees eager's count."""
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    saved = set(outs[layout.num_fwd_outputs :])
    n_user = layout.num_user_outputs
    value = {k: outs[k] for k in layout.output_versions}
    verdict = alias.OutputVerdict
    for a in layout.output_aliases:  # a rebuilt view shares its base's counter
        if a.verdict == verdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT:
            value[a.index] = outs[a.source]
        elif a.verdict in (
            verdict.ALIAS_OF_INTERMEDIATE,
            verdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
        ):
            value[a.index] = outs[n_user + a.source]
    position = {node: j for j, node in enumerate(outs[: layout.num_fwd_outputs])}
    layout.versions_before_saving = {
        position[value[k]]: v
        for k, v in layout.output_versions.items()
        if _views_saved(value[k], saved) and value[k] in position
    }


def _views_saved(node: Any, saved: set) -> bool:
    """Whether ``node`` is saved, or a view (of a view...) of a saved value: one version
    counter (a write through ``x.t()`` made ``t(copy)`` the base an output views while
    ``copy`` is what min-cut saves)."""
    if node in saved:
        return True
    for _ in range(64):
        target = getattr(node, "target", None)
        if not (
            getattr(target, "is_view", False) and node.args and isinstance(node.args[0], fx.Node)
        ):
            return False
        node = node.args[0]
        if node.op == "placeholder":  # an input's counter is the caller's: not set here
            return False
        if node in saved:
            return True
    return False


def _merged_outputs(fw: fx.GraphModule, layout: ForwardLayout) -> list[int]:
    """User outputs the graph returns as the same value as another one although eager
    returns distinct objects (``t`` and ``t.detach()``: a detach is the identity inside
    the graph): the runtime makes each a detached alias of its own. Of one value, the
    output another rebuilt output views stays the graph's (eager's ``t.unsqueeze(0)`` has
    ``t`` for base, not ``t.detach()``); otherwise the first that is no ``detach()``
    result does. Beside an intermediate base of the same value, the user outputs that are
    ``detach()`` results are detached (``t.detach(), t.chunk(2)[1]``: the chunk's base
    is not the detached output); the others are ``t`` itself (``t, t.detach()
    .requires_grad_()[:, 1]``: the base is the detached one, a leaf of its own)."""
    n_user = layout.num_user_outputs
    fwd = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    outs = fwd[:n_user]
    bases = set(fwd[n_user : n_user + layout.num_intermediate_bases])
    # rebuilt by the runtime (an input, a view of one, ...): not the graph's value
    rebuilt = {a.index for a in layout.output_aliases}
    viewed = {
        a.source
        for a in layout.output_aliases
        if a.verdict == alias.OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT
    }
    groups: dict[Any, list[int]] = {}
    for j, node in enumerate(outs):
        if isinstance(node, fx.Node) and j not in layout.same_as and j not in rebuilt:
            groups.setdefault(node, []).append(j)
    merged = []
    for node, members in groups.items():
        if node in bases:  # the base is eager's t: its detach() results are detached
            merged += [j for j in members if j in layout.detached_outputs]
            continue
        plain = [j for j in members if j not in layout.detached_outputs] or members
        owner = next((j for j in members if j in viewed), plain[0])
        merged += [j for j in members if j != owner]
    return sorted(merged)


def _grad_tangents(bw: fx.GraphModule, num_inputs: int) -> list[tuple[int, ...]]:
    """Per input gradient of the backward graph, the tangents (by position) it is
    computed from. An input whose tangents all went unused by the caller's backward gets
    no gradient (None, as eager leaves it), not zeros."""
    placeholders = bw.graph.find_nodes(op="placeholder")
    tangent_of = {p: k for k, p in enumerate(q for q in placeholders if is_tangent(q))}
    deps: dict[fx.Node, frozenset[int]] = {}
    for node in bw.graph.nodes:
        if node.op == "placeholder":
            deps[node] = frozenset({tangent_of[node]}) if node in tangent_of else frozenset()
        elif node.op != "output":
            found: set[int] = set()
            for a in node.all_input_nodes:
                found |= deps[a]
            deps[node] = frozenset(found)
    outs = list(bw.graph.output_node().args[0])[:num_inputs]  # type: ignore[arg-type]
    return [tuple(sorted(deps[o])) if isinstance(o, fx.Node) else () for o in outs]


@with_frame_room
@_gc_paused
def build_program(
    flat_fn: Callable[..., list[Any]],
    fake_args: Sequence[Any],
    fake_mode: Any,
    options: AotOptions,
    *,
    training: bool | None,
) -> PartitionedProgram:
    """Trace ``flat_fn`` (flat graph inputs → flat outputs) and partition its joint graph.
    ``training``: whether to build the joint graph; None: when the function itself makes
    values that require grad (``enable_grad`` under ``no_grad``, ``requires_grad_``)."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    keep = options.keep_inference_input_mutations and not training
    metadata = trace.collect_metadata(flat_fn, fake_args, fake_mode, keep_input_mutations=keep)
    if training is None:
        training = metadata.needs_autograd
        if training and keep:
            metadata = trace.collect_metadata(flat_fn, fake_args, fake_mode)
    if not training:
        g = trace.trace_inference(flat_fn, fake_args, fake_mode, metadata, options.decompositions)
        timings["trace"] = time.perf_counter() - t0
        layout = _layout(metadata, fake_args, [])
        observe.traced("inference", g.gm, timings)
        return PartitionedProgram(False, g.gm, None, layout, None, timings)

    joint = trace.trace_joint(
        flat_fn, fake_args, fake_mode, metadata, options.decompositions, options.static_inputs
    )
    timings["trace"] = time.perf_counter() - t0
    observe.traced("joint", joint.gm, timings)
    t1 = time.perf_counter()
    regions.stitch(joint.gm, options.partition_fn)
    fw_gm, bw_gm = options.partition_fn(
        joint.gm, joint.joint_inputs, num_fwd_outputs=joint.num_fwd_outputs
    )
    timings["partition"] = time.perf_counter() - t1
    n_tensors, n_sym = _saved_split(fw_gm, joint.num_fwd_outputs)
    layout = _layout(
        metadata, fake_args, metadata.tangent_outputs, n_tensors, n_sym, joint.num_tokens
    )
    layout.backward_mutations = joint.backward_mutations
    layout.backward_error = joint.backward_error
    layout.backward_error_tangents = joint.backward_error_tangents
    layout.watched_inputs = joint.watched_inputs
    layout.watched_bases = {layout.num_user_outputs + s: ts for s, ts in joint.saved_bases.items()}
    rebuilt = {a.index for a in layout.output_aliases}
    layout.watched_outputs = {
        k: ts
        for k, ts in joint.saved_outputs.items()
        if k not in rebuilt
        and k not in layout.same_as
        and k not in layout.stale_views
        and k not in layout.custom_views
        and k not in layout.new_leaves
    }
    layout.grad_tangents = _grad_tangents(bw_gm, len(fake_args) + len(layout.inner_leaves))
    program = PartitionedProgram(True, fw_gm, bw_gm, layout, joint.gm, timings)
    observe.partitioned(program)
    return program


@with_frame_room
@_gc_paused
def compile_program(program: PartitionedProgram, options: AotOptions) -> CompiledArtifact:
    """Compile a partitioned program's graphs and wrap them in the runtime."""
    timings = dict(program.timings)
    t0 = time.perf_counter()
    layout = program.layout
    records: dict[str, Any] = {}
    saved = program.compiled.get

    def valued(gm: fx.GraphModule) -> Callable[[], list[Any]]:
        def inputs() -> list[Any]:
            program.ensure_values()
            return fake_inputs_of(gm)

        return inputs

    layout.merged_outputs = _merged_outputs(program.forward, layout)
    if program.training:
        _versions_before_saving(program.forward, layout)
    if not program.training:
        layout.detach_inputs = any(
            n.target is torch.ops.aten.as_strided_scatter.default
            for n in program.forward.graph.nodes
        )
        compiler = options.inference_compiler or options.fw_compiler
        fw, records["forward"] = compile_or_reload(
            compiler, program.forward, saved("forward"), valued(program.forward)
        )
        run = make_inference_function(fw, layout)
    else:
        assert program.backward is not None
        bw_gm = program.backward
        with reporting_output_strides(program.forward) as fw_strides:
            fw, records["forward"] = compile_or_reload(
                options.fw_compiler, program.forward, saved("forward"), valued(program.forward)
            )

        def bw_inputs() -> list[Any]:
            program.ensure_values()
            return saved_inputs_as_produced(bw_gm, fw_strides, layout.num_fwd_outputs)

        bw, records["backward"] = compile_or_reload(
            options.bw_compiler or options.fw_compiler, bw_gm, saved("backward"), bw_inputs
        )
        run = make_training_function(fw, bw, layout)
    timings["compile"] = time.perf_counter() - t0
    artifact = CompiledArtifact(
        run, program.training, program.forward, program.backward, program.joint, layout, timings
    )
    artifact.compiled = {k: v for k, v in records.items() if v is not None}
    artifact.ensure_values = program.ensure_values
    artifact.compiled_fresh = artifact.compiled != program.compiled
    observe.compiled(artifact)
    return artifact


class ProgramCache(Protocol):
    """Where ``compile_flat`` looks before building (``cache.Slot``: one key in the
    in-process and on-disk caches)."""

    def artifact(self) -> CompiledArtifact | None: ...

    def put(self, artifact: CompiledArtifact) -> None: ...

    def load(self, fake_args: Sequence[Any], fake_mode: Any) -> PartitionedProgram | None: ...

    def store(self, program: PartitionedProgram) -> None: ...


def compile_flat(
    flat_fn: Callable[..., list[Any]],
    fake_args: Sequence[Any],
    fake_mode: Any,
    options: AotOptions,
    *,
    training: bool | None,
    cache: ProgramCache | None = None,
) -> CompiledArtifact:
    """Trace, partition and compile ``flat_fn`` (flat graph inputs → flat outputs), or
    take the artefact or the program from ``cache``."""
    artifact = cache.artifact() if cache is not None else None
    if artifact is not None:
        return artifact
    program = cache.load(fake_args, fake_mode) if cache is not None else None
    if program is None:
        program = build_program(flat_fn, fake_args, fake_mode, options, training=training)
        if cache is not None:
            cache.store(program)
    else:
        program.timings["cache"] = 1.0
        observe.loaded(program)
    artifact = compile_program(program, options)
    if cache is not None:
        cache.put(artifact)
    return artifact


@dataclass
class Specialization:
    """What ``compile_for`` made for one call's inputs: the artefact, the fake inputs it
    was traced on (symbolic-shape guards read them), and the synthetic base that inputs
    overlapping in memory are passed as (None: none)."""

    artifact: CompiledArtifact
    fake_mode: Any
    fake_args: list[Any]
    synthetic_base: alias.SyntheticBase | None = None


def compile_for(
    flat_fn: Callable[..., list[Any]],
    tensors: Sequence[Any],
    options: AotOptions,
    *,
    training: bool | None,
) -> Specialization:
    """Compile ``flat_fn`` for the real ``tensors`` of a call: fake copies of them
    (symbolic sizes under ``options.dynamic``), then ``compile_flat``. When the function
    writes inputs that overlap in memory (``alias.NeedsSyntheticBase``) it is compiled
    again over one synthetic base, the members' layout baked into the graph."""
    fake_mode = trace.make_fake_mode(options.dynamic)
    fake_args = trace.fakify(fake_mode, tensors, dynamic=options.dynamic)
    try:
        artifact = compile_flat(flat_fn, fake_args, fake_mode, options, training=training)
        return Specialization(artifact, fake_mode, fake_args)
    except alias.NeedsSyntheticBase as need:
        base = alias.SyntheticBase.of(tensors, need.inputs, need.groups)
    return _compile_over(base, flat_fn, tensors, options, training=training)


def _compile_over(
    base: alias.SyntheticBase,
    flat_fn: Callable[..., list[Any]],
    tensors: Sequence[Any],
    options: AotOptions,
    *,
    training: bool | None,
) -> Specialization:
    """``compile_flat`` over the synthetic ``base`` of ``tensors`` (static shapes)."""
    fake_mode = trace.make_fake_mode(False)
    fake_args = trace.fakify(fake_mode, base.prepare(tensors), dynamic=False)
    artifact = compile_flat(base.wrap(flat_fn), fake_args, fake_mode, options, training=training)
    return Specialization(artifact, fake_mode, fake_args, base)
