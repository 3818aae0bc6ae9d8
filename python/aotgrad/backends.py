"""torch.compile backends: ``"aotgrad"`` (Inductor codegen) and ``"aotgrad_eager"`` (no codegen).

Registered through the ``torch_dynamo_backends`` entry point in pyproject, so
``torch.compile(model, backend="aotgrad")`` works after ``pip install aotgrad``
without importing aotgrad first. Only the entry point registers them (a second
``register_backend`` of the same name would be a duplicate).

Dynamo's graph goes through aotgrad's trace, partition and runtime
(``aotgrad.dynamo``); for ``"aotgrad"`` Inductor compiles the graphs
(``aotgrad.inductor``). When aotgrad cannot compile a graph the backend warns
once with the reason and runs that graph eagerly, unless ``strict``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from .autocast_state import autocast_state_kept
from .compile import nop
from .dynamo import aot_module_simplified
from .errors import AotgradError, raised_while_tracing
from .inductor import (
    inductor_backward,
    inductor_decompositions,
    inductor_forward,
    inductor_inference,
    inductor_partition,
)
from .partition import default_partition, min_cut_rematerialization_partition


@dataclass(frozen=True)
class BackendOptions:
    """Options of the aotgrad backends (``torch.compile(..., options={...})``)."""

    #: Raise instead of falling back to eager when a graph can't be compiled.
    strict: bool = False
    #: ``"min_cut"`` (default) or ``"default"`` (save everything the backward reads).
    partitioner: str = "min_cut"
    #: Reuse compiled graphs from the in-process and on-disk caches (``aotgrad.cache``).
    cache: bool = True

    @staticmethod
    def from_kwargs(kwargs: dict[str, Any]) -> BackendOptions:
        given = dict(kwargs.get("options") or {})
        known = {k: given.pop(k) for k in list(given) if k in _OPTION_NAMES}
        if given:
            raise AotgradError(f"unknown aotgrad backend options: {sorted(given)}")
        return BackendOptions(**known)


_OPTION_NAMES = frozenset(BackendOptions.__dataclass_fields__)


def _partitioner(options: BackendOptions) -> Callable[..., Any]:
    if options.partitioner == "min_cut":
        return min_cut_rematerialization_partition
    if options.partitioner == "default":
        return default_partition
    raise AotgradError(f"unknown partitioner {options.partitioner!r}: use 'min_cut' or 'default'")


# ----------------------------------------------------------------------- backends

_warned: set[str] = set()


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"aotgrad: running this graph eagerly: {reason}", stacklevel=3)


def _compile(
    gm: fx.GraphModule, example_inputs: Sequence[Any], kwargs: dict[str, Any], *, codegen: bool
) -> Callable[..., Any]:
    if any(isinstance(x, (list, tuple, dict)) for x in example_inputs):
        # A graph taking a list of tensors (compiled autograd's backward graph): compiled
        # over its flattened inputs, called with the list (torch's backends do the same).
        from torch._dynamo.utils import flatten_graph_inputs

        def compile_flat_inputs(g: Any, flat: Sequence[Any]) -> Callable[..., Any]:
            compiled = _compile(g, flat, kwargs, codegen=codegen)

            def boxed(args: list[Any]) -> Any:  # flatten_graph_inputs calls with one list
                return compiled(*args)

            return boxed

        return flatten_graph_inputs(gm, example_inputs, compile_flat_inputs)
    options = BackendOptions.from_kwargs(kwargs)
    partition_fn = _partitioner(options)
    try:
        if codegen:
            compiled = aot_module_simplified(
                gm,
                example_inputs,
                fw_compiler=inductor_forward,
                bw_compiler=inductor_backward,
                inference_compiler=inductor_inference,
                partition_fn=inductor_partition(partition_fn),
                decompositions=inductor_decompositions(),
                cache=options.cache,
            )
        else:
            compiled = aot_module_simplified(
                gm, example_inputs, fw_compiler=nop, partition_fn=partition_fn, cache=options.cache
            )
    except Exception as e:
        # aotgrad's verdict, or the graph's own error met while tracing it (run eagerly,
        # the graph raises it as eager does, with eager's effects: ``eager_replay``)
        if options.strict or not (isinstance(e, AotgradError) or raised_while_tracing(e)):
            raise
        _warn_once(f"{type(e).__name__}: {e}")
        return _eagerly(gm)
    return torch._dynamo.disable(compiled, reason="do not trace an aotgrad-compiled graph")


def _eagerly(gm: fx.GraphModule) -> Callable[..., Any]:
    """The graph run as Dynamo's ``backend="eager"`` runs it, but leaving the caller's
    autocast state as it was where it raises inside one of its autocast blocks (as
    eager's ``with`` does; ``autocast_state``)."""

    def run(*args: Any) -> Any:
        with autocast_state_kept():
            return gm.forward(*args)

    return run


def aotgrad_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any):
    """``torch.compile(model, backend="aotgrad")``: aotgrad + Inductor."""
    return _compile(gm, example_inputs, kwargs, codegen=True)


def aotgrad_eager_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any):
    """``torch.compile(model, backend="aotgrad_eager")``: aotgrad, graphs run without codegen."""
    return _compile(gm, example_inputs, kwargs, codegen=False)
