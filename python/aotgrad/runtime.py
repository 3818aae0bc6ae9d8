"""Stage 6 — runtime: compiled forward/backward wrapped in a ``torch.autograd.Function``.

The forward graph returns the user's outputs, then the new values of mutated
inputs, then the saved values (tensors, then SymInts). The autograd.Function
keeps the saved values on ``ctx`` and feeds them, with the tangents, to the
compiled backward. Input mutations are applied to the real inputs after the
graph has run, outside autograd's view (the graph itself is functional).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

BoxedFn = Callable[[list[Any]], Any]


@dataclass
class ForwardLayout:
    """How the flat outputs of a compiled forward graph are laid out."""

    num_user_outputs: int
    mutated_inputs: list[int]
    #: Indices (among user outputs) that get a tangent in the backward.
    tangent_outputs: list[int]
    num_saved_tensors: int = 0
    num_saved_symints: int = 0
    #: Effect tokens after the mutated inputs' values (not user-visible).
    num_tokens: int = 0

    @property
    def num_fwd_outputs(self) -> int:
        return self.num_user_outputs + len(self.mutated_inputs) + self.num_tokens


def _apply_mutations(args: Sequence[Any], layout: ForwardLayout, fwd: Sequence[Any]) -> None:
    if not layout.mutated_inputs:
        return
    start = layout.num_user_outputs
    new_values = fwd[start : start + len(layout.mutated_inputs)]
    with torch.no_grad():
        for i, value in zip(layout.mutated_inputs, new_values):
            target = args[i]
            if target is not value:
                target.copy_(value)


def _call(bw: BoxedFn, args: list[Any]) -> Any:
    return bw(args)


def _no_double_backward(bw: BoxedFn, args: list[Any]) -> Any:
    """Run ``bw``; under ``create_graph=True`` its results carry a grad_fn that
    refuses a second backward with a clear message instead of returning zeros."""

    class _CompiledBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *a: Any) -> Any:
            return tuple(bw(list(a[1:])))

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            raise RuntimeError(
                "aotgrad: double backward through a compiled function is not supported; "
                "compile the function with the outer backward inside it instead"
            )

    anchor = torch.empty(0, requires_grad=True)
    return _CompiledBackward.apply(anchor, *args)


def _detach_from_mutated_inputs(
    saved: Sequence[Any], mutated_args: Sequence[torch.Tensor]
) -> list[Any]:
    """The backward must see an input's value from before the function mutated it:
    a saved tensor that is (a view of) a mutated input is saved as a copy, since the
    mutation is applied to the input itself right after the forward."""
    storages = {t.untyped_storage().data_ptr() for t in mutated_args}
    return [
        s.clone()
        if isinstance(s, torch.Tensor) and s.untyped_storage().data_ptr() in storages
        else s
        for s in saved
    ]


def make_training_function(
    fw: BoxedFn, bw: BoxedFn, layout: ForwardLayout
) -> Callable[..., tuple[Any, ...]]:
    """Return ``run(*flat_tensor_args) -> flat forward outputs`` through autograd."""
    n_fwd = layout.num_fwd_outputs
    n_tensors = layout.num_saved_tensors
    tangent_outputs = layout.tangent_outputs
    mutated = layout.mutated_inputs
    nondiff = set(range(layout.num_user_outputs)) - set(tangent_outputs)
    nondiff |= set(range(layout.num_user_outputs, n_fwd))

    class CompiledFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            outs = fw(list(args))
            fwd = tuple(outs[:n_fwd])
            saved = outs[n_fwd:]
            tensors = saved[:n_tensors]
            if mutated:
                tensors = _detach_from_mutated_inputs(tensors, [args[i] for i in mutated])
            ctx.save_for_backward(*tensors)
            ctx.num_inputs = len(args)
            ctx.symints = tuple(saved[n_tensors:])
            marks = [fwd[i] for i in nondiff if isinstance(fwd[i], torch.Tensor)]
            if marks:
                ctx.mark_non_differentiable(*marks)
            return fwd

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            tangents = [grads[i].contiguous() for i in tangent_outputs]
            args = [*ctx.saved_tensors, *ctx.symints, *tangents]
            run_bw = _no_double_backward if torch.is_grad_enabled() else _call
            # One gradient per input; a trailing effect token of the backward is dropped.
            return tuple(run_bw(bw, args))[: ctx.num_inputs]

    def run(*args: Any) -> tuple[Any, ...]:
        fwd = CompiledFunction.apply(*args)
        _apply_mutations(args, layout, fwd)
        return fwd[: layout.num_user_outputs]

    return run


def make_inference_function(fw: BoxedFn, layout: ForwardLayout) -> Callable[..., tuple[Any, ...]]:
    """Return ``run(*flat_tensor_args) -> user outputs`` for a forward-only graph."""

    def run(*args: Any) -> tuple[Any, ...]:
        outs = fw(list(args))
        _apply_mutations(args, layout, outs)
        return tuple(outs[: layout.num_user_outputs])

    return run
