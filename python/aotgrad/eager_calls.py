"""Calls that tracing would give another meaning than eager's, resolved as eager does.

**``out=`` tensors of the wrong shape** are resized as eager resizes them (``out_resizes``).

**In-place calls eager refuses** (memory overlap, leaves that require grad): raised
before the call, as eager raises them (``inplace_checks``). The fills eager allows on a
tensor whose elements share memory (``x.expand(2, 4, 4).zero_()``) are written without
the repeats (``overlapping_writes``).

**``requires_grad_(False)`` on a leaf input.** The traced stand-in of a leaf input is not
a leaf (a functional wrapper mirrors its autograd history; a written input runs on a
clone), so the call would raise where eager's succeeds. On those stand-ins it is
``detach_()``, which leaves the same tensor, out of autograd, as eager's call does.

**``x.data = y``** is ``x.set_(y)`` out of autograd with the version count kept (as
Dynamo traces it): functionalization alone drops the assignment.

**Leaves made inside** (``t.detach().requires_grad_()``, a factory called with
``requires_grad=True``) are recorded: ``trace`` refuses an output computed from one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

from .dtype_checks import dtype_error
from .eager_shortcuts import as_eager_runs
from .errors import EagerRefusal, NeedsSyntheticBase, UnsupportedError
from .fresh_results import fresh_result
from .gradless_bases import GradlessBases
from .hook_calls import called_by_backward
from .inference_dirty import uncounted_dirty_marks
from .inference_views import failed_inference_view, normal_view, uncounted_alias_write
from .inplace_checks import (
    DETACH_VIEW,
    inplace_error,
    leaf_in_overlap,
    leaves_sharing_storage,
    raise_leaf_in_overlap,
    setitem_copy_error,
    written_tensor,
    zero_dim_mask,
)
from .inplace_layout import keep_layout, keeping_layout
from .input_hooks import InputHooks, holds_traced_values, node_now
from .metadata_steps import MetadataSteps
from .ordered_copies import OrderedCopy, ordered_args
from .out_dtypes import in_eagers_dtype
from .out_resizes import call_with_out
from .overlapping_writes import backward_node, overlapping_setitem, overlapping_write
from .remade_view_nodes import RemadeViewNodes
from .restrides import Restrides, within
from .rng_setters import GeneratorsSeen
from .shared_counters import SharedCounters
from .stale_input_views import StaleInputViews
from .uncounted_writes import restore, uncounted
from .view_metadata_writes import (
    METADATA_WRITES,
    EarlierViews,
    leaf_view_of_gradless,
    left_autograd_views,
    stand_ins_left_autograd,
    views_left_autograd,
    write_metadata,
)
from .view_nodes import (
    PAST_REINTERPRETED,
    from_base,
    gradless_view,
    inherits_requires_grad,
    reads_as_base,
    requires_grad_by_base,
    restrided_view,
)

__all__ = ["EagerCalls", "for_inference_mode", "in_inference_mode"]


_calls = threading.local()


@contextlib.contextmanager
def for_inference_mode() -> Iterator[None]:
    """Tracing for a call under ``torch.inference_mode()`` (the trace itself runs outside
    it): autograd records nothing there, even inside the function's ``enable_grad``."""
    before = getattr(_calls, "inference", False)
    _calls.inference = True
    try:
        with uncounted_dirty_marks():
            yield
    finally:
        _calls.inference = before


def in_inference_mode() -> bool:
    """Tracing for a call under inference mode (``for_inference_mode``)."""
    return getattr(_calls, "inference", False)


def _eager_raises_for_grad(args: Any, kwargs: dict) -> bool:
    # "...out=... arguments don't support automatic differentiation": leave it to the op.
    if not torch.is_grad_enabled() or getattr(_calls, "inference", False):
        return False
    flat, _ = tree_flatten((args, kwargs))
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in flat)


