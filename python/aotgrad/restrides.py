"""``as_strided`` on an input's storage, done as eager does it or refused.

``as_strided`` places absolute geometry on a storage. Traced, an input's storage is the
input's functional value (one per input): its own elements, in the caller's coordinates
only until the function first writes it (a written value is a fresh tensor, offset 0).
Offsets are passed as the caller wrote them (a returned view is rebuilt in the caller's
storage from the traced metadata, so they must stay the caller's); what would then
differ from eager without a word is refused (``UnsupportedError``, kept and raised once
the run is over, after eager's own refusals):

- after a write to an input whose value now starts elsewhere, a restride with an
  explicit offset or of a view of it; after any write, one whose value is laid out
  otherwise, or one that reaches elements outside the input;
- once something on an input's storage was restrided, a write that touches elements the
  input does not cover (``b[:, :4].as_strided_((4, 4), (1, 4))`` reaches into
  ``b[:, 4:]``): eager writes the caller's bytes there, the graph returns only the
  input's own;
- once a view was restrided in place to elements it did not cover, a write through it
  outside its old elements (functionalization replays it into the old geometry);
- once an ``as_strided`` view reached outside the input, any write to the storage (the
  view is rebuilt from the traced value);
- once one requiring grad reached outside only the tensor it was taken from, a write
  through it, or one with a view of it alive, or not through its base or a view of it
  (``Reachers``: at any other write it is given eager's record, an ``as_strided`` of
  its base, whose gradient reaches those elements).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_flatten

from .errors import UnsupportedError

__all__ = ["Restrides", "value_offset", "within"]

#: Above this many elements the element checks are skipped (they enumerate offsets).
_LIMIT = 1 << 20

Layout = tuple[tuple[int, ...], tuple[int, ...], int]


def _static(size: Any, stride: Any, offset: Any) -> Layout | None:
    items = (*size, *stride, offset)
    if not all(isinstance(v, int) for v in items):
        return None
    n = 1
    for s in size:
        n *= s
    return (tuple(size), tuple(stride), offset) if n <= _LIMIT else None


def _elements(layout: Layout, shift: int = 0) -> frozenset[int]:
    size, stride, offset = layout
    if 0 in size:
        return frozenset()
    n = offset + 1 + sum((s - 1) * st for s, st in zip(size, stride))
    with _disable_current_modes():
        flat = torch.arange(n).as_strided(size, stride, offset).reshape(-1)
        return frozenset(v - shift for v in flat.tolist())


def _functional(t: torch.Tensor) -> Any:
    elem = getattr(t, "elem", None)
    return elem if elem is not None and torch._is_functional_tensor(elem) else None


def _value(t: torch.Tensor) -> torch.Tensor:
    """``t``'s functional value, brought up to date (``t`` itself outside functionalization)."""
    elem = _functional(t)
    if elem is None:
        return t
    torch._sync(t)
    return torch._from_functional_tensor(elem)


def value_offset(t: torch.Tensor) -> Any:
    """``t``'s storage offset where ``as_strided`` reads it: in its functional value."""
    return _value(t).storage_offset()


def within(t: torch.Tensor, size: Any, stride: Any, offset: Any) -> bool:
    """Whether ``as_strided(size, stride, offset)`` (``offset`` in ``t``'s value's
    coordinates) touches only elements of ``t``."""
    mine = _static(t.shape, t.stride(), value_offset(t))
    new = _static(size, stride, offset)
    return mine is not None and new is not None and _elements(new) <= _elements(mine)


def _restrided_in_place(t: torch.Tensor) -> bool:
    """Whether ``t``'s view chain has a step ``as_strided_`` made (a write through it is
    replayed into the old geometry of the view it restrided)."""
    elem = _functional(t)
    if elem is None:
        return True
    chain = torch._C._functionalization.get_view_meta_sequence(elem)
    return any(type(m).__name__ == "as_strided__ViewMeta" for m in chain)


def _via_as_strided(t: torch.Tensor) -> bool:
    """Whether ``t``'s view chain has an ``as_strided`` step (a write through it scatters
    into the input's value at the caller's coordinates)."""
    elem = _functional(t)
    if elem is None:
        return False
    chain = torch._C._functionalization.get_view_meta_sequence(elem)
    return any(type(m).__name__.startswith("as_strided") for m in chain)


def _writes(t: torch.Tensor) -> int:
    elem = _functional(t)
    return 0 if elem is None else int(torch._functionalize_mutation_counter(elem))


