"""A gradient taken with ``create_graph=True`` through a compiled function: the function
replayed eagerly, and differentiated by autograd.

``g = autograd.grad(D(x).sum(), x, create_graph=True)`` and then a backward through ``g``
(a gradient penalty, a Hessian-vector product): eager's ``g`` carries its own graph.
The compiled backward cannot give one: its graphs were traced with ``detach()`` made an
alias (functionalization), so differentiating them would be silently wrong through any
detached value. So where the backward runs under ``create_graph``, the call's function
is run again, eagerly, on the call's inputs (``flat_fn``: the function the graphs were
traced from, over the graph inputs), and autograd gives the gradients of that run, with
their graph. Eager's arithmetic, eager's ``detach()``.

Only for a call that eager's replay reproduces: nothing the runtime does beyond
returning the outputs (``ForwardLayout.plain``) but views rebuilt of inputs or
intermediates (the replay differentiates the view's ``._base`` for the intermediate the
compiled node returns) and writes to inputs (under ``no_grad``: running statistics; or
recorded by autograd: the caller's tensor then has the write's node, so the copy of it
keeps its history from before the call, its gradient and graph reaching that; the replay
runs on copies of those inputs as they were before the call, kept by the call where they
are small, ``KEEP_WRITTEN_BYTES``); no random op (the replay would
draw again), no hook of the function's called by the backward (under autocast, the replay
runs under the call's autocast). The inputs
are kept for the replay: leaves (parameters, the ``x`` of a gradient penalty, data) by
reference; activations weakly (a strong reference would keep one alive until the
backward where min-cut chose not to save it): one freed by then
is refused with a message, as are the other cases. Each input that requires grad enters
the replay through a node of its own (``_own_node``): autograd's gradient for it is the
call's own partial derivative, as the compiled node's is.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from ..errors import UnsupportedError
from ..hook_calls import calls_hooks
from ..vocab import OutputVerdict
from .call_inputs import EDGELESS
from .saved_tensors import BACKWARD_TWICE

__all__ = [
    "GraphFreed",
    "Replay",
    "first_order_only",
    "freed_by_replay",
    "keep_inputs",
    "kept_inputs",
    "refused",
    "replay_for",
    "second_order",
    "watch_freed",
]

_REFUSED = (
    "aotgrad: double backward through a compiled function (a gradient taken with "
    "create_graph=True, then differentiated: a gradient penalty) {why}; compile the "
    "function with the outer backward inside it instead"
)


def refused(why: str) -> UnsupportedError:
    return UnsupportedError(_REFUSED.format(why=why))


def first_order_only(why: str) -> Callable[[Callable[[list[Any]], Any], list[Any]], Any]:
    """How a backward without a replay runs under ``create_graph=True``: ``bw`` on
    ``args``, its results given a grad_fn that refuses (``why``) a second backward with
    a clear message instead of returning zeros (a gradient taken with ``create_graph``
    and not differentiated again is fine)."""

    def run(
        bw: Callable[[list[Any]], Any],
        args: list[Any],
        reason: str | None = None,
        inputs: Sequence[Any] = (),
    ) -> Any:
        """``inputs``: the call's inputs that require grad (``kept_inputs``), edges of the
        refusing node: a second backward toward them (``backward(inputs=[x])``,
        ``autograd.functional.hvp``) reaches it and raises, where without them the engine
        found no path and gave None or zeros silently (a blind second-order suite)."""
        refusal = reason or why  # (``reason``: the call's own, ``Replay.why_not``)
        n = 1 + len(inputs)

        class _CompiledBackward(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *a: Any) -> Any:
                return tuple(bw(list(a[n:])))

            @staticmethod
            def backward(ctx: Any, *grads: Any) -> Any:
                raise refused(refusal)

        return _CompiledBackward.apply(torch.empty(0, requires_grad=True), *inputs, *args)

    return run


def keep_inputs(ctx: Any, args: Sequence[Any]) -> None:
    """The call's inputs that require grad, weakly (an activation kept would stay alive
    until the backward), for ``first_order_only``'s edges."""
    ctx.first_order_inputs = [
        weakref.ref(a) for a in args if isinstance(a, torch.Tensor) and a.requires_grad
    ]


