"""Synthetic bases: inputs that overlap in memory, one of them written by the function.

Traced as separate inputs, ``f(x[0], x)`` writing through the first would leave
the graph's copy of the second stale. So the graph instead takes one input
per overlap group — the group's common base — and rebuilds each member inside
the graph as an ``as_strided`` view of it; functionalization then propagates
the write to every member, the graph returns the base's new value and the
runtime copies it into the real base. Several groups, on one storage or on
several, each get a base of their own.

A group's base is the members' common ``._base`` (autograd differentiates
through it), or, when they have none in common and none requires grad, a flat
view of their whole storage. The members' layout (sizes, strides, offsets) is
baked into the graph: ``matches`` tells whether a later call has the same, and
the caller compiles again when it has not (under ``dynamic=True`` too: the
bases are traced with static shapes).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..autograd_walks import accumulator_of
from ..eager_calls import EagerCalls, in_inference_mode
from ..errors import NeedsSyntheticBase, UnsupportedError
from ..input_hooks import hooks_on_members, register_hooks, remake_views_of
from ..view_metadata_writes import METADATA_WRITES, leaf_view_of_gradless
from .member_views import Layout, layout, of_member, remakeable, views_of_detached, views_of_members
from .storage import overlap_groups
from .views import ViewSpec, set_metadata


def _refuse_histories_of_aliases(groups: Sequence[Any], built: dict[int, Any]) -> None:
    """A detached alias in a group (``_Group.detached``) that the function gave a history
    (written with a value that requires grad): eager's caller tensor, a view of a base of
    its own, gets one; the group's base is another tensor's. Refused."""
    for g in groups:
        for i, d in zip(g.members, g.detached or ()):
            if d and built[i].requires_grad:
                raise UnsupportedError(
                    f"input {i} shares bytes with an input that requires grad without "
                    "viewing it, and is written with a value that requires grad: not "
                    "supported"
                )


def _views(tensors: Sequence[Any], members: tuple[int, ...]) -> tuple[bool, ...]:
    return tuple(tensors[i]._is_view() for i in members)


def _bits(
    tensors: Sequence[Any], members: tuple[int, ...], common: bool
) -> tuple[tuple[bool, bool], ...]:
    """Each member's conj and neg bits (``_Group.bits``); empty where none has one."""
    bits = tuple((tensors[i].is_conj(), tensors[i].is_neg()) for i in members)
    if not any(c or n for c, n in bits):
        return ()
    if not common:
        raise UnsupportedError(
            f"inputs {members} overlap in memory, one with a conj or neg bit, and are not "
            "views of one common tensor: not supported"
        )
    return bits


def _with_bits(t: torch.Tensor, bits: tuple[bool, bool]) -> torch.Tensor:
    """``t`` (made of the base, which has no bits) with a member's conj / neg bits."""
    conj, neg = bits
    if conj:
        t = t.conj()
    if neg:
        t = torch._neg_view(t)
    return t


def _root(t: torch.Tensor) -> torch.Tensor:
    return t if t._base is None else t._base


_CREATION = torch._C._autograd.CreationMeta


def _creation(t: torch.Tensor) -> Any:
    """Autograd's creation meta of the caller's view (``DEFAULT`` for a non-view)."""
    return torch._C._autograd._get_creation_meta(t) if t._is_view() else _CREATION.DEFAULT


def _member(
    base: torch.Tensor, layout: Layout | ViewSpec, creation: Any, leaf: bool = False
) -> torch.Tensor:
    """A member rebuilt as made by the caller: under no_grad for a view made so, and with
    its creation meta (a ``chunk()`` output's, a custom Function's), so that eager's
    checks on writing through it, or on reading it after a write, are the caller's;
    ``leaf``: a view the caller made require grad of a base that does not (a leaf of its
    own: the function reads its ``requires_grad``)."""
    # (not set_grad_enabled: under the tracing modes it leaves grad mode on at exit)
    with torch.no_grad() if creation == _CREATION.NO_GRAD_MODE else torch.enable_grad():
        member = of_member(base, layout)
    # set even where the grad mode above should have given it: a trace of a call under
    # inference mode makes every view under no_grad (``EagerCalls._call``), and eager's
    # ``DEFAULT`` view read after a write to its sibling regenerates its node where a
    # no_grad one raises
    if member._is_view() and torch._C._autograd._get_creation_meta(member) != creation:
        torch._C._autograd._set_creation_meta(member, creation)
    if leaf and not member.requires_grad:
        member.requires_grad_()
    return member


