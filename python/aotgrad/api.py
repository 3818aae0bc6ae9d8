"""The public entry points ``aot_function`` and ``aot_module``, and their per-call cache.

Signatures and semantics follow ``functorch.compile`` so that code written for
torch's AOT Autograd ports by changing the import. Unlike torch's, every
compiled artefact is guarded (``aotgrad.guards``): a call that breaks an
assumption of the first compilation gets its own compiled graph instead of a
stale answer. This module flattens calls, keys them and keeps their entries;
``aotgrad.program`` compiles; ``aot_module_simplified`` (Dynamo's door) is in
``aotgrad.dynamo``.
"""

from __future__ import annotations

import contextlib
import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils.hooks import RemovableHandle

from . import alias, guards, python_state, subclasses
from .compile import Compiler
from .eager_calls import EagerCalls, for_inference_mode
from .eager_replay import EagerReplays
from .errors import (
    GuardError,
    HookedViewRead,
    UnderFunctorchTransform,
    UnsupportedError,
    mark_raised_while_tracing,
)
from .module_hooks import (
    call_with_hooks,
    has_own_hooks,
    refuse_submodule_hooks,
    traced_forward,
    users_hooks,
)
from .program import (
    AotOptions,
    CompiledArtifact,
    compile_for,
    default_partition_fn,
    needs_autograd,
)

_LEAF_TYPES = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device})


def _hooked_member(base: alias.SyntheticBase, tensors: Sequence[Any]) -> HookedViewRead | None:
    """Why the call runs eagerly where an input of a synthetic base has hooks the caller
    registered (None where none has): eager runs them on the input's node for the
    function's reads of it before a write to its group; the compiled Function's edge is
    the base's, past that node."""
    for g in base.groups:
        if any(tensors[i]._backward_hooks for i in g.members):
            return HookedViewRead(
                "an input with hooks registered before the call overlapping another the "
                "function writes: eager runs those hooks with the gradient of the reads "
                "before the write"
            )
    return None


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
    value = pytree.tree_unflatten(list(outs), spec)
    return _with_sizes(value, spec) if _has_size(spec) else value


def _has_size(spec: Any) -> bool:
    return spec.type is torch.Size or any(_has_size(c) for c in spec.children())


def _with_sizes(value: Any, spec: Any) -> Any:
    """``value`` with each ``torch.Size`` the function returned one again (torch's pytree
    unflattens a ``torch.Size`` node as a plain tuple)."""
    if spec.type is torch.Size:
        return torch.Size(value)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        items = [_with_sizes(v, c) for v, c in zip(value, spec.children(), strict=True)]
        return type(value)(items)
    if isinstance(value, dict):
        keys = spec.context
        return type(value)(
            (k, _with_sizes(value[k], c)) for k, c in zip(keys, spec.children(), strict=True)
        )
    return value


class _FlatCall:
    """The user's function as the orchestrator sees it: flat tensor inputs → flat outputs.
    Non-tensor arguments are the call's own (they are in the guard key); the same view
    passed twice is one graph input (``guards.alias_groups``). After a trace,
    ``out_spec`` rebuilds the output pytree."""

    def __init__(self, fn: Callable[..., Any], flat: list[Any], in_spec: Any, views: Any) -> None:
        self.fn = fn
        # (the call's tensors are not kept: each call, a replay too, gives its own)
        self.flat = [None if isinstance(a, torch.Tensor) else a for a in flat]
        self.in_spec = in_spec
        all_positions = [i for i, a in enumerate(flat) if isinstance(a, torch.Tensor)]
        unique = [k for k, p in enumerate(all_positions) if not views or views[k][1] == k]
        #: Positions of the graph's inputs among the flat arguments.
        self.positions = [all_positions[k] for k in unique]
        #: Flat position of every tensor argument → the graph input it is.
        self.source = {
            p: unique.index(views[k][1] if views else k) for k, p in enumerate(all_positions)
        }
        self.out_spec: Any = None
        self.__qualname__ = getattr(fn, "__qualname__", type(fn).__qualname__)

    @classmethod
    def of(cls, fn: Callable[..., Any], flat: list[Any], key: tuple) -> _FlatCall:
        in_spec = key[-1]
        if isinstance(in_spec, int):  # the positional fast path
            in_spec = pytree.tree_structure((tuple(flat), {}))
        return cls(fn, flat, in_spec, key[2])

    def __call__(self, *tensors: Any) -> list[Any]:
        full = list(self.flat)
        for p, u in self.source.items():
            full[p] = tensors[u]
        a, kw = pytree.tree_unflatten(full, self.in_spec)
        if EagerCalls.active() is None:
            out = self.fn(*a, **kw)
        else:  # (traced: Python state it changes makes the calls run eagerly)
            with python_state.tracing(self.fn):
                out = self.fn(*a, **kw)
        out_flat, self.out_spec = pytree.tree_flatten(out)
        for k, o in enumerate(out_flat):
            _refuse_opaque_output(k, o)
            if subclasses.is_subclass(o):
                raise subclasses.SubclassOutputs(k, o)
        return out_flat


