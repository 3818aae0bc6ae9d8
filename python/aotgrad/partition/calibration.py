"""The memory-budget cost table of this machine, read from the file ``aotgrad calibrate``
writes (:mod:`aotgrad.tools.calibrate` measures it).

The budget partitioner prices recomputation with a :class:`CostModel` (Rust:
``rust/core/src/partition/cost.rs``): FLOPs worth one byte moved, the share of its
bytes a memory-bound op moves when a fusing compiler recomputes it inside a backward
kernel, and per-op factors. :func:`cost_options` reads :func:`calibration_path` once
per process and the budget partitioner uses its figures unless the caller passes its
own (``flops_per_byte=``, ``fused_factor=``, ``op_factors=`` options).
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

#: The figures a calibration file may hold (the partition options of the cost model).
COST_OPTIONS = ("flops_per_byte", "fused_factor", "op_factors")
DEFAULT_FUSED_FACTOR = 0.25
FORMAT = 1


def calibration_path() -> Path:
    """``$AOTGRAD_CALIBRATION``, else ``calibration.json`` in ``$AOTGRAD_CACHE_DIR``
    (default ``~/.cache/aotgrad``)."""
    explicit = os.environ.get("AOTGRAD_CALIBRATION")
    if explicit:
        return Path(explicit)
    base = os.environ.get("AOTGRAD_CACHE_DIR") or Path.home() / ".cache" / "aotgrad"
    return Path(base) / "calibration.json"


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    return {k: data[k] for k in COST_OPTIONS if k in data}


def cost_options(options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``options`` over the calibration file's figures (none when there is no file)."""
    return {**_load(calibration_path()), **(options or {})}


def forget() -> None:
    """Read the calibration file again at the next :func:`cost_options` (after a write)."""
    _load.cache_clear()
