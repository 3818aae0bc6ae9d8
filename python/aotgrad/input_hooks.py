"""Gradient hooks the function registers on its inputs (``x.register_hook(h)``).

Traced, such a hook runs on the gradient the compiled backward returns for the input:
only the part that flows through what the function computed. Eager's hook sits on the
caller's tensor and sees every gradient reaching it, also through an output that is the
input itself or a view of it (``x.register_hook(h); return x``: eager's gradient went
through ``h``, the traced one did not). So the trace records them (``InputHooks``) and
the runtime registers each on the caller's tensor at every call, as eager's call does.
An input the function writes with a history keeps its hooks in the trace (the write gives
the caller's tensor another node: eager's hook stays on the one it had; a write autograd
does not see, under ``no_grad``, leaves the node as it was), and so does one with a hook
that closes over a tensor or a symbolic number (at runtime it would hold the trace's
stand-in; traced, the graph computes it from the call's values)."""

from __future__ import annotations

import functools
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import is_fake
from torch.autograd.function import BackwardCFunction
from torch.utils._pytree import tree_flatten
from torch.utils.hooks import RemovableHandle

from .alias import facts
from .alias.reinterpret import Reinterpret
from .autograd_walks import reaches_node, reaches_output
from .errors import EagerRefusal, UnsupportedError, run_eagerly
from .vocab import OutputVerdict

__all__ = [
    "HookedView",
    "InputHooks",
    "PostAccumulate",
    "RetainedThrough",
    "caller_fed_outputs",
    "defined_only",
    "holds_traced_values",
    "hooked_leaf_outputs",
    "hooks_of_outputs",
    "hooks_on_linked_nodes",
    "hooks_on_members",
    "linked_rebuilt_outputs",
    "on_node_returned",
    "post_hooks_of_made_leaves",
    "register_hooks",
    "remake_views_of",
    "retain_grads",
    "retained_grads",
    "retained_written_inputs",
    "take_off_hooks",
    "views_through_output_hooks",
]

_REGISTER_HOOK = torch.Tensor.register_hook


