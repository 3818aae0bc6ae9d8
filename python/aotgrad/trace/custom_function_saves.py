"""The saved tensors of a custom autograd Function that Dynamo captured, seen by the joint
trace's saved-tensor hooks.

Dynamo turns ``MyFunction.apply`` into the ``autograd_function_apply`` higher-order op,
whose forward graph returns the outputs and the values the backward graph reads. torch
runs it as an ``autograd.Function`` that keeps those values on the side, without
``ctx.save_for_backward``: no saved-tensor hook sees them. Eager's Function saved the ones
passed to ``ctx.save_for_backward`` (``saved_for_backward_idx``): a write to one after
the call (the input it saved, written by the caller) makes eager's backward raise.

While the joint trace runs (``custom_function_saves``), the op's forward graph passes
each of those values through the trace's pack hook as it returns them, and its backward
graph through the unpack hook as it reads them, under the Function's backward node: the
trace checks and records them as the saved tensors of any other node (``trace.joint``).
Values stashed on ``ctx`` otherwise are not checked, as in eager.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch.fx as fx

__all__ = ["custom_function_saves"]

_active = threading.local()
_install_lock = threading.Lock()


def _hop_class() -> Any:
    try:
        from torch._functorch.autograd_function import AutogradFunctionApply
    except ImportError:  # another torch: its Functions run unchecked, as before
        return None
    return AutogradFunctionApply


def _install() -> None:
    """Wrap the op's ``__call__`` once: outside ``custom_function_saves`` (other threads,
    other tracers) it runs unchanged."""
    cls = _hop_class()
    if cls is None:
        return
    with _install_lock:
        if getattr(cls.__call__, "_aotgrad_saves", False):
            return
        original = cls.__call__

        @functools.wraps(original)
        def call(hop: Any, fwd: Any, bwd: Any, *args: Any, **kwargs: Any) -> Any:
            hooks = getattr(_active, "hooks", None)
            checked = kwargs.get("saved_for_backward_idx", ())
            if hooks is None or not checked or not isinstance(fwd, fx.GraphModule):
                return original(hop, fwd, bwd, *args, **kwargs)
            fwd, bwd = _through_hooks(fwd, bwd, checked, *hooks)
            return original(hop, fwd, bwd, *args, **kwargs)

        call._aotgrad_saves = True  # type: ignore[attr-defined]
        cls.__call__ = call


@contextlib.contextmanager
def custom_function_saves(
    pack: Callable[[Any], Any], unpack: Callable[[Any], Any]
) -> Iterator[None]:
    """In this thread, the checked saved values of ``autograd_function_apply`` go through
    ``pack`` (as the forward returns them) and ``unpack`` (as the backward reads them)."""
    _install()
    before = getattr(_active, "hooks", None)
    _active.hooks = (pack, unpack)
    try:
        yield
    finally:
        _active.hooks = before


def _through_hooks(
    fwd: fx.GraphModule,
    bwd: fx.GraphModule,
    checked: Sequence[int],
    pack: Callable[[Any], Any],
    unpack: Callable[[Any], Any],
) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Copies of the op's graphs whose checked saved values pass through the hooks (one
    packed record per value and call)."""
    packed: dict[int, Any] = {}

    def packing(k: int) -> Callable[[Any], Any]:
        def keep(t: Any) -> Any:
            packed[k] = pack(t)
            return t

        return keep

    def unpacking(k: int) -> Callable[[Any], Any]:
        def read(t: Any) -> Any:
            return unpack(packed[k]) if k in packed else t

        return read

    fwd_graph = _copy(fwd.graph)
    out = fwd_graph.output_node()
    outputs, saved = out.args[0]
    saved = list(saved)
    with fwd_graph.inserting_before(out):
        for k in checked:
            if k < len(saved) and isinstance(saved[k], fx.Node):
                saved[k] = fwd_graph.call_function(packing(k), (saved[k],))
    out.args = ((outputs, tuple(saved)),)
    bwd_graph = _copy(bwd.graph)
    placeholders = [n for n in bwd_graph.nodes if n.op == "placeholder"]
    first = len(placeholders) - len(saved)
    for k in checked:
        if 0 <= first + k < len(placeholders):
            ph = placeholders[first + k]
            with bwd_graph.inserting_after(placeholders[-1]):
                read = bwd_graph.call_function(unpacking(k), (ph,))
            ph.replace_all_uses_with(read, delete_user_cb=lambda user, r=read: user is not r)
    return fx.GraphModule(fwd, fwd_graph), fx.GraphModule(bwd, bwd_graph)


def _copy(graph: fx.Graph) -> fx.Graph:
    new = fx.Graph()
    output = new.graph_copy(graph, {})
    new.output(output)
    return new
