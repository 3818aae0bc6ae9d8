"""The Rust partitioners through the binding: result columns, options, typed errors."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aotgrad import _rust
from aotgrad.errors import AotgradError, GraphError, PartitionError

PRIMAL, TANGENT, CALL = 0, 1, 2


def table(rows, outputs, num_fwd_outputs, op_names):
    """A node table from ``(kind, op, args, nbytes, flags[, const_hash])`` rows (by
    default each row's const_hash is its index: no two rows merge)."""
    arg_ptr = np.cumsum([0] + [len(r[2]) for r in rows]).astype(np.uint32)
    return SimpleNamespace(
        version=_rust.FORMAT_VERSION,
        kind=np.array([r[0] for r in rows], dtype=np.uint8),
        op=np.array([r[1] for r in rows], dtype=np.uint32),
        arg_ptr=arg_ptr,
        arg_idx=np.array([a for r in rows for a in r[2]], dtype=np.uint32),
        nbytes=np.array([r[3] for r in rows], dtype=np.uint64),
        const_hash=np.array([r[5] if len(r) > 5 else i for i, r in enumerate(rows)], np.uint64),
        flags=np.array([r[4] for r in rows], dtype=np.uint32),
        region=np.full(len(rows), -1, dtype=np.int32),
        outputs=np.array(outputs, dtype=np.int32),
        num_fwd_outputs=num_fwd_outputs,
        op_names=op_names,
    )


OPS = ["placeholder", "get_attr", "aten.sin.default", "aten.cos.default", "aten.mul.Tensor"]


def sin_cos_store():
    """x -> a = sin(x) -> b = cos(a) (forward output); backward: dx = t * a."""
    rows = [
        (PRIMAL, 0, [], 1000, 0),
        (TANGENT, 0, [], 1000, 0),
        (CALL, 2, [0], 1000, 0),
        (CALL, 3, [2], 1000, 0),
        (CALL, 4, [1, 2], 1000, 0),
    ]
    return _rust.GraphStore.from_table(table(rows, [3, 4], 1, OPS))


def columns(p):
    return (
        np.frombuffer(p.placement, np.uint8).tolist(),
        np.frombuffer(p.saved, np.uint32).tolist(),
        np.frombuffer(p.saved_reason, np.uint8).tolist(),
        np.frombuffer(p.recomputed, np.uint32).tolist(),
    )


def test_min_cut_recomputes_and_default_saves():
    store = sin_cos_store()
    m = _rust.partition_min_cut(store)
    assert columns(m) == ([3, 2, 3, 1, 2], [0], [4], [2])
    assert (m.saved_bytes, m.num_saved_symints) == (1000, 0)
    _rust.check_partition(store, m)
    d = _rust.partition_default(store, None)
    assert columns(d) == ([1, 2, 3, 1, 2], [2], [0], [])
    _rust.check_partition(store, d)


def test_options_are_read_and_checked():
    store = sin_cos_store()
    p = _rust.partition_min_cut(
        store, _rust.PartitionOptions(ban_if_not_in_allowlist=False, long_chain=5)
    )
    assert np.frombuffer(p.saved, np.uint32).tolist() == [0]
    with pytest.raises(PartitionError, match="unknown partition option `nope`"):
        _rust.partition_min_cut(store, _rust.PartitionOptions(nope=True))
    with pytest.raises(PartitionError, match="`recompute_views` must be a bool"):
        _rust.partition_min_cut(store, _rust.PartitionOptions(recompute_views="yes"))
    with pytest.raises(PartitionError, match="`max_dist_from_bw` must be an int"):
        _rust.partition_default(store, _rust.PartitionOptions(max_dist_from_bw=-1))
    with pytest.raises(PartitionError, match="`cse` must be a bool"):
        _rust.partition_default(store, _rust.PartitionOptions(cse=1))
    for fn in (_rust.partition_min_cut, _rust.partition_default):
        for cse in (True, False):
            p = fn(store, _rust.PartitionOptions(cse=cse))
            assert np.frombuffer(p.rep, np.uint32).tolist() == [0, 1, 2, 3, 4]


def test_cse_merges_equal_calls_and_check_partition_checks_rep():
    """Two sin(x) with equal const_hash merge: the second has placement 0 and its reader
    (the backward's mul) reads the first."""
    rows = [
        (PRIMAL, 0, [], 1000, 0),
        (TANGENT, 0, [], 1000, 0),
        (CALL, 2, [0], 1000, 0, 7),  # a = sin(x)
        (CALL, 3, [2], 1000, 0),  # b = cos(a)
        (CALL, 2, [0], 1000, 0, 7),  # a2 = sin(x), the same value
        (CALL, 4, [1, 4], 1000, 0),  # dx = t * a2
    ]
    store = _rust.GraphStore.from_table(table(rows, [3, 5], 1, OPS))
    for fn in (_rust.partition_min_cut, _rust.partition_default):
        p = fn(store)
        assert np.frombuffer(p.rep, np.uint32).tolist() == [0, 1, 2, 3, 2, 5]
        assert np.frombuffer(p.placement, np.uint8)[4] == 0
        _rust.check_partition(store, p)
    rows[4] = (CALL, 2, [0], 1000, 0, 8)  # other constants: no merge
    store = _rust.GraphStore.from_table(table(rows, [3, 5], 1, OPS))
    assert np.frombuffer(_rust.partition_min_cut(store).rep, np.uint32).tolist() == list(range(6))


def test_tangent_derived_forward_output_is_a_graph_error():
    rows = [(PRIMAL, 0, [], 4, 0), (TANGENT, 0, [], 4, 0), (CALL, 4, [0, 1], 4, 0)]
    store = _rust.GraphStore.from_table(table(rows, [2], 1, OPS))
    for fn in (_rust.partition_min_cut, _rust.partition_default):
        with pytest.raises(GraphError, match="tangent-derived") as info:
            fn(store)
        assert isinstance(info.value, AotgradError) and info.value.node == 2


def test_unsatisfiable_graph_is_a_partition_error():
    non_tensor = 1 << 9
    rows = [(PRIMAL, 0, [], 0, non_tensor), (TANGENT, 0, [], 4, 0), (CALL, 4, [1, 0], 4, 0)]
    store = _rust.GraphStore.from_table(table(rows, [2], 0, OPS))
    with pytest.raises(PartitionError, match="neither saved nor recomputed"):
        _rust.partition_min_cut(store)


def test_check_partition_rejects_a_foreign_partition():
    store = sin_cos_store()
    rows = [(PRIMAL, 0, [], 4, 0), (TANGENT, 0, [], 4, 0), (CALL, 4, [1, 0], 4, 0)]
    other = _rust.GraphStore.from_table(table(rows, [2], 0, OPS))
    with pytest.raises(PartitionError, match="placement has 3 entries for 5 nodes"):
        _rust.check_partition(store, _rust.partition_min_cut(other))


def test_partition_options_are_typed_and_built_by_keyword():
    default = _rust.PartitionOptions()
    assert (default.cse, default.long_chain, default.max_dist_from_bw) == (True, 100, 1000)
    assert default.op_factors == {} and default.flops_per_byte > 0
    o = _rust.PartitionOptions(cse=False, long_chain=5, op_factors={"aten.gelu": 2.0})
    assert (o.cse, o.long_chain, o.op_factors) == (False, 5, {"aten.gelu": 2.0})
    assert "cse=False" in repr(o) and "long_chain=5" in repr(o)
    o.recompute_views = True
    assert o.recompute_views is True
    with pytest.raises(TypeError):
        o.cse = 1
    o.flops_per_byte = 0.0  # checked where the options are used
    with pytest.raises(PartitionError, match="flops_per_byte is 0"):
        _rust.partition_min_cut(sin_cos_store(), o)
    with pytest.raises(PartitionError, match="fused_factor is NaN"):
        _rust.PartitionOptions(fused_factor=float("nan"))
