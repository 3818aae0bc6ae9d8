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

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

import torch
import torch.fx as fx

from . import alias, observe, shape_guards, trace
from .compile import (
    Compiler,
    compile_or_reload,
    fake_inputs_of,
    reporting_output_strides,
    saved_inputs_as_produced,
)
from .frame_stack import with_frame_room
from .fx_views import view_chain
from .layout_of_trace import layout_of_trace
from .partition import regions
from .roles import is_tangent
from .runtime import (
    ForwardLayout,
    make_inference_function,
    make_training_function,
)
from .runtime.double_backward import replay_for
from .runtime.epilogue import leaving_grad_mode
from .runtime.fed_outputs_link import (
    backward_for_links,
    backward_without_totals,
    totals_reading_saved,
)
from .runtime.output_hooks import fed_on
from .runtime.unreached_tangents import (
    PrunedBackwards,
)
from .vocab import SAVED_AS_INPUT_KEY


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
    #: Under ``dynamic``, the dimensions kept static, per tensor input (its index among
    #: the tensor inputs): a nested tensor's leaves keep all but their ragged dimension.
    static_dims: dict[int, tuple[int, ...]] | None = None
    #: Why a ``create_graph`` backward may not replay the function (``double_backward``);
    #: None: it may.
    no_replay: str | None = None

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
    #: The symbolic-shape guards its trace relies on (``shape_guards``), or None.
    guards: str | None = None

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
    #: The symbolic-shape guards it relies on (``shape_guards``), or None.
    guards: str | None = None


def _backward_facts(layout: ForwardLayout, joint: trace.JointGraph) -> None:
    """What the joint trace learned of the backward, for the runtime: inputs it writes,
    eager's error and which tangents lead to it, saved inputs and bases eager checks, and
    the retained outputs whose whole gradient it returns."""
    layout.backward_mutations = joint.backward_mutations
    layout.post_write_inputs = joint.post_write_inputs
    layout.post_write_members = joint.post_write_members
    layout.post_write_passed = joint.post_write_passed
    layout.post_write_hooks = joint.post_write_hooks
    layout.post_write_tangents = joint.post_write_tangents
    layout.post_write_values = joint.post_write_values
    layout.post_write_readers = joint.post_write_readers
    layout.unhooked_view_writes = joint.unhooked_view_writes
    layout.hooked_view_reads = joint.hooked_view_reads
    layout.views_past_write = tuple(sorted({*layout.views_past_write, *joint.views_past_write}))
    layout.views_after_relaid = joint.views_after_relaid
    if joint.retained_tangents:
        layout.retained_grads = (*layout.retained_grads[:2], dict(joint.retained_tangents))
    layout.backward_error = joint.backward_error
    layout.backward_error_tangents = joint.backward_error_tangents
    layout.watched_inputs = joint.watched_inputs
    layout.watched_leads = joint.watched_leads
    layout.saving_links = joint.saving_links
    layout.inputs_saved_whole = joint.saved_whole
    layout.watched_bases = {layout.num_user_outputs + s: ts for s, ts in joint.saved_bases.items()}


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


def _saved_of_outputs(fw: fx.GraphModule, layout: ForwardLayout) -> tuple[int, ...]:
    """The saved tensors (by position) that are forward outputs or views of one, other
    than the outputs already kept loose (``watched_outputs``): the caller may write them
    after the call, and the backward checks them itself (``runtime.saved_checks``)."""
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    n_fwd = layout.num_fwd_outputs
    owned = {o: k for k, o in enumerate(outs[:n_fwd]) if isinstance(o, fx.Node)}
    found = []
    for j, node in enumerate(outs[n_fwd : n_fwd + layout.num_saved_tensors]):
        if any(getattr(n, "op", None) == "placeholder" for n in view_chain(node)):
            continue  # (an input returned: saved as the caller's tensor, whose data may change)
        k = owned.get(node)
        if k is not None:
            if k not in layout.watched_outputs:
                found.append(j)
            continue
        if any(n in owned for n in view_chain(node)):
            found.append(j)
    return tuple(found)


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