@dataclass(frozen=True)
class _Group:
    #: Graph-input positions of the members (replaced by the group's base).
    members: tuple[int, ...]
    views: tuple[Layout, ...]
    #: True: the base is the members' common ``._base``; False: a flat storage view.
    common_base: bool
    #: Per member, autograd's creation meta of the caller's view (made under ``no_grad``,
    #: by a multi-output op, in a custom Function): the traced member is made alike.
    creation: tuple[Any, ...] = ()
    #: Per member: a view that requires grad of a base that does not (made a leaf by
    #: ``requires_grad_()`` in the caller).
    leaves: tuple[bool, ...] = ()
    #: Per member: an alias of the base's bytes that is no view of it and requires no
    #: grad (a ``detach()`` of it; Dynamo passes one across a graph break): made as a
    #: detached view of the base, autograd's link cut as the caller's is.
    detached: tuple[bool, ...] = ()
    #: Per member: a view in the caller (not the base itself, nor a tensor of its own).
    is_view: tuple[bool, ...] = ()
    #: Per member: its conj and neg bits (``x`` passed beside ``x.conj()``): the member is
    #: made with them (``_with_bits``), as the caller's reads the bytes.
    bits: tuple[tuple[bool, bool], ...] = ()

    @classmethod
    def of(cls, tensors: Sequence[Any], members: tuple[int, ...]) -> _Group:
        names = ", ".join(map(str, members))
        roots = {id(_root(tensors[i])) for i in members if tensors[i].requires_grad}
        common = len({id(_root(tensors[i])) for i in members}) == 1
        if not common and len(roots) != 1:
            if roots:
                raise UnsupportedError(
                    f"inputs {names} overlap in memory, one is written in place, one requires "
                    "grad and they are not views of one common tensor: not supported"
                )
        elif not common:  # one root among those that require grad: the others are aliases
            return cls._around(tensors, members, roots.pop())
        if len({tensors[i].dtype for i in members}) != 1:
            raise UnsupportedError(f"inputs {names} overlap in memory with different dtypes")
        creation = tuple(_creation(tensors[i]) for i in members)
        leaves = tuple(
            common and tensors[i].requires_grad and not _root(tensors[i]).requires_grad
            for i in members
        )
        views = tuple(layout(tensors[i]) for i in members)
        bits = _bits(tensors, members, common)
        return cls(members, views, common, creation, leaves, (), _views(tensors, members), bits)

    @classmethod
    def _around(cls, tensors: Sequence[Any], members: tuple[int, ...], root: int) -> _Group:
        """Members of one root that require grad (``x0``, its views), beside aliases of its
        bytes that are no views of it and require none (``detached``)."""
        if len({tensors[i].dtype for i in members}) != 1:
            raise UnsupportedError(f"inputs {members} overlap in memory with different dtypes")
        detached = tuple(id(_root(tensors[i])) != root for i in members)
        order = sorted(range(len(members)), key=lambda k: detached[k])  # a member of the root first
        members = tuple(members[k] for k in order)
        detached = tuple(detached[k] for k in order)
        creation = tuple(
            _CREATION.DEFAULT if d else _creation(tensors[i]) for i, d in zip(members, detached)
        )
        views = tuple(layout(tensors[i]) for i in members)
        no_leaves = (False,) * len(members)
        is_view, bits = _views(tensors, members), _bits(tensors, members, True)
        return cls(members, views, True, creation, no_leaves, detached, is_view, bits)

    def base(self, tensors: Sequence[Any]) -> torch.Tensor:
        first = tensors[self.members[0]]
        if self.common_base:
            return _root(first)
        n = first.untyped_storage().nbytes() // first.element_size()
        return first.as_strided((n,), (1,), 0)

    def matches(self, tensors: Sequence[Any]) -> bool:
        first = tensors[self.members[0]]
        storage = first.untyped_storage()._cdata
        root = id(_root(first))
        detached = self.detached or (False,) * len(self.members)
        return all(
            layout(tensors[i]) == v
            and tensors[i].untyped_storage()._cdata == storage
            and (
                (id(_root(tensors[i])) != root and not tensors[i].requires_grad)
                if d
                else (not self.common_base or id(_root(tensors[i])) == root)
            )
            and _creation(tensors[i]) == c
            and tensors[i]._is_view() == iv
            and (tensors[i].is_conj(), tensors[i].is_neg()) == b
            for i, v, c, d, iv, b in zip(
                self.members, self.views, self.creation, detached, self.is_view, self._bits()
            )
        )

    def _bits(self) -> tuple[tuple[bool, bool], ...]:
        return self.bits or ((False, False),) * len(self.members)


