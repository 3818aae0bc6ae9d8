"""Every kind of corrupt node table is rejected with a TableError naming the
column, and nothing a caller passes crashes the interpreter."""

from __future__ import annotations

import dataclasses
import types

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from torch import nn

from aotgrad import _rust
from aotgrad.errors import AotgradError, TableError
from aotgrad.table import NodeTable, to_table
from graphs import joint_graph_of, mlp_joint

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
COLUMNS = dict(NodeTable.COLUMNS)
PER_NODE = ("kind", "op", "nbytes", "const_hash", "flags", "region")


def _real_tables() -> list[NodeTable]:
    torch.manual_seed(0)
    joints = [mlp_joint(), joint_graph_of(nn.LayerNorm(4), torch.randn(2, 4))]
    return [to_table(j.gm, num_fwd_outputs=j.num_fwd_outputs)[0] for j in joints]


REAL = _real_tables()


@st.composite
def synthetic_tables(draw: st.DrawFn) -> NodeTable:
    """A valid random table: placeholders/get_attrs, and calls reading earlier rows."""
    n = draw(st.integers(0, 24))
    names = ["placeholder", "get_attr", "aten.mm.default", "aten.add.Tensor"]
    kind, op, arg_ptr, arg_idx = [], [], [0], []
    for i in range(n):
        k = draw(st.integers(0, 3)) if i else draw(st.integers(0, 1))
        kind.append(k)
        if k == 2:
            op.append(draw(st.integers(2, 3)))
            arg_idx += draw(st.lists(st.integers(0, i - 1), max_size=4))
        else:
            op.append(1 if k == 3 else 0)
        arg_ptr.append(len(arg_idx))
    outputs = draw(st.lists(st.integers(-1, n - 1), max_size=5))
    return NodeTable(
        kind=np.array(kind, np.uint8),
        op=np.array(op, np.uint32),
        arg_ptr=np.array(arg_ptr, np.uint32),
        arg_idx=np.array(arg_idx, np.uint32),
        nbytes=np.array(
            draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), np.uint64
        ),
        const_hash=np.array(
            draw(st.lists(st.integers(0, 2**64 - 1), min_size=n, max_size=n)), np.uint64
        ),
        flags=np.array(
            draw(st.lists(st.integers(0, 2**12 - 1), min_size=n, max_size=n)), np.uint32
        ),
        region=np.array(draw(st.lists(st.integers(-1, 5), min_size=n, max_size=n)), np.int32),
        outputs=np.array(outputs, np.int32),
        op_names=names,
        num_fwd_outputs=draw(st.integers(0, len(outputs))),
    )


tables = st.one_of(st.sampled_from(REAL), synthetic_tables())


def _copy(table: NodeTable) -> NodeTable:
    return dataclasses.replace(
        table,
        **{c: getattr(table, c).copy() for c in COLUMNS},
        op_names=list(table.op_names),
    )


def _rejects(table: object, column: str) -> TableError:
    with pytest.raises(TableError) as e:
        _rust.GraphStore.from_table(table)
    assert e.value.column == column, str(e.value)
    assert f"column `{column}`" in str(e.value)
    return e.value


@SETTINGS
@given(tables)
def test_valid_tables_are_accepted(table):
    store = _rust.GraphStore.from_table(table)
    store.verify()
    assert len(store) == len(table)


@SETTINGS
@given(tables, st.sampled_from([*PER_NODE, "arg_ptr", "arg_idx"]), st.booleans())
def test_wrong_length(table, column, grow):
    t = _copy(table)
    arr = getattr(t, column)
    if grow:
        arr = np.append(arr, arr[-1:] if len(arr) else np.zeros(1, arr.dtype)).astype(arr.dtype)
    else:
        assume(len(arr) > 0)
        arr = arr[:-1].copy()
    setattr(t, column, arr)
    _rejects(t, column)


