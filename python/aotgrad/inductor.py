"""Inductor glue for the ``"aotgrad"`` backend: aotgrad's graphs as Inductor wants them.

aotgrad traces, partitions and wraps the graphs; Inductor (``compile_fx_inner``, with
Inductor's decomposition table and joint-graph passes) compiles the forward, backward
and inference graphs: C++ kernels on CPU, Triton kernels on GPU. The functions here
are what ``aotgrad.backends`` passes to ``aot_module_simplified``: compilers with
functorch's ``(gm, example_inputs)`` signature, a partitioner wrapper and the
decomposition table.
"""

from __future__ import annotations

import contextlib
import functools
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx as fx

from .compile import fake_mode_of
from .roles import is_tangent


def _device_of(inputs: Sequence[Any]) -> torch.device | None:
    for x in inputs:
        if isinstance(x, torch.Tensor):
            return x.device
    return None


def _run_joint_graph_passes(gm: fx.GraphModule, inputs: Sequence[Any]) -> fx.GraphModule:
    """Inductor's joint-graph passes (pattern rewrites, random-op replacement): required
    before ``compile_fx_inner`` sees a graph containing ``aten.rand``."""
    from torch._inductor.fx_passes.joint_graph import joint_graph_passes
    from torch._inductor.virtualized import V

    with V.set_fake_mode(fake_mode_of(gm)):
        return joint_graph_passes(gm, _device_of(inputs)) or gm


