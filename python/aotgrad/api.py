"""The public entry points: ``aot_function``, ``aot_module``, ``aot_module_simplified``.

Signatures and semantics follow ``functorch.compile`` so that code written for
torch's AOT Autograd ports by changing the import. Unlike torch's, every
compiled artefact is guarded (``aotgrad.guards``): a call that breaks an
assumption of the first compilation gets its own compiled graph instead of a
stale answer.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.nn.utils.stateless import _reparametrize_module

from . import alias, guards, observe, subclasses, trace
from .compile import Compiler
from .eager_calls import for_inference_mode
from .errors import GuardError
from .program import (
    AotOptions,
    CompiledArtifact,
    build_program,
    compile_flat,
    compile_program,
    default_partition_fn,
)


def _needs_autograd(graph_inputs: Sequence[Any], inference_mode: bool = False) -> bool | None:
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


_LEAF_TYPES = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device})


@dataclass
class _Entry:
    """A cache entry: the artefact, how to rebuild the output pytree, where its inputs are."""

    artifact: CompiledArtifact
    unflatten: Callable[[Sequence[Any]], Any]
    #: Positions of the tensors among the flat arguments; ``None`` when all are tensors.
    tensor_positions: list[int] | None
    #: Under ``dynamic=True``: the symbolic-shape guards the compilation relied on.
    shape_guard: guards.ShapeGuard | None = None
    #: An earlier entry with the same key whose shape guards differ (``dynamic=True``).
    fallback: _Entry | None = None

    #: Inputs that overlap in memory and are written, passed as one synthetic base.
    synthetic_base: alias.SyntheticBase | None = None

    def tensors(self, flat: Sequence[Any]) -> Sequence[Any]:
        positions = self.tensor_positions
        return flat if positions is None else [flat[i] for i in positions]

    def accepts(self, flat: Sequence[Any]) -> bool:
        """Whether this entry's assumptions beyond the guard key hold for a call: its
        symbolic-shape guards, the layout of the inputs passed as a synthetic base."""
        if self.synthetic_base is not None and not self.synthetic_base.matches(self.tensors(flat)):
            return False
        return not self.shape_guard or self.shape_guard(self.graph_inputs(flat))

    def graph_inputs(self, flat: Sequence[Any]) -> Sequence[Any]:
        tensors = self.tensors(flat)
        if self.synthetic_base is not None:
            return self.synthetic_base.prepare(tensors)
        return tensors


def _unflattener(spec: Any) -> Callable[[Sequence[Any]], Any]:
    """A fast rebuild of the output pytree for the common shapes (leaf, flat tuple/list)."""
    if spec.is_leaf():
        return operator.itemgetter(0)
    if all(child.is_leaf() for child in spec.children()):
        if spec.type is tuple:
            return tuple
        if spec.type is list:
            return list
    return functools.partial(_tree_unflatten, spec=spec)


def _tree_unflatten(outs: Sequence[Any], spec: Any) -> Any:
    return pytree.tree_unflatten(list(outs), spec)


class AotFunction:
    """A guarded, compiled function (what ``aot_function`` returns)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        options: AotOptions,
        state: Callable[[], Any] | None = None,
    ) -> None:
        self.fn = fn
        self.options = options
        #: Returns extra state the graphs depend on (a module's training flags); guarded.
        self.state = state
        #: Inputs passed before the caller's on every call (aot_module_simplified's lifted
        #: parameters and buffers).
        self.prefix: tuple[Any, ...] = ()
        #: Guard key → the most recent entry for it (older ones chained by ``fallback``).
        self.cache: dict[tuple, _Entry] = {}
        self.compilations = 0
        self.last_key: tuple | None = None
        functools.update_wrapper(self, fn)

    def key(self, flat: Sequence[Any], shape: Any) -> tuple:
        state = None if self.state is None else self.state()
        return guards.call_key(flat, dynamic=self.options.dynamic, state=state, extra=shape)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.prefix:
            args = (*self.prefix, *args)
        if not kwargs and all(type(a) in _LEAF_TYPES or isinstance(a, torch.Tensor) for a in args):
            flat: list[Any] = list(args)  # fast path: positional leaves need no pytree
            shape: Any = len(args)
        else:
            flat, shape = pytree.tree_flatten((args, kwargs))
        return self.call_flat(flat, shape, None if self.state is None else self.state())

    def call_flat(self, flat: list[Any], shape: Any, state: Any) -> Any:
        """Run on flattened arguments: ``shape`` is their pytree spec, or their count when
        they are positional leaves; ``state`` is the extra guarded state (or None)."""
        if subclasses.any_subclass(flat):
            return subclasses.call(self, flat, shape, state, AotFunction)
        key = guards.call_key(flat, dynamic=self.options.dynamic, state=state, extra=shape)
        entry = self.cache.get(key)
        while entry is not None and not entry.accepts(flat):
            entry = entry.fallback
        if entry is None:
            entry = self._compile_in_call(flat, key)
        base = entry.synthetic_base
        if base is None:
            outs = entry.artifact.run(*entry.graph_inputs(flat))
        else:
            before = base.versions(entry.tensors(flat))
            outs = entry.artifact.run(*entry.graph_inputs(flat))
            outs = base.finish(entry.tensors(flat), outs, before)
        return entry.unflatten(outs)

    def _compile_in_call(self, flat: list[Any], key: tuple) -> _Entry:
        """``_compile`` for a call under the current modes. Under inference mode the
        tracing itself runs outside it (fake and functional tensors need version counters),
        with grad off, which is what the compiled inference graph assumes."""
        if not torch.is_inference_mode_enabled():
            return self._compile(flat, key)
        with torch.inference_mode(False), torch.no_grad(), for_inference_mode():
            return self._compile(flat, key, inference_mode=True)

    def _recompile_reason(self, flat: list[Any], key: tuple) -> str:
        entry = self.cache.get(key)
        base = None if entry is None else entry.synthetic_base
        if base is not None and not base.matches(entry.tensors(flat)):  # type: ignore[union-attr]
            return "the layout of inputs that overlap in memory (a synthetic base) changed"
        if entry is not None and entry.shape_guard is not None:
            failing = entry.shape_guard.failing(entry.graph_inputs(flat))
            return f"a symbolic shape guard failed: {' and '.join(failing)}"
        assert self.last_key is not None
        return guards.describe_change(self.last_key, key)

    def _compile(self, flat: list[Any], key: tuple, inference_mode: bool = False) -> _Entry:
        if self.compilations >= self.options.recompile_limit:
            raise GuardError(
                f"{getattr(self.fn, '__qualname__', self.fn)} was compiled "
                f"{self.compilations} times (recompile_limit={self.options.recompile_limit}); "
                f"the assumption that keeps changing: {self._recompile_reason(flat, key)}"
            )
        in_spec = key[-1]
        if isinstance(in_spec, int):  # the positional fast path
            in_spec = pytree.tree_structure((tuple(flat), {}))
        all_positions = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
        views = key[2]  # guards.alias_groups: the same view passed twice is one graph input
        unique = [k for k, p in enumerate(all_positions) if not views or views[k][1] == k]
        positions = [all_positions[k] for k in unique]
        source = {p: unique.index(views[k][1] if views else k) for k, p in enumerate(all_positions)}
        out_spec_box: list[Any] = [None]
        fn = self.fn

        def flat_fn(*tensors: Any) -> list[Any]:
            full = list(flat)
            for p, u in source.items():
                full[p] = tensors[u]
            a, kw = pytree.tree_unflatten(full, in_spec)
            out_flat, out_spec_box[0] = pytree.tree_flatten(fn(*a, **kw))
            return out_flat

        flat_fn.__qualname__ = getattr(fn, "__qualname__", type(fn).__qualname__)
        tensors = [flat[i] for i in positions]
        fake_mode = trace.make_fake_mode(self.options.dynamic)
        fake_args = trace.fakify(fake_mode, tensors, dynamic=self.options.dynamic)
        training = _needs_autograd(tensors, inference_mode)
        base: alias.SyntheticBase | None = None
        try:
            artifact = compile_flat(flat_fn, fake_args, fake_mode, self.options, training=training)
        except alias.NeedsSyntheticBase as need:
            base = alias.SyntheticBase.of(tensors, need.inputs)
            # The members' layout is baked into the graph (``accepts`` checks it per call).
            fake_mode = trace.make_fake_mode(False)
            fake_args = trace.fakify(fake_mode, base.prepare(tensors), dynamic=False)
            artifact = compile_flat(
                base.wrap(flat_fn), fake_args, fake_mode, self.options, training=training
            )
        all_tensors = len(positions) == len(flat)
        entry = _Entry(artifact, _unflattener(out_spec_box[0]), None if all_tensors else positions)
        entry.synthetic_base = base
        if self.options.dynamic and base is None:
            entry.shape_guard = guards.ShapeGuard.of(fake_mode, fake_args)
        if self.options.dynamic or base is not None:
            entry.fallback = self.cache.get(key)
        self.cache[key] = entry
        self.compilations += 1
        self.last_key = key
        return entry

    @property
    def artifacts(self) -> list[CompiledArtifact]:
        out = []
        for entry in self.cache.values():
            chain: _Entry | None = entry
            while chain is not None:
                out.append(chain.artifact)
                chain = chain.fallback
        return out