class InputHooks:
    """The hooks registered on the inputs' stand-ins during a trace, in order; a handle's
    ``remove()`` inside the function takes its hook out, as eager's does."""

    def __init__(self) -> None:
        # (an OrderedDict: a handle holds it weakly, which a dict does not allow)
        self.entries: OrderedDict[int, tuple[Any, Callable]] = OrderedDict()
        #: ids of stand-ins whose hooks are traced instead (written inputs, and those
        #: named by ``kept``: known from the metadata trace when the joint one runs)
        self.traced: frozenset[int] = frozenset()
        #: Handle ids of hooks registered while the stand-in was untouched (no write or
        #: metadata change autograd recorded before: its node is the one it came with):
        #: eager's hook is on the caller's own node.
        self.untouched: set[int] = set()
        #: Each input stand-in's node when the trace began (``EagerCalls.for_inputs``).
        self.first_nodes: dict[int, Any] = {}
        #: ids of traced stand-ins whose hooks registered untouched are left for the
        #: runtime all the same (``early_input_hooks``, from the metadata trace).
        self.early: frozenset[int] = frozenset()
        #: Stand-ins given a hook that must stay in the trace (``holds_traced_values``).
        self.kept: set[int] = set()
        #: Hooks registered in the trace: ``(tensor, hook, handle, node)``, ``node`` the
        #: tensor's ``grad_fn`` then (the node eager's hook sits on).
        self.traced_hooks: list[tuple[Any, Callable, Any, Any, Any]] = []
        #: Post-accumulate hooks on leaves the function makes: ``(leaf, hook)`` by handle
        #: id (``post_hooks_of_made_leaves``).
        self.made_leaf_post: OrderedDict[int, tuple[Any, Callable]] = OrderedDict()

    def note(self, func: Any, args: Sequence[Any], handle: Any) -> None:
        """A hook the trace registered (on a tensor the function made, or kept): the
        runtime registers it again on an output rebuilt as a view (``of_outputs``)."""
        if func is _REGISTER_HOOK and len(args) == 2 and not holds_traced_values(args[1]):
            t = args[0]
            laid = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
            self.traced_hooks.append((t, args[1], handle, t.grad_fn, laid))

    def takes(self, func: Any, args: Sequence[Any], inputs: frozenset[int]) -> bool:
        """Whether ``func(*args)`` registers a hook this records (on an input that
        requires grad: on one that does not, eager's call raises, as the trace's does)."""
        return (
            func is _REGISTER_HOOK
            and len(args) == 2
            and id(args[0]) in inputs
            and (
                id(args[0]) not in self.traced
                or (id(args[0]) in self.early and self.untouched_now(args[0]))
            )
            and args[0].requires_grad
        )

    def untouched_now(self, t: Any) -> bool:
        """Whether nothing autograd recorded changed ``t`` yet: not written (or written
        under no_grad only, which leaves its node: soak 227717), its node its first."""
        if t._version == 0:
            return True
        first = self.first_nodes.get(id(t))
        return first is not None and t.grad_fn is first

    def add(self, t: Any, hook: Callable) -> Any:
        if holds_traced_values(hook):
            self.kept.add(id(t))
            return _REGISTER_HOOK(t, hook)
        return self.defer(t, hook)

    def defer(self, t: Any, hook: Callable, *, post_accumulate: bool = False) -> Any:
        """Leave ``hook`` for the runtime; ``post_accumulate``: a leaf input's
        ``register_post_accumulate_grad_hook`` (it runs after the caller's leaf is filled:
        registered on the stand-in, it would never run)."""
        handle = RemovableHandle(self.entries)
        self.entries[handle.id] = (t, PostAccumulate(hook) if post_accumulate else hook)
        if self.untouched_now(t):
            self.untouched.add(handle.id)
        return handle

    def defer_made_leaf_post(self, t: Any, hook: Callable) -> Any:
        """A post-accumulate hook on a leaf the function makes: left for the runtime,
        which registers it on the leaf the caller gets (on the trace's leaf it never ran:
        the trace's backward accumulates nothing)."""
        handle = RemovableHandle(self.made_leaf_post)
        self.made_leaf_post[handle.id] = (t, hook)
        return handle

    def of_inputs(
        self, wrapped: Sequence[Any]
    ) -> tuple[list[tuple[int, Callable]], set[int], set[int]]:
        """``(input index, hook)`` of each hook still registered, in order; the inputs
        whose hooks must stay in the trace (``kept``); the positions of the hooks
        registered while their input was untouched."""
        index = {id(w): i for i, w in enumerate(wrapped)}
        hooks = [(index[id(t)], hook) for t, hook in self.entries.values()]
        untouched = {n for n, h in enumerate(self.entries) if h in self.untouched}
        return hooks, {i for i, w in enumerate(wrapped) if id(w) in self.kept}, untouched


def hooks_of_outputs(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    outs: Sequence[Any],
    rebuilt: Sequence[int],
) -> list[tuple[int, Callable]]:
    """``(output, hook)`` of each hook still registered on a ``rebuilt`` output (a view
    the runtime makes of the real input or base): the caller's gradient reaches it
    there, not through the compiled backward where the traced hook runs. One output per
    hook: an output returned twice (``return t, t``) is one object to the caller too."""
    found = []
    for t, hook, handle, node, laid in traced:
        if handle.id not in (t._backward_hooks or {}):
            continue  # removed inside the function
        if _relaid_since(t, node, laid):
            continue  # (``views_through_output_hooks``: a ``HookedView`` at that layout)
        k = next((k for k in rebuilt if outs[k] is t), None)
        if k is not None:
            found.append((k, hook))
    return found


def caller_fed_outputs(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    outs: Sequence[Any],
    verdicts: Any,
    linked: Container[int] = (),
) -> list[tuple[int, Callable]]:
    """``(output, hook)`` for the hooks on the fresh outputs (``verdicts``: the outputs'
    ``alias.OutputVerdict``, ``NON_ALIAS``) that sit
    on the node they are returned with, where every gradient of the output comes from
    the caller: nothing else the function returns is computed from it. They run on the
    caller's output (registered at runtime), not in the compiled backward: eager runs a
    tensor's hooks in the order registered, and the compiled backward ran these after
    every hook registered on the output after the call (Dynamo registers a hook it
    cannot trace after its graph: ``g * 2`` then a recording hook recorded the gradient
    before the doubling; a blind hooks suite)."""
    found = []
    plain = [k for k, v in enumerate(verdicts) if v is OutputVerdict.NON_ALIAS]
    for k in plain:
        t = outs[k]
        hooked = on_node_returned(traced, t)
        if not hooked or any(outs[j] is t for j in range(k)):
            continue  # (an output returned twice is one tensor: its first place has them)
        node, nr = t.grad_fn, t.output_nr
        # (a view of ``t`` remade of the caller's tensor: its gradient passes there)
        others = [
            o
            for o, v in zip(outs, verdicts)
            if isinstance(o, torch.Tensor)
            and o is not t
            and not (v is OutputVerdict.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT and o._base is t)
        ]
        if (
            node is None  # (a leaf: ``hooked_leaf_outputs``)
            or k in linked  # (the others' gradient handed to it: ``trace.fed_outputs``)
            or not any(
                o.grad_fn is not None and reaches_output(o.grad_fn, node, nr) for o in others
            )
        ):
            found += [(k, hook) for _, hook, _, _, _ in hooked]
    return found


