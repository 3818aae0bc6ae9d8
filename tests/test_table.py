"""Joint FX graph → NodeTable → Rust GraphStore: contents, flags, errors."""

from __future__ import annotations

import operator
import time

import numpy as np
import pytest
import torch
import torch.fx as fx
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils.checkpoint import CheckpointPolicy

from aotgrad import _rust
from aotgrad.errors import (
    AotgradError,
    CompileError,
    FlowError,
    GraphError,
    GuardError,
    InternalError,
    PartitionError,
    TableError,
    TraceError,
    UnsupportedError,
)
from aotgrad.table import Flag, Kind, NodeTable, to_table
from graphs import joint_graph_of, mlp_joint, transformer_joint

aten = torch.ops.aten


def _mm_relu():
    def f(x, w):
        return (x @ w).relu()

    return joint_graph_of(
        f, torch.randn(2, 3, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    )


def _store(joint, **kw):
    table, nodes = to_table(joint.gm, num_fwd_outputs=joint.num_fwd_outputs, **kw)
    store = _rust.GraphStore.from_table(table)
    store.verify()
    return table, nodes, store


def test_known_tiny_graph_columns():
    table, nodes, store = _store(_mm_relu())
    names = [n.name for n in nodes]
    assert names == [
        "primals_1", "primals_2", "tangents_1", "mm", "relu", "alias", "alias_1",
        "threshold_backward", "t", "mm_1", "t_1", "mm_2",
    ]  # fmt: skip
    assert table.op_names == [
        "placeholder", "get_attr", "aten.mm.default", "aten.relu.default",
        "aten.alias.default", "aten.threshold_backward.default", "aten.t.default",
    ]  # fmt: skip
    assert table.kind.tolist() == [0, 0, 1] + [2] * 9
    assert table.op.tolist() == [0, 0, 0, 2, 3, 4, 4, 5, 6, 2, 6, 2]
    assert [table.args(i) for i in range(len(table))] == [
        [], [], [], [0, 1], [3], [4], [5], [2, 6], [0], [8, 7], [1], [7, 10],
    ]  # fmt: skip
    assert table.nbytes.tolist() == [24, 48, 32, 32, 32, 32, 32, 32, 24, 48, 48, 24]
    view, bw = int(Flag.VIEW), int(Flag.BACKWARD_REGION)  # the backward traced rows 6..
    assert table.flags.tolist() == [
        0, 0, 0, 0, 0, view, view | bw, bw, view | bw, bw, view | bw, bw,
    ]  # fmt: skip
    assert table.region.tolist() == [-1] * 12
    ch = table.const_hash.tolist()  # equal for calls of one op with equal constants
    assert ch[:3] == [0, 0, 0]
    assert ch[3] == ch[9] == ch[11] and ch[8] == ch[10] and ch[5] == ch[6]
    assert len({ch[3], ch[4], ch[5], ch[7], ch[8]}) == 5
    assert table.outputs.tolist() == [4, 11, 9]
    assert table.num_fwd_outputs == 1 and store.num_fwd_outputs == 1
    assert len(store) == 12
    assert list(store.tangent_derived()) == [0, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0, 1]
    assert store.args(9) == [8, 7] and store.users(7) == [9, 11] and store.users(0) == [3, 8]
    for col, dtype in NodeTable.COLUMNS:
        arr = getattr(table, col)
        assert arr.dtype == dtype and arr.flags.c_contiguous, col


def test_round_trip_through_the_store():
    table, _, store = _store(mlp_joint())
    back = NodeTable.from_store(store)
    for col, _ in NodeTable.COLUMNS:
        if col != "flags":
            np.testing.assert_array_equal(getattr(back, col), getattr(table, col), err_msg=col)
    derived = np.frombuffer(store.tangent_derived(), np.uint8).astype(bool)
    np.testing.assert_array_equal(back.flags & ~np.uint32(Flag.TANGENT_DERIVED), table.flags)
    np.testing.assert_array_equal((back.flags & Flag.TANGENT_DERIVED) != 0, derived)
    assert back.op_names == table.op_names and back.num_fwd_outputs == table.num_fwd_outputs
    again = _rust.GraphStore.from_table(back)
    again.verify()
    assert again.render_graph() == store.render_graph()


def test_op_flags_from_schemas_and_tags():
    table, nodes, _ = _store(mlp_joint())
    by_target = {}
    for node, f in zip(nodes, table.flags.tolist(), strict=True):
        by_target.setdefault(node.target, f)
    assert by_target[aten.bernoulli_.float] & Flag.RANDOM
    assert by_target[aten.bernoulli_.float] & Flag.IMPURE  # mutates its input
    assert by_target[aten.div_.Scalar] & Flag.IMPURE
    assert not by_target[aten.div_.Scalar] & Flag.VIEW  # an in-place return is a write
    assert by_target[aten.t.default] & Flag.VIEW
    assert by_target[aten.view.default] & Flag.VIEW
    assert not by_target[aten.mm.default] & (Flag.VIEW | Flag.RANDOM | Flag.IMPURE)
    table, nodes, _ = _store(mlp_joint(), compute_intensive=[aten.mm])
    mm = [f for n, f in zip(nodes, table.flags, strict=True) if n.target is aten.mm.default]
    assert mm and all(f & Flag.COMPUTE_INTENSIVE for f in mm)


def test_multi_output_and_non_tensor_values():
    table, nodes, _ = _store(joint_graph_of(nn.LayerNorm(4), torch.randn(2, 4)))
    row = {n.name: i for i, n in enumerate(nodes)}
    fwd, bwd = row["native_layer_norm"], row["native_layer_norm_backward"]
    assert table.flags[fwd] & Flag.MULTI_OUTPUT and not table.flags[fwd] & Flag.NON_TENSOR
    assert table.nbytes[fwd] == 2 * 4 * 4 + 2 * 4 + 2 * 4  # out, mean, rstd
    assert table.flags[bwd] & Flag.MULTI_OUTPUT  # (None, grad_w, grad_b)
    assert table.nbytes[bwd] == 4 * 4 + 4 * 4
    assert table.op_names[table.op[row["getitem"]]] == "_operator.getitem"
    assert table.outputs[-1] == -1  # the input's gradient is None


def _hand_graph() -> fx.GraphModule:
    """x: primal, t: tangent (roles in meta), n = sym_size(x, 0) (an int), y = mul(x, n), z = add(y, t)."""
    g = fx.Graph()
    x, t = g.placeholder("x"), g.placeholder("tangents_1")
    n = g.call_function(aten.sym_size.int, (x, 0))
    y = g.call_function(aten.mul.Tensor, (x, n))
    z = g.call_function(aten.add.Tensor, (y,), {"other": t, "alpha": 1})
    none = g.call_function(aten._assert_async.msg, (y, "oops"))
    g.output((y, None, z, z))
    x.meta["val"] = t.meta["val"] = torch.empty(3, 5)
    x.meta["aotgrad_role"], t.meta["aotgrad_role"] = "primal", "tangent"
    n.meta["val"] = 3
    for node in (y, z):
        node.meta["val"] = torch.empty(3, 5, dtype=torch.float64)
    none.meta["val"] = None
    return fx.GraphModule(torch.nn.Module(), g)


def test_hand_built_graph_values_kwargs_and_roles():
    gm = _hand_graph()
    table, nodes = to_table(gm, num_fwd_outputs=2)
    assert [n.op for n in nodes] == ["placeholder"] * 2 + ["call_function"] * 4
    assert table.kind.tolist() == [
        Kind.PRIMAL,
        Kind.TANGENT,
        Kind.CALL,
        Kind.CALL,
        Kind.CALL,
        Kind.CALL,
    ]
    assert table.flags[2] == Flag.SYMINT and table.nbytes[2] == 0
    assert table.nbytes.tolist() == [60, 60, 0, 120, 120, 0]
    assert table.flags[5] & Flag.NON_TENSOR and table.flags[5] & Flag.IMPURE
    assert table.args(4) == [3, 1]  # kwargs flattened after args
    assert table.outputs.tolist() == [3, -1, 4, 4]
    store = _rust.GraphStore.from_table(table)
    assert list(store.tangent_derived()) == [0, 1, 0, 0, 1, 0]
    # explicit roles override meta and names; meta overrides names
    table, _ = to_table(gm, num_fwd_outputs=2, roles=["tangent", "primal"])
    assert table.kind[:2].tolist() == [Kind.TANGENT, Kind.PRIMAL]
    gm.graph.find_nodes(op="placeholder")[1].meta["aotgrad_role"] = "primal"
    table, _ = to_table(gm, num_fwd_outputs=2)
    assert table.kind[:2].tolist() == [Kind.PRIMAL, Kind.PRIMAL]
    with pytest.raises(TableError, match="too few roles") as e:
        to_table(gm, num_fwd_outputs=2, roles=["primal"])
    assert e.value.column == "kind" and e.value.node == 1
    with pytest.raises(TableError, match="more roles"):
        to_table(gm, num_fwd_outputs=2, roles=["primal"] * 3)
    with pytest.raises(TableError, match="'weight'"):
        to_table(gm, num_fwd_outputs=2, roles=["primal", "weight"])


def test_checkpoint_tags_and_regions():
    joint = _mm_relu()
    mm, relu = (
        joint.gm.graph.find_nodes(op="call_function", target=t)[0]
        for t in (aten.mm.default, aten.relu.default)
    )
    mm.meta.update(recompute=CheckpointPolicy.PREFER_SAVE, ac_graph_id=0)
    relu.meta.update(recompute=CheckpointPolicy.MUST_RECOMPUTE, ac_graph_id=3)
    table, _, store = _store(joint)
    assert table.flags[3] == Flag.MUST_SAVE and table.region[3] == 0
    assert table.flags[4] == Flag.MUST_RECOMPUTE and table.region[4] == 3
    assert "flags=MUST_RECOMPUTE, region=3" in store.render(4, radius=0)


def test_symbolic_sizes_use_hints():
    def f(x):
        return (x * 2).sum(0)

    gm = make_fx(f, tracing_mode="symbolic")(torch.randn(6, 7))
    table, nodes = to_table(gm, num_fwd_outputs=1)
    row = {n.name: i for i, n in enumerate(nodes)}
    assert table.flags[row["mul"]] & Flag.SYMBOLIC_SIZE
    assert table.nbytes[row["mul"]] == 6 * 7 * 4
    assert table.nbytes[row["sum_1"]] == 7 * 4
    _rust.GraphStore.from_table(table).verify()


def test_unsupported_and_foreign_nodes():
    g = fx.Graph()
    x = g.placeholder("x")
    g.output(g.call_module("lin", (x,)))
    with pytest.raises(UnsupportedError, match="call_module node lin"):
        to_table(g, num_fwd_outputs=1)
    other = fx.Graph().placeholder("elsewhere")
    g = fx.Graph()
    x = g.placeholder("x")
    y = g.call_function(aten.add.Tensor, (x, other))
    g.output(y)
    with pytest.raises(TableError, match="elsewhere") as e:
        to_table(g, num_fwd_outputs=1)
    assert e.value.column == "arg_idx" and e.value.node == 1


def test_get_attr_reads_the_module_when_meta_is_missing():
    root = torch.nn.Module()
    root.register_buffer("c", torch.ones(4, 2))
    g = fx.Graph()
    c = g.get_attr("c")
    g.output(g.call_function(operator.neg, (c,)))
    table, _ = to_table(fx.GraphModule(root, g), num_fwd_outputs=1)
    assert table.kind.tolist() == [Kind.GET_ATTR, Kind.CALL]
    assert table.op_names[table.op[0]] == "get_attr" and table.nbytes[0] == 32
    assert table.op_names[table.op[1]] == "_operator.neg"
    _rust.GraphStore.from_table(table).verify()


def test_bad_tables_name_the_column_and_node():
    table, _, _ = _store(_mm_relu())
    table.arg_idx[3] = 9  # %5 = alias(%9): a forward reference
    with pytest.raises(TableError) as e:
        _rust.GraphStore.from_table(table)
    assert e.value.column == "arg_idx" and e.value.node == 5
    assert "column `arg_idx` at node 5" in str(e.value) and "%9" in str(e.value)
    table, _, _ = _store(_mm_relu())
    table.flags = table.flags.astype(np.int64)
    with pytest.raises(TableError, match=r"column `flags`.*expected uint32"):
        _rust.GraphStore.from_table(table)
    table, _, _ = _store(_mm_relu())
    table.kind[7] = 9
    with pytest.raises(TableError, match=r"column `kind` at node 7: unknown kind 9"):
        _rust.GraphStore.from_table(table)


def test_render_window_marks_the_node():
    _, _, store = _store(_mm_relu())
    text = store.render(4, radius=1)
    assert text.splitlines() == [
        "    ...",
        "    %3 = aten.mm.default(%0, %1)  [nbytes=32]",
        "==> %4 = aten.relu.default(%3)  [nbytes=32]",
        "    %5 = aten.alias.default(%4)  [nbytes=32, flags=VIEW]",
        "    ...",
    ]
    assert store.render_graph().endswith("return (%4 | %11, %9)\n")
    assert repr(store) == "<GraphStore nodes=12 edges=13 outputs=3 fwd_outputs=1>"
    with pytest.raises(IndexError):
        store.args(12)


def test_exception_hierarchy():
    for cls in (TableError, GraphError, FlowError, PartitionError, InternalError):
        assert issubclass(cls, AotgradError) and cls.__module__ == "aotgrad._rust"
    for cls in (TraceError, UnsupportedError, GuardError, CompileError):
        assert issubclass(cls, AotgradError) and not issubclass(cls, TableError)
    err = TraceError("cannot trace f", op="aten.nonzero.default", where="model.py:12")
    assert str(err) == "cannot trace f; op: aten.nonzero.default; at: model.py:12"
    assert err.op == "aten.nonzero.default" and str(TraceError("plain")) == "plain"


def test_a_rust_panic_is_an_internal_error():
    with pytest.raises(InternalError, match="deliberate panic"):
        _rust._panic_for_tests()
    _store(_mm_relu())  # the interpreter and the extension still work


@pytest.mark.slow
def test_transformer_joint_is_fast():
    joint = transformer_joint(64)
    to_table(joint.gm, num_fwd_outputs=joint.num_fwd_outputs)  # warm caches
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        table, nodes = to_table(joint.gm, num_fwd_outputs=joint.num_fwd_outputs)
        store = _rust.GraphStore.from_table(table)
        best = min(best, time.perf_counter() - t0)
    store.verify()
    assert 7000 <= len(nodes) == len(store) <= 9000
    kinds = np.bincount(table.kind, minlength=4)
    assert kinds[Kind.TANGENT] == 1 and kinds[Kind.CALL] > 6500
    # the goal is ~20 ms; allow for a loaded machine
    assert best < 0.25, f"joint graph -> verified store took {best * 1e3:.1f} ms"
