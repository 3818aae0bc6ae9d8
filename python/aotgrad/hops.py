"""Higher-order ops (HOPs) while tracing: what aotgrad does with them, and its error when it can't.

HOPs reach the tracer from Dynamo graphs (``tag_activation_checkpoint``, ``cond``,
``wrap``, ``invoke_subgraph``, ``map``, ``scan``, ``while_loop``, ...) with their
bodies as ``get_attr`` submodules. ``fx.Interpreter`` calls each with its body;
the HOP's own dispatch rules then trace it under aotgrad's modes:

* ``tag_activation_checkpoint`` is inlined at the Autograd key: its body runs under
  a selective-checkpoint mode that tags every forward node with
  ``meta["recompute"]`` (a ``CheckpointPolicy``) and ``meta["ac_graph_id"]`` (its
  region). ``aotgrad.table`` turns the tags into ``MUST_SAVE`` / ``MUST_RECOMPUTE``
  flags and the id into the ``region`` column; the Rust partitioners honour them
  and ``aotgrad.partition.reorder`` recomputes each region just before the backward
  needs it.
* ``cond``, ``invoke_subgraph``, ``map``, ``scan``, ``while_loop`` stay one node in
  the joint graph (``higher_order.<name>`` in the node table), with traced,
  functionalized subgraphs as ``get_attr`` nodes: a forward node, and a backward
  node whose subgraph is the branch's joint (it recomputes the branch's forward).
  ``invoke_subgraph`` regions are then partitioned once each and stitched in
  (``aotgrad.partition.regions``): the backward reads what the forward saved.

``torch.utils.checkpoint.checkpoint(use_reentrant=False)`` called directly in a
function traced without Dynamo (``aot_function``, ``aot_module``) is routed the same
way by ``checkpoint_regions``: each call becomes a region with its own id and,
unless the caller gave a selective policy, every op in it is tagged
``PREFER_RECOMPUTE``. (Untagged, torch's checkpoint would record a second copy of
the region in the backward, which common-subexpression elimination merges back
into the forward's: the region would be saved, not recomputed.)

A HOP with no rule for a dispatch key or mode aotgrad traces through (no autograd
rule, no ``FunctionalTensorMode`` rule) fails inside its dispatch;
``unsupported_hop_errors`` turns that failure into an
:class:`~aotgrad.errors.UnsupportedError` naming the op, so callers get an aotgrad
error (and the backends fall back to eager) rather than a torch internal error. A
HOP whose autograd rule is torch's deferred "Autograd not implemented" error would
instead trace to ``None`` gradients; ``refuse_deferred_autograd_errors`` refuses it
(eager raises there too), so it is never a wrong result.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
import torch.utils.checkpoint as torch_checkpoint
from torch._ops import HigherOrderOperator
from torch._subclasses.functional_tensor import FunctionalTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._pytree import tree_flatten, tree_map

from .errors import AotgradError, UnsupportedError, run_eagerly


def failing_hop(tb: TracebackType | None) -> HigherOrderOperator | None:
    """The innermost higher-order op being called in traceback ``tb``, if any."""
    found = None
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if isinstance(owner, HigherOrderOperator):
            found = owner
        tb = tb.tb_next
    return found


_OBJECT_REPR = re.compile(r"<(?:[\w]+\.)*(\w+) object at 0x[0-9a-fA-F]+>")


def _reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message, without torch's hint and without object
    addresses (the backends warn once per distinct reason)."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    line = _OBJECT_REPR.sub(r"\1", line).split("Hint:")[0].rstrip(" .")
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


#: The message of torch's ``autograd_not_implemented`` (a HOP with no autograd rule),
#: raised when the backward reaches the op, outside its dispatch.
_NO_AUTOGRAD = re.compile(r"Autograd not implemented for (\S+)")


#: torch's reentrant checkpoint refusing ``autograd.grad`` in its backward.
_REENTRANT = "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad()"


def _is_hop_failure(exc: Exception) -> bool:
    """Errors a HOP's dispatch raises about the HOP itself (no rule for a key or mode,
    a body it refuses), not errors of the code inside it (which keep their type)."""
    module = type(exc).__module__
    return isinstance(exc, NotImplementedError) or module.startswith(
        ("torch._higher_order_ops", "torch._dynamo")
    )


def unsupported_hop_error(exc: Exception) -> UnsupportedError | None:
    """The ``UnsupportedError`` naming the higher-order op ``exc`` comes from (or the
    reentrant checkpoint that raised it), if it does."""
    hop = failing_hop(exc.__traceback__)
    if hop is not None and _is_hop_failure(exc):
        return UnsupportedError(f"higher-order op {hop.name()} is not supported: {_reason(exc)}")
    if isinstance(exc, RuntimeError) and _REENTRANT in str(exc):
        return run_eagerly(  # (eager runs it)
            UnsupportedError(
                "checkpoint(use_reentrant=True) cannot be traced (it refuses autograd.grad, "
                "which tracing the backward uses): run eagerly; pass use_reentrant=False, or "
                "compile with torch.compile (whose checkpoint op traces the non-reentrant "
                "form), to compile it"
            )
        )
    no_grad = _NO_AUTOGRAD.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if no_grad is not None:
        return UnsupportedError(
            f"higher-order op {no_grad.group(1)} is not supported: it has no autograd rule, "
            "so its inputs' gradients cannot be traced"
        )
    return None


@contextlib.contextmanager
def unsupported_hop_errors() -> Iterator[None]:
    """Re-raise a higher-order op's failure while tracing (``unsupported_hop_error``) as
    an ``UnsupportedError`` naming the op; other errors pass through unchanged."""
    try:
        yield
    except AotgradError:
        raise
    except Exception as e:
        err = unsupported_hop_error(e)
        if err is None:
            raise
        raise err from e


#: ``name()`` of the autograd node torch's deferred errors install (``DelayedError``).
_ERROR_NODE = "torch::autograd::Error"


def refuse_deferred_autograd_errors(outputs: Sequence[Any]) -> None:
    """Raise ``UnsupportedError`` if the autograd graph of ``outputs`` holds a deferred
    "Autograd not implemented" error: an op (a HOP under torch's
    ``autograd_not_implemented``) whose backward raises.

    Eager ``backward()`` runs that node and raises; ``autograd.grad`` over the inputs
    only runs nodes on a path to them, and the error node's path ends at a detached
    copy, so the trace would silently give ``None`` gradients instead.
    Complexity: ``O(nodes + edges)`` of the autograd graph.
    """
    stack = [o.grad_fn for o in outputs if isinstance(o, torch.Tensor)]
    seen: set[Any] = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        # (a custom Function's node is its ctx, whose attributes are the user's: ``name``
        # may be a string there; it is never torch's error node)
        custom = isinstance(node, torch.autograd.function.BackwardCFunction)
        if not custom and node.name() == _ERROR_NODE:
            # It raises its message whatever the gradient. FunctionalTensor's own
            # wrappers carry such nodes too ("Cannot backprop through mirrored meta");
            # only torch's "Autograd not implemented for <op>" is an op's refusal.
            try:
                node(None)
            except RuntimeError as e:
                err = unsupported_hop_error(RuntimeError(str(e)))
                if err is not None:
                    raise err from None
        stack.extend(fn for fn, _ in node.next_functions)


# ------------------------------------------------------------ checkpoint without Dynamo

_IMPL_NAME = "_checkpoint_without_reentrant_generator_impl"
_region_ids = itertools.count(1 << 20)  # apart from Dynamo's ids (counted from 0)
_patch_lock = threading.Lock()
_patch_depth = 0
_active = threading.local()


def _prefer_recompute(ctx: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    return torch_checkpoint.CheckpointPolicy.PREFER_RECOMPUTE


class _SnapshotCaching(torch_checkpoint._CachingTorchDispatchMode):
    """The selective-checkpoint forward mode of the default (recompute-everything)
    policy. Under tracing it caches every op's output for the recompute to read; a
    later in-place write to one (``b = a * 2; b.sin_()``) made torch raise "Tensor
    cached during selective activation checkpoint has been mutated" where eager's plain
    checkpoint runs. Before such a write, the entries it would change take a copy of
    their value (a ``clone`` in the graph): the recompute reads the value each op made,
    as eager's recompute computes it; views are made again in the recompute (of the
    recomputed tensors, which the writes through them then change: ``_WritingCached``)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        written = _written_args(func, args, kwargs or {})
        if written:
            self._snapshot(written)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        key = torch_checkpoint._sac_storage_key(func, args)
        entries = self.storage.get(key, {})
        idx = self.func_counter[key] - 1
        if getattr(func, "is_view", False) and idx in entries:
            # a view is made again in the recompute, of the recomputed tensor: a write
            # through it then writes that tensor, as in eager
            entries[idx] = _ViewEntry(entries[idx])
        elif written:
            # what the write returns is the written tensor, whose count autograd moves
            # once the op returns: its entry is that tensor as written (no count to check)
            for w in tree_flatten(entries.get(idx))[0]:
                if hasattr(w, "version"):
                    w.version = None
        return out

    def _snapshot(self, written: list[Any]) -> None:
        refs = {_storage_ref(t) for t in written}
        for entries in self.storage.values():
            for entry in entries.values():
                for w in tree_flatten(entry)[0]:
                    val = getattr(w, "val", None)
                    if isinstance(val, torch.Tensor) and _storage_ref(val) in refs:
                        w.val = val.clone()
                        w.version = w.val._version


