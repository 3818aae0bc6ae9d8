"""The partition report: its data on known graphs, layer grouping, the JSON format, the page's
content, the compile callback and environment variable, and the page in a real browser."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch
import torch.fx as fx
from torch import nn

import aotgrad
import browser
from aotgrad.partition import partition_joint
from aotgrad.tools import bench, report
from aotgrad.tools.report import grouping, record
from aotgrad.tools.report.html import render_html
from aotgrad.tools.report.model import Document


class SinCos(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x).cos()


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(x @ self.w) * 2).exp()


def traced(model: nn.Module, *inputs: torch.Tensor):
    return bench.trace_with_aotgrad(bench.Workload("test", model, list(inputs)))


@pytest.fixture(scope="module")
def sincos():
    j = traced(SinCos(), torch.randn(4, 8, requires_grad=True))
    return j, report.collect(j.gm, num_fwd_outputs=j.num_fwd_outputs, title="sin-cos")


# ------------------------------------------------------------------ data


def test_sincos_saves_the_input_and_recomputes_sin(sincos):
    _, g = sincos
    assert [(g.node(s.node)["name"], s.reason) for s in g.saved] == [("primals_1", "primal input")]
    saved = g.node(g.saved[0].node)
    assert (saved["shape"], saved["dtype"], saved["nbytes"], saved["op"]) == (
        [4, 8],
        "float32",
        128,
        "placeholder",
    )
    assert [g.node(i)["op"] for i in g.recomputed] == ["aten.sin.default"]
    assert g.saved_bytes == 128 and g.recomputed_bytes == 128
    by_name = {p.name: p for p in g.partitions}
    assert by_name["aotgrad min-cut"].saved_bytes == 128
    assert by_name["save everything (aotgrad default)"].saved_bytes == 256
    assert by_name["torch min-cut"].saved_bytes == 128 and by_name["torch min-cut"].error is None
    # joint: 2 placeholders, 7 ops, output; forward: x, sin, cos, output; backward: x, tangent,
    # sin (recomputed), 5 ops, output.
    assert g.sizes == {"joint": 10, "forward": 4, "backward": 9}


def test_saved_tensors_match_the_partitioner_shapes_and_reasons():
    j = traced(Linear(), torch.randn(4, 8))
    g = report.collect(j.gm, num_fwd_outputs=j.num_fwd_outputs, compare_torch=False)
    res = partition_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs)
    assert [g.nodes["name"][s.node] for s in g.saved] == [n.name for n in res.saved_nodes()]
    assert [s.reason for s in g.saved] == res.reasons()
    for s, n in zip(g.saved, res.saved_nodes(), strict=True):
        assert g.nodes["shape"][s.node] == list(n.meta["val"].shape)
        assert g.nodes["dtype"][s.node] == "float32"
    assert "min-cut boundary" in res.reasons()
    assert g.saved_bytes == res.saved_bytes
    assert [p.name for p in g.partitions] == [
        "aotgrad min-cut",
        "save everything (aotgrad default)",
    ]


def test_default_partitioner_report():
    j = traced(SinCos(), torch.randn(4, 8, requires_grad=True))
    g = report.collect(j.gm, num_fwd_outputs=1, kind="default", compare_torch=False)
    assert g.partitioner == "save everything (aotgrad default)"
    assert g.saved_bytes == 256 and g.recomputed == []
    # x for cos(x) (sin's derivative), sin(x) for sin(sin(x)) (cos's): both computed in
    # the backward, where it traced them, as torch's default partition does
    assert [(g.node(s.node)["name"], s.reason) for s in g.saved] == [
        ("primals_1", "primal input"),
        ("sin", "read by backward"),
    ]


# ------------------------------------------------------------------ grouping


def test_module_paths_and_layers():
    stack = {"a": ("L['self'].blocks", nn.ModuleList), "b": ("L['self'].blocks[3].attn.qkv", None)}
    assert grouping.module_path(stack) == "blocks.3.attn.qkv"
    assert grouping.module_path({"x": ("L['self'].layers['enc'].0", None)}) == "layers.enc.0"
    assert grouping.layer_of("blocks.3.attn.qkv") == "blocks.3"
    assert grouping.layer_of("ln_f") == "ln_f"
    assert grouping.layer_of("0.attn") == "0"
    assert grouping.module_path(None) is None


def joint_with_module_stack(model: nn.Module, *inputs: torch.Tensor):
    """Dynamo's graph of ``model`` traced by aotgrad with node meta preserved (as torch's AOT
    Autograd does), so that the joint graph's forward nodes carry ``nn_module_stack``."""
    from torch.fx import traceback as fx_traceback

    from aotgrad import trace

    captured = {}

    def capture(gm, example_inputs):
        captured["gm"], captured["inputs"] = gm, example_inputs
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=capture)(*inputs)
    gm = captured["gm"]

    def flat_fn(*args):
        with fx_traceback.preserve_node_meta():
            return list(fx.Interpreter(gm).run(*args))

    fake_mode = trace.make_fake_mode(False)
    fake = trace.fakify(fake_mode, captured["inputs"], dynamic=False)
    return trace.trace_joint(
        flat_fn, fake, fake_mode, trace.collect_metadata(flat_fn, fake, fake_mode)
    )