def linked_rebuilt_outputs(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    outs: Sequence[Any],
    rebuilt: Sequence[int],
    linked: Container[int],
) -> list[int]:
    """Rebuilt outputs (views of an input or of a returned base) others are computed from
    (``linked``: ``trace.fed_outputs``) whose hooks sit on the node they are returned
    with: taken off the trace, they run on the rebuilt view only (``hooks_of_outputs``),
    on the sum the fed outputs' link hands it, once, as eager's. Traced as well, they ran
    once per use: on the returned view's gradient and again in the compiled backward on
    what ``t.sin()`` passed back (a blind hooks suite: 26 pairs)."""
    return [k for k in rebuilt if k in linked and on_node_returned(traced, outs[k])]


def post_hooks_of_made_leaves(
    made: OrderedDict[int, tuple[Any, Callable]], outs: Sequence[Any]
) -> list[tuple[int, Callable]]:
    """``(output, PostAccumulate(hook))`` of each post-accumulate hook on a leaf the
    function makes and returns (eager's fires when the caller's backward fills the
    leaf's ``.grad``; the blind hooks suite: it never fired). One on a leaf not returned
    (its ``.grad`` the caller never sees, only the hook does) runs the calls eagerly."""
    found = []
    for t, hook in made.values():
        k = next((k for k, o in enumerate(outs) if o is t), None)
        if k is None:
            raise run_eagerly(
                UnsupportedError(
                    "register_post_accumulate_grad_hook() on a leaf the function makes and "
                    "does not return: its hook would not run; the calls run eagerly"
                )
            )
        found.append((k, PostAccumulate(hook)))
    return found


def hooked_leaf_outputs(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]], outs: Sequence[Any]
) -> list[int]:
    """Outputs that are leaves the function made (``t.detach().requires_grad_()``) with
    hooks: the compiled node hands the caller's leaf the gradient of what the function
    computed from it, which its hooks then see with the caller's, summed, as eager's
    accumulator does. Traced too, they ran twice on that part (an output rebuilt of an
    input), or not on the caller's (soak 241023: the leaf's ``.grad`` twice eager's)."""
    return [
        k
        for k, t in enumerate(outs)
        if isinstance(t, torch.Tensor)
        and t.requires_grad
        and node_now(t) is None  # (a stale view's read raises: no leaf)
        and not any(outs[j] is t for j in range(k))
        and on_node_returned(traced, t)
    ]


def on_node_returned(traced: Sequence[tuple[Any, Callable, Any, Any, Any]], t: Any) -> list:
    """The entries of ``traced`` (``InputHooks.traced_hooks``) registered on ``t`` while
    it had the node it is returned with (a hook from before an in-place write sits on
    the node the write replaced: it stays in the trace)."""
    return [
        e
        for e in traced
        if e[0] is t and e[3] is node_now(t) and e[2].id in (t._backward_hooks or {})
    ]


def take_off_hooks(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]], outs: Sequence[Any], fed: Sequence[int]
) -> None:
    """The joint trace's forward done: the hooks of the outputs ``fed`` (by the caller:
    ``caller_fed_outputs``) taken off, for the runtime registers them on the outputs."""
    for k in fed:
        for _, _, handle, _, _ in on_node_returned(traced, outs[k]):
            handle.remove()