def _storage_ref(t: torch.Tensor) -> Any:
    """What ``t``'s bytes are: a functional tensor's wrapper has a storage of its own,
    its functional value the one its aliases share."""
    return StorageWeakRef(getattr(t, "elem", t).untyped_storage())


class _WritingCached(torch_checkpoint._CachedTorchDispatchMode):
    """The recompute mode paired with ``_SnapshotCaching``: an in-place op returns its
    cached result, which is the written tensor as written in the forward; the tensor the
    recompute holds is written with it (else what the region computes after the write
    would read the value from before it)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        key = torch_checkpoint._sac_storage_key(func, args)
        entries = self.storage.get(key, {})
        idx = self.func_counter[key]
        entry = entries.get(idx)
        if isinstance(entry, _ViewEntry):
            self.func_counter[key] += 1
            entries[idx] = torch_checkpoint._CONSUMED
            if all(isinstance(t, FunctionalTensor) for t in _tensors(args, kwargs)):
                return func(*args, **kwargs)
            # a view of what the recompute reads from elsewhere (a module's parameter,
            # under ``aot_module``): the forward's
            return tree_map(lambda w: w.get_val(True), entry.cached)
        written = _written_args(func, args, kwargs)
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if len(written) == 1 and isinstance(out, torch.Tensor) and out is not written[0]:
            written[0].copy_(out)
        return out


class _ViewEntry:
    """A view's entry in the selective-checkpoint cache: made again in the recompute."""

    def __init__(self, cached: Any) -> None:
        self.cached = cached


