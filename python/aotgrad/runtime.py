"""Stage 6 — runtime: compiled forward/backward wrapped in a ``torch.autograd.Function``.

The forward graph returns the user's outputs, then the intermediate bases of
aliased outputs, then the new values of mutated inputs, then the saved values
(tensors, then SymInts). The autograd.Function keeps the saved values on
``ctx`` and feeds them, with the tangents, to the compiled backward. The graph
itself is functional: after it runs, the epilogue applies input mutations to
the real inputs, sets their version counters and rebuilds outputs that alias
inputs or intermediates as real views (``aotgrad.alias`` decides which).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .alias import OutputVerdict, ViewSpec
from .alias.storage import byte_range
from .alias.views import (
    Binding,
    Evaluator,
    custom_view_of,
    detached_alias,
    regenerate,
    replay_metadata,
    routed_view,
    stale_custom_view,
)

BoxedFn = Callable[[list[Any]], Any]

_CM = torch._C._autograd.CreationMeta
#: Views eager made under no_grad / inference mode: autograd does not track them.
_NO_GRAD_VIEWS = frozenset({_CM.NO_GRAD_MODE, _CM.INFERENCE_MODE})


@dataclass
class OutputAlias:
    """A user output the runtime rebuilds as a view instead of returning the graph's."""

    index: int
    verdict: OutputVerdict
    #: The input, user output or intermediate-base slot it is a view of (``AliasPlan``).
    source: int
    view: ViewSpec | None
    requires_grad: bool
    #: Autograd's creation meta of the eager view when it is not the default (a
    #: multi-output view, a view made under no_grad): eager's in-place checks follow it.
    creation_meta: Any = None
    #: 0: a view of its base; 1: a detached alias of it (``x.detach()``, not a view);
    #: 2: a view of a detached alias (``x.detach().t()``).
    detached: int = 0
    #: With ``detached`` 2: the earlier user output that is the detached alias this is
    #: a view of (``t = x.detach(); return t, t.t()``), or -1.
    detached_base: int = -1
    #: A view of an intermediate that is a leaf requiring grad in eager: the runtime makes
    #: the graph's base that leaf (one per base) and returns views of it with a grad_fn.
    base_leaf: bool = False
    #: A view (made with grad mode on) of an input that did not require grad: it requires
    #: grad if the input does after the call's writes (a write through another view of
    #: the input's base gives the base, and so every view of it, autograd history).
    grad_through_base: bool = False


