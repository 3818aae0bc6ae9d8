"""Observers of the compile pipeline: logs (``AOTGRAD_LOGS``) and user callbacks.

``AOTGRAD_LOGS`` is a comma-separated list of ``joint, forward, backward,
inference, partition, timing`` (or ``all``); each prints through the
``aotgrad`` logger (``logging``), at INFO. Callbacks registered with
``on_compiled`` receive every ``CompiledArtifact`` (the report tool uses this).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch.fx as fx

log = logging.getLogger("aotgrad")

_CHANNELS = ("joint", "forward", "backward", "inference", "partition", "timing", "table")
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
    a small GPT, so it is only made when the channel is on)."""
    if channel in enabled_channels():
        if callable(text):
            text = text()
        if not log.handlers and not logging.getLogger().handlers:
            logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
        log.setLevel(logging.INFO)
        log.info("[%s] %s\n%s", channel, title, text)


def _code(gm: fx.GraphModule) -> str:
    return gm.print_readable(print_output=False)


def traced(kind: str, gm: fx.GraphModule, timings: dict[str, float]) -> None:
    _emit(kind, f"{kind} graph: {len(gm.graph.nodes)} nodes", lambda: _code(gm))


def partitioned(program: Any) -> None:
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


def compiled(artifact: Any) -> None:
    timings = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in artifact.timings.items())
    _emit("timing", "stage timings", timings)
    for cb in list(_callbacks):
        cb(artifact)


def on_compiled(callback: Callable[[Any], None]) -> Callable[[], None]:
    """Call ``callback(artifact)`` after every compilation; returns a function that unregisters it."""
    _callbacks.append(callback)
    return lambda: _callbacks.remove(callback)