class _MetadataWrites(torch.overrides.TorchFunctionMode):
    """Notes, per member (``members``: id -> position), the grad mode of the last in-place
    metadata change (``t_()``, ``as_strided_``) made on it, in ``with_grad``; in
    ``as_leaf``, the members changed (under no_grad) while leaves of a base without grad
    (the caller's ``x1 = b[2:6]; x1.requires_grad_()``). Eager changes such a leaf as a
    plain tensor, keeping its accumulator, and so does the trace
    (``EagerCalls._metadata_write``): made of an alias, as other views are, it had a node
    autograd rebuilt from the gradless base after the change (an internal assert)."""

    def __init__(
        self, members: dict[int, int], with_grad: dict[int, bool], unrecorded: dict[int, Layout]
    ) -> None:
        super().__init__()
        self.members, self.with_grad, self.unrecorded = members, with_grad, unrecorded
        self.as_leaf: set[int] = set()
        #: Members an op recorded by autograd took in (their accumulator made).
        self.used: set[int] = set()
        #: Views taken of a member (or of such a view), by id: each (weakly) and the
        #: member's position. Members on one layout give their views one view-op history
        #: (``member_views.views_of_members``): this tells whose they are.
        self.views_of: dict[int, tuple[Any, int]] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        i, leaf = None, False
        if args and getattr(func, "__name__", "") in METADATA_WRITES:
            i = self.members.get(id(args[0]))
            if i is not None:
                self.with_grad[i] = torch.is_grad_enabled()
                leaf = leaf_view_of_gradless(args[0])
        result = func(*args, **(kwargs or {}))
        if args and isinstance(result, torch.Tensor) and result is not args[0]:
            self._note_view(args[0], result)
        if i is not None and not torch.is_grad_enabled():  # (the layout it left)
            self.unrecorded[i] = layout(args[0])
        if leaf:
            self.as_leaf.add(i)  # type: ignore[arg-type]
            if i not in self.used:
                _fresh_accumulator(args[0])
        elif torch.is_grad_enabled():
            self._note_uses(args, kwargs, result)
        return result

    def _note_view(self, t: Any, result: torch.Tensor) -> None:
        if not (isinstance(t, torch.Tensor) and result._is_view()):
            return
        i = self.members.get(id(t))
        version: int | None = t._version
        if i is None:
            i = self.member_of_view(t)
            entry = self.views_of.get(id(t))
            if entry is not None and entry[2] != t._version:
                version = None  # (``t`` was written since: its node is the base's now)
        if i is not None:
            self.views_of[id(result)] = (weakref.ref(result), i, version)

    def member_of_view(self, t: Any) -> int | None:
        """The member ``t`` was taken of (``views_of``), or None."""
        entry = self.views_of.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def unwritten_since(self, t: Any) -> bool:
        """Whether ``t`` is a view of a member (``views_of``) that nothing wrote since it
        was taken: its node is the one autograd made of the member's, as eager's is."""
        entry = self.views_of.get(id(t))
        return entry is not None and entry[0]() is t and entry[2] == t._version

    def _note_uses(self, args: Any, kwargs: Any, result: Any) -> None:
        outs = torch.utils._pytree.tree_leaves(result)
        if not any(isinstance(o, torch.Tensor) and _has_node(o) for o in outs):
            return
        for t in torch.utils._pytree.tree_leaves((args, kwargs)):
            i = self.members.get(id(t))
            if i is not None:
                self.used.add(i)