@dataclass
class ForwardLayout:
    """How the flat outputs of a compiled forward graph are laid out, and what the runtime
    does with them: user outputs, then intermediate bases, then the new values of mutated
    inputs, then effect tokens (then, in training, the saved values)."""

    num_user_outputs: int
    mutated_inputs: list[int]
    #: Forward outputs (indices among all of the above) that get a tangent in the backward.
    tangent_outputs: list[int]
    num_saved_tensors: int = 0
    num_saved_symints: int = 0
    #: Effect tokens after the mutated inputs' values (not user-visible).
    num_tokens: int = 0
    num_intermediate_bases: int = 0
    #: Per entry of ``mutated_inputs``: copy the new value in with grad mode on.
    mutation_with_grad: list[bool] = field(default_factory=list)
    #: Inputs whose sizes/strides/offset the function changed, and the new ones.
    metadata_mutations: dict[int, ViewSpec] = field(default_factory=dict)
    #: Of those, the ones (non-leaves that require grad) whose change autograd records.
    metadata_with_grad: list[int] = field(default_factory=list)
    #: Inputs the function wrote, and how many in-place ops it ran on each.
    version_deltas: dict[int, int] = field(default_factory=dict)
    output_aliases: list[OutputAlias] = field(default_factory=list)
    #: Where the size symbols of non-static view specs are read from the inputs.
    bindings: list[Binding] = field(default_factory=list)
    #: User outputs that are an earlier user output object (``return t, t``).
    same_as: dict[int, int] = field(default_factory=dict)
    #: User outputs the graph returns as an earlier one's value, distinct objects in eager.
    merged_outputs: list[int] = field(default_factory=list)
    #: Fresh user outputs and views of intermediates written in place inside the
    #: function: their version counters (a view shares its base's).
    output_versions: dict[int, int] = field(default_factory=dict)
    #: User outputs that are leaves requiring grad (``requires_grad_()`` inside the function).
    new_leaves: list[int] = field(default_factory=list)
    #: User outputs eager returns as a stale custom-Function view (``OutputInfo``), and
    #: the input whose bytes it views (with the view), if any.
    stale_views: dict[int, tuple[int, ViewSpec] | None] = field(default_factory=dict)
    #: User outputs eager returns as tensors of their own (not views): a compiled graph
    #: may return a view of one of its intermediates there (``reshape`` as ``view`` of a
    #: ``clone``; Inductor's ``reinterpret_tensor``), which the runtime detaches.
    fresh_outputs: list[int] = field(default_factory=list)
    #: An inference graph that scatters through strided views (``as_strided_scatter``,
    #: which torch refuses on non-contiguous tensors that require grad, as an input can
    #: under inference mode): it runs on detached inputs.
    detach_inputs: bool = False
    #: User outputs a custom Function made as a view of an input's bytes: the input and
    #: the view. The runtime returns that view of the real input, its gradient routed
    #: into the graph's output (``alias.views.routed_view``).
    custom_views: dict[int, tuple[int, ViewSpec]] = field(default_factory=dict)
    #: Inputs whose ``requires_grad`` the function changed, and the new flag.
    requires_grad_changes: dict[int, bool] = field(default_factory=dict)
    #: Of those turned off, the ones by ``requires_grad_(False)`` (the others:
    #: ``detach_()``, a no-op on autograd under inference mode, as in eager).
    requires_grad_flag_off: list[int] = field(default_factory=list)
    #: Called under ``no_grad`` but records autograd itself (an ``enable_grad`` block):
    #: the autograd.Function runs with grad mode on.
    enable_grad: bool = False
    #: Inputs the backward writes (in-place ops per input): the compiled backward returns
    #: their new values after the gradients, and the runtime copies them in.
    backward_mutations: dict[int, int] = field(default_factory=dict)
    #: Per input gradient, the tangents it depends on (``program._grad_tangents``).
    grad_tangents: list[tuple[int, ...]] = field(default_factory=list)
    #: Eager's error for a backward that reads a saved tensor written after it was saved.
    backward_error: str | None = None
    #: Inputs that come with an empty storage or whose storage the function resizes, and
    #: their bytes after the call. The graphs never resize; the runtime does, around them:
    #: an empty input gets the bytes it views while the graph reads and writes it.
    storage_resizes: dict[int, int] = field(default_factory=dict)

    @property
    def num_fwd_outputs(self) -> int:
        return (
            self.num_user_outputs
            + self.num_intermediate_bases
            + len(self.mutated_inputs)
            + self.num_tokens
        )

    @property
    def plain(self) -> bool:
        """Nothing to replay: the graph's user outputs are the answer."""
        return not (
            self.mutated_inputs
            or self.metadata_mutations
            or self.version_deltas
            or self.output_aliases
            or self.new_leaves
            or self.same_as
            or self.merged_outputs
            or self.output_versions
            or self.requires_grad_changes
            or self.storage_resizes
            or self.stale_views
            or self.custom_views
        )


def _identity(spec: ViewSpec) -> ViewSpec:
    return spec