def _tensors(args: Any, kwargs: dict) -> list[Any]:
    return [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]


def _written_args(func: Any, args: Any, kwargs: dict) -> list[Any]:
    """The tensors ``func`` writes (its schema's mutable arguments)."""
    schema = getattr(func, "_schema", None)
    if schema is None or not schema.is_mutable:
        return []
    written = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        value = args[i] if i < len(args) else kwargs.get(a.name)
        written += [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]
    return written


def _default_contexts(*_: Any, **__: Any) -> Any:
    """The recompute-everything contexts (forward mode: ``_SnapshotCaching``, given by
    the ``_snapshotting`` patch while tracing)."""
    return torch_checkpoint.create_selective_checkpoint_contexts(_prefer_recompute)


#: The recompute-everything policies: aotgrad's, and Dynamo's for a plain checkpoint
#: (``torch._higher_order_ops.wrap``).
_RECOMPUTE_ALL = ("_prefer_recompute", "_always_prefer_recompute")


def _snapshotting(original: Callable[..., Any]) -> Callable[..., Any]:
    """``create_selective_checkpoint_contexts`` whose forward mode, for a
    recompute-everything policy in a tracing thread, is ``_SnapshotCaching``."""

    @functools.wraps(original)
    def contexts(policy: Any, *args: Any, **kwargs: Any) -> Any:
        forward, recompute = original(policy, *args, **kwargs)
        name = getattr(policy, "__name__", "")
        if getattr(_active, "on", False) and name in _RECOMPUTE_ALL:
            forward.__class__ = _SnapshotCaching
            recompute.__class__ = _WritingCached
        return forward, recompute

    return contexts


