"""In-place metadata changes (``t_``, ``transpose_``, ``unsqueeze_``, ``as_strided_``...) of
views that do not require grad yet, then a write with grad, compared with eager
(``eager_oracle.assert_like_eager``).

Eager records a view of a tensor without grad too: a later write with grad through it
(or through a view of it) gives the base a history, and the view's node is rebuilt from
its geometry as it is then, the change included. The trace's stand-in recorded the
chain of view ops that made it, which leaves the change out: the gradient of the write
was taken through the untransposed view, silently wrong (soak 119993:
``x3 = l3[:, :4]; x3.t_(); x3[:, 1:3].sub_(x1)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = sorted(COMPILERS)


def _view_of_gradless_base(view: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], Any]:
    """A scalar leaf that requires grad, and a view of a base without grad."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        w = torch.randn((), dtype=torch.float64, requires_grad=True)
        base = torch.randn(4, 8, dtype=torch.float64)
        return [w, view(base)], [w]

    return make


_COLUMNS = _view_of_gradless_base(lambda b: b[:, :4])
_ROWS = _view_of_gradless_base(lambda b: b[1:3])


def _t_then_slice_written(w, x):
    x.t_()
    x[:, 1:3].sub_(w)
    return x, x[::2], x[:1]


def _transpose_then_column_written(w, x):
    x.transpose_(0, 1)
    x[:, 0].mul_(w)
    return x[1:], (x * 2).sum()


def _unsqueeze_then_written(w, x):
    x.unsqueeze_(0)
    x[:, 1].add_(w)
    return x.squeeze(0)[::2]


def _restrided_within_then_written(w, x):
    x.as_strided_((4, 2), (8, 1))
    x[1:].mul_(w)
    return x, x.t()


def _t_under_no_grad_then_written(w, x):
    with torch.no_grad():
        x.t_()
    x[1:3].sub_(w)
    return x[::2]


def _view_of_own_tensor_t_then_written(w, x):
    b = x.clone()  # made inside, without grad
    v = b[:, :4]
    v.t_()
    v[:, 1:3].sub_(w)
    return v[::2], b


_INPUT_VIEWS = [
    (_t_then_slice_written, _COLUMNS),
    (_transpose_then_column_written, _COLUMNS),
    (_unsqueeze_then_written, _ROWS),
    (_restrided_within_then_written, _COLUMNS),
    (_t_under_no_grad_then_written, _COLUMNS),
    (_view_of_own_tensor_t_then_written, _view_of_gradless_base(lambda b: b)),
]


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize(("fn", "make"), _INPUT_VIEWS, ids=[f.__name__ for f, _ in _INPUT_VIEWS])
def test_a_gradless_view_changed_in_place_then_written_with_grad(
    fn: Any, make: Any, compiler: str
) -> None:
    assert_like_eager(fn, make, COMPILERS[compiler])


@pytest.mark.parametrize("compiler", ENTRIES)
def test_called_twice_the_change_is_undone(compiler: str) -> None:
    # (soak 119993: the second call transposes the view back)
    assert_like_eager(_t_then_slice_written, _COLUMNS, COMPILERS[compiler], calls=2)