class _Epilogue:
    """What runs after the compiled forward: input mutations (metadata, then data)
    applied to the real inputs, their version counters set as eager's, and aliased
    outputs rebuilt as real views of their inputs or intermediate bases."""

    def __init__(self, layout: ForwardLayout) -> None:
        self.layout = layout
        self.n_user = layout.num_user_outputs
        self.values_start = layout.num_user_outputs + layout.num_intermediate_bases
        self.versioned = list(layout.version_deltas.items())
        self.rebuilt = {a.index for a in layout.output_aliases}
        self.leaf_bases = sorted(
            {self.n_user + a.source for a in layout.output_aliases if a.base_leaf}
        )
        self.rebuilt |= {*layout.stale_views, *layout.custom_views}
        specs = [a.view for a in layout.output_aliases if a.view is not None]
        specs += layout.metadata_mutations.values()
        specs += [v[1] for v in layout.stale_views.values() if v is not None]
        specs += [v[1] for v in layout.custom_views.values()]
        self.static = all(s.static for s in specs)

    def prepare(self, args: Sequence[Any]) -> list[int]:
        """Before the graph runs: inputs the function makes require grad do; inputs
        resized by the function get the storage it gave them (the graph reads and writes
        them as if it had); their version counters."""
        for i, flag in self.layout.requires_grad_changes.items():
            if flag:  # before the graph runs: autograd then records it, as in eager
                args[i].requires_grad_(True)
        for i in self.layout.storage_resizes:
            t = args[i]
            if t.untyped_storage().nbytes() == 0 and t.numel():
                torch.ops.inductor.resize_storage_bytes_(t, byte_range(t)[1])
        # Inference tensors have no version counter (-1: nothing to set).
        return [-1 if args[i].is_inference() else args[i]._version for i, _ in self.versioned]

    def __call__(self, args: Sequence[Any], fwd: Sequence[Any], before: list[int]) -> tuple:
        layout = self.layout
        spec = _identity if self.static else Evaluator(layout.bindings, args).spec
        # made before the writes below, which make them stale as eager's are
        early = {
            k: custom_view_of(args[src[0]], spec(src[1]))
            for k, src in layout.stale_views.items()
            if src is not None
        }
        for i, view in layout.metadata_mutations.items():
            replay_metadata(args[i], spec(view), record=i in layout.metadata_with_grad)
        start = self.values_start
        new_values = fwd[start : start + len(layout.mutated_inputs)]
        for i, value, with_grad in zip(
            layout.mutated_inputs, new_values, layout.mutation_with_grad
        ):
            target = args[i]
            if target is value:
                continue
            if with_grad:
                target.copy_(value)  # autograd records the write (CopyBackwards)
            else:
                with torch.no_grad():
                    target.copy_(value)
        for i, after in layout.storage_resizes.items():
            torch.ops.inductor.resize_storage_bytes_(args[i], after)
        self._set_versions(args, before)
        # detach_() / requires_grad_(False) inside the function: views returned of the
        # input are made of it out of autograd, as eager's are
        for i, flag in layout.requires_grad_changes.items():
            if not flag:
                if i in layout.requires_grad_flag_off:
                    args[i].requires_grad_(False)
                else:
                    args[i].detach_()
        outs = list(fwd[: self.n_user])
        versions = layout.output_versions
        for k, v in versions.items():
            if k not in self.rebuilt:
                _set_version(outs[k], v)
        if self.leaf_bases:
            fwd = list(fwd)
            for k in self.leaf_bases:
                fwd[k] = fwd[k].detach().requires_grad_(True)
        for a in layout.output_aliases:
            outs[a.index] = self._rebuild(a, args, fwd, outs, spec, versions.get(a.index))
        for k in layout.new_leaves:
            if not outs[k].requires_grad:
                outs[k].requires_grad_(True)
        for k in layout.stale_views:
            stale = early.get(k)
            outs[k] = stale if stale is not None else stale_custom_view(outs[k], versions.get(k, 0))
        for k, (i, view) in layout.custom_views.items():
            outs[k] = routed_view(args[i], spec(view), outs[k])
        for k, first in layout.same_as.items():
            outs[k] = outs[first]
        if layout.merged_outputs:
            taken = {id(o) for j, o in enumerate(outs) if j not in layout.merged_outputs}
            for k in layout.merged_outputs:
                if id(outs[k]) in taken:
                    outs[k] = outs[k].detach()
        return tuple(outs)

    def _set_versions(self, args: Sequence[Any], before: list[int]) -> None:
        """Version counters as eager leaves them: views of one tensor share a counter, which
        every write through any of them bumps."""
        if len(self.versioned) == 1:
            (i, delta), v0 = self.versioned[0], before[0]
            if v0 >= 0 and args[i]._version != v0 + delta:
                torch._C._autograd._unsafe_set_version_counter((args[i],), (v0 + delta,))
            return
        shared: dict[int, int] = {}
        for (i, delta), v0 in zip(self.versioned, before):
            root = args[i] if args[i]._base is None else args[i]._base
            shared[id(root)] = shared.get(id(root), v0) + delta
        for (i, _), v0 in zip(self.versioned, before):
            t = args[i]
            target = shared[id(t if t._base is None else t._base)]
            if v0 >= 0 and t._version != target:
                torch._C._autograd._unsafe_set_version_counter((t,), (target,))

    def _rebuild(
        self,
        a: OutputAlias,
        args: Sequence[Any],
        fwd: Sequence[Any],
        outs: list,
        spec: Any,
        version: int | None = None,
    ) -> Any:
        if a.verdict == OutputVerdict.IS_INPUT:
            return args[a.source]
        if a.verdict == OutputVerdict.ALIAS_OF_INPUT:
            base = args[a.source]
        elif a.verdict == OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT:
            base = outs[a.source]
        else:
            base = fwd[self.n_user + a.source]
        if version is not None:  # the base's, before the view records it
            _set_version(base, version, views=not base.requires_grad)
        assert a.view is not None
        meta = a.creation_meta
        if a.detached_base >= 0:  # a view of that output, at the input's bytes
            view = spec(a.view)
            at = base.storage_offset() + view.offset
            return outs[a.detached_base].as_strided(view.size, view.stride, at)
        if a.detached:
            leaf = a.index in self.layout.new_leaves
            return detached_alias(base, spec(a.view), a.detached, a.requires_grad, leaf)
        requires_grad = a.requires_grad or (a.grad_through_base and base.requires_grad)
        out = regenerate(base, spec(a.view), requires_grad, no_grad=meta in _NO_GRAD_VIEWS)
        if meta is not None and out._is_view():
            torch._C._autograd._set_creation_meta(out, meta)
        return out


