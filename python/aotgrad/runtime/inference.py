"""Stage 6, forward only: the compiled forward run as a plain function.

Where no output needs a gradient (``torch.no_grad()``, inference mode, or inputs that do
not require grad), the call runs the forward graph alone: no ``autograd.Function`` and
nothing saved. The outputs are then made what eager returns (``outputs.py``) and, where
the function writes its inputs or returns views of them, the epilogue (``epilogue.py``)
replays the writes on the caller's tensors and rebuilds those views. A graph that
scatters through strided views runs on detached inputs (torch refuses that on
non-contiguous tensors that require grad), and one whose function makes an input require
grad (``x.requires_grad_()``) runs under ``no_grad``: what it computes from that input
needs no history here, or the training function would have been chosen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .epilogue import Epilogue
from .graph_calls import BoxedFn, marking_failures, without_autocast
from .layout import ForwardLayout
from .outputs import fresh_versions, unview, views_of_no_output


def make_inference_function(fw: BoxedFn, layout: ForwardLayout) -> Callable[..., tuple[Any, ...]]:
    """Return ``run(*flat_tensor_args) -> user outputs`` for a forward-only graph."""
    fw = without_autocast(marking_failures(fw))

    n_user = layout.num_user_outputs
    fresh = layout.fresh_outputs
    if layout.detach_inputs:
        fw = _on_detached_inputs(fw)
    if any(layout.requires_grad_changes.values()):
        # inputs made to require grad before the graph (``x.requires_grad_()``): what the
        # graph computes from them has no autograd history (else the training graph runs)
        fw = _under_no_grad(fw)
    # eager's version counts of the fresh outputs (a graph's ``aten.ones`` fills what it
    # made: version 1 where eager's ``torch.ones`` is at 0)
    versions = fresh_versions(layout, fresh)
    if layout.plain:

        def run(*args: Any) -> tuple[Any, ...]:
            outs = tuple(fw(list(args))[:n_user])
            return _settled(unview(outs, fresh), versions) if fresh else outs

        return views_of_no_output(run, layout)
    epilogue = Epilogue(layout)

    def run_and_replay(*args: Any) -> tuple[Any, ...]:
        before = epilogue.prepare(args)
        outs = fw(list(args))
        return epilogue(args, _settled(unview(outs, fresh), versions) if fresh else outs, before)

    return views_of_no_output(run_and_replay, layout)


def _on_detached_inputs(f: BoxedFn) -> BoxedFn:
    def run(args: list[Any]) -> Any:
        return f(
            [a.detach() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
        )

    return run


def _under_no_grad(f: BoxedFn) -> BoxedFn:
    def run(args: list[Any]) -> Any:
        with torch.no_grad():
            return f(args)

    return run


def _settled(outs: tuple[Any, ...], versions: dict[int, int]) -> tuple[Any, ...]:
    """``outs`` with the version counts ``versions`` (output index → eager's count)."""
    for k, v in versions.items():
        t = outs[k] if k < len(outs) else None
        if t is not None and not t.is_inference() and t._version != v:
            torch._C._autograd._unsafe_set_version_counter((t,), (v,))
    return outs
