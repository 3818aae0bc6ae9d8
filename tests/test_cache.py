"""The in-process and on-disk caches: hits skip tracing and partitioning; bad entries are rebuilt."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from unittest import mock

import pytest
import torch
from torch.fx._lazy_graph_module import _LazyGraphModule

from aotgrad import cache, observe

SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    import aotgrad.observe as observe
    hits = []
    observe.on_compiled(lambda a: hits.append("cache" in a.timings))
    from aotgrad.tools.models import GPT, GPTConfig
    torch.manual_seed(0)
    # A GPT: its graph holds a tensor constant (the positions), which the cache must carry.
    m = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16))
    c = torch.compile(m, backend=sys.argv[1])
    x = torch.randint(0, 16, (2, 8), generator=torch.Generator().manual_seed(1))
    loss = c(x).square().mean()
    loss.backward()
    with torch.no_grad():
        inference = c(x).sum().item()
    print(json.dumps({"hits": hits, "loss": loss.item(),
                      "grad": m.head.weight.grad.tolist(), "inference": inference}))
    """
)


def _run(
    tmp_path: Path,
    backend: str = "aotgrad_eager",
    script: str = SCRIPT,
    inductor_dir: str = "inductor",
) -> dict:
    """Run ``script`` in a fresh process with its caches under ``tmp_path``."""
    env = dict(
        os.environ,
        AOTGRAD_CACHE_DIR=str(tmp_path / "aotgrad"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / inductor_dir),
    )
    out = subprocess.run(
        [sys.executable, "-c", script, backend],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stderr"] = out.stderr
    return result


def _entries(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "aotgrad").rglob("*.bin"))


def test_second_process_reuses_the_partitioned_graphs(tmp_path):
    first = _run(tmp_path)
    assert first["hits"] == [False, False]  # a training and an inference graph, both built
    assert len(_entries(tmp_path)) == 2
    second = _run(tmp_path)
    assert second["hits"] == [True, True]  # both read back from disk
    for k in ("loss", "grad", "inference"):
        assert second[k] == first[k]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_tampered_entry_is_detected_and_rebuilt(tmp_path, damage):
    first = _run(tmp_path)
    victim = _entries(tmp_path)[0]
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        data[-20] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray(b"not a cache entry at all")
    victim.write_bytes(bytes(data))
    second = _run(tmp_path)
    assert "discarding cache entry" in second["stderr"]
    assert sorted(second["hits"]) == [False, True]  # the damaged one rebuilt, the other reused
    for k in ("loss", "grad", "inference"):
        assert second[k] == first[k]
    third = _run(tmp_path)  # the rebuilt entry is good again
    assert third["hits"] == [True, True]


def test_entry_for_another_key_is_rejected(tmp_path):
    _run(tmp_path)
    a, b = _entries(tmp_path)
    b.write_bytes(a.read_bytes())  # a valid entry, but filed under the wrong key
    second = _run(tmp_path)
    assert "another key" in second["stderr"]


def test_in_process_cache_hit_after_dynamo_reset(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTGRAD_CACHE_DIR", str(tmp_path))
    cache.memory_clear()
    seen: list[dict] = []
    undo = observe.on_compiled(lambda a: seen.append(a.timings))
    try:
        m = torch.nn.Linear(4, 4)
        x = torch.randn(2, 4)
        for _ in range(2):
            torch._dynamo.reset()
            torch.compile(m, backend="aotgrad_eager")(x).sum().backward()
    finally:
        undo()
    assert len(seen) == 1  # the second compile was served from memory: nothing compiled


def test_key_of_a_graph_with_a_zero_dim_constant():
    """A 0-dim tensor constant is hashed by value (regression: viewing it as bytes raised)."""
    from aotgrad.program import AotOptions

    def keyed(value: float) -> str:
        root = torch.nn.Module()
        root.c = torch.tensor(0.0)
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(torch.ops.aten.mul.Tensor, (x, g.get_attr("c"))))
        gm = torch.fx.GraphModule(root, g)
        delattr(gm, "c")  # GraphModule made it a buffer (lifted to an input): a constant
        gm.c = torch.tensor(value)
        return cache.key_for(gm, [torch.randn(2)], AotOptions(lambda gm, _: gm), training=False)

    assert keyed(2.0) == keyed(2.0) != keyed(3.0)