def _tagged_contexts(context_fn: Callable[[], Any], region: int) -> Callable[[], Any]:
    """``context_fn``, or the recompute-everything policy for the default one, with
    ``region`` as the selective-checkpoint mode's region id where it has none."""
    if context_fn is torch_checkpoint.noop_context_fn:
        context_fn = _default_contexts

    def contexts() -> Any:
        forward, recompute = context_fn()
        if getattr(forward, "ac_graph_id", False) is None:
            forward.ac_graph_id = region
        return forward, recompute

    return contexts


def _region_impl(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def impl(fn: Any, args: Any, kwargs: Any, **options: Any) -> Any:
        if not getattr(_active, "on", False):
            yield from original(fn, args, kwargs, **options)
            return
        default = torch_checkpoint.noop_context_fn
        options["context_fn"] = _tagged_contexts(
            options.get("context_fn", default), next(_region_ids)
        )
        # (the user's ``preserve_rng_state=False``: Dynamo's checkpoint op passes False
        # always, its random ops being functionalized)
        if options.get("preserve_rng_state", True) is False and not _from_dynamo(fn):
            fn = _refusing_draws(fn)
        # the mode writes its tags through current_meta: keep it for this region only
        with fx_traceback.preserve_node_meta():
            yield from original(fn, args, kwargs, **options)

    return impl


#: Random ops by name (torch functions, tensor methods, ``F`` functions).
_DRAWS = frozenset(
    [
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "randint_like",
        "randperm",
        "bernoulli",
        "bernoulli_",
        "multinomial",
        "normal",
        "normal_",
        "uniform_",
        "exponential_",
        "geometric_",
        "cauchy_",
        "log_normal_",
        "random_",
        "poisson",
        "rrelu",
        "rrelu_",
        "dropout",
        "dropout_",
        "alpha_dropout",
        "feature_alpha_dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "native_dropout",
        "gumbel_softmax",
    ]
)


class _DrawWatch(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") in _DRAWS:
            raise run_eagerly(
                UnsupportedError(
                    "checkpoint(preserve_rng_state=False) around random ops: eager's backward "
                    "recomputes them with new draws from the global generator, a compiled "
                    "backward reuses the forward's (run eagerly; pass preserve_rng_state=True "
                    "to compile it)"
                )
            )
        return func(*args, **(kwargs or {}))


def _from_dynamo(fn: Any) -> bool:
    """Whether ``fn`` is the body ``tag_activation_checkpoint`` checkpoints."""
    module = getattr(fn, "__module__", None) or type(getattr(fn, "__self__", None)).__module__
    return module in ("torch._higher_order_ops.wrap", "torch.fx.interpreter")


def _refusing_draws(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, refusing to trace a random op (``preserve_rng_state=False``)."""

    @functools.wraps(fn)
    def watched(*args: Any, **kwargs: Any) -> Any:
        with _DrawWatch():
            return fn(*args, **kwargs)

    return watched


@contextlib.contextmanager
def checkpoint_regions() -> Iterator[None]:
    """While tracing in this thread, make each non-reentrant checkpoint a tagged region
    (see the module docs). Other threads' checkpoints run unchanged."""
    global _patch_depth
    if not hasattr(torch_checkpoint, _IMPL_NAME):  # another torch: checkpoints run untagged
        yield
        return
    with _patch_lock:
        if _patch_depth == 0:
            original = getattr(torch_checkpoint, _IMPL_NAME)
            setattr(torch_checkpoint, _IMPL_NAME, _region_impl(original))
            sac = torch_checkpoint.create_selective_checkpoint_contexts
            torch_checkpoint.create_selective_checkpoint_contexts = _snapshotting(sac)
        _patch_depth += 1
    was = getattr(_active, "on", False)
    _active.on = True
    try:
        yield
    finally:
        _active.on = was
        with _patch_lock:
            _patch_depth -= 1
            if _patch_depth == 0:
                patched = getattr(torch_checkpoint, _IMPL_NAME)
                setattr(torch_checkpoint, _IMPL_NAME, patched.__wrapped__)
                sac = torch_checkpoint.create_selective_checkpoint_contexts
                torch_checkpoint.create_selective_checkpoint_contexts = sac.__wrapped__