def hooks_on_linked_nodes(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    call: Sequence[Any],
    linked: Sequence[int],
    diff_outs: Sequence[Any] = (),
) -> list[tuple[int, Callable]]:
    """The traced hooks on a linked input's node after its last write
    (``post_write_reads``: the runtime hands that node the gradient of the reads after
    the write), taken off, as ``(input, hook)`` in registration order. Traced, the hook
    saw the caller's part and the function's together, and the runtime took what the
    function's part passes on out again: right only for a hook linear in the gradient
    (``x.sin_(); x.register_hook(lambda g: g.clamp(-.5, .5)); x.retain_grad()``: the
    input's gradient came out 0, soak 235965). The runtime registers each on the
    caller's tensor after its write-back, where eager's sits: it sees both parts, once.

    So is one on a stand-in that is a view (``EarlierViews``: an input whose metadata
    changed) whose node a write autograd did not record (under no_grad, through another
    view) rebuilt: the same node (the same geometry over the same base node), as eager's
    root input keeps its own; unless a differentiable output (``diff_outs``) reached the
    old node first (a read between the hook and the write: it stays traced)."""
    index = {id(call[i]): i for i in linked}
    found = []
    for t, hook, handle, node, laid in traced:
        i = index.get(id(t))
        if i is None or node is None or not _registered(handle):
            continue
        now = node_now(t)
        if now is node or (
            _rebuilt_alike(t, now, node, laid)
            and not any(reaches_node(o.grad_fn, node) for o in diff_outs)
        ):
            handle.remove()
            found.append((i, hook))
    return found


def _rebuilt_alike(t: Any, now: Any, node: Any, laid: tuple) -> bool:
    layout = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
    return t._is_view() and laid == layout and _alike(now, node)


def _alike(now: Any, node: Any, depth: int = 16) -> bool:
    """Whether ``now`` is ``node`` rebuilt: the same kinds of node down to a node both
    reach (the view chain replayed on an unchanged base node)."""
    if now is node:
        return True
    if depth == 0 or now is None or node is None or type(now) is not type(node):
        return False
    ours, theirs = now.next_functions, node.next_functions
    return len(ours) == len(theirs) and all(
        _alike(a, b, depth - 1) for (a, _), (b, _) in zip(ours, theirs)
    )


def node_now(t: Any) -> Any:
    """``t.grad_fn`` read after the trace; ``_REBUILT`` for a view of a tensor written
    since it was made, whose node only the trace's mode could rebuild (``x[0]
    .register_hook(h); x.sin_()``: blind ``clone__Vaclamp_sin``): a new node in any case,
    not the one a hook was registered on."""
    try:
        return t.grad_fn
    except RuntimeError:
        return _REBUILT


_REBUILT = object()


def _registered(handle: Any) -> bool:
    """Whether ``handle``'s hook is still registered (the function may have removed it)."""
    hooks = handle.hooks_dict_ref()
    return hooks is not None and handle.id in hooks


def hooks_on_members(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    members: dict[int, int],
    outs: Sequence[Any],
) -> tuple[dict[int, list[Callable]], dict[int, int]]:
    """The traced hooks on synthetic-base members (``members``: stand-in id → member)
    that sit on the member's node when the function returns, and the outputs made of
    the member through that node (``return x1.diagonal()``). Eager's hook is on the
    caller's member: the gradient of such an output, and of what the caller computes
    from the member afterwards, passes through it. The runtime rebuilds those outputs
    as views of the base, whose gradient reaches the graph as the base's: the traced
    hook, on the member's view node, never sees it. So the runtime registers the hook on
    the caller's member and makes those outputs of it (``SyntheticBase.finish``)."""
    hooks: dict[int, list[Callable]] = {}
    through: dict[int, int] = {}
    for t, hook, node in _on_their_nodes(traced):
        i = members.get(id(t))
        if i is not None:
            hooks.setdefault(i, []).append(hook)
            through.update((j, i) for j, o in enumerate(outs) if _view_through(o, t, node))
    return hooks, through


def views_through_output_hooks(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
    outs: Sequence[Any],
    rebuilt: Sequence[int],
) -> list[HookedView]:
    """Rebuilt outputs viewed through the node a traced hook sits on (``v.register_hook(h);
    return v.view(4, 4)``): eager's gradient of the view passes through ``v``'s hook;
    rebuilt of the input, it did not. The runtime makes them of ``v``: of the rebuilt
    output where ``v`` is one (its hook is an output hook), else of ``v`` remade with
    its hooks (``HookedView``)."""
    found = _relaid_outputs(traced, outs, rebuilt)
    for t, hook, node in _on_their_nodes(traced):
        views = [j for j in rebuilt if _view_through(outs[j], t, node)]
        k = next((k for k in rebuilt if outs[k] is t), None)
        if k is not None and views:
            found.append(HookedView(k, None, [], views))
        elif views:
            found.append(HookedView.of(t, outs[views[0]], hook, views))
    return _merged(found)