def _saved_read_by_storage(bw: fx.GraphModule | None, layout: ForwardLayout) -> list[int]:
    """The saved tensors the backward reads through ``as_strided`` (storage offsets and
    strides of the input the forward had: a restrided input's graph reads it so)."""
    if bw is None:
        return []
    placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    return [
        j
        for j, p in enumerate(placeholders[: layout.num_saved_tensors])
        if any(u.target is torch.ops.aten.as_strided.default for u in p.users)
    ]


def _views_saved(node: Any, saved: set) -> bool:
    """Whether ``node`` is saved, or a view (of a view...) of a saved value: one version
    counter (a write through ``x.t()`` made ``t(copy)`` the base an output views while
    ``copy`` is what min-cut saves)."""
    for seen in view_chain(node):
        if seen is not node and seen.op == "placeholder":
            return False  # an input's counter is the caller's: not set here
        if seen in saved:
            return True
    return False


def _saved_new_values(fw: fx.GraphModule, layout: ForwardLayout) -> dict[int, int]:
    """Saved tensors that are (views of) a written input's new value the trace flagged
    ``SAVED_AS_INPUT_KEY`` (eager's backward reads the input itself, and the epilogue
    only copies the value in): per saved tensor, its entry in ``layout.mutated_inputs``.
    Eager's saved tensor is the input's storage, so a write autograd does not count
    (``x.data.mul_(2)``, by the caller or by the next call) reaches its backward: the
    runtime saves these as views of the input (``runtime.saved_tensors.
    aliases_of_written_inputs``)."""
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    start = layout.num_user_outputs + layout.num_intermediate_bases
    entry: dict[Any, int] = {}
    for m in range(len(layout.mutated_inputs)):
        node = outs[start + m]
        if isinstance(node, fx.Node) and node.meta.get(SAVED_AS_INPUT_KEY):
            entry.setdefault(node, m)
    if not entry:
        return {}
    first = layout.num_fwd_outputs
    found = {}
    for j, node in enumerate(outs[first : first + layout.num_saved_tensors]):
        if not isinstance(node, fx.Node):
            continue
        m = next((entry[b] for b in view_chain(node) if b in entry), None)
        if m is not None:
            found[j] = m
    return found


def _saved_views_of_inputs(fw: fx.GraphModule, layout: ForwardLayout) -> dict[int, int]:
    """Saved tensors that are views of an input eager saves as itself (``layout.
    inputs_saved_whole``: ``mm``'s backward reads ``x``, the graph saved ``t(x)``), one
    the function neither writes nor relays out: per saved tensor, the input. Eager's
    backward reads the caller's tensor, so data the caller gives it after the call
    (``x.data = y``) reaches it: the runtime remakes these of it then
    (``runtime.saved_tensors.views_of_new_data``)."""
    changed = {
        *layout.mutated_inputs,
        *layout.metadata_mutations,
        *layout.version_deltas,
        *layout.storage_resizes,
    }
    whole = set(layout.inputs_saved_whole) - changed
    if not whole:
        return {}
    placeholders = {n: i for i, n in enumerate(fw.graph.find_nodes(op="placeholder"))}
    outs = list(fw.graph.output_node().args[0])  # type: ignore[arg-type]
    first = layout.num_fwd_outputs
    found = {}
    for j, node in enumerate(outs[first : first + layout.num_saved_tensors]):
        if isinstance(node, fx.Node) and node.op != "placeholder":
            *_, root = view_chain(node)
            if placeholders.get(root) in whole:
                found[j] = placeholders[root]
    return found


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


