"""Stage 1 — trace: a function and example inputs → the joint forward+backward FX graph.

The function runs on fake tensors, functionalized, under ``make_fx``; then
``torch.autograd.grad`` with tangent placeholders records the backward into the
same graph. Placeholders carry their role in ``node.meta["aotgrad_role"]``
(``"primal"`` / ``"tangent"``), so later stages never match on names. Names
still follow torch's ``primals_N`` / ``tangents_N`` so that Inductor and
torch's own tooling read our graphs.

A first, cheap pass (``collect_metadata``) runs the function once on fakes to
learn which outputs need tangents, and collects the alias facts (which inputs it
writes, which outputs view inputs or intermediates) that ``aotgrad.alias``
classifies; the second pass (``trace_joint`` / ``trace_inference``) records the
graph accordingly.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx

from . import alias
from .eager_calls import EagerCalls, in_inference_mode
from .errors import TraceError, UnsupportedError
from .hops import (
    checkpoint_regions,
    refuse_deferred_autograd_errors,
    unsupported_hop_errors,
)
from .roles import PRIMAL, TANGENT
from .roles import ROLE_KEY as ROLE
from .vocab import MUTATED_KEY, PARTITIONER_TAG, STATIC_KEY, TRACED_BY_FORWARD


@dataclass(frozen=True)
class OutputInfo:
    """What the metadata pass learned about one flat forward output."""

    is_tensor: bool
    requires_grad: bool
    #: The output gets a tangent in the backward (a differentiable float tensor).
    needs_tangent: bool
    #: A leaf that requires grad (``requires_grad_()`` on a fresh tensor or on a view of an
    #: input without grad): nothing upstream to differentiate; the runtime returns it as a
    #: leaf that requires grad, as eager does.
    new_leaf: bool = False
    #: A view a custom Function made (of its input, returned as-is) whose base was
    #: written afterwards: eager returns it, and any use of it with grad raises
    #: (``alias.views.stale_custom_view``). No tangent: nothing differentiates it.
    stale_custom_view: bool = False


@dataclass
class TraceMetadata:
    outputs: list[OutputInfo]
    #: The flat outputs as fakes (shapes, dtypes, devices for tangents and guards).
    fake_outputs: list[Any]
    #: What each input and output is, aliasing-wise (classified in Rust).
    plan: alias.AliasPlan
    #: The graph's forward outputs as fakes: the user's, the intermediate bases the
    #: runtime regenerates views from, the mutated inputs' new values.
    fake_fwd_outputs: list[Any] = field(default_factory=list)
    #: Grad mode at the call: the joint trace runs the function under it.
    grad_mode: bool = True
    #: Inputs whose ``requires_grad`` the function changed (``requires_grad_``,
    #: ``detach_``), and the new flag: the runtime changes the real inputs alike.
    requires_grad_changes: dict[int, bool] = field(default_factory=dict)
    #: Of the inputs turned off, those the function called ``requires_grad_(False)`` on
    #: (the others were ``detach_()``ed, which inference mode makes a no-op).
    requires_grad_flag_off: list[int] = field(default_factory=list)
    #: Written inputs whose new metadata covers other bytes than the caller's tensor
    #: (``x.as_strided_((2, 2), ...)``): written back in the caller's layout (see
    #: ``_layout_anchors``). A permutation (``t_()``) covers the same bytes: its value is
    #: written through the new metadata, which keeps autograd's view of it simple.
    relaid_inputs: list[int] = field(default_factory=list)

    @property
    def needs_autograd(self) -> bool:
        """An output (or an input's new value) has autograd history: the function needs
        the joint graph even when its inputs do not require grad (an ``enable_grad``
        block under ``no_grad``; a value that requires grad written into an input)."""
        from .alias.facts import IN_NEW_VALUE_REQUIRES_GRAD

        return any(o.requires_grad and not o.new_leaf for o in self.outputs) or any(
            f & IN_NEW_VALUE_REQUIRES_GRAD for f in self.plan.facts.input_flags
        )

    @property
    def mutated_inputs(self) -> list[int]:
        """Inputs whose new value the graph returns, in order."""
        return self.plan.mutated_inputs

    @property
    def num_intermediate_bases(self) -> int:
        return len(self.plan.intermediate_bases)

    @property
    def tangent_outputs(self) -> list[int]:
        """Forward outputs (indices among user outputs, bases, new values) that get a
        tangent: differentiable user outputs that alias nothing, intermediate bases that
        require grad, and new values of inputs written with autograd history."""
        plan = self.plan
        n_user = len(self.outputs)
        users = [
            i
            for i, info in enumerate(self.outputs)
            if info.needs_tangent and plan.outputs[i] == alias.OutputVerdict.NON_ALIAS
        ]
        bases = [
            n_user + s
            for s, k in enumerate(plan.intermediate_bases)
            if plan.facts.output_flags[k] & alias.facts.OUT_BASE_REQUIRES_GRAD
        ]
        start = n_user + self.num_intermediate_bases
        values = [
            start + m
            for m, i in enumerate(self.mutated_inputs)
            if plan.inputs[i] in alias.DIFFERENTIABLE_WRITE
        ]
        return users + bases + values


@dataclass
class JointGraph:
    """A traced joint graph and the facts the later stages need.

    Placeholders: ``num_primals`` primals, then one tangent per entry of
    ``metadata.tangent_outputs``. Outputs: the user's flat outputs, then the
    intermediate bases of aliased outputs, then the new values of mutated inputs
    (``metadata.mutated_inputs``), then effect tokens —
    together the ``num_fwd_outputs`` forward outputs — then one gradient per primal
    (``None`` where the primal needs no gradient), then the new values of inputs the
    backward writes (``backward_mutations``), then the backward's effect token if it has
    effectful ops.
    """

    gm: fx.GraphModule
    metadata: TraceMetadata
    fake_mode: FakeTensorMode
    fake_primals: list[Any]
    fake_tangents: list[Any]
    num_user_outputs: int
    num_fwd_outputs: int
    #: Effect tokens among the forward outputs (last); the backward may output one more.
    num_tokens: int = 0
    #: Inputs the backward writes, and how many in-place ops it runs on each: their new
    #: values are backward outputs after the gradients (before the effect token).
    backward_mutations: dict[int, int] = field(default_factory=dict)
    #: Eager's error when its backward would read a saved tensor written after it was
    #: saved (the version check): the compiled backward raises it.
    backward_error: str | None = None
    #: User outputs eager's autograd saves for the backward (``exp``'s result): written
    #: after the call, eager's backward raises; the compiled one must too, whatever its
    #: partition saved instead.
    saved_outputs: list[int] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def num_primals(self) -> int:
        return len(self.fake_primals)

    @property
    def joint_inputs(self) -> list[list[Any]]:
        return [list(self.fake_primals), list(self.fake_tangents)]


@dataclass
class InferenceGraph:
    """A traced forward-only graph: outputs are the user's, then mutated inputs' new values."""

    gm: fx.GraphModule
    metadata: TraceMetadata
    fake_mode: FakeTensorMode
    fake_primals: list[Any]
    num_user_outputs: int


# --------------------------------------------------------------------------- fakes


def make_fake_mode(dynamic: bool) -> FakeTensorMode:
    """A fake mode for tracing. It always has a ShapeEnv: without one, torch records the
    *value* of 0-dim integer/float64 CPU inputs and bakes it into the graph unguarded
    (``torch.narrow(x, 0, torch.tensor(1), 2)`` would then ignore a later start); with one,
    such a use is data-dependent and refused with a TraceError."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    return FakeTensorMode(
        shape_env=ShapeEnv(), static_shapes=not dynamic, allow_non_fake_inputs=False
    )


