"""Dynamo's door: ``aot_module_simplified``, the entry point frontends such as Dynamo call.

Dynamo hands over a GraphModule whose parameters and buffers may still be
attributes, real example inputs, and a tracing context with its fake mode and
symbols. This module lifts the parameters to leading inputs, fakifies the
inputs with Dynamo's symbols, keys the caches, and hands the rest to the one
orchestrator (``aotgrad.program``). Outside Dynamo, or for inputs Dynamo's
guards do not cover (tensor subclasses, overlapping inputs that are written),
the call is guarded by an ``AotFunction`` instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from . import alias, guards, subclasses
from .alias.storage import overlaps
from .api import AotFunction
from .compile import Compiler
from .eager_calls import for_inference_mode
from .eager_replay import EagerReplays, replaying
from .errors import raised_while_tracing
from .hook_calls import hooks_traced
from .program import AotOptions, compile_flat, default_partition_fn, needs_autograd
from .trace.autocast_casts import autocast_casts_in, leaves_as_compiled


def aot_module_simplified(
    mod: torch.nn.Module | fx.GraphModule,
    args: Sequence[Any],
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    partition_fn: Callable[..., Any] = default_partition_fn,
    decompositions: dict[Any, Any] | None = None,
    keep_inference_input_mutations: bool = False,
    inference_compiler: Compiler | None = None,
    compiler_config_extra: Any = None,
    ignore_shape_env: bool = False,
    disable_functionalization: bool = False,
    pre_grad_passes: Callable[..., Any] | None = None,
    compile_region_name: str | None = None,
    *,
    cache: bool = False,
    dynamic: bool = False,
) -> Callable[..., Any]:
    """The low-overhead entry point for frontends such as Dynamo: ``mod`` takes flat
    positional inputs (parameters already lifted to inputs) and returns a flat tuple.
    Compiles eagerly for ``args``; returns a callable taking the same flat inputs.
    With ``cache=True`` (what the backends pass) compiled graphs are reused from the
    in-process and on-disk caches (``aotgrad.cache``).

    torch's keywords: ``pre_grad_passes(mod, args)`` runs on ``mod`` first and its result
    is traced; ``compiler_config_extra``, ``ignore_shape_env``, ``disable_functionalization``
    and ``compile_region_name`` are accepted and have no effect (aotgrad always traces with
    the shape environment of its inputs, functionalized)."""
    from torch._guards import TracingContext

    if pre_grad_passes is not None:
        mod = pre_grad_passes(mod, args)
    _data_reads_seen(mod)
    lifted = _Lifted(mod)
    options = AotOptions(
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        keep_inference_input_mutations=keep_inference_input_mutations,
        inference_compiler=inference_compiler,
        dynamic=dynamic,
        static_input_indices=[
            *range(len(lifted.tensors)),
            *(i + len(lifted.tensors) for i in _dynamo_static_inputs(mod)),
        ],
        # (Dynamo's rewrite of a custom autograd.Function is not differentiable twice as
        # eager's is: a replay under a create_graph backward would differ from eager)
        no_replay=_NO_REPLAY if _calls_custom_functions(mod) else None,
    )
    graph_inputs = [*lifted.tensors, *args]
    tc = TracingContext.try_get()
    if tc is None or tc.fake_mode is None:
        return _guarded_outside_dynamo(lifted, args, graph_inputs, options)
    if subclasses.any_subclass(graph_inputs) or _subclass_outputs(mod):
        # Tensor subclasses are flattened at the call (aotgrad.subclasses), per layout;
        # a graph Dynamo made for dynamic sizes compiles nested tensors' children so.
        options.dynamic = options.dynamic or any(map(_dynamic_example, args))
        return _guarded(lifted, options)
    return _compiled_under_dynamo(lifted, graph_inputs, tc, options, cache=cache)


_NO_REPLAY = (
    "is not supported under torch.compile for a function that calls a custom "
    "autograd.Function (Dynamo's rewrite of it is not differentiable twice)"
)


def _calls_custom_functions(mod: Any) -> bool:
    """Whether Dynamo's graph ``mod`` holds a custom ``autograd.Function`` (its HOP)."""
    if not isinstance(mod, fx.GraphModule):
        return False
    return any(
        n.op == "call_function" and "autograd_function_apply" in str(n.target)
        for m in mod.modules()
        if isinstance(m, fx.GraphModule)
        for n in m.graph.nodes
    )


def _data_of(t: torch.Tensor) -> torch.Tensor:
    return t.data


