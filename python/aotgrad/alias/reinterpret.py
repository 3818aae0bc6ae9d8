"""Views that read their base's bytes otherwise than the base does: another dtype
(``torch.view_as_real``, ``view_as_complex``, ``.real`` / ``.imag``, ``view(dtype)``) or
another conj or neg bit (``t.conj()``, ``t.conj().imag``).

No ``as_strided`` of the base makes one, so a ``ViewSpec`` of one carries a
``Reinterpret``: the view is rebuilt as the base with its bits taken off, its bytes seen
as the view's dtype, the view's bits put on, then strided as the view. Each step is a view
op autograd differentiates (``ConjBackward``, ``ViewAsRealBackward``...), so the rebuilt
view has eager's ``._base``, storage, version counter and gradient path. As
``torch._functorch``'s ``gen_alias_from_base`` rebuilds them.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .views import ViewSpec


@dataclass(frozen=True)
class Reinterpret:
    """The dtype and conj/neg bits a view reads its base's bytes with."""

    dtype: Any
    conj: bool = False
    neg: bool = False
    #: Its dtype taken by ``view(dtype)``: under inference mode eager's is an inference
    #: tensor sharing the bytes, no view (``inference_views``); otherwise, to another
    #: element size, a tensor of its own sharing them and their counter, no view and no
    #: gradient (``x.view(torch.complex128)`` of an (8, 4) float64 ``x``, which no
    #: ``view_as_complex`` takes), whose later views (``.conj()``) view it.
    dtype_view: bool = False
    #: The base's sizes, strides and offset when traced (static ones): a base whose
    #: metadata the function changed after taking the view (``t = x.view(torch.complex128);
    #: x.as_strided_(...)``) is seen as it was then, as eager's view was taken.
    base_layout: tuple[tuple[int, ...], tuple[int, ...], int] | None = field(
        default=None, compare=False
    )

    @classmethod
    def of(cls, view: torch.Tensor) -> Reinterpret:
        return cls(view.dtype, view.is_conj(), view.is_neg())

    def apply(self, base: torch.Tensor) -> torch.Tensor:
        """``base``'s bytes, all of them, as this reads them: a view of ``base``."""
        t = base
        if self.dtype_view and not (t.is_conj() or t.is_neg()):
            t = t.view(self.dtype)
        if t.is_conj() and (not self.conj or t.dtype != self.dtype):
            t = t.conj()  # (a view with the bit off)
        if t.is_neg() and (not self.neg or t.dtype != self.dtype):
            t = torch._neg_view(t)
        if t.dtype != self.dtype:
            if t.is_complex() and not self.dtype.is_complex:
                t = torch.view_as_real(t)
            elif self.dtype.is_complex and not t.is_complex():
                if t.is_contiguous() and t.shape[-1:] != (2,):
                    # a pair taken of a contiguous base by a view of it
                    # (``view_as_complex(t.reshape(4, 2, 2))`` of a (4, 4) ``t``)
                    t = t.view(-1, 2)
                elif (
                    t.shape[-1:] != (2,) and t.dim() and t.stride(-1) == 1 and t.shape[-1] % 2 == 0
                ):
                    # of a base with gaps between its rows (``b[:, :4]``; soak 254172):
                    # pairs within each row
                    t = t.unflatten(-1, (-1, 2))
                t = torch.view_as_complex(t)
            if t.dtype != self.dtype:  # (view_as_real of complex128 is float64)
                t = t.view(self.dtype)
        if self.conj and not t.is_conj():
            t = t.conj()
        if self.neg and not t.is_neg():
            t = torch._neg_view(t)
        return t


def reinterpreted_view(base: torch.Tensor, spec: ViewSpec) -> torch.Tensor:
    """The view ``spec`` (with a ``reinterpret``) of ``base``: a view, as eager's. One
    taken through ``view(dtype)`` views that tensor, which is no view of ``base`` (another
    element size): eager's ``x.view(torch.complex128)[:]`` or ``.conj().conj()`` has it for
    ``._base``, and the whole of it is viewed once more to be one."""
    assert spec.reinterpret is not None
    was = spec.reinterpret.base_layout
    if was is not None and (tuple(base.shape), tuple(base.stride()), base.storage_offset()) != was:
        base = base.as_strided(*was)
    seen = spec.reinterpret.apply(base)
    at = seen.storage_offset() + spec.offset
    if not spec.through and (tuple(seen.shape), tuple(seen.stride()), seen.storage_offset()) == (
        spec.size,
        spec.stride,
        at,
    ):
        return seen if seen._is_view() or seen is base else seen.view(seen.shape)
    t = seen
    for m in spec.through:  # (what eager's as_strided was taken of: ``views.eager_layout``)
        t = t.as_strided(m.size, m.stride, seen.storage_offset() + m.offset)
    return t.as_strided(spec.size, spec.stride, at)