def _without_autocast(f: BoxedFn) -> BoxedFn:
    """``f`` run with autocast off. The compiled graphs hold the casts autocast made
    while they were traced; run under the caller's autocast, their ops would be cast
    again (and an ``autocast(enabled=False)`` block inside the function undone)."""

    def run(args: list[Any]) -> Any:
        if torch._C._is_any_autocast_enabled():
            with torch._C._DisableAutocast():
                return f(args)
        return f(args)

    return run


def _on_detached_inputs(f: BoxedFn) -> BoxedFn:
    def run(args: list[Any]) -> Any:
        return f(
            [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
        )

    return run


def _under_no_grad(f: BoxedFn) -> BoxedFn:
    def run(args: list[Any]) -> Any:
        with torch.no_grad():
            return f(args)

    return run


def _call(bw: BoxedFn, args: list[Any]) -> Any:
    return bw(args)


def _no_double_backward(bw: BoxedFn, args: list[Any]) -> Any:
    """Run ``bw``; under ``create_graph=True`` its results carry a grad_fn that
    refuses a second backward with a clear message instead of returning zeros."""

    class _CompiledBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *a: Any) -> Any:
            return tuple(bw(list(a[1:])))

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise RuntimeError(
                "aotgrad: double backward through a compiled function is not supported; "
                "compile the function with the outer backward inside it instead"
            )

    anchor = torch.empty(0, requires_grad=True)
    return _CompiledBackward.apply(anchor, *args)


def _detach_from_mutated_inputs(
    saved: Sequence[Any], mutated_args: Sequence[torch.Tensor]
) -> list[Any]:
    """The backward must see an input's value from before the function mutated it:
    a saved tensor that is (a view of) a mutated input is saved as a copy, since the
    mutation is applied to the input itself right after the forward (and its version
    counter moves, which autograd's saved-tensor check would take for a later write)."""
    storages = {t.untyped_storage().data_ptr() for t in mutated_args}
    return [
        s.clone()
        if isinstance(s, torch.Tensor) and s.untyped_storage().data_ptr() in storages
        else s
        for s in saved
    ]