def kept_inputs(ctx: Any) -> list[Any]:
    """Those of ``keep_inputs`` (or the replay's) still alive, that require grad."""
    kept = getattr(ctx, "first_order_inputs", None)
    if kept is None:
        kept = getattr(ctx, "replay_inputs", ())
    found = (a() if isinstance(a, weakref.ref) else a for a in kept)
    return [a for a in found if isinstance(a, torch.Tensor) and a.requires_grad]


def second_order(replay: Any) -> tuple[Replay | None, Callable[..., Any]]:
    """From ``replay_for``'s answer: the replay (None: none), and how the compiled
    backward runs under ``create_graph`` (its results refusing a second backward)."""
    if isinstance(replay, Replay):  # (a call it does not run: ``Replay.why_not``)
        return replay, first_order_only(_TOO_LARGE)
    return None, first_order_only(replay or "is not supported")


def _random(gm: Any) -> bool:
    return any(
        n.op == "call_function"
        and isinstance(n.target, torch._ops.OpOverload)
        and torch.Tag.nondeterministic_seeded in n.target.tags
        for n in gm.graph.nodes
    )


def replay_for(
    flat_fn: Callable[..., Any] | str,
    layout: Any,
    graphs: Sequence[Any],
    static: Sequence[int] = (),
) -> Any:
    """The :class:`Replay` of a call compiled from ``flat_fn`` (``static``: the inputs
    that are parameters and buffers), or the reason there is none (a string; ``flat_fn``
    itself where the caller knows one)."""
    if isinstance(flat_fn, str):
        return flat_fn
    written = _written_inputs(layout)
    bases = _intermediate_bases(layout) if written is not None else None
    if bases is not None and not _post_write_replayable(layout):
        bases = None
    if bases is None:
        return (
            "is not supported where the function writes an input autograd records the "
            "write of, changes an input's metadata, or returns an alias other than a view"
        )
    if any(_random(g) for g in graphs if g is not None):
        return "is not supported for a function with random ops (a replay would draw again)"
    if any(calls_hooks(g) for g in graphs):
        return "is not supported for a function that registers gradient hooks"
    recorded = [i for i, g in zip(layout.mutated_inputs, layout.mutation_with_grad) if g]
    replay = Replay(flat_fn, static, bases, written, recorded)
    replay.made_leaves = [i for i, made in layout.requires_grad_changes.items() if made]
    return replay


_OF_INPUT = (OutputVerdict.IS_INPUT, OutputVerdict.ALIAS_OF_INPUT)
_OF_OUTPUT = OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT
_OF_INTERMEDIATE = (
    OutputVerdict.ALIAS_OF_INTERMEDIATE,
    OutputVerdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
)


def _written_inputs(layout: Any) -> list[int] | None:
    """The inputs the function writes (under ``no_grad``: running statistics; or with
    autograd recording: the replay then runs on a copy of the value before the call
    that keeps the input's history from then, ``Replay.keep``); None where the replay
    does not reproduce the call: a metadata change, another storage given, effect
    tokens, or anything else the runtime does beyond returning the outputs (``plain``)."""
    # (an output returned twice is one tensor: the replay's gradients are per position)
    # (leaves the function made require grad: the replay runs it on them as called,
    # ``_as_called``, and makes them so again)
    made = all(layout.requires_grad_changes.values())
    rest = replace(
        layout,
        output_aliases=[],
        mutated_inputs=[],
        mutation_with_grad=[],
        version_deltas={},
        same_as={},
        merged_outputs=[],  # (detached in the epilogue: no tangent reaches them)
        output_versions={},  # (the counters of outputs the replay makes afresh)
        requires_grad_changes={} if made else layout.requires_grad_changes,
    )
    written = list(layout.mutated_inputs)
    if not rest.plain or layout.storage_sets or layout.left_then_written:
        return None
    if set(layout.version_deltas) - set(written) or layout.num_tokens:
        return None
    return written