def _fresh_accumulator(t: Any) -> None:
    """A leaf member no recorded op took in yet, changed in place: eager makes its
    accumulator (which checks the gradient's shape) at its first use, at its layout
    then; the trace's, held since it was made a leaf (``EagerCalls.leaf_nodes``), had
    the old one. Made again at the new layout."""
    calls = EagerCalls.active()
    if calls is not None and id(t) in calls.leaf_nodes and not in_inference_mode():
        del calls.leaf_nodes[id(t)]
        calls.leaf_nodes[id(t)] = _accumulator(t)


def _accumulator(t: Any) -> Any:
    """``t``'s ``AccumulateGrad`` node (made if it has none), under any grad mode."""
    with torch.inference_mode(False), torch.enable_grad():
        return torch.autograd.graph.get_gradient_edge(t).node


def _changed_leaves(
    groups: Sequence[_Group],
    built: dict[int, Any],
    bases: Sequence[Any],
    as_leaf: set[int],
    first: set[int],
) -> None:
    """``first``: of the members changed in place while leaves of a base without grad
    (``as_leaf``, ``view_metadata_writes.leaf_view_of_gradless``), those whose gradient's
    accumulator autograd made at their new layout (first used with grad after the change):
    the caller's member takes that layout before the graph runs (``prepare``), where
    eager's accumulator is made. A base given a history after such a change is refused:
    eager rebuilds the member's node as an ``as_strided`` of the base at its new geometry,
    the trace's replays the member's view ops (a gradient through other elements)."""
    first.clear()
    for g, base in zip(groups, bases):
        for i, (size, _, _) in zip(g.members, g.views):
            if i not in as_leaf:
                continue
            if base.requires_grad:
                raise UnsupportedError(
                    f"input {i}, a view the caller made require grad of a base that does not, "
                    "had its metadata changed in place under no_grad, and then its base was "
                    "given a history (written with grad through an overlapping input): not "
                    "supported"
                )
            t = built[i]
            if t.requires_grad and t.is_leaf and not in_inference_mode():
                node = _accumulator(t)
                if tuple(node._input_metadata[0].shape) == tuple(t.shape) != size:
                    first.add(i)


def _note_rebuilt(calls: Any, built: dict[int, Any], with_grad: dict[int, bool]) -> None:
    """Members restrided past their elements whose node a later write made autograd
    rebuild from the base (``restrides.Reachers``): replayed as changed unrecorded."""
    if calls is not None:
        rebuilt = calls.metadata_steps.rebuilt_ids
        with_grad.update((i, False) for i, t in built.items() if id(t) in rebuilt)


def _has_node(t: torch.Tensor) -> bool:
    """Whether ``t`` has a node; False where reading it raises (a view made under
    ``no_grad`` whose base was written with grad: eager raises where it is used)."""
    try:
        return t.grad_fn is not None
    except RuntimeError:
        return False


