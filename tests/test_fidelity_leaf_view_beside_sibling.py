"""A soak find about a leaf view (``x2 = l[2:6]; x2.requires_grad_()``) written beside
an overlapping view of its base, compared with eager (``eager_oracle.assert_like_eager``):
whether the write is allowed depends on whether a write with grad gave the base a history
first. The seeds are the soak's (``benches/fidelity_soak.py``), replayable with
``tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

# ---------------- a leaf view written beside an overlapping view of its base (90000-)
# Eager's leaf view ``x2 = l[2:6]; x2.requires_grad_()`` is a leaf no more once a write
# with grad through another view of ``l`` gives ``l`` a history: a write to it is then
# allowed (soak 95610, 96643, 98119: refused, where eager runs). Without that write, or
# with it under no_grad, eager refuses, and so does aotgrad.


def _overlapping_leaf_views():
    l1 = torch.randn(8, 4, dtype=torch.float64)
    x1, x2 = l1[0:4], l1[2:6]
    x2.requires_grad_()
    w = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x1, x2, w], [x2, w]


def _sibling_written_with_grad_first(x1, x2, w):
    x1 += w.sum()
    x2[:, 1:3].add_(1)
    return x1 * 2, x2 * 3


def _sibling_written_under_no_grad_first(x1, x2, w):
    with torch.no_grad():
        x1 += w.sum()
    x2[:, 1:3].add_(1)  # x2 is still a leaf: eager refuses
    return x1 * 2


def _leaf_view_written_first(x1, x2, w):
    x2.mul_(2)  # eager refuses
    x1 += w.sum()
    return x1


# (through torch.compile, Dynamo's own fakification of x2 fails, backend="eager" too)
@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
@pytest.mark.parametrize(
    "fn",
    [
        _sibling_written_with_grad_first,
        _sibling_written_under_no_grad_first,
        _leaf_view_written_first,
    ],
)
def test_a_leaf_view_beside_a_sibling_written_with_grad(fn: Any, compiler: str) -> None:
    assert_like_eager(fn, _overlapping_leaf_views, COMPILERS[compiler], calls=2)
