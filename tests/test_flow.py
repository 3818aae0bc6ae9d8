"""aotgrad.flow.min_cut against networkx.minimum_cut, and its typed errors."""

from __future__ import annotations

import array
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotgrad.errors import AotgradError, FlowError
from aotgrad.flow import min_cut

CAPACITY = st.one_of(
    st.just(0.0),
    st.integers(1, 20).map(float),
    st.floats(0.0, 1e6, allow_nan=False, allow_infinity=False),
    st.just(math.inf),
)


@st.composite
def networks(draw):
    n = draw(st.integers(2, 30))
    node = st.integers(0, n - 1)
    edges = draw(st.lists(st.tuples(node, node, CAPACITY), max_size=4 * n))
    s = draw(node)
    t = draw(node.filter(lambda x: x != s))
    return n, edges, s, t


def columns(edges):
    src = np.array([e[0] for e in edges], dtype=np.int64)
    dst = np.array([e[1] for e in edges], dtype=np.int64)
    cap = np.array([e[2] for e in edges], dtype=np.float64)
    return src, dst, cap


def nx_graph(n, edges):
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for u, v, c in edges:
        if u == v:
            continue  # a self-loop never crosses a cut
        if g.has_edge(u, v):
            g[u][v]["capacity"] += c
        else:
            g.add_edge(u, v, capacity=c)
    return g


def cut_capacity(edges, side):
    return sum(c for u, v, c in edges if side[u] and not side[v])


@settings(max_examples=400, deadline=None)
@given(networks())
def test_matches_networkx(net):
    n, edges, s, t = net
    src, dst, cap = columns(edges)
    try:
        expected, _ = nx.minimum_cut(nx_graph(n, edges), s, t)
    except nx.NetworkXUnbounded:
        with pytest.raises(FlowError, match="unbounded"):
            min_cut(n, src, dst, cap, s, t)
        return
    value, side = min_cut(n, src, dst, cap, s, t)
    assert value == pytest.approx(expected, rel=1e-9, abs=1e-300)
    assert side.dtype == np.bool_ and side.shape == (n,)
    assert side[s] and not side[t]
    # The mask is a minimum cut: its capacity is the maximum flow value.
    assert cut_capacity(edges, side) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_array_array_and_numpy_agree():
    edges = [(0, 1, 16.0), (0, 2, 13.0), (1, 2, 10.0), (1, 3, 12.0), (2, 1, 4.0)]
    edges += [(2, 4, 14.0), (3, 2, 9.0), (3, 5, 20.0), (4, 3, 7.0), (4, 5, 4.0)]
    src, dst, cap = columns(edges)
    a = min_cut(6, src, dst, cap, 0, 5)
    b = min_cut(
        6,
        array.array("q", src.tolist()),
        array.array("q", dst.tolist()),
        array.array("d", cap.tolist()),
        0,
        5,
    )
    c = min_cut(6, memoryview(src), memoryview(dst), memoryview(cap), 0, 5)
    for value, side in (a, b, c):
        assert value == 23.0
        assert side.tolist() == [True, True, True, False, True, False]


def test_empty_network():
    e = np.array([], dtype=np.int64)
    value, side = min_cut(2, e, e, np.array([], dtype=np.float64), 0, 1)
    assert value == 0.0 and side.tolist() == [True, False]


OK_SRC = np.array([0, 1], dtype=np.int64)
OK_DST = np.array([1, 2], dtype=np.int64)
OK_CAP = np.array([1.0, 2.0])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((3, OK_SRC, OK_DST[:1], OK_CAP, 0, 2), "differ in length"),
        ((3, OK_SRC, np.array([1, 3]), OK_CAP, 0, 2), "edge 1: dst is 3"),
        ((3, np.array([-1, 1]), OK_DST, OK_CAP, 0, 2), "edge 0: src is -1"),
        ((3, OK_SRC, OK_DST, np.array([1.0, -2.0]), 0, 2), "capacity -2 is not a number >= 0"),
        ((3, OK_SRC, OK_DST, np.array([math.nan, 1.0]), 0, 2), "capacity NaN"),
        ((3, OK_SRC, OK_DST, OK_CAP, 2, 2), "source and sink are the same node 2"),
        ((3, OK_SRC, OK_DST, OK_CAP, 0, 5), "sink is 5"),
        ((3, OK_SRC, OK_DST, OK_CAP, -1, 2), "source is -1"),
        ((-3, OK_SRC, OK_DST, OK_CAP, 0, 2), "num_nodes is -3"),
        ((3, OK_SRC.astype(np.int32), OK_DST, OK_CAP, 0, 2), "`src` has dtype"),
        ((3, OK_SRC, OK_DST.astype(np.uint64), OK_CAP, 0, 2), "`dst` has dtype"),
        ((3, OK_SRC, OK_DST, OK_CAP.astype(np.float32), 0, 2), "`capacity` has dtype"),
        ((3, OK_SRC, OK_DST, np.array([1, 2]), 0, 2), "`capacity` has dtype"),
        ((3, [0, 1], OK_DST, OK_CAP, 0, 2), "`src` must be a buffer of int64"),
        ((3, OK_SRC.reshape(1, 2), OK_DST, OK_CAP, 0, 2), "1-dimensional"),
        ((3, np.array([0, 9, 1, 9])[::2], OK_DST, OK_CAP, 0, 2), "C-contiguous"),
        (
            (3, OK_SRC, OK_DST, np.array([math.inf, math.inf]), 0, 2),
            "unbounded: an infinite-capacity path",
        ),
    ],
)
def test_bad_input_raises_flow_error(args, message):
    with pytest.raises(FlowError, match=message) as info:
        min_cut(*args)
    assert isinstance(info.value, AotgradError)