def test_key_changes_with_input_metadata():
    gm = torch.fx.symbolic_trace(torch.nn.Linear(4, 4))
    from aotgrad.program import AotOptions

    opts = AotOptions(fw_compiler=lambda g, i: g)
    a = cache.key_for(gm, [torch.randn(2, 4)], opts, training=True)
    assert a == cache.key_for(gm, [torch.randn(2, 4)], opts, training=True)
    assert a != cache.key_for(gm, [torch.randn(3, 4)], opts, training=True)
    assert a != cache.key_for(gm, [torch.randn(2, 4, dtype=torch.float64)], opts, training=True)
    assert a != cache.key_for(gm, [torch.randn(2, 4)], opts, training=False)


def test_key_changes_with_how_inputs_alias():
    """Inputs alike one by one, but sharing a storage, viewing one base, or made by a
    multi-output op: the trace differs (synthetic bases, eager's view checks), so the
    key does (a Dynamo graph compiled for independent inputs was reused for chunks)."""
    gm = torch.fx.symbolic_trace(lambda a, b: a + b)
    from aotgrad.program import AotOptions

    opts = AotOptions(fw_compiler=lambda g, i: g)

    def key(a, b):
        return cache.key_for(gm, [a, b], opts, training=True)

    base = torch.randn(8, 4)
    keys = {
        key(torch.randn(4, 4), torch.randn(4, 4)),
        key(base[:4], base[4:]),
        key(base[:4], base[:4]),
        key(*base.chunk(2)),
        key(*torch.randn(8, 4).chunk(2)[::-1]),
    }
    assert len(keys) == 5
    assert key(base[:4], base[4:]) == key(*(lambda b: (b[:4], b[4:]))(torch.randn(8, 4)))


