"""aotgrad's graphs, partition and timings through torch's own debugging switches.

A ``torch.compile`` user looks inside a compilation with torch's switches; aotgrad
answers each of them the way torch's AOT Autograd does (``observe`` calls in here
once per graph; nothing below is built unless its switch is on):

==============================  ===========================================================
switch                          what aotgrad adds
==============================  ===========================================================
``TORCH_LOGS=aot_joint_graph``  the joint graph, as torch prints its own (``Joint graph``)
``TORCH_LOGS=aot_graphs``       the forward and backward graphs after partitioning, or the
                                inference graph
``TORCH_LOGS=aotgrad``          aotgrad's own log (registered with ``torch._logging``):
                                all of the graphs above, the partition summary and the
                                stage timings (``AOTGRAD_LOGS`` picks channels without
                                torch's switches)
``TORCH_TRACE=dir`` (tlparse)   structured-trace entries ``aot_joint_graph``,
                                ``aot_forward_graph``, ``aot_backward_graph``,
                                ``aot_inference_graph`` (tlparse's names for AOT graphs)
                                and the artifacts ``aotgrad_partition`` and
                                ``aotgrad_stage_timings`` (JSON)
``TORCH_COMPILE_DEBUG=1``       the same files under ``<debug dir>/aotgrad/aot_<n>/``
                                (and the structured trace in ``<debug dir>/tlparse``, as
                                torch puts it there)
(always)                        the stage timings in torch's compile-time accounting:
                                ``torch._dynamo.utils.compile_times()`` rows
                                ``aotgrad_trace`` / ``aotgrad_partition`` /
                                ``aotgrad_compile``, and chromium events in the trace
==============================  ===========================================================

``n`` numbers aotgrad's compilations in this process; the log headers carry it
(``===== Forward graph (aotgrad) 3 =====``) so that logs, trace and folder line up.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
from torch._logging import _internal as torch_logging
from torch._logging import getArtifactLogger, trace_structured
from torch.fx._utils import lazy_format_graph_code

#: Stage names of ``CompiledArtifact.timings`` that are durations (``cache`` is a flag).
STAGES = ("trace", "partition", "compile")

_GRAPH_TITLES = {
    "joint": "Joint graph (aotgrad)",
    "forward": "Forward graph (aotgrad)",
    "backward": "Backward graph (aotgrad)",
    "inference": "Forward graph (aotgrad, inference)",
}


def _inside_torch_log_init() -> bool:
    """Whether torch is parsing ``TORCH_LOGS`` right now (``TORCH_LOGS=aotgrad`` at torch's
    import walks aotgrad's packages, which imports this module)."""
    code = torch_logging._init_logs.__code__
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _register() -> None:
    """Register the ``aotgrad`` log with torch's logging. torch parsed ``TORCH_LOGS`` when
    it was imported, before aotgrad was: when the settings ask for anything aotgrad
    writes, they are applied again, so that the ``aotgrad`` logger gets torch's handler
    (what ``torch._logging.set_logs`` does after each change)."""
    torch_logging.register_log("aotgrad", "aotgrad")
    logger = logging.getLogger("aotgrad")
    if logger.level == logging.NOTSET:  # as torch's logs: quiet unless asked for
        logger.setLevel(logging.WARNING)
    if _inside_torch_log_init():
        return
    state = torch_logging.log_state
    wanted = os.environ.get("TORCH_LOGS") or any(
        state.is_artifact_enabled(a) for a in ("aot_graphs", "aot_joint_graph")
    )
    if wanted:
        torch_logging._init_logs()


_register()
_joint_log = getArtifactLogger(__name__, "aot_joint_graph")
_graphs_log = getArtifactLogger(__name__, "aot_graphs")
_ids = itertools.count()
_current = threading.local()


def _compilation_id() -> int:
    return getattr(_current, "id", -1)


def _readable(gm: fx.GraphModule) -> str:
    return gm.print_readable(
        print_output=False, include_stride=True, include_device=True, expanded_def=True
    )


def _debug_dir() -> Path | None:
    """``<torch's debug dir>/aotgrad/aot_<n>`` under ``TORCH_COMPILE_DEBUG=1``, else None."""
    if os.environ.get("TORCH_COMPILE_DEBUG", "0") != "1":
        return None
    from torch._dynamo.utils import get_debug_dir

    path = Path(get_debug_dir()) / "aotgrad" / f"aot_{_compilation_id()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _artifact(name: str, payload: Callable[[], Any]) -> None:
    """A JSON artifact in the structured trace and the debug folder."""
    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": name, "encoding": "json"},
        payload_fn=lambda: json.dumps(payload(), indent=1),
    )
    folder = _debug_dir()
    if folder is not None:
        (folder / f"{name}.json").write_text(json.dumps(payload(), indent=1))