@SETTINGS
@given(tables, st.data())
def test_out_of_range_values(table, data):
    t = _copy(table)
    n, m = len(t), len(t.outputs)
    choices = ["version", "num_fwd_outputs", "op_names"]
    choices += ["kind", "op", "arg_ptr", "flags", "region"] if n else []
    choices += ["arg_idx"] if len(t.arg_idx) else []
    choices += ["outputs"] if m else []
    column = data.draw(st.sampled_from(choices))
    row = data.draw(st.integers(0, max(n - 1, 0)))
    expected = column
    if column == "version":
        t.version = data.draw(
            st.integers(-(2**70), 2**70).filter(lambda v: v != _rust.FORMAT_VERSION)
        )
    elif column == "num_fwd_outputs":
        t.num_fwd_outputs = data.draw(
            st.one_of(st.integers(m + 1, 2**70), st.integers(-(2**70), -1), st.just("1"))
        )
    elif column == "op_names":
        assume(any(t.kind == 2))  # drop the call ops' names: their ids go out of range
        t.op_names = t.op_names[:2]
        expected = "op"
    elif column == "kind":
        t.kind[row] = data.draw(st.integers(4, 255))
    elif column == "op":
        t.op[row] = data.draw(st.integers(len(t.op_names), 2**32 - 1))
    elif column == "arg_ptr":
        if data.draw(st.booleans()):
            t.arg_ptr[0] = data.draw(st.integers(1, 2**32 - 1))
        else:  # offsets that decrease
            t.arg_ptr[row] = t.arg_ptr[row + 1] + 1
    elif column == "flags":
        t.flags[row] |= np.uint32(1 << data.draw(st.integers(14, 31)))  # bits 0-13 are flags
    elif column == "region":
        t.region[row] = data.draw(st.integers(-(2**31), -2))
    elif column == "arg_idx":  # a forward reference or a self-cycle
        j = data.draw(st.integers(0, len(t.arg_idx) - 1))
        reader = int(np.searchsorted(t.arg_ptr, j, side="right")) - 1
        t.arg_idx[j] = data.draw(st.integers(reader, 2**32 - 1))
    else:
        j = data.draw(st.integers(0, m - 1))
        t.outputs[j] = data.draw(st.one_of(st.integers(n, 2**31 - 1), st.integers(-(2**31), -2)))
    _rejects(t, expected)


BAD_DTYPES = {
    np.uint8: [np.int8, np.bool_, np.uint16],
    np.uint32: [np.int32, np.int64, np.uint64, np.float32, np.uint16],
    np.uint64: [np.int64, np.float64, np.uint32],
    np.int32: [np.uint32, np.int64, np.float32],
}


@SETTINGS
@given(tables, st.sampled_from(sorted(COLUMNS)), st.data())
def test_wrong_dtype_or_layout(table, column, data):
    t = _copy(table)
    arr = getattr(t, column)
    how = data.draw(st.sampled_from(["dtype", "strided", "2d", "list", "missing"]))
    if how == "dtype":
        bad = data.draw(st.sampled_from(BAD_DTYPES[COLUMNS[column]]))
        setattr(t, column, arr.astype(bad))
    elif how == "strided":
        assume(len(arr) >= 2)
        setattr(t, column, np.repeat(arr, 2)[::2])
        assert not getattr(t, column).flags.c_contiguous
    elif how == "2d":
        setattr(t, column, arr.reshape(1, -1))
    elif how == "list":
        setattr(t, column, arr.tolist())
    else:
        fields = {f.name: getattr(t, f.name) for f in dataclasses.fields(t)}
        del fields[column]
        t = types.SimpleNamespace(**fields)
    _rejects(t, column)


@pytest.mark.parametrize("op_names", ["placeholder", [b"placeholder"], None, [1, 2]])
def test_op_names_must_be_a_list_of_str(op_names):
    t = _copy(REAL[0])
    t.op_names = op_names
    _rejects(t, "op_names")


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {
            c: st.lists(st.integers(0, 40), max_size=12).map(lambda v, d=d: np.array(v).astype(d))
            for c, d in NodeTable.COLUMNS
        }
    ),
    st.integers(-2, 5),
)
def test_garbage_never_crashes(columns, num_fwd_outputs):
    columns["region"] = columns["region"].astype(np.int32) - 2
    columns["outputs"] = columns["outputs"].astype(np.int32) - 2
    t = NodeTable(**columns, op_names=["placeholder", "get_attr", "aten.mm.default"],
                  num_fwd_outputs=num_fwd_outputs)  # fmt: skip
    try:
        store = _rust.GraphStore.from_table(t)
    except AotgradError as e:
        assert isinstance(e, TableError), repr(e)
        return
    store.verify()  # whatever is accepted is a valid graph
    back = NodeTable.from_store(store)
    np.testing.assert_array_equal(back.arg_idx, t.arg_idx)
    np.testing.assert_array_equal(back.const_hash, t.const_hash)