def fakify(fake_mode: FakeTensorMode, flat_args: Sequence[Any], *, dynamic: bool) -> list[Any]:
    """Real tensors → fakes of ``fake_mode``; fakes and SymInts of that mode pass through."""
    out: list[Any] = []
    for a in flat_args:
        if isinstance(a, torch.Tensor) and not isinstance(a, torch._subclasses.FakeTensor):
            out.append(fake_mode.from_tensor(a, static_shapes=not dynamic))
        else:
            out.append(a)
    return out


# ---------------------------------------------------------------------- functional


def _to_functional(x: Any) -> Any:
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


def _from_functional(x: Any) -> Any:
    if isinstance(x, FunctionalTensor):
        torch._sync(x)
        return torch._from_functional_tensor(x.elem)
    return x


def _empty_storage(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.numel() > 0 and a.untyped_storage().nbytes() == 0


_RESIZE_OPS = (
    torch.ops.inductor.resize_storage_bytes_,
    torch.ops.inductor.resize_storage_bytes_.default,
)


def _layout_anchors(wrapped: Sequence[Any], indices: Any) -> dict[int, Any]:
    """Views of inputs made before the function runs, in the layout the caller's tensor
    has. An input whose data and metadata the function both changes (``x.t().add_(1);
    x.t_()``) is written back by the runtime in that layout, then given its new metadata:
    the value to write is the whole storage the input covered, which its new metadata may
    no longer show (``x.as_strided_((2, 2), ...)``), or show in another order."""
    return {
        i: wrapped[i].view(wrapped[i].shape)
        for i in indices
        if isinstance(wrapped[i], torch.Tensor)
    }


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


def _new_value(wrapped: Sequence[Any], anchors: dict[int, Any], i: int) -> Any:
    """Input ``i``'s value after the function, in the caller's layout (see ``_layout_anchors``)."""
    return anchors.get(i, wrapped[i])


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


def _reaches(grad_fn: Any, leaves: set[int]) -> bool:
    """Whether the autograd graph from ``grad_fn`` accumulates into one of ``leaves`` (ids)."""
    stack, seen = [grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if variable is not None and id(variable) in leaves:
            return True
        stack.extend(n for n, _ in node.next_functions)
    return False


def _refuse_outputs_of_new_leaves(outs: Sequence[Any], new_leaves: Sequence[Any]) -> None:
    """A leaf the function makes (``t = x.detach().requires_grad_()``) may be returned
    itself or viewed, but an output computed from it would need the compiled backward to accumulate
    into a tensor that exists only once the forward ran: refused, not given without its
    history (eager's output requires grad and its backward fills ``t.grad``)."""
    leaves = {id(t) for t in new_leaves}
    if not leaves:
        return
    for k, o in enumerate(outs):
        if not isinstance(o, torch.Tensor) or o.grad_fn is None:
            continue
        if o._is_view() and id(o._base) in leaves:
            continue  # rebuilt at runtime as a view of the leaf itself
        if _reaches(o.grad_fn, leaves):
            raise UnsupportedError(
                f"output {k} is computed from a tensor the function made a leaf that "
                "requires grad (x.detach().requires_grad_(), or a factory called with "
                "requires_grad=True): its gradient would not reach that leaf; make the "
                "leaf outside the compiled function and pass it in"
            )


def _output_info(o: Any) -> OutputInfo:
    if not isinstance(o, torch.Tensor):
        return OutputInfo(False, False, False)
    rg = bool(o.requires_grad)
    grad_fn = alias.facts.grad_fn_of(o)
    if rg and grad_fn is alias.facts.STALE_VIEW:
        return OutputInfo(True, True, False, stale_custom_view=True)
    if rg and grad_fn is None:
        return OutputInfo(True, True, False, new_leaf=True)
    return OutputInfo(True, rg, rg and (o.is_floating_point() or o.is_complex()))


def _input_output_info(o: Any) -> OutputInfo:
    """An output that is an input object: the runtime returns the real input itself."""
    rg = bool(o.requires_grad)
    return OutputInfo(True, rg, rg and (o.is_floating_point() or o.is_complex()))


def _tangent_like(o: torch.Tensor) -> torch.Tensor:
    # Tangents are contiguous; the runtime makes the real ones contiguous too.
    return torch.empty(o.shape, dtype=o.dtype, device=o.device)


def _flat_call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    originals: Sequence[Any] = (),
    calls: EagerCalls | None = None,
) -> list[Any]:
    """``fn(*args)`` as a list; ``originals``: the inputs ``args`` stand in for."""
    if calls is None:
        calls = EagerCalls.for_inputs(args, originals)
    with calls:
        out = fn(*args)
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


# ------------------------------------------------------------------ effect tokens


class _EffectChain:
    """A chain of side-effect tokens. torch orders effectful ops (``aten._linalg_check_errors``,
    ``print``-like ops) by threading a token through ``with_effects``; the chain starts at
    an in-graph ``prims._make_token`` and its last token becomes a graph output, which
    keeps the effectful ops alive through dead-code elimination and partitioning."""

    def __init__(self) -> None:
        from torch._higher_order_ops.effects import _EffectType

        self.key = _EffectType.ORDERED
        self.mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FUNCTIONAL)
        self.first: Any = None
        if self.mode is not None:
            self.first = torch.ops.prims._make_token.default()
            self.mode._tokens[self.key] = self.first

    def finish(self) -> list[Any]:
        """The chain's last token (unwrapped) if an effectful op used the chain, else []."""
        if self.mode is None:
            return []
        last = self.mode._tokens.pop(self.key, None)
        if last is None or last is self.first:
            return []
        return [_from_functional(last)]


