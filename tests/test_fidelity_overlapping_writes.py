"""In-place writes to tensors whose elements share memory (views of an ``expand()``),
compared with eager (``eager_oracle.assert_like_eager``). Eager allows the fills
(``fill_``, ``zero_``, ``masked_fill_``, ``index_fill_``, ``t[i] = number``) and its
backward then raises; functionalization wrote them back summed over the repeated
elements (``x.expand(2, 4, 4).zero_()`` left ``-x``: silently wrong values).
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, assert_like_eager, leaf_clone


@pytest.fixture(autouse=True)
def _quiet_expanded_write_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Use of .* on expanded tensors")
        yield


def _zero_expanded(x):
    x.expand(2, 4, 4).zero_()
    return (x * 1,)


def _zero_split_of_expanded(x):
    t = x.reshape(2, -1).expand(2, 2, 8)
    (m,) = t.split(2)
    m.zero_()
    return (t.diagonal(dim1=1, dim2=2),)


def _masked_fill_expanded(x):
    x.expand(2, 4, 4).masked_fill_(torch.arange(32).view(2, 4, 4) % 3 == 0, 2.0)
    return (x * 1,)


def _index_fill_along_a_repeat(x):
    x.unsqueeze(1).expand(4, 3, 4).index_fill_(1, torch.tensor([1]), -1.0)
    return (x.sin(),)


def _index_fill_across_repeats(x):
    x.unsqueeze(1).expand(4, 3, 4).index_fill_(2, torch.tensor([0, 2]), -1.0)
    return (x.sin(),)


def _fill_expanded_intermediate(x):
    y = x * 2
    y.expand(3, 4, 4)[1:].fill_(0.5)
    return (y, x)


def _zero_column_of_expanded(x):
    x.expand(2, 4, 4)[:, 1].zero_()
    return (x,)


def _setitem_number(x):
    x.expand(2, 4, 4)[:, 1] = 3.0
    return (x.exp(),)


def _setitem_no_overlap_left(x):
    x.expand(2, 4, 4)[0, 1] = 3.0  # the view written has no repeats: eager's backward runs
    return (x,)


def _setitem_tensor(x):
    x.expand(2, 4, 4)[:, 1:3] = torch.tensor(2.0, dtype=torch.float64)  # eager's copy_ raises
    return (x,)


def _setitem_mask(x):
    t = x.expand(3, 4, 4)
    t[t > 0] = 0.0  # eager's is a masked_fill_
    return (x.cos(),)


def _copy_expanded_into_itself(x):
    t = x.expand(2, 4, 4)
    with torch.no_grad():
        t.copy_(t)  # eager copies nothing (soak seed 25529); its version moves
    return (t.transpose(0, 1), x)


def _plain() -> tuple[list[Any], list[torch.Tensor]]:
    return [torch.randn(4, 4, dtype=torch.float64)], []


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [
        _zero_expanded,
        _zero_split_of_expanded,
        _masked_fill_expanded,
        _index_fill_along_a_repeat,
        _index_fill_across_repeats,
        _fill_expanded_intermediate,
        _zero_column_of_expanded,
        _setitem_number,
        _setitem_no_overlap_left,
        _setitem_tensor,
        _setitem_mask,
        _copy_expanded_into_itself,
    ],
)
@pytest.mark.parametrize("make", [_plain, leaf_clone(4, 4)])
def test_fill_through_an_expanded_view_is_eagers(fn: Any, make: Any, compiler: str) -> None:
    """Values as eager's; with grad, the backward raises eager's overlap error where it
    passes the write (and runs where the written view has no repeats)."""
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _index_put_expanded(x):
    x.expand(2, 4, 4)[:, torch.tensor([1, 2])] = 3.0
    return (x,)


def test_advanced_index_write_to_an_expanded_view_is_refused_by_name() -> None:
    x = torch.randn(4, 4)
    before = x.clone()
    with pytest.raises(UnsupportedError, match="share memory"):
        aotgrad.aot_function(_index_put_expanded, aotgrad.nop)(x)
    assert torch.equal(x, before)