_REQUIRES_GRAD_ = torch.Tensor.requires_grad_
#: Calls that read a tensor's metadata or autograd flags, not its elements.
_NO_DATA_READ = frozenset(
    {
        "__get__",
        "__set__",
        "requires_grad_",
        "retain_grad",
        "register_hook",
        "dim",
        "size",
        "stride",
    }
)
_RETAIN_GRAD = torch.Tensor.retain_grad
_REGISTER_HOOK = torch.Tensor.register_hook
_POST_ACCUMULATE_HOOK = torch.Tensor.register_post_accumulate_grad_hook
_GRAD_BOOKKEEPING = (_RETAIN_GRAD, _POST_ACCUMULATE_HOOK, _REGISTER_HOOK)
_DATA = torch._C.TensorBase.__dict__["data"]
_IS_LEAF = torch._C.TensorBase.__dict__["is_leaf"]
_GRAD_FN = torch._C.TensorBase.__dict__["grad_fn"]
_DETACH_ = torch.Tensor.detach_
_DETACH = (torch.Tensor.detach, torch.detach)
_SETITEM = torch.Tensor.__setitem__
_MASKED_FILL_ = torch.Tensor.masked_fill_
_AS_STRIDED = (torch.Tensor.as_strided, torch.as_strided)
_AS_STRIDED_ = (torch.Tensor.as_strided_, torch.as_strided_)
#: Calls about the tensor object itself, never given a stand-in for it (``relaid_views``).
_OWN_IDENTITY = frozenset(
    {
        _REQUIRES_GRAD_,
        _RETAIN_GRAD,
        _POST_ACCUMULATE_HOOK,
        _DETACH_,
        *_AS_STRIDED_,
        *(getattr(torch.Tensor, name) for name in METADATA_WRITES),
    }
)


@dataclass
class SyntheticMembers:
    """What the trace over a synthetic base (``alias.synthetic_base``) tells the calls."""

    #: The members rebuilt from the bases (by id): their input positions. Those that are
    #: or become leaves are inner leaves the caller's tensor stands for
    #: (``trace.InnerLeaf.member``).
    member_leaves: dict[int, int] = field(default_factory=dict)
    #: Bases that do not require grad (by id): views of them that do are views of a leaf
    #: view (``x1 = b[4:].requires_grad_()``), whose node eager rebuilds, after a write to
    #: the base, as one leading nowhere (as for ``EagerCalls.left_autograd``).
    leaf_view_bases: set[int] = field(default_factory=set)
    #: The synthetic bases (by id): no tensor of the caller's (eager casts none of them).
    bases: set[int] = field(default_factory=set)
    #: Members whose new node reads after the write reach (``synthetic_base._linkable``):
    #: (position, rebuilt member, its base's position among the graph's inputs).
    post_write: list[tuple[int, Any, int]] = field(default_factory=list)