# ------------------------------------------------------------------ the two passes


# make_fx is not thread-safe: torch.fx's tracer keeps its patcher in a module
# global (``torch.fx._symbolic_trace.CURRENT_PATCHER``) and patches
# ``nn.Module.__call__`` process-wide, so two threads tracing at once fail with
# "CURRENT_PATCHER is None". Every trace holds this lock (re-entrant: a traced
# function may call another aotgrad function).
_TRACE_LOCK = threading.RLock()


@contextlib.contextmanager
def _tracing_modes(fake_mode: FakeTensorMode):
    # unsupported_hop_errors is outermost: _trace_errors has translated what it knows
    with (
        _TRACE_LOCK,
        unsupported_hop_errors(),
        checkpoint_regions(),
        fake_mode,
        enable_python_dispatcher(),
        FunctionalTensorMode(),
    ):
        yield


def _requires_grad_changes(wrapped: Sequence[Any], fake_args: Sequence[Any]) -> dict[int, bool]:
    """``requires_grad_()`` / ``detach_()`` on an input (not a write of a value that
    requires grad: that input gets its history from the write, which the runtime replays)."""
    return {
        i: bool(w.requires_grad)
        for i, (w, a) in enumerate(zip(wrapped, fake_args))
        if isinstance(a, torch.Tensor)
        and bool(w.requires_grad) != bool(a.requires_grad)
        and (not w.requires_grad or alias.facts.grad_fn_of(w) is None)
    }


