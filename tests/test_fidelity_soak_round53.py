"""Soak round 53: programs the generator found (seeds 200000-211999), each compared with
eager.

- A custom Function's view of an intermediate (``ViewOf.apply(t)``) returned beside an
  input written with grad (201599): the outputs pass through the node that links the
  reads after the write (``runtime.post_write_link``), which gave a plain tensor back;
  eager's is a view, and writing it in place raises.
- A custom Function's output re-laid in place (``t = Sq.apply(x); t.transpose_(0, 1)``),
  views of it returned (210961): taken for views the Function made itself, they came
  back as the compiled Function's own views, whose in-place writes raise ("a function
  that returns multiple views"); eager's are views of ``t``, written freely.
- Called under ``no_grad``, ``retain_grad()`` on a chunk whose sibling the function wrote
  (211286): the runtime looked up the view's node first, which autograd refuses to rebuild;
  eager's ``retain_grad()`` runs.
- Views of a view input taken after the function re-laid it (``x.t_(); return x[0]``;
  211573): made of the input as it was, their nodes went past its new one, so
  ``autograd.grad(out, x)`` after the call missed their reads (the leaves' totals were
  right).
- Views of one input made before a write to another input of its storage (``v = x0[0];
  x1.mul_(2)`` under no_grad, 201324): the shared version count moved, so eager rebuilds
  ``v``'s node from the base's; the compiled call made ``v`` of ``x0`` after its write-back.
- Views of an output that retains grad (215713): the runtime gives such an output a node
  of its own; its views stayed of the old tensor (another ``._base``), and the retained
  ``.grad`` missed their gradients.
- A compiled node the backward reaches with no gradient at all (212055: a second call's
  outputs do not read the input the first call wrote): autograd materialised zeros for
  it, and the leaves behind it got 0 where eager's get None.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, SavedSquare, ViewOf, assert_like_eager, assert_same_results

DT = torch.float64

pytestmark = pytest.mark.filterwarnings("ignore")


def _written_view_and_other() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    l1 = torch.randn(8, 4, dtype=DT, generator=g).requires_grad_()
    x3 = torch.randn(4, 4, dtype=DT, generator=g)
    b1 = l1.clone()
    return [b1[:4], x3], [l1]


def _custom_view_beside_written_input(x1, x3):
    x1.mul_(2)
    t = torch.maximum(x3, x1)
    return ViewOf.apply(t), x1


def _write_first(outs: list[Any]) -> None:
    outs[0].mul_(2)


@pytest.mark.parametrize("after", [None, _write_first], ids=["read", "written"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_custom_view_of_an_intermediate_beside_a_written_input(
    compiler: str, after: Callable | None
) -> None:
    assert_like_eager(
        _custom_view_beside_written_input,
        _written_view_and_other,
        COMPILERS[compiler],
        after=after,
    )


def _leaf() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    x = torch.randn(4, 4, dtype=DT, generator=torch.Generator().manual_seed(5))
    x.requires_grad_()
    return [x], [x]


def _relaid_custom_output(x0):
    t1 = SavedSquare.apply(x0)
    t1.transpose_(0, 1)
    return x0, t1.expand(2, 4, 4), t1.as_strided((2, 2), (1, 2)), t1[:, 1]


def _relaid_custom_output_unsqueezed(x0):
    t1 = SavedSquare.apply(x0 * 2)
    t1.unsqueeze_(0)
    return t1[0], t1.squeeze(0).t()


def _write(k: int) -> Callable[[list[Any]], None]:
    def write(outs: list[Any]) -> None:
        outs[k].mul_(2)

    return write


@pytest.mark.parametrize("written", [None, 1, 2], ids=["read", "first_view", "second_view"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [_relaid_custom_output, _relaid_custom_output_unsqueezed],
    ids=lambda f: f.__name__.strip("_"),
)
def test_views_of_a_custom_output_relaid_in_place(
    fn: Callable, compiler: str, written: int | None
) -> None:
    after = None if written is None else _write(written if fn is _relaid_custom_output else 1)
    assert_like_eager(fn, _leaf, COMPILERS[compiler], after=after)


def _retained_chunk_beside_written_one(x0):
    m0, m1 = x0.chunk(2, -1)
    m1.mul_(2)
    m0.retain_grad()
    return x0, m0


def _clone_of_leaf() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    [x], leaves = _leaf()
    return [x.clone()], leaves


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_retained_view_made_under_no_grad_beside_a_written_sibling(compiler: str) -> None:
    """Called under no_grad (211286): the chunk is a view made without grad, its sibling
    written; eager's ``retain_grad()`` runs, the compiled call raised looking up the
    view's node (autograd refuses to rebuild it)."""
    assert_like_eager(
        _retained_chunk_beside_written_one, _clone_of_leaf, COMPILERS[compiler], ctx=torch.no_grad
    )


