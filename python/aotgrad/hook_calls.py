"""Gradient hooks the function registers on tensors it makes, called as the backward runs.

``y = x.sin(); y.register_hook(lambda g: seen.append(g))`` inside a compiled function:
traced, the hook ran once, in the trace, on a stand-in gradient (``seen`` kept one
``FunctionalTensor`` where eager's holds one real gradient per backward). A hook that
holds no tensor (``holds_traced_values``: it would hold the trace's stand-in at runtime)
is instead left for the backward: the trace registers :class:`HookCall`, which records
``aotgrad::tensor_hook(grad, key)``, an opaque op whose kernel calls the user's hook on
the real gradient each time the compiled backward runs, in the order eager's engine
would, and returns what the hook returns (the gradient itself where it returns None).
Hooks that hold tensors stay traced (their arithmetic is the graph's; side effects of
such a hook still run once, at trace time), and so do those in a graph Dynamo made
(``hooks_traced``: Dynamo took in only hooks it could trace, side effects handled).

The op's kernel reads the hook from a registry by ``key`` (:func:`hook_key`): Inductor's
code and its FX-graph cache hold the key, never the hook; each process fills the
registry as it traces.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .autograd_walks import walk_finds
from .errors import EagerRefusal, UnsupportedError
from .input_hooks import holds_traced_values

__all__ = [
    "TENSOR_HOOK",
    "HookCall",
    "called_by_backward",
    "calls_hooks",
    "hook_key",
    "hooks_of_unused_pieces",
    "hooks_traced",
]

_hooks: dict[int, Callable[[torch.Tensor], Any]] = {}
_keys = itertools.count(1)
_lock = threading.Lock()
_tracing = threading.local()


def hook_key(hook: Callable[[torch.Tensor], Any]) -> int:
    """A new key under which the backward's op finds ``hook``."""
    with _lock:
        key = next(_keys)
        _hooks[key] = hook
    return key


def _name(hook: Any) -> str:
    return getattr(hook, "__qualname__", None) or getattr(hook, "__name__", None) or repr(hook)


def _checked(hook: Any, grad: torch.Tensor, out: Any) -> torch.Tensor:
    """``out`` as the op returns it: eager's checks of a hook's result, a tensor of its
    own laid out as the gradient is (the graph's code expects the gradient's strides)."""
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"expected a Tensor or None from hook {_name(hook)}, got {type(out)}")
    if out.shape != grad.shape:
        raise RuntimeError(
            f"hook '{_name(hook)}' has changed the size of value (was {list(grad.shape)}, "
            f"got {list(out.shape)})"
        )
    if out.dtype != grad.dtype or out.device != grad.device:
        raise RuntimeError(
            f"hook '{_name(hook)}' has changed the type of value (was {grad.dtype} on "
            f"{grad.device}, got {out.dtype} on {out.device})"
        )
    if (
        out.stride() != grad.stride()
        or out.untyped_storage()._cdata == grad.untyped_storage()._cdata
    ):
        return torch.empty_like(grad).copy_(out)
    return out


@torch.library.custom_op("aotgrad::tensor_hook", mutates_args=())
def _tensor_hook(grad: torch.Tensor, key: int) -> torch.Tensor:
    hook = _hooks.get(key)
    if hook is None:
        raise RuntimeError(
            f"aotgrad: the backward calls gradient hook {key}, which this process never "
            "traced (a compiled graph loaded without its trace?)"
        )
    out = hook(grad)
    return grad.clone() if out is None else _checked(hook, grad, out)


@_tensor_hook.register_fake
def _(grad: torch.Tensor, key: int) -> torch.Tensor:
    return torch.empty_like(grad)


#: The op as graphs hold it.
TENSOR_HOOK = torch.ops.aotgrad.tensor_hook.default


class HookCall:
    """What the trace registers in place of a user's hook: the gradient through the op."""

    def __init__(self, hook: Callable[[torch.Tensor], Any]) -> None:
        self.hook = hook
        self.key = hook_key(hook)
        #: Whether the trace's backward called it.
        self.called = False

    def __call__(self, grad: torch.Tensor | None) -> torch.Tensor:
        self.called = True
        if grad is None:  # (the graph has no value to call it on at runtime)
            raise EagerRefusal(
                "a hook the function registers is called without a gradient (a piece of "
                "a multi-output view no output uses: eager calls it with None); the "
                "calls run eagerly"
            )
        return TENSOR_HOOK(grad, self.key)