@dataclass
class _InputStorage:
    stand_in: torch.Tensor
    layout: Layout | None
    writes0: int
    restrided: bool = False
    #: An as_strided view reached elements outside the input (or, requiring grad,
    #: outside the tensor it was taken from): a later write to the storage rebuilds it
    #: from the traced value, which does not hold them as the caller's storage does
    #: (wrong values), or differentiates it otherwise (wrong gradients).
    reached_out: bool = False
    #: The old elements of views restrided in place to other elements.
    narrowed: list[frozenset[int]] = field(default_factory=list)
    #: ``as_strided`` views taken at the caller's coordinates (by id): a write that moves
    #: the traced value elsewhere makes functionalization rebuild them from other
    #: elements; only where the function reads one after it (a returned one the runtime
    #: rebuilds in the caller's storage).
    views: set[int] = field(default_factory=set)
    #: One of them was read after a write (not through such a view) to the input.
    read_after_write: bool = False

    #: The joint trace runs the function on a copy laid out as the caller's storage
    #: (``trace.functional.clone_in_callers_layout``): an input that requires grad,
    #: called with grad on, which the function writes.
    copied: bool = False

    def keeps_coordinates(self) -> bool:
        """Whether a write leaves the traced value in the caller's coordinates: the
        function runs on a copy laid out as the caller's storage, or the input is dense
        at offset 0 (a written value is laid out as it is)."""
        if self.copied:
            return True
        if self.layout is None:  # symbolic or large: what can be known without a guard
            from torch._prims_common import is_non_overlapping_and_dense_or_false
            from torch.fx.experimental.symbolic_shapes import statically_known_true

            t = self.stand_in
            return bool(
                statically_known_true(t.storage_offset() == 0)
                and is_non_overlapping_and_dense_or_false(t)
            )
        size, _, offset = self.layout
        n = 1
        for d in size:
            n *= d
        return offset == 0 and _elements(self.layout) == frozenset(range(n))

    def shift(self) -> int | None:
        """Where the input's first element now lies in its value, less where it lies in
        the caller's storage (the stand-in's own metadata, changed in place or not, is
        the caller's); None where the caller's coordinates are lost (a write left the
        value laid out otherwise)."""
        if _writes(self.stand_in) == self.writes0:
            return 0
        t, value = self.stand_in, _value(self.stand_in)
        if tuple(value.shape) != tuple(t.shape) or tuple(value.stride()) != tuple(t.stride()):
            return None
        return value.storage_offset() - t.storage_offset()


