"""What the joint trace's forward saves and its backward reads: eager's saved-tensor checks.

Autograd's pack hook sees each tensor an op saves (``SavedReads._pack``: its version,
layout and history then), the unpack hook each read in the traced backward
(``_unpack``): a read of a tensor written since it was saved, or ``detach_()``-ed
since, is recorded with the backward node reading it, and the compiled backward raises
as eager's would where its tangents reach that node. Inputs count writes to the other
inputs that share their version counter (views of one base: ``version_sharing``); a
saved input read at the version the call leaves it is watched (a write after the call
makes eager's backward raise); nodes the outputs reach that lead to no input are read
too (``_read_dead_ends``), as eager's engine runs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef

from .. import alias
from ..autograd_walks import dead_ends

__all__ = [
    "SavedReads",
    "leads",
    "reaching",
    "saving_links",
    "version_sharing",
]


def version_sharing(fake_args: Sequence[Any]) -> dict[int, list[int]]:
    """Per input that shares eager's version counter with others (views of one base, a
    base and its views, one tensor passed twice), the others' positions."""
    roots: dict[int, list[int]] = {}
    for i, a in enumerate(fake_args):
        if isinstance(a, torch.Tensor):
            root = a if a._base is None else a._base
            roots.setdefault(id(root), []).append(i)
    return {
        i: [j for j in group if j != i] for group in roots.values() if len(group) > 1 for i in group
    }


def reaching(outs: Sequence[Any], nodes: Sequence[Any]) -> tuple[int, ...]:
    """The positions of ``outs`` whose autograd graph reaches one of ``nodes``; all of
    them where a node is unknown (None)."""
    if any(n is None for n in nodes):
        return tuple(range(len(outs)))
    wanted = {id(n) for n in nodes}
    found = []
    for k, o in enumerate(outs):
        stack, seen = [getattr(o, "grad_fn", None)], set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            if id(node) in wanted:
                found.append(k)
                break
            seen.add(id(node))
            stack.extend(n for n, _ in node.next_functions)
    return tuple(found)


def leads(
    saved: dict[int, list[Any]], ends: Sequence[tuple[int, Any]]
) -> dict[int, tuple[int, ...]]:
    """Per entry of ``saved`` (its reading nodes), the keys of ``ends`` (key, tensor)
    whose gradient edge the autograd graph from those nodes reaches; none where a node is
    unknown (None). One pass over the graph: each node's reach is computed once."""
    if not saved:
        return {}
    at = {id(_edge_node(t)): k for k, t in ends}
    memo: dict[int, tuple[Any, frozenset[int]]] = {}  # (the node held: its id stays its)
    found = {}
    for i, nodes in saved.items():
        if not nodes or any(n is None for n in nodes):
            found[i] = ()
            continue
        found[i] = tuple(sorted(set().union(*(_reach(n, at, memo) for n in nodes))))
    return found


def _reach(
    root: Any, at: dict[int, int], memo: dict[int, tuple[Any, frozenset[int]]]
) -> frozenset[int]:
    """The keys of ``at`` (node id -> key) reachable from ``root`` (post-order, no
    recursion: autograd graphs are deep)."""
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo:
            continue
        children = [n for n, _ in node.next_functions if n is not None]
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
            continue
        own = {at[id(node)]} if id(node) in at else set()
        memo[id(node)] = (node, frozenset(own.union(*(memo[id(c)][1] for c in children))))
    return memo[id(root)][1]


def saving_links(outs: Sequence[Any], readers: dict[int, list[Any]]) -> tuple[tuple[int, ...], ...]:
    """The sets of ``outs`` (by position, two or more) whose autograd graphs share a node
    that saved a tensor (``readers``: the nodes reading each saved tensor): a backward
    pass through one that does not retain the graph frees that node, and a later pass
    through another raises (``runtime.partial_backward``). One pass over the graph:
    each node's set of outputs reaching it, as a bit mask."""
    if len(outs) < 2:
        return ()
    masks: dict[int, int] = {}
    parents: dict[int, int] = {}  # (edges into each node not yet propagated: Kahn's order)
    seen: dict[int, Any] = {}
    stack = [getattr(o, "grad_fn", None) for o in outs]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        for n, _ in node.next_functions:
            if n is not None:
                parents[id(n)] = parents.get(id(n), 0) + 1
                stack.append(n)
    for k, o in enumerate(outs):
        node = getattr(o, "grad_fn", None)
        if node is not None:
            masks[id(node)] = masks.get(id(node), 0) | (1 << k)
    ready = [n for i, n in seen.items() if parents.get(i, 0) == 0]
    while ready:
        node = ready.pop()
        for n, _ in node.next_functions:
            if n is None:
                continue
            masks[id(n)] = masks.get(id(n), 0) | masks.get(id(node), 0)
            parents[id(n)] -= 1
            if parents[id(n)] == 0:
                ready.append(n)
    reading = {id(n): n for nodes in readers.values() for n in nodes if n is not None}
    found = {masks.get(i, 0) for i in reading}
    return tuple(
        sorted(tuple(k for k in range(len(outs)) if m >> k & 1) for m in found if m & (m - 1))
    )


