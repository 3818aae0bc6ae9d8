"""The library never loads its tools: ``import aotgrad`` and a ``torch.compile(...,
backend="aotgrad")`` training step import nothing under ``aotgrad.tools`` (the command
line, the demo, the benchmark harness, the report). Each check runs in a fresh
interpreter, so that what this test process imported does not count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOOLS_LOADED = (
    "sorted(m for m in sys.modules if m == 'aotgrad.tools' or m.startswith('aotgrad.tools.'))"
)

IMPORT_ONLY = f"""
import json, sys
import aotgrad
print(json.dumps({TOOLS_LOADED}))
"""

# backend="aotgrad" (Inductor) through its torch_dynamo_backends entry point, and the
# aot_eager counterpart, on a tiny module: forward, backward, an optimiser step.
TRAINING_STEP = textwrap.dedent(
    f"""
    import json, sys
    import torch
    from torch import nn

    for backend in ("aotgrad", "aotgrad_eager"):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = torch.compile(model, backend=backend)
        loss = step(torch.randn(3, 4)).sum()
        loss.backward()
        opt.step()
    assert "aotgrad.api" in sys.modules  # the step went through aotgrad
    print(json.dumps({TOOLS_LOADED}))
    """
)


def tools_loaded(script: str, **env: str) -> list[str]:
    environ = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    environ.pop("AOTGRAD_REPORT", None)
    environ.update(env)
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        env=environ,
        cwd=ROOT,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_aotgrad_loads_no_tools():
    assert tools_loaded(IMPORT_ONLY) == []


def test_a_compiled_training_step_loads_no_tools(tmp_path):
    loaded = tools_loaded(
        TRAINING_STEP,
        AOTGRAD_CACHE_DIR=str(tmp_path / "aotgrad"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
    )
    assert loaded == []


def test_aotgrad_report_loads_the_report_tool(tmp_path):
    """The one switch that loads a tool from the library: ``AOTGRAD_REPORT`` names a page."""
    loaded = tools_loaded(IMPORT_ONLY, AOTGRAD_REPORT=str(tmp_path / "r.html"))
    assert "aotgrad.tools.report" in loaded
    assert "aotgrad.tools.cli" not in loaded and "aotgrad.tools.demo" not in loaded