# ---------------- views of an input taken after the function re-laid it (211573)
#
# ``x.t_(); return x[0]`` for ``x`` a view in the caller that requires grad: eager's
# ``x[0]`` is taken of ``x`` as re-laid, so its node reaches ``x``'s new one, and
# ``autograd.grad(out, x)`` after the call sees its gradient. The compiled call made
# every view of a re-laid input of the input as it was (right for views taken before
# the change), past that node: ``x``'s gradient missed those reads.


def _t_then_select(x):
    x.t_()
    return x[0], x * 2


def _select_t_select(x):
    v = x[0]
    x.t_()
    return v, x[1], x


def _unsqueezed_then_viewed(x):
    x.unsqueeze_(0)
    return x.squeeze(0).t(), x


def _as_strided_then_t(x):
    x.as_strided_((2, 2), (4, 1))
    return x.t(), x


def _as_strided_offset_then_views(x):
    x.as_strided_((2, 2), (1, 4), 2)
    return x.t(), x[0]


def _written_relaid_then_viewed(x):
    x.mul_(2)
    x.t_()
    return x[0], x.t()


RELAID = [
    _t_then_select,
    _select_t_select,
    _unsqueezed_then_viewed,
    _as_strided_then_t,
    _as_strided_offset_then_views,
    _written_relaid_then_viewed,
]


def _grads_after_relaid(fn: Callable, compiler: Callable | None, as_view: bool) -> list[Any]:
    leaf = torch.arange(16.0, dtype=DT).reshape(4, 4).requires_grad_()
    base = leaf.clone()
    x = base[:, :] if as_view else base
    return _grads_asked(fn, compiler, [x], [x, leaf])


def _grads_asked(
    fn: Callable, compiler: Callable | None, args: list[Any], asked: list[Any]
) -> list[Any]:
    """``autograd.grad`` of ``fn(*args)``'s outputs (cotangents 1, 2, ...) for ``asked``."""
    outs = (fn if compiler is None else compiler(fn))(*args)
    cots = [torch.full_like(o, k + 1.0) for k, o in enumerate(outs)]
    return list(torch.autograd.grad(outs, asked, cots, allow_unused=True))


