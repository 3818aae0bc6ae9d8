"""The forward-only pass (``InferenceGraph``): no input requires grad, or none of the
outputs has autograd history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx

from .cleanup import clean, flatten_codegen, mark_roles, tensorify_scalars
from .decompositions import with_trace_decompositions
from .failures import trace_errors
from .functional import (
    EffectChain,
    flat_call,
    from_functional,
    layout_anchors,
    new_value,
    to_functional,
    tracing_modes,
)
from .graphs import InferenceGraph, TraceMetadata


def trace_inference(
    fn: Callable[..., Any],
    fake_args: Sequence[Any],
    fake_mode: FakeTensorMode,
    metadata: TraceMetadata,
    decompositions: dict[Any, Any] | None = None,
) -> InferenceGraph:
    """Trace the forward alone. Outputs as in the joint graph's forward: the user's, the
    intermediate bases, the new values of mutated inputs. Inputs the plan keeps in the
    graph (``collect_metadata(keep_input_mutations=True)``) are written by the graph itself (``aten.copy_``)."""
    plan = metadata.plan

    def forward(primals: list[Any]) -> list[Any]:
        fp = [to_functional(p) for p in primals]
        chain = EffectChain()
        anchors = layout_anchors(fp, metadata.relaid_inputs)
        outs = flat_call(fn, fp, fake_args)
        values = [
            *outs,
            *(outs[k]._base for k in plan.intermediate_bases),
            *(new_value(fp, anchors, i) for i in plan.mutated_inputs),
        ]
        flat = [from_functional(o) for o in values]
        for i in plan.in_graph_mutations:
            primals[i].copy_(from_functional(fp[i]))
        return flat + chain.finish()

    # Under the caller's grad mode, as the function would run (torch.is_grad_enabled()).
    with tracing_modes(fake_mode), trace_errors(fn), torch.set_grad_enabled(metadata.grad_mode):
        gm = make_fx(forward, decomposition_table=with_trace_decompositions(decompositions))(
            list(fake_args)
        )
    flatten_codegen(gm)
    clean(gm)
    tensorify_scalars(gm, fake_mode)
    mark_roles(gm, len(fake_args))
    return InferenceGraph(gm, metadata, fake_mode, list(fake_args), len(metadata.outputs))
