"""The compiled graph's outputs made the objects eager returns.

A graph is functional and knows nothing of tensor identity: it returns one tensor for two
outputs that have one value (``x`` and ``x.detach()``), views where eager returns tensors
of their own, and version counts its kernels left (Inductor's ``mm(out=buf)``). Both the
training and the inference functions (``training.py``, ``inference.py``) hand the caller
what eager would: fresh outputs as tensors of their own at eager's version counts
(``unview``, ``fresh_versions``), outputs that eager returns as views of a tensor it does
not return made views of a detached alias (``views_of_no_output``), and, for the
compiled ``autograd.Function``, differentiable and non-differentiable outputs as objects
of their own, so that marking one does not mark the other
(``distinct_differentiable``, ``separate_non_differentiable``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from ..alias import OutputVerdict
from .layout import ForwardLayout


def unview(outs: Sequence[Any], fresh: Sequence[int]) -> tuple[Any, ...]:
    """``outs`` with the ``fresh`` ones that are views made tensors of their own (same
    storage, no ``._base``), as eager returns them."""
    out = tuple(outs)
    if any(out[k]._base is not None for k in fresh):
        out = list(out)
        for k in fresh:
            if out[k]._base is not None:
                out[k] = out[k].detach()
        out = tuple(out)
    return out


def fresh_versions(layout: ForwardLayout, outputs: Iterable[int]) -> dict[int, int]:
    """Eager's version count of each of ``outputs`` (indices of the forward's outputs):
    a user output's own, an intermediate base's that of the outputs viewing it (one
    counter). A graph may have bumped them (Inductor's ``mm(out=buf)``; ``aten.ones``
    fills what it made: 1 where eager's ``torch.ones`` is at 0)."""
    n_user = layout.num_user_outputs
    counts = layout.output_versions
    of_base = {
        n_user + a.source: counts.get(a.index, 0)
        for a in layout.output_aliases
        if a.verdict in _VIEWS_OF_INTERMEDIATE
    }
    wanted = set(outputs)
    versions = {k: counts.get(k, 0) for k in wanted if k < n_user}
    versions.update({k: v for k, v in of_base.items() if k in wanted})
    return versions


_VIEWS_OF_INTERMEDIATE = (
    OutputVerdict.ALIAS_OF_INTERMEDIATE,
    OutputVerdict.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT,
)


def separate_non_differentiable(
    fwd: tuple[Any, ...], nondiff: Sequence[int], args: Sequence[Any], view_bases: dict[int, int]
) -> tuple[Any, ...]:
    """Outputs marked non-differentiable as objects of their own. A compiled graph returns
    one tensor for two outputs when they have one value (a written input's new value that
    is also returned; ``x`` and ``x.detach()``, the detach being the identity inside the
    graph), and marking that tensor would make the differentiable twin non-differentiable
    too: the marked output becomes a detached alias instead (eager's ``detach`` is one).
    So does a marked output that is a view: autograd derives a view's ``requires_grad``
    from its base, which may be a differentiable output. So does one that is the base of
    a differentiable view whose base in eager is no output (``view_bases``)."""
    nondiff_set = set(nondiff)
    taken = {id(a) for a in args if isinstance(a, torch.Tensor)}
    taken.update(id(t) for i, t in enumerate(fwd) if i not in nondiff_set)
    taken.update(
        id(t._base)
        for i, t in enumerate(fwd)
        if i not in nondiff_set and view_bases.get(i) == -1 and t._base is not None
    )
    out = list(fwd)
    changed = False
    for i in nondiff:
        t = out[i]
        if isinstance(t, torch.Tensor) and (id(t) in taken or t._is_view()):
            out[i] = t.detach()
            changed = True
        elif isinstance(t, torch.Tensor):
            taken.add(id(t))  # two marked outputs may share an object: that is fine
    return tuple(out) if changed else fwd


def distinct_differentiable(fwd: tuple[Any, ...], tangent_outputs: Sequence[int]) -> tuple:
    """Differentiable outputs as objects of their own: the graph returns one tensor for
    two when they have one value (``t`` and the base ``t.detach().requires_grad_()`` of a
    returned view), and autograd would give both gradients to one output."""
    seen: set[int] = set()
    out = None
    for i in tangent_outputs:
        t = fwd[i]
        if id(t) in seen:
            out = list(fwd) if out is None else out
            out[i] = t.detach()
        seen.add(id(t))
    return fwd if out is None else tuple(out)


def views_of_no_output(
    run: Callable[..., tuple[Any, ...]], layout: ForwardLayout
) -> Callable[..., tuple[Any, ...]]:
    """``run``, with the outputs eager returns as views of a tensor it does not return
    (``t1, t1.detach().t()``), which came back as views of another output (the detach
    is the identity inside the graph), made views of a detached alias of that output."""
    unbased = [j for j, k in layout.view_bases.items() if k < 0]
    if not unbased:
        return run

    def run_and_separate(*args: Any) -> tuple[Any, ...]:
        outs = run(*args)
        users = {id(o): o for o in outs if isinstance(o, torch.Tensor)}
        changed, made = list(outs), {}
        for j in unbased:
            o = outs[j]
            base = users.get(id(o._base)) if isinstance(o, torch.Tensor) else None
            if base is not None and not o.requires_grad:
                if id(o) not in made:  # (one object for two outputs: still one)
                    made[id(o)] = base.detach().as_strided(o.size(), o.stride(), o.storage_offset())
                changed[j] = made[id(o)]
        return tuple(changed) if made else outs

    return run_and_separate