def _refuse_opaque_output(k: int, o: Any) -> None:
    """An output object pytree does not see into (a dataclass, a plain class) that holds
    tensors: the traced ones would be returned inside it, unusable (torch raises too)."""
    fields = getattr(o, "__dict__", None)
    if isinstance(o, torch.Tensor) or not isinstance(fields, dict):
        return
    if any(isinstance(v, torch.Tensor) for v in fields.values()):
        raise UnsupportedError(
            f"output {k} is a {type(o).__qualname__} holding tensors, which aotgrad cannot "
            "see into: register its type as a pytree node "
            "(torch.utils._pytree.register_dataclass, register_pytree_node)"
        )


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
        #: Guard keys whose trace raised the function's own error: run eagerly.
        self.eager = EagerReplays(fn)
        #: The function returns tensor subclasses made inside: every call goes through
        #: ``subclasses.call``, which flattens them (found by the first trace).
        self.subclass_outputs = False
        functools.update_wrapper(self, fn)

    def key(self, flat: Sequence[Any], shape: Any) -> tuple:
        state = None if self.state is None else self.state()
        return guards.call_key(
            flat,
            dynamic=self.options.dynamic,
            state=state,
            extra=shape,
            static_dims=self.options.static_dims,
        )

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
        if self.subclass_outputs or subclasses.any_subclass(flat):
            return subclasses.call(self, flat, shape, state, AotFunction)
        try:
            key = guards.call_key(
                flat,
                dynamic=self.options.dynamic,
                state=state,
                extra=shape,
                static_dims=self.options.static_dims,
            )
        except UnderFunctorchTransform as e:  # (the transform runs the function: eager's)
            return self.eager.run_once(flat, shape, e)
        if self.eager.keys and key in self.eager.keys:
            return self.eager.run(key, flat, shape)
        entry = self.cache.get(key)
        while entry is not None and not entry.accepts(flat):
            entry = entry.fallback
        if entry is None:
            try:
                entry = self._compile_in_call(flat, key)
            except subclasses.SubclassOutputs:
                self.subclass_outputs = True  # (the trace stopped before anything ran)
                return subclasses.call(self, flat, shape, state, AotFunction)
            except Exception as e:
                if not EagerReplays.replays(e):
                    raise
                self.eager.add(key, e)
            if entry is None:  # (outside the handler: eager's error is raised as its own)
                return self.eager.run(key, flat, shape)
        base = entry.synthetic_base
        if base is None:
            try:
                outs = entry.artifact.run(*entry.graph_inputs(flat))
            except Exception as e:
                if not self.eager.replays_run(e, entry.artifact.layout):
                    raise
                outs, why = None, e
            if outs is None:  # (outside the handler: eager's error is raised as its own)
                return self.eager.run_once(flat, shape, why)
        else:
            tensors = entry.tensors(flat)
            hooked = _hooked_member(base, tensors)
            if hooked is not None:
                return self.eager.run_once(flat, shape, hooked)
            before = base.versions(tensors)
            outs = entry.artifact.run(*base.prepare(tensors, entry.artifact.layout))
            outs = base.finish(tensors, outs, before)
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

    def _only_values_read_changed(self, key: tuple) -> bool:
        """Whether ``key`` differs from the last only in the Python values the function
        reads (``python_state.ReadValues``): a value the caller keeps changing (a step
        count) makes the calls with new values run eagerly, not fail."""
        last = self.last_key
        return (
            isinstance(self.state, python_state.ReadValues)
            and last is not None
            and len(last) == len(key) == 6
            and last[:4] == key[:4]
            and last[5] == key[5]
        )

    def _compile(self, flat: list[Any], key: tuple, inference_mode: bool = False) -> _Entry:
        if self.compilations >= self.options.recompile_limit:
            error = GuardError(
                f"{getattr(self.fn, '__qualname__', self.fn)} was compiled "
                f"{self.compilations} times (recompile_limit={self.options.recompile_limit}); "
                f"the assumption that keeps changing: {self._recompile_reason(flat, key)}"
            )
            if self._only_values_read_changed(key):  # (run eagerly, as Dynamo does)
                mark_raised_while_tracing(error)
            raise error
        call = _FlatCall.of(self.fn, flat, key)
        tensors = [flat[i] for i in call.positions]
        training = needs_autograd(tensors, inference_mode)
        made = compile_for(call, tensors, self.options, training=training)
        base = made.synthetic_base  # its layout is baked in (``accepts`` checks it per call)
        all_tensors = len(call.positions) == len(flat)
        entry = _Entry(
            made.artifact, _unflattener(call.out_spec), None if all_tensors else call.positions
        )
        entry.synthetic_base = base
        if self.options.dynamic and base is None:
            entry.shape_guard = guards.ShapeGuard.of(made.fake_mode, made.fake_args)
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
        fw_compiler=fw_compiler,
        bw_compiler=bw_compiler,
        partition_fn=partition_fn,
        decompositions=decompositions,
        num_params_buffers=num_params_buffers,
        keep_inference_input_mutations=keep_inference_input_mutations,
        inference_compiler=inference_compiler,
        dynamic=dynamic,
        recompile_limit=recompile_limit,
    )
    reads = python_state.ReadValues(fn)  # (plain values it reads are guarded)
    return AotFunction(fn, options, reads if reads else None)


