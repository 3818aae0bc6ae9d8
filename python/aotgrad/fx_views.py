"""Chains of view ops in an FX graph: the value a node's storage belongs to. Every view
of a value shares its storage and version counter, and functionalization regenerates a
view wherever it is read again (``t[0]`` returned and ``t[0].sin()``: two ``select``
nodes), so checks of saved and written storage go through the chain's root.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch.fx as fx

__all__ = ["view_chain", "view_root"]


def view_chain(node: Any) -> Iterator[Any]:
    """``node``, then what it is a view of, and so on (at most 64 steps)."""
    yield node
    for _ in range(64):
        target = getattr(node, "target", None)
        if not (
            getattr(target, "is_view", False) and node.args and isinstance(node.args[0], fx.Node)
        ):
            return
        node = node.args[0]
        yield node


def view_root(node: Any) -> Any:
    """The value whose storage ``node`` views (``node`` itself if no view)."""
    *_, root = view_chain(node)
    return root
