"""Render a report ``Document`` as one self-contained HTML page (inline CSS and SVG, no scripts)."""

from __future__ import annotations

from html import escape

from . import svg
from .grouping import BACKWARD
from .model import REASON_TEXT, TORCH_MIN_CUT, Document, GraphReport, Partition

SAVED_COLOR = "#2563eb"
RECOMPUTED_COLOR = "#f59e0b"
PARTITION_COLORS = {"aotgrad": "#2563eb", "torch": "#ee4c2c", "save": "#94a3b8"}
REASON_COLORS = {
    "min-cut boundary": ("#dbeafe", "#1e40af"),
    "read by backward": ("#e2e8f0", "#334155"),
    "never-recompute op": ("#ede9fe", "#5b21b6"),
    "primal input": ("#dcfce7", "#166534"),
    "must-save tag": ("#fee2e2", "#991b1b"),
    "symbolic size": ("#fef3c7", "#92400e"),
}

CSS = """
*{box-sizing:border-box}
body{margin:0;background:#f3f4f6;color:#1f2937;font:14px/1.5 system-ui,-apple-system,'Segoe UI',
Roboto,'Helvetica Neue',Arial,sans-serif}
header.top{background:#111827;color:#f9fafb;padding:22px 40px 20px}
header.top .brand{font-weight:700;letter-spacing:.08em;text-transform:uppercase;font-size:12px;
color:#93c5fd}
header.top h1{margin:4px 0 2px;font-size:24px;font-weight:650}
header.top p{margin:0;color:#9ca3af;font-size:13px}
main{max-width:1000px;margin:0 auto;padding:24px 24px 8px}
nav.graphs{margin:0 0 16px;font-size:13px}
nav.graphs a{color:#2563eb;margin-right:14px;text-decoration:none}
section.graph{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:22px 28px 26px;
margin-bottom:24px;box-shadow:0 1px 2px rgba(0,0,0,.04)}
section.graph h2{margin:0;font-size:19px}
p.meta{margin:2px 0 16px;color:#6b7280;font-size:13px}
h3{font-size:15px;margin:26px 0 4px;padding-top:14px;border-top:1px solid #f0f1f3}
p.hint{margin:0 0 10px;color:#6b7280;font-size:12.5px}
.cards{display:grid;grid-template-columns:repeat(5,1fr);gap:10px}
.card{border:1px solid #e5e7eb;border-radius:8px;padding:10px 12px;background:#fafafa}
.card .k{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:#6b7280}
.card .v{font-size:20px;font-weight:650;margin-top:2px;font-variant-numeric:tabular-nums}
.card .s{font-size:12px;color:#6b7280}
.note{background:#fffbeb;border:1px solid #fde68a;border-radius:6px;padding:8px 12px;
font-size:13px;margin:0 0 12px}
table{border-collapse:collapse;width:100%;font-size:12.5px}
th{text-align:left;font-weight:600;color:#4b5563;background:#f9fafb;border-bottom:1px solid #e5e7eb;
padding:6px 8px;position:sticky;top:0}
td{padding:5px 8px;border-bottom:1px solid #f1f2f4;vertical-align:top}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td code,td.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:11.5px;white-space:nowrap}
.scroll{max-height:560px;overflow:auto;border:1px solid #e5e7eb;border-radius:6px}
.scroll td{white-space:nowrap}
details{margin-top:8px}
summary{cursor:pointer;color:#374151;font-weight:600;font-size:13.5px}
table.reasons{margin-bottom:12px}
footer{color:#9ca3af;font-size:12px;text-align:center;padding:4px 0 24px}
svg{display:block;max-width:100%;height:auto}
"""


def _card(key: str, value: str, sub: str = "") -> str:
    return (
        f'<div class="card"><div class="k">{escape(key)}</div>'
        f'<div class="v">{escape(value)}</div><div class="s">{escape(sub)}</div></div>'
    )


def _count(n: int) -> str:
    return f"{n:,}" if n else "—"


def _badge(reason: str) -> str:
    bg, fg = REASON_COLORS.get(reason, ("#f3f4f6", "#374151"))
    return f'<span class="badge" style="background:{bg};color:{fg}">{escape(reason)}</span>'


def _shape(shape: list | None) -> str:
    return "—" if shape is None else "(" + ", ".join(str(s) for s in shape) + ")"


def _partition_color(name: str) -> str:
    return next((c for k, c in PARTITION_COLORS.items() if name.startswith(k)), "#64748b")


def _vs(p: Partition, ref: Partition | None) -> str:
    if p.error:
        return "failed"
    if ref is None or p is ref or not ref.saved_bytes or p.saved_bytes is None:
        return ""
    diff = p.saved_bytes - ref.saved_bytes
    return "same" if diff == 0 else f"{diff / ref.saved_bytes:+.2%} ({svg.fmt_bytes(diff)})"