@dataclass
class HookedView:
    """A view the function hooked, and the rebuilt outputs eager views of it. Returned
    itself: output ``anchor`` (``layout`` None). Not returned: made of the base of rebuilt
    output ``anchor`` at ``layout`` (its sizes, strides and offset from the anchor's),
    with its ``hooks``."""

    anchor: int
    layout: tuple[tuple[int, ...], tuple[int, ...], int] | None
    hooks: list[Callable]
    outputs: list[int]

    @classmethod
    def of(
        cls, t: Any, anchor: Any, hook: Callable, outputs: list[int], at: Any = None
    ) -> HookedView:
        """``t``'s (or ``at``: sizes, strides, offset from ``t``'s) view of ``anchor``."""
        if at is None:
            at = (tuple(t.shape), tuple(t.stride()), 0)
        delta = t.storage_offset() - anchor.storage_offset()
        layout = (tuple(at[0]), tuple(at[1]), delta + at[2])
        if not all(type(v) is int for v in (*layout[0], *layout[1], layout[2])):
            raise EagerRefusal(
                "outputs viewed of a hooked view the function does not return, with "
                "symbolic sizes: the hook could not be placed on their gradient's path"
            )
        return cls(outputs[0], layout, [hook], outputs)

    def remake(self, outs: list[Any]) -> None:
        if self.layout is None:
            remake_views_of(outs, dict.fromkeys(self.outputs, outs[self.anchor]))
            return
        base = outs[self.anchor]._base
        if base is None or not base.requires_grad or not outs[self.anchor].requires_grad:
            return
        size, stride, delta = self.layout
        if base.dtype != outs[self.anchor].dtype:  # (``view_as_real(z)`` hooked: soak 249890)
            base = Reinterpret(outs[self.anchor].dtype).apply(base)
        view = base.as_strided(size, stride, outs[self.anchor].storage_offset() + delta)
        register_hooks([view], [(0, h) for h in self.hooks])
        remake_views_of(outs, dict.fromkeys(self.outputs, view))


def _merged(views: list[HookedView]) -> list[HookedView]:
    """One per hooked view (two hooks on one view: one remade view with both)."""
    merged: list[HookedView] = []
    for v in views:
        same = next((m for m in merged if m.outputs == v.outputs and m.layout == v.layout), None)
        if same is None or v.layout is None:
            merged.append(v)
        else:
            same.hooks += v.hooks
    return merged


def remake_views_of(outs: list[Any], through: dict[int, Any]) -> None:
    """``outs[j]`` made again as a view of ``through[j]`` (same sizes, strides, offset),
    where both require grad: its gradient then passes through that tensor's node and
    hooks. The view's own hooks and ``retain_grad()`` move with it."""
    for j, src in through.items():
        o = outs[j]
        if not (o.requires_grad and src.requires_grad):
            continue
        outs[j] = src.as_strided(o.size(), o.stride(), o.storage_offset())
        for h in (o._backward_hooks or {}).values():
            outs[j].register_hook(h)
        if o.retains_grad:
            outs[j].retain_grad()


def _relaid_since(t: Any, node: Any, laid: Any) -> bool:
    """Whether ``t``'s metadata changed in place since a hook was registered on it
    (``v.register_hook(h); v.unsqueeze_(0)``): eager's hook stays on the old node."""
    now = (tuple(t.shape), tuple(t.stride()), t.storage_offset())
    return node is not None and now != laid and node_now(t) is not node


def _relaid_outputs(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]], outs: Sequence[Any], rebuilt: Any
) -> list[HookedView]:
    """Rebuilt outputs hooked before an in-place metadata change: eager's hook sits on
    the node the output had then, and sees the gradient at that layout (blind probe
    p53: registered on the returned output, it saw the new one). Each is remade as a
    view of that layout with the hook, the output a view of it."""
    found = []
    for t, hook, handle, node, laid in traced:
        k = next((k for k in rebuilt if outs[k] is t), None)
        if k is None or handle.id not in (t._backward_hooks or {}):
            continue
        if _relaid_since(t, node, laid):
            at = (laid[0], laid[1], laid[2] - t.storage_offset())
            found.append(HookedView.of(t, outs[k], hook, [k], at))
    return found


def _on_their_nodes(
    traced: Sequence[tuple[Any, Callable, Any, Any, Any]],
) -> list[tuple[Any, Callable, Any]]:
    """``(tensor, hook, node)`` of the traced hooks still registered whose tensor's node
    at the function's end is the one the hook was registered on (a later write, or one
    through another view of its base, gives it another: eager's hook stays behind)."""
    return [
        (t, hook, node)
        for t, hook, handle, node, _ in traced
        if node is not None and handle.id in (t._backward_hooks or {}) and node_now(t) is node
    ]