def _data_reads_seen(mod: Any) -> None:
    """Dynamo records ``x.data`` as ``torch._C._autograd._get_data_attr(x)``, which a
    torch function mode does not see: read as ``.data`` again, the trace knows the
    result has a version counter of its own (``EagerCalls.data_reads``)."""
    if not isinstance(mod, fx.GraphModule):
        return
    found = [
        n
        for n in mod.graph.nodes
        if n.op == "call_function" and n.target is torch._C._autograd._get_data_attr
    ]
    for n in found:
        n.target = _data_of
    if found:
        mod.recompile()


class _Lifted:
    """``mod`` run with its parameters and buffers (Dynamo leaves an optimizer step's as
    attributes of its graph; a module used directly holds them in submodules) as leading
    inputs, as in torch's aot_module_simplified."""

    def __init__(self, mod: Any) -> None:
        self.mod = mod
        state = lifted_state(mod)
        self.names = list(state)
        self.tensors = list(state.values())

    def __call__(self, *inputs: Any) -> Any:
        n = len(self.tensors)
        if not n:
            return _run_module(self.mod, inputs)
        with _reparametrize_module(self.mod, dict(zip(self.names, inputs[:n], strict=True))):
            return _run_module(self.mod, inputs[n:])

    def as_list(self, *inputs: Any) -> list[Any]:
        out = self(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]


def _guarded(lifted: _Lifted, options: AotOptions) -> AotFunction:
    """An ``AotFunction`` over the lifted module: aotgrad guards every call itself."""
    guarded = AotFunction(lambda *xs: tuple(lifted.as_list(*xs)), options)
    guarded.prefix = tuple(lifted.tensors)
    return guarded


def _guarded_outside_dynamo(
    lifted: _Lifted, args: Sequence[Any], graph_inputs: list[Any], options: AotOptions
) -> AotFunction:
    """Used directly, not under Dynamo: nothing else guards the call, so aotgrad does
    (with the module's training flags). Fake example inputs (symbolic sizes: compiled
    for dynamic sizes) are not real values to compile for: the first call compiles."""
    fakes = [a for a in args if isinstance(a, torch._subclasses.FakeTensor)]
    if any(_symbolic(a) for a in fakes):
        options.dynamic = True
    guarded = AotFunction(lambda *xs: _as_tuple(lifted(*xs)), options, None)
    guarded.state = functools.partial(guards.module_state, lifted.mod)
    guarded.prefix = tuple(lifted.tensors)
    if not fakes and not subclasses.any_subclass(graph_inputs):
        try:
            guarded._compile_in_call(graph_inputs, guarded.key(graph_inputs, len(graph_inputs)))
        except Exception as e:
            if not raised_while_tracing(e):
                raise
            # the function's own error (or eager's refusal): the first call decides, as
            # eager's would (``eager_replay``: eager's error, or eager's result)
    return guarded


def _compiled_under_dynamo(
    lifted: _Lifted, graph_inputs: list[Any], tc: Any, options: AotOptions, *, cache: bool
) -> Callable[..., Any]:
    """Under Dynamo: its guards cover the call; compile once, with its symbols."""
    from torch._guards import detect_fake_mode

    fake_mode = detect_fake_mode(graph_inputs) or tc.fake_mode
    fake_args = _fakify_with_context(fake_mode, graph_inputs, tc, options.dynamic)
    training = needs_autograd(graph_inputs)
    slot = None
    if cache and isinstance(lifted.mod, fx.GraphModule):
        slot = _cache_slot(lifted, graph_inputs, options, training)
    try:
        artifact = compile_flat(
            lifted.as_list, fake_args, fake_mode, options, training=training, cache=slot
        )
    except alias.NeedsSyntheticBase:
        # Inputs that overlap in memory are written: Dynamo's guards do not cover their
        # layout, so aotgrad guards the call itself and passes them as synthetic bases.
        return _guarded(lifted, options)
    run = artifact.run
    layout = artifact.layout
    n = len(lifted.tensors)  # (its parameters and buffers, lifted: the module's own)

    def eager(*xs: Any) -> tuple[Any, ...]:
        return _as_tuple(lifted.mod(*xs[n:]))

    if layout.enable_grad and not any(
        _symbolic(a) for a in fake_args if isinstance(a, torch.Tensor)
    ):
        run = _inference_mode_apart(
            run,
            lambda: compile_flat(lifted.as_list, fake_args, fake_mode, options, training=False),
            eager,
        )
    run = replaying(run, eager, layout)
    checks = []
    if layout.mutated_inputs or layout.metadata_mutations:
        # The graph writes inputs: compiled for how they shared storage then. Dynamo's
        # guards do not cover views of one base, so a later call whose inputs alias
        # otherwise (two rows of one tensor where there were two tensors) goes to a
        # guarded call.
        shared = _storage_sharing(graph_inputs[n:])
        checks.append(lambda args: _storage_sharing(args) == shared)
        if len(set(shared)) < len(shared):  # (inputs on one storage: how they meet too)
            meeting = _meeting(graph_inputs[n:], shared)
            checks.append(lambda args: _meeting(args, shared) == meeting)
        written = {*layout.mutated_inputs, *layout.metadata_mutations}
        checks.append(_written_leaves_as_compiled(graph_inputs[n:], [i - n for i in written]))
    if autocast_casts_in(lifted.mod):
        # The graph shares one autocast cast per weight where eager caches it: a leaf.
        # Dynamo does not guard whether an input is one (a clone where there was a leaf).
        checks.append(leaves_as_compiled(graph_inputs[n:]))
    forward = _checked(run, lifted, options, checks)
    forward.artifact = artifact  # type: ignore[attr-defined]
    return forward


