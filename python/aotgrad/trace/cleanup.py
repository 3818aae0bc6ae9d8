"""Finishing a traced graph: placeholder roles, flat codegen, dead code, Python floats as
tensors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx as fx

from ..errors import mark_raised_while_tracing
from ..roles import PRIMAL, TANGENT
from ..roles import ROLE_KEY as ROLE
from ..vocab import MUTATED_KEY, SAVED_AS_INPUT_KEY, STATIC_KEY, UNREAD_KEY


def mark_roles(
    gm: fx.GraphModule,
    num_primals: int,
    mutated: Sequence[int] = (),
    static: Sequence[int] = (),
    unread: Sequence[int] = (),
) -> None:
    """Record each placeholder's role, which primals the function overwrites (their
    pre-mutation value is what the graph reads; the runtime writes the new one back),
    which are parameters/buffers (alive all step: free to save) and which eager's
    backward does not read (``UNREAD_KEY``)."""
    mutated_set, static_set, unread_set = set(mutated), set(static), set(unread)
    for i, node in enumerate(gm.graph.find_nodes(op="placeholder")):
        node.meta[ROLE] = PRIMAL if i < num_primals else TANGENT
        if i in mutated_set:
            node.meta[MUTATED_KEY] = True
        if i in static_set:
            node.meta[STATIC_KEY] = True
        if i in unread_set:
            node.meta[UNREAD_KEY] = True


def mark_saved_as_input(
    gm: fx.GraphModule, first_value: int, mutated: Sequence[int], inputs: Sequence[int]
) -> None:
    """Flag the new values (forward outputs from ``first_value`` on, one per entry of
    ``mutated``) of the written ``inputs`` that the runtime saves as views of the
    caller's tensor (``SAVED_AS_INPUT_KEY``): free to save, as a parameter is."""
    outs = gm.graph.output_node().args[0]
    wanted = set(inputs)
    for m, i in enumerate(mutated):
        node = outs[first_value + m]  # type: ignore[index]
        if i in wanted and isinstance(node, fx.Node) and node.op == "call_function":
            node.meta[SAVED_AS_INPUT_KEY] = True


def flatten_codegen(gm: fx.GraphModule) -> None:
    gm.graph._codegen = fx.graph.CodeGen()
    gm.recompile()


def _is_impure_keep_random(node: fx.Node) -> bool:
    """DCE predicate: keep mutations, drop unused random ops (their values are not observable)."""
    if node.op in ("placeholder", "output"):
        return True
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.is_mutable
    return False


def clean(gm: fx.GraphModule) -> None:
    """Drop ``aten.detach`` (autograd wraps the compiled graphs from outside, so inside
    them a detach is the identity: keeping it costs a dispatch per call and makes two
    names for one saved buffer), then dead code."""
    for node in list(gm.graph.find_nodes(op="call_function", target=torch.ops.aten.detach.default)):
        node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
        gm.graph.erase_node(node)
    gm.graph.eliminate_dead_code(is_impure_node=_is_impure_keep_random)
    gm.recompile()


def _float_symbols(shape_env: Any) -> bool:
    """Whether Dynamo passed a Python float as a symbol: the trace may have specialised
    it already (an op whose schema takes a ``float``, as batch norm's ``momentum``,
    guards it to its value), which the pass below finds in the shape environment and
    answers by making Dynamo start again with the float specialised. Without it the
    graph kept the first value it was traced with, for every later value (blind suite
    "module state": a momentum the caller changed between steps)."""
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    return any(symbol_is_type(k, SymT.FLOAT) for k in shape_env.backed_var_to_val)


def tensorify_scalars(gm: fx.GraphModule, fake_mode: Any) -> None:
    """Arithmetic on a Python float that Dynamo passes as a 0-dim tensor (read back with
    ``item()``, a SymFloat) done on the tensor instead, as torch's AOT Autograd does
    (``tensorify_python_scalars``): no backend compiles an ``item()`` of a graph input
    whose value it cannot know, and the float stays an input, not a constant. A float
    it cannot handle so makes Dynamo start again with the float specialised; in a graph
    compiled at call time, after Dynamo's compile (a first call under inference mode),
    Dynamo cannot start again: the error is the trace's, so that call runs the graph
    eagerly (a graph specialised there would keep that float for later values)."""
    from torch._dynamo.exc import TensorifyScalarRestartAnalysis
    from torch._guards import CompileContext
    from torch.fx.passes._tensorify_python_scalars import tensorify_python_scalars

    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None or not (
        any(isinstance(n.meta.get("val"), torch.SymFloat) for n in gm.graph.nodes)
        or _float_symbols(shape_env)
    ):
        return
    try:
        tensorify_python_scalars(gm, shape_env, fake_mode)
    except TensorifyScalarRestartAnalysis as e:
        if CompileContext.try_get() is None:  # not inside Dynamo's compile
            mark_raised_while_tracing(e)
        raise
    gm.recompile()