class Restrides:
    """Per functional storage of an input: what ``restride`` and ``check_write`` need.
    A refusal is kept (``refusal``), not raised: the trace raises it once the run is over
    and eager's own refusals (a written view of a leaf) have had their turn."""

    def __init__(self, inputs: Sequence[Any]) -> None:
        self.storages: dict[StorageWeakRef, _InputStorage] = {}
        self.refusal: UnsupportedError | None = None
        #: as_strided views (by id) of inputs written since they were taken
        self.stale_views: dict[int, _InputStorage] = {}
        #: Views past the tensor they were taken from, requiring grad (``Reachers``).
        self.reachers = Reachers()
        self._pending: _InputStorage | None = None
        grad = torch.is_grad_enabled()  # the call's grad mode: the joint trace's copies
        for t in inputs:
            if isinstance(t, torch.Tensor):
                key = StorageWeakRef(t.untyped_storage())
                if key not in self.storages:
                    layout = _static(t.shape, t.stride(), t.storage_offset())
                    info = _InputStorage(t, layout, _writes(t))
                    info.copied = grad and t.requires_grad
                    self.storages[key] = info

    def restride(
        self, name: str, t: torch.Tensor, size: Any, stride: Any, offset: Any, rebased: bool = False
    ) -> bool:
        """Before ``t.<name>(size, stride, offset)`` (``offset`` the caller's, or None):
        whether the caller's and the traced value's coordinates agree for it (the view
        may then be taken from ``t``'s base); keeps a refusal where eager's result cannot
        be had. ``rebased``: the view will be an ``as_strided`` of ``t``'s base (an
        unrecorded restride in place), whose gradient reaches the elements ``t`` lacks."""
        self._pending = None
        info = self.storages.get(StorageWeakRef(t.untyped_storage()))
        if info is None:
            return True
        shift = info.shift()
        if shift is None or (shift and not (t is info.stand_in and offset is None)):
            # a written input's value starts elsewhere than the caller's tensor: only
            # "its own offset" on the input itself means the same in both
            self.keep_refusal(
                f"{name} on a tensor on an input's storage after the function wrote that input "
                "and its value no longer lies as the input does"
            )
            return False
        at = t.storage_offset() if offset is None else offset
        new = _static(size, stride, at) if isinstance(at, int) else None
        outside = new is None or (
            info.layout is not None and not _elements(new) <= _elements(info.layout)
        )
        if outside and _writes(info.stand_in) != info.writes0:
            self.keep_refusal(
                f"{name} after the function wrote the input reaches elements outside it"
            )
        info.restrided = True
        mine = _static(t.shape, t.stride(), t.storage_offset())
        if new is None or mine is None or not _elements(new) <= _elements(mine):
            # outside the input: the rebuilt view reads other elements; outside only the
            # tensor it came from: its gradient misses them (a view made under no_grad
            # has none; one restrided in place keeps ``t``'s)
            inplace = name == "as_strided_"
            grad = t.requires_grad and (torch.is_grad_enabled() or inplace)
            info.reached_out = info.reached_out or outside
            if grad and not rebased and not outside:
                self._pending = info
                if inplace:
                    self.note_view(t, t)
        if name == "as_strided_" and t._base is not None and new is not None:
            old = _static(t.shape, t.stride(), t.storage_offset())
            if old is not None:
                before = _elements(old)
                if not _elements(new) <= before:
                    info.narrowed.append(before)
        return not shift

    def check_write(self, written: torch.Tensor) -> list[torch.Tensor]:
        """Refuse a write through ``written`` whose bytes the compiled graph would lose;
        the reachers it rebases (``Reachers.before_write``)."""
        info = self.storages.get(StorageWeakRef(written.untyped_storage()))
        if info is None or not info.restrided:
            return []
        rebased, refusal = self.reachers.before_write(written, info)
        if refusal is not None:
            self.keep_refusal(refusal)
            return rebased
        if info.views and not info.keeps_coordinates() and not _via_as_strided(written):
            self.stale_views.update((v, info) for v in info.views)  # ``note_reads``
        if info.reached_out:
            self.keep_refusal(
                "a write to an input's storage after an as_strided view reached elements "
                "outside the tensor it was taken from (the view would be rebuilt from the "
                "traced value, which does not hold them as the caller's storage does)"
            )
            return rebased
        if info.layout is None:
            return rebased
        shift = info.shift()
        mine = _static(written.shape, written.stride(), value_offset(written))
        if shift is None or mine is None:
            return rebased
        elements = _elements(mine, shift)
        narrowed = info.narrowed and _restrided_in_place(written)
        if not elements <= _elements(info.layout) or (
            narrowed and any(not elements <= old for old in info.narrowed)
        ):
            self.keep_refusal(
                f"a write through a tensor of shape {tuple(written.shape)}, strides "
                f"{tuple(written.stride())} on an input's storage restrided by as_strided "
                "reaches elements the compiled graph does not hold"
            )
        return rebased

    def metadata_written(self, t: torch.Tensor) -> list[torch.Tensor]:
        """Before ``t``'s metadata changes in place (``t_()`` bumps the version, as a write
        does): the reachers rebased (none where a write would be refused, as before)."""
        info = self.storages.get(StorageWeakRef(t.untyped_storage()))
        if info is None:
            return []
        return self.reachers.before_write(t, info)[0]

    def note_view(self, t: torch.Tensor, view: torch.Tensor) -> None:
        """``view``: an ``as_strided`` of ``t``, at the caller's coordinates (``t`` itself,
        restrided in place); a reacher where ``restride`` found one."""
        info = self.storages.get(StorageWeakRef(t.untyped_storage()))
        if info is not None and view is not t:
            info.views.add(id(view))
        if self._pending is not None:
            self.reachers.add(view, self._pending)
            self._pending = None

    def note_reads(self, args: Any) -> None:
        """An op's arguments: one of ``stale_views`` read after a write to its input."""
        for a in args:
            info = self.stale_views.get(id(a)) if isinstance(a, torch.Tensor) else None
            if info is not None:
                info.read_after_write = True

    def finish(self) -> None:
        """Once the function ran: refuse where an input written after an ``as_strided``
        view of it was taken no longer has its value where the caller's tensor lies
        (functionalization rebuilt the view from other elements)."""
        for info in self.storages.values():
            if info.read_after_write and info.shift() != 0:
                self.keep_refusal(
                    "a write to an input's storage after an as_strided view of it was "
                    "taken (the traced value of the written input starts elsewhere than "
                    "the caller's tensor: the view would be rebuilt from other elements)"
                )

    def keep_refusal(self, what: str) -> None:
        """Keep the first refusal (raised once the run is over)."""
        if self.refusal is None:
            self.refusal = UnsupportedError(
                f"{what}; not supported (eager writes/reads the caller's storage)"
            )

    @contextlib.contextmanager
    def refusing(self) -> Iterator[None]:
        """A failure of the storage's geometry after a kept refusal is that refusal (the
        run went on without the caller's coordinates); any other error is the program's
        own (eager raises it too, later than the refused call)."""
        try:
            yield
        except Exception as e:
            geometry = "storage" in str(e) or "out of bounds" in str(e)
            if self.refusal is not None and geometry and not isinstance(e, UnsupportedError):
                raise self.refusal from e
            raise