def _checked(
    run: Callable[..., Any],
    lifted: _Lifted,
    options: AotOptions,
    checks: Sequence[Callable[[Sequence[Any]], bool]],
) -> Callable[..., Any]:
    """``run`` with the lifted tensors first; a call failing one of ``checks`` (a fact
    of the inputs the graph was compiled for that Dynamo's guards leave out) goes to an
    ``AotFunction``, which guards every call itself."""
    prefix = lifted.tensors
    if not checks:

        def forward(*runtime_args: Any) -> tuple[Any, ...]:
            return run(*prefix, *runtime_args)

        return forward
    guarded: list[AotFunction] = []

    def checked(*runtime_args: Any) -> tuple[Any, ...]:
        if all(check(runtime_args) for check in checks):
            return run(*prefix, *runtime_args)
        if not guarded:
            guarded.append(_guarded(lifted, options))
        return guarded[0](*runtime_args)  # (it puts the prefix first)

    return checked


def _inference_mode_apart(
    run: Callable[..., Any], compile_for_inference: Callable[[], Any], eager: Callable[..., Any]
) -> Callable[..., Any]:
    """``run``, compiled for a graph that records autograd itself (an ``enable_grad``
    block, traced under ``no_grad``), or, called under inference mode, that graph compiled
    for it at the first such call: there autograd records nothing, enable_grad blocks
    included. Dynamo traces a call under inference mode with ``no_grad`` on, and guards
    the mode: a graph runs under one of the two. Where that trace raises the function's
    own error or eager's refusal, ``eager`` runs the graph's calls (``eager_replay``)."""
    made: list[Callable[..., Any]] = []

    def call(*args: Any) -> Any:
        if not torch.is_inference_mode_enabled():
            return run(*args)
        if not made:
            try:
                with torch.inference_mode(False), torch.no_grad(), for_inference_mode():
                    made.append(compile_for_inference().run)
            except Exception as e:
                if not raised_while_tracing(e):
                    raise
                replays = EagerReplays(eager)
                replays.add((), e)
                made.append(lambda *xs: replays.run((), xs, len(xs)))
        return made[0](*args)

    return call


def _leaf_kind(t: Any) -> tuple[Any, bool] | None:
    """What eager's in-place checks ask of a tensor that requires grad: whether it is a
    leaf (``"stale"``: its node cannot be rebuilt), and whether it is a view of one."""
    if not (isinstance(t, torch.Tensor) and t.requires_grad):
        return None
    base = t._base
    return guards._is_leaf(t), base is not None and base.requires_grad and base.is_leaf


def _written_leaves_as_compiled(
    inputs: Sequence[Any], written: Sequence[int]
) -> Callable[[Sequence[Any]], bool]:
    """A check that the inputs the graph writes are leaves (or views of leaves) where
    those compiled for were. Dynamo guards ``requires_grad``, not leaf-ness: a graph
    traced for a non-leaf (a tensor an earlier call wrote with grad) was run for a leaf
    the caller made afresh, whose write eager refuses ("a leaf Variable that requires
    grad is being used in an in-place operation.", or "a view of a leaf Variable ...")."""
    slots = sorted(i for i in written if i >= 0)
    expected = [_leaf_kind(inputs[i]) for i in slots]

    def same(args: Sequence[Any]) -> bool:
        return [_leaf_kind(args[i]) for i in slots] == expected

    return same


def _storage_sharing(args: Sequence[Any]) -> tuple[int, ...]:
    """Per tensor argument, the first argument on the same storage (its own index when
    none before it is)."""
    first: dict[int, int] = {}
    return tuple(
        first.setdefault(a.untyped_storage()._cdata, i) if isinstance(a, torch.Tensor) else -1
        for i, a in enumerate(args)
    )


