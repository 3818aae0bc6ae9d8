"""Stage 6, with autograd: the compiled forward and backward wrapped in a
``torch.autograd.Function``.

The forward graph returns the user's outputs, then the intermediate bases of aliased
outputs, then the new values of mutated inputs, then the saved values (tensors, then
SymInts). The Function keeps the saved values on ``ctx`` (``saved_tensors.py`` says what
goes to ``ctx.save_for_backward`` and what is kept beside it) and feeds them, with the
tangents, to the compiled backward. What it does per call is decided once per layout
(``_TrainingPlan``). Its forward runs the graph, sets the version counts eager leaves on
fresh outputs, saves, and marks the outputs that are not differentiable. Its backward
makes the tangents, makes eager's checks of what eager saved (``saved_checks.py``), runs
the graph, writes back the inputs the backward writes, and gives None where no tangent
reached, as eager's engine does.

``make_training_function`` puts around the Function what each call needs: the inputs as
it must take them (``call_inputs.py``), the epilogue after it (``epilogue.py``), and the
links of outputs onto the nodes that eager's histories pass through
(``post_write_link.py``, ``fed_outputs_link.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .call_inputs import edgeless_inputs, readable_inputs, stand_in_leaf, unhooked_views
from .double_backward import freed_by_replay, keep_inputs, kept_inputs, second_order
from .epilogue import Epilogue, in_old_layouts
from .fed_outputs_link import (
    FedOutputsLink,
    less_handed,
    less_handed_given,
    less_handed_inputs,
    task,
)
from .gradients import plain_tangent, plus, unreached_to_none, unshared, write_back, zeros_like
from .graph_calls import BoxedFn, marking_failures, without_autocast
from .layout import ForwardLayout
from .output_hooks import hooks_on_defined_gradients
from .outputs import (
    distinct_differentiable,
    fresh_versions,
    separate_non_differentiable,
    unview,
    views_of_no_output,
)
from .partial_backward import IndependentOutputs, tangent_components
from .post_write_link import PostWriteLink
from .saved_checks import check_reached, check_read, reads_run
from .saved_tensors import (
    BACKWARD_TWICE,
    aliases_of_written_inputs,
    copies_of_mutated_inputs,
    data_of_inputs,
    keep_loose,
    save,
    saved_tensors,
    views_of_new_data,
    views_of_outputs_detached,
)
from .unreached_hooks import hooked_non_leaves, quiet_unreached


def _call(bw: BoxedFn, args: list[Any]) -> Any:
    return bw(args)


def _keeps_graph() -> bool:
    """Whether the running backward was asked to ``retain_graph``."""
    return bool(torch._C._autograd._get_current_graph_task_keep_graph())


class _TrainingPlan:
    """What the compiled ``autograd.Function`` does per call, decided once per layout:
    the forward (run, settle versions, save, mark outputs) and the backward (tangents,
    run, write back, unreached inputs)."""

    def __init__(self, fw: BoxedFn, bw: BoxedFn, layout: ForwardLayout, *later: Any) -> None:
        self.fw, self.bw = without_autocast(fw), without_autocast(bw)
        # the backward per set of unreached tangents; how a create_graph backward runs
        self.pruned, (self.replay, self.first_order) = later[0], second_order(later[1])
        self.n_fwd = n_fwd = layout.num_fwd_outputs
        self.n_tensors = layout.num_saved_tensors
        self.tangent_outputs = tangent_outputs = layout.tangent_outputs
        # Inputs the epilogue writes (data, metadata) or whose version counter it moves (a
        # member of a synthetic base whose metadata the function changed)
        self.mutated = sorted(
            {*layout.mutated_inputs, *layout.metadata_mutations, *layout.version_deltas}
        )
        self.by_storage = layout.saved_read_by_storage
        self.new_value_saves = layout.saved_new_values
        self.written = layout.mutated_inputs
        self.values_start = layout.num_user_outputs + layout.num_intermediate_bases
        self.view_bases = layout.view_bases
        self.nondiff = sorted(set(range(n_fwd)) - set(tangent_outputs))
        self.bw_written = layout.backward_mutations
        # outputs whose whole gradient the backward returns, after the written values
        self.retained_through = dict(layout.retained_grads[2])
        self.n_post_write, self.fed_outputs = len(layout.post_write_inputs), layout.fed_outputs
        self.post_write_passed = layout.post_write_passed
        self.post_write_tangents = layout.post_write_tangents
        self.post_write_inputs = layout.post_write_inputs
        self.grad_tangents = layout.grad_tangents
        self.n_leaves = len(layout.inner_leaves)
        self.stale = layout.backward_error
        self.watched = watched = list(layout.watched_outputs)
        self.expected = [layout.output_versions.get(k, 0) for k in watched]
        self.watched_tangents = [set(ts) for ts in layout.watched_outputs.values()]
        self.fresh = fresh = layout.fresh_outputs
        # a custom Function's view of an input is rebuilt on the input (``routed_view``):
        # the graph's output only carries its gradient, and must not be a view of the
        # input (a write to another view of it would make reading its node raise)
        self.unviewed = sorted({*fresh, *layout.custom_views})
        # Version counts eager leaves on fresh outputs, set before anything is saved: a
        # compiled graph may have bumped them (Inductor's ``mm(out=buf)``), and one the
        # backward reads must be saved at that count.
        self.settle = fresh_versions(layout, (*fresh, *watched, *layout.custom_versions))
        self.presave = {**self.settle, **layout.versions_before_saving}
        self.settled = not self.settle  # the first call keeps the counts that need setting
        # Unreached outputs matter only when some input's gradient comes from some of the
        # tangents and not all: otherwise grads stay materialised (no per-call cost).
        every = set(range(len(tangent_outputs)))
        self.track_unreached = any(deps and set(deps) != every for deps in self.grad_tangents)
        # eager's stale-tensor error comes only from the outputs whose backward reads it
        self.stale_tangents = set(layout.backward_error_tangents)
        if self.stale is not None and self.stale_tangents != every:
            self.track_unreached = True
        else:
            self.stale_tangents = every
        self._note_watches(layout, every)
        if any(set(ts) != every for ts in self.retained_through.values()):
            self.track_unreached = True
        self.independent = self._independent_outputs(layout)

    def _note_watches(self, layout: ForwardLayout, every: set[int]) -> None:
        """The inputs, bases and rebuilt outputs eager saves, checked when the caller's
        backward reaches their reads (per each, the tangents that do)."""
        self.watched_inputs = {i: set(ts) for i, ts in layout.watched_inputs.items()}
        self.watched_leads = layout.watched_leads
        self.watched_bases = {k: set(ts) for k, ts in layout.watched_bases.items()}
        self.watched_aliases = {k: set(ts) for k, ts in layout.watched_aliases.items()}
        self.saved_of_outputs = layout.saved_of_outputs
        self.input_views = layout.saved_input_views
        watches = [
            *self.watched_inputs.values(),
            *self.watched_bases.values(),
            *self.watched_aliases.values(),
            *self.watched_tangents,
        ]
        if any(ts != every for ts in watches):
            self.track_unreached = True

    def _independent_outputs(self, layout: ForwardLayout) -> IndependentOutputs | None:
        """Outputs whose eager graphs share no node that saved a tensor, which backward
        passes may go through one by one (``partial_backward``); None where there are
        none."""
        components = tangent_components(layout.saving_links, len(self.tangent_outputs))
        plain = not (
            self.bw_written
            or self.retained_through
            or layout.post_write_inputs
            or layout.fed_outputs
        )
        if len(components) > 1 and plain:
            self.track_unreached = True  # (the passes' unreached tangents tell them apart)
            return IndependentOutputs(components)
        return None

    def forward(self, ctx: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
        # the stand-ins of inner leaves come last: inputs of the Function, not of the graph
        if self.replay is not None:  # (before the graph: inputs it writes as they were)
            self.replay.keep(ctx, args)
        else:
            keep_inputs(ctx, args)
        ctx.hooked = hooked_non_leaves(args)
        outs = self.fw(list(args[: len(args) - self.n_leaves]))
        self._save(ctx, args, outs)
        return self._mark_outputs(ctx, args, tuple(outs[: self.n_fwd]))

    def _save(self, ctx: Any, args: tuple[Any, ...], outs: Sequence[Any]) -> None:
        saved = outs[self.n_fwd :]
        tensors = saved[: self.n_tensors]
        if not self.settled:
            self._keep_unsettled(outs)
        for j, v in self.presave.items():
            t = outs[j]
            if not t.is_inference() and t._version != v:
                torch._C._autograd._unsafe_set_version_counter((t,), (v,))
        if self.presave:
            tensors = views_of_outputs_detached(tensors, [outs[j] for j in self.presave])
        if self.mutated:
            mutated = [args[i] for i in self.mutated]
            tensors = copies_of_mutated_inputs(tensors, mutated, self.by_storage)
        if self.new_value_saves:
            written = [args[i] for i in self.written]
            values = outs[self.values_start : self.values_start + len(self.written)]
            tensors = aliases_of_written_inputs(
                tensors, self.new_value_saves, written, values, self.by_storage
            )
        ctx.loose = None
        if self.watched or self.saved_of_outputs:
            watched = [outs[k] for k in self.watched]
            tensors = keep_loose(ctx, tensors, watched, self.saved_of_outputs)
        save(ctx, tensors)
        ctx.num_inputs = len(args)
        # (grads never materialised by autograd: a pass that reaches none of the outputs,
        # all None, gives the inputs None, as eager's nodes do)
        ctx.set_materialize_grads(False)
        ctx.zeros = [zeros_like(outs[i]) for i in self.tangent_outputs]
        if self.bw_written:
            ctx.bw_written = [args[i] for i in self.bw_written]
        if self.retained_through:  # filled by the epilogue (``input_hooks.retain_grads``)
            ctx.retained_through = [None] * len(self.retained_through)
        # set when the call is over (``note_watched``)
        ctx.watched_inputs = ctx.watched_bases = ctx.watched_aliases = ctx.input_data = ()
        ctx.loose_versions = ()
        ctx.symints = tuple(saved[self.n_tensors :])

    def note_watched(self, args: Sequence[Any], fwd: Sequence[Any], outs: Sequence[Any]) -> None:
        """After the call (the epilogue's writes and version counts done): the inputs and
        intermediate bases eager saves, at the version the call leaves them, on the
        backward node (a custom Function's ctx is its node: the grad_fn of the forward's
        differentiable outputs)."""
        node = next(
            (o.grad_fn for o in fwd if isinstance(o, torch.Tensor) and o.grad_fn is not None),
            None,
        )
        if node is None or not hasattr(node, "watched_inputs"):
            return
        if self.input_views:
            node.input_data = data_of_inputs(self.input_views, args)
        node.watched_inputs = [
            (args[i], args[i]._version, ts, self.watched_leads.get(i, ()))
            for i, ts in self.watched_inputs.items()
            if not args[i].is_inference()
        ]
        node.watched_bases = [
            (fwd[k], fwd[k]._version, ts)
            for k, ts in self.watched_bases.items()
            if not fwd[k].is_inference()
        ]
        if self.saved_of_outputs and isinstance(node.loose, dict):
            loose = node.loose
            node.loose_versions = [
                (j, loose[j]._version) for j in self.saved_of_outputs if j in loose
            ]
        node.watched_aliases = [  # (detached: the view's counter, not a cycle through node)
            (outs[k].detach(), outs[k]._version, ts)
            for k, ts in self.watched_aliases.items()
            if not outs[k].is_inference()
        ]

    def _keep_unsettled(self, outs: Sequence[Any]) -> None:
        """A graph's kernels are the same every call: the fresh outputs it returns at the
        version count eager leaves need no setting from now on."""
        unsettled = {
            j
            for j, v in self.settle.items()
            if not outs[j].is_inference() and outs[j]._version != v
        }
        self.presave = {
            j: v for j, v in self.presave.items() if j not in self.settle or j in unsettled
        }
        self.settled = True

    def _mark_outputs(self, ctx: Any, args: tuple[Any, ...], fwd: tuple[Any, ...]) -> Any:
        if self.unviewed:
            fwd = unview(fwd, self.unviewed)
        fwd = distinct_differentiable(fwd, self.tangent_outputs)
        if self.nondiff:
            fwd = separate_non_differentiable(fwd, self.nondiff, args, self.view_bases)
            marks = [fwd[i] for i in self.nondiff if isinstance(fwd[i], torch.Tensor)]
            ctx.mark_non_differentiable(*marks)
        if self.watched:  # detached: their version counters, not a cycle through ctx
            ctx.watched = [fwd[k].detach() for k in self.watched]
        return fwd

    def backward(self, ctx: Any, grads: tuple[Any, ...]) -> tuple[Any, ...]:
        if self.fed_outputs:
            grads = less_handed(ctx, grads)
        tangents, missing = self._tangents(ctx, grads)
        if self.post_write_tangents and getattr(ctx, "post_write_task", None) == task():
            tangents = self._less_linked(ctx, tangents)
        if self.watched:
            outs = zip(ctx.watched, self.expected, self.watched_tangents)
            check_reached(outs, missing, "an output")
        if self.stale is not None and not self.stale_tangents.issubset(missing):
            # (an op without a derivative: eager's engine raises NotImplementedError)
            missing_derivative = "the derivative for" in self.stale
            raise (NotImplementedError if missing_derivative else RuntimeError)(self.stale)
        if self.watched_inputs:
            check_reached(reads_run(ctx, ctx.watched_inputs), missing, "an input")
        if self.watched_bases:
            check_reached(ctx.watched_bases, missing, "a base of outputs")
        if self.watched_aliases:
            check_reached(ctx.watched_aliases, missing, "an output")
        if getattr(ctx, "replay_freed", None) and freed_by_replay(ctx, self._reached(missing)):
            raise RuntimeError(BACKWARD_TWICE)
        if ctx.loose_versions:
            check_read(ctx.loose, ctx.loose_versions, lambda: self._reads(ctx, grads))
        if self.replay is not None:
            ctx.graph_freed.note()
        if self.replays(ctx):  # (create_graph; after eager's checks of what it saved)
            return self._replayed_gradients(ctx, grads)
        saved = self._saved(ctx, len(tangents), missing)
        if ctx.input_data:
            saved = views_of_new_data(saved, ctx.input_data)
        args = [*saved, *ctx.symints, *tangents]
        del saved  # (only ``args`` holds them: a boxed backward frees each after its use)
        # Unless the graph is retained, drop ctx's references: a boxed backward
        # (Inductor's) then frees each saved activation after its last use.
        ctx.maybe_clear_saved_tensors()
        run_bw = self._run_bw(ctx)
        # One gradient per input; a trailing effect token of the backward is dropped.
        outs = tuple(run_bw(self._bw_for(ctx, grads), args))
        n = ctx.num_inputs
        if self.post_write_passed and getattr(ctx, "post_write_task", None) == task():
            outs = self._less_passed_on(outs, n)
        if self.bw_written:
            written = outs[n : n + len(self.bw_written)]
            write_back(ctx.bw_written, written, self.bw_written.values())
            del ctx.bw_written
        if self.retained_through:
            start = n + len(self.bw_written)
            totals = outs[start : start + len(self.retained_through)]
            for slot, total in zip(ctx.retained_through, totals):
                if slot is not None:
                    slot.fill(total, missing)
        grads = unshared(outs[:n])
        if self.fed_outputs:
            grads = less_handed_inputs(ctx, grads)
        if missing:
            grads = unreached_to_none(grads, self.grad_tangents, set(missing))
        if None in grads:
            quiet_unreached(ctx, grads, getattr(ctx, "hooked", None))
        return grads

    def _less_passed_on(self, outs: tuple[Any, ...], n: int) -> tuple[Any, ...]:
        """The gradients (and retained totals) less what the written inputs' gradients
        pass on to them: the link handed those to the inputs' nodes in this pass, and
        they came back through the writes' nodes into the new values' tangents
        (``runtime.post_write_link``)."""
        start = self._post_write_start(n) + self.n_post_write
        less = list(outs)
        for p, k in enumerate(self.post_write_passed):
            # (past the gradients: a retained total, after the backward's written values)
            i = k if k < n else k + len(self.bw_written)
            passed = outs[start + p]
            if less[i] is not None and passed is not None:
                less[i] = less[i] - passed
        return tuple(less)

    def _less_linked(self, ctx: Any, tangents: list[Any]) -> list[Any]:
        """The written inputs' new-value tangents less the gradient the link handed
        their nodes in this pass (it came back through the writes' nodes, and the graph
        adds it there again): the node then gets what eager's did, before any traced
        hook on the history before the write (``PostWrite.tangents``)."""
        tangents = list(tangents)
        for p, handed in zip(self.post_write_tangents, ctx.post_write_handed):
            if handed is not None and tangents[p] is not None:
                tangents[p] = tangents[p] - handed
        return tangents

    def _replayed_gradients(self, ctx: Any, grads: Sequence[Any]) -> tuple[Any, ...]:
        """The inputs' gradients from the call's replay (``double_backward``), with their
        graph; the written inputs' new values' gradients less what the link handed their
        nodes in this pass, as ``_less_linked``."""
        if self.post_write_tangents and getattr(ctx, "post_write_task", None) == task():
            grads = self._less_linked_outputs(ctx, grads)
        return less_handed_inputs(ctx, self.replay.gradients(ctx, grads))

    def _less_linked_outputs(self, ctx: Any, grads: Sequence[Any]) -> tuple[Any, ...]:
        """``_less_linked`` on the outputs' gradients (by forward output), for the
        replay."""
        less = list(grads)
        for p, handed in zip(self.post_write_tangents, ctx.post_write_handed):
            k = self.tangent_outputs[p]
            if handed is not None and less[k] is not None:
                less[k] = less[k] - handed
        return tuple(less)

    def post_write_grads(self, ctx: Any, given: dict[int, Any]) -> list:
        """The gradient at each ``layout.post_write_inputs`` input's node after its write,
        from the tangents ``given`` (by position; zeros for the others): the compiled
        backward's last outputs, read before the Function's own backward runs (its saved
        tensors kept for it)."""
        # (less what a fed output's link, outside this one, handed them in this pass)
        given = less_handed_given(ctx, given, self.tangent_outputs)
        if self.replays(ctx):  # (create_graph: with its graph, ``double_backward``)
            by_output = {self.tangent_outputs[p]: g for p, g in given.items()}
            handed = self.replay.gradients_after_writes(ctx, by_output, self.post_write_inputs)
        else:
            outs = self.backward_kept(ctx, given)
            start = self._post_write_start(ctx.num_inputs)
            handed = list(outs[start : start + self.n_post_write])
        if self.post_write_tangents:
            # (added to what another link handed in this pass: a written value's,
            # ``PostWriteLink.onto_value``)
            earlier = getattr(ctx, "post_write_handed", None)
            if earlier is not None and getattr(ctx, "post_write_task", None) == task():
                ctx.post_write_handed = [plus(a, b) for a, b in zip(earlier, handed)]
            else:
                ctx.post_write_handed = handed
        ctx.post_write_task = task()  # (the Function's backward in this pass: _less_passed_on)
        return handed

    def _reached(self, missing: Sequence[int]) -> set[int]:
        """The forward outputs (by position) whose tangents this pass gives."""
        gone = set(missing)
        return {k for p, k in enumerate(self.tangent_outputs) if p not in gone}

    def replays(self, ctx: Any) -> bool:
        """Whether this backward runs the call's replay (``double_backward``)."""
        return (
            self.replay is not None and torch.is_grad_enabled() and self.replay.why_not(ctx) is None
        )

    def _run_bw(self, ctx: Any) -> Callable[..., Any]:
        """How the compiled backward runs: under ``create_graph``, its results refusing a
        second backward, with the reason this call's replay does not run."""
        if not torch.is_grad_enabled():
            return _call
        why = None if self.replay is None else self.replay.why_not(ctx)
        return functools.partial(self.first_order, reason=why, inputs=kept_inputs(ctx))

    def backward_kept(self, ctx: Any, given: dict[int, Any]) -> tuple:
        """The compiled backward's outputs from the tangents ``given`` (by position; zeros
        for the others), run before the Function's own backward (its saved tensors kept
        for it): for the links (``post_write_link``, ``fed_outputs_link``)."""
        tangents = [
            plain_tangent(given[j]) if j in given else zeros() for j, zeros in enumerate(ctx.zeros)
        ]
        saved = saved_tensors(ctx, keep=True)
        if ctx.input_data:
            saved = views_of_new_data(saved, ctx.input_data)
        run_bw = self._run_bw(ctx)
        totals = self.pruned.with_totals() if self.pruned is not None else None
        bw = self.bw if totals is None else without_autocast(totals)
        return tuple(run_bw(bw, [*saved, *ctx.symints, *tangents]))

    def fed_totals_start(self, n: int) -> int:
        """Where the fed outputs' totals start among the backward's outputs (after the
        ``n`` inputs' gradients, the written values and the retained totals)."""
        return n + len(self.bw_written) + len(self.retained_through)

    def _post_write_start(self, n: int) -> int:
        """Where the link's outputs start among the backward's (after the ``n`` inputs'
        gradients, the written values, the retained and the fed outputs' totals:
        ``JointGraph``)."""
        return self.fed_totals_start(n) + len(self.fed_outputs)

    def _saved(self, ctx: Any, n_tangents: int, missing: Sequence[int]) -> list[Any]:
        """The saved tensors for this pass: autograd's, or those kept across passes
        through independent outputs (``partial_backward``), kept again where this pass
        leaves one unreached."""
        if self.independent is None:
            return saved_tensors(ctx)
        reached = set(range(n_tangents)) - set(missing)
        kept = self.independent.kept(ctx, reached)
        saved = saved_tensors(ctx) if kept is None else kept
        if missing and not _keeps_graph():
            self.independent.keep(ctx, saved, reached)
        return saved

    def _reads(self, ctx: Any, grads: tuple[Any, ...]) -> frozenset[int]:
        """The saved tensors (by position) this pass's backward reads (``_bw_for``'s)."""
        absent = tuple(k for k, i in enumerate(self.tangent_outputs) if grads[i] is None)
        if self.pruned is None or len(absent) == len(self.tangent_outputs):
            return frozenset(range(self.n_tensors))
        return self.pruned.reads(absent, ctx.num_inputs, self.n_tensors)

    def _bw_for(self, ctx: Any, grads: tuple[Any, ...]) -> BoxedFn:
        """The backward for this pass: without the tangents of the outputs it does not
        reach (``unreached_tangents``), where some it does."""
        absent = tuple(k for k, i in enumerate(self.tangent_outputs) if grads[i] is None)
        if not absent or self.pruned is None or len(absent) == len(self.tangent_outputs):
            return self.bw
        made = self.pruned.for_pass(absent, ctx.num_inputs, None)
        return self.bw if made is None else without_autocast(made)

    def _tangents(self, ctx: Any, grads: tuple[Any, ...]) -> tuple[list[Any], Sequence[int]]:
        """The backward's tangents, and the differentiable outputs the caller's backward
        did not reach. Tracking those, grads are not materialised: such an output has
        None, and inputs reached only through such outputs get None (eager's)."""
        tangent_outputs = self.tangent_outputs
        missing = [k for k, i in enumerate(tangent_outputs) if grads[i] is None]
        if not missing:
            return [plain_tangent(grads[i]) for i in tangent_outputs], ()
        tangents = [
            ctx.zeros[k]() if grads[i] is None else plain_tangent(grads[i])
            for k, i in enumerate(tangent_outputs)
        ]
        if self.track_unreached or len(missing) == len(tangent_outputs):
            return tangents, missing
        return tangents, ()


def make_training_function(
    fw: BoxedFn, bw: BoxedFn, layout: ForwardLayout, pruned: Any = None, replay: Any = None
) -> Callable[..., tuple[Any, ...]]:
    """``run(*flat_tensor_args) -> flat outputs`` through autograd (``pruned``, ``replay``)."""
    plan = _TrainingPlan(marking_failures(fw), bw, layout, pruned, replay)

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            return plan.forward(ctx, args)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return plan.backward(ctx, grads)

    fed = FedOutputsLink.for_layout(plan, layout)
    linked = set(layout.fed_outputs) if fed is not None else set()
    hooks_on_defined_gradients(CompiledFunction, layout.outputs_fed_on - linked)

    n_user = layout.num_user_outputs
    apply = _applying(CompiledFunction.apply, layout)
    watch = plan.note_watched if layout.watches_after_call else None
    if layout.plain and watch is None:
        if fed is not None:
            apply = fed.after(apply)

        def run(*args: Any) -> tuple[Any, ...]:
            return apply(*args)[:n_user]

        return views_of_no_output(run, layout)
    epilogue = None if layout.plain else _epilogue(layout, plan, fed)
    if epilogue is None and fed is not None:
        apply = fed.after(apply)

    def run_and_replay(*args: Any) -> tuple[Any, ...]:
        if epilogue is None:
            fwd = apply(*args)
            watch(args, fwd, fwd)  # type: ignore[misc]
            return fwd[:n_user]
        args, given, members = layout.callers_last(args)
        callers = iter(given)
        old = epilogue.change_metadata_first(args)
        before = epilogue.prepare(args)
        leaves = [
            stand_in_leaf(leaf, args) if leaf.member is None else next(callers)
            for leaf in layout.inner_leaves
        ]
        fwd = apply(*in_old_layouts(args, old), *leaves)
        outs = epilogue(args, fwd, before, leaves, members)
        if watch is not None:
            watch(args, fwd, outs)
        return outs

    return views_of_no_output(run_and_replay, layout)


def _applying(apply: Callable[..., Any], layout: ForwardLayout) -> Callable[..., Any]:
    """``apply`` with the inputs as the Function must take them (``call_inputs``), under
    ``enable_grad`` where the function records autograd even when called without."""
    apply = readable_inputs(apply, layout.node_unread_views)
    apply = edgeless_inputs(apply, layout.gradless_inputs)
    apply = unhooked_views(apply, layout)
    if not layout.enable_grad:
        return apply

    def recording(*args: Any) -> Any:
        if torch.is_inference_mode_enabled():
            # (compiled by Dynamo, which traces a call under inference mode with
            # no_grad on: there, autograd records nothing, enable_grad blocks too)
            return apply(*args)
        with torch.enable_grad():
            return apply(*args)

    return recording


def _epilogue(layout: ForwardLayout, plan: _TrainingPlan, fed: Any) -> Epilogue:
    """The training call's epilogue: with the link of outputs onto written inputs' new
    nodes where the trace found reads after a write (``post_write_link``), or else onto
    the outputs they are computed from (``fed_outputs_link``)."""
    epilogue = Epilogue(layout)
    if layout.post_write_inputs:
        post = PostWriteLink(plan.post_write_grads, layout)
        # (the fed outputs' link outermost: the caller's fed output gets what is computed
        # from it, and the post-write link takes that out before it runs the backward)
        if fed is None:
            epilogue.link = post
        elif fed.links_written():  # (its written values' link before the writes)
            epilogue.link_first = lambda fwd: fed(fwd, part="written")
            epilogue.link = lambda args, fwd: fed(
                post(args, fwd, fed.written_fed(fwd)), fwd, part="rest"
            )
        else:
            epilogue.link = lambda args, fwd: fed(post(args, fwd), fwd)
        if layout.post_write_values:
            epilogue.value_link = post.onto_value
    elif fed is not None:
        epilogue.link_first = fed
    if fed is not None:
        epilogue.fed_views = fed.onto_views
    return epilogue
