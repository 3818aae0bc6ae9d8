"""torch's debugging switches show aotgrad's graphs (``aotgrad.torch_logs``): one test per
switch, each in a fresh interpreter as a user sets it (torch reads them at import)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

import aotgrad  # noqa: F401  (registers the aotgrad log)

ROOT = Path(__file__).resolve().parent.parent

# A training call and an inference call through backend="aotgrad_eager" (no codegen:
# the graphs are aotgrad's alone), compiled afresh.
PROGRAM = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
c = torch.compile(m, backend="aotgrad_eager", options={"cache": False})
c(torch.randn(4, 8)).sum().backward()
with torch.no_grad():
    c(torch.randn(4, 8))
"""

GRAPHS = ("Joint graph (aotgrad)", "Forward graph (aotgrad)", "Backward graph (aotgrad)")
INFERENCE = "Forward graph (aotgrad, inference)"


def run(tmp_path: Path, **env: str) -> str:
    """Run PROGRAM with the switches in ``env``; its stderr and stdout."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "AOTGRAD_"))}
    base |= {"PYTHONPATH": str(ROOT / "python"), "AOTGRAD_CACHE": "0", **env}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        env=base,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stderr + out.stdout


def test_torch_logs_aot_graphs_prints_forward_backward_and_inference(tmp_path):
    text = run(tmp_path, TORCH_LOGS="aot_graphs")
    for title in (*GRAPHS[1:], INFERENCE):
        assert f"===== {title}" in text, text[:3000]
    assert "Joint graph" not in text
    assert "torch.ops.aten.threshold_backward" in text  # the backward's code itself


def test_torch_logs_aot_joint_graph_prints_the_joint(tmp_path):
    text = run(tmp_path, TORCH_LOGS="aot_joint_graph")
    assert "===== Joint graph (aotgrad) 0 =====" in text, text[:3000]
    assert "tangents_1" in text
    assert "Forward graph" not in text


def test_torch_logs_aotgrad_is_a_registered_log(tmp_path):
    text = run(tmp_path, TORCH_LOGS="aotgrad")
    for title in (*GRAPHS, INFERENCE):
        assert f"===== {title}" in text, text[:3000]
    assert "[partition] partition" in text and "saved tensors" in text
    assert "[timing] stage timings" in text


def _structured(trace_dir: Path) -> list[tuple[dict, str]]:
    """The entries of a TORCH_TRACE log: (metadata, payload)."""
    entries: list[tuple[dict, str]] = []
    for line in next(trace_dir.iterdir()).read_text().splitlines():
        if line.startswith("\t"):
            meta, payload = entries[-1]
            entries[-1] = (meta, payload + line[1:] + "\n")
        else:
            entries.append((json.loads(line.split("] ", 1)[1]), ""))
    return entries


def test_torch_trace_has_aotgrads_graphs_for_tlparse(tmp_path):
    run(tmp_path, TORCH_TRACE=str(tmp_path / "trace"))
    entries = _structured(tmp_path / "trace")
    kinds = {next(iter(m)): (m, p) for m, p in entries}
    for kind in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph"):
        meta, payload = kinds[kind]
        assert (meta["frame_id"], meta["frame_compile_id"]) == (0, 0), meta
        assert "def forward(" in payload
    meta, payload = kinds["aot_inference_graph"]
    assert meta["frame_compile_id"] == 1 and "def forward(" in payload
    artifacts = {m["artifact"]["name"]: p for m, p in entries if "artifact" in m}
    partition = json.loads(artifacts["aotgrad_partition"])
    assert partition["saved_tensors"] == len(partition["saved"]) > 0
    assert set(json.loads(artifacts["aotgrad_stage_timings"])) >= {"aot_id", "trace", "compile"}
    tlparse = shutil.which("tlparse", path=str(Path(sys.executable).parent))
    if tlparse:  # the index tlparse makes of it (pip install tlparse)
        out = tmp_path / "tl"
        trace = str(next((tmp_path / "trace").iterdir()))
        subprocess.run([tlparse, trace, "-o", str(out), "--no-browser"], check=True, timeout=120)
        index = (out / "index.html").read_text()
        for name in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph"):
            assert f"-_0_0_0/{name}_" in index
        assert "-_0_0_0/aotgrad_partition_" in index


def test_torch_compile_debug_writes_aotgrads_folder(tmp_path):
    run(tmp_path, TORCH_COMPILE_DEBUG="1")
    (run_dir,) = (tmp_path / "torch_compile_debug").glob("run_*")
    training, inference = run_dir / "aotgrad" / "aot_0", run_dir / "aotgrad" / "aot_1"
    for name in ("joint.py", "forward.py", "backward.py"):
        assert "def forward(" in (training / name).read_text()
    assert json.loads((training / "aotgrad_partition.json").read_text())["saved_tensors"] > 0
    assert "def forward(" in (inference / "inference.py").read_text()
    # torch also puts the structured trace there, for tlparse
    assert any((tmp_path / "torch_compile_debug" / "tlparse").iterdir())


def test_stage_timings_join_torchs_compile_time_accounting():
    from torch._dynamo.utils import compilation_time_metrics, compile_times

    # Dynamo clears these metrics when it starts a frame (reset_frame_count), so the
    # count before this compilation is whatever the suite left: start from none.
    stages = ("trace", "partition", "compile")
    for k in stages:
        compilation_time_metrics.pop(f"aotgrad_{k}", None)
    before = dict.fromkeys(stages, 0)
    torch._dynamo.reset()
    m = torch.nn.Linear(4, 4)
    torch.compile(m, backend="aotgrad_eager", options={"cache": False})(
        torch.randn(2, 4)
    ).sum().backward()
    for stage, n in before.items():
        assert len(compilation_time_metrics[f"aotgrad_{stage}"]) == n + 1, stage
    assert "aotgrad_partition" in compile_times(repr="str")


def test_aotgrad_log_is_registered_and_quiet_by_default():
    # registered: TORCH_LOGS=aotgrad and torch._logging.set_logs(modules={"aotgrad": ...})
    # name it as a log of its own; quiet (WARNING) like torch's logs until asked for.
    from torch._logging._internal import log_registry

    assert log_registry.is_log("aotgrad")
    assert log_registry.log_alias_to_log_qnames["aotgrad"] == ["aotgrad"]
    assert logging.getLogger("aotgrad").getEffectiveLevel() == logging.WARNING