def aot_function(
    fn: Callable[..., Any],
    fw_compiler: Compiler,
    bw_compiler: Compiler | None = None,
    partition_fn: Callable[..., Any] = default_partition_fn,
    decompositions: dict[Any, Any] | None = None,
    num_params_buffers: int = 0,
    keep_inference_input_mutations: bool = False,
    inference_compiler: Compiler | None = None,
    *,
    dynamic: bool = False,
    recompile_limit: int = 8,
    enable_log: bool = True,
    disable_functionalization: bool = False,
    _disable_torch_fn_metadata_mode: bool = False,
) -> AotFunction:
    """Compile ``fn`` ahead of time: trace its joint forward+backward graph, partition it
    (aotgrad's min-cut by default), compile both halves and wrap them in an
    ``autograd.Function``. Compilation happens on the first call and again for any call
    that breaks an assumption of the earlier ones (see ``aotgrad.guards``).

    torch's keywords ``enable_log``, ``disable_functionalization`` and
    ``_disable_torch_fn_metadata_mode`` are accepted and have no effect: aotgrad logs
    through ``AOTGRAD_LOGS`` and always traces functionalized graphs (same results)."""
    options = AotOptions(
        fw_compiler,
        bw_compiler,
        partition_fn,
        decompositions,
        num_params_buffers,
        keep_inference_input_mutations,
        inference_compiler,
        dynamic,
        recompile_limit,
    )
    return AotFunction(fn, options)