class Reachers:
    """Tensors an ``as_strided`` (or ``as_strided_``) with grad made past the elements of
    the tensor it was taken from, inside the input, and the views made of them since.

    Eager records a view of a plain tensor as an ``as_strided`` of its base: until the
    storage is written, its node is the ``as_strided`` of the tensor it was taken from
    (whose gradient drops the elements past it), after a write it is rebuilt from the
    base (whose gradient reaches them). Traced, the view's record is its chain of view
    ops, rebuilt through the narrower tensor. At a write (one that bumps the base's
    version: through the base or a view of it) each reacher is given eager's record, an
    ``as_strided`` of its base; a write through one, or with a view of one alive (whose
    record would be rebuilt through the old chain), is refused."""

    def __init__(self) -> None:
        self.tensors: dict[int, tuple[torch.Tensor, _InputStorage]] = {}
        self.derived: dict[int, weakref.ref] = {}

    def __bool__(self) -> bool:
        return bool(self.tensors)

    def add(self, t: torch.Tensor, info: _InputStorage) -> None:
        self.tensors[id(t)] = (t, info)

    def note_result(self, args: Any, result: Any) -> None:
        """An op's result: a view of a reacher (or of such a view) is tracked."""
        known = {*self.tensors, *self.derived}
        if not any(id(a) in known for a in tree_flatten(args)[0]):
            return
        for r in tree_flatten(result)[0]:
            if isinstance(r, torch.Tensor) and r._is_view() and id(r) not in self.tensors:
                self.derived[id(r)] = weakref.ref(r)

    def _derived_alive(self) -> bool:
        return any(ref() is not None for ref in self.derived.values())

    def before_write(
        self, written: torch.Tensor, info: _InputStorage
    ) -> tuple[list[torch.Tensor], str | None]:
        """Before a write through ``written`` on ``info``'s storage: the reachers of it
        rebased, or why the write is refused."""
        mine = [t for t, i in self.tensors.values() if i is info]
        if not mine:
            return [], None
        ref = self.derived.get(id(written))
        through = id(written) in self.tensors or (ref is not None and ref() is written)
        bases = {id(t._base) for t in mine}
        counted = id(written) in bases or id(written._base) in bases
        if through or self._derived_alive() or not counted or len(bases) != 1:
            return [], (
                "a write to an input's storage after an as_strided view reached elements "
                "outside the tensor it was taken from (the view would be rebuilt from the "
                "traced value, which does not hold them as the caller's storage does, or "
                "differentiated otherwise)"
            )
        for t in mine:
            _rebase(t)
            del self.tensors[id(t)]
        return mine, None


def _rebase(t: torch.Tensor) -> None:
    """``t`` given eager's record of it: an ``as_strided`` of its base at its geometry
    (its functional value too: the runtime rebuilds it so in the caller's storage)."""
    with torch.inference_mode(False), torch.enable_grad():
        fresh = t._base.as_strided(t.size(), t.stride(), t.storage_offset())
    if t.requires_grad and not fresh.requires_grad:
        fresh.requires_grad_(True)
    creation = torch._C._autograd._get_creation_meta(t)
    torch._C._swap_tensor_impl(t, fresh)
    torch._C._autograd._set_creation_meta(t, creation)
    t.elem = fresh.elem
