"""Which layer each joint-graph node belongs to, for the report's per-layer chart.

Rule order (the first that applies to the forward nodes wins):

1. ``nn_module_stack`` meta (Dynamo graphs, ``make_fx(record_module_stack=True)``):
   the innermost module path, cut after its first numeric component
   (``blocks.3.attn.qkv`` → ``blocks.3``) or else to its first component
   (``ln_f``); Dynamo's ``L['self']`` prefix is dropped.
2. ``stack_trace`` meta: the innermost frame's ``file:function``; each
   contiguous run of forward nodes with the same frame is one group.
3. Contiguous ranges of forward nodes of about equal size.

Placeholders go to ``(inputs)``, nodes only in the backward to ``(backward)``,
forward nodes with no meta under rule 1 or 2 to ``(top level)``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch.fx as fx

from ...vocab import IN_FORWARD

INPUTS = "(inputs)"
BACKWARD = "(backward)"
TOP = "(top level)"
#: Above this many stack-trace groups the page would be unreadable: use ranges.
MAX_GROUPS = 48
RANGE_GROUPS = 12

_DYNAMO_ROOT = re.compile(r"^L\['[^']*'\]\.?")
_INDEX = re.compile(r"\[(?:'([^']*)'|(\d+))\]")
_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)')


def module_path(stack: dict[str, Any] | None) -> str | None:
    """The innermost module's dotted path, without Dynamo's ``L['self']`` root."""
    if not stack:
        return None
    entry = list(stack.values())[-1]
    path = entry[0] if isinstance(entry, (tuple, list)) else str(entry)
    path = _DYNAMO_ROOT.sub("", path)
    path = _INDEX.sub(lambda m: "." + (m.group(1) or m.group(2)), path).strip(".")
    return path or None


def layer_of(path: str) -> str:
    """``blocks.3.attn.qkv`` → ``blocks.3``; ``layers.0`` → ``layers.0``; ``ln_f`` → ``ln_f``."""
    parts = path.split(".")
    for i, p in enumerate(parts):
        if p.isdigit():
            return ".".join(parts[: i + 1])
    return parts[0]


def _frame_of(trace: str | None) -> str | None:
    if not trace:
        return None
    frames = _FRAME.findall(trace)
    if not frames:
        return None
    file, fn = frames[-1]
    return f"{file.rsplit('/', 1)[-1]}:{fn}"


class _Groups:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.index: dict[str, int] = {}

    def get(self, name: str) -> int:
        if name not in self.index:
            self.index[name] = len(self.names)
            self.names.append(name)
        return self.index[name]


def _by_module(nodes: Sequence[fx.Node], fwd: list[int]) -> dict[int, str]:
    out = {}
    for i in fwd:
        path = module_path(nodes[i].meta.get("nn_module_stack"))
        out[i] = layer_of(path) if path else TOP
    return out


def _by_frame(nodes: Sequence[fx.Node], fwd: list[int]) -> dict[int, str] | None:
    out: dict[int, str] = {}
    runs: dict[str, int] = {}
    prev = None
    for i in fwd:
        frame = _frame_of(nodes[i].meta.get("stack_trace")) or TOP
        if frame != prev:
            runs[frame] = runs.get(frame, 0) + 1
            prev = frame
        out[i] = frame if frame == TOP else f"{frame} #{runs[frame]}"
    if len(set(out.values())) > MAX_GROUPS:
        return None
    # A frame that ran once needs no run number.
    return {
        i: g[: g.rindex(" #")] if " #" in g and runs[g[: g.rindex(" #")]] == 1 else g
        for i, g in out.items()
    }


def _by_range(fwd: list[int], count: int) -> dict[int, str]:
    out = {}
    k = max(1, min(count, len(fwd)))
    for j in range(k):
        lo, hi = j * len(fwd) // k, (j + 1) * len(fwd) // k
        if lo < hi:
            name = f"nodes {fwd[lo]}-{fwd[hi - 1]}"
            for i in fwd[lo:hi]:
                out[i] = name
    return out


def group_nodes(
    nodes: Sequence[fx.Node], placement: Sequence[int]
) -> tuple[list[int], list[str], str]:
    """(group index per node, group names in first-use order, rule used)."""
    fwd = [i for i, n in enumerate(nodes) if n.op != "placeholder" and placement[i] & IN_FORWARD]
    if any(nodes[i].meta.get("nn_module_stack") for i in fwd):
        by, rule = _by_module(nodes, fwd), "nn_module_stack"
    else:
        by_frame = (
            _by_frame(nodes, fwd) if any(nodes[i].meta.get("stack_trace") for i in fwd) else None
        )
        if by_frame is not None:
            by, rule = by_frame, "stack_trace"
        else:
            by, rule = _by_range(fwd, RANGE_GROUPS), "ranges"
    groups = _Groups()
    index = []
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            index.append(groups.get(INPUTS))
        elif i in by:
            index.append(groups.get(by[i]))
        else:
            index.append(groups.get(BACKWARD))
    return index, groups.names, rule