def _tracing() -> bool:
    """Whether ``TORCH_TRACE`` (structured trace) is on."""
    return bool(torch_logging.trace_log.handlers)


def graph(kind: str, gm: fx.GraphModule, *, from_cache: bool = False) -> None:
    """One of aotgrad's graphs (``joint``, ``forward``, ``backward``, ``inference``). A
    ``joint`` or ``inference`` graph opens a new compilation (its number ``n``)."""
    if kind in ("joint", "inference"):
        _current.id = next(_ids)
    n = _compilation_id()
    title = _GRAPH_TITLES[kind] + (" (from cache)" if from_cache else "")
    log = _joint_log if kind == "joint" else _graphs_log
    log.info(
        "%s",
        lazy_format_graph_code(
            title, gm, n, include_stride=True, include_device=True, colored=True
        ),
    )
    trace_structured(f"aot_{kind}_graph", payload_fn=lambda: _readable(gm))
    folder = _debug_dir()
    if folder is not None:
        (folder / f"{kind}.py").write_text(_readable(gm))


def _saved_values(program: Any) -> list[dict[str, Any]]:
    layout = program.layout
    n_saved = layout.num_saved_tensors + layout.num_saved_symints
    outputs = list(program.forward.graph.output_node().args[0])
    rows = []
    for node in outputs[len(outputs) - n_saved :] if n_saved else []:
        val = node.meta.get("val") if isinstance(node, fx.Node) else None
        row: dict[str, Any] = {"name": getattr(node, "name", str(node))}
        if isinstance(val, torch.Tensor):
            row["shape"] = [str(s) for s in val.shape]
            row["dtype"] = str(val.dtype).removeprefix("torch.")
            if all(isinstance(s, int) for s in val.shape):
                row["bytes"] = val.numel() * val.element_size()
        else:
            row["symint"] = str(val)
        rows.append(row)
    return rows


def partition_summary(program: Any) -> dict[str, Any]:
    """What the partitioner decided, as plain data (the ``aotgrad_partition`` artifact)."""
    layout = program.layout
    saved = _saved_values(program)
    return {
        "aot_id": _compilation_id(),
        "saved_tensors": layout.num_saved_tensors,
        "saved_symints": layout.num_saved_symints,
        "saved_bytes": sum(r.get("bytes", 0) for r in saved),
        "forward_nodes": len(program.forward.graph.nodes),
        "backward_nodes": len(program.backward.graph.nodes),
        "saved": saved,
    }


def partitioned(program: Any) -> None:
    graph("forward", program.forward)
    graph("backward", program.backward)
    _artifact("aotgrad_partition", lambda: partition_summary(program))
    stage_done("partition", program.timings.get("partition"))


def loaded(program: Any) -> None:
    """A program from aotgrad's disk cache: its graphs, as torch logs a cache hit's."""
    if _graphs_log.isEnabledFor(logging.INFO) or _debug_dir() is not None or _tracing():
        program.ensure_values()  # the graphs are printed with their shapes
    if program.training:
        _current.id = next(_ids)
        graph("forward", program.forward, from_cache=True)
        graph("backward", program.backward, from_cache=True)
    else:
        graph("inference", program.forward, from_cache=True)


def stage_done(stage: str, seconds: float | None) -> None:
    """Enter a stage that has just ended, ``seconds`` long, into torch's compile-time
    accounting (``compile_times()``) and as a chromium event (tlparse's trace view)."""
    if seconds is None:
        return
    from torch._dynamo.utils import compilation_time_metrics, get_chromium_event_logger

    key = f"aotgrad_{stage}"
    compilation_time_metrics.setdefault(key, []).append(seconds)
    end = time.time_ns()
    start = end - int(seconds * 1e9)
    chromium = get_chromium_event_logger()
    chromium.log_event_start(key, start, {"aot_id": _compilation_id()})
    chromium.log_event_end(key, end, {}, start, False)


def compiled(timings: dict[str, float]) -> None:
    stage_done("compile", timings.get("compile"))
    durations = {k: v for k, v in timings.items() if k in STAGES}
    _artifact("aotgrad_stage_timings", lambda: {"aot_id": _compilation_id(), **durations})