def _meeting(args: Sequence[Any], shared: tuple[int, ...]) -> tuple[Any, ...]:
    """For each two arguments on one storage (``shared``: ``_storage_sharing``'s), None
    where their bytes are apart, else how far apart they start: with the sizes and
    strides Dynamo guards, the same numbers mean the same elements meet. Two rows of one
    tensor compiled apart (``base[0:2]``, ``base[2:4]``) then called overlapping
    (``base[1:3]``) made the graph's write miss the other input's read."""
    out = []
    for j, first in enumerate(shared):
        if first == j or first < 0:
            continue
        for i in range(first, j):
            if shared[i] == first:
                a, b = args[i], args[j]
                meet = overlaps(a, b)
                out.append(b.storage_offset() - a.storage_offset() if meet else None)
    return tuple(out)


def _cache_slot(
    lifted: _Lifted, graph_inputs: list[Any], options: AotOptions, training: bool | None
) -> Any:
    """The caches' slot for compiling Dynamo's graph for these inputs."""
    from . import cache

    gm = lifted.mod
    key = cache.key_for(gm, graph_inputs, options, training=training, lifted=lifted.names)
    return cache.Slot(key)


def _as_tuple(out: Any) -> Any:
    return tuple(out) if isinstance(out, list) else out


def _subclass_outputs(mod: Any) -> bool:
    """Whether Dynamo's graph returns a tensor subclass (made inside from plain inputs)."""
    graph = getattr(mod, "graph", None)
    if graph is None:
        return False
    for node in graph.find_nodes(op="output"):
        for value in node.args[0] if isinstance(node.args[0], (tuple, list)) else [node.args[0]]:
            example = getattr(value, "meta", {}).get("example_value")
            if isinstance(example, torch.Tensor) and is_traceable_wrapper_subclass(example):
                return True
    return False


def _dynamic_example(a: Any) -> bool:
    """An example input of a graph Dynamo made for dynamic sizes: a SymInt, or a tensor
    (a subclass: one of its leaves) of symbolic size."""
    if isinstance(a, torch.SymInt):
        return True
    if not isinstance(a, torch.Tensor):
        return False
    if subclasses.is_subclass(a):
        return any(_symbolic(x) for x in subclasses.leaves(a, subclasses.layout_of(a), []))
    return _symbolic(a)


def _symbolic(t: torch.Tensor) -> bool:
    return any(isinstance(v, torch.SymInt) for v in (*t.shape, *t.stride()))


def lifted_state(mod: Any) -> dict[str, torch.Tensor]:
    """The parameters and buffers of a module by name (duplicates kept):
    aot_module_simplified lifts them to leading graph inputs."""
    if not isinstance(mod, torch.nn.Module):
        return {}
    return {
        **dict(mod.named_parameters(remove_duplicate=False)),
        **dict(mod.named_buffers(remove_duplicate=False)),
    }


def _dynamo_static_inputs(mod: Any) -> list[int]:
    """The inputs of a Dynamo graph that are parameters or buffers (Dynamo marks their
    placeholders ``tensor_dict["_dynamo_static_input_type"]``)."""
    if not isinstance(mod, fx.GraphModule):
        return []
    return [
        i
        for i, node in enumerate(mod.graph.find_nodes(op="placeholder"))
        if node.meta.get("tensor_dict", {}).get("_dynamo_static_input_type") is not None
    ]


def _run_module(mod: Any, inputs: Sequence[Any]) -> Any:
    """Run ``mod``; a GraphModule runs node by node with its node metadata in scope, so the
    traced graphs keep each node's ``nn_module_stack`` and ``stack_trace`` (the report
    groups by layer with them)."""
    if isinstance(mod, fx.GraphModule):  # (its hooks Dynamo took in: traced, ``hook_calls``)
        with fx.traceback.preserve_node_meta(), hooks_traced():
            return fx.Interpreter(mod).run(*inputs)
    return mod(*inputs)


def _fakify_with_context(fake_mode: Any, inputs: Sequence[Any], tc: Any, dynamic: bool) -> list:
    """Fakify Dynamo's real inputs with Dynamo's own symbols when a tracing context has them."""
    out = []
    contexts = getattr(tc, "tensor_to_context", None) if tc is not None else None
    for x in inputs:
        if isinstance(x, torch.Tensor) and not isinstance(x, torch._subclasses.FakeTensor):
            ctx = contexts.get(x) if contexts is not None else None
            if ctx is not None:
                out.append(
                    fake_mode.from_tensor(
                        x, symbolic_context=ctx, source=ctx.tensor_source, trace=False
                    )
                )
            else:
                out.append(fake_mode.from_tensor(x, static_shapes=not dynamic))
        else:
            out.append(x)
    return out