RELU_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    import aotgrad.observe as observe
    from torch._dynamo.utils import counters
    hits = []
    observe.on_compiled(lambda a: hits.append("cache" in a.timings))
    torch.manual_seed(0)
    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    c = torch.compile(lambda x, w: torch.relu(x @ w) + torch.arange(4.0), backend=sys.argv[1])
    c(x, w).sum().backward()
    fx_cache = {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    print(json.dumps({"hits": hits, "grad": w.grad.sum().item(), "fx_cache": fx_cache}))
    """
)


@pytest.mark.parametrize("inductor_cache", ["fresh", "shared"])
def test_inductor_compiles_a_graph_read_back_from_disk(tmp_path, inductor_cache):
    """A second process reads the forward and backward back from aotgrad's disk cache.
    With a fresh Inductor cache, Inductor compiles them (regression: the graphs used to be
    re-traced when loaded, relu-backward's ``aten.full([], 0.0)`` became a real tensor
    constant and Inductor's fake propagation refused it). With Inductor's cache shared,
    both hit its FX-graph cache: the graphs come back exactly as they were built
    (regression: re-traced graphs had other node names, so every kernel was generated
    again)."""
    second_dir = "inductor" if inductor_cache == "shared" else "inductor-2"
    runs = [
        _run(tmp_path, "aotgrad", RELU_SCRIPT),
        _run(tmp_path, "aotgrad", RELU_SCRIPT, inductor_dir=second_dir),
    ]
    assert runs[0]["hits"] == [False] and runs[1]["hits"] == [True]
    assert runs[1]["grad"] == runs[0]["grad"]
    assert runs[0]["fx_cache"] == {"fxgraph_cache_miss": 2}
    expected = {"fxgraph_cache_hit": 2} if inductor_cache == "shared" else {"fxgraph_cache_miss": 2}
    assert runs[1]["fx_cache"] == expected


RELOAD_SCRIPT = textwrap.dedent(
    """
    import json, os, sys, torch
    import aotgrad.observe as observe
    from torch._dynamo.utils import counters
    from torch._inductor.codecache import FxGraphCache
    if os.environ.get("RELOAD_TEST_CONFIG"):
        torch._inductor.config.comment_origin = True  # another environment for Inductor
    keyed = []
    prepare = FxGraphCache.prepare_key
    def counting(*a, **k):
        keyed.append(1)
        return prepare(*a, **k)
    FxGraphCache.prepare_key = staticmethod(counting)
    hits, arts = [], []
    observe.on_compiled(lambda a: (hits.append("cache" in a.timings), arts.append(a)))
    torch.manual_seed(0)
    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    c = torch.compile(lambda x, w: torch.relu(x @ w).sin() + 1, backend=sys.argv[1])
    out = c(x, w)
    out.sum().backward()
    fx_cache = {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    def valued(a):
        nodes = [*a.forward.graph.nodes, *a.backward.graph.nodes]
        return all(n.meta.get("val") is not None for n in nodes if n.op == "placeholder")
    before = valued(arts[0])
    arts[0].ensure_values()
    print(json.dumps({"hits": hits, "out": out.tolist(), "grad": w.grad.tolist(),
                      "keyed": len(keyed), "fx_cache": fx_cache,
                      "values": [before, valued(arts[0])]}))
    """
)


def test_second_process_loads_inductors_code_by_its_recorded_key(tmp_path, monkeypatch):
    """Warm start: the first process records the FX-graph cache key of each compiled graph
    beside aotgrad's entry; the second loads the code by that key, without hashing the
    graphs again (most of a warm start's own time). A process whose Inductor config differs
    compiles through Inductor's own key instead (it may generate other code); a damaged
    record is ignored. A reloaded program's fake values are restored when something asks
    (``ensure_values``: a compiler, the report, a graph log). Outputs and gradients are the
    same every time."""
    first = _run(tmp_path, "aotgrad", RELOAD_SCRIPT)
    assert first["hits"] == [False] and first["keyed"] == 2
    assert first["fx_cache"] == {"fxgraph_cache_miss": 2}
    records = list((tmp_path / "aotgrad").rglob("*.compiled"))
    assert len(records) == 1
    second = _run(tmp_path, "aotgrad", RELOAD_SCRIPT)
    assert second["hits"] == [True] and second["keyed"] == 0
    assert second["fx_cache"] == {"fxgraph_cache_hit": 2}
    # reloaded: the nodes' fake values are restored only when asked for
    assert first["values"] == [True, True] and second["values"] == [False, True]
    monkeypatch.setenv("RELOAD_TEST_CONFIG", "1")
    other = _run(tmp_path, "aotgrad", RELOAD_SCRIPT)
    assert other["hits"] == [True] and other["keyed"] == 2
    monkeypatch.delenv("RELOAD_TEST_CONFIG")
    records[0].write_bytes(b"not a record")
    damaged = _run(tmp_path, "aotgrad", RELOAD_SCRIPT)
    assert damaged["hits"] == [True] and damaged["keyed"] == 2
    for run in (second, other, damaged):
        assert run["out"] == first["out"] and run["grad"] == first["grad"]


DATA_DEPENDENT_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    import aotgrad.observe as observe
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    torch._dynamo.config.capture_scalar_outputs = True
    hits = []
    observe.on_compiled(lambda a: hits.append("cache" in a.timings))
    def f(x, w):
        y = x[(x > 0).nonzero().squeeze(1)] * w[:1]
        return y.square().sum() + torch.ones((x > 0).sum().item()).sum()
    torch.manual_seed(0)
    x, w = torch.randn(16), torch.randn(16, requires_grad=True)
    c = torch.compile(f, backend=sys.argv[1], options={"strict": True})
    c(x, w).backward()
    print(json.dumps({"hits": hits, "grad": w.grad.tolist()}))
    """
)


def test_data_dependent_sizes_come_back_from_disk(tmp_path):
    """Unbacked sizes (nonzero, item) in a graph read back by a second process: its fake
    values and unbacked bindings are made again, and Inductor compiles it."""
    runs = [_run(tmp_path, "aotgrad", DATA_DEPENDENT_SCRIPT, inductor_dir=d) for d in "ab"]
    assert [r["hits"] for r in runs] == [[False], [True]]
    assert runs[1]["grad"] == runs[0]["grad"] != [0.0] * 16


DYNAMIC_CONV_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from torch._dynamo.utils import counters
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
    c = torch.compile(m, backend=sys.argv[1], dynamic=True, options={"strict": True})
    c(torch.randn(2, 3, 10, 10)).square().sum().backward()
    fx_cache = {k: v for k, v in counters["inductor"].items() if k.startswith("fxgraph_cache")}
    print(json.dumps({"grad": m[0].weight.grad.sum().item(), "fx_cache": fx_cache}))
    """
)


def test_dynamic_backward_hits_inductors_cache_in_a_second_process(tmp_path):
    """The backward of a dynamic-shape graph reads a derived size (a numel, 8*s0*(s1-2)**2):
    the symbols it is made of are saved too, so the backward's cache entry guards on its
    own inputs (regression: its guards named the forward's sources and the second
    process's cache lookup failed with KeyError 'args'; before that, a saved SymFloat
    made Inductor bypass its cache for the backward)."""
    runs = [_run(tmp_path, "aotgrad", DYNAMIC_CONV_SCRIPT) for _ in range(2)]
    assert runs[0]["fx_cache"] == {"fxgraph_cache_miss": 2}
    assert runs[1]["fx_cache"] == {"fxgraph_cache_hit": 2}
    assert runs[1]["grad"] == runs[0]["grad"]


# The zoo is a test fixture (tests/zoo.py): the script finds it beside this file.
ZOO_SCRIPT = f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})\n"
ZOO_SCRIPT += textwrap.dedent(
    """
    import json, sys
    import aotgrad.observe as observe
    import zoo
    hits = []
    observe.on_compiled(lambda a: hits.append("cache" in a.timings))
    for name in ["groupnorm_silu_upsample", "conv_batchnorm", "input_mutations",
                 "outputs_view_parameters", "activation_checkpoint", "attention_sdpa"]:
        zoo.check(name, sys.argv[1], dynamic=True)  # raises at a difference from eager
    print(json.dumps({"hits": hits}))
    """
)


def test_models_read_back_from_disk_train_like_eager(tmp_path):
    """Dynamic-shape graphs of several model kinds, read back by a second process, train
    like eager (regression: fake propagation of a loaded upsample failed on symbolic
    sizes, it ran without the Python dispatcher)."""
    first = _run(tmp_path, "aotgrad_eager", ZOO_SCRIPT)
    second = _run(tmp_path, "aotgrad_eager", ZOO_SCRIPT)
    assert first["hits"] and not any(first["hits"])
    assert len(second["hits"]) == len(first["hits"]) and all(second["hits"])


def _captured_program(fn, *args):
    """The forward and backward GraphModules aotgrad builds for ``fn`` (nop compilers)."""
    import aotgrad

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return gm

    aotgrad.aot_function(fn, fw_compiler=keep)(*args).sum().backward()
    return graphs


def test_graph_records_bring_graphs_back_exactly():
    from aotgrad import graph_records

    def fn(x, w):
        y = torch.relu(x @ w) + torch.arange(4.0)  # an all-constant call: stays a call
        return torch.cond(y.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (y,))

    x, w = torch.randn(3, 4), torch.randn(4, 4, requires_grad=True)
    for gm in _captured_program(fn, x, w):
        back = graph_records.loads(graph_records.dumps({"g": gm}))["g"]
        # its code is generated when first read or run (a warm start reloads the compiled
        # code by key and never needs it)
        assert isinstance(back, _LazyGraphModule) and back._needs_recompile()
        assert back.code == gm.code
        assert [n.name for n in back.graph.nodes] == [n.name for n in gm.graph.nodes]
        for a, b in zip(gm.graph.nodes, back.graph.nodes):
            assert b.target == a.target
            assert {k: b.meta[k] for k in graph_records.KEPT_META & b.meta.keys()} == {
                k: a.meta[k] for k in graph_records.KEPT_META & a.meta.keys()
            }
        assert not any(isinstance(v, torch.Tensor) for v in back.__dict__.values())
        inputs = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
        real = [torch.randn(v.shape).to(v.dtype) for v in inputs]
        torch.testing.assert_close(back(*real), gm(*real))


def test_graph_records_name_a_missing_operator():
    from aotgrad import graph_records

    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_function(torch.ops.aten.relu.default, (x,)))
    data = graph_records.dumps(torch.fx.GraphModule(torch.nn.Module(), g))
    broken = data.replace(b"aten::relu", b"aten::rel0")
    with pytest.raises(AttributeError, match="rel0"):
        graph_records.loads(broken)


def _values_compiled_by(backend: str):
    """The program aotgrad compiles for a small GPT's training step under ``backend``, and
    the fake inputs and mode it was traced with."""
    from torch._guards import detect_fake_mode

    from aotgrad.program import PartitionedProgram
    from aotgrad.tools.models import GPT, GPTConfig

    artifacts: list = []
    undo = observe.on_compiled(artifacts.append)
    try:
        torch.manual_seed(0)
        m = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=16))
        x = torch.randint(0, 16, (2, 8), generator=torch.Generator().manual_seed(1))
        torch._dynamo.reset()
        cache.memory_clear()
        torch.compile(m, backend=backend, options={"cache": False})(x).square().mean().backward()
    finally:
        undo()
    (a,) = artifacts
    program = PartitionedProgram(a.training, a.forward, a.backward, a.layout, None, {})
    fake_args = [n.meta["val"] for n in a.forward.graph.find_nodes(op="placeholder")]
    return program, fake_args, detect_fake_mode(fake_args)


def _read_back(program):
    from aotgrad import graph_records
    from aotgrad.program import PartitionedProgram

    body = graph_records.loads(graph_records.dumps([program.forward, program.backward]))
    return PartitionedProgram(True, body[0], body[1], program.layout, None, {})


def test_fake_values_are_rebuilt_as_recorded_without_running_ops():
    """A static program's node values are rebuilt from their descriptions (no op runs):
    the same sizes, strides, offsets, dtypes and storage sharing as when they were
    traced — what compilers and Inductor's FX-graph cache key read — and, but for which
    storages views share and the output nodes' values (tracing records none), what
    propagating the inputs gives."""
    from torch._subclasses.fake_tensor import extract_tensor_metadata

    program, fake_args, mode = _values_compiled_by("aotgrad_eager")
    values = cache.describe_values(program)
    assert values is not None
    fast = _read_back(program)
    with mock.patch.object(mode, "dispatch", wraps=mode.dispatch) as dispatched:
        cache.restore_fake_values(fast, fake_args, mode, values)
    assert cache.describe_values(fast) == values

    propagated = _read_back(program)
    with mock.patch.object(mode, "dispatch", wraps=mode.dispatch) as propagation:
        cache.restore_fake_values(propagated, fake_args, mode)
    # Only the inputs (detached) and views of them go through the mode: no op computes.
    ran = {str(c.args[0]) for c in dispatched.call_args_list}
    assert ran <= {"aten.as_strided.default", "aten.detach.default", "prim.device.default"}, ran
    assert dispatched.call_count < propagation.call_count

    def meta(v):
        if isinstance(v, torch.Tensor):
            return dataclasses.replace(extract_tensor_metadata(v), storage_bytes=None)
        return [meta(x) for x in v] if isinstance(v, (list, tuple)) else v

    for gm_fast, gm_prop in [
        (fast.forward, propagated.forward),
        (fast.backward, propagated.backward),
    ]:
        for a, b in zip(gm_fast.graph.nodes, gm_prop.graph.nodes):
            if a.op != "output":
                assert meta(a.meta["val"]) == meta(b.meta["val"]), a.name


def test_fake_values_of_symbolic_programs_are_propagated():
    """Symbolic sizes are not described: such an entry propagates its values when loaded."""
    import aotgrad

    graphs = []

    def keep(gm, _inputs):
        graphs.append(gm)
        return gm

    f = aotgrad.aot_function(lambda x: (x * 2).sin(), fw_compiler=keep, dynamic=True)
    f(torch.randn(5, requires_grad=True)).sum().backward()
    from aotgrad.program import PartitionedProgram

    program = PartitionedProgram(True, graphs[0], graphs[1], None, None, {})
    assert any(
        isinstance(s, torch.SymInt)
        for n in graphs[0].graph.find_nodes(op="placeholder")
        if isinstance(n.meta.get("val"), torch.Tensor)
        for s in n.meta["val"].shape
    )
    assert cache.describe_values(program) is None