def _view_through(o: Any, t: Any, node: Any, depth: int = 32) -> bool:
    """Whether ``o`` is a view of ``t``'s base other than ``t``, made through ``node``
    at ``t``'s output of it (on the first-edge chain from its ``grad_fn``: a chain of
    views). A multi-output view's other pieces (``m0, m1 = t.chunk(2)``) share its node,
    not the output the hook is on."""
    if o is t or not isinstance(o, torch.Tensor) or o._base is None or o._base is not t._base:
        return False
    fn, nr = o.grad_fn, o.output_nr
    while fn is not None and depth > 0:
        if fn is node:
            return nr == t.output_nr
        if isinstance(fn, BackwardCFunction):
            # (a custom Function's output aliasing ``t`` (returned as is): its backward
            # is the graph's, not a view's: soak 237777)
            return False
        edges = fn.next_functions
        (fn, nr), depth = (edges[0] if edges else (None, 0)), depth - 1
    return False


def holds_traced_values(hook: Callable) -> bool:
    """Whether ``hook`` holds (closes over, defaults to, is bound to or partially applied
    with, keeps as an attribute) one of the trace's stand-ins (a fake or functional
    tensor) or a symbolic number, also inside lists, tuples and dicts; a callable that
    is neither a Python function nor an object with a Python ``__call__`` holds what is
    not known: counted as one. (The caller's real tensors are the same at runtime.)"""
    values: list[Any] = []
    fn: Any = hook
    if isinstance(fn, functools.partial):
        values += [*fn.args, *fn.keywords.values()]
        fn = fn.func
    if isinstance(fn, types.BuiltinMethodType) and not isinstance(fn.__self__, types.ModuleType):
        return _any_stand_in([fn.__self__])  # (``seen.append``)
    if hasattr(fn, "__self__") and hasattr(fn, "__func__"):  # a bound method
        values.append(fn.__self__)
        fn = fn.__func__
    elif getattr(fn, "__code__", None) is None and hasattr(type(fn).__call__, "__code__"):
        values.append(getattr(fn, "__dict__", {}))  # an object with a Python __call__
        fn = type(fn).__call__
    if getattr(fn, "__code__", None) is None:
        return True
    values += [c.cell_contents for c in fn.__closure__ or () if _filled(c)]
    values += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
    return _any_stand_in(values)


def _any_stand_in(values: list[Any]) -> bool:
    flat, _ = tree_flatten(values)
    return any(
        isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool))
        or (isinstance(v, torch.Tensor) and is_fake(v))
        for v in flat
    )


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:  # an empty cell
        return False
    return True


class PostAccumulate:
    """A hook ``register_post_accumulate_grad_hook`` registered (on a leaf input)."""

    def __init__(self, hook: Callable) -> None:
        self.hook = hook


def register_hooks(tensors: Sequence[Any], hooks: Sequence[tuple[int, Callable]]) -> None:
    """At each call, the function's hooks on the caller's inputs or outputs."""
    fresh: dict[int, Any] = {}
    for i, hook in hooks:
        t = tensors[i]
        if hasattr(hook, "for_call"):  # (``hook_calls.UnusedPiece``: one per call)
            hook = fresh.setdefault(id(hook), hook.for_call())
        if isinstance(hook, PostAccumulate):
            if t.is_leaf and t.requires_grad:
                t.register_post_accumulate_grad_hook(hook.hook)
        elif t.requires_grad:
            t.register_hook(
                hook if _beside_a_piece(t, tensors) else functools.partial(defined_only, hook)
            )


def defined_only(hook: Callable, grad: Any) -> Any:
    """``hook(grad)``, skipped for no gradient: the compiled Function gives every input that
    requires grad an edge, and autograd calls a hook on one the function never used with
    None, where eager has no edge and never calls it."""
    return None if grad is None else hook(grad)


def _beside_a_piece(t: Any, tensors: Sequence[Any]) -> bool:
    """Whether ``t`` is a piece of a multi-output view (``split``, ``unbind``) another of
    ``tensors`` is a piece of too: eager's node runs whenever that one gets a gradient,
    and calls ``t``'s hooks with None where ``t`` gets none (soak 245818: the function
    hooks ``x3``, uses ``x4``, of ``x3, x4 = b.split(4)``)."""
    node = t.grad_fn
    return node is not None and any(
        o is not t
        and isinstance(o, torch.Tensor)
        and o.grad_fn is node
        and o.output_nr != t.output_nr
        for o in tensors
    )


