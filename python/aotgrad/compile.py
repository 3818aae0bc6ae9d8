"""Stage 5 — compile: hand forward / backward / inference graphs to a compiler.

Compilers follow functorch.compile's contract: ``compiler(gm, example_inputs)``
returns a callable. A callable with ``_boxed_call = True`` takes one list of
arguments (which it may clear to free memory early); any other callable is
called with positional arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.fx as fx
from torch._guards import TracingContext, detect_fake_mode, tracing
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .frame_stack import with_frame_room

Compiler = Callable[[fx.GraphModule, Sequence[Any]], Callable[..., Any]]


def nop(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> fx.GraphModule:
    """The no-op compiler: run the graph as it is (useful to check accuracy)."""
    return gm


def make_boxed_func(f: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """Wrap a positional callable in the boxed calling convention."""

    def boxed(args: list[Any]) -> Any:
        return f(*args)

    boxed._boxed_call = True  # type: ignore[attr-defined]
    return boxed


def boxed(f: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    """``f`` itself when it is already boxed, else a boxed wrapper of it. A GraphModule
    is called through its ``forward`` (no ``nn.Module.__call__`` hook dispatch per call)."""
    if getattr(f, "_boxed_call", False):
        return f
    if isinstance(f, fx.GraphModule):
        if isinstance(f, _LazyGraphModule):
            f.real_recompile()  # else every call goes through the lazy-forward trampoline
        calls = sum(1 for n in f.graph.nodes if n.op == "call_function")
        run = with_frame_room(f.forward) if calls >= ROOMY_CALLS else f.forward
        return make_boxed_func(run)
    return make_boxed_func(f)


#: Op calls from which a graph run op by op (a GraphModule, each op a Python call) runs
#: with room on the frame stack (``frame_stack``): at an unlucky call depth each of its op
#: calls maps a fresh frame chunk (the 8-block transformer's training step under
#: ``aotgrad_eager``: 31-39 ms instead of 15 at 2 depths of 60, torch's ``aot_eager``
#: likewise at 1; with the room, 14-16 ms at all 60). The room costs one 1 MiB mapping
#: per call, 60-80 µs measured: 7 % of a toy graph of 300 scalar adds, under 1 % of 3,000;
#: from this length on a graph's own run dwarfs it. Compiled code (Inductor's) calls its
#: kernels without Python frames and never needs it.
ROOMY_CALLS = 512


def fake_inputs_of(gm: fx.GraphModule) -> list[Any]:
    """The example inputs a compiler gets: the placeholders' fake values."""
    return [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]


def fake_mode_of(gm: fx.GraphModule) -> Any:
    """The fake mode of ``gm``'s placeholders' values (None when they have none)."""
    return detect_fake_mode(fake_inputs_of(gm))


def run_compiler(
    compiler: Compiler, gm: fx.GraphModule, example_inputs: Sequence[Any] | None = None
) -> Callable[[list[Any]], Any]:
    """Compile ``gm`` with ``compiler`` (for ``example_inputs``, by default its
    placeholders' fake values) and return it in the boxed convention."""
    inputs = fake_inputs_of(gm) if example_inputs is None else example_inputs
    return boxed(compiler(gm, inputs))


def compile_or_reload(
    compiler: Compiler,
    gm: fx.GraphModule,
    saved: Any = None,
    example_inputs: Callable[[], Sequence[Any]] | None = None,
) -> tuple[Callable[[list[Any]], Any], Any]:
    """``run_compiler``, or, given what an earlier process recorded for ``gm`` (``saved``),
    the compiler's ``reload`` of it (a compiler offering warm starts has ``reload(saved,
    gm, example_inputs)``, None when it cannot, and ``saved_of(compiled)``). The example
    inputs (by default the placeholders' fake values) are made only to compile. Returns
    the boxed callable and the record that reloads it (None: nothing to keep)."""
    reload = getattr(compiler, "reload", None)
    if saved is not None and reload is not None:
        made = reload(saved, gm, fake_inputs_of(gm))
        if made is not None:
            return boxed(made), saved
    inputs = fake_inputs_of(gm) if example_inputs is None else example_inputs()
    made = compiler(gm, inputs)
    saved_of = getattr(compiler, "saved_of", None)
    return boxed(made), (saved_of(made) if saved_of is not None else None)


@contextlib.contextmanager
def reporting_output_strides(gm: fx.GraphModule) -> Iterator[list[Any] | None]:
    """Collect the strides a compiler gives ``gm``'s outputs (Inductor reports them to
    the tracing context, made here under ``gm``'s fake mode when there is none; its
    layout optimisation can make a saved convolution output channels-last). Yields the
    list it fills, empty when the compiler reports nothing."""
    if TracingContext.try_get() is None:
        scope: Any = tracing(TracingContext(fake_mode_of(gm)))
    else:
        scope = contextlib.nullcontext()
    with scope, TracingContext.report_output_strides() as strides:
        yield strides


def saved_inputs_as_produced(
    backward: fx.GraphModule, forward_strides: list[Any] | None, first_saved_output: int
) -> list[Any]:
    """The backward's example inputs, its saved tensors restrided as the compiled forward
    produces them (the backward's first inputs are the forward's outputs from
    ``first_saved_output`` on): compiled for the strides it will really get."""
    inputs = fake_inputs_of(backward)
    strides = (forward_strides or [])[first_saved_output:]
    for i, (value, stride) in enumerate(zip(inputs, strides)):
        if not isinstance(value, torch.Tensor) or stride is None:
            continue
        # Compare without guessing: statically_known_true never specialises a symbol.
        if not all(statically_known_true(a == b) for a, b in zip(value.stride(), stride)):
            inputs[i] = value.as_strided(value.size(), stride, value.storage_offset())
    return inputs