def _compile_inner(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
    """``compile_fx_inner``, letting real tensor constants through its fake propagation:
    a traced graph may read one (make_fx's ``_tensor_constant`` attributes, kept as real
    tensors, also by ``graph_records``); Inductor embeds it like any constant."""
    from unittest import mock

    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import compile_fx_inner

    _refuse_subclass_inputs(example_inputs)
    real_constants = any(
        isinstance(getattr(gm, str(n.target), None), torch.Tensor)
        and not isinstance(getattr(gm, str(n.target)), torch._subclasses.FakeTensor)
        for n in gm.graph.find_nodes(op="get_attr")
    )
    mode = detect_fake_mode(example_inputs) if real_constants else None
    _canonical_attribute_order(gm)
    allow = (
        mock.patch.object(mode, "allow_non_fake_inputs", True)
        if mode is not None
        else contextlib.nullcontext()
    )
    with allow:
        return compile_fx_inner(gm, example_inputs, **kwargs)


def _refuse_subclass_inputs(example_inputs: Sequence[Any]) -> None:
    """Inductor's generated code reads its inputs' data pointers: a tensor subclass that
    wraps other tensors (``TwoTensor``, ``DTensor``, a jagged ``NestedTensor``) has none,
    and the process would crash. aotgrad does not flatten subclasses yet: refused, so the
    backend runs the graph eagerly (``strict=True``: the error)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    from .errors import UnsupportedError

    for i, x in enumerate(example_inputs):
        if is_traceable_wrapper_subclass(x):
            raise UnsupportedError(
                f"graph input {i} is a tensor subclass ({type(x).__qualname__}): Inductor "
                "compiles plain tensors only (use backend='aotgrad_eager')"
            )


def _canonical_attribute_order(gm: fx.GraphModule) -> None:
    """Generate ``gm``'s code now and sort its attributes by name. Inductor's FX-graph
    cache key pickles the GraphModule's ``__dict__``, whose order depends on the history
    of the object (a lazily recompiled graph sets ``_code`` last); a graph built afresh
    and the same graph read back from aotgrad's disk cache must hash alike."""
    from torch.fx._lazy_graph_module import _LazyGraphModule

    if isinstance(gm, _LazyGraphModule):
        gm.real_recompile()
    ordered = sorted(gm.__dict__.items())
    gm.__dict__.clear()
    gm.__dict__.update(ordered)


def _sink_effect_tokens(gm: fx.GraphModule) -> None:
    """Effect tokens (``with_effects``'s ordering chain) as Inductor wants them, as torch's
    ``unlift_tokens`` leaves them: a chain starts at a ``prims._make_token`` in the graph
    (a token the graph takes as input is replaced by one), and the tokens it returns are
    consumed by ``prims._sink_tokens`` and returned as None (the runtime ignores them)."""
    from torch._higher_order_ops.effects import with_effects

    effects = gm.graph.find_nodes(op="call_function", target=with_effects)
    if not effects:
        return
    make, sink = torch.ops.prims._make_token.default, torch.ops.prims._sink_tokens.default
    graph = gm.graph
    for node in effects:
        token = node.args[0]
        if isinstance(token, fx.Node) and token.op == "placeholder":
            with graph.inserting_after(graph.find_nodes(op="placeholder")[-1]):
                fresh = graph.call_function(make, ())
            fresh.meta["val"] = token.meta.get("val")
            token.replace_all_uses_with(fresh)
    output = graph.output_node()
    outs = list(output.args[0])  # type: ignore[arg-type]

    def is_token(n: Any) -> bool:
        if not isinstance(n, fx.Node) or n.op != "call_function":
            return False
        if n.target is make:
            return True
        return n.target is operator.getitem and n.args[0] in effects and n.args[1] == 0

    tokens = [n for n in outs if is_token(n)]
    if tokens:
        with graph.inserting_before(output):
            graph.call_function(sink, (tokens,))
        output.args = (tuple(None if is_token(n) else n for n in outs),)
        visible = output.meta.get("user_visible_output_idxs")
        if visible is not None:
            output.meta["user_visible_output_idxs"] = [i for i in visible if not is_token(outs[i])]
    gm.recompile()


def _mark_user_visible(gm: fx.GraphModule, count: int | None) -> None:
    out = gm.graph.output_node()
    args = list(out.args[0])  # type: ignore[arg-type]
    n = len(args) if count is None else count
    out.meta["user_visible_output_idxs"] = [i for i in range(n) if isinstance(args[i], fx.Node)]


#: Higher-order ops Inductor (torch 2.15, CPU) compiles to wrong gradients: the joint
#: graph aotgrad hands it is right (backend="aotgrad_eager" matches eager) but
#: backend="inductor" gives the same wrong answer. Refused, so the graph runs eagerly.
_INDUCTOR_MISCOMPILED_HOPS = frozenset({"scan"})


def _refuse_miscompiled_hops(joint: fx.GraphModule) -> None:
    from torch._ops import HigherOrderOperator

    from .errors import UnsupportedError

    for node in joint.graph.nodes:
        target = node.target
        if isinstance(target, HigherOrderOperator) and target.name() in _INDUCTOR_MISCOMPILED_HOPS:
            raise UnsupportedError(
                f"higher-order op {target.name()} is not supported with Inductor: torch "
                f"{torch.__version__}'s Inductor computes wrong gradients for it "
                "(use backend='aotgrad_eager')"
            )


def inductor_partition(partition_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run Inductor's joint-graph passes, then ``partition_fn``."""

    @functools.wraps(partition_fn)
    def partition(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any):
        _refuse_miscompiled_hops(joint)
        flat_inputs = [x for group in joint_inputs for x in group]
        joint = _run_joint_graph_passes(joint, flat_inputs)
        fw, bw = partition_fn(joint, joint_inputs, **kwargs)
        _mark_user_visible(fw, kwargs.get("num_fwd_outputs"))
        return fw, bw

    return partition


# ----------------------------------------------------------------- warm start
#
# A graph aotgrad's disk cache brings back was compiled by an earlier process: Inductor's
# FX-graph cache holds its code under a key that hashes the graph (most of a warm
# start's own time). Kept with aotgrad's entry (``saved_compilation``), the key loads the
# code directly (``reload``), as torch's AOT Autograd cache does. aotgrad's key already
# covers the graph (the Dynamo graph, its inputs, aotgrad's code and torch's version);
# what else shapes Inductor's code (its config, deterministic and matmul settings, the
# machine) is compared through the key Inductor gives an empty graph.


_environments: dict[str, str] = {}


def _environment() -> str:
    """Inductor's key of an empty graph: what shapes its code besides the graph. Computed
    once per state of what it reads that can change within a process (its config, the
    deterministic, dtype, thread and matmul settings); torch and the machine cannot."""
    import torch._inductor.config as config
    from torch._inductor.codecache import compiled_fx_graph_hash

    state = repr(
        (
            sorted(config.get_config_copy().items(), key=lambda kv: kv[0]),
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            torch.get_default_dtype(),
            torch.get_num_threads(),
            torch.get_float32_matmul_precision(),
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
        )
    )
    if state not in _environments:
        graph = fx.Graph()
        graph.output(())
        empty = fx.GraphModule(torch.nn.Module(), graph)
        _environments[state] = compiled_fx_graph_hash(empty, [], {}, [])[0]
    return _environments[state]


def saved_compilation(compiled: Any) -> dict[str, Any] | None:
    """What reloads ``compiled`` (a ``CompiledFxGraph``) in another process: its FX-graph
    cache key, the guards it was saved under, the environment; None when Inductor cached
    nothing (a graph without calls, caches off)."""
    key = getattr(compiled, "_fx_graph_cache_key", None)
    if not isinstance(key, str):
        return None
    return {
        "key": key,
        "debug_lines": list(getattr(compiled, "_fx_graph_cache_debug_lines", None) or []),
        "guards_expr": getattr(compiled, "guards_expr", None),
        "environment": _environment(),
    }


def _reload(
    saved: dict[str, Any], gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
) -> Any | None:
    """The code ``saved`` names, loaded from Inductor's FX-graph cache and finished as
    ``compile_fx_inner`` finishes a cache hit; None (compile instead) when the cache is
    off, the environment changed or the entry is gone."""
    import torch._inductor.config as config
    from torch._guards import TracingContext, tracing
    from torch._inductor.codecache import FxGraphCache
    from torch._inductor.output_code import CompiledFxGraphConstantsWithGm
    from torch._inductor.utils import BoxedBool

    if config.force_disable_caches or not config.fx_graph_cache:
        return None
    if saved.get("environment") != _environment():
        return None
    if not os.path.isdir(FxGraphCache._get_tmp_dir_for_key(saved["key"])):
        return None  # not in this Inductor cache (a fresh one): compiled, one miss counted
    graph_kwargs: dict[str, Any] = {
        "cudagraphs": BoxedBool(config.triton.cudagraphs),
        "static_input_idxs": (),
        "is_backward": False,
        "graph_id": None,
        "cpp_wrapper": False,
        "fx_wrapper": False,
        "is_inference": False,
        "boxed_forward_device_index": None,
        "layout_opt": None,
        "extern_node_serializer": None,
        **kwargs,
    }
    constants = CompiledFxGraphConstantsWithGm(gm)
    scope = tracing(TracingContext(fake_mode_of(gm))) if TracingContext.try_get() is None else None
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.utils._python_dispatch._disable_current_modes())
        if scope is not None:
            stack.enter_context(scope)
        graph, _ = FxGraphCache.load_with_key(
            saved["key"],
            saved["debug_lines"],
            example_inputs,
            local=True,
            remote_cache=None,
            is_backward=graph_kwargs["is_backward"],
            constants=constants,
            evaluate_guards=lambda expr, _hints: expr == saved["guards_expr"],
        )
        if graph is None:
            return None
        graph.post_compile(example_inputs, constants, graph_kwargs)
    policy = config.cudagraph_policy
    return graph if policy is None else policy.wrap_output(graph)


def _backward_kwargs(gm: fx.GraphModule) -> dict[str, Any]:
    placeholders = gm.graph.find_nodes(op="placeholder")
    num_saved = sum(1 for p in placeholders if not is_tangent(p))
    return {"is_backward": True, "static_input_idxs": list(range(num_saved))}


def inductor_forward(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    if "user_visible_output_idxs" not in gm.graph.output_node().meta:
        _mark_user_visible(gm, None)
    _sink_effect_tokens(gm)
    return _compile_inner(gm, example_inputs)


def inductor_inference(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    gm = _run_joint_graph_passes(gm, example_inputs)
    _mark_user_visible(gm, None)
    _sink_effect_tokens(gm)
    return _compile_inner(gm, example_inputs, is_inference=True)


def inductor_backward(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    kwargs = _backward_kwargs(gm)
    gm.graph.output_node().meta["user_visible_output_idxs"] = []
    _sink_effect_tokens(gm)
    return _compile_inner(gm, example_inputs, **kwargs)


# The compilers' warm-start hooks (``compile.compile_or_reload``).
for _compiler in (inductor_forward, inductor_inference, inductor_backward):
    _compiler.saved_of = saved_compilation  # type: ignore[attr-defined]
inductor_forward.reload = _reload  # type: ignore[attr-defined]
inductor_inference.reload = functools.partial(_reload, is_inference=True)  # type: ignore[attr-defined]
inductor_backward.reload = lambda saved, gm, inputs: _reload(  # type: ignore[attr-defined]
    saved, gm, inputs, **_backward_kwargs(gm)
)


@functools.cache
def inductor_decompositions() -> dict[Any, Any]:
    # Some of Inductor's decompositions (max_pool2d's) call into torch._inductor.lowering,
    # which torch's own backend has imported by then (through compile_fx): import it too,
    # else the first such graph of a process fails to trace.
    import torch._inductor.lowering  # noqa: F401
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()
