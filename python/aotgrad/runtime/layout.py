"""What the runtime knows of a compiled forward: how its flat outputs are laid out
(user outputs, intermediate bases, new values of mutated inputs, tokens, saved values)
and every fact the epilogue replays (``ForwardLayout``), per aliased output
(``OutputAlias``). Built by ``layout_of_trace`` from the trace's metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..alias import OutputVerdict, ViewSpec
from ..alias.views import Binding


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
    #: The user output this is a view of, made of it as the caller gets it: the detached
    #: alias (``detached`` 2: ``t = x.detach(); return t, t.t()``) or the leaf view
    #: (``t = x[1:]; t.requires_grad_(); return t, t.t()``) it was taken of; or -1.
    base_output: int = -1
    #: A view of an intermediate that is a leaf requiring grad in eager: the runtime makes
    #: the graph's base that leaf (one per base) and returns views of it with a grad_fn.
    base_leaf: bool = False
    #: Of those, one eager took before ``requires_grad_()`` made its base a leaf
    #: (``v = t[::2]; t.requires_grad_()``): no ``grad_fn``, its flag its base's.
    before_base_leaf: bool = False
    #: A view of an intermediate with a history its base lost (``v = t[0]; t.detach_()``):
    #: rebuilt as a view of the base whose gradient is routed into the graph's output.
    routed: bool = False
    #: A view (made with grad mode on) of an input that did not require grad: it requires
    #: grad if the input does after the call's writes (a write through another view of
    #: the input's base gives the base, and so every view of it, autograd history).
    grad_through_base: bool = False
    #: Made under ``no_grad`` by its creation meta, yet with a ``grad_fn`` in eager (a
    #: view taken with grad on of a view made under ``no_grad``).
    tracked: bool = False
    #: A view autograd does not track in eager: made under ``no_grad`` or inference mode,
    #: or by a custom Function run under ``no_grad`` (and views of those).
    untracked: bool = False
    #: Made with grad on inside a call under ``no_grad`` (an ``enable_grad`` block): with
    #: a ``grad_fn`` in eager, so rebuilt with grad on.
    with_grad: bool = False
    #: A view of a view of an input without grad that ``requires_grad_()`` made a leaf
    #: (``t = x.view_as(x); t.requires_grad_(); return t[1:]``): eager's has a ``grad_fn``
    #: ending at that leaf, so the runtime views the leaf it makes once more.
    of_leaf_view: bool = False
    #: A view of an input passed without grad, taken before the function made the input
    #: require grad (``v = x[0]; x.requires_grad_()``): eager's has no ``grad_fn`` and its
    #: gradient stops at it. 1: the output is that view (made of the caller's input before
    #: the runtime turns its flag on); 2: a view taken of it after (an ``as_strided`` of
    #: a view of the input made before the flag, whose gradient stops there).
    before_requires_grad: int = 0
    #: One piece of a multi-output view of an input returned with a sibling (``a, b =
    #: x.chunk(2); return a, b``): (its group, its output number). A group's pieces are
    #: made by one node, as eager's: the caller's hook on a piece no gradient reaches is
    #: called with None when the node runs for another (``alias.views.pieces_of``).
    piece: tuple[int, int] | None = None

    @property
    def of_user_output(self) -> int:
        """The user output this is a view of, as the caller gets it (-1: none)."""
        if self.base_output >= 0:
            return self.base_output
        if self.verdict == OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT:
            return self.source
        return -1


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
    #: Of those, the ones whose changes mix ones autograd records and ones it does not:
    #: the layouts to replay in order, and whether it records each.
    metadata_steps: dict[int, list[tuple[ViewSpec, bool]]] = field(default_factory=dict)
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
    #: Of those, the ones ``requires_grad_()`` was called on (``OutputInfo.made_leaf``).
    made_leaves: list[int] = field(default_factory=list)
    #: User outputs eager returns as a stale custom-Function view (``OutputInfo``), and
    #: the input whose bytes it views (with the view), if any.
    stale_views: dict[int, tuple[int, ViewSpec] | None] = field(default_factory=dict)
    #: Of those, the ones eager made under no_grad (stale views of their own kind, not
    #: custom-Function views).
    stale_no_grad: frozenset[int] = frozenset()
    #: Of those, the ones whose ``._base`` is a detached alias of their input, not the
    #: input (``alias.facts.AliasFacts.stale_view_of_detached``).
    stale_of_detached: frozenset[int] = frozenset()
    #: Stale views (made under no_grad) of another user output, written after: per
    #: output, that output and the view.
    stale_output_views: dict[int, tuple[int, ViewSpec]] = field(default_factory=dict)
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
    #: User outputs a custom Function made of an intermediate (a view of one the function
    #: wrote before shares its counter): their version count (``output_versions``) is set
    #: before the compiled Function returns them.
    custom_versions: list[int] = field(default_factory=list)
    #: Of ``custom_views``, the detached aliases a tracked write gave a history
    #: (``alias.facts.AliasFacts.written_detached``): returned as detached aliases
    #: (``alias.views.routed_detached``), not as views: 1 a detached alias, 2 a view of one.
    detached_custom_views: dict[int, int] = field(default_factory=dict)
    #: Of those views of a detached alias (2), the ones whose ``._base`` is another such
    #: output, a detached alias (1): made as views of that output.
    detached_view_bases: dict[int, int] = field(default_factory=dict)
    #: Custom Function views made of another one (``alias.facts.custom_view_base``): made
    #: of the caller's output, whose gradient (``autograd.grad`` with respect to it, its
    #: hooks) takes in theirs, as eager's.
    custom_view_bases: dict[int, int] = field(default_factory=dict)
    #: Per user output eager returns as a view: the output its ``._base`` is, or -1.
    view_bases: dict[int, int] = field(default_factory=dict)
    #: Inputs taken out of autograd, then written with a history (``TraceMetadata``).
    left_then_written: dict[int, tuple[bool, bool]] = field(default_factory=dict)
    #: Inputs whose ``requires_grad`` the function changed, and the new flag.
    requires_grad_changes: dict[int, bool] = field(default_factory=dict)
    #: Of those turned off, the ones by ``requires_grad_(False)`` (the others:
    #: ``detach_()``, a no-op on autograd under inference mode, as in eager).
    requires_grad_flag_off: list[int] = field(default_factory=list)
    #: Leaf views requiring grad through their base whose own flag the function set
    #: (``requires_grad_(flag)``): set before the graph, so autograd gives them an
    #: accumulator (on) or none (off), as eager's.
    own_requires_grad: dict[int, bool] = field(default_factory=dict)
    #: Inputs that are views of ``split``/``unbind`` (or made under ``no_grad``) whose
    #: node the function never reads: passed to autograd detached where it cannot be
    #: read (``runtime.call_inputs.readable_inputs``), as eager never reads it.
    node_unread_views: list[int] = field(default_factory=list)
    #: Inputs (not written by the function) whose gradient the backward never computes:
    #: no output's history reaches them. Passed to autograd detached where another input
    #: keeps the compiled node in the graph (``runtime.call_inputs.edgeless_inputs``): an edge to
    #: one would make the caller's backward run the node of its history (another
    #: compiled graph's, which checks what it saved), which eager's never reaches.
    gradless_inputs: list[int] = field(default_factory=list)
    #: User outputs that are results of ``detach()`` (``trace.TraceMetadata``).
    detached_outputs: list[int] = field(default_factory=list)
    #: User outputs that are an input's ``.data`` or a view of one: (which ``.data``,
    #: whether that tensor itself, eager's version count): given a version counter of
    #: their own, one per ``.data`` (``Epilogue._data_outputs``).
    data_outputs: dict[int, tuple[int, bool, int]] = field(default_factory=dict)
    #: Outputs viewing an input the function ``set_()`` to another's storage: made views
    #: of that input once the runtime has set it (``trace.TraceMetadata``).
    views_of_set_inputs: dict[int, int] = field(default_factory=dict)
    #: Leaves the function makes that outputs are computed from (``trace.InnerLeaf``):
    #: the runtime passes a stand-in leaf per entry into the compiled Function, after the
    #: graph's inputs, and the backward returns its gradient after the inputs' ones.
    inner_leaves: list[Any] = field(default_factory=list)
    #: Called under ``no_grad`` but records autograd itself (an ``enable_grad`` block):
    #: the autograd.Function runs with grad mode on.
    enable_grad: bool = False
    #: Grad mode the function leaves, where not the call's (``TraceMetadata``).
    grad_mode_after: bool | None = None
    #: Inputs the backward writes (in-place ops per input): the compiled backward returns
    #: their new values after the gradients, and the runtime copies them in.
    backward_mutations: dict[int, int] = field(default_factory=dict)
    #: Inputs written with autograd that outputs read after the write: the backward
    #: returns the gradient at each one's new node last, and the runtime passes it to
    #: the caller's tensor after its write (``runtime.post_write_link``).
    post_write_inputs: tuple[int, ...] = ()
    #: The caller's synthetic-base members linked alike (positions among the caller's
    #: inputs): passed after the graph's inputs, named from their number on.
    #: ``(input, hook)``: the function's hooks on a linked input's node after its last
    #: write, registered on the caller's tensor after its write-back.
    post_write_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Per linked input, its new value's tangent position: the gradient the link handed
    #: its node is taken out of that tangent in such a pass (else ``post_write_passed``).
    post_write_tangents: tuple[int, ...] = ()
    post_write_members: tuple[int, ...] = ()
    #: Written inputs whose new value reads a linked input after its write, each with
    #: that input: the value passes through a link onto the input's node before its
    #: write (``PostWriteLink.onto_value``); that input is written or re-laid first.
    post_write_values: dict[int, int] = field(default_factory=dict)
    #: The outputs (tangent positions) that read a linked input after its write: the
    #: link passes those alone through its node.
    post_write_readers: tuple[int, ...] = ()
    #: The backward outputs those pass on to (a gradient's position, or the number of
    #: gradients plus a retained total's): the backward returns that part last, taken
    #: out in a pass where the link handed the gradients to the inputs' nodes.
    post_write_passed: tuple[int, ...] = ()
    #: Written view inputs whose node eager's write bypasses (``trace.JointGraph``): a
    #: hooked one is passed as a fresh view of its base, one read before its write
    #: makes the call run eagerly (``runtime.hooked_views``).
    unhooked_view_writes: tuple[int, ...] = ()
    hooked_view_reads: tuple[int, ...] = ()
    #: Outputs viewing a written view input, taken before the write: made views of its
    #: base (``trace.JointGraph``), whose node eager's is rebuilt from.
    views_past_write: tuple[int, ...] = ()
    #: Outputs viewing an input re-laid with grad, taken after that: made of the input as
    #: re-laid (``trace.JointGraph``), through its new node as eager's.
    views_after_relaid: tuple[int, ...] = ()
    #: Per input gradient, the tangents it depends on (``program._grad_tangents``).
    grad_tangents: list[tuple[int, ...]] = field(default_factory=list)
    #: Eager's error for a backward that reads a saved tensor written after it was saved.
    backward_error: str | None = None
    #: The tangents whose outputs lead the backward to that read (the others' do not).
    backward_error_tangents: tuple[int, ...] = ()
    #: User outputs eager saves for the backward (``trace.JointGraph.saved_outputs``) that
    #: the runtime returns as the compiled forward made them: the backward checks that
    #: their version is still the one the call left (eager's saved-tensor check) where the
    #: caller's backward reaches a read of them (per output, the tangents that do).
    watched_outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: User outputs eager saves that the runtime rebuilds as views (``output_aliases``),
    #: per output the tangents whose backward reads it: the backward checks the version
    #: the call left them at (a write to the view, its base or another view of that base).
    watched_aliases: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Saved tensors (by position) that are forward outputs or views of one (not already
    #: among ``watched_outputs``): kept loose, and checked by the backward only where the
    #: pass reads them (``program._saved_of_outputs``, ``runtime.saved_checks``).
    saved_of_outputs: tuple[int, ...] = ()
    #: Inputs eager saves at the version the call leaves them (``trace.JointGraph``), and
    #: the tangents whose backward reads them: the backward checks their version.
    watched_inputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Per watched input, the Function's inputs the nodes reading it lead to
    #: (``trace.JointGraph.watched_leads``): checked only in a pass that runs one of them.
    watched_leads: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: The tangents whose outputs' eager graphs share a node that saved a tensor
    #: (``trace.JointGraph.saving_links``): the components of ``partial_backward``.
    saving_links: tuple[tuple[int, ...], ...] = ()
    #: Forward outputs that are intermediate bases eager saves (``JointGraph.saved_bases``):
    #: the backward checks their version is the one the call left, where the caller's
    #: backward reaches a read of them (per base, the tangents that do).
    watched_bases: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Forward outputs (by position) the backward reads too, and the version count eager
    #: leaves them at: set before they are saved (``program._versions_before_saving``).
    versions_before_saving: dict[int, int] = field(default_factory=dict)
    #: Saved tensors (by position) the backward reads through ``as_strided`` on their
    #: storage (an input restrided by the function): one that is a mutated input's is
    #: saved as a copy of its whole storage (``program._saved_read_by_storage``).
    saved_read_by_storage: list[int] = field(default_factory=list)
    #: Saved tensors (by position) that are (views of) a written input's new value where
    #: eager saves the input itself, and their entry in ``mutated_inputs``: saved as views
    #: of the caller's tensor (``program._saved_new_values``).
    saved_new_values: dict[int, int] = field(default_factory=dict)
    #: Inputs eager saves as themselves (``trace.JointGraph.saved_whole``), and the saved
    #: tensors (by position) that are views of one the function leaves as it was, per
    #: saved tensor its input (``program._saved_views_of_inputs``): remade of the caller's
    #: input where the caller gave it other data before the backward (``.data =``).
    inputs_saved_whole: tuple[int, ...] = ()
    saved_input_views: dict[int, int] = field(default_factory=dict)
    #: User outputs eager makes inside a ``torch.inference_mode()`` block: the runtime
    #: returns them as inference tensors (a copy made under inference mode).
    inference_outputs: list[int] = field(default_factory=list)
    #: Inputs that come with an empty storage or whose storage the function resizes, and
    #: their bytes after the call. The graphs never resize; the runtime does, around them:
    #: an empty input gets the bytes it views while the graph reads and writes it.
    storage_resizes: dict[int, int] = field(default_factory=dict)
    #: Written inputs the function gave another storage (``set_``): the runtime
    #: ``set_``s the caller's tensor to the new value instead of copying into it.
    storage_sets: list[int] = field(default_factory=list)
    #: Written inputs whose new metadata covers other bytes than the caller's tensor: the
    #: graph returns their value in the caller's layout, written before the new metadata
    #: is given (``trace.TraceMetadata.relaid_inputs``).
    relaid_inputs: list[int] = field(default_factory=list)
    #: Outputs, then inputs, the function called ``retain_grad()`` on: the runtime calls
    #: it on the caller's tensors; then the outputs whose whole gradient the backward
    #: computes, after the inputs' written values (``trace.TraceMetadata.retained_grads``).
    retained_grads: tuple[list[int], list[int], dict[int, tuple[int, ...]]] = ([], [], {})
    #: Outputs the function computes other outputs from, per output the forward values
    #: computed from it: the backward returns the total gradient at each after the
    #: retained ones, and the runtime hands what those values pass back to the caller's
    #: tensor (``runtime.fed_outputs_link``).
    fed_outputs: dict[int, tuple[int, ...]] = field(default_factory=dict)
    #: Those whose total reads a saved value (``fed_outputs_link.totals_reading_saved``).
    fed_reading_saved: frozenset[int] = frozenset()
    #: Hooks the function registered on inputs, ``(input, hook)``: registered on the
    #: caller's tensors at each call (``aotgrad.input_hooks``). A layout with hooks is not
    #: written to the disk cache (they are the traced call's objects).
    input_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Of those, the ones registered before the function re-laid the input: registered
    #: before the runtime replays the change (on the caller's node as it was).
    early_input_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Of those, the ones on inputs that are views written with grad: registered before
    #: the Function is applied, where ``call_inputs.unhooked_views`` sees them as the
    #: caller's (eager's write hands the gradient to the base's node, past them).
    hooks_before_call: list[tuple[int, Any]] = field(default_factory=list)
    #: Hooks it registered on outputs rebuilt as views, ``(output, hook)``: registered on
    #: the rebuilt output too (the caller's gradient reaches it there).
    output_hooks: list[tuple[int, Any]] = field(default_factory=list)
    #: Forward outputs that others of them are computed from (``output_hooks.fed_on``):
    #: a hook the caller registers on one sees the gradient the caller gives it only.
    outputs_fed_on: frozenset[int] = frozenset()
    #: Hooked views the rebuilt outputs eager views of them are made of (an output, or
    #: remade with their hooks: ``input_hooks.HookedView``).
    hooked_views: list[Any] = field(default_factory=list)

    @property
    def num_fwd_outputs(self) -> int:
        return (
            self.num_user_outputs
            + self.num_intermediate_bases
            + len(self.mutated_inputs)
            + self.num_tokens
        )

    @property
    def writes_before_graph(self) -> bool:
        """The runtime changes the caller's tensors before the graph runs (``requires_grad``
        flags, storage sizes, metadata: ``Epilogue.prepare``)."""
        return bool(
            any(self.requires_grad_changes.values())
            or self.left_then_written
            or self.requires_grad_flag_off
            or self.own_requires_grad
            or self.storage_resizes
        )

    def callers_last(self, args: tuple) -> tuple[tuple, tuple, tuple]:
        """The graph's inputs, then the caller's tensors ``SyntheticBase.prepare`` passes
        after them: the leaves inner leaves stand for (``InnerLeaf.member``), then the
        members the link routes (``post_write_members``)."""
        n = len(args) - len(self.post_write_members)
        args, members = args[:n], args[n:]
        n -= sum(leaf.member is not None for leaf in self.inner_leaves)
        return args[:n], args[n:], members

    @property
    def watches_after_call(self) -> bool:
        """Something saved is noted once the call is over (its version then, the data of
        an input): ``training._TrainingPlan.note_watched``."""
        return bool(
            self.watched_inputs
            or self.watched_bases
            or self.watched_aliases
            or self.saved_input_views
            or self.saved_of_outputs
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
            or self.inner_leaves
            or self.same_as
            or self.merged_outputs
            or self.output_versions
            or self.requires_grad_changes
            or self.own_requires_grad
            or self.storage_resizes
            or self.stale_views
            or self.custom_views
            or self.inference_outputs
            or any(self.retained_grads)
            or self.input_hooks
            or self.early_input_hooks
            or self.output_hooks
            or self.hooked_views
            or self.data_outputs
            or self.views_of_set_inputs
        )