def test_layers_from_nn_module_stack():
    from aotgrad.tools.models import transformer_stack

    model = transformer_stack(2, width=32)
    j = joint_with_module_stack(model, torch.randn(2, 8, 32))
    g = report.collect(j.gm, num_fwd_outputs=j.num_fwd_outputs, compare_torch=False)
    assert g.grouping == "nn_module_stack"
    assert {"0", "1"} <= set(g.groups)
    stats = {s["group"]: s for s in g.per_group()}
    assert stats["0"]["forward_nodes"] > 10 and stats["1"]["forward_nodes"] > 10
    assert stats["0"]["saved_bytes"] > 0 and stats["1"]["saved_bytes"] > 0
    assert sum(s["saved_bytes"] for s in stats.values()) == g.saved_bytes
    assert sum(s["recomputed_bytes"] for s in stats.values()) == g.recomputed_bytes


def test_layers_fall_back_to_ranges(sincos):
    _, g = sincos
    assert g.grouping == "ranges"
    assert g.groups[0] == grouping.INPUTS
    assert g.nodes["group"][g.saved[0].node] == 0  # the saved input is in (inputs)


def test_layers_from_stack_traces():
    j = traced(SinCos(), torch.randn(4, 8, requires_grad=True))
    res = partition_joint(j.gm, num_fwd_outputs=1)
    for n in res.nodes:
        if n.op == "call_function":
            n.meta["stack_trace"] = (
                f'  File "/src/model.py", line 3, in {n.target.__name__.split(".")[0]}\n'
            )
    index, names, rule = grouping.group_nodes(res.nodes, res.placement)
    assert rule == "stack_trace"
    fwd_groups = {
        names[index[i]]
        for i, n in enumerate(res.nodes)
        if n.op == "call_function" and res.placement[i] & 1
    }
    assert "model.py:sin" in fwd_groups and "model.py:cos" in fwd_groups


# ------------------------------------------------------------------ JSON and page


def test_json_round_trip(sincos, tmp_path):
    _, g = sincos
    doc = report.new_document([dataclasses.replace(g, curve=report.Curve([(1.0, 2.0)]))])
    again = Document.from_json(doc.to_json())
    assert again.to_json() == doc.to_json()
    assert render_html(again) == render_html(doc)
    _, json_file = report.write_report(doc, tmp_path / "r.html")
    assert json_file == tmp_path / "r.json"
    assert json.loads(json_file.read_text())["format"] == "aotgrad-report"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"format": "other"}', "not an aotgrad report"),
        ('{"format": "aotgrad-report", "version": 99, "graphs": []}', "version 99"),
        ('{"format": "aotgrad-report", "version": 1, "graphs": [{"title": "x"}]}', "malformed"),
    ],
)
def test_bad_json_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        Document.from_json(text)


def test_page_lists_saved_tensors_and_is_self_contained(sincos):
    _, g = sincos
    page = render_html(report.new_document([g]))
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", page)
    table = page[page.index('id="graph-0-saved"') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == 2  # header + the one saved tensor
    assert "primals_1" in table and "(4, 8)" in table and "primal input" in table
    # The frontier is computed with the report: one point per default budget.
    from aotgrad.partition.budget import DEFAULT_BUDGETS

    assert g.curve is not None and len(g.curve.points) == len(DEFAULT_BUDGETS)
    saved = [p[0] for p in g.curve.points]
    assert saved == sorted(saved, reverse=True) or saved == sorted(saved)  # monotone
    assert "No memory-budget sweep" not in page
    assert page.count("<circle") == len(DEFAULT_BUDGETS)
    assert page.count("<svg") == 3


def test_curve_points_are_drawn(sincos):
    _, g = sincos
    pts = [(4096.0, 0.0), (2048.0, 10.0), (1024.0, 25.0)]
    page = render_html(report.new_document([dataclasses.replace(g, curve=report.Curve(pts))]))
    assert "No memory-budget sweep" not in page
    assert page.count("<circle") == 3


# ------------------------------------------------------------------ from compilations


def _fn(x, w):
    return torch.tanh(x @ w).sum(dim=1)


def test_recorder_reports_every_training_graph(tmp_path):
    x, w = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    with report.Recorder(tmp_path / "r.html", compare_torch=False) as rec:
        f = aotgrad.aot_function(_fn, aotgrad.nop)
        f(x, w).sum().backward()
        with torch.no_grad():
            f(x, w)  # an inference graph: not reported
    assert len(rec.graphs) == 1
    assert (tmp_path / "r.html").exists() and (tmp_path / "r.json").exists()
    art = f.artifacts[0]
    assert rec.graphs[0].sizes["forward"] == len(art.forward.graph.nodes)
    assert rec.graphs[0].notes == []
    f2 = aotgrad.aot_function(_fn, aotgrad.nop)
    f2(x, w)  # after the recorder stopped
    assert len(rec.graphs) == 1


def test_artifact_without_joint_graph_is_described_from_its_graphs():
    x, w = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True)
    f = aotgrad.aot_function(_fn, aotgrad.nop)
    f(x, w)
    art = f.artifacts[0]
    full = report.collect_artifact(art, compare_torch=False)
    bare = report.collect_artifact(dataclasses.replace(art, joint=None))
    assert [full.nodes["name"][s.node] for s in full.saved] == [
        bare.nodes["name"][s.node] for s in bare.saved
    ]
    assert bare.saved_bytes == full.saved_bytes
    assert {s.reason for s in bare.saved} == {"unknown"} and bare.notes