@pytest.mark.parametrize("as_view", [True, False], ids=["view_input", "clone_input"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", RELAID, ids=lambda f: f.__name__.strip("_"))
def test_views_taken_after_a_relayout_reach_the_inputs_new_node(
    fn: Callable, compiler: str, as_view: bool
) -> None:
    want = _grads_after_relaid(fn, None, as_view)
    got = _grads_after_relaid(fn, COMPILERS[compiler], as_view)
    assert_same_results(got, want)


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", RELAID, ids=lambda f: f.__name__.strip("_"))
def test_views_taken_after_a_relayout_like_eager(fn: Callable, compiler: str) -> None:
    def view_input() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        [x], leaves = _leaf()
        return [x.clone()[:, :]], leaves

    assert_like_eager(fn, view_input, COMPILERS[compiler])


# --------- views of one input made before a write to another of its storage (201324)
#
# ``v = x0[0]`` then ``x1.mul_(2)`` under no_grad, ``x0`` and ``x1`` disjoint views of
# one base: the write moves the base's version count, which ``x0`` and ``v`` share, so
# eager rebuilds ``v``'s node from the base's, past ``x0``'s (``autograd.grad(v, x0)``
# after the call is None). The compiled call made ``v`` of ``x0`` after its write-back.


def _view_then_sibling_no_grad_write(x0, x1):
    v = x0[0]
    with torch.no_grad():
        x1.mul_(2)
    return v, x1 * 1


def _view_then_sibling_no_grad_diagonal_write(x0, x1):
    t = x0.t()
    with torch.no_grad():
        x1.diagonal().zero_()
    return t * 1, t, x1.sum()


def _sibling_no_grad_write_then_view(x0, x1):
    with torch.no_grad():
        x1.mul_(2)
    v = x0[0]
    return v, x1 * 1


def _view_then_sibling_write(x0, x1):
    v = x0[0]
    x1.mul_(2)
    return v, x1


SIBLINGS = [
    _view_then_sibling_no_grad_write,
    _view_then_sibling_no_grad_diagonal_write,
    _sibling_no_grad_write_then_view,
    _view_then_sibling_write,
]


def _grads_of_siblings(fn: Callable, compiler: Callable | None, overlap: bool) -> list[Any]:
    leaf = torch.arange(32.0, dtype=DT).reshape(8, 4).requires_grad_()
    base = leaf.clone()
    x0, x1 = (base[0:4], base[2:6]) if overlap else (base[:4], base[4:])
    return _grads_asked(fn, compiler, [x0, x1], [x0, x1, base, leaf])


@pytest.mark.parametrize("overlap", [False, True], ids=["disjoint", "overlapping"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", SIBLINGS, ids=lambda f: f.__name__.strip("_"))
def test_views_made_before_a_sibling_write_are_rebuilt_from_the_base(
    fn: Callable, compiler: str, overlap: bool
) -> None:
    want = _grads_of_siblings(fn, None, overlap)
    got = _grads_of_siblings(fn, COMPILERS[compiler], overlap)
    assert_same_results(got, want)


def _retained_with_views(x0, x1):
    t1 = x1.pow(2)
    t2 = torch.mm(x0, x1)
    t2.retain_grad()
    return t1, t2[1:3], t2, t2[0]


def _two_leaves() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    g = torch.Generator().manual_seed(9)
    x0 = torch.randn(4, 4, dtype=DT, generator=g).requires_grad_()
    x1 = torch.randn(4, 4, dtype=DT, generator=g).requires_grad_()
    return [x0, x1], [x0, x1]


def _retained_grad_with_views(compiler: Callable | None) -> list[Any]:
    args, _ = _two_leaves()
    outs = (_retained_with_views if compiler is None else compiler(_retained_with_views))(*args)
    sum(o.sum() * (k + 1) for k, o in enumerate(outs)).backward()
    return [outs[2].grad, *([float(o._base is outs[2])] for o in outs)]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_views_of_a_retained_output_are_its_views(compiler: str) -> None:
    """``t.retain_grad()`` on an output (not the compiled node's first) with views of it
    returned too (215713): the runtime gave ``t`` a node of its own, the views stayed of
    the old tensor: their ``._base`` was another, and ``t.grad`` missed their gradients."""
    assert_like_eager(_retained_with_views, _two_leaves, COMPILERS[compiler])
    got = _retained_grad_with_views(COMPILERS[compiler])
    want = _retained_grad_with_views(None)
    assert_same_results(
        [torch.tensor(g) if isinstance(g, list) else g for g in got],
        [torch.tensor(w) if isinstance(w, list) else w for w in want],
    )


def _written_beside_unrelated_outputs(x0, x2, x3):
    t1 = x2.clamp(-0.5, 0.5)
    x0.lerp_(x3, 0.1)
    x2.requires_grad_()
    return t1.tanh(), t1 + t1


def _grads_through_two_calls(compiler: Callable | None) -> list[Any]:
    fn = (
        _written_beside_unrelated_outputs
        if compiler is None
        else compiler(_written_beside_unrelated_outputs)
    )
    g = torch.Generator().manual_seed(4)
    x0 = torch.randn(4, 4, dtype=DT, generator=g)
    x2 = torch.randn((), dtype=DT, generator=g)
    x3 = torch.randn(4, 4, dtype=DT, generator=g).requires_grad_()
    first = fn(x0, x2, x3)
    second = fn(x0, x2, x3)  # (x0 requires grad now: written from x3)
    outs = [o for o in (*first, *second) if o.requires_grad]
    torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
    return [x2.grad, x3.grad]


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_node_no_output_of_reaches_gives_none(compiler: str) -> None:
    """212055: the second call's outputs do not read ``x0``; the first call's node is
    still on the graph (through ``x0``'s write), and the engine calls it with no
    gradient at all: autograd materialised zeros for it, and ``x3.grad`` became 0 where
    eager's is None."""
    assert_same_results(
        _grads_through_two_calls(COMPILERS[compiler]), _grads_through_two_calls(None)
    )


def _relaid_view_then_sibling_no_grad_write(x0, x1):
    x0.t_()
    v = x0[0]
    with torch.no_grad():
        x1.mul_(2)
    return (v,)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_view_taken_after_a_relayout_then_a_sibling_write_is_of_the_base(compiler: str) -> None:
    """Taken after ``x0``'s re-lay, then a write to ``x1`` (same storage) moved the shared
    version count: eager rebuilds the view's node from the base's, past ``x0``'s; the
    runtime remade it of the base and then of ``x0`` again (the re-lay's step ran last)."""
    fn = _relaid_view_then_sibling_no_grad_write
    want = _grads_of_siblings(fn, None, overlap=False)
    got = _grads_of_siblings(fn, COMPILERS[compiler], overlap=False)
    assert_same_results(got, want)
