"""Running the user's function functionalized on fakes: the tracing modes (and the lock
make_fx needs), functional wrapping, effect-token chains, the caller's layout of inputs
whose metadata the function changes."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor

from ..eager_calls import EagerCalls
from ..hops import checkpoint_regions, unsupported_hop_errors
from ..rng_setters import refusing_rng_setters
from .conj_writes import ResolvingFunctionalMode


def to_functional(x: Any) -> Any:
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


def to_functional_detached(x: Any, detached: Any) -> Any:
    """``x`` wrapped as ``to_functional`` wraps it, with autograd's view of ``x`` (requires
    grad, leaf or not), around ``detached`` (``x.detach()``, made outside the tracing
    modes): functionalization's own calls below autograd then see an input that requires
    no grad, as the compiled graph's do (``as_strided_scatter`` asserts on a
    non-contiguous one that does)."""
    if not isinstance(x, torch.Tensor) or detached is x:
        return to_functional(x)
    inner = torch._to_functional_tensor(detached)
    mode = torch._subclasses.functional_tensor._detect_infra_mode(
        torch._C._TorchDispatchModeKey.FUNCTIONAL
    )
    with mode:
        torch._mirror_autograd_meta_to(x, inner)  # type: ignore[attr-defined]
        out = FunctionalTensor(inner, mode)
        torch._mirror_autograd_meta_to(inner, out)  # type: ignore[attr-defined]
    return out


def from_functional(x: Any) -> Any:
    if isinstance(x, FunctionalTensor):
        torch._sync(x)
        return torch._from_functional_tensor(x.elem)
    return x


def clone_in_callers_layout(p: Any) -> Any:
    """A copy of input ``p`` to run the function on, laid out as the caller's tensor:
    its sizes, strides and storage offset, over a copy of its storage up to its last
    element. ``p.clone()`` is dense at offset 0, so ``as_strided`` / ``as_strided_`` on
    the copy (absolute geometry: an offset, the gaps of a column slice) would read other
    elements than eager reads in the caller's storage."""
    from torch._prims_common import is_non_overlapping_and_dense_or_false as dense

    if p.storage_offset() == 0 and dense(p):
        return p.clone()  # preserve_format: the same strides over the same elements
    size, stride, offset = p.shape, p.stride(), p.storage_offset()
    end = offset + 1 + sum((n - 1) * st for n, st in zip(size, stride)) if p.numel() else offset
    return p.as_strided((end,), (1,), 0).clone().as_strided(size, stride, offset)


def layout_anchors(wrapped: Sequence[Any], indices: Any) -> dict[int, Any]:
    """Views of inputs made before the function runs, in the layout the caller's tensor
    has. An input whose data and metadata the function both changes (``x.t().add_(1);
    x.t_()``) is written back by the runtime in that layout, then given its new metadata:
    the value to write is the whole storage the input covered, which its new metadata may
    no longer show (``x.as_strided_((2, 2), ...)``), or show in another order."""
    # as_strided, not view: autograd regenerates a view whose base changed metadata in
    # place by replaying it on the base, and only absolute geometry survives
    # ``x.as_strided_((2, 2), ...)`` (a view(4, 4) of 4 elements fails)
    return {
        i: wrapped[i].as_strided(wrapped[i].shape, wrapped[i].stride(), wrapped[i].storage_offset())
        for i in indices
        if isinstance(wrapped[i], torch.Tensor)
    }


def new_value(wrapped: Sequence[Any], anchors: dict[int, Any], i: int) -> Any:
    """Input ``i``'s value after the function, in the caller's layout (see ``layout_anchors``)."""
    return anchors.get(i, wrapped[i])


def flat_call(
    fn: Callable[..., Any],
    args: Sequence[Any],
    originals: Sequence[Any] = (),
    calls: EagerCalls | None = None,
) -> list[Any]:
    """``fn(*args)`` as a list; ``originals``: the inputs ``args`` stand in for. Grad
    mode is left as it was: the one the function leaves (``torch.set_grad_enabled(False)``
    not undone) is noted as ``calls.grad_mode_after``."""
    if calls is None:
        calls = EagerCalls.for_inputs(args, originals)
    entry = torch.is_grad_enabled()
    try:
        with calls:
            out = fn(*args)
        calls.grad_mode_after = torch.is_grad_enabled()
    finally:
        torch._C._set_grad_enabled(entry)
    if isinstance(out, (tuple, list)):
        return list(out)
    return [out]


class EffectChain:
    """A chain of side-effect tokens. torch orders effectful ops (``aten._linalg_check_errors``,
    ``print``-like ops) by threading a token through ``with_effects``; the chain starts at
    an in-graph ``prims._make_token`` and its last token becomes a graph output, which
    keeps the effectful ops alive through dead-code elimination and partitioning."""

    def __init__(self) -> None:
        from torch._higher_order_ops.effects import _EffectType

        self.key = _EffectType.ORDERED
        self.mode = torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FUNCTIONAL)
        self.first: Any = None
        if self.mode is not None:
            self.first = torch.ops.prims._make_token.default()
            self.mode._tokens[self.key] = self.first

    def finish(self) -> list[Any]:
        """The chain's last token (unwrapped) if an effectful op used the chain, else []."""
        if self.mode is None:
            return []
        last = self.mode._tokens.pop(self.key, None)
        if last is None or last is self.first:
            return []
        return [from_functional(last)]


# make_fx is not thread-safe: torch.fx's tracer keeps its patcher in a module
# global (``torch.fx._symbolic_trace.CURRENT_PATCHER``) and patches
# ``nn.Module.__call__`` process-wide, so two threads tracing at once fail with
# "CURRENT_PATCHER is None". Every trace holds this lock (re-entrant: a traced
# function may call another aotgrad function).
TRACE_LOCK = threading.RLock()


@contextlib.contextmanager
def tracing_modes(fake_mode: FakeTensorMode):
    # unsupported_hop_errors is outermost: trace_errors has translated what it knows
    with (
        TRACE_LOCK,
        unsupported_hop_errors(),
        checkpoint_regions(),
        refusing_rng_setters(),
        fake_mode,
        enable_python_dispatcher(),
        ResolvingFunctionalMode(),
    ):
        yield


def in_layout_of(g: Any, now: Any, was: Any) -> Any:
    """Gradient ``g`` of a tensor laid out as ``now``, for the same storage's elements
    laid out as ``was`` (an input whose metadata the function changed before making it
    require grad: its gradient comes back in the layout the caller's tensor had, and the
    runtime's view of it takes that to the new one: ``Epilogue.change_metadata_first``)."""
    layouts = [(tuple(t.shape), tuple(t.stride()), t.storage_offset()) for t in (now, was)]
    if layouts[0] == layouts[1]:
        return g
    if any(isinstance(v, torch.SymInt) for lay in layouts for v in (*lay[0], *lay[1], lay[2])):
        return g  # (symbolic layouts: left as traced)
    span = 1 + max(
        off + sum((n - 1) * st for n, st in zip(size, stride) if n) for size, stride, off in layouts
    )
    flat = torch.as_strided_scatter(g.new_zeros(span), g, *layouts[0])
    return flat.as_strided(*layouts[1]).clone()