def view_over(t: torch.Tensor, spec: ViewSpec, base: torch.Tensor) -> torch.Tensor:
    """The view ``spec`` of ``base``'s bytes, made of ``t``, another tensor over them (an
    output that is a detached alias or a leaf view of the input ``base``): its offset
    counts from ``base``'s start (in the view's elements where it reinterprets them)."""
    how = spec.reinterpret
    if how is None:
        if t.dtype == base.dtype and not (t.is_conj() or t.is_neg()):
            return t.as_strided(spec.size, spec.stride, base.storage_offset() + spec.offset)
        # a plain view of ``base`` made of ``t``, which reads the bytes otherwise (``t``
        # = ``x.view(torch.complex128)`` returned with ``t.imag[1:3]``): ``t``'s bytes
        # seen as ``base`` sees them first (eager's ``.imag`` views ``t`` so)
        how = Reinterpret(base.dtype)
    if how.dtype_view and t.dtype == how.dtype:
        # ``t`` is that ``view(dtype)`` (``t = x.view(torch.float64)`` returned with
        # ``t[:]`` or ``t.conj()``): eager's views ``t``, another one would be an alias
        how = replace(how, dtype_view=False)
    seen = how.apply(t)
    start = base.storage_offset() * base.element_size() // seen.element_size()
    return seen.as_strided(spec.size, spec.stride, start + spec.offset)


def reinterpreted_spec(
    view: Any,
    base: Any,
    *,
    check_base: bool,
    shown: Any = None,
    dtype_view: bool = False,
    through: Any = (),
) -> ViewSpec | None:
    """The ``ViewSpec`` (with a ``Reinterpret``) of ``view``, which reinterprets ``base``'s
    bytes (its entries sympy expressions where sizes are symbolic); None where it is not
    rebuilt so: data-dependent sizes, or a layout the steps of ``Reinterpret.apply``
    cannot take on ``base`` (``view_as_complex`` of a base whose last dim is not a pair),
    tried on a meta tensor laid out as ``base`` (at the sizes traced). ``shown``: the
    view as eager lays it out (``eager_layout``; taken after a write, the functional
    view's own layout is a new value's), of the view's element size; ``dtype_view``:
    rebuilt through ``base.view(dtype)`` (``Reinterpret.dtype_view``); ``through``: the
    layouts eager's ``as_strided`` s were taken of (``eager_layout``), kept where they read
    the bytes as the view does (``x.imag.as_strided(...)``: its backward reaches only the
    imaginary parts, as eager's)."""
    from .views import ViewSpec, _plain

    laid = view
    if shown is not None and shown.element_size() == view.element_size():
        laid = shown
    start = base.storage_offset() * base.element_size() // view.element_size()
    spec = ViewSpec(
        tuple(_plain(s) for s in laid.shape),
        tuple(_plain(s) for s in laid.stride()),
        _plain(laid.storage_offset() - start),
        tuple(_plain(s) for s in base.stride()) if check_base else None,
        tuple(
            ViewSpec.at(m, start)
            for m in through
            if (m.dtype, m.is_conj(), m.is_neg()) == (view.dtype, view.is_conj(), view.is_neg())
        ),
        reinterpret=Reinterpret(
            view.dtype, view.is_conj(), view.is_neg(), dtype_view, _static_layout(base)
        ),
    )
    hinted = _hints(laid), _hints(base)
    if None in (*hinted[0], *hinted[1]):
        return None  # (unbacked: data-dependent)
    return spec if _rebuilds(spec.reinterpret, base, *hinted) else None


def _static_layout(t: Any) -> tuple[tuple[int, ...], tuple[int, ...], int] | None:
    items = (*t.shape, *t.stride(), t.storage_offset())
    if any(isinstance(v, torch.SymInt) for v in items):
        return None
    return tuple(t.shape), tuple(t.stride()), int(t.storage_offset())


def _hints(t: Any) -> tuple[Any, ...]:
    """``t``'s sizes, strides and offset at the values traced (None: no hint)."""
    return tuple(
        v.node.hint if isinstance(v, torch.SymInt) else int(v)
        for v in (*t.shape, *t.stride(), t.storage_offset())
    )


def _rebuilds(how: Any, base: Any, view: tuple[int, ...], at: tuple[int, ...]) -> bool:
    """Whether ``how`` rebuilds the view laid out as ``view`` (sizes, strides, offset) of
    a meta tensor laid out as ``at``, with ``base``'s dtype and bits."""
    from torch.utils._python_dispatch import _disable_current_modes

    from .views import ViewSpec

    n, m = (len(view) - 1) // 2, (len(at) - 1) // 2
    start, rest = divmod(at[-1] * base.element_size(), how.dtype.itemsize)
    if rest:
        return False
    spec = ViewSpec(view[:n], view[n:-1], view[-1] - start, reinterpret=how)
    try:
        with _disable_current_modes(), torch._C._DisablePythonDispatcher():
            meta = torch.empty(0, dtype=base.dtype, device="meta")
            meta = meta.as_strided(at[:m], at[m:-1], at[-1])
            if base.is_conj():
                meta = meta.conj()
            if base.is_neg():
                meta = torch._neg_view(meta)
            out = reinterpreted_view(meta, spec)
    except Exception:  # a step refuses this layout: not rebuilt
        return False
    got = (out.dtype, out.is_conj(), out.is_neg(), tuple(out.shape), tuple(out.stride()))
    want = (*astuple(how)[:3], view[:n], view[n:-1], view[-1])
    return (*got, out.storage_offset()) == want


def by_view_dtype(view: Any) -> bool:
    """``view`` (a functional tensor, no gradient) took its dtype by ``view(dtype)``:
    rebuilt so (``Reinterpret.dtype_view``), as eager's, which is no view of what it was
    taken of (another element size) and carries no gradient. One that requires grad took
    it by a differentiable view (``view_as_complex``)."""
    from ..inference_views import through_dtype_view

    return not view.requires_grad and through_dtype_view(view)
