"""Stage 5 — compile: hand forward / backward / inference graphs to a compiler.

Compilers follow functorch.compile's contract: ``compiler(gm, example_inputs)``
returns a callable. A callable with ``_boxed_call = True`` takes one list of
arguments (which it may clear to free memory early); any other callable is
called with positional arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch.fx as fx
from torch.fx._lazy_graph_module import _LazyGraphModule

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
        return make_boxed_func(f.forward)
    return make_boxed_func(f)


def fake_inputs_of(gm: fx.GraphModule) -> list[Any]:
    """The example inputs a compiler gets: the placeholders' fake values."""
    return [n.meta.get("val") for n in gm.graph.find_nodes(op="placeholder")]


def run_compiler(compiler: Compiler, gm: fx.GraphModule) -> Callable[[list[Any]], Any]:
    """Compile ``gm`` with ``compiler`` and return it in the boxed convention."""
    return boxed(compiler(gm, fake_inputs_of(gm)))