def _node(t: torch.Tensor) -> Any:
    """``t``'s node (None where reading it raises: ``_has_node``)."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


def _linkable(
    groups: Sequence[_Group], built: dict[int, Any], initial: dict[int, Any], skip: set[int]
) -> list[tuple[int, Any, int]]:
    """Members the writes to their group gave a new node (eager rebuilds the caller's
    view's node from its base's new one), which the outputs' reads after the write reach
    (``trace.post_write_reads``): plain views that require grad (made with the default
    creation meta, neither a leaf of their own nor detached), not returned, re-laid or
    given ``requires_grad`` by the function (``skip``); not the group's base itself (an
    input of the graph: linked as one). (Member position, its tensor, its group's base's
    position among the graph's inputs.)"""
    found = []
    for k, g in enumerate(groups):
        leaves = g.leaves or (False,) * len(g.members)
        detached = g.detached or (False,) * len(g.members)
        for i, c, leaf, d, view in zip(g.members, g.creation, leaves, detached, g.is_view):
            t = built[i]
            if not view or leaf or d or c != _CREATION.DEFAULT or i in skip or not t.requires_grad:
                continue
            node = _node(t)
            if node is not None and node is not initial[i]:
                found.append((i, t, k))
    return found


def _note_new_layouts(
    groups: Sequence[_Group],
    built: dict[int, Any],
    versions: dict[int, int],
    new_views: dict[int, Layout],
    deltas: dict[int, int],
) -> None:
    """The members whose layout the function changed: the new one, and the in-place ops
    run on their group meanwhile (``SyntheticBase.new_views``, ``version_deltas``)."""
    for g in groups:
        for i, v in zip(g.members, g.views):
            now = layout(built[i])
            if now != v:
                new_views[i] = now
                deltas[i] = built[i]._version - versions[i]


def _built_members(groups: Sequence[_Group], graph_inputs: Sequence[Any]) -> dict[int, Any]:
    """Each group's members, rebuilt as views of its base (member position → tensor)."""
    built: dict[int, Any] = {}
    for g, base in zip(groups, graph_inputs):
        leaves = g.leaves or (False,) * len(g.views)
        made = (
            _with_bits(_member(base, *m), b)
            for m, b in zip(zip(g.views, g.creation, leaves), g._bits())
        )
        detached = g.detached or (False,) * len(g.views)
        built.update((i, t.detach() if d else t) for i, t, d in zip(g.members, made, detached))
    return built


def _interior_leaves(group: _Group, built: dict[int, Any], outs: Sequence[Any]) -> None:
    """A member that is a leaf of its own (``_Group.leaves``) which a write with grad to
    the group moved into the graph's interior: eager's backward raises reaching its
    accumulator, and so does the compiled one (``EagerCalls.interior_nodes``). One that
    stays a leaf is an inner leaf the caller's tensor stands in for (``member_leaves``)."""
    calls = EagerCalls.active()
    for i, leaf in zip(group.members, group.leaves):
        if not leaf or not torch.is_grad_enabled() or built[i].grad_fn is None:
            continue
        grad_fns = [o.grad_fn for o in outs if isinstance(o, torch.Tensor)]
        held = calls.leaf_nodes.get(id(built[i])) if calls is not None else None
        node = accumulator_of(grad_fns, built[i], held)
        if node is not None and calls is not None:
            calls.interior_nodes.append(node)


@dataclass(frozen=True)
class SyntheticBase:
    groups: tuple[_Group, ...]
    num_inputs: int
    #: Outputs that view a detached member (``_Group.detached``) and require no grad
    #: (``return x0[0]``): output index → (member position, its layout). Traced as views of
    #: the member's detached stand-in; the caller's are views of the member itself.
    member_views: dict[int, tuple[int, Layout]] = field(default_factory=dict, compare=False)
    #: Outputs that view a member that is not detached and require grad
    #: (``member_views.views_of_members``): remade of the caller's member when the call
    #: records grad.
    member_grad_views: dict[int, tuple[int, Layout]] = field(default_factory=dict, compare=False)
    #: Members whose sizes/strides/offset the function changed (``t_()``), and the new
    #: layout: recorded while tracing, replayed on the real ones.
    new_views: dict[int, Layout] = field(default_factory=dict, compare=False)
    #: In-place ops the function ran on each member's group (its shared version counter).
    version_deltas: dict[int, int] = field(default_factory=dict, compare=False)
    #: Outputs that are a member itself (``return b``): output index → member position.
    member_outputs: dict[int, int] = field(default_factory=dict, compare=False)
    #: Members the function made require grad (``b.requires_grad_()``), and the flag.
    requires_grad_changes: dict[int, bool] = field(default_factory=dict, compare=False)
    #: Per member whose metadata the function changed: whether grad mode was on at its
    #: last change (autograd records it then; one under ``no_grad`` it does not).
    changed_with_grad: dict[int, bool] = field(default_factory=dict, compare=False)
    #: Per member whose metadata the function changed under no_grad, the layout its last
    #: such change left: replayed unrecorded before the changes made with grad after it
    #: (eager's node is rebuilt from the base there, the recorded ones stack on it).
    unrecorded_layout: dict[int, Layout] = field(default_factory=dict, compare=False)
    #: Members the function called ``retain_grad()`` on: called on the caller's tensors.
    retained: set[int] = field(default_factory=set, compare=False)
    #: Hooks the function registered on members, still on their nodes at its end, and
    #: the outputs viewed of a member through such a node (``input_hooks.hooks_on_members``).
    member_hooks: dict[int, list[Callable]] = field(default_factory=dict, compare=False)
    views_through_hooks: dict[int, int] = field(default_factory=dict, compare=False)
    #: Leaf members changed under no_grad whose gradient has their new layout
    #: (``_changed_leaves``): changed before the graph runs.
    layout_first: set[int] = field(default_factory=set, compare=False)

    @classmethod
    def of(cls, tensors: Sequence[Any], need: NeedsSyntheticBase) -> SyntheticBase:
        """The synthetic bases for the alias groups of the inputs ``need`` names: its
        ``groups`` (per input), every input on their storage, or their overlaps."""
        storage = [
            t.untyped_storage()._cdata if isinstance(t, torch.Tensor) else -1 - i
            for i, t in enumerate(tensors)
        ]
        ids = list(need.groups) or overlap_groups(tensors, storage)
        for i in need.whole_storage:  # every input on its storage joins its group
            ids = [ids[i] if storage[k] == storage[i] else g for k, g in enumerate(ids)]
        written = need.inputs
        wanted = sorted({ids[i] for i in written})
        groups = tuple(
            _Group.of(tensors, tuple(i for i, g in enumerate(ids) if g == w)) for w in wanted
        )
        return cls(groups, len(tensors))

    def widened(self, first: NeedsSyntheticBase, again: NeedsSyntheticBase) -> NeedsSyntheticBase:
        """``first`` (which made this) with what the trace over this asked for ``again``:
        its inputs are the graph's (the bases, then the non-members), named here by the
        caller's positions (a base: its members)."""
        members = set(self.members)
        rest = [i for i in range(self.num_inputs) if i not in members]
        named: list[int] = []
        for p in again.inputs:
            if p < len(self.groups):
                named += self.groups[p].members
            else:
                named.append(rest[p - len(self.groups)])
        inputs = sorted({*first.inputs, *named})
        return NeedsSyntheticBase(str(again), inputs, (), first.whole_storage)

    @property
    def members(self) -> list[int]:
        return [i for g in self.groups for i in g.members]

    def matches(self, tensors: Sequence[Any]) -> bool:
        """Whether the members of this call are laid out as the traced ones were."""
        return all(g.matches(tensors) for g in self.groups)

    def versions(self, tensors: Sequence[Any]) -> list[int]:
        """Before a call: the version counters of the members whose metadata it changes."""
        return [tensors[i]._version for i in self.new_views]

    def finish(
        self, tensors: Sequence[Any], outs: Sequence[Any], before: Sequence[int] = ()
    ) -> Sequence[Any]:
        """After a call: the members' new metadata and eager's version count (a t_() bumps
        it; the graph does not), the ``requires_grad`` the function gave them; outputs
        that are members are the real member tensors (eager returns the input object
        itself)."""
        for (i, delta), v0 in zip(self.version_deltas.items(), before):
            t = tensors[i]
            size, stride, offset = self.new_views[i]
            # autograd records the change where eager's did, at eager's final count (a
            # later change of the count would make it rebuild the member's node from its
            # base, as a plain as_strided that reads elements as_strided_ dropped)
            with_grad = self.changed_with_grad.get(i, torch.is_grad_enabled())
            record = (
                with_grad
                and not torch.is_inference_mode_enabled()
                and t.requires_grad
                and not t.is_leaf
            )
            if record:
                torch._C._autograd._unsafe_set_version_counter((t,), (v0 + delta - 1,))
                if i in self.unrecorded_layout:
                    set_metadata(t, *self.unrecorded_layout[i])
            set_metadata(t, size, stride, offset, record=record, keep_version=not record)
            if t._version < v0 + delta and not t.is_inference():
                torch._C._autograd._unsafe_set_version_counter((t,), (v0 + delta,))
        for i, flag in self.requires_grad_changes.items():
            if tensors[i].requires_grad != flag and tensors[i].is_leaf:
                tensors[i].requires_grad_(flag)
        for i in self.retained:  # (after the writes that gave it a history, as in eager)
            tensors[i].retain_grad()
        if not (
            self.member_outputs or self.member_views or self.member_hooks or self.member_grad_views
        ):
            return outs
        outs = list(outs)
        self._hooks_on_members(tensors, outs)
        for j, i in self.member_outputs.items():
            outs[j] = tensors[i]
        remade: dict[int, Any] = {}  # (one output returned twice stays one tensor)
        for j, (i, view) in self.member_views.items():
            o = outs[j]
            if id(o) not in remade and not tensors[i].requires_grad and not o.requires_grad:
                remade[id(o)] = of_member(tensors[i], view)  # eager's ``._base``: the caller's
            outs[j] = remade.get(id(o), o)
        for j, (i, view) in self.member_grad_views.items():
            o = outs[j]
            if id(o) not in remade and remakeable(o, tensors[i]):
                remade[id(o)] = _member(tensors[i], view, _creation(o))  # (its node's)
            outs[j] = remade.get(id(o), o)
        return outs

    def _hooks_on_members(self, tensors: Sequence[Any], outs: list[Any]) -> None:
        """The function's hooks on the caller's members, and the outputs eager views of
        a member through its hook remade of the member (the rebuilt view's own hooks and
        ``retain_grad()`` moved to them)."""
        for i, hooks in self.member_hooks.items():
            register_hooks(tensors, [(i, h) for h in hooks])
        remake_views_of(outs, {j: tensors[i] for j, i in self.views_through_hooks.items()})

    def prepare(self, tensors: Sequence[Any], layout: Any = None) -> list[Any]:
        """The graph's inputs for one call: the groups' bases, then the non-members; with
        the compiled ``layout``, then the caller's members its inner leaves stand for
        (``trace.InnerLeaf.member``: their gradient fills the caller's ``.grad``)."""
        member_set = set(self.members)
        bases = [g.base(tensors) for g in self.groups]
        given = [] if layout is None else layout.inner_leaves
        for leaf in given:  # (one the function makes a leaf requires grad from the start)
            if leaf.member is not None and not tensors[leaf.member].requires_grad:
                tensors[leaf.member].requires_grad_()
            if leaf.member in self.layout_first:  # (after the bases: they read the layouts)
                set_metadata(tensors[leaf.member], *self.new_views[leaf.member])
        linked = () if layout is None else layout.post_write_members
        return [
            *bases,
            *(t for i, t in enumerate(tensors) if i not in member_set),
            *(tensors[leaf.member] for leaf in given if leaf.member is not None),
            *(tensors[i] for i in linked),  # (then those the outputs' reads link)
        ]

    def _note_views(
        self, built: dict[int, Any], bases: Sequence[Any], out: Sequence[Any], writes: Any
    ) -> None:
        """The outputs the caller's are views of members of (``member_views``, and those
        that require grad: ``member_grad_views``; ``writes``: the ``_MetadataWrites`` that
        saw them taken)."""
        self.member_views.update(views_of_detached(self.groups, built, out))
        views = views_of_members(
            self.groups, built, bases, out, writes.member_of_view, writes.unwritten_since
        )
        views = {j: v for j, v in views.items() if j not in self.member_outputs}
        self.member_grad_views.update((j, v) for j, v in views.items() if out[j].requires_grad)
        self.member_views.update(
            (j, v)
            for j, v in views.items()
            if not out[j].requires_grad and j not in self.member_views
        )

    def wrap(self, flat_fn: Callable[..., Any]) -> Callable[..., Any]:
        """``flat_fn`` taking the bases and the non-members, rebuilding the members."""
        groups, n, new_views = self.groups, self.num_inputs, self.new_views
        member_outputs, version_deltas = self.member_outputs, self.version_deltas
        layout_first = self.layout_first
        requires_grad_changes = self.requires_grad_changes
        changed_with_grad, retained = self.changed_with_grad, self.retained
        unrecorded = self.unrecorded_layout
        member_hooks, views_through = self.member_hooks, self.views_through_hooks

        def with_base(*graph_inputs: Any) -> Any:
            built = _built_members(groups, graph_inputs)
            calls = EagerCalls.active()
            if calls is not None:  # a member that is, or is made, a leaf: the caller's
                calls.synthetic.member_leaves.update((id(t), i) for i, t in built.items())
                bases = graph_inputs[: len(groups)]
                calls.synthetic.leaf_view_bases.update(id(b) for b in bases if not b.requires_grad)
                calls.synthetic.bases.update(id(b) for b in bases)
            versions = {i: t._version for i, t in built.items()}
            flags = {i: t.requires_grad for i, t in built.items()}
            initial = {i: _node(t) for i, t in built.items()}
            rest = iter(graph_inputs[len(groups) :])
            members = {id(t): i for i, t in built.items()}
            with _MetadataWrites(members, changed_with_grad, unrecorded) as writes:
                out = flat_fn(*(built[i] if i in built else next(rest) for i in range(n)))
            _note_rebuilt(calls, built, changed_with_grad)
            _refuse_histories_of_aliases(groups, built)
            _changed_leaves(groups, built, graph_inputs, writes.as_leaf, layout_first)
            # (a trace's ``retain_grad()`` is only recorded: ``EagerCalls.retained``)
            asked = {id(t) for t in calls.retained} if calls is not None else set()
            retained.update(i for i, t in built.items() if t.retains_grad or id(t) in asked)
            member_of = {id(t): i for i, t in built.items()}
            for j, o in enumerate(out):
                if id(o) in member_of:
                    member_outputs[j] = member_of[id(o)]
            if calls is not None:
                hooks, through = hooks_on_members(calls.input_hooks.traced_hooks, member_of, out)
                member_hooks.update(hooks)
                views_through.update(through)
            self._note_views(built, graph_inputs[: len(groups)], out, writes)
            for g in groups:  # (the members' new values too: written, they are outputs)
                _interior_leaves(g, built, [*out, *built.values()])
            for i, t in built.items():
                if t.requires_grad != flags[i] and t.grad_fn is None:
                    requires_grad_changes[i] = t.requires_grad
            _note_new_layouts(groups, built, versions, new_views, version_deltas)
            if calls is not None:
                skip = {*new_views, *requires_grad_changes}
                calls.synthetic.post_write = _linkable(groups, built, initial, skip)
            return out

        with_base.__qualname__ = getattr(flat_fn, "__qualname__", "with_base")
        return with_base
