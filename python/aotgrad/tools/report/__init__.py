"""The partition report: what was saved, what recomputed, and why, as one HTML page.

    from aotgrad.tools import report
    with report.Recorder("out/report.html"):      # every training graph compiled inside
        loss = torch.compile(model, backend="aotgrad")(x, y)

    g = report.collect(joint_gm, num_fwd_outputs=1)  # a joint graph directly
    report.write_report(report.new_document([g]), "out/report.html")

``AOTGRAD_REPORT=out/report.html`` does the first for a whole process
(``enable_from_env``); ``aotgrad report --from-json out/report.json`` renders a
saved report again. Modules: ``model`` (data, JSON format), ``grouping``
(layers), ``collect`` (from graphs), ``svg`` (charts), ``html`` (the page),
``record`` (writing, the compile callback), ``cli``.
"""

from __future__ import annotations

from .collect import collect, collect_artifact
from .html import render_html
from .model import Curve, Document, GraphReport, Partition, Saved
from .record import ENV_VAR, Recorder, enable_from_env, json_path, new_document, write_report

__all__ = [
    "ENV_VAR",
    "Curve",
    "Document",
    "GraphReport",
    "Partition",
    "Recorder",
    "Saved",
    "collect",
    "collect_artifact",
    "enable_from_env",
    "json_path",
    "new_document",
    "render_html",
    "write_report",
]