def _post_write_replayable(layout: Any) -> bool:
    """Whether the link onto written inputs' new nodes (``post_write_link``) can hand
    them the replay's gradients: none, or each linked input's own new-value tangent
    taking it back (``post_write_tangents``), no written value linked onto another's
    node, no synthetic-base member."""
    if not layout.post_write_inputs:
        return True
    return bool(
        len(layout.post_write_tangents) == len(layout.post_write_inputs)
        and not layout.post_write_values
        and not layout.post_write_passed
        and not layout.post_write_members
    )


def _intermediate_bases(layout: Any) -> list[int] | None:
    """Per intermediate base the compiled forward returns, a user output eager returns as
    a view of it (the replay differentiates that view's ``._base``); None where an output
    is rebuilt otherwise than as a plain view (a detached alias, a leaf, routed) or made
    of another output. Views of inputs (and inputs returned) and of user outputs are
    rebuilt outside the compiled node: their gradients are eager's own."""
    bases: dict[int, int] = {}
    for a in layout.output_aliases:
        # (a view of an input made of another output: of the caller's, outside the node)
        made_of_output = a.base_output >= 0 and a.verdict != OutputVerdict.ALIAS_OF_INPUT
        simple = not (a.detached or a.routed or a.base_leaf or made_of_output)
        if not simple or a.verdict not in (*_OF_INPUT, *_OF_INTERMEDIATE, _OF_OUTPUT):
            return None
        if a.verdict in _OF_INTERMEDIATE:
            bases.setdefault(a.source, a.index)
    if sorted(bases) != list(range(layout.num_intermediate_bases)):
        return None
    return [bases[b] for b in range(layout.num_intermediate_bases)]


_ANY_AUTOCAST = torch._C._is_any_autocast_enabled


def _autocast_now() -> tuple[tuple[str, torch.dtype], ...]:
    """The autocast contexts a call runs under: ``(device type, dtype)`` of each enabled."""
    return tuple(
        (d, torch.get_autocast_dtype(d))
        for d in ("cpu", "cuda", "xpu", "mps")
        if torch.is_autocast_enabled(d)
    )


@contextlib.contextmanager
def _as_called(inputs: Sequence[Any], gradless: Sequence[int]) -> Any:
    """The leaves of ``gradless`` (no grad when called) that require grad now (the
    function or the caller made them, soak 247736) without it while the replay runs its
    forward: as eager's forward, it takes them in as constants; the replay's nodes save
    the leaves themselves, so its second-order graph reaches them, as eager's does."""
    flipped = {
        id(t): t
        for i in gradless
        if isinstance(t := inputs[i], torch.Tensor) and t.requires_grad and t.is_leaf
    }.values()
    for t in flipped:
        t.requires_grad_(False)
    try:
        yield
    finally:
        for t in flipped:
            t.requires_grad_(True)


def _own_node(t: Any) -> Any:
    """``t`` through a node of its own for the replay: the gradient autograd gives for it
    is then this call's part only, not also what reaches ``t`` through another input's
    history (the output of an earlier call of the same function, given ``w`` again:
    ``cf(cf(x, w), w)``; that part reaches ``w`` through the earlier call's own node)."""
    return t.view_as(t) if isinstance(t, torch.Tensor) and t.requires_grad else t


#: The most bytes of written inputs a call copies for a replay (running statistics are
#: far smaller; a larger write is refused at the second-order backward, with the reason).
KEEP_WRITTEN_BYTES = 4 << 20


def _values_before(
    args: Sequence[Any], written: Sequence[int], recorded: Sequence[int] = ()
) -> dict[int, Any] | None:
    """Copies of the inputs the call writes as they are before it, for the replay to run
    on (None: too large to keep); of those it writes with autograd recording
    (``recorded``), copies with the input's history from before the call (the caller's
    tensor gets the write's node): the replay's gradient for the input, and its graph,
    reach that history."""
    tensors = [args[i] for i in written if isinstance(args[i], torch.Tensor)]
    if sum(t.numel() * t.element_size() for t in tensors) > KEEP_WRITTEN_BYTES:
        return None
    kept = {}
    for i in written:
        a = args[i]
        if isinstance(a, torch.Tensor):
            history = i in recorded and a.requires_grad
            with torch.enable_grad() if history else torch.no_grad():
                kept[i] = a.clone()
    return kept


