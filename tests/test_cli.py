"""The command-line tools (``python -m aotgrad demo|report|bench``) and the ``AOTGRAD_LOGS`` channels."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import aotgrad
from aotgrad.tools import bench, report

ROOT = Path(__file__).resolve().parent.parent


def aotgrad_cli(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    env.pop("AOTGRAD_REPORT", None)
    return subprocess.run(
        [sys.executable, "-m", "aotgrad", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        check=False,
    )


class Small(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x)).sin()


@pytest.fixture(scope="module")
def report_json(tmp_path_factory) -> Path:
    j = bench.trace_with_aotgrad(bench.Workload("small", Small(), [torch.randn(4, 8)]))
    g = report.collect(
        j.gm, num_fwd_outputs=j.num_fwd_outputs, title="small net", compare_torch=False
    )
    _, data = report.write_report(
        report.new_document([g]), tmp_path_factory.mktemp("rep") / "small.html"
    )
    data.with_suffix(".html").unlink()
    return data


def test_report_from_json(report_json, tmp_path):
    out = tmp_path / "page.html"
    proc = aotgrad_cli("report", "--from-json", str(report_json), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"report: {out}" in proc.stdout
    page = out.read_text()
    assert "Partition report: small net" in page and "<svg" in page
    saved = report.Document.load(report_json).graphs[0]
    for s in saved.saved:
        assert saved.nodes["name"][s.node] in page


def test_report_from_json_defaults_to_the_html_beside_it(report_json):
    proc = aotgrad_cli("report", "--from-json", str(report_json))
    assert proc.returncode == 0, proc.stderr
    assert report_json.with_suffix(".html").exists()


def test_report_refuses_a_file_that_is_not_a_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    proc = aotgrad_cli("report", "--from-json", str(bad))
    assert proc.returncode == 2
    assert "not an aotgrad report" in proc.stderr
    assert not bad.with_suffix(".html").exists()


def test_report_of_a_shipped_model(tmp_path):
    out = tmp_path / "mlp.html"
    proc = aotgrad_cli("report", "--model", "mlp", "--no-torch", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = report.Document.load(out.with_suffix(".json"))
    assert doc.graphs[0].title.startswith("mlp") and doc.graphs[0].saved


def test_bench_json():
    proc = aotgrad_cli("bench", "--sizes", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    names = [r["workload"] for r in result["workloads"]]
    assert names == ["mlp 4x256", "transformer 2 blocks", "conv net"]
    for r in result["workloads"]:
        for who in ("aotgrad", "torch"):
            assert r["partition"][who]["median_s"] > 0
            assert r["partition"][who]["saved_bytes"] > 0
        assert r["save_all_bytes"] >= r["partition"]["aotgrad"]["saved_bytes"]
        assert r["trace"]["aotgrad_trace_s"] > 0 and r["trace"]["torch_trace_s"] > 0
    c = result["call_overhead"]
    assert c["aotgrad_us"] > 0 and c["torch_us"] > 0 and c["eager_us"] > 0


def test_bench_formats():
    result = {
        "environment": {"torch": "2.x", "python": "3.x", "cpus": 2, "threads": 2},
        "workloads": [
            {
                "workload": "w",
                "nodes": 10,
                "speedup": 20.0,
                "save_all_bytes": 4096,
                "partition": {
                    "aotgrad": {"median_s": 0.001, "saved_bytes": 2048},
                    "torch": {"median_s": 0.02, "saved_bytes": 2048},
                },
                "trace": {"aotgrad_trace_s": 0.1, "torch_trace_s": 0.2, "ratio": 0.5},
            }
        ],
        "call_overhead": {"aotgrad_us": 30.0, "torch_us": 60.0, "eager_us": 8.0, "ratio": 0.5},
    }
    md = bench.format_markdown(result)
    assert "| w | 10 | 1.0 | 20.0 | 20x | 2.00 KiB | 2.00 KiB | 1.000 | 4.00 KiB |" in md
    assert "| 30.0 | 60.0 | 8.0 | 0.50 |" in md
    text = bench.format_text(result)
    assert "speedup" in text and "20x" in text and "|" not in text


def test_bench_rejects_an_unknown_workload():
    proc = aotgrad_cli("bench", "--workloads", "resnet")
    assert proc.returncode == 2 and "unknown workload 'resnet'" in proc.stderr


def test_demo_small(tmp_path):
    page = tmp_path / "demo.html"
    proc = aotgrad_cli(
        "demo",
        "--steps",
        "3",
        "--layers",
        "1",
        "--width",
        "32",
        "--seq",
        "16",
        "--batch",
        "2",
        "--backend",
        "aotgrad_eager",
        "--report",
        str(page),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    for row in (
        "final loss",
        "loss parity, worst step",
        "step time, median",
        "compile, first step",
        "aotgrad min-cut",
        "torch min-cut",
        "save everything",
    ):
        assert row in out, out
    assert f"report: {page}" in out
    assert page.exists() and page.with_suffix(".json").exists()


def _fn(x, w):
    return torch.relu(x @ w).sum()


def test_logs_print_graphs_and_timings(monkeypatch, caplog):
    monkeypatch.setenv("AOTGRAD_LOGS", "joint,forward,backward,partition,table,timing")
    caplog.set_level(logging.INFO, logger="aotgrad")
    f = aotgrad.aot_function(_fn, aotgrad.nop)
    f(torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)).backward()
    text = caplog.text
    for channel in (
        "[joint] joint graph",
        "[forward] forward graph",
        "[backward] backward graph",
        "[partition] partition",
        "[timing] stage timings",
    ):
        assert channel in text, text[:2000]
    assert text.count("def forward(") >= 3  # the joint, forward and backward graphs' code
    assert "aten.mm.default" in text and "threshold_backward" in text
    assert "saved tensors" in text
    for stage in ("trace", "partition", "compile"):
        assert f"{stage} " in text.split("[timing] stage timings", 1)[1]


def test_logs_are_quiet_without_the_variable(monkeypatch, caplog):
    # Without AOTGRAD_LOGS (or TORCH_LOGS=aotgrad) nothing is printed, even with the root
    # logger at DEBUG: the aotgrad log is quiet until asked for, as torch's are.
    monkeypatch.delenv("AOTGRAD_LOGS", raising=False)
    caplog.set_level(logging.DEBUG)
    aotgrad.aot_function(_fn, aotgrad.nop)(torch.randn(4, 8), torch.randn(8, 8, requires_grad=True))
    assert "[joint]" not in caplog.text and "[timing]" not in caplog.text
    assert "Joint graph" not in caplog.text and "Forward graph" not in caplog.text
