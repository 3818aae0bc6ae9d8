"""What the trace stage hands on: the metadata pass's facts (``TraceMetadata``) and the
traced graphs (``JointGraph``, ``InferenceGraph``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from .. import alias


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
    #: Of those, one the function called ``requires_grad_()`` on: a view made under no_grad
    #: of a tensor that requires grad needs it to get an accumulator of its own.
    made_leaf: bool = False
    #: A view a custom Function made (of its input, returned as-is) whose base was
    #: written afterwards: eager returns it, and any use of it with grad raises
    #: (``alias.views.stale_custom_view``). No tangent: nothing differentiates it.
    stale_custom_view: bool = False


@dataclass(frozen=True)
class InnerLeaf:
    """A leaf the function makes that outputs are computed from. The runtime passes a
    stand-in leaf of this shape, dtype and device into the compiled Function (the
    backward returns its gradient), and gives it the value of the user outputs that are
    the leaf and of the intermediate bases that are (outputs view it)."""

    shape: tuple[int, ...]
    dtype: Any
    device: Any
    outputs: list[int]
    bases: list[int]
    #: User outputs that view the leaf (``t[1:]``), rebuilt as views of the stand-in.
    views: list[int] = field(default_factory=list)
    #: Of ``views``, those a custom Function made (``Half.apply(t)``), and their view of
    #: the leaf: returned as that view of the stand-in, the gradient routed through the
    #: Function's backward (the graph's output).
    custom_views: dict[int, alias.ViewSpec] = field(default_factory=dict)
    #: A member of a synthetic base the caller made a leaf (``x[2:6].requires_grad_()``
    #: of a base that does not require grad): its input position. The runtime passes the
    #: caller's tensor, not a stand-in: the gradient fills its ``.grad``, and its value is
    #: the base's. Outputs that view it and reach its gradient (``views``) view it.
    member: int | None = None
    #: A view of an input that does not require grad, made a leaf by the function
    #: (``m = x[0]; m.requires_grad_()``), or of a ``detach()`` of one: the input's
    #: position, the view's layout relative to it, and whether of the detached alias.
    #: The runtime's stand-in is that view of the caller's input (or of its
    #: ``detach()``), made to require grad, as eager's leaf is (``m._base`` is the
    #: input's base, it shares its bytes and version counter).
    input_view: tuple[int, Any, bool] | None = None


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
    #: ``layout_anchors``). A permutation (``t_()``) covers the same bytes: its value is
    #: written through the new metadata, which keeps autograd's view of it simple.
    relaid_inputs: list[int] = field(default_factory=list)
    #: User outputs that are results of ``detach()`` (``EagerCalls.detached``).
    detached_outputs: list[int] = field(default_factory=list)
    #: Of the leaves the function makes, in order, those outputs are computed from
    #: (positions in ``EagerCalls.new_leaves``), and what the runtime needs of each.
    inner_leaf_positions: list[int] = field(default_factory=list)
    inner_leaves: list[InnerLeaf] = field(default_factory=list)
    #: Inputs taken out of autograd (``detach_()`` or ``requires_grad_(False)``: the first
    #: flag) that a write then gave a history; the second flag: what the function returns
    #: or writes was computed from the input before. The runtime takes the caller's tensor
    #: out of autograd before it writes the new value with autograd recording (a leaf
    #: not computed from: before the graph runs).
    left_then_written: dict[int, tuple[bool, bool]] = field(default_factory=dict)
    #: Outputs, then inputs, the function called ``retain_grad()`` on: the runtime calls
    #: it on the caller's tensors (their ``.grad`` is filled as eager's); then the outputs
    #: among them the function computes other outputs from, and the tangents that reach
    #: each (set by the joint trace): the compiled backward computes their whole gradient
    #: (``input_hooks.RetainedThrough``).
    retained_grads: tuple[list[int], list[int], dict[int, tuple[int, ...]]] = ([], [], {})
    #: Hooks the function registered on inputs it does not write, ``(input, hook)``: the
    #: runtime registers them on the caller's tensors (``aotgrad.input_hooks``).
    input_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Hooks on inputs it re-lays, registered before it touched them: the runtime
    #: registers them before it replays the change (``metadata._early_hooks``).
    early_input_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Hooks on inputs that are views in the caller, written with grad, registered
    #: before the function touched them: the runtime registers them before the call
    #: (``metadata._view_hooks``).
    hooks_before_call: list[tuple[int, Any]] = field(default_factory=list)
    #: Inputs it writes that it registered hooks on: those stay in the trace.
    traced_hook_inputs: list[int] = field(default_factory=list)
    #: Hooks it registered on outputs the runtime rebuilds as views, or on the outputs
    #: of ``caller_fed``, ``(output, hook)``: the runtime registers them on its outputs.
    output_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Fresh outputs whose hooks run on the caller's output (``caller_fed_outputs``):
    #: the joint trace takes them off before its backward.
    caller_fed: list[int] = field(default_factory=list)
    #: Hooked views that rebuilt outputs are viewed of (``input_hooks.HookedView``).
    hooked_views: list[Any] = field(default_factory=list)
    #: Per input whose metadata changes mix ones autograd records and ones it does not
    #: (under no_grad), the layouts in order and whether it records each
    #: (``aotgrad.metadata_steps``).
    metadata_steps: dict[int, list[Any]] = field(default_factory=dict)
    #: Inputs whose last metadata change autograd recorded (``MetadataSteps.recorded_last``).
    metadata_recorded: list[int] = field(default_factory=list)
    #: Inputs whose autocast casts eager caches, where an op ran under autocast: they
    #: run as leaves of the joint trace (``autocast_casts``).
    cached_casts: list[int] = field(default_factory=list)
    #: Leaf inputs that require grad through their base (views made under ``no_grad``)
    #: whose own flag ``requires_grad_(flag)`` set: the last flag (``EagerCalls.own_flags``).
    own_requires_grad: dict[int, bool] = field(default_factory=dict)
    #: Inputs that are views autograd cannot rebuild once written whose node the function
    #: never reads (``StaleInputViews.unread``).
    node_unread_views: list[int] = field(default_factory=list)
    #: Outputs viewing an input the function made require grad, taken before it did
    #: (``OutputAlias.before_requires_grad``: 1 the view, 2 a view of it).
    views_before_requires_grad: dict[int, int] = field(default_factory=dict)
    #: Grad mode the function leaves where it is not the call's (a
    #: ``torch.set_grad_enabled(False)`` not undone): the runtime sets it after the call.
    grad_mode_after: bool | None = None
    #: Outputs the function computes other outputs from, per output the forward values
    #: computed from it (``trace.fed_outputs``): the backward also returns the gradient at
    #: each, which the runtime hands the caller's tensor (``runtime.fed_outputs_link``).
    fed_outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: User outputs that are an input's ``.data`` (``EagerCalls.data_reads``) or a view
    #: of one: eager's has a version counter of its own (``metadata._data_outputs``).
    data_outputs: dict[int, tuple[int, bool, int]] = field(default_factory=dict)
    #: Outputs viewing an input that the function made of another such output, each
    #: with it (``fed_outputs.views_of_outputs``): made of the caller's output.
    views_of_outputs: dict[int, int] = field(default_factory=dict)
    #: Fresh outputs that view an input the function ``set_()`` to another's storage
    #: (``x.set_(y); return x[1:]``): eager's view that input (its ``_base``, its version
    #: counter), the graph's the other's (``metadata._views_of_set_inputs``).
    views_of_set_inputs: dict[int, int] = field(default_factory=dict)
    #: Outputs viewing a view input made before a write to another input of its storage:
    #: eager's node is rebuilt from the root's (``post_write_reads``).
    views_before_sibling_write: tuple[int, ...] = ()

    @property
    def needs_autograd(self) -> bool:
        """An output (or an input's new value) has autograd history: the function needs
        the joint graph even when its inputs do not require grad (an ``enable_grad``
        block under ``no_grad``; a value that requires grad written into an input)."""
        from ..alias.facts import written_with_grad

        return any(o.requires_grad and not o.new_leaf for o in self.outputs) or any(
            written_with_grad(f) for f in self.plan.facts.input_flags
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
        tangent: differentiable user outputs that alias nothing (or whose history their
        base lost), intermediate bases that
        require grad, and new values of inputs written with autograd history."""
        plan = self.plan
        n_user = len(self.outputs)
        # (and views of an intermediate with the history their base lost: the runtime
        # routes their gradient into the graph's output, ``OutputAlias.routed``)
        routed = plan.facts.output_history_past_base
        users = [
            i
            for i, info in enumerate(self.outputs)
            if info.needs_tangent
            and (plan.outputs[i] == alias.OutputVerdict.NON_ALIAS or i in routed)
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
    backward writes (``backward_mutations``), then the whole gradient of each output in
    ``retained_tangents``, then the gradient at each ``post_write_inputs`` input's node
    after its write, then what those pass on to each ``post_write_passed`` gradient, then
    the backward's effect token if it has effectful ops.
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
    #: Outputs the function ``retain_grad()``s and computes more from, and the tangents
    #: that reach each: their whole gradients are backward outputs after those values.
    retained_tangents: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Inputs written with autograd whose new node the outputs' reads after the write
    #: reach (``trace.post_write_reads``): the gradient at that node is a backward
    #: output after the retained ones, and the runtime passes it to the caller's tensor.
    post_write_inputs: tuple[int, ...] = ()
    #: Synthetic-base members linked alike (caller positions): ``post_write_inputs``
    #: names them from the number of graph inputs on, in this order.
    post_write_members: tuple[int, ...] = ()
    #: Written inputs whose new value reads a linked input after its write, each with
    #: that input (``trace.post_write_reads.PostWrite.values``).
    post_write_values: dict[int, int] = field(default_factory=dict)
    #: The outputs (tangent positions) that read a linked input after its write.
    post_write_readers: tuple[int, ...] = ()
    #: The gradients those pass on to (through the history before the write): a
    #: gradient's position, or the number of gradients plus a retained total's.
    post_write_passed: tuple[int, ...] = ()
    #: ``(input, hook)``: hooks the function registered on a linked input after its
    #: last write, left for the runtime (``input_hooks.hooks_on_linked_nodes``).
    post_write_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Per linked input, its new value's tangent position, where the runtime takes the
    #: linked gradient out of those tangents (``PostWrite.tangents``); else empty.
    post_write_tangents: tuple[int, ...] = ()
    #: Inputs that are views in the caller, written with grad, whose node from before
    #: the call eager's backward does not run (the write's node hands the gradient to
    #: the base's): none of the function's reads before the write reaches an output
    #: (``post_write_reads.hook_bypassed_views``).
    unhooked_view_writes: tuple[int, ...] = ()
    #: Likewise, where such reads reach outputs: eager runs that node for them only.
    hooked_view_reads: tuple[int, ...] = ()
    #: Outputs viewing such an input, taken before its write: eager's node is rebuilt
    #: from the base's (``post_write_reads.views_past_write``).
    views_past_write: tuple[int, ...] = ()
    #: Outputs viewing an input re-laid with grad, taken after that: eager's node reaches
    #: the input's new one (``post_write_reads.views_after_relaid``).
    views_after_relaid: tuple[int, ...] = ()
    #: Eager's error when its backward would read a saved tensor written after it was
    #: saved (the version check): the compiled backward raises it.
    backward_error: str | None = None
    #: The tangents (by position) whose outputs' backward reads that stale tensor: eager
    #: raises only when the caller's backward reaches one of them.
    backward_error_tangents: tuple[int, ...] = ()
    #: Inputs eager's autograd saves (itself or a view) at the version the call leaves
    #: them, and which tangents lead the backward to read them: written after the call,
    #: eager's backward raises when it reaches such a read.
    watched_inputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Per watched input, the Function's inputs its reads' nodes lead to (eager runs those
    #: nodes, and checks the input, only in a pass that runs one of them)
    watched_leads: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: The sets of tangents (by position, two or more) whose outputs' eager graphs share
    #: a node that saved a tensor (``saved_reads.saving_links``): passes through outputs
    #: in no common set free nothing the other needs.
    saving_links: tuple[tuple[int, ...], ...] = ()
    #: Inputs eager's autograd saves as themselves, and no view of (``SavedReads.
    #: saved_whole``): its backward reads the caller's tensor as it is then.
    saved_whole: tuple[int, ...] = ()
    #: User outputs eager's autograd saves for the backward (``exp``'s result), and the
    #: tangents whose backward reads them: written after the call, eager's backward raises
    #: where it reaches such a read; the compiled one must too, whatever its partition
    #: saved instead.
    saved_outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Intermediate bases (by position) eager saves, which outputs view, and the tangents
    #: whose backward reads them: written through a view after the call, eager's backward
    #: raises where it reaches such a read.
    saved_bases: dict[int, tuple[int, ...]] = field(default_factory=dict)
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