def _fake_mode_found(fake_mode: Any) -> Any:
    """A tracing context holding the trace's fake mode, where none is active (outside
    Dynamo): torch's ``default_partition`` looks it up to make the RNG state a recomputed
    random op (in a checkpoint) is replayed from (``functionalize_rng_ops``)."""
    from torch._guards import TracingContext, tracing

    found = TracingContext.try_get()
    if found is not None and found.fake_mode is not None:
        return contextlib.nullcontext()
    return tracing(TracingContext(fake_mode))


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
        layout = layout_of_trace(metadata, fake_args, [])
        observe.traced("inference", g.gm, timings)
        return PartitionedProgram(False, g.gm, None, layout, None, timings)

    joint = trace.trace_joint(
        flat_fn, fake_args, fake_mode, metadata, options.decompositions, options.static_inputs
    )
    timings["trace"] = time.perf_counter() - t0
    observe.traced("joint", joint.gm, timings)
    t1 = time.perf_counter()
    regions.stitch(joint.gm, options.partition_fn)
    with _fake_mode_found(fake_mode):
        fw_gm, bw_gm = options.partition_fn(
            joint.gm, joint.joint_inputs, num_fwd_outputs=joint.num_fwd_outputs
        )
    timings["partition"] = time.perf_counter() - t1
    n_tensors, n_sym = _saved_split(fw_gm, joint.num_fwd_outputs)
    layout = layout_of_trace(
        metadata, fake_args, metadata.tangent_outputs, n_tensors, n_sym, joint.num_tokens
    )
    _backward_facts(layout, joint)
    rebuilt = {a.index for a in layout.output_aliases}
    watched = {
        k: ts
        for k, ts in joint.saved_outputs.items()
        if k not in layout.same_as
        and k not in layout.stale_views
        and k not in layout.custom_views
        and k not in layout.new_leaves
    }
    layout.watched_outputs = {k: ts for k, ts in watched.items() if k not in rebuilt}
    layout.watched_aliases = {k: ts for k, ts in watched.items() if k in rebuilt}
    layout.saved_of_outputs = _saved_of_outputs(fw_gm, layout)
    _note_gradients(bw_gm, layout, len(fake_args))
    program = PartitionedProgram(True, fw_gm, bw_gm, layout, joint.gm, timings)
    observe.partitioned(program)
    return program


def _note_gradients(bw: fx.GraphModule, layout: ForwardLayout, num_inputs: int) -> None:
    """Per input gradient, the tangents it comes from (``layout.grad_tangents``), and the
    inputs the function does not write whose gradient the backward graph never computes
    (``layout.gradless_inputs``)."""
    layout.grad_tangents = _grad_tangents(bw, num_inputs + len(layout.inner_leaves))
    outs = list(bw.graph.output_node().args[0])[:num_inputs]  # type: ignore[arg-type]
    written = {*layout.mutated_inputs, *layout.metadata_mutations, *layout.version_deltas}
    layout.gradless_inputs = [i for i, o in enumerate(outs) if o is None and i not in written]


_NO_FUNCTION = "is not supported for a program compiled without the function it came from"


@with_frame_room
@_gc_paused
def compile_program(
    program: PartitionedProgram, options: AotOptions, flat_fn: Callable[..., Any] | None = None
) -> CompiledArtifact:
    """Compile a partitioned program's graphs and wrap them in the runtime (``flat_fn``,
    what they were traced from, replays a call under a ``create_graph`` backward)."""
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
    tangents = set(layout.tangent_outputs) if program.training else None
    layout.outputs_fed_on = fed_on(program.forward, layout.num_fwd_outputs, tangents)
    if program.training:
        _versions_before_saving(program.forward, layout)
        layout.saved_read_by_storage = _saved_read_by_storage(program.backward, layout)
        layout.saved_new_values = _saved_new_values(program.forward, layout)
        layout.saved_input_views = _saved_views_of_inputs(program.forward, layout)
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
        replay = replay_for(
            options.no_replay or flat_fn or _NO_FUNCTION,
            layout,
            (program.forward, program.backward),
            options.static_inputs,
        )
        run = _compile_training(program, options, records, valued(program.forward), replay)
    run = leaving_grad_mode(run, layout)
    timings["compile"] = time.perf_counter() - t0
    artifact = CompiledArtifact(
        run, program.training, program.forward, program.backward, program.joint, layout, timings
    )
    artifact.compiled = {k: v for k, v in records.items() if v is not None}
    artifact.ensure_values = program.ensure_values
    artifact.compiled_fresh = artifact.compiled != program.compiled
    observe.compiled(artifact)
    return artifact