def _finish_facts(facts: Any, fake_args: Sequence[Any], resized: dict[int, int]) -> None:
    """What the run's facts leave out: under inference mode autograd records nothing (no
    write is one it sees); inputs with empty storage and the storage sizes set inside."""
    if in_inference_mode():
        seen = alias.facts.IN_REQUIRES_GRAD | alias.facts.IN_NEW_VALUE_REQUIRES_GRAD
        facts.input_flags = [f & ~seen for f in facts.input_flags]
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


def collect_metadata(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    *,
    keep_input_mutations: bool = False,
) -> TraceMetadata:
    """Run ``fn`` once on fakes, functionalized; record mutations and output facts and
    classify them (``aotgrad.alias``). ``keep_input_mutations``: a forward-only graph
    that writes into its inputs itself."""
    grad_mode = torch.is_grad_enabled()
    shape_env = fake_mode.shape_env
    # Data-dependent ops (nonzero, item) make unbacked symbols here; only the traced run's
    # belong in the graph, so this run's are not left pending.
    suppress_pending = (
        shape_env.ignore_fresh_unbacked_symbols() if shape_env else contextlib.nullcontext()
    )
    with _tracing_modes(fake_mode), suppress_pending, _trace_errors(fn):
        wrapped = [_to_functional(a) for a in fake_args]
        before = alias.facts.snapshot(wrapped)
        chain = _EffectChain()
        calls = EagerCalls.for_inputs(wrapped, fake_args)
        with _StorageResizes(wrapped) as resizes:
            outs = _flat_call(fn, wrapped, calls=calls)
        chain.finish()
        _refuse_outputs_of_new_leaves(outs, calls.new_leaves)
        input_index = {id(w) for w in wrapped if isinstance(w, torch.Tensor)}
        outputs = [
            _output_info(o) if id(o) not in input_index else _input_output_info(o) for o in outs
        ]
        rg_changes = _requires_grad_changes(wrapped, fake_args)
        facts = alias.collect(
            wrapped,
            fake_args,
            outs,
            before,
            grad_mode=grad_mode,
            keep_in_graph=keep_input_mutations,
        )
        _finish_facts(facts, fake_args, resizes.last)
        plan = alias.classify(facts)
        bases = [outs[k]._base for k in plan.intermediate_bases]
        relaid = _relaid_inputs(plan, wrapped, fake_args)
        # in the caller's layout (see _layout_anchors): the input's own fake has it
        new_values = [fake_args[i] if i in relaid else wrapped[i] for i in plan.mutated_inputs]
        fake_fwd = [_from_functional(o) for o in [*outs, *bases, *new_values]]
    flag_off = [i for i, w in enumerate(wrapped) if id(w) in calls.flag_off]
    return TraceMetadata(
        outputs,
        fake_fwd[: len(outs)],
        plan,
        fake_fwd,
        grad_mode,
        rg_changes,
        flag_off,
        relaid,
    )