class AotModule(torch.nn.Module):
    """The module ``aot_module`` returns: calls the compiled functional form of ``orig_module``."""

    def __init__(self, orig_module: torch.nn.Module, compiled: AotFunction) -> None:
        super().__init__()
        self.orig_module = orig_module
        self._compiled = compiled

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        names, tensors, flags = module_snapshot(self.orig_module)
        if not kwargs and all(type(a) in _LEAF_TYPES or isinstance(a, torch.Tensor) for a in args):
            flat: list[Any] = [names, *tensors, *args]
            shape: Any = len(flat)
        else:
            flat, shape = pytree.tree_flatten(((names, *tensors, *args), kwargs))
        return self._compiled.call_flat(flat, shape, flags)


class _Names(tuple):  # type: ignore[type-arg]
    """Parameter and buffer names: one hashable pytree leaf (a plain tuple would be a node)."""

    __slots__ = ()


def module_snapshot(mod: torch.nn.Module) -> tuple[_Names, list[torch.Tensor], tuple[bool, ...]]:
    """One walk over ``mod``: the names of its parameters then buffers (as
    ``named_parameters``/``named_buffers(remove_duplicate=False)`` give them), the tensors
    themselves, and every submodule's ``training`` flag (the guarded module state)."""
    names: list[str] = []
    params: list[torch.Tensor] = []
    buffer_names: list[str] = []
    buffers: list[torch.Tensor] = []
    flags = []
    for prefix, m in mod.named_modules(remove_duplicate=False):
        flags.append(m.training)
        dot = prefix + "." if prefix else ""
        for k, v in m._parameters.items():
            if v is not None:
                names.append(dot + k)
                params.append(v)
        for k, v in m._buffers.items():
            if v is not None:
                buffer_names.append(dot + k)
                buffers.append(v)
    return _Names(names + buffer_names), params + buffers, tuple(flags)


