"""Soak round 51: programs the widened generator found, each compared with eager.

- Two groups of overlapping inputs, each written or changed in place (171093): an output
  that views a member of the second group (``return x2.diagonal()``) was remade of a
  member of the first one (its view ops, ``as_strided`` of the group's base, read the
  same), so the caller got another storage's values, ``._base`` and version.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

DT = torch.float64


@pytest.fixture(autouse=True)
def _quiet() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _two_groups() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Two leaves, each cloned and passed as two overlapping views laid out alike."""
    g = torch.Generator().manual_seed(7)
    l0 = torch.randn(8, 4, dtype=DT, generator=g).requires_grad_()
    l1 = torch.randn(8, 4, dtype=DT, generator=g).requires_grad_()
    b0, b1 = l0.clone(), l1.clone()
    return [b0[0:4], b0[2:6], b1[0:4], b1[2:6]], [l0, l1]


def _both_written(x0, x1, x2, x3):
    x1.mul_(2)
    x3.mul_(2)
    return (x2.diagonal(), x2[:, 1])


def _first_written_second_relaid(x0, x1, x2, x3):
    x1.mul_(2)
    x2.squeeze_(0)
    return (x2.diagonal(),)


def _first_relaid_and_written_second_relaid(x0, x1, x2, x3):
    x1.as_strided_((4, 4), (1, 4))
    x2.squeeze_(0)
    with torch.no_grad():
        x1.diagonal().copy_(x0.view(-1).sum())
    return (x2.diagonal(), x2[:, 1], x0.t())


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [_both_written, _first_written_second_relaid, _first_relaid_and_written_second_relaid],
    ids=lambda f: f.__name__.strip("_"),
)
def test_a_view_of_a_member_of_the_second_group(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, _two_groups, COMPILERS[compiler])
