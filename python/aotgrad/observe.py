"""Observers of the compile pipeline: logs (``AOTGRAD_LOGS``, torch's switches) and
user callbacks.

``AOTGRAD_LOGS`` is a comma-separated list of ``joint, forward, backward,
inference, partition, timing`` (or ``all``); each prints through the
``aotgrad.logs`` logger (``logging``), at INFO. The ``aotgrad`` logger is
registered with torch's logging: ``TORCH_LOGS=aotgrad`` shows the graphs (in
torch's format) and the ``partition`` and ``timing`` channels. torch's own switches
(``TORCH_LOGS=aot_graphs,aot_joint_graph``, ``TORCH_TRACE``, ``TORCH_COMPILE_DEBUG``,
compile-time accounting) are answered by ``torch_logs``. Callbacks registered with
``on_compiled`` receive every ``CompiledArtifact`` (the report tool uses this).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch.fx as fx

from . import torch_logs

log = logging.getLogger("aotgrad")
#: ``AOTGRAD_LOGS``' channels: a child of ``aotgrad``, so that turning one channel on
#: does not turn on the graphs that ``torch_logs`` writes under ``aotgrad`` too.
channel_log = logging.getLogger("aotgrad.logs")

_CHANNELS = ("joint", "forward", "backward", "inference", "partition", "timing", "table")
#: Channels printed without ``AOTGRAD_LOGS`` naming them when ``aotgrad`` is at INFO.
_INFO_CHANNELS = ("partition", "timing")
_callbacks: list[Callable[[Any], None]] = []


def enabled_channels() -> frozenset[str]:
    """The channels named by ``AOTGRAD_LOGS`` (read on each compile, not at import)."""
    raw = os.environ.get("AOTGRAD_LOGS", "")
    names = {n.strip() for n in raw.split(",") if n.strip()}
    if "all" in names:
        return frozenset(_CHANNELS)
    return frozenset(names & set(_CHANNELS))


def _emit(channel: str, title: str, text: str | Callable[[], str]) -> None:
    """Log ``text`` (a string, or a function making it: printing a graph costs ~70 ms on
    a small GPT, so it is only made when the channel is on) through ``aotgrad.logs``:
    when ``AOTGRAD_LOGS`` names the channel, or, for the partition summary and the
    timings, when the ``aotgrad`` logger is on at INFO (``TORCH_LOGS=aotgrad``, which
    shows the graphs through ``torch_logs`` in torch's own format)."""
    if channel in enabled_channels():
        if not channel_log.hasHandlers():
            logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        channel_log.setLevel(logging.INFO)
    elif channel not in _INFO_CHANNELS or not log.isEnabledFor(logging.INFO):
        return
    if callable(text):
        text = text()
    channel_log.info("[%s] %s\n%s", channel, title, text)


def _code(gm: fx.GraphModule) -> str:
    return gm.print_readable(print_output=False)


def traced(kind: str, gm: fx.GraphModule, timings: dict[str, float]) -> None:
    torch_logs.graph(kind, gm)
    torch_logs.stage_done("trace", timings.get("trace"))
    _emit(kind, f"{kind} graph: {len(gm.graph.nodes)} nodes", lambda: _code(gm))


def partitioned(program: Any) -> None:
    torch_logs.partitioned(program)
    layout = program.layout
    _emit(
        "partition",
        "partition",
        f"saved tensors {layout.num_saved_tensors}, saved SymInts {layout.num_saved_symints}, "
        f"forward {len(program.forward.graph.nodes)} nodes, "
        f"backward {len(program.backward.graph.nodes)} nodes",
    )
    _emit("forward", "forward graph", lambda: _code(program.forward))
    _emit("backward", "backward graph", lambda: _code(program.backward))


def loaded(program: Any) -> None:
    """A program read from the disk cache (not traced nor partitioned in this process)."""
    torch_logs.loaded(program)


def compiled(artifact: Any) -> None:
    torch_logs.compiled(artifact.timings)
    timings = ", ".join(
        f"{k} {v * 1e3:.1f} ms" for k, v in artifact.timings.items() if k != "cache"
    ) + (" (graphs from the disk cache)" if "cache" in artifact.timings else "")
    _emit("timing", "stage timings", timings)
    for cb in list(_callbacks):
        cb(artifact)


def on_compiled(callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``callback(artifact)`` after every compilation; returns a function that unregisters it."""
    _callbacks.append(callback)
    return lambda: _callbacks.remove(callback)