def retain_grads(
    outs: Sequence[Any],
    args: Sequence[Any],
    retained: tuple[list[int], list[int], dict[int, tuple[int, ...]]],
    fwd: Sequence[Any] = (),
    written: dict[int, int] | None = None,
) -> None:
    """``retain_grad()`` the function called on outputs and inputs, on the caller's
    tensors (where they still require grad: a call under ``no_grad`` leaves the
    outputs without); an output the function computes more from, or a written input
    (``written``: forward-value index → input), also gets the gradient of that part
    (``RetainedThrough``), filled by the compiled backward (``fwd[k]``'s node)."""
    written = written or {}
    for k in retained[0]:
        t = outs[k]
        # (a view first: its node, rebuilt on access, may be one autograd refuses to make)
        if t.requires_grad and not t._is_view() and t.grad_fn is not None and t.output_nr > 0:
            own = _OwnNode.apply(t)
            outs[:] = [own if o is t else _view_of_own(o, t, own) for o in outs]
    for slot, (k, tangents) in enumerate(retained[2].items()):
        t = args[written[k]] if k in written else outs[k]
        node = fwd[k].grad_fn if k < len(fwd) else t.grad_fn
        slots = getattr(node, "retained_through", None)
        if t.requires_grad and slots is not None:
            slots[slot] = RetainedThrough(t, tangents)
    for t in [*(outs[k] for k in retained[0]), *(args[i] for i in retained[1])]:
        if t.requires_grad:
            t.retain_grad()


def _view_of_own(o: Any, t: Any, own: Any) -> Any:
    """``o``, where it is a view of ``t`` with history, as the same view of ``own``:
    eager's views of a retained output are its views (``._base``), and their gradients
    reach its ``.grad`` (soak 215713)."""
    if not (isinstance(o, torch.Tensor) and o._base is t and o.requires_grad and o.grad_fn):
        return o
    if o.dtype != t.dtype or o.is_conj() or o.is_neg():  # (a reinterpreting view: as made)
        return o
    with torch.enable_grad():
        return own.as_strided(o.size(), o.stride(), o.storage_offset())


class _OwnNode(torch.autograd.Function):
    """The identity, through a node of its own (output 0; the same storage and version
    counter). For an output the function retains grad on that is the compiled Function's
    output 1 or later: an in-place write to it after ``retain_grad()`` trips torch's
    assert "out != nullptr" (``update_tensor_hooks_on_new_gradfn`` moves the retain
    hook from the output number the write already reset to 0; soak 121126), where eager's
    tensor is its node's output 0."""

    @staticmethod
    def forward(ctx: Any, t: torch.Tensor) -> torch.Tensor:
        return t.detach()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        return grad


def retained_written_inputs(
    retained: Sequence[Any], wrapped: Sequence[Any], fake_args: Sequence[Any], plan: Any, start: int
) -> dict[int, tuple[int, ...]]:
    """Written inputs that retain grad (``retain_grad()`` inside, or the caller's: the
    fake is marked ``CALLER_RETAINS``, the call key has it), written with grad: eager's
    ``.grad`` is the gradient of the new value, every use's (the caller's and the
    function's after the write); autograd's retain hook on the caller's tensor sees the
    caller's only. Forward-value index (``start``: where the written values begin) →
    (), as ``RetainedThrough`` outputs: the backward computes the whole."""
    ids = {id(t) for t in retained}
    flags = plan.facts.input_flags
    return {
        start + p: ()
        for p, i in enumerate(plan.mutated_inputs)
        if facts.written_with_grad(flags[i])
        and i not in plan.facts.input_view  # (re-laid: known open, see the test's xfail)
        # (a view in the caller: eager's .grad is what reaches the node its write gives
        # it, not the base's part of the new value's; autograd's retain hook, moved
        # there by the write-back, sees it, the link the reads after the write)
        and not fake_args[i]._is_view()
        and (id(wrapped[i]) in ids or getattr(fake_args[i], CALLER_RETAINS, False))
    }


#: Attribute set on the fake of an input whose caller called ``retain_grad()`` on it.
CALLER_RETAINS = "_aotgrad_caller_retains"

_UNSET = object()