def test_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setattr(record, "_env_recorder", None)
    assert report.enable_from_env({}) is None
    rec = report.enable_from_env(
        {"AOTGRAD_REPORT": str(tmp_path / "env.html"), "AOTGRAD_REPORT_TORCH": "0"}
    )
    try:
        assert rec is report.enable_from_env({"AOTGRAD_REPORT": "elsewhere.html"})
        aotgrad.aot_function(_fn, aotgrad.nop)(
            torch.randn(2, 8), torch.randn(8, 8, requires_grad=True)
        )
        assert (tmp_path / "env.html").exists() and (tmp_path / "env.json").exists()
        doc = Document.load(tmp_path / "env.json")
        assert [p.name for p in doc.graphs[0].partitions] == [
            "aotgrad min-cut",
            "save everything (aotgrad default)",
        ]
    finally:
        rec.stop()


# ------------------------------------------------------------------ in a browser


@pytest.fixture(scope="module")
def chromium():
    path, why = browser.find_or_install()
    if path is None:
        print(f"skipping browser tests: {why}")
        pytest.skip(why)
    return path


@pytest.fixture(scope="module")
def gpt_page(tmp_path_factory):
    """The report of a 2-layer GPT compiled with the aotgrad_eager backend."""
    from aotgrad.tools.models import GPT, GPTConfig

    out = tmp_path_factory.mktemp("page") / "gpt.html"
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=40, block_size=16, n_layer=2, n_embd=32))
    x = torch.randint(0, 40, (2, 16))
    torch._dynamo.reset()
    with report.Recorder(out, title="GPT 2x32") as rec:
        torch.compile(model, backend="aotgrad_eager")(x, x).backward()
    assert len(rec.graphs) == 1
    return out, rec.graphs[0]


def test_page_in_chromium(chromium, gpt_page, tmp_path):
    page, g = gpt_page
    dom = browser.dump_dom(chromium, page)
    assert "Partition report: GPT 2x32" in dom
    table = dom[dom.index('id="graph-0-saved"') :]
    table = table[: table.index("</table>")]
    assert table.count("<tr>") == len(g.saved) + 1
    for s in g.saved[:5]:
        assert f">{g.nodes['name'][s.node]}<" in table
    assert dom.count("<svg") == 3 and "torch min-cut" in dom

    shot = browser.screenshot(chromium, page, tmp_path / "page.png", (1200, 1600))
    pixels = browser.read_png(shot)
    assert pixels.shape[:2] == (1600, 1200)
    assert browser.distinct_colours(pixels) > 50  # text, bars, badges: not a blank page
    assert tuple(pixels[5, 5, :3]) == (0x11, 0x18, 0x27)  # the header band was painted
    blue = (pixels[..., 0] == 0x25) & (pixels[..., 1] == 0x63) & (pixels[..., 2] == 0xEB)
    assert blue.sum() > 500  # the saved-bytes bars


def test_png_decoder_reads_every_filter(tmp_path):
    import struct
    import zlib

    rng = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (5, 4, 3), generator=rng, dtype=torch.uint8).numpy()
    raw = b""
    prev = bytes(12)
    for y, kind in enumerate((0, 1, 2, 3, 4)):
        line = img[y].tobytes()
        out = bytearray()
        for i, v in enumerate(line):  # filters predict from the unfiltered bytes
            a, b, c = (line[i - 3] if i >= 3 else 0), prev[i], (prev[i - 3] if i >= 3 else 0)
            pred = [0, a, b, (a + b) // 2, browser._paeth(a, b, c)][kind]
            out.append((v - pred) & 0xFF)
        raw += bytes([kind]) + bytes(out)
        prev = line

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
        )

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 5, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    (tmp_path / "t.png").write_bytes(png)
    assert (browser.read_png(tmp_path / "t.png") == img).all()