def _mark_roles(
    gm: fx.GraphModule,
    num_primals: int,
    mutated: Sequence[int] = (),
    static: Sequence[int] = (),
) -> None:
    """Record each placeholder's role, which primals the function overwrites (their
    pre-mutation value is what the graph reads; the runtime writes the new one back) and
    which are parameters/buffers (alive all step: free to save)."""
    mutated_set, static_set = set(mutated), set(static)
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        node.meta[ROLE] = PRIMAL if i < num_primals else TANGENT
        if i in mutated_set:
            node.meta[MUTATED_KEY] = True
        if i in static_set:
            node.meta[STATIC_KEY] = True


def _flatten_codegen(gm: fx.GraphModule) -> None:
    gm.graph._codegen = fx.graph.CodeGen()
    gm.recompile()


def _is_impure_keep_random(node: fx.Node) -> bool:
    """DCE predicate: keep mutations, drop unused random ops (their values are not observable)."""
    if node.op in ("placeholder", "output"):
        return True
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable
    return False


def _clean(gm: fx.GraphModule) -> None:
    """Drop ``aten.detach`` (autograd wraps the compiled graphs from outside, so inside
    them a detach is the identity: keeping it costs a dispatch per call and makes two
    names for one saved buffer), then dead code."""
    for node in list(gm.graph.find_nodes(op="call_function", target=torch.ops.aten.detach.default)):
        node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
        gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code(is_impure_node=_is_impure_keep_random)
    gm.recompile()


def _stale_message(t: Any, version: int) -> str:
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.dtype} {list(t.shape)}] is at version {t._version}; "
        f"expected version {version} instead (raised as eager raises it; aotgrad traced it)"
    )


