"""Soak round 55: programs the generator found (seeds 218000-221999), each compared with
eager.

- A write through ``.data`` to one chunk of a base passed beside its sibling chunk
  (``x0, x1 = b.chunk(2)``; ``x0.data.mul_(2)``; 219543): the two inputs were joined
  into a synthetic base (as for a write eager's multi-output check follows), so the
  compiled node's edge went to the base's node, past ``x0``'s: ``autograd.grad(out,
  x0)`` was None where eager's is the gradient (a hook on ``x0`` missed it too).
  ``.data`` has a version counter of its own; eager links nothing through the base.
- A view that reinterprets an input's bytes (``x.view(torch.complex128)``), taken before
  the function changed the input's metadata (``x.as_strided_((4, 4), (1, 4))``), under
  ``no_grad`` with an input that requires grad (218050): rebuilt of the input as it is
  after the call, its dtype view raised ("self.stride(-1) must be 1 to view Double as
  ComplexDouble"); eager's was taken of the input as it was.
- An ``unbind`` output of an input the function re-laid (``x.t_()``, or a no-op
  ``squeeze_(0)``; 220992), and a slice of a ``chunk`` of a detached alias made a leaf
  (``x.detach().requires_grad_().chunk(2)[1][::2]``; 221854): remade as an ``as_strided``
  they lost their creation meta, so writing one in place (or reading its node after its
  base was written) ran where eager raises ("the output of a function that returns
  multiple views").
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager, assert_same_results

DT = torch.float64

pytestmark = pytest.mark.filterwarnings("ignore")


def _chunks() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(11)
    leaf = torch.randn(8, 4, dtype=DT, generator=g).requires_grad_()
    x0, x1 = leaf.clone().chunk(2)
    w = torch.randn(4, 4, dtype=DT, generator=g).requires_grad_()
    return [x0, x1, w], [leaf, w]


def _data_write_beside_sibling(x0, x1, w):
    t = x0 @ w + x1.sum()
    x0.data.mul_(2)
    return (t,)


def _grads_through_the_view(fn) -> list[Any]:
    (x0, x1, w), _ = _chunks()
    (out,) = fn(x0, x1, w)
    return list(torch.autograd.grad(out.sum(), [x0, x1, w], allow_unused=True))


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_data_write_to_a_chunk_beside_its_sibling_keeps_the_view_in_the_graph(
    compiler: str,
) -> None:
    want = _grads_through_the_view(_data_write_beside_sibling)
    got = _grads_through_the_view(COMPILERS[compiler](_data_write_beside_sibling))
    assert got[0] is not None, "autograd.grad with respect to the written chunk was None"
    assert_same_results(got, want)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_data_write_to_a_chunk_beside_its_sibling_like_eager(compiler: str) -> None:
    assert_like_eager(_data_write_beside_sibling, _chunks, COMPILERS[compiler])


def _grad_leaf() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    x = torch.arange(16.0, dtype=DT).reshape(4, 4).requires_grad_()
    y = torch.randn(4, 4, dtype=DT, generator=torch.Generator().manual_seed(2))
    return [x, x, y], []


def _complex_view_then_restrided(x0, x1, y):
    m, _ = x0.split(2)
    t = x1.view(torch.complex128)
    x1.as_strided_((4, 4), (1, 4))
    return y, m.transpose(0, 1), m[0], t.conj()


def _complex_view_alone(x0, x1, y):
    t = x1.view(torch.complex128)
    x1.as_strided_((4, 4), (1, 4))
    return (t,)


@pytest.mark.parametrize(
    "fn", [_complex_view_then_restrided, _complex_view_alone], ids=["with_views", "alone"]
)
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_dtype_view_taken_before_the_input_was_restrided(compiler: str, fn: Any) -> None:
    assert_like_eager(fn, _grad_leaf, COMPILERS[compiler], ctx=torch.no_grad)


def _unbind_of_relaid(x):
    x.t_()
    return (x.unbind(0)[3],)


def _unbind_after_noop_squeeze(x):
    x.squeeze_(0)
    return (x.unbind(0)[3],)


def _chunk_of_detached_leaf(x):
    t = x.detach().requires_grad_()
    _, b = t.chunk(2, -1)
    return b[::2], b.view_as(b)


def _clone_of_leaf() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    leaf = torch.randn(4, 4, dtype=DT, generator=torch.Generator().manual_seed(5))
    leaf.requires_grad_()
    return [leaf.clone()], [leaf]


def _write_first(outs: list[Any]) -> None:
    outs[0].mul_(2)


@pytest.mark.parametrize(
    "fn",
    [_unbind_of_relaid, _unbind_after_noop_squeeze, _chunk_of_detached_leaf],
    ids=["t_", "squeeze_", "detached_chunk"],
)
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_multi_output_views_remade_keep_eagers_check(compiler: str, fn: Any) -> None:
    assert_like_eager(fn, _clone_of_leaf, COMPILERS[compiler], after=_write_first)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_chunk_of_a_detached_leaf_is_checked_after_the_input_is_written(compiler: str) -> None:
    """Eager's ``b[::2]`` views the chunk of ``x.detach()``, which shares ``x``'s version
    counter: once the caller writes ``x``, reading the view's node raises."""
    seen = []
    for fn in (_chunk_of_detached_leaf, COMPILERS[compiler](_chunk_of_detached_leaf)):
        (x,), _ = _clone_of_leaf()
        x = x.detach()
        outs = fn(x)
        with torch.no_grad():
            x.mul_(2)
        with pytest.raises(RuntimeError, match="returns multiple views"):
            _ = outs[0].grad_fn
        seen.append([o.detach().clone() for o in outs])
    for got, want in zip(*seen[::-1]):
        torch.testing.assert_close(got, want)
