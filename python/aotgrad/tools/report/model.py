"""The report's data: what one partition looks like, as plain values that round-trip through JSON.

A ``Document`` holds one ``GraphReport`` per compiled graph. Node facts are
kept as columns (one list per field, one entry per joint-graph node, in graph
order), like the node table they come from. The JSON file is the report's save
format: ``aotgrad report --from-json FILE`` renders it again.

Format (``"format": "aotgrad-report"``, ``"version": 1``)::

    {"format", "version", "created", "aotgrad", "torch",
     "graphs": [{"title", "partitioner", "grouping", "num_fwd_outputs",
                 "sizes": {"joint", "forward", "backward"}, "timings": {stage: s},
                 "groups": [name, ...],
                 "nodes": {"name", "op", "kind", "shape", "dtype", "nbytes",
                           "placement", "group"},          # columns
                 "saved": [{"node": id, "reason": str}], "recomputed": [id, ...],
                 "partitions": [{"name", "saved_bytes", "saved_tensors", "time_s", "error"}],
                 "curve": null | {"points": [[saved_bytes, cost], ...], "cost_unit": str},
                 "notes": [str, ...]}]}
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ...vocab import IN_FORWARD  # ``nodes["placement"]`` bits are the partition result's

FORMAT = "aotgrad-report"
VERSION = 1

#: ``nodes["kind"]`` values.
KINDS = ("primal", "tangent", "call", "get_attr")

_NODE_COLUMNS = ("name", "op", "kind", "shape", "dtype", "nbytes", "placement", "group")

#: Partitioner names, as the comparison shows them.
AOTGRAD_MIN_CUT = "aotgrad min-cut"
TORCH_MIN_CUT = "torch min-cut"
SAVE_ALL = "save everything (aotgrad default)"

UNKNOWN_REASON = "unknown"
#: What each saved reason means, for the page's legend.
REASON_TEXT = {
    "read by backward": "the backward reads it and nothing is recomputed (save-everything)",
    "min-cut boundary": "on the minimum cut: cheaper to keep than to recompute from what is kept",
    "must-save tag": "an activation-checkpoint policy marks it must-save",
    "never-recompute op": "made by an op that is never recomputed (matmul, convolution, random ops)",
    "primal input": "a graph input (parameter or user input): kept, already alive",
    "symbolic size": "a SymInt the backward needs",
    UNKNOWN_REASON: "the partition was not made here (no joint graph to ask)",
}


@dataclass
class Partition:
    """One partitioner's answer on the graph, for the comparison chart."""

    name: str
    saved_bytes: int | None
    saved_tensors: int | None = None
    time_s: float | None = None
    error: str | None = None


@dataclass
class Curve:
    """Memory-versus-recompute points: (saved bytes, recompute cost) per memory budget."""

    points: list[tuple[float, float]]
    cost_unit: str = "recompute cost"


@dataclass
class Saved:
    node: int
    reason: str


@dataclass
class GraphReport:
    """One partitioned joint graph."""

    title: str
    partitioner: str
    #: How nodes were grouped into layers: ``nn_module_stack``, ``stack_trace`` or ``ranges``.
    grouping: str
    num_fwd_outputs: int
    sizes: dict[str, int]
    groups: list[str]
    nodes: dict[str, list[Any]]
    saved: list[Saved]
    recomputed: list[int]
    partitions: list[Partition] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    curve: Curve | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.nodes["name"])
        for col in _NODE_COLUMNS:
            if len(self.nodes.get(col, ())) != n:
                raise ValueError(
                    f"node column {col!r} has {len(self.nodes.get(col, ()))} entries, expected {n}"
                )

    @property
    def num_nodes(self) -> int:
        return len(self.nodes["name"])

    def node(self, i: int) -> dict[str, Any]:
        """Node ``i`` as a dict of its columns."""
        return {c: self.nodes[c][i] for c in _NODE_COLUMNS}

    def saved_tensors(self) -> list[Saved]:
        return [s for s in self.saved if self.nodes["shape"][s.node] is not None]

    @property
    def saved_bytes(self) -> int:
        return sum(self.nodes["nbytes"][s.node] for s in self.saved)

    @property
    def recomputed_bytes(self) -> int:
        return sum(self.nodes["nbytes"][i] for i in self.recomputed)

    def per_group(self) -> list[dict[str, Any]]:
        """Per group (layer): forward nodes, saved and recomputed counts and bytes."""
        stats = [
            {
                "group": g,
                "forward_nodes": 0,
                "saved": 0,
                "saved_bytes": 0,
                "recomputed": 0,
                "recomputed_bytes": 0,
            }
            for g in self.groups
        ]
        group, nbytes = self.nodes["group"], self.nodes["nbytes"]
        for i, p in enumerate(self.nodes["placement"]):
            if p & IN_FORWARD and self.nodes["kind"][i] == "call":
                stats[group[i]]["forward_nodes"] += 1
        for s in self.saved:
            stats[group[s.node]]["saved"] += 1
            stats[group[s.node]]["saved_bytes"] += nbytes[s.node]
        for i in self.recomputed:
            stats[group[i]]["recomputed"] += 1
            stats[group[i]]["recomputed_bytes"] += nbytes[i]
        return stats

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.curve is not None:
            d["curve"]["points"] = [list(p) for p in self.curve.points]
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> GraphReport:
        curve = d.get("curve")
        return GraphReport(
            title=d["title"],
            partitioner=d["partitioner"],
            grouping=d["grouping"],
            num_fwd_outputs=d["num_fwd_outputs"],
            sizes=dict(d["sizes"]),
            groups=list(d["groups"]),
            nodes={c: list(d["nodes"][c]) for c in _NODE_COLUMNS},
            saved=[Saved(**s) for s in d["saved"]],
            recomputed=list(d["recomputed"]),
            partitions=[Partition(**p) for p in d.get("partitions", [])],
            timings=dict(d.get("timings", {})),
            curve=Curve([tuple(p) for p in curve["points"]], curve.get("cost_unit", ""))
            if curve
            else None,
            notes=list(d.get("notes", [])),
        )


@dataclass
class Document:
    """A report file: one or more graphs and where they came from."""

    graphs: list[GraphReport]
    created: str = ""
    versions: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "created": self.created,
                **self.versions,
                "graphs": [g.to_dict() for g in self.graphs],
            },
            separators=(",", ":"),
        )

    @staticmethod
    def from_json(text: str) -> Document:
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f'not an aotgrad report file (expected "format": {FORMAT!r})')
        if d.get("version") != VERSION:
            raise ValueError(
                f"report format version {d.get('version')!r}; this aotgrad reads version {VERSION}"
            )
        try:
            graphs = [GraphReport.from_dict(g) for g in d["graphs"]]
        except (KeyError, TypeError) as e:
            raise ValueError(f"malformed report file: missing or bad field {e}") from None
        versions = {k: d[k] for k in ("aotgrad", "torch") if k in d}
        return Document(graphs, d.get("created", ""), versions)

    @staticmethod
    def load(path: str | Path) -> Document:
        return Document.from_json(Path(path).read_text())