def _tag_traced_by_forward() -> None:
    """Tag the nodes traced so far as the forward's, as torch's joint tracer does: the
    default partition computes the later ones in the backward (``vocab.PARTITIONER_TAG``)."""
    mode = get_proxy_mode()
    if mode is not None:
        for node in mode.tracer.graph.nodes:
            node.meta.setdefault(PARTITIONER_TAG, TRACED_BY_FORWARD)


class _JointTrace:
    """What one joint trace learns as it runs: the forward decides which inputs run on a
    clone and how many effect tokens it leaves; the backward, which inputs it writes and
    whether it reads a saved tensor that was written after it was saved."""

    def __init__(self, fn: Callable[..., Any], fake_args: Sequence[Any], meta: TraceMetadata):
        self.fn = fn
        self.fake_args = fake_args
        self.metadata = meta
        plan = meta.plan
        # Inputs that require grad and are written: the function runs on a clone, so that
        # autograd.grad differentiates with respect to the value from before the write.
        self.requires_grad = [getattr(a, "requires_grad", False) for a in fake_args]
        self.cloned = {
            i
            for i, v in enumerate(plan.inputs)
            if self.requires_grad[i] and v != alias.InputVerdict.UNMUTATED
        }
        self.num_tokens = 0
        self.written_in_backward: list[int] = []
        self.backward_version_deltas: list[int] = []
        self.stale: list[str] = []
        self.relaid = meta.relaid_inputs
        self.packed: set[int] = set()
        self.saved_outputs: list[int] = []

    def run(self, primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        """The traced function: the forward, then the backward of its differentiable
        outputs (``JointGraph`` says what it returns)."""
        plan = self.metadata.plan
        fp = [_to_functional(p) for p in primals]
        ft = [_to_functional(t) for t in tangents]
        chain = _EffectChain()
        with torch.enable_grad():
            call = [p.clone() if i in self.cloned else p for i, p in enumerate(fp)]
            anchors = _layout_anchors(call, self.relaid)
        outs = self._forward(call)
        fwd_tokens = chain.finish()
        self.saved_outputs = [
            k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and id(o) in self.packed
        ]
        _tag_traced_by_forward()
        self.num_tokens = len(fwd_tokens)
        chain = _EffectChain()  # the backward orders its own effects
        fwd_values = [
            *outs,
            *(outs[k]._base for k in plan.intermediate_bases),
            *(_new_value(call, anchors, i) for i in self.metadata.mutated_inputs),
        ]
        per_primal = self._backward(fp, ft, call, fwd_values)
        fwd = [_from_functional(v) for v in fwd_values]
        bwd = [_from_functional(g) for g in per_primal]
        # Inputs the backward writes (a custom Function's backward updating a saved input):
        # their new values follow the gradients; the runtime copies them in.
        bwd += [_from_functional(call[i]) for i in self.written_in_backward]
        return fwd + fwd_tokens, bwd + chain.finish()

    def _forward(self, call: list[Any]) -> list[Any]:
        """The function, under the caller's grad mode (its own enable_grad / no_grad
        blocks decide what has autograd history, as in eager), saved tensors checked."""
        with (
            torch.set_grad_enabled(self.metadata.grad_mode),
            torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack),
        ):
            return _flat_call(self.fn, call, self.fake_args)

    # Saved tensors keep their version: one written after it was saved fails eager's
    # check when the backward reads it, so the compiled backward raises as eager does
    # (the trace itself goes on: the forward alone must still work).
    def _pack(self, t: Any) -> Any:
        self.packed.add(id(t))
        return t, t._version, (tuple(t.shape), tuple(t.stride()), t.storage_offset())

    def _unpack(self, saved: tuple[Any, int, Any]) -> Any:
        t, version, layout = saved
        if t._version == version:
            return t
        if not self.stale:
            self.stale.append(_stale_message(t, version))
        # its metadata may have changed too (x.unsqueeze_(0)): the backward is traced
        # on the layout it saved (it raises before it runs anyway)
        if (tuple(t.shape), tuple(t.stride()), t.storage_offset()) != layout:
            return t.as_strided(*layout)
        return t

    def _backward(
        self, fp: list[Any], ft: list[Any], call: list[Any], fwd_values: list[Any]
    ) -> list[Any]:
        """One gradient per primal (None where it needs none), recording which inputs
        the backward writes and how many times."""
        needs = [p for p in fp if isinstance(p, torch.Tensor) and p.requires_grad]
        diff_outs = [fwd_values[i] for i in self.metadata.tangent_outputs]
        refuse_deferred_autograd_errors(diff_outs)
        versions = alias.facts.versions(call)
        grads: Sequence[Any] = ()
        if needs and diff_outs:
            # eager's backward runs where the caller calls it, outside the forward's
            # autocast: its ops keep the dtypes of what they differentiate (an
            # autocast(enabled=False) block's matmul has a float32 backward)
            with torch._C._DisableAutocast():
                grads = torch.autograd.grad(diff_outs, needs, ft, allow_unused=True)
        after = alias.facts.versions(call)
        for i, (a, b) in enumerate(zip(versions, after)):
            if a != b:
                self.written_in_backward.append(i)
                self.backward_version_deltas.append(b - a)
        it = iter(grads)
        return [
            (next(it, None) if isinstance(p, torch.Tensor) and p.requires_grad else None)
            for p in fp
        ]

    def refuse_backward_mutations(self) -> None:
        """Inputs the backward writes that the forward writes too, or that require grad:
        not supported (the rule table refuses)."""
        plan = self.metadata.plan
        refused = [
            i
            for i in self.written_in_backward
            if plan.inputs[i] != alias.InputVerdict.UNMUTATED or self.requires_grad[i]
        ]
        if refused:
            alias.refuse_backward_mutations(plan, refused)