def _versions(args: Sequence[Any], written: Sequence[int]) -> dict[int, int]:
    """The version count of each input the replay reads as it is then (not the copies of
    ``written`` ones): one moved by the backward was written after the call."""
    skip = set(written)
    return {
        i: a._version
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and i not in skip and not a.is_inference()
    }


class _ValueBefore(torch.autograd.Function):
    """The input's value before the call, its gradient the input's (an identity)."""

    @staticmethod
    def forward(ctx: Any, now: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        return before.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g, None


_TOO_LARGE = (
    f"is not supported where the function writes more than {KEEP_WRITTEN_BYTES >> 20} MiB "
    "of its inputs (their values before the call are not kept)"
)


def _as_before(called: list[Any], before: dict[int, Any]) -> None:
    """In ``called`` (the replay's arguments), the written inputs replaced by their values
    before the call (the replay writes those copies, not the caller's tensors), each one's
    gradient reaching the input it replaces (where the gradients are taken)."""
    for i, old in before.items():
        now = called[i]
        called[i] = _ValueBefore.apply(now, old) if now.requires_grad else old.clone()


class Replay:
    """The function eagerly, on one call's inputs, under the second-order backward."""

    def __init__(
        self,
        flat_fn: Callable[..., Any],
        static: Sequence[int],
        bases: Sequence[int] = (),
        written: Sequence[int] = (),
        recorded: Sequence[int] = (),
    ) -> None:
        self.flat_fn = flat_fn
        self.static = frozenset(static)
        self.bases = list(bases)  # (``_intermediate_bases``)
        self.written = list(written)  # (``_written_inputs``)
        self.recorded = list(recorded)  # (of those, written with autograd recording)
        self.made_leaves: list[int] = []  # (``requires_grad_()`` by the function: ``_as_called``)
        self.others: list[int] | None = None  # (known at the first call)

    def keep(self, ctx: Any, args: Sequence[Any]) -> None:
        """The call's inputs, for a replay: parameters and buffers (alive with their
        module) and other leaves by reference, activations weakly (their graph keeps what
        their backward needs and no more)."""
        others = self.others
        if others is None:
            others = self.others = [i for i in range(len(args)) if i not in self.static]
        kept: Any = args
        gradless, stand_ins = list(self.made_leaves), []
        for i in others:
            a = args[i]
            # (detached for the node, ``call_inputs.edgeless_inputs``: the function saw the
            # caller's tensor, may branch on its flag, and eager's nodes save a leaf; an
            # activation is not kept, a leaf that requires grad stands in, soak 246639)
            if (original := getattr(a, EDGELESS, None)) is not None:
                if original.grad_fn is not None:
                    stand_ins.append(i)
                    continue
                kept = list(args) if kept is args else kept
                kept[i] = a = original
            if isinstance(a, torch.Tensor) and a.grad_fn is not None:
                if kept is args:
                    kept = list(args)
                kept[i] = weakref.ref(a)
            elif isinstance(a, torch.Tensor) and not a.requires_grad:
                gradless.append(i)
        ctx.replay_inputs = kept
        # (a leaf the function, or the caller since, made require grad: the call read it
        # as a constant, soak 247736)
        ctx.replay_gradless = gradless
        ctx.replay_stand_ins = stand_ins
        ctx.graph_freed = GraphFreed()
        ctx.replay_versions = _versions(args, self.written)
        ctx.replay_autocast = _autocast_now() if _ANY_AUTOCAST() else ()
        if self.written:
            ctx.replay_before = _values_before(args, self.written, self.recorded)

    def why_not(self, ctx: Any) -> str | None:
        """Why the call's replay would not be eager's, or None: it kept no copies of the
        inputs it wrote (too large), or an input was written after the call (the replay
        would read its new value; eager's backward reads what the call saved, or raises
        where it saved that input: soak 244176, ``sigmoid(x)`` replayed on the ``x`` the
        caller doubled since)."""
        if self.written and ctx.replay_before is None:
            return _TOO_LARGE
        for i, v in ctx.replay_versions.items():
            a = ctx.replay_inputs[i]
            a = a() if isinstance(a, weakref.ref) else a
            if a is not None and a._version != v:
                return (
                    f"is not supported where an input (input {i}) was written after the "
                    "call: its value then is not kept"
                )
        return None

    def gradients(self, ctx: Any, grads: Sequence[Any]) -> tuple[Any, ...]:
        """Each input's gradient from the outputs' ``grads``, with its graph."""
        inputs, outs = self._replayed(ctx)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and _differentiable(o)]
        wanted = [
            i for i, a in enumerate(inputs) if isinstance(a, torch.Tensor) and a.requires_grad
        ]
        found: Sequence[Any] = ()
        if pairs and wanted:
            found = torch.autograd.grad(
                [o for o, _ in pairs],
                [inputs[i] for i in wanted],
                [g for _, g in pairs],
                create_graph=True,
                allow_unused=True,
            )
        result: list[Any] = [None] * len(inputs)
        for i, g in zip(wanted, found):
            result[i] = g
        watch_freed(ctx, outs, inputs)
        return tuple(result)

    def output_gradient(self, ctx: Any, grads: dict[int, Any], k: int) -> Any:
        """The gradient at forward output ``k`` from the outputs' ``grads`` (by
        position) that are computed from it, with its graph (``fed_outputs_link``)."""
        _, outs = self._replayed(ctx)
        pairs = [(outs[j], g) for j, g in grads.items() if _differentiable(outs[j])]
        if not pairs:
            return None
        (found,) = torch.autograd.grad(
            [o for o, _ in pairs],
            outs[k],
            [g for _, g in pairs],
            create_graph=True,
            allow_unused=True,
        )
        return found

    def gradients_after_writes(
        self, ctx: Any, grads: dict[int, Any], inputs: Sequence[int]
    ) -> list[Any]:
        """The gradient at each of ``inputs``' new node (after the function's write) from
        the forward outputs' ``grads`` (by position), with its graph
        (``post_write_link``, where the replay runs)."""
        _, outs = self._replayed(ctx)
        values = {i: outs[len(outs) - len(self.written) + m] for m, i in enumerate(self.written)}
        pairs = [(outs[j], g) for j, g in grads.items() if _differentiable(outs[j])]
        targets = [values.get(i) for i in inputs]
        wanted = [t for t in targets if _differentiable(t)]
        if not pairs or not wanted:
            return [None] * len(inputs)
        found = iter(
            torch.autograd.grad(
                [o for o, _ in pairs],
                wanted,
                [g for _, g in pairs],
                create_graph=True,
                allow_unused=True,
            )
        )
        return [next(found) if _differentiable(t) else None for t in targets]

    def _replayed(self, ctx: Any) -> tuple[list[Any], list[Any]]:
        """The call's inputs, each through a node of its own, and the forward's outputs
        (user outputs, then the intermediate bases) of the function run again on them."""
        inputs = [a() if isinstance(a, weakref.ref) else a for a in ctx.replay_inputs]
        for i in self.recorded:  # (the caller's tensor has the write's node now)
            inputs[i] = ctx.replay_before[i]
        for i in ctx.replay_stand_ins:
            inputs[i] = inputs[i].detach().requires_grad_()
        if any(a is None for a in inputs):
            raise refused(
                "needs the call's inputs to run it again, and one was freed before this "
                "backward (keep a reference to it)"
            )
        with torch.enable_grad(), contextlib.ExitStack() as autocast:
            for device, dtype in ctx.replay_autocast:  # (the call's autocast, again)
                autocast.enter_context(torch.autocast(device, dtype))
            autocast.enter_context(_as_called(inputs, ctx.replay_gradless))
            inputs = [_own_node(a) for a in inputs]
            called = list(inputs)
            if self.written:
                _as_before(called, ctx.replay_before)
            outs = list(self.flat_fn(*called))
        outs += [self._base_of(outs[j]) for j in self.bases]
        # (the written inputs' new values: those the function wrote with autograd
        # recording, the tensors it wrote)
        outs += [called[i] if i in self.recorded else None for i in self.written]
        return inputs, outs

    @staticmethod
    def _base_of(view: Any) -> Any:
        """The intermediate the compiled forward returned for a view output: the replayed
        view's ``._base``."""
        base = view._base if isinstance(view, torch.Tensor) else None
        if base is None:
            raise refused("is not supported here (an output view the replay made no view)")
        return base


