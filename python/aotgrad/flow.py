"""Max-flow min-cut over plain edge arrays, solved in Rust.

>>> import numpy as np
>>> from aotgrad.flow import min_cut
>>> value, side = min_cut(3, np.array([0, 1]), np.array([1, 2]), np.array([2.0, 1.0]), 0, 2)
>>> value, side.tolist()
(1.0, [True, True, False])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _rust

__all__ = ["min_cut"]


def min_cut(
    num_nodes: int, src: Any, dst: Any, capacity: Any, source: int, sink: int
) -> tuple[float, np.ndarray]:
    """Minimum ``source``-``sink`` cut of a directed network.

    Args:
        num_nodes: node ids are ``0 .. num_nodes - 1``.
        src, dst: int64 buffers (numpy arrays, ``array.array('q')``), one edge per
            entry, read zero-copy.
        capacity: float64 buffer (``array.array('d')`` or numpy); ``inf`` marks an
            edge that may not be cut.
        source, sink: the terminals.

    Returns:
        ``(value, source_side)``: the cut's capacity (the maximum flow value) and a
        read-only numpy ``bool`` array of ``num_nodes`` entries, ``True`` for the nodes the
        source reaches in the residual graph of a maximum flow.

    Raises:
        aotgrad.errors.FlowError: columns of different lengths or wrong dtypes, an id
            out of range, a negative or NaN capacity, ``source == sink``, or an
            unbounded flow (a path of infinite capacities).
    """
    value, mask = _rust.min_cut(num_nodes, src, dst, capacity, source, sink)
    return value, np.frombuffer(mask, dtype=np.bool_)
