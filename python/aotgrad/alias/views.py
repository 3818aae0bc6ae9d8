"""View metadata recorded at trace time and replayed on real tensors at run time.

A ``ViewSpec`` is the (sizes, strides, storage offset relative to the base) of
a view as the tracer saw it on fakes. Under ``dynamic=True`` the entries can be
sympy expressions in the input's size symbols; ``Bindings`` says where each
symbol is read from the real inputs, so a spec is evaluated per call with a
few attribute reads (static specs are plain ints and cost nothing).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .reinterpret import Reinterpret, reinterpreted_view

#: (symbol, input index, "size" | "stride" | "offset", dim)
Binding = tuple[Any, int, str, int]


def _plain(v: Any) -> Any:
    """An int, or the sympy expression of a SymInt (an int when it is constant)."""
    if isinstance(v, torch.SymInt):
        expr = v.node.expr
        return int(expr) if expr.is_number else expr
    return int(v)


def node_unreadable(t: torch.Tensor) -> bool:
    """``t`` is a view whose autograd node eager cannot rebuild (of ``unbind``/``split``,
    made under ``no_grad``) and which was written since: reading its ``grad_fn`` or
    ``is_leaf`` raises. Eager raises only where the function reads its node."""
    if not t._is_view():
        return False
    if getattr(t, "_aotgrad_node_unreadable", False):
        return True  # the fake of such a tensor (``trace.fakes``), whose own node reads
    try:
        t.is_leaf  # noqa: B018 (the read is the question)
    except RuntimeError:
        return True
    return False


def leaf_if_readable(t: torch.Tensor) -> bool:
    """``t.is_leaf``; False where its node cannot be read (``node_unreadable``: a
    written view of a tensor that requires grad is no leaf), where eager's read raises."""
    try:
        return t.is_leaf
    except RuntimeError:
        return False


@dataclass(frozen=True)
class ViewSpec:
    size: tuple[Any, ...]
    stride: tuple[Any, ...]
    #: Storage offset minus the base's storage offset.
    offset: Any
    #: The strides the base must have (a base returned by a compiled graph is
    #: checked against them); None for an input base, whose strides are guarded.
    base_stride: tuple[Any, ...] | None = None
    #: Layouts (relative to the base, static) the view is taken through, in order: what
    #: an ``as_strided`` in eager's chain was applied to (``eager_layout``).
    through: tuple[Any, ...] = ()
    #: A view that reads its base's bytes otherwise (another dtype, a conj or neg bit):
    #: how (``Reinterpret``); its offset then counts its own elements from the base's start.
    reinterpret: Reinterpret | None = None

    @classmethod
    def of(
        cls, view: torch.Tensor, base: torch.Tensor, *, check_base: bool, through: Any = ()
    ) -> ViewSpec:
        return cls(
            tuple(_plain(s) for s in view.shape),
            tuple(_plain(s) for s in view.stride()),
            _plain(view.storage_offset() - base.storage_offset()),
            tuple(_plain(s) for s in base.stride()) if check_base else None,
            tuple(cls.of(m, base, check_base=False) for m in through),
        )

    @classmethod
    def at(cls, view: torch.Tensor, base_offset: Any) -> ViewSpec:
        """``view``'s layout, its offset relative to ``base_offset``."""
        return cls(
            tuple(_plain(s) for s in view.shape),
            tuple(_plain(s) for s in view.stride()),
            _plain(view.storage_offset() - base_offset),
        )

    @property
    def static(self) -> bool:
        items = (*self.size, *self.stride, self.offset, *(self.base_stride or ()))
        return all(isinstance(v, int) for v in items)