def _comparison(g: GraphReport) -> str:
    ref = next((p for p in g.partitions if p.name == TORCH_MIN_CUT and p.saved_bytes), None)
    rows = [
        (p.name, p.saved_bytes, _partition_color(p.name), f"failed: {p.error}" if p.error else "")
        for p in g.partitions
    ]
    chart = svg.hbars(rows, title="saved activation bytes by partitioner")
    cells = "".join(
        f"<tr><td>{escape(p.name)}</td><td class='num'>{svg.fmt_bytes(p.saved_bytes)}</td>"
        f"<td class='num'>{'' if p.saved_tensors is None else p.saved_tensors}</td>"
        f"<td class='num'>{escape(_vs(p, ref))}</td>"
        f"<td class='num'>{'' if p.time_s is None else f'{p.time_s * 1e3:.1f} ms'}</td></tr>"
        for p in g.partitions
    )
    errors = "".join(
        f'<div class="note">{escape(p.name)} failed: {escape(p.error)}</div>'
        for p in g.partitions
        if p.error
    )
    table = (
        "<table><tr><th>partitioner</th><th class='num'>saved bytes</th>"
        "<th class='num'>saved tensors</th><th class='num'>vs torch min-cut</th>"
        f"<th class='num'>partition time</th></tr>{cells}</table>"
    )
    return chart + table + errors


def _layers(g: GraphReport) -> str:
    stats = [
        s
        for s in g.per_group()
        if s["group"] != BACKWARD and (s["forward_nodes"] or s["saved"] or s["recomputed"])
    ]
    rows = [(s["group"], [s["saved_bytes"], s["recomputed_bytes"]]) for s in stats]
    chart = svg.grouped_hbars(
        rows,
        [("saved", SAVED_COLOR), ("recomputed in backward", RECOMPUTED_COLOR)],
        title="saved and recomputed bytes per layer",
    )
    how = {
        "nn_module_stack": "Layers are the modules in the nodes' <code>nn_module_stack</code>.",
        "stack_trace": "Groups are runs of nodes made by the same source function (the "
        "innermost frame of their <code>stack_trace</code>).",
        "ranges": "The joint graph carries no <code>nn_module_stack</code> or "
        "<code>stack_trace</code> metadata: groups are contiguous ranges of forward "
        "nodes, in graph order (numbers are node positions).",
    }[g.grouping]
    return f'<p class="hint">{how}</p>' + chart


def _saved_table(g: GraphReport, anchor: str) -> str:
    nodes = g.nodes
    rows = []
    for k, s in enumerate(g.saved):
        i = s.node
        rows.append(
            f"<tr><td class='num'>{k}</td><td class='mono'>{escape(nodes['name'][i])}</td>"
            f"<td class='mono'>{escape(nodes['op'][i])}</td>"
            f"<td class='mono'>{escape(_shape(nodes['shape'][i]))}</td>"
            f"<td>{escape(nodes['dtype'][i] or '—')}</td>"
            f"<td class='num'>{svg.fmt_bytes(nodes['nbytes'][i])}</td>"
            f"<td>{escape(g.groups[nodes['group'][i]])}</td><td>{_badge(s.reason)}</td></tr>"
        )
    head = (
        "<tr><th class='num'>#</th><th>value</th><th>made by</th><th>shape</th><th>dtype</th>"
        "<th class='num'>size</th><th>layer</th><th>why saved</th></tr>"
    )
    return f'<div class="scroll"><table id="{anchor}-saved">{head}{"".join(rows)}</table></div>'


def _recomputed(g: GraphReport) -> str:
    nodes = g.nodes
    rows = "".join(
        f"<tr><td class='mono'>{escape(nodes['name'][i])}</td>"
        f"<td class='mono'>{escape(nodes['op'][i])}</td>"
        f"<td class='mono'>{escape(_shape(nodes['shape'][i]))}</td>"
        f"<td class='num'>{svg.fmt_bytes(nodes['nbytes'][i])}</td>"
        f"<td>{escape(g.groups[nodes['group'][i]])}</td></tr>"
        for i in g.recomputed
    )
    return (
        f"<details><summary>Recomputed in the backward: {len(g.recomputed)} nodes, "
        f"{svg.fmt_bytes(g.recomputed_bytes)}</summary><div class='scroll'><table>"
        "<tr><th>value</th><th>op</th><th>shape</th><th class='num'>size</th><th>layer</th>"
        f"</tr>{rows}</table></div></details>"
    )