class UnusedPiece:
    """Registered on the outputs made again of a multi-output view's node: a hook the
    function registered on another piece of it that gets no gradient, called with None
    once per backward pass that reaches one of them, as eager's node calls it."""

    def __init__(self, hook: Callable[[Any], Any]) -> None:
        self.hook = hook
        self.task = -1

    def for_call(self) -> UnusedPiece:
        """One per call: each call's node runs once per pass."""
        return UnusedPiece(self.hook)

    def __call__(self, grad: Any) -> None:
        task = torch._C._current_graph_task_id()
        if task == self.task:
            return
        self.task = task
        if self.hook(None) is not None:
            raise UnsupportedError(
                f"hook {_name(self.hook)} on a piece of a multi-output view that gets no "
                "gradient returned one for it: not supported (eager passes it to the view's "
                "base; the compiled call made the returned pieces again of the input)"
            )


def hooks_of_unused_pieces(
    hooked: Sequence[tuple[Any, ...]], outs: Sequence[Any], rebuilt: Sequence[int]
) -> list[tuple[int, UnusedPiece]]:
    """``(output, hook)`` where a hook the backward calls sits on a piece of a multi-output
    view (``a, b = x.unbind(0); a.register_hook(h); return b``, soak 250352) that no
    output reads, and a ``rebuilt`` output is another piece of it: the runtime makes
    that output again as a view of the caller's tensor, on a node of its own, which never
    calls the hook, where eager's node calls it with None (``h`` may raise, or count its
    calls). ``hooked``: ``EagerCalls.hook_calls``.

    Not a hook in a graph Dynamo made (not a ``HookCall``): Dynamo traced its body for a
    tensor (``g * 2`` where the user's hook returns None for None), so calling it with
    None raises where eager does not (``torch.compile(backend="eager")`` does)."""
    found: list[tuple[int, UnusedPiece]] = []
    for t, node, nr, registered, handle in hooked:
        if not isinstance(registered, HookCall) or node is None:
            continue
        if handle.id not in (t._backward_hooks or {}) or any(o is t for o in outs):
            continue  # (removed; returned: its own output's hook)
        siblings = [
            k
            for k in rebuilt
            if getattr(outs[k], "grad_fn", None) is node and outs[k].output_nr != nr
        ]
        if siblings and not _read(node, nr, outs):
            piece = UnusedPiece(registered.hook)
            found += [(k, piece) for k in siblings]
    return found


def _read(node: Any, nr: int, outs: Sequence[Any]) -> bool:
    """Whether some output's history reads output ``nr`` of ``node``."""

    def reads(n: Any) -> bool:
        return n is not node and any(m is node and k == nr for m, k in n.next_functions)

    return any(walk_finds(o.grad_fn, reads) for o in outs if isinstance(o, torch.Tensor))


def called_by_backward(hook: Any) -> Any:
    """What the trace registers for ``hook``: a :class:`HookCall`, or the hook itself where
    it holds tensors (traced: at runtime it would hold the trace's stand-ins)."""
    if getattr(_tracing, "hooks", False) or holds_traced_values(hook):
        return hook
    if "register_multi_grad_hook.<locals>." in getattr(hook, "__qualname__", ""):
        # (it asks the engine about the trace's nodes, which the backward never runs)
        raise EagerRefusal(
            "torch.autograd.graph.register_multi_grad_hook inside the function: its hook "
            "reads which of the trace's autograd nodes the engine will run; the calls run "
            "eagerly"
        )
    return HookCall(hook)


@contextlib.contextmanager
def hooks_traced() -> Iterator[None]:
    """Within: hooks registered are traced (a graph Dynamo made runs)."""
    before = getattr(_tracing, "hooks", False)
    _tracing.hooks = True
    try:
        yield
    finally:
        _tracing.hooks = before


def calls_hooks(gm: Any) -> bool:
    """Whether graph module ``gm`` (or None) calls a user's hook (not for another process:
    the key names a hook of this one)."""
    return gm is not None and any(n.target is TENSOR_HOOK for n in gm.graph.nodes)