def eager_layout(view: Any, base: torch.Tensor) -> tuple[Any, list[Any]]:
    """``view`` (a functional view of ``base``, its root) as eager lays it out: the view
    ops functionalization recorded, replayed on a meta tensor laid out as ``base``. After
    a write through a view, the functional tensor's own strides are regenerated from a
    new base and can differ from eager's (``x.unflatten(-1, (2, 2)).masked_fill_(...)``
    on a column-major input). ``view`` itself where the ops cannot be replayed (symbolic
    sizes or arguments, no record).

    Also the layouts an ``as_strided`` in the chain was taken of (``x.diagonal()
    .as_strided(...)``): its backward gives gradient only to the elements its input
    covers, so the runtime passes through them (``ViewSpec.through``), as eager did."""
    from torch._C import _functionalization
    from torch._subclasses.functional_tensor import FunctionalTensor
    from torch.utils._python_dispatch import _disable_current_modes

    if not isinstance(view, FunctionalTensor):
        return view, []
    try:
        layout = (tuple(base.shape), tuple(base.stride()), base.storage_offset())
        if not all(isinstance(v, int) for v in (*layout[0], *layout[1], layout[2])):
            return view, []
        sequence = _functionalization.get_view_meta_sequence(view.elem)
        if isinstance(base, FunctionalTensor):
            # a base whose metadata the function changed in place (``t.transpose_(0, 1)``)
            # is itself recorded as views of its storage: the view's own ops follow those,
            # if it was taken after the change (before it, its ops start from the storage
            # as it was laid out then: its own metadata is eager's)
            own = _functionalization.get_view_meta_sequence(base.elem)
            if not starts_with(sequence, own):
                return view, []
            sequence = sequence[len(own) :]
        if not sequence or any(vm.has_symbolic_inputs for vm in sequence):
            return view, []
        through = []
        # the real view kernels (tracing enables the Python dispatcher, whose meta kernels
        # lay size-1 dims out otherwise: ``t.chunk(2, -1)[1].view_as(...)``)
        with _disable_current_modes(), torch._C._DisablePythonDispatcher():
            out = torch.empty(0, dtype=base.dtype, device="meta").as_strided(*layout)
            for k, vm in enumerate(sequence):
                if k and type(vm).__name__.startswith("as_strided"):
                    through.append(out)
                out = _functionalization.apply_view_meta_sequence(out, [vm])
    except Exception:  # no record of how the view was made: its own metadata
        return view, []
    return (out, through) if tuple(out.shape) == tuple(view.shape) else (view, [])


def bindings_of(fake_args: Sequence[Any]) -> list[Binding]:
    """Where each size symbol of the fake inputs is found on the real ones."""
    out: list[Binding] = []
    seen: set[Any] = set()

    def visit(v: Any, i: int, kind: str, d: int) -> None:
        if isinstance(v, torch.SymInt):
            expr = v.node.expr
            if expr.is_Symbol and expr not in seen:
                seen.add(expr)
                out.append((expr, i, kind, d))

    for i, a in enumerate(fake_args):
        if isinstance(a, torch.Tensor):
            for d, s in enumerate(a.shape):
                visit(s, i, "size", d)
            for d, s in enumerate(a.stride()):
                visit(s, i, "stride", d)
            visit(a.storage_offset(), i, "offset", 0)
        elif isinstance(a, torch.SymInt):
            visit(a, i, "value", 0)
    return out


def unbound_symbols(specs: Sequence[ViewSpec], bindings: Sequence[Binding]) -> set[Any]:
    """The symbols of ``specs`` that no binding reads from the inputs: data-dependent
    (unbacked) sizes, which the inputs alone cannot give at run time."""
    found: set[Any] = set()
    for spec in specs:
        for v in (*spec.size, *spec.stride, spec.offset, *(spec.base_stride or ())):
            if not isinstance(v, int):
                found |= v.free_symbols
    return found - {b[0] for b in bindings}


def _read(arg: Any, kind: str, d: int) -> int:
    if kind == "size":
        return int(arg.shape[d])
    if kind == "stride":
        return int(arg.stride(d))
    if kind == "offset":
        return int(arg.storage_offset())
    return int(arg)


class Evaluator:
    """Evaluates the symbolic entries of specs against one call's real inputs."""

    def __init__(self, bindings: Sequence[Binding], args: Sequence[Any]) -> None:
        self.values = {sym: _read(args[i], kind, d) for sym, i, kind, d in bindings}

    def __call__(self, v: Any) -> int:
        return v if isinstance(v, int) else int(v.xreplace(self.values))

    def spec(self, spec: ViewSpec) -> ViewSpec:
        if spec.static:
            return spec
        e = self
        return ViewSpec(
            tuple(e(s) for s in spec.size),
            tuple(e(s) for s in spec.stride),
            e(spec.offset),
            None if spec.base_stride is None else tuple(e(s) for s in spec.base_stride),
            reinterpret=spec.reinterpret,
        )


def starts_with(sequence: Sequence[Any], prefix: Sequence[Any]) -> bool:
    """Whether the view ops ``sequence`` begin with those of ``prefix`` (same op, same
    arguments)."""
    if len(prefix) > len(sequence):
        return False
    return all(
        type(a) is type(b) and not a.has_symbolic_inputs and a.as_tuple() == b.as_tuple()
        for a, b in zip(sequence, prefix)
    )