def _unview(outs: Sequence[Any], fresh: Sequence[int]) -> tuple[Any, ...]:
    """``outs`` with the ``fresh`` ones that are views made tensors of their own (same
    storage, no ``._base``), as eager returns them."""
    out = tuple(outs)
    if any(out[k]._base is not None for k in fresh):
        out = list(out)
        for k in fresh:
            if out[k]._base is not None:
                out[k] = out[k].detach()
        out = tuple(out)
    return out


def _separate_non_differentiable(
    fwd: tuple[Any, ...], nondiff: Sequence[int], args: Sequence[Any]
) -> tuple[Any, ...]:
    """Outputs marked non-differentiable as objects of their own. A compiled graph returns
    one tensor for two outputs when they have one value (a written input's new value that
    is also returned; ``x`` and ``x.detach()``, the detach being the identity inside the
    graph), and marking that tensor would make the differentiable twin non-differentiable
    too: the marked output becomes a detached alias instead (eager's ``detach`` is one).
    So does a marked output that is a view: autograd derives a view's ``requires_grad``
    from its base, which may be a differentiable output."""
    nondiff_set = set(nondiff)
    taken = {id(a) for a in args if isinstance(a, torch.Tensor)}
    taken.update(id(t) for i, t in enumerate(fwd) if i not in nondiff_set)
    out = list(fwd)
    changed = False
    for i in nondiff:
        t = out[i]
        if isinstance(t, torch.Tensor) and (id(t) in taken or t._is_view()):
            out[i] = t.detach()
            changed = True
        elif isinstance(t, torch.Tensor):
            taken.add(id(t))  # two marked outputs may share an object: that is fine
    return tuple(out) if changed else fwd


def _set_version(t: Any, version: int, views: bool = False) -> None:
    """A fresh output's version counter (a view's only with ``views``: autograd takes the
    change of a view requiring grad for a write to its base after the view was made)."""
    if (
        isinstance(t, torch.Tensor)
        and not t.is_inference()
        and (views or not t._is_view())
        and t._version != version
    ):
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))


def _zeros_like(t: torch.Tensor) -> Callable[[], torch.Tensor]:
    """A zero tangent for ``t``, made only if needed (contiguous, as the graph expects)."""
    shape, dtype, device = t.shape, t.dtype, t.device
    return lambda: torch.zeros(shape, dtype=dtype, device=device)


def _unreached_to_none(
    grads: Sequence[Any], deps: Sequence[tuple[int, ...]], missing: set[int]
) -> tuple[Any, ...]:
    """None for each gradient whose tangents all went unused."""
    return tuple(
        None if k < len(deps) and deps[k] and missing.issuperset(deps[k]) else g
        for k, g in enumerate(grads)
    )


def _write_back(inputs: Sequence[torch.Tensor], values: Sequence[Any], deltas: Any) -> None:
    """Copy the backward's new values into the inputs it wrote; version counters as eager's."""
    for t, value, delta in zip(inputs, values, deltas):
        v0 = t._version
        with torch.no_grad():
            t.copy_(value)
        torch._C._autograd._unsafe_set_version_counter((t,), (v0 + delta,))


