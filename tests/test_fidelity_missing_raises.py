"""Calls eager refuses that aotgrad let through (the soak's ``missing_raise:call``),
compared with eager (``eager_oracle.assert_like_eager``), one family per section:

- a stale view's node read inside the function: ``register_hook`` on an input that is a
  view autograd cannot rebuild once written (a ``split`` output written under
  ``no_grad`` or inference mode) raises eager's "Output 0 of Split is a view and its
  base or another view of its base has been modified inplace..." (soak 116384);
- an in-place metadata change (``t_``, ``unsqueeze_``...) of a view whose gradless base
  was given a history through another view: eager's node of the view is unset until
  read, so the change raises "a leaf Variable that requires grad is being used in an
  in-place operation." (soak 119569);
- under Dynamo, a graph traced for an input that was no leaf (a tensor an earlier call
  wrote with grad), called with a leaf that requires grad: Dynamo guards
  ``requires_grad``, not leaf-ness, and eager refuses the write to the leaf, or to a
  view of it (soak 71571, 71397).

Replay a seed with ``tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager, leaves


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _r(*shape: int, requires_grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64, requires_grad=requires_grad)


# ------------------------------------------- the node of a stale input view, read by a hook


def _split_row() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = _r(8, 4, requires_grad=True)
    first, _ = leaf.clone().split(4)  # CreationMeta.MULTI_OUTPUT_NODE
    return [first], [leaf]


def _restrided_then_hooked(x3):
    x3.as_strided_((4, 4), (1, 4))  # soak 116384 (under inference mode)
    x3.register_hook(lambda g: g * 2)  # eager reads the node: stale, it raises
    return x3 * 2


def _transposed_then_hooked(x3):
    x3.t_()
    x3.register_hook(lambda g: g * 2)
    return x3 * 2


def _written_then_hooked(x3):
    x3.mul_(2)
    x3.register_hook(lambda g: g * 2)
    return x3 * 2


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize(
    "fn", [_restrided_then_hooked, _transposed_then_hooked, _written_then_hooked]
)
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_hook_on_a_split_output_written_without_grad(
    compiler: str, fn: Callable, mode: str
) -> None:
    ctx = getattr(torch, mode)
    assert_like_eager(fn, _split_row, COMPILERS[compiler], ctx=ctx, calls=2)


# ------------------------- a metadata change of a view whose node eager has not made yet


def _sibling_written_then_transposed(x0):
    t1 = x0.detach() * 2  # no grad: the views of it have no node
    t3 = t1[1:]
    t1[0].add_(x0[0])  # t1 gets a history through another view; t3's node is unset
    t3.t_()  # eager: "a leaf Variable that requires grad ..."
    return t3 * 2


def _sub_view_written_then_unsqueezed(x0):
    t1 = x0.detach() * 2
    t3 = t1[1:]
    t3[0].add_(x0[0])  # through a view of t3: t3's own node is still unset
    t3.unsqueeze_(0)
    return t3 * 2


def _seed_119569(x0):
    with torch.enable_grad(), torch.no_grad():
        t1 = x0.matmul(x0)
        t2 = t1.abs()
    t3 = t1.transpose(0, 1)
    t4 = torch.where(t3 > 0, t3, t2)
    t3.diagonal().add_(x0.sum())
    t1.logsumexp(-1, keepdim=True)
    t3.transpose_(0, 1)
    return (t4,)


def _node_read_then_transposed(x0):
    t1 = x0.detach() * 2
    t3 = t1[1:]
    t1[0].add_(x0[0])
    y = t3 * x0[1:]  # records autograd on t3: eager makes its node here
    t3.t_()  # allowed
    return y, t3 * x0[1:].t()


def _view_of_a_base_with_history_transposed(x0):
    t1 = x0 * 2
    t3 = t1[1:]
    t1[0].add_(x0[0])
    t3.t_()  # a view with a node (stale): allowed, rebuilt from the base
    return t3 * 3, t1


_LEAF_VIEW_CHANGES = [
    _sibling_written_then_transposed,
    _sub_view_written_then_unsqueezed,
    _seed_119569,
    _node_read_then_transposed,
    _view_of_a_base_with_history_transposed,
]


@pytest.mark.parametrize("fn", _LEAF_VIEW_CHANGES)
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_metadata_change_of_a_view_whose_node_is_unset(compiler: str, fn: Callable) -> None:
    assert_like_eager(fn, leaves(((4, 4), True)), COMPILERS[compiler], calls=2)


# ------------------------- Dynamo: a graph traced for a non-leaf, called with a leaf


# (no output that requires grad: the oracle's backward after the first call would free
# the compiled node that ``x0``'s history then runs through, which eager's does not)


def _write_to_leaf(x0, x1):
    x0.mul_(x1)  # soak 71571
    return (x1.detach() * 2,)


def _write_to_view_of_leaf(x0, x1):
    x0[1:3].relu_()  # soak 71397
    x0[1:3].mul_(x1.sum())
    return (x1.detach().t(),)


class _NonLeafThenLeaf:
    """Per call, cycling: ``x0`` without grad (the call writes it with ``x1``'s: it is no
    leaf after), the same ``x0`` again (traced for a non-leaf that requires grad), then
    a fresh leaf that requires grad (Dynamo's guards pass: eager refuses the write)."""

    def __init__(self) -> None:
        self.calls = 0
        self.x0: torch.Tensor | None = None

    def __call__(self) -> tuple[list[Any], list[torch.Tensor]]:
        k, self.calls = self.calls % 3, self.calls + 1
        x1 = _r(4, 4, requires_grad=True)
        if k == 0:
            self.x0 = _r(4, 4)
        elif k == 2:
            x0 = _r(4, 4, requires_grad=True)
            return [x0, x1], [x0, x1]
        assert self.x0 is not None
        return [self.x0, x1], [x1]


@pytest.mark.parametrize("fn", [_write_to_leaf, _write_to_view_of_leaf])
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_written_input_traced_as_non_leaf_then_a_leaf(compiler: str, fn: Callable) -> None:
    assert_like_eager(fn, _NonLeafThenLeaf(), COMPILERS[compiler], calls=3)