def _reasons(g: GraphReport) -> str:
    """Why values were saved: one row per reason, with counts and bytes."""
    count: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    for s in g.saved:
        count[s.reason] = count.get(s.reason, 0) + 1
        nbytes[s.reason] = nbytes.get(s.reason, 0) + g.nodes["nbytes"][s.node]
    rows = "".join(
        f"<tr><td>{_badge(r)}</td><td class='num'>{count[r]}</td>"
        f"<td class='num'>{svg.fmt_bytes(nbytes[r])}</td>"
        f"<td>{escape(REASON_TEXT.get(r, ''))}</td></tr>"
        for r in sorted(count, key=lambda r: -nbytes[r])
    )
    return (
        "<table class='reasons'><tr><th>why saved</th><th class='num'>values</th>"
        f"<th class='num'>bytes</th><th>meaning</th></tr>{rows}</table>"
    )


def _timings(g: GraphReport) -> str:
    if not g.timings:
        return ""
    cells = "".join(
        f"<tr><td>{escape(k)}</td><td class='num'>{v * 1e3:.1f} ms</td></tr>"
        for k, v in g.timings.items()
    )
    return (
        "<h3>Stage timings</h3><table style='width:auto;min-width:280px'>"
        f"<tr><th>stage</th><th class='num'>time</th></tr>{cells}</table>"
    )


def render_graph(g: GraphReport, anchor: str) -> str:
    tensors = g.saved_tensors()
    cards = "".join(
        [
            _card(
                "saved activations",
                svg.fmt_bytes(g.saved_bytes),
                f"{len(tensors)} tensors, {len(g.saved) - len(tensors)} SymInts",
            ),
            _card("recomputed", f"{len(g.recomputed)} nodes", svg.fmt_bytes(g.recomputed_bytes)),
            _card("forward graph", _count(g.sizes["forward"]), "nodes"),
            _card("backward graph", _count(g.sizes["backward"]), "nodes"),
            _card("joint graph", _count(g.sizes["joint"]), f"nodes · {len(g.groups)} groups"),
        ]
    )
    notes = "".join(f'<div class="note">{escape(n)}</div>' for n in g.notes)
    curve_pts = g.curve.points if g.curve else None
    curve_chart = svg.curve(
        curve_pts,
        cost_unit=g.curve.cost_unit if g.curve else "recompute cost",
        title="memory versus recompute",
    )
    return f"""<section class="graph" id="{anchor}">
<h2>{escape(g.title)}</h2>
<p class="meta">partition: {escape(g.partitioner)} · {g.num_fwd_outputs} forward
output{"s" if g.num_fwd_outputs != 1 else ""} · layers grouped by {escape(g.grouping)}</p>
{notes}<div class="cards">{cards}</div>
<h3>Saved activation memory by partitioner</h3>
<p class="hint">The same joint graph partitioned three ways; bytes are the sum over saved
tensors.</p>
{_comparison(g)}
<h3>Saved and recomputed bytes per layer</h3>
{_layers(g)}
<h3>Memory versus recompute</h3>
<p class="hint">One point per memory budget: saved bytes against the cost of what the backward
recomputes.</p>
{curve_chart}
<h3>Saved tensors ({len(g.saved)})</h3>
<p class="hint">Every value the forward graph hands to the backward: by reason, then one by one
in the order the backward receives them.</p>
{_reasons(g)}
{_saved_table(g, anchor)}
{_recomputed(g)}
{_timings(g)}
</section>"""


def render_html(doc: Document) -> str:
    """The whole page."""
    title = doc.graphs[0].title if len(doc.graphs) == 1 else f"{len(doc.graphs)} graphs"
    sub = " · ".join(
        x
        for x in (
            f"created {doc.created}" if doc.created else "",
            *(f"{k} {v}" for k, v in doc.versions.items()),
            f"{len(doc.graphs)} graph{'s' if len(doc.graphs) != 1 else ''}",
        )
        if x
    )
    nav = ""
    if len(doc.graphs) > 1:
        nav = (
            '<nav class="graphs">'
            + "".join(
                f'<a href="#graph-{k}">{escape(g.title)}</a>' for k, g in enumerate(doc.graphs)
            )
            + "</nav>"
        )
    sections = "".join(render_graph(g, f"graph-{k}") for k, g in enumerate(doc.graphs))
    if not doc.graphs:
        sections = '<section class="graph"><h2>No training graph was compiled</h2></section>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>aotgrad partition report: {escape(title)}</title>
<style>{CSS}</style></head>
<body><header class="top"><div class="brand">aotgrad</div><h1>Partition report: {escape(title)}</h1>
<p>{escape(sub)}</p></header>
<main>{nav}{sections}</main>
<footer>aotgrad partition report · self-contained page, no scripts</footer>
</body></html>
"""