def trace_joint(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    metadata: TraceMetadata,
    decompositions: dict[Any, Any] | None = None,
    static_inputs: Sequence[int] = (),
) -> JointGraph:
    """Trace forward and backward of ``fn`` into one graph (see ``JointGraph``)."""
    state = _JointTrace(fn, fake_args, metadata)

    def joint(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
        return state.run(primals, tangents)  # make_fx names placeholders after these

    with fake_mode:
        fake_tangents = [
            _tangent_like(metadata.fake_fwd_outputs[i]) for i in metadata.tangent_outputs
        ]
    with _tracing_modes(fake_mode), _trace_errors(fn):
        gm = make_fx(joint, decomposition_table=decompositions or {})(
            list(fake_args), fake_tangents
        )
    state.refuse_backward_mutations()
    _flatten_codegen(gm)
    _clean(gm)
    _mark_roles(gm, len(fake_args), metadata.mutated_inputs, static_inputs)
    num_user_outputs = len(metadata.outputs)
    num_fwd = num_user_outputs + metadata.num_intermediate_bases + len(metadata.mutated_inputs)
    return JointGraph(
        gm=gm,
        metadata=metadata,
        fake_mode=fake_mode,
        fake_primals=list(fake_args),
        fake_tangents=fake_tangents,
        num_user_outputs=num_user_outputs,
        num_fwd_outputs=num_fwd + state.num_tokens,
        num_tokens=state.num_tokens,
        backward_mutations=dict(zip(state.written_in_backward, state.backward_version_deltas)),
        backward_error=state.stale[0] if state.stale else None,
        saved_outputs=[k for k in state.saved_outputs if _read_by_backward(gm, k)],
    )


def _read_by_backward(gm: fx.GraphModule, k: int) -> bool:
    """Whether the joint graph's backward reads forward output ``k`` (or a forward view
    of it): eager saved it for a backward node the outputs reach. One saved by an op
    whose backward the outputs never reach (``y.sin().detach()`` saves ``y``) is never
    checked by eager, so it is not watched."""
    outs = gm.graph.output_node().args[0]
    node = outs[k] if isinstance(outs, (list, tuple)) and k < len(outs) else None
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if not isinstance(n, fx.Node) or n in seen:
            continue
        seen.add(n)
        for user in n.users:
            if user.op == "output":
                continue
            if user.meta.get(PARTITIONER_TAG) != TRACED_BY_FORWARD:
                return True
            if getattr(user.target, "is_view", False):
                stack.append(user)
    return False


def trace_inference(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    metadata: TraceMetadata,
    decompositions: dict[Any, Any] | None = None,
) -> InferenceGraph:
    """Trace the forward alone. Outputs as in the joint graph's forward: the user's, the
    intermediate bases, the new values of mutated inputs. Inputs the plan keeps in the
    graph (``collect_metadata(keep_input_mutations=True)``) are written by the graph itself (``aten.copy_``)."""
    plan = metadata.plan

    def forward(primals: list[Any]) -> list[Any]:
        fp = [_to_functional(p) for p in primals]
        chain = _EffectChain()
        anchors = _layout_anchors(fp, metadata.relaid_inputs)
        outs = _flat_call(fn, fp, fake_args)
        values = [
            *outs,
            *(outs[k]._base for k in plan.intermediate_bases),
            *(_new_value(fp, anchors, i) for i in plan.mutated_inputs),
        ]
        flat = [_from_functional(o) for o in values]
        for i in plan.in_graph_mutations:
            primals[i].copy_(_from_functional(fp[i]))
        return flat + chain.finish()

    # Under the caller's grad mode, as the function would run (torch.is_grad_enabled()).
    with _tracing_modes(fake_mode), _trace_errors(fn), torch.set_grad_enabled(metadata.grad_mode):
        gm = make_fx(forward, decomposition_table=decompositions or {})(list(fake_args))
    _flatten_codegen(gm)
    _clean(gm)
    _mark_roles(gm, len(fake_args))
    return InferenceGraph(gm, metadata, fake_mode, list(fake_args), len(metadata.outputs))


# ------------------------------------------------------------------------ errors

_TORCH_DIRS = (torch.__file__.rsplit("/", 1)[0], __file__.rsplit("/", 1)[0])


def _user_frame(tb: Any) -> str:
    """The innermost frame of the traceback that is user code (not torch, not aotgrad)."""
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith(_TORCH_DIRS)]
    if not frames:
        return "<unknown location>"
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.line})"