class EagerCalls(torch.overrides.TorchFunctionMode):
    """Active while the user's function runs under tracing (see module docstring).
    ``leaves``: the stand-ins (by ``id``) of inputs that are leaves requiring grad."""

    #: Of the stand-ins of inputs that are views, the views of a leaf that requires grad
    #: (written in place with grad on, or given new metadata, eager raises).
    leaf_views: frozenset[int] = frozenset()
    #: Leaf inputs' stand-ins on a storage another input shares → their position
    #: (``inplace_checks.leaves_sharing_storage``).
    shared_leaves: dict[int, int] = {}
    #: Whether an op ran under autocast (``trace.autocast_casts``: eager's cast cache).
    autocast_seen: bool = False
    grad_mode_after: bool | None = None  # (as the function left it: ``flat_call``)
    #: Inputs that are views autograd cannot rebuild once written (``stale_input_views``).
    stale_views = StaleInputViews()
    #: Views of inputs whose node eager remakes without history (``remade_view_nodes``).
    remade = RemadeViewNodes()

    def __init__(
        self,
        leaves: frozenset[int] = frozenset(),
        views: frozenset[int] = frozenset(),
        inputs: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__()
        self.leaves = leaves
        #: Every input's stand-in (``requires_grad_()`` on one is no new leaf: the runtime
        #: makes the caller's tensor require grad).
        self.inputs = inputs
        #: The stand-ins of inputs that are views (``detach_()`` on one raises in eager).
        self.views = views
        #: Inputs that are views requiring grad of a base that does not (``gradless_bases``).
        self.gradless = GradlessBases()
        #: The stand-ins ``requires_grad_(False)`` was called on.
        self.flag_off: set[int] = set()
        self.turned_on: set[int] = set()  # (of inputs without grad, by requires_grad_())
        #: Per leaf input's stand-in (by id), its gradient edge before each
        #: ``requires_grad_(False)`` / ``detach_()``: what was computed from it then still
        #: reaches the caller's leaf, which eager's AccumulateGrad fills if the leaf
        #: requires grad again by the backward.
        self.edges_off: dict[int, list[Any]] = {}
        self.new_leaves, self.leaf_nodes = [], {}  # (see below)
        self.synthetic = SyntheticMembers()  # (``alias.synthetic_base``)
        self.generators = GeneratorsSeen()  # passed to random ops (``rng_setters``)
        #: Tensors ``retain_grad()`` was called on: the runtime calls it on the outputs and
        #: inputs among them (on the traced stand-ins it would fill nothing the caller sees).
        self.retained: list[Any] = []
        #: Autograd nodes of overlapping writes, whose backward raises (``overlapping_writes``).
        self.overlap_nodes: list[Any] = []
        #: Accumulators of leaves moved into the graph's interior (``alias.synthetic_base``).
        self.interior_nodes: list[Any] = []
        self.metadata_steps = MetadataSteps(())  # the inputs' metadata changes
        #: Results of ``detach()`` (the graph drops the detach: one value for ``t`` and
        #: ``t.detach()``; the runtime tells them apart).
        self.detached: list[torch.Tensor] = []
        #: Per ``detach()`` result (by id), the tensor it detached (one version counter).
        self.detached_from: dict[int, torch.Tensor] = {}
        self.data_reads: dict[int, Any] = {}  # ``.data`` results (held: ids stay theirs)
        #: Per leaf input's stand-in (by id), its autograd node when the function starts;
        #: dropped once the stand-in left autograd (it is no leaf that requires grad then).
        self.leaf_grad_fns: dict[int, Any] = {}
        #: Per input's stand-in with a history ``detach_()`` was called on (by id): its
        #: node and version count then (``trace.metadata`` checks a new leaf made of it).
        self.input_detached: dict[int, tuple[Any, int]] = {}
        #: Inputs' stand-ins (by id) ``detach_()`` or ``requires_grad_(False)`` took out
        #: of autograd (a write that requires grad may give them a history again).
        self.left_autograd: set[int] = set()
        #: ``as_strided`` on the inputs' storages (``aotgrad.restrides``).
        self.restrides = Restrides(())
        self.input_roots: frozenset[int] = inputs  # the stand-ins and their bases (by id)
        #: Views made so far, and those whose root's metadata changed after.
        self.earlier = EarlierViews()
        #: Inputs whose caller tensors share a version counter (``shared_counters``).
        self.counters = SharedCounters()
        #: Hooks registered on inputs, which the runtime registers on the caller's tensors.
        self.input_hooks = InputHooks()
        self.hooked_nodes = {}
        self.hook_calls = []

    #: Nodes (held, by id) other hooks sit on (``view_nodes.from_base``).
    hooked_nodes: dict[int, Any]
    #: (tensor, node, output number, registered hook, handle) per hook registered on a
    #: tensor the function made (``hook_calls.hooks_of_unused_pieces``).
    hook_calls: list[tuple[Any, ...]]
    #: Tensors the function made leaves that require grad (``x.detach().requires_grad_()``,
    #: a factory called with ``requires_grad=True``), in the order it made them.
    new_leaves: list[torch.Tensor]
    #: Of those that are views, their AccumulateGrad nodes (by the leaf's id), held: a
    #: write to the base moves such a leaf into the graph's interior, and an in-place op
    #: on it after (a custom Function's ``mark_dirty``) resets the node's variable, which
    #: then no longer tells whose gradient the node takes.
    leaf_nodes: dict[int, Any]
    #: Leaf inputs' stand-ins whose caller's tensor requires grad through its base
    #: (``requires_grad_by_base``), by id.
    flag_kept_by_base: frozenset[int] = frozenset()
    #: Of those, the ones ``requires_grad_(flag)`` set their own flag on: the last flag.
    #: Off, they still require grad, with no accumulator; on, they get one (eager's
    #: gradient then accumulates into the view's ``.grad``).
    own_flags: dict[int, bool]

    def _eager_view(self, t: Any) -> bool:
        """Whether eager's tensor for ``t`` is a view: not an input's stand-in, unless the
        caller's input is a view."""
        return id(t) not in self.inputs or id(t) in self.views

    @classmethod
    def for_inputs(
        cls, args: Sequence[Any], originals: Sequence[Any], share_counters: bool = False
    ) -> EagerCalls:
        """``args`` stand in for ``originals``: the ones for leaves that require grad.
        ``share_counters``: the stand-ins' counters move together where the caller's
        tensors share one (``shared_counters``; the metadata trace's outputs read it)."""
        pairs = [(a, o) for a, o in zip(args, originals) if isinstance(o, torch.Tensor)]
        calls = cls(
            frozenset(id(a) for a, o in pairs if o.is_leaf and o.requires_grad),
            frozenset(id(a) for a, o in pairs if o._is_view()),
            frozenset(id(a) for a, _ in pairs),
        )
        calls.leaf_views = frozenset(
            id(a)
            for a, o in pairs
            if o._is_view() and o._base is not None and o._base.is_leaf and o._base.requires_grad
        )
        calls.shared_leaves = leaves_sharing_storage(pairs)
        calls.own_flags = {}
        calls.flag_kept_by_base = frozenset(
            id(a) for a, o in pairs if id(a) in calls.leaves and requires_grad_by_base(o)
        )
        calls.gradless = GradlessBases.of_inputs(pairs)
        calls.stale_views = StaleInputViews.of_inputs(pairs)
        calls.restrides = Restrides([a for a, _ in pairs])
        calls.metadata_steps = MetadataSteps(args)
        calls.input_roots = calls.inputs | {id(a._base) for a, _ in pairs if a._is_view()}
        calls.remade = RemadeViewNodes.of_inputs(pairs, calls.input_roots)
        if share_counters:
            calls.counters = SharedCounters(pairs)
        calls.leaf_grad_fns = {id(a): a.grad_fn for a, o in pairs if id(a) in calls.leaves}
        calls.input_hooks.first_nodes = {
            id(a): a.grad_fn for a, o in pairs if a.requires_grad and not o._is_view()
        }  # (a view's no_grad write makes autograd rebuild its node: touched)
        return calls

    @staticmethod
    def active() -> EagerCalls | None:
        """The innermost ``EagerCalls`` the running trace is inside, if any."""
        for mode in reversed(torch.overrides._get_current_function_mode_stack()):
            if isinstance(mode, EagerCalls):
                return mode
        return None

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if not self.autocast_seen and torch._C._is_any_autocast_enabled():
            self.autocast_seen = True
        func, args, kwargs = as_eager_runs(func, args, kwargs)  # (dropout of p = 1)
        before = self.counters.versions() if self.counters.groups else None
        called = (args, kwargs)  # (the caller's objects, before any stand-in below)
        if self.earlier.changes and func not in _OWN_IDENTITY:
            kwargs = kwargs or {}
            written = args[0] if func is _SETITEM and args else written_tensor(func, args, kwargs)
            args, kwargs = self.earlier.stand_ins(
                args, kwargs, written, self.inputs, self.input_roots
            )
        # views of an input that left autograd, which a write may make autograd rebuild
        left: Any = ()
        if self.left_autograd or self.synthetic.leaf_view_bases:  # (no set built per op)
            gone = self.left_autograd | self.synthetic.leaf_view_bases
            left = left_autograd_views(args, kwargs, gone)
        counts = uncounted(func, args, kwargs or {})
        if getattr(_calls, "inference", False):  # (eager's inference aliases count nothing)
            counts += uncounted_alias_write(func, args, kwargs or {})
        if self.restrides.stale_views and getattr(func, "__name__", "") not in _NO_DATA_READ:
            self.restrides.note_reads(args)
        if kwargs and kwargs.get("generator") is not None:
            self.generators.note(kwargs["generator"])
        try:
            try:
                result = self._call(func, types, args, kwargs)
            except (RuntimeError, ValueError) as e:
                raise_leaf_in_overlap(e, func, args, kwargs, self.shared_leaves)
                if isinstance(e, ValueError) and not self.earlier.changes:
                    raise
                if failed_inference_view(e, args, kwargs or {}):
                    result = normal_view(lambda: self._call(func, types, args, kwargs))
                elif self.earlier.changes and not left:
                    result = self._with_relaid_input_views(e, func, types, args, kwargs)
                elif not left or not views_left_autograd(e):
                    raise
                else:
                    args, kwargs = stand_ins_left_autograd(
                        func, args, kwargs or {}, left, self.new_leaves
                    )
                    result = self._call(func, types, args, kwargs)
        finally:
            if before is not None:
                self.counters.sync(before)
        restore(counts)
        if self.stale_views.watched:
            refusal = self.stale_views.refusal(
                func, args, kwargs, result, records=not in_inference_mode()
            )
            if refusal is not None:
                raise refusal
        if self.remade.views:
            self.remade.check(func, *called, result)
        self._noted(func, args, kwargs, result)
        return result

    def _noted(self, func: Any, args: Any, kwargs: Any, result: Any) -> None:
        """After ``func`` ran: its result noted by the trackers that follow reads."""
        self.earlier.note(result)
        if self.metadata_steps.relaid_leaves and torch.is_grad_enabled():
            self.metadata_steps.refuse_read(args, result)
        if self.restrides.reachers:
            self.restrides.reachers.note_result(args, result)
        written = args[0] if func is _SETITEM and args else written_tensor(func, args, kwargs or {})
        if (
            isinstance(written, torch.Tensor)
            and getattr(func, "__name__", "") not in METADATA_WRITES
        ):
            keep_layout(written)

    def _with_relaid_input_views(
        self, error: Exception, func: Any, types: Any, args: Any, kwargs: Any
    ) -> Any:
        """``func`` again, the views of inputs whose metadata the function changed made
        as eager's (``as_strided`` at their geometry): functionalization (or autograd)
        failed replaying their view ops on the input's new geometry. The same values: an op that fails on them
        too raises the first error."""
        written = written_tensor(func, args, kwargs or {})
        again = self.earlier.stand_ins(
            args, kwargs or {}, written, self.inputs, self.input_roots, of_inputs=True
        )
        before, after = tree_flatten((args, kwargs or {}))[0], tree_flatten(again)[0]
        if all(a is b for a, b in zip(before, after)):
            raise error
        try:
            return self._call(func, types, *again)
        except (RuntimeError, ValueError):
            raise error from None

    def _call(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inference = getattr(_calls, "inference", False)
        if inference and torch.is_grad_enabled() and func is not torch._C._set_grad_enabled:
            # under inference mode autograd records and checks nothing, even inside the
            # function's enable_grad blocks (a grad-mode switch itself is let through: in
            # a no_grad block of ours, the mode it sets would be undone on the way out)
            with torch.no_grad():
                return self._call(func, types, args, kwargs)
        if func is _DETACH_ and args:
            if inference:  # autograd's kernel does not run: detach_() changes nothing
                return args[0]
            self._before_detach(args[0])
        args = self._checked(func, args, kwargs, inference)
        done, result = self._write(func, args, kwargs)
        if done:
            return result
        if (func in _AS_STRIDED or func in _AS_STRIDED_) and args:
            return self._as_strided(func, args, kwargs)
        if getattr(func, "__name__", "") in METADATA_WRITES and args:
            return self._metadata_write(func, args, kwargs)
        if func is _REQUIRES_GRAD_ and args:
            return self._requires_grad(func, args, kwargs)
        if func in _GRAD_BOOKKEEPING and args:
            return self._grad_bookkeeping(func, args, kwargs)
        if func is _SETITEM and zero_dim_mask(args):
            # ``x[x > 0] = v`` on a 0-dim ``x``: eager reads the mask's value (a Python
            # branch, data-dependent when traced); a masked fill is the same write
            return self._call(_MASKED_FILL_, types, args, kwargs)
        if func in _DETACH:
            result = func(*args, **kwargs)
            self.detached.append(result)
            if args and isinstance(args[0], torch.Tensor):
                self.detached_from[id(result)] = args[0]
            return result
        if getattr(func, "__self__", None) is _DATA and func.__name__ == "__set__":
            _assign_data(*args)
            return None
        if getattr(func, "__self__", None) is _DATA and func.__name__ == "__get__":
            result = func(*args, **kwargs)
            self.data_reads[id(result)] = result
            return result
        if getattr(func, "__self__", None) in _LEAF_READS and args and self._still_leaf(args[0]):
            # eager's is a leaf (the stand-in has a node of its own: ``to_functional``'s)
            return True if func.__self__ is _IS_LEAF else None
        out = kwargs.get("out")
        if kwargs.get("requires_grad") is True and not isinstance(out, torch.Tensor):
            result = func(*args, **kwargs)
            if isinstance(result, torch.Tensor) and result.requires_grad:
                self.new_leaves.append(result)
            return result
        if not isinstance(out, torch.Tensor) or _eager_raises_for_grad(args, kwargs):
            return self._plain_call(func, args, kwargs)
        args, kwargs = in_eagers_dtype(func, args, kwargs)  # (an ``out=`` of another dtype)
        # a resize changes metadata in place, as ``as_strided_``: earlier views of ``out``
        # are eager's ``as_strided`` of it, not a replay of their ops on its new shape
        changed = lambda o: self.earlier.changed(o, not self._eager_view(o), restride=True)  # noqa: E731
        return call_with_out(func, args, kwargs, out, changed)

    def _plain_call(self, func: Any, args: Any, kwargs: dict) -> Any:
        """``func`` itself; an in-place write through a functional view keeps its strides
        (``inplace_layout.keeping_layout``)."""
        with keeping_layout(args[0] if func is _SETITEM else written_tensor(func, args, kwargs)):
            result = fresh_result(func, args, func(*args, **kwargs))
        result = self.gradless.made(func, args, kwargs, result)
        self.remade.note(args, result)
        return result

    def _checked(self, func: Any, args: Any, kwargs: dict, inference: bool) -> Any:
        """``args``, once eager's refusals are checked (raised); a copy eager makes in an
        order a traced graph does not reproduce gets a fresh source in eager's order."""
        refusal = self._refusal(func, args, kwargs, inference)
        if isinstance(refusal, OrderedCopy):
            return ordered_args(func, args, refusal)
        if refusal is not None:
            raise refusal
        return args

    def _refusal(self, func: Any, args: Any, kwargs: dict, inference: bool) -> Exception | None:
        """What eager raises before running ``func`` that tracing would let through."""
        if func is _SETITEM:
            found = setitem_copy_error(args)
            if found is not None:
                return found
        # under inference mode autograd checks nothing (no leaf refusals)
        refusal = (
            inplace_error(func, args, kwargs, frozenset(), frozenset())
            if inference
            else inplace_error(func, args, kwargs, self._leaves_now(args), self.leaf_views)
        )
        if refusal is not None and self.shared_leaves:
            refusal = leaf_in_overlap(refusal, args[0], self.shared_leaves)
        if refusal is None and not inference:
            written = args[0] if func is _SETITEM and args else written_tensor(func, args, kwargs)
            refusal = self.stale_views.write_refusal(written, args, kwargs)
        return refusal if refusal is not None else dtype_error(func, args, kwargs)

    def _metadata_write(self, func: Any, args: Any, kwargs: dict) -> Any:
        """``t_()``, ``transpose_``...: made as eager's (``write_metadata``), noted."""
        # (swapdims_ is eager's transpose_; traced under inference mode, its
        # decomposition left the version count where eager's moves)
        if func in _SWAPS:
            func, kwargs = torch.Tensor.transpose_, _as_dims(kwargs)
        self.earlier.changed(args[0], not self._eager_view(args[0]))
        self.metadata_steps.rebuilt(self.restrides.metadata_written(args[0]))
        if id(args[0]) in self.synthetic.member_leaves and leaf_view_of_gradless(args[0]):
            result = func(*args, **kwargs)  # (a plain leaf: ``synthetic_base._MetadataWrites``)
        else:
            result = write_metadata(func, args, kwargs, eager_view=self._eager_view(args[0]))
        self.metadata_steps.note(args[0])
        self.metadata_steps.note_relaid_leaf(args[0], self.leaves, self.views)
        return result

    def _register_hook(self, func: Any, args: Any, kwargs: dict) -> Any:
        """A hook on an input: left for the runtime (``input_hooks``); any other: called by
        the backward (``hook_calls``), noted (a rebuilt output view gets it again)."""
        if self.input_hooks.takes(func, args, self.inputs):
            return self.input_hooks.add(args[0], args[1])
        registered = called_by_backward(args[1])
        handle = func(args[0], registered, *args[2:], **kwargs)
        self.input_hooks.note(func, args, handle)
        node = node_now(args[0])
        self.hooked_nodes[id(node)] = node
        self.hook_calls.append((args[0], node, args[0].output_nr, registered, handle))
        return handle

    def _grad_bookkeeping(self, func: Any, args: Any, kwargs: dict) -> Any:
        """``retain_grad()`` recorded (the runtime calls it on the caller's tensor);
        hooks (``_register_hook``); a post-accumulate hook on a leaf input left for the
        runtime, which registers it on the caller's leaf, unless it holds the trace's
        values."""
        t = args[0]
        if func is _REGISTER_HOOK:
            return self._register_hook(func, args, kwargs)
        if func is _RETAIN_GRAD:
            self.retained.append(t)
        elif id(t) in self.leaves and t.requires_grad and len(args) == 2:
            if holds_traced_values(args[1]):
                raise UnsupportedError(
                    "register_post_accumulate_grad_hook() inside the function, on a leaf "
                    "input, with a hook that holds a tensor: not supported (it would hold "
                    "the trace's stand-in); register it before the call"
                )
            return self.input_hooks.defer(t, args[1], post_accumulate=True)
        elif (
            func is _POST_ACCUMULATE_HOOK
            and len(args) == 2
            and t.is_leaf
            and t.requires_grad
            and id(t) not in self.inputs
            and not holds_traced_values(args[1])
        ):
            return self.input_hooks.defer_made_leaf_post(t, args[1])
        return func(*args, **kwargs)

    def _write(self, func: Any, args: Any, kwargs: dict) -> tuple[bool, Any]:
        """An in-place write checked against the inputs' restrides, and made here where
        its tensor's elements share memory (``(True, result)``; the autograd node, whose
        backward raises in eager, recorded)."""
        done, result = False, None
        written = written_tensor(func, args, kwargs)
        if written is not None and getattr(func, "__name__", "") not in METADATA_WRITES:
            self.metadata_steps.rebuilt(self.restrides.check_write(written))
            done, result = overlapping_write(func, args, kwargs)
        elif func is _SETITEM and len(args) == 3:
            done, result = overlapping_setitem(args)
        if not done:
            return False, None
        node = backward_node(result)
        if node is not None:
            self.overlap_nodes.append(node)
        return True, None if func is _SETITEM else result

    def _as_strided(self, func: Any, args: Any, kwargs: dict) -> Any:
        """``as_strided`` / ``as_strided_``, checked against the inputs' storages
        (``aotgrad.restrides``). ``v.as_strided(...)`` of a view,
        on elements of ``v`` only (beyond them, eager's gradient stops at ``v``'s), is
        taken from ``v._base`` (functionalization bans a write through a view chain with
        an ``as_strided`` after its first step), as eager's view of ``v`` would be: not
        requiring grad where ``v`` does not (a view made under no_grad), with ``v``'s
        creation meta (a view of one of several outputs, of a no_grad view, raises on an
        in-place write as ``v`` does)."""
        t = args[0]
        named = dict(zip(("size", "stride", "storage_offset"), args[1:]), **kwargs)
        size, stride = named["size"], named["stride"]
        inplace = func in _AS_STRIDED_
        offset = named.get("storage_offset")
        at = t.storage_offset() if offset is None else offset
        if inplace:
            self._past_input(t, size, stride, at)
        # unrecorded (no grad mode, or no grad anywhere), an in-place restride of a view is
        # rebuilt from its base (``write_metadata``)
        gradless = not torch.is_grad_enabled() or gradless_view(t)
        rebase = inplace and gradless and self._eager_view(t) and t._is_view()
        agree = self.restrides.restride(
            "as_strided_" if inplace else "as_strided", t, size, stride, offset, rebase
        )
        if inplace:
            # beyond t's elements, eager's gradient drops the others (an as_strided of t),
            # unless unrecorded: t's next node is then an as_strided of its base
            past = not within(t, size, stride, at) and not gradless
            reinterpreting = t._is_view() and not reads_as_base(t)
            if past and reinterpreting:
                raise EagerRefusal(PAST_REINTERPRETED)
            fresh = None if past or reinterpreting else restrided_view
            view = self._eager_view(t)
            self.earlier.changed(t, not view, restride=True)
            rebase = rebase and fresh is not None
            result = write_metadata(func, (t, size, stride, offset), {}, fresh, view, rebase)
            self.metadata_steps.note(t)
            self.metadata_steps.note_relaid_leaf(t, self.leaves, self.views)
            return result
        if not agree or not from_base(t, self.hooked_nodes) or not within(t, size, stride, at):
            view = func(t, size, stride, offset)
        else:
            with torch.set_grad_enabled(torch.is_grad_enabled() and t.requires_grad):
                view = func(t._base, size, stride, at)
            creation = torch._C._autograd._get_creation_meta(t)
            torch._C._autograd._set_creation_meta(view, creation)
        self.restrides.note_view(t, view)
        self.remade.note(args, view)
        return view

    def _past_input(self, t: Any, size: Any, stride: Any, at: Any) -> None:
        """``t.as_strided_(..)`` on an input that is a view in the caller, reaching past
        its elements: the traced input holds only its own. Eager's reads and writes reach
        the base's elements there, and, unrecorded (under no_grad), the input's next node
        is an ``as_strided`` of the base, whose gradient reaches them too. The function is
        compiled again over the base of every input on that storage
        (``alias.synthetic_base``)."""
        known = self.metadata_steps.inputs.get(id(t))
        if known is None or id(t) not in self.views:
            return
        static = all(isinstance(v, int) for v in (*size, *stride, at, *t.shape, *t.stride()))
        if not static or within(t, size, stride, at):
            return
        raise NeedsSyntheticBase(
            f"input {known[0]} is restrided past its elements", [known[0]], whole_storage=[known[0]]
        )

    def _still_leaf(self, t: Any) -> bool:
        """A leaf input's stand-in with the node it started with: eager's is a leaf."""
        try:
            return id(t) in self.leaf_grad_fns and t.grad_fn is self.leaf_grad_fns[id(t)]
        except RuntimeError:
            return False

    def _leaf_written_before(self, t: Any) -> None:
        """Before ``t`` leaves autograd (``detach_()``, ``requires_grad_(False)``): a leaf
        input's stand-in whose autograd node changed was written where autograd saw it (a
        custom Function's ``mark_dirty``), which eager refused then; after this call the
        trace's facts no longer show it."""
        if id(t) not in self.leaf_grad_fns:
            return
        node = t.grad_fn
        if node is not None and node is not self.leaf_grad_fns.pop(id(t)):
            raise EagerRefusal(
                "a leaf Variable that requires grad has been used in an in-place operation."
            )

    def _before_detach(self, t: Any) -> None:
        """``t.detach_()``: refused on an input view, as eager's; recorded on an input."""
        if id(t) in self.views:
            raise EagerRefusal(DETACH_VIEW)
        self._leaf_written_before(t)
        if id(t) in self.inputs and t.grad_fn is not None:
            self.input_detached.setdefault(id(t), (t.grad_fn, t._version))
        if id(t) in self.inputs:
            self.left_autograd.add(id(t))
        self._note_edge(t)

    def _note_edge(self, t: Any) -> None:
        """A leaf input's stand-in leaves autograd: its gradient edge now (``edges_off``)."""
        if id(t) in self.leaves and t.requires_grad:
            self.edges_off.setdefault(id(t), []).append(torch.autograd.graph.get_gradient_edge(t))

    def _leaves_now(self, args: Any) -> frozenset[int]:
        """``leaves``, less a leaf input ``requires_grad_(False)`` took out of autograd that
        was then written with a value requiring grad (eager's is no leaf any more: a write
        through a view of it is no write to a view of a leaf)."""
        if not self.flag_off or not args or not isinstance(args[0], torch.Tensor):
            return self.leaves
        gone = {
            id(t)
            for t in (args[0], args[0]._base)
            if t is not None and id(t) in self.flag_off and t.grad_fn is not None
        }
        return self.leaves - gone if gone else self.leaves

    def _requires_grad(self, func: Any, args: Any, kwargs: dict) -> Any:
        """``t.requires_grad_(flag)``: on a leaf input's stand-in, ``requires_grad_(False)``
        is ``detach_()`` (recorded); on a tensor made inside, a new leaf (recorded)."""
        t = args[0]
        if id(t) in self.leaves:
            flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
            if id(t) in self.flag_kept_by_base:
                # eager's own flag goes off or on; its base keeps it requiring grad, with
                # an accumulator only while the flag is on: the runtime sets the caller's
                # flag before the graph (123079)
                self.own_flags[id(t)] = bool(flag)
                return t
            if not flag and t.requires_grad:
                self._leaf_written_before(t)
                self.flag_off.add(id(t))
                self._note_edge(t)
                self.left_autograd.add(id(t))
                if t.grad_fn is not None:
                    self.input_detached.setdefault(id(t), (t.grad_fn, t._version))
                return t.detach_()
            return func(*args, **kwargs)
        flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", True)
        if id(t) in self.inputs and flag and not t.requires_grad:
            self.turned_on.add(id(t))
        if (t.requires_grad and not (flag and inherits_requires_grad(t))) or id(t) in self.inputs:
            return func(*args, **kwargs)
        result = func(*args, **kwargs)
        fresh = not any(leaf is result for leaf in self.new_leaves)
        if result.requires_grad and result.grad_fn is None and fresh:
            self.new_leaves.append(result)
            if result._is_view():  # (``leaf_nodes``)
                self.leaf_nodes[id(result)] = torch.autograd.graph.get_gradient_edge(result).node
        return result


_LEAF_READS = (_IS_LEAF, _GRAD_FN)
_SWAPS = (torch.Tensor.swapdims_, torch.Tensor.swapaxes_)


def _as_dims(kwargs: dict) -> dict:
    """``swapaxes_``'s keywords as ``transpose_``'s."""
    names = {"axis0": "dim0", "axis1": "dim1"}
    return {names.get(k, k): v for k, v in kwargs.items()}


def _assign_data(target: torch.Tensor, value: torch.Tensor) -> None:
    """``x.data = y``: a new storage for x, out of autograd, no version bump (as Dynamo
    traces it); functionalization would drop the assignment."""
    with (
        torch.no_grad(),
        torch.autograd.grad_mode._unsafe_preserve_version_counter(target),
    ):
        target.set_(value)