def make_training_function(
    fw: BoxedFn, bw: BoxedFn, layout: ForwardLayout
) -> Callable[..., tuple[Any, ...]]:
    """Return ``run(*flat_tensor_args) -> flat forward outputs`` through autograd."""
    fw, bw = _without_autocast(fw), _without_autocast(bw)
    n_fwd = layout.num_fwd_outputs
    n_tensors = layout.num_saved_tensors
    tangent_outputs = layout.tangent_outputs
    # Inputs the epilogue writes (data, metadata) or whose version counter it moves (a
    # member of a synthetic base whose metadata the function changed)
    mutated = sorted({*layout.mutated_inputs, *layout.metadata_mutations, *layout.version_deltas})
    nondiff = sorted(set(range(n_fwd)) - set(tangent_outputs))
    bw_written = layout.backward_mutations
    grad_tangents = layout.grad_tangents
    stale = layout.backward_error
    fresh = layout.fresh_outputs
    # Unreached outputs matter only when some input's gradient comes from some of the
    # tangents and not all: otherwise grads stay materialised (no per-call cost).
    every = set(range(len(tangent_outputs)))
    track_unreached = any(deps and set(deps) != every for deps in grad_tangents)

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            outs = fw(list(args))
            fwd = tuple(outs[:n_fwd])
            saved = outs[n_fwd:]
            tensors = saved[:n_tensors]
            if mutated:
                tensors = _detach_from_mutated_inputs(tensors, [args[i] for i in mutated])
            ctx.save_for_backward(*tensors)
            ctx.num_inputs = len(args)
            if track_unreached:
                ctx.set_materialize_grads(False)
                ctx.zeros = [_zeros_like(fwd[i]) for i in tangent_outputs]
            if bw_written:
                ctx.bw_written = [args[i] for i in bw_written]
            ctx.symints = tuple(saved[n_tensors:])
            if fresh:
                fwd = _unview(fwd, fresh)
            if nondiff:
                fwd = _separate_non_differentiable(fwd, nondiff, args)
                marks = [fwd[i] for i in nondiff if isinstance(fwd[i], torch.Tensor)]
                ctx.mark_non_differentiable(*marks)
            return fwd

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            if stale is not None:
                raise RuntimeError(stale)
            # Tracking unreached outputs, grads are not materialised: an output the caller's
            # backward did not reach has None, and inputs reached only through such
            # outputs get None (eager's).
            missing = (
                [k for k, i in enumerate(tangent_outputs) if grads[i] is None]
                if track_unreached
                else ()
            )
            if missing:
                tangents = [
                    ctx.zeros[k]() if grads[i] is None else grads[i].contiguous()
                    for k, i in enumerate(tangent_outputs)
                ]
            else:
                tangents = [grads[i].contiguous() for i in tangent_outputs]
            args = [*ctx.saved_tensors, *ctx.symints, *tangents]
            # Unless the graph is retained, drop ctx's references: a boxed backward
            # (Inductor's) then frees each saved activation after its last use.
            ctx.maybe_clear_saved_tensors()
            run_bw = _no_double_backward if torch.is_grad_enabled() else _call
            # One gradient per input; a trailing effect token of the backward is dropped.
            outs = tuple(run_bw(bw, args))
            n = ctx.num_inputs
            if bw_written:
                _write_back(ctx.bw_written, outs[n : n + len(bw_written)], bw_written.values())
                del ctx.bw_written
            if missing:
                return _unreached_to_none(outs[:n], grad_tangents, set(missing))
            return outs[:n]

    n_user = layout.num_user_outputs
    apply = CompiledFunction.apply
    if layout.enable_grad:

        def apply(*args: Any) -> Any:
            with torch.enable_grad():
                return CompiledFunction.apply(*args)

    if layout.plain:

        def run(*args: Any) -> tuple[Any, ...]:
            return apply(*args)[:n_user]

        return run
    epilogue = _Epilogue(layout)

    def run_and_replay(*args: Any) -> tuple[Any, ...]:
        before = epilogue.prepare(args)
        return epilogue(args, apply(*args), before)

    return run_and_replay


def make_inference_function(fw: BoxedFn, layout: ForwardLayout) -> Callable[..., tuple[Any, ...]]:
    """Return ``run(*flat_tensor_args) -> user outputs`` for a forward-only graph."""
    fw = _without_autocast(fw)

    n_user = layout.num_user_outputs
    fresh = layout.fresh_outputs
    if layout.detach_inputs:
        fw = _on_detached_inputs(fw)
    if any(layout.requires_grad_changes.values()):
        # inputs made to require grad before the graph (``x.requires_grad_()``): what the
        # graph computes from them has no autograd history (else the training graph runs)
        fw = _under_no_grad(fw)
    if layout.plain:

        def run(*args: Any) -> tuple[Any, ...]:
            outs = tuple(fw(list(args))[:n_user])
            return _unview(outs, fresh) if fresh else outs

        return run
    epilogue = _Epilogue(layout)

    def run_and_replay(*args: Any) -> tuple[Any, ...]:
        before = epilogue.prepare(args)
        outs = fw(list(args))
        return epilogue(args, _unview(outs, fresh) if fresh else outs, before)

    return run_and_replay
