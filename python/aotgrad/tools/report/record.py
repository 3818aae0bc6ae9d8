"""Write reports: a page and its JSON side by side, from compiled artefacts as they appear.

``Recorder(path)`` registers an ``observe.on_compiled`` callback; every
training graph compiled while it is active is added to the report, and the
page (``path``) and its data (``path`` with ``.json``) are rewritten. The
``AOTGRAD_REPORT=out/report.html`` environment variable starts one for the
whole process (``enable_from_env``).
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ... import observe
from .html import render_html
from .model import Document, GraphReport

log = logging.getLogger("aotgrad.report")
ENV_VAR = "AOTGRAD_REPORT"
#: ``AOTGRAD_REPORT_TORCH=0`` leaves torch's min-cut out of env-var reports (it is slow on big graphs).
ENV_TORCH = "AOTGRAD_REPORT_TORCH"


def json_path(html_path: str | Path) -> Path:
    return Path(html_path).with_suffix(".json")


def new_document(graphs: list[GraphReport]) -> Document:
    import torch

    from ... import __version__

    created = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()
    return Document(graphs, created, {"aotgrad": __version__, "torch": torch.__version__})


def write_report(doc: Document, path: str | Path) -> tuple[Path, Path]:
    """Write ``path`` (HTML) and its JSON beside it; returns both paths."""
    html_file = Path(path)
    html_file.parent.mkdir(parents=True, exist_ok=True)
    html_file.write_text(render_html(doc), encoding="utf-8")
    data_file = json_path(html_file)
    data_file.write_text(doc.to_json(), encoding="utf-8")
    return html_file, data_file


class Recorder:
    """Collect a report of every training graph compiled while active (a context manager)."""

    def __init__(
        self, path: str | Path, *, compare_torch: bool = True, title: str = "", defer: bool = False
    ) -> None:
        """``defer``: keep the artefacts and describe them on ``stop`` (so that the report's
        own partitioning does not add to the compile time a caller measures)."""
        self.path = Path(path)
        self.compare_torch = compare_torch
        self.title = title
        self.defer = defer
        self.graphs: list[GraphReport] = []
        self._pending: list[Any] = []
        self._off: Any = None

    def start(self) -> Recorder:
        if self._off is None:
            self._off = observe.on_compiled(self.add)
        return self

    def stop(self) -> None:
        if self._off is not None:
            self._off()
            self._off = None
        pending, self._pending = self._pending, []
        for artifact in pending:
            self._describe(artifact)

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def add(self, artifact: Any) -> None:
        """The ``on_compiled`` callback: never lets a report failure break a compilation."""
        if self.defer:
            self._pending.append(artifact)
        else:
            self._describe(artifact)

    def _describe(self, artifact: Any) -> None:
        from .collect import collect_artifact

        try:
            title = self.title or "compiled graph"
            if self.graphs:
                title = f"{title} {len(self.graphs) + 1}"
            g = collect_artifact(artifact, title=title, compare_torch=self.compare_torch)
            if g is None:
                return
            self.graphs.append(g)
            write_report(new_document(self.graphs), self.path)
        except Exception:
            log.warning("aotgrad report: could not describe a compiled graph", exc_info=True)


_env_recorder: Recorder | None = None


def enable_from_env(environ: Mapping[str, str] | None = None) -> Recorder | None:
    """Start a process-wide ``Recorder`` when ``AOTGRAD_REPORT`` names a page (idempotent)."""
    global _env_recorder
    env = os.environ if environ is None else environ
    path = env.get(ENV_VAR, "").strip()
    if not path:
        return None
    if _env_recorder is None:
        torch_too = env.get(ENV_TORCH, "1").strip() not in ("0", "false", "no")
        _env_recorder = Recorder(path, compare_torch=torch_too).start()
        log.info("aotgrad report: writing %s", path)
    return _env_recorder