def aot_module(mod: torch.nn.Module, *args: Any, **kwargs: Any) -> AotModule:
    """``aot_function`` for an ``nn.Module``: parameters and buffers become graph inputs,
    read from the module on every call by name (a replaced parameter or reassigned buffer
    is simply the next call's input; names and tied/shared ones are guarded), and every
    submodule's ``training`` flag is part of the guard."""

    def functional_call(names: _Names, *rest: Any, **kw: Any) -> Any:
        n = len(names)
        return torch.func.functional_call(mod, dict(zip(names, rest[:n])), rest[n:], kw)

    kwargs.setdefault("num_params_buffers", len(module_snapshot(mod)[1]))
    return AotModule(mod, aot_function(functional_call, *args, **kwargs))


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
    from torch._guards import TracingContext, detect_fake_mode

    if pre_grad_passes is not None:
        mod = pre_grad_passes(mod, args)

    tc = TracingContext.try_get()
    under_dynamo = tc is not None and tc.fake_mode is not None
    # Parameters and buffers (Dynamo leaves an optimizer step's as attributes of its graph;
    # a module used directly holds them in submodules) become leading inputs, as in
    # torch's aot_module_simplified.
    state = lifted_state(mod)
    names, lifted = list(state), list(state.values())
    n_lifted = len(lifted)
    options = AotOptions(
        fw_compiler,
        bw_compiler,
        partition_fn,
        decompositions,
        0,
        keep_inference_input_mutations,
        inference_compiler,
        dynamic=dynamic,
        static_input_indices=[
            *range(n_lifted),
            *(i + n_lifted for i in _dynamo_static_inputs(mod)),
        ],
    )

    def run_lifted(*inputs: Any) -> Any:
        if not n_lifted:
            return _run_module(mod, inputs)
        with _reparametrize_module(mod, dict(zip(names, inputs[:n_lifted], strict=True))):
            return _run_module(mod, inputs[n_lifted:])

    def list_fn(*inputs: Any) -> list[Any]:
        out = run_lifted(*inputs)
        return list(out) if isinstance(out, (tuple, list)) else [out]

    graph_inputs = [*lifted, *args]
    if not under_dynamo:
        # Used directly, not under Dynamo: nothing else guards the call, so aotgrad does.
        # Fake example inputs (symbolic sizes: compiled for dynamic sizes) are not real
        # values to compile for: the first call compiles.
        fakes = [a for a in args if isinstance(a, torch._subclasses.FakeTensor)]
        if any(_symbolic(a) for a in fakes):
            options.dynamic = True
        guarded = AotFunction(lambda *xs: _as_tuple(run_lifted(*xs)), options, None)
        guarded.state = functools.partial(guards.module_state, mod)
        guarded.prefix = tuple(lifted)
        if not fakes and not subclasses.any_subclass(graph_inputs):
            guarded._compile_in_call(graph_inputs, guarded.key(graph_inputs, len(graph_inputs)))
        return guarded

    if subclasses.any_subclass(graph_inputs):
        # Tensor subclasses are flattened at the call (aotgrad.subclasses), per layout.
        guarded = AotFunction(lambda *xs: tuple(list_fn(*xs)), options)
        guarded.prefix = tuple(lifted)
        return guarded

    # Under Dynamo: its guards cover the call; compile once with its symbols.
    fake_mode = detect_fake_mode(graph_inputs) or tc.fake_mode
    fake_args = _fakify_with_context(fake_mode, graph_inputs, tc, options.dynamic)

    training = _needs_autograd(graph_inputs)
    try:
        if cache and isinstance(mod, fx.GraphModule):
            artifact = _compile_cached(
                mod, graph_inputs, list_fn, fake_args, fake_mode, options, training
            )
        else:
            artifact = compile_flat(list_fn, fake_args, fake_mode, options, training=training)
    except alias.NeedsSyntheticBase:
        # Inputs that overlap in memory are written: Dynamo's guards do not cover their
        # layout, so aotgrad guards the call itself and passes them as synthetic bases.
        guarded = AotFunction(lambda *xs: tuple(list_fn(*xs)), options)
        guarded.prefix = tuple(lifted)
        return guarded
    run = artifact.run

    def forward(*runtime_args: Any) -> tuple[Any, ...]:
        return run(*lifted, *runtime_args)

    forward.artifact = artifact  # type: ignore[attr-defined]
    return forward


def _compile_cached(
    gm: fx.GraphModule,
    graph_inputs: list[Any],
    list_fn: Callable[..., list[Any]],
    fake_args: list[Any],
    fake_mode: Any,
    options: AotOptions,
    training: bool,
) -> CompiledArtifact:
    """compile_flat through the in-process and on-disk caches."""
    from . import cache

    key = cache.key_for(gm, graph_inputs, options, training=training, lifted=lifted_state(gm))
    artifact = cache.memory_get(key)
    if artifact is not None:
        return artifact
    program = cache.load(key, fake_args, fake_mode) if cache.disk_enabled() else None
    if program is None:
        program = build_program(list_fn, fake_args, fake_mode, options, training=training)
        if cache.disk_enabled():
            cache.store(key, program)
    else:
        program.timings["cache"] = 1.0
        observe.loaded(program)
    artifact = compile_program(program, options)
    cache.memory_put(key, artifact)
    return artifact


def _as_tuple(out: Any) -> Any:
    return tuple(out) if isinstance(out, list) else out


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
    if isinstance(mod, fx.GraphModule):
        with fx.traceback.preserve_node_meta():
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