class AotModule(torch.nn.Module):
    """The module ``aot_module`` returns: calls the compiled functional form of ``orig_module``."""

    def __init__(self, orig_module: torch.nn.Module, compiled: AotFunction) -> None:
        super().__init__()
        self.orig_module = orig_module
        self._compiled = compiled
        self._settings = guards.ModuleSettings()
        self._hooks_seen = (-1, False)  # (``RemovableHandle.next_id`` then, users' hooks?)
        self._reads = python_state.ReadValues(orig_module)  # (its forward's plain reads)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The wrapper is not one of the caller's modules: hooks registered for every
        # module (``register_module_forward_hook``) run for ``orig_module`` and its
        # submodules, as eager's; the wrapper's own, if any, around it.
        if has_own_hooks(self):
            return super().__call__(*args, **kwargs)
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if has_own_hooks(self.orig_module):  # run around the compiled call, as eager's
            return call_with_hooks(self.orig_module, self._call, args, kwargs)
        return self._call(*args, **kwargs)

    def _submodules_hooked(self) -> bool:
        """Whether a submodule has a hook of the user's (``module_hooks``), looked for
        again only after a hook was registered anywhere (a handle's id moved): part of
        the guard, so that a hook added after the first call makes the calls eager."""
        seen, hooked = self._hooks_seen
        if RemovableHandle.next_id != seen:
            hooked = bool(users_hooks(self.orig_module))
            self._hooks_seen = (RemovableHandle.next_id, hooked)
        return hooked

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        names, tensors, flags = module_snapshot(self.orig_module, self._settings)
        # (``forget_written`` reads the first; then the guarded Python state)
        flags = (*flags, self._submodules_hooked(), self._reads() if self._reads else ())
        if not kwargs and all(type(a) in _LEAF_TYPES or isinstance(a, torch.Tensor) for a in args):
            flat: list[Any] = [names, *tensors, *args]
            shape: Any = len(flat)
        else:
            flat, shape = pytree.tree_flatten(((names, *tensors, *args), kwargs))
        compiled = len(self._compiled.cache), len(self._compiled.eager.keys)
        out = self._compiled.call_flat(flat, shape, flags)
        # (traced, or refused to: did its forward change a setting?)
        if (len(self._compiled.cache), len(self._compiled.eager.keys)) != compiled:
            modules = [m for _, m in self.orig_module.named_modules(remove_duplicate=False)]
            self._settings.forget_written(modules, flags)
        return out