class GraphFreed:
    """The backward pass that freed the compiled call's graph (one that did not retain
    it: ``loss.backward()``, ``grad(..., create_graph=True, retain_graph=False)``), or
    None: eager's second-order graph runs through the forward nodes that pass freed, and
    a later pass through it raises; the replay's saving nodes check it
    (``watch_freed``)."""

    task: int | None = None

    def note(self) -> None:
        """Called by the compiled node's backward: the pass now, where it retains nothing."""
        if not torch._C._autograd._get_current_graph_task_keep_graph():
            self.task = torch._C._current_graph_task_id()

    def check(self, *_: Any) -> None:
        if self.task is not None and self.task != torch._C._current_graph_task_id():
            raise RuntimeError(BACKWARD_TWICE)


def watch_freed(ctx: Any, outs: Sequence[Any], inputs: Sequence[Any]) -> None:
    """Eager's forward nodes are the ones its second-order graph runs through: a backward
    through that graph that does not retain it (a gradient penalty's) frees what they
    saved, and a later backward through the forward raises. The replay's nodes stand for
    them: each that saves a tensor gets a post-hook noting, when a pass that does not
    retain the graph runs it, the forward outputs (by position) whose backward reaches it
    (``ctx.replay_freed``: each with the pass that freed it; read by
    ``freed_by_replay``)."""
    freed: dict[int, int] = getattr(ctx, "replay_freed", None) or {}
    ctx.replay_freed = freed
    boundary = {id(a.grad_fn) for a in inputs if isinstance(a, torch.Tensor)}
    reach: dict[int, tuple[Any, set[int]]] = {}
    for j, o in enumerate(outs):
        stack = [getattr(o, "grad_fn", None)]
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen or id(node) in boundary:
                continue
            seen.add(id(node))
            reach.setdefault(id(node), (node, set()))[1].add(j)
            stack.extend(n for n, _ in node.next_functions)
    for node, js in reach.values():
        # (a write to a view: ``CopySlices`` runs the write's node, which saved; the
        # second-order graph reaches that node itself, through the result it saved)
        for saving in (node, getattr(node, "_wrapped_node", None)):
            if saving is not None and _saves(saving):
                saving.register_hook(_noting(freed, frozenset(js)))
                saving.register_prehook(ctx.graph_freed.check)  # (the other order)