class RetainedThrough:
    """An output the function called ``retain_grad()`` on and computed other outputs
    from: eager's ``.grad`` takes in every gradient that reaches it, the caller's and
    the function's own uses. The compiled backward computes that sum (the joint trace
    differentiates with respect to the output too, ``JointGraph.retained_totals``);
    ``fill`` sets it, as eager's retain hook would have: added to the ``.grad`` from
    before this backward. Autograd's own retain hook (``retain_grad()``, for
    ``retains_grad`` and the caller's part) runs first, after every tensor hook: the
    one registered here notes the ``.grad`` it will add to."""

    def __init__(self, t: torch.Tensor, tangents: Sequence[int]) -> None:
        self.ref = weakref.ref(t)
        self.tangents = frozenset(tangents)
        self.node = t.grad_fn  # (a written input's: the runtime's write)
        self.before: Any = _UNSET
        t.register_hook(self._note)

    def _note(self, grad: Any) -> None:
        t = self.ref()
        self.before = None if t is None else t.grad

    def fill(self, total: Any, missing: Sequence[int]) -> None:
        """Set ``.grad`` to what eager's is after this backward (nothing where none of
        the tangents that reach the output was reached: eager's hook never ran; nor
        where the caller wrote the output in place: autograd moved its retain hook to
        the new node, whose gradient it gets, as eager's)."""
        t, before, self.before = self.ref(), self.before, _UNSET
        if t is None or total is None or self.tangents.issubset(missing):
            return
        if t.grad_fn is not self.node:
            return
        if before is _UNSET:
            before = t.grad
        t.grad = total if before is None else before + total


def retained_grads(
    retained: Sequence[Any],
    outs: Sequence[Any],
    wrapped: Sequence[Any],
    written: list[int],
    fresh: Sequence[bool],
    linkable: Sequence[bool] = (),
    made_of: dict[int, int] | None = None,
) -> tuple[list[int], list[int], dict[int, tuple[int, ...]]]:
    """The outputs, then the inputs, among the tensors ``retain_grad()`` was called on,
    then the outputs the function computes more from or hooks (``RetainedThrough``; the
    tangents that reach them are set by the joint trace). Output ``k`` must be ``fresh[k]`` (no
    alias: the compiled Function's own output) for that; a view the runtime remakes
    (``linkable[k]``) that only other outputs are computed from (the compiled node's, or
    views the runtime makes of it: ``made_of``, ``trace.views_of_outputs``) is left to the fed
    outputs' link (``trace.fed_outputs``: the engine sums their part into the view's
    node, which autograd's retain hook then sees, as eager's); otherwise the call runs
    eagerly. An input needs nothing more: its gradient takes in the function's part."""
    ids = {id(t) for t in retained}
    kept = [k for k, o in enumerate(outs) if id(o) in ids]
    through: dict[int, tuple[int, ...]] = {}
    for k in kept:
        if any(outs[k] is w for w in wrapped):
            continue
        node = facts.grad_fn_of(outs[k])
        users = [o for o in outs if isinstance(o, torch.Tensor) and o is not outs[k]]
        users = [o for o in users if o._base is not outs[k]]  # views: made of the returned one
        users += [wrapped[i] for i in written]
        nr = outs[k].output_nr
        # (a hook traced on it changes the gradient in the graph: eager's retain hook
        # runs after every tensor hook, so its .grad is the hooked one)
        hooked = bool(outs[k]._backward_hooks) and fresh[k]
        reached = [
            o
            for o in users
            if node is not None
            and (g := facts.grad_fn_of(o)) not in (None, facts.STALE_VIEW, node)
            and reaches_output(g, node, nr)
        ]
        if not hooked and not reached:
            continue
        once = sum(o is outs[k] for o in outs) == 1
        # (the link hands it what the compiled backward passes back: from outputs of the
        # compiled node, not from views the runtime remakes nor from written inputs)
        made_of = made_of or {}
        by_outputs = all(
            any(o is u and (fresh[j] or made_of.get(j) == k) for j, u in enumerate(outs))
            for o in reached
        )
        if not fresh[k] and linkable and linkable[k] and once and by_outputs:
            continue  # (the fed outputs' link)
        if not fresh[k] or not once:
            raise EagerRefusal(
                f"retain_grad() on output {k}, an alias from which the function computes "
                "other outputs: the output aotgrad returns would get the caller's part of "
                "the gradient only"
            )
        through[k] = ()
    return kept, [i for i, w in enumerate(wrapped) if id(w) in ids], through