def _compile_training(
    program: PartitionedProgram,
    options: AotOptions,
    records: dict[str, Any],
    fw_inputs: Callable[[], list[Any]],
    replay: Any,
) -> Callable[..., Any]:
    """The forward and backward compiled (or reloaded: ``records``), in the training
    runtime, with the backwards without some tangents built on first use."""
    assert program.backward is not None
    layout, bw_gm, saved = program.layout, program.backward, program.compiled.get
    with reporting_output_strides(program.forward) as fw_strides:
        fw, records["forward"] = compile_or_reload(
            options.fw_compiler, program.forward, saved("forward"), fw_inputs
        )

    def bw_inputs() -> list[Any]:
        program.ensure_values()
        return saved_inputs_as_produced(bw_gm, fw_strides, layout.num_fwd_outputs)

    bw_compiler = options.bw_compiler or options.fw_compiler
    # (the fed outputs' totals only for a pass that hands them on: a backward of their own)
    main_gm = backward_without_totals(bw_gm, layout)
    layout.fed_reading_saved = totals_reading_saved(bw_gm, layout)
    bw, records["backward"] = compile_or_reload(bw_compiler, main_gm, saved("backward"), bw_inputs)
    pruned = PrunedBackwards(
        main_gm,
        len(layout.tangent_outputs),
        lambda gm: compile_or_reload(bw_compiler, gm, None, bw_inputs)[0],
        backward_for_links(bw_gm, layout),
    )
    return make_training_function(fw, bw, layout, pruned, replay)


class ProgramCache(Protocol):
    """Where ``compile_flat`` looks before building (``cache.Slot``: one key in the
    in-process and on-disk caches)."""

    def artifact(self) -> CompiledArtifact | None: ...

    def put(self, artifact: CompiledArtifact) -> None: ...

    def load(self, fake_args: Sequence[Any], fake_mode: Any) -> PartitionedProgram | None: ...

    def store(self, program: PartitionedProgram) -> None: ...


@trace.callers_settings_set_aside()
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
    take the artefact or the program from ``cache``; the caller's saved-tensor hooks,
    anomaly mode and dispatch modes set aside (``trace.callers_settings``)."""
    artifact = cache.artifact() if cache is not None else None
    if artifact is not None and shape_guards.usable(artifact.guards, fake_mode, fake_args):
        return artifact
    program = cache.load(fake_args, fake_mode) if cache is not None else None
    if program is not None and not shape_guards.usable(program.guards, fake_mode, fake_args):
        program = None  # (specialised for other sizes: traced again, and stored instead)
    if program is None:
        program = build_program(flat_fn, fake_args, fake_mode, options, training=training)
        program.guards = shape_guards.guards_of(fake_mode, fake_args)
        if cache is not None:
            cache.store(program)
    else:
        program.timings["cache"] = 1.0
        observe.loaded(program)
    artifact = compile_program(program, options, flat_fn)
    artifact.guards = shape_guards.guards_of(fake_mode, fake_args)  # (the compiler's too)
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
    fake_args = trace.fakify(
        fake_mode, tensors, dynamic=options.dynamic, static_dims=options.static_dims
    )
    try:
        artifact = compile_flat(flat_fn, fake_args, fake_mode, options, training=training)
        return Specialization(artifact, fake_mode, fake_args)
    except alias.NeedsSyntheticBase as need:
        first = need
    base = alias.SyntheticBase.of(tensors, first)
    try:
        return _compile_over(base, flat_fn, tensors, options, training=training)
    except alias.NeedsSyntheticBase as again:
        # the first trace stopped where an input reached past its elements, before the
        # other written overlaps were known: once more, over both
        wider = alias.SyntheticBase.of(tensors, base.widened(first, again))
    return _compile_over(wider, flat_fn, tensors, options, training=training)


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