class _Names(tuple):  # type: ignore[type-arg]
    """Parameter and buffer names: one hashable pytree leaf (a plain tuple would be a node)."""

    __slots__ = ()


def module_snapshot(
    mod: torch.nn.Module, settings: guards.ModuleSettings | None = None
) -> tuple[_Names, list[torch.Tensor], tuple[Any, ...]]:
    """One walk over ``mod``: the names of its parameters then buffers (as
    ``named_parameters``/``named_buffers(remove_duplicate=False)`` give them), the tensors
    themselves, and every submodule's ``training`` flag and plain settings (the guarded
    module state: ``guards.ModuleSettings``)."""
    settings = guards.ModuleSettings() if settings is None else settings
    names: list[str] = []
    params: list[torch.Tensor] = []
    buffer_names: list[str] = []
    buffers: list[torch.Tensor] = []
    flags = []
    for prefix, m in mod.named_modules(remove_duplicate=False):
        flags.append(settings.of(m))
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


def _once_per_module(mod: torch.nn.Module, given: dict[str, Any]) -> dict[str, Any]:
    """``given`` with one name per (submodule, attribute): a submodule reachable under two
    names (``self.dec = self.enc``) lists its parameters twice, and reparametrizing it twice
    would restore the first stand-in as the ``original`` of the second, leaving a traced
    tensor in the caller's module (blind probe: ``m.enc.weight`` a FunctionalTensor)."""
    seen: set[tuple[int, str]] = set()
    kept = {}
    for name, t in given.items():
        prefix, _, attr = name.rpartition(".")
        key = (id(mod.get_submodule(prefix)), attr)
        if key not in seen:
            seen.add(key)
            kept[name] = t
    return kept


def _refuse_reassigned(mod: torch.nn.Module, given: dict[str, Any]) -> None:
    """A parameter or buffer the forward reassigns (``self.avg = self.avg * 0.5 + m``)
    rather than writes: the traced call runs on stand-ins for them, so the new tensor
    would be dropped and every later call read the old one, without a word (blind H2)."""
    from torch.nn.utils._named_member_accessor import NamedMemberAccessor

    accessor = NamedMemberAccessor(mod)
    for name, t in given.items():
        try:
            now = accessor.get_tensor(name)
        except AttributeError:
            now = None
        if now is not t:
            raise UnsupportedError(
                f"the module's forward reassigns {name!r}: aot_module cannot carry a new "
                f"tensor out of the compiled call; write it in place (self.{name.split('.')[-1]}"
                ".copy_(...)), or use torch.compile, which follows the reassignment"
            )


def aot_module(mod: torch.nn.Module, *args: Any, **kwargs: Any) -> AotModule:
    """``aot_function`` for an ``nn.Module``: parameters and buffers become graph inputs,
    read from the module on every call by name (a replaced parameter or reassigned buffer
    is simply the next call's input; names and tied/shared ones are guarded), and every
    submodule's ``training`` flag is part of the guard."""

    def functional_call(names: _Names, *rest: Any, **kw: Any) -> Any:
        from torch.nn.utils.stateless import _reparametrize_module

        if EagerCalls.active() is not None:
            refuse_submodule_hooks(mod)
        given = _once_per_module(mod, dict(zip(names, rest[: len(names)])))
        settings = guards.plain_settings(mod)
        traced = EagerCalls.active() is not None  # (an eager replay changes them as eager)
        with python_state.tracing(mod) if traced else contextlib.nullcontext():
            try:
                with _reparametrize_module(mod, given):  # (every tied name is in ``names``)
                    out = traced_forward(mod)(*rest[len(names) :], **kw)
                    _refuse_reassigned(mod, given)
            except BaseException:
                if traced:
                    guards.set_back_settings(settings)
                raise
            if traced:
                guards.refuse_changed_settings(settings)
        return out

    kwargs.setdefault("num_params_buffers", len(module_snapshot(mod)[1]))
    return AotModule(mod, aot_function(functional_call, *args, **kwargs))