_DETACHED_IN_PLACE = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
    "This is not supported, please use out-of-place `.detach()` instead (raised as eager "
    "raises it; aotgrad traced it)"
)


def _edge_node(t: Any) -> Any:
    """The node a gradient toward ``t`` (a tensor, or a ``GradientEdge``) goes into."""
    edge = t if isinstance(t, torch.autograd.graph.GradientEdge) else None
    return (edge or torch.autograd.graph.get_gradient_edge(t)).node


def _detached_since(t: Any, history: Any, node: Any) -> bool:
    """Whether eager's backward refuses to read the saved ``t``: it had a history when
    saved (``history``, its node) and has none now (``detach_()``). Only an op's saved
    input: an op's own output is read through the op's node, and so is what a custom
    Function saved."""
    if history is None or alias.facts.grad_fn_of(t) is not None:
        return False
    return not (
        node is None
        or node is history
        or isinstance(node, torch.autograd.function.BackwardCFunction)
    )


def _stale_message(t: Any, now: int, version: int) -> str:
    return (
        "one of the variables needed for gradient computation has been modified by an "
        f"inplace operation: [{t.dtype} {list(t.shape)}] is at version {now}; "
        f"expected version {version} instead (raised as eager raises it; aotgrad traced it)"
    )


class SavedReads:
    """The saved-tensor bookkeeping of ``joint._JointTrace`` (its state is set there)."""

    #: The node reading saved tensors outside autograd's engine (``_read_dead_ends``).
    reader: Any = None
    fake_args: Sequence[Any]
    call: list[Any]
    packed: set[int]
    #: Per base (by id), the saved tensors that are it or views of it: they share its
    #: version counter, so a write to any view of it is a write to what eager saved.
    packed_views: dict[int, list[Any]]
    readers: dict[int, list[Any]]
    dead_reads: set[int]
    eager_reads: set[int]
    stale: list[str]
    stale_nodes: list[Any]
    saved_inputs: dict[int, list[Any]]
    saved_whole: dict[int, bool]
    final_versions: list[int]
    relaid_bases: dict[int, int]
    detached_from: dict[int, Any]
    data_reads: dict[int, Any]
    sharing: dict[int, list[int]]

    def _is_saved(self, t: Any) -> bool:
        """Autograd saved ``t``, or ``t`` is a ``detach()`` of a saved tensor: it shares that
        tensor's version counter, so a write to it after the call is a write to what eager
        saved."""
        return id(t) in self.packed or id(self.detached_from.get(id(t))) in self.packed

    def _pack(self, t: Any) -> Any:
        self.packed.add(id(t))
        root = t if t._base is None else t._base
        self.packed_views.setdefault(id(root), []).append(t)
        whole = [i for i, c in enumerate(self.call) if c is t]
        for i in whole or [self._input_of(t)]:
            if i is not None:  # False: a view of it too (``x.sin() + x.t().mm(w)``)
                self.saved_whole[i] = bool(whole) and self.saved_whole.get(i, True)
        version = t._version + self._shared_writes(t)
        # a non-leaf (as eager sees it) that detach_() later takes out of autograd: eager's
        # backward refuses to read it (see _detached_since)
        history = None if self._leaf_input(t) else alias.facts.grad_fn_of(t)
        return t, version, (tuple(t.shape), tuple(t.stride()), t.storage_offset()), history

    def _unpack(self, saved: tuple[Any, int, Any, Any]) -> Any:
        t, version, layout, history = saved
        self.readers.setdefault(id(t), []).append(self._node())
        if self.reader is not None:
            self.dead_reads.add(id(t))
        i = self._input_of_saved(t)
        if i is not None:  # read by eager's backward (a node no output reaches reads none)
            self.eager_reads.add(i)
        now = t._version + self._shared_writes(t)
        detached = _detached_since(t, history, self._node())
        if not detached and now == version:
            self._note_input_read(t, version)
            return t
        if not self.stale:
            self.stale.append(_DETACHED_IN_PLACE if detached else _stale_message(t, now, version))
        self.stale_nodes.append(self._node())
        # its metadata may have changed too (x.unsqueeze_(0)): the backward is traced
        # on the layout it saved (it raises before it runs anyway)
        if (tuple(t.shape), tuple(t.stride()), t.storage_offset()) != layout:
            return t.as_strided(*layout)
        return t

    def _shares_saved(self, t: Any) -> bool:
        """``t`` (a tensor) shares its version counter with a saved tensor: it is one, a
        ``detach()`` of one, or it and the saved tensor are its base or views of it."""
        if not isinstance(t, torch.Tensor):
            return False
        return self._is_saved(t) or id(t if t._base is None else t._base) in self.packed_views

    def _reading_shared(self, diff_outs: list[Any], t: Any, source: Any) -> tuple[int, ...]:
        """The tangents whose backward reads ``t``, ``source`` (what it was detached from)
        or a saved tensor sharing ``t``'s base."""
        views = self.packed_views.get(id(t if t._base is None else t._base), [])
        return self._reading(diff_outs, t, source, *views)

    def _reading(self, diff_outs: list[Any], *saved: Any) -> tuple[int, ...]:
        """The tangents whose backward reads one of ``saved`` (none: not read)."""
        nodes = [n for t in saved if t is not None for n in self.readers.get(id(t), ())]
        return reaching(diff_outs, nodes) if nodes else ()

    def _node(self) -> Any:
        """The node reading a saved tensor now."""
        return self.reader if self.reader is not None else torch._C._current_autograd_node()

    def _read_dead_ends(self, outs: list[Any], needs: list[Any]) -> None:
        """Eager's backward runs every node the outputs reach, checking what each saved,
        also the nodes that lead to no input (``autograd_walks.dead_ends``), which
        ``autograd.grad`` skips: their saved tensors are read here, as their node's."""
        try:
            live = {id(_edge_node(t)) for t in needs}
        except RuntimeError:  # (a need without a node to ask for: nothing to compare with)
            return
        roots = [getattr(o, "grad_fn", None) for o in outs]
        for node in dead_ends([r for r in roots if r is not None], live):
            self.reader = node
            try:
                for name in dir(node):
                    if name.startswith("_saved_") or name == "saved_tensors":
                        with contextlib.suppress(Exception):
                            getattr(node, name)
            finally:
                self.reader = None

    def _leaf_input(self, t: Any) -> bool:
        """``t`` is an input the caller passed as a leaf (traced on a clone, or on a
        stand-in with a node of its own, it has a ``grad_fn`` here)."""
        i = self._input_of(t)
        return (
            i is not None
            and t is self.call[i]
            and bool(getattr(self.fake_args[i], "is_leaf", False))
        )

    def _input_of(self, t: Any) -> int | None:
        """The input ``t`` is or views (of a relaid input: its base in the trace)."""
        root = t if t._base is None else t._base
        found = next((i for i, c in enumerate(self.call) if c is root), None)
        return self.relaid_bases.get(id(root)) if found is None else found

    def _version_of(self, c: Any) -> int:
        return c._version + self._shared_writes(c) if isinstance(c, torch.Tensor) else 0

    def _note_input_read(self, t: Any, version: int) -> None:
        """The backward reads a saved input (or a view of one) saved at the version the
        call leaves it: written after the call, eager's backward raises. A ``detach()`` of
        one (or of a view of one) shares its version counter: so is it."""
        i = self._input_of_saved(t)
        if i is not None and i < len(self.final_versions) and self.final_versions[i] == version:
            self.saved_inputs.setdefault(i, []).append(self._node())

    def _input_of_saved(self, t: Any) -> int | None:
        """The input a saved ``t`` is, views, or is a ``detach()`` of (which shares its
        version counter)."""
        i, source = self._input_of(t), self._detached_source(t)
        while i is None and source is not None:
            i, source = self._input_of(source), self._detached_source(source)
        return self._input_aliased(t) if i is None else i

    def _input_aliased(self, t: Any) -> int | None:
        """The input whose storage ``t`` shares without being a view of it or a ``detach()``
        the function called: an alias autograd made itself, which shares the input's
        version counter (a custom Function's output of an input it marked dirty, applied
        under no_grad, is a detached alias of it). Not a ``.data`` (a counter of its
        own)."""
        if t._base is not None or id(t) in self.data_reads:
            return None
        key = StorageWeakRef(t.untyped_storage())
        return next(
            (
                i
                for i, c in enumerate(self.call)
                if isinstance(c, torch.Tensor)
                and c._base is None
                and StorageWeakRef(c.untyped_storage()) == key
            ),
            None,
        )

    def _detached_source(self, t: Any) -> Any:
        """What ``t`` (or its base) is a ``detach()`` of, if anything."""
        found = self.detached_from.get(id(t))
        return (
            found if found is not None or t._base is None else self.detached_from.get(id(t._base))
        )

    def _shared_writes(self, t: Any) -> int:
        """Writes to the other inputs that share the counter of the input ``t`` is (or
        views), if any: eager counts them on ``t`` too."""
        if not self.sharing:
            return 0
        i = self._input_of(t)
        if i is None or i not in self.sharing:
            return 0
        return sum(self.call[j]._version for j in self.sharing[i])