def _failing_op(exc: BaseException) -> str:
    func = getattr(exc, "func", None)
    if func is not None:
        return str(func)
    return type(exc).__name__


@contextlib.contextmanager
def _trace_errors(fn: Callable[..., Any]):
    """Turn torch's tracing failures into a ``TraceError`` naming the op and the user's line."""
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        yield
    except (TraceError, UnsupportedError):
        raise
    except UnsupportedOperatorException as e:
        raise TraceError(
            f"cannot trace {name}: op {_failing_op(e)} has no fake (meta) kernel; "
            f"called at {_user_frame(e.__traceback__)}"
        ) from e
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        raise TraceError(
            f"cannot trace {name}: op {_failing_op(e)} has a data-dependent output; "
            f"called at {_user_frame(e.__traceback__)}"
        ) from e
    except GuardOnDataDependentSymNode as e:
        raise TraceError(
            f"cannot trace {name}: data-dependent control flow (a Python branch or "
            f"conversion on a tensor's value) at {_user_frame(e.__traceback__)}"
        ) from e
    except RuntimeError as e:
        msg = str(e)
        if "data-dependent" in msg or "Cannot access data pointer" in msg or "item()" in msg:
            raise TraceError(
                f"cannot trace {name}: data-dependent operation at "
                f"{_user_frame(e.__traceback__)}: {msg.splitlines()[0]}"
            ) from e
        raise