def _saves(node: Any) -> bool:
    """Whether ``node`` holds a saved tensor (what a pass that does not retain the graph
    frees, and a later pass through it raises on): a custom Function's
    ``save_for_backward``, a native node's tensor-valued ``_saved_`` fields (sizes, dims
    and scalars stay readable: eager's second pass through ``sum`` or ``cat`` runs)."""
    if isinstance(node, torch.autograd.function.BackwardCFunction):
        return bool(node.saved_tensors)
    return any(
        _is_tensors(getattr(node, name, None)) for name in dir(node) if name.startswith("_saved_")
    )


def _is_tensors(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(isinstance(v, torch.Tensor) for v in value)
    return isinstance(value, torch.Tensor)


def _noting(freed: dict[int, int], outputs: frozenset[int]) -> Callable[..., None]:
    def hook(*_: Any) -> None:
        if not torch._C._autograd._get_current_graph_task_keep_graph():
            task = torch._C._current_graph_task_id()
            freed.update(dict.fromkeys(outputs, task))

    return hook


def freed_by_replay(ctx: Any, reached: set[int]) -> bool:
    """Whether a backward reaching forward outputs ``reached`` (by position) runs through
    a node an earlier second-order backward freed (``watch_freed``): eager's raises there
    (in the pass that frees them, a gradient penalty's ``(loss + g.pow(2).sum())
    .backward()``, eager runs each node once, before it frees it)."""
    freed = getattr(ctx, "replay_freed", None)
    if not freed:
        return False
    task = torch._C._current_graph_task_id()
    return any(freed.get(k, task) != task for k in reached)


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.requires_grad