@functools.lru_cache(maxsize=4096)
def _relaid(spec: ViewSpec, shape: tuple[int, ...], actual: tuple[int, ...]) -> ViewSpec | None:
    """The view ``spec`` (of a base traced with strides ``spec.base_stride``) taken of
    the same base laid out with strides ``actual``, where both lay it out densely (a
    permutation of its dimensions: an eager kernel whose meta kernel lays its output out
    otherwise, ``angle`` of a non-contiguous complex tensor) and the view's elements stay
    evenly strided: eager's view of eager's base. None otherwise (not static, a view that
    reinterprets or passes through other layouts, one no strides express)."""
    traced = spec.base_stride
    if spec.reinterpret is not None or spec.through or not spec.static or traced is None:
        return None
    if dense_order(shape, traced) is None or dense_order(shape, actual) is None:
        return None

    def moved(offset: int) -> int:  # a traced storage offset, in the actual layout
        return sum(((offset // t) % n) * a for n, t, a in zip(shape, traced, actual) if n > 1)

    start = moved(spec.offset)
    stride = tuple(
        moved(spec.offset + st) - start if n > 1 else st for n, st in zip(spec.size, spec.stride)
    )
    relaid = ViewSpec(spec.size, stride, start)
    n = 1
    for d in spec.size:
        n *= d
    if n > _CHECKED_ELEMENTS or not _same_elements(spec, relaid, moved):
        return None
    return relaid


#: Views up to this many elements are relaid (each element's place is checked once).
_CHECKED_ELEMENTS = 1 << 16


def contiguous_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def dense_order(shape: torch.Size, strides: tuple[int, ...]) -> list[int] | None:
    """The dims of a dense, non-overlapping layout from the outermost in; None if the
    layout is not one (a permutation of contiguous strides)."""
    order = sorted(range(len(shape)), key=lambda d: -strides[d])
    permuted = torch.Size([shape[d] for d in order])
    want = contiguous_strides(permuted)
    ok = all(int(shape[d]) == 1 or strides[d] == w for d, w in zip(order, want, strict=True))
    return order if ok else None


def _same_elements(spec: ViewSpec, relaid: ViewSpec, moved: Any) -> bool:
    """Every element of the view ``spec`` sits where ``relaid`` puts it (``moved``)."""
    import itertools

    for index in itertools.product(*(range(n) for n in spec.size)):
        was = spec.offset + sum(i * st for i, st in zip(index, spec.stride))
        now = relaid.offset + sum(i * st for i, st in zip(index, relaid.stride))
        if moved(was) != now:
            return False
    return True


#: Per base a graph returned laid out otherwise than traced, its copy laid out as traced
#: (one per base and layout: the views of one base share the copy, as eager's share it).
_LAID_OUT: Any = None


def _laid_out_as_traced(base: torch.Tensor, stride: tuple[Any, ...]) -> torch.Tensor:
    """A compiler (or an eager kernel whose meta kernel lays its output out otherwise:
    ``angle`` of a non-contiguous complex tensor) laid ``base`` out otherwise than traced:
    the views are taken of a copy laid out as traced (right values and gradients; it
    shares no storage with the base the graph returned, but every view of this base
    shares it)."""
    global _LAID_OUT
    if _LAID_OUT is None:
        from torch.utils.weak import WeakIdKeyDictionary

        _LAID_OUT = WeakIdKeyDictionary()
    copies = _LAID_OUT.setdefault(base, {})
    copy = copies.get(stride)
    if copy is not None:
        return copy
    laid_out = torch.empty_strided(base.shape, stride, dtype=base.dtype, device=base.device)
    version = None if base.is_inference() else base._version
    with torch.set_grad_enabled(base.requires_grad and torch.is_grad_enabled()):
        copy = laid_out.copy_(base)
    # (eager's base is the one it computed: its count, not the copy's write)
    if version is not None and not copy.is_inference():
        torch._C._autograd._unsafe_set_version_counter((copy,), (version,))
    copies[stride] = copy
    return copy


def regenerate(
    base: torch.Tensor, spec: ViewSpec, requires_grad: bool, *, no_grad: bool = False
) -> torch.Tensor:
    """The view ``spec`` of the real ``base``: it shares base's storage, ``._base`` and
    version counter, and autograd differentiates through it into ``base``. ``no_grad``:
    eager made the view under no_grad: a view autograd does not track (as eager's)."""
    if spec.base_stride is not None and tuple(base.stride()) != spec.base_stride:
        relaid = _relaid(spec, tuple(base.shape), tuple(base.stride()))
        if relaid is None:
            base = _laid_out_as_traced(base, spec.base_stride)
        else:
            spec = relaid
    if no_grad:
        with torch.no_grad():
            return _view(base, spec)
    out = _view(base, spec)
    if base.requires_grad and not requires_grad:
        out = out.detach()
    elif requires_grad and not out.requires_grad:
        out.requires_grad_(True)  # requires_grad_() on a view of an input without grad
    return out


def detached_alias(
    base: torch.Tensor, spec: ViewSpec, kind: int, requires_grad: bool, leaf: bool = True
) -> torch.Tensor:
    """An alias of ``base`` autograd does not connect to it, shaped as eager's: ``kind``
    1 ``x.detach()`` (not a view), 2 a view of one (``x.detach().t()``). ``leaf``: an
    output that requires grad is itself the leaf; otherwise (kind 2) the detached alias
    is (``t = x.detach().requires_grad_(); t.t()``: a view of a leaf, with a grad_fn)."""
    if kind == 1:
        # (of ``base.detach()``: a view of a stale view of a multi-output op would read
        # its node, which raises)
        out = _view(base.detach(), spec).detach()
    else:
        detached = base.detach()
        if requires_grad and not leaf:
            detached.requires_grad_(True)
        out = _view(detached, spec)
    if requires_grad and not out.requires_grad:
        out.requires_grad_(True)  # x.detach().requires_grad_(): a leaf
    return out


def view_of_detached_leaf(base: torch.Tensor, spec: ViewSpec, no_grad: bool) -> torch.Tensor:
    """A view of ``base.detach()`` whose ``requires_grad`` is that detached alias's, a
    leaf: taken before ``requires_grad_()`` made the alias a leaf (``t = x.detach();
    v = t.t(); t.requires_grad_()``: no ``grad_fn``), or after it under no_grad."""
    detached = base.detach()
    if no_grad:
        detached.requires_grad_(True)
        with torch.no_grad():
            return _view(detached, spec)
    out = _view(detached, spec)
    detached.requires_grad_(True)
    return out


class _Detached(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, value: torch.Tensor, base: torch.Tensor, spec: ViewSpec, kind: int
    ) -> torch.Tensor:
        return _detached_view(base, spec, kind)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        return g, None, None, None


def routed_detached(
    base: torch.Tensor, spec: ViewSpec, value: torch.Tensor, kind: int
) -> torch.Tensor:
    """The detached alias ``spec`` of the real ``base`` (``x.detach()``: its bytes and
    version counter, no ``._base``; or a view of ``base.detach()``) with the history of
    ``value``, the graph's output holding the same values (``kind`` 1: the alias, 2: a
    view of it): eager's detached alias (or
    view of one) after a write autograd tracked. (The view is one a custom Function
    made: an in-place write to it raises, where eager's gradient would pass through the
    detached alias's history, which the graph does not return.)"""
    if not value.requires_grad:
        with torch.no_grad():
            return _detached_view(base, spec, kind)
    with torch.enable_grad():
        return _Detached.apply(value, base, spec, kind)


def _detached_view(base: torch.Tensor, spec: ViewSpec, kind: int) -> torch.Tensor:
    if kind == 2:
        return _view(base.detach(), spec)
    return _view(base, spec).detach()


def _view(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    if spec.reinterpret is not None:
        return reinterpreted_view(base, spec)
    if tuple(base.shape) == spec.size and tuple(base.stride()) == spec.stride and spec.offset == 0:
        return base.view(base.shape)  # the whole base, still a view of it
    at = base.storage_offset()
    t = base
    for s in spec.through:
        t = t.as_strided(s.size, s.stride, at + s.offset)
    return t.as_strided(spec.size, spec.stride, at + spec.offset)


def replay_metadata(
    t: torch.Tensor, spec: ViewSpec, *, record: bool = False, keep_version: bool = True
) -> None:
    """Give the real input ``t`` the sizes/strides/offset the function gave it (``t_()``);
    ``record``: with grad mode on, so that autograd records it (``t`` requires grad).
    The version counter is left as it was (``keep_version``; otherwise bumped once): the
    caller sets it to eager's count."""
    at = t.storage_offset() + spec.offset
    set_metadata(t, spec.size, spec.stride, at, record=record, keep_version=keep_version)


def set_metadata(
    t: torch.Tensor,
    size: Any,
    stride: Any,
    offset: Any,
    *,
    record: bool = False,
    keep_version: bool = True,
) -> None:
    """``t.as_strided_(size, stride, offset)``, the version counter left unchanged (with
    ``keep_version``)."""
    version = -1 if t.is_inference() else t._version
    with torch.set_grad_enabled(record):
        t.as_strided_(size, stride, offset)
    if version >= 0 and keep_version:
        torch._C._autograd._unsafe_set_version_counter((t,), (version,))


def _same_layout(x: torch.Tensor) -> torch.Tensor:
    """A view of ``x`` laid out as ``x``, for a custom Function to return: returned as-is,
    autograd would make it ``x.view_as(x)``, whose strides of size-1 dims are recomputed
    (``(4, 16, 1)`` becomes ``(4, 4, 1)``)."""
    return x.as_strided(x.shape, x.stride(), x.storage_offset())


class _AsIs(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return _same_layout(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g


def stale_custom_view(t: torch.Tensor, version: int) -> torch.Tensor:
    """``t`` as eager returns a view a custom Function made whose base was written after
    it: a view (of a detached copy of ``t``'s value) whose ``grad_fn``, and so any use of
    it with grad, raises autograd's "...was created inside a custom Function" error."""
    leaf = t.detach().requires_grad_(True)
    now = leaf._version
    if version >= 1 and now >= version:
        # made at the count before eager's last write (``t`` may already be at eager's
        # count, set before it was saved): the count it ends at is eager's
        torch._C._autograd._unsafe_set_version_counter((leaf,), (version - 1,))
    with torch.enable_grad():
        out = _AsIs.apply(leaf)
    # written after the view was made: its counter moves past the one the view recorded
    after = version if version > out._version else out._version + 1
    torch._C._autograd._unsafe_set_version_counter((out,), (after,))
    return out


def stale_custom_view_of(
    base: torch.Tensor, version: int, spec: ViewSpec | None = None
) -> torch.Tensor:
    """``stale_custom_view`` made of ``base`` itself (or its view ``spec``), the tensor
    eager's view has for ``._base``: another output (``t3 = ViewOf.apply(t1);
    DirtyMul.apply(t1); return t1, t3``), an input written with grad before the Function
    and after it. Made at the count before eager's last write, the counter (shared) then
    set to ``version``."""
    torch._C._autograd._unsafe_set_version_counter((base,), (version - 1,))
    with torch.enable_grad():
        out = _AsIs.apply(base if spec is None else _view(base, spec))
    torch._C._autograd._unsafe_set_version_counter((base,), (version,))
    return out


def custom_view_of(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    """The view ``spec`` of ``base`` as a custom Function returns it (its input as-is):
    writes to ``base`` after it make reading its ``grad_fn`` raise, as in eager. Made in
    the call's grad mode, as eager's Function: under no_grad it records no node, and
    holds no gradient accumulator of ``base`` (one made at ``base``'s shape before the
    function changed it, ``as_strided_``, kept alive by the view, would refuse the
    caller's backward through ``base`` its gradient of the new shape)."""
    return _AsIs.apply(_view(base, spec))


def no_grad_view_of(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    """The view ``spec`` of ``base`` made under no_grad: writes to ``base`` after it make
    reading its ``grad_fn`` raise, as eager's."""
    with torch.no_grad():
        return _view(base, spec)


def stale_no_grad_view_of(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    """The view ``spec`` of ``base`` made under no_grad before ``base``'s last write (its
    version count then one less): stale, as eager's, with ``base``'s count unchanged."""
    now = base._version
    torch._C._autograd._unsafe_set_version_counter((base,), (max(now - 1, 0),))
    view = no_grad_view_of(base, spec)
    torch._C._autograd._unsafe_set_version_counter((base,), (max(now, 1),))
    return view


def stale_multi_output_view_of(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    """The view ``spec`` of ``base`` as one output of an op with several view outputs
    (``split``, ``unbind``) made before ``base``'s last write: its ``._base`` is ``base``,
    and reading its ``grad_fn`` raises eager's "...is the output of a function that
    returns multiple views" error; ``base``'s count is unchanged."""
    now = base._version
    torch._C._autograd._unsafe_set_version_counter((base,), (max(now - 1, 0),))
    with torch.enable_grad():
        view = _view(base, spec)
    torch._C._autograd._set_creation_meta(view, torch._C._autograd.CreationMeta.MULTI_OUTPUT_NODE)
    torch._C._autograd._unsafe_set_version_counter((base,), (max(now, 1),))
    return view


class _Routed(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, view: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return _same_layout(view)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[None, torch.Tensor]:
        return None, g


def routed_view(base: torch.Tensor, spec: ViewSpec, value: torch.Tensor) -> torch.Tensor:
    """The view ``spec`` of the real ``base``, returned as a custom Function returns a view
    of its input (eager's view of the input, made in a Function), whose gradient flows
    into ``value``: the graph's output, which holds the same values and the custom
    backward's path."""
    with torch.no_grad():
        view = _view(base, spec)
    if not value.requires_grad:
        return view
    with torch.enable_grad():
        return _Routed.apply(view, value)
