"""Inputs that are disjoint views of one base (``b[:4]``, ``b[4:]``): eager's views share
their base's history, so a write that gives one a history (``x2.add_(w)``, ``w``
requiring grad, the base not) gives the base one, and eager rebuilds every other view
from it: ``x3 * 2`` requires grad (its gradient reaching ``w`` is zero, but it is there:
``w.grad`` is a zero tensor, not ``None``, and a backward through it alone runs).
aotgrad traced the views as independent inputs: the output did not require grad and
the backward raised (soak seeds 29514, 36176; torch's AOT Autograd does the same)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

DT = torch.float64


def _raises(fn: Callable, args: list[Any]) -> bool:
    try:
        fn(*args)
    except Exception:  # whatever eager or Dynamo raises
        return True
    return False


def _check(fn: Callable, make: Callable, compiler: str) -> None:
    """``assert_like_eager``; under Dynamo, skipped where Dynamo itself (``backend="eager"``)
    departs from eager: it asserts on a sibling that gained requires_grad (torch 2.16)."""
    if compiler.startswith("dynamo"):
        torch._dynamo.reset()
        dynamo = _raises(torch.compile(fn, backend="eager"), make()[0])
        torch._dynamo.reset()
        if dynamo != _raises(fn, make()[0]):
            pytest.skip("Dynamo itself (backend='eager') departs from eager")
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2)


def _rows(base_requires_grad: bool | None) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    """``w`` (requires grad), then two disjoint row views of one base: a clone of a
    leaf (``True``/``False``: whether it requires grad) or a fresh tensor (``None``)."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        w = torch.randn(4, 4, dtype=DT, requires_grad=True)
        leaf = torch.randn(8, 4, dtype=DT, requires_grad=bool(base_requires_grad))
        base = leaf if base_requires_grad is None else leaf.clone()
        grads = [w, leaf] if base_requires_grad else [w]
        return [w, base[:4], base[4:]], grads

    return make


def _columns() -> tuple[list[Any], list[torch.Tensor]]:
    """Column blocks of a 4x8 base: disjoint bytes, interleaved rows."""
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    base = torch.randn(4, 8, dtype=DT)
    return [w, base[:, :4], base[:, 4:]], [w]


def _three() -> tuple[list[Any], list[torch.Tensor]]:
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    base = torch.randn(12, 4, dtype=DT).clone()
    return [w, base[:4], base[4:8], base[8:].t()], [w]


def _write_then_read_sibling(w, x2, x3):
    x2.add_(w)
    return x3 * 2


def _write_then_return_view_of_sibling(w, x2, x3):
    x2.mul_(w)
    return x3[1:3], x2.sum()


def _write_under_no_grad(w, x2, x3):
    with torch.no_grad():
        x2.add_(w)
    return x3 * 2, w * 3


def _write_without_grad_value(w, x2, x3):
    x2.add_(1.0)
    return x3 * 2, w.sin()


def _sibling_read_before_and_after(w, x2, x3):
    before = x3 * 2
    x2.copy_(w)
    return before, x3.exp()


def _detached_sibling(w, x2, x3):
    x2.add_(w)
    return x3.detach() + 1, x3 + 1


def _three_siblings(w, x2, x3, x4):
    x3.add_(w)
    return x2 * 2, x4 + 1


PROGRAMS = [
    _write_then_read_sibling,
    _write_then_return_view_of_sibling,
    _write_under_no_grad,
    _write_without_grad_value,
    _sibling_read_before_and_after,
    _detached_sibling,
]


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", PROGRAMS)
@pytest.mark.parametrize("base", [False, None, True], ids=["clone", "fresh", "clone_rg"])
def test_write_through_one_view_is_seen_by_its_siblings(fn: Any, base: Any, compiler: str) -> None:
    _check(fn, _rows(base), compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", PROGRAMS[:2])
def test_column_siblings(fn: Any, compiler: str) -> None:
    _check(fn, _columns, compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_three_siblings_one_transposed(compiler: str) -> None:
    _check(_three_siblings, _three, compiler)


@pytest.mark.parametrize("compiler", [c for c in COMPILERS if not c.startswith("dynamo")])
def test_sibling_output_requires_grad_and_backward_runs(compiler: str) -> None:
    """The pinned facts, not just equality: the sibling's output requires grad, and a
    backward through it alone gives ``w`` a zero gradient, as eager's does."""
    (w, x2, x3), _ = _rows(False)()
    out = COMPILERS[compiler](_write_then_read_sibling)(w, x2, x3)
    assert out.requires_grad and x3.requires_grad
    out.sum().backward()
    assert w.grad is not None
    torch.testing.assert_close(w.grad, torch.zeros_like(w))


# --------------- siblings autograd made otherwise: chunk() outputs, no_grad views


def _chunks(base_requires_grad: bool) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        w = torch.randn(4, 4, dtype=DT, requires_grad=True)
        leaf = torch.randn(8, 4, dtype=DT, requires_grad=base_requires_grad)
        c0, c1 = leaf.clone().chunk(2)
        return [w, c0, c1], [w, leaf] if base_requires_grad else [w]

    return make


def _base_and_chunk() -> tuple[list[Any], list[torch.Tensor]]:
    leaf = torch.randn(8, 4, dtype=DT, requires_grad=True)
    base = leaf.clone()
    return [torch.randn(8, 4, dtype=DT), base, base.chunk(2)[1]], [leaf]


def _write_base_under_no_grad_then_read_chunk(w, b, c1):
    with torch.no_grad():
        b.add_(w)
    return c1 * 2


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", [_write_then_read_sibling, _write_under_no_grad])
@pytest.mark.parametrize("rg", [True, False])
def test_chunk_siblings_keep_their_multi_output_checks(fn: Any, rg: bool, compiler: str) -> None:
    """A write with grad through one ``chunk()`` output raises as eager's (the siblings
    joined to one synthetic base were rebuilt as plain views: it ran)."""
    _check(fn, _chunks(rg), compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_chunk_read_after_its_base_was_written_raises(compiler: str) -> None:
    """Reading a ``chunk()`` output whose base was written (under no_grad too) raises in
    eager: "... its base or another view of its base has been modified inplace"."""
    _check(_write_base_under_no_grad_then_read_chunk, _base_and_chunk, compiler)


# ----------- a Dynamo graph compiled for separate tensors, called with views of one


class _WritesFirst(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4, dtype=DT)

    def forward(self, a, b):
        a.mul_(2)
        return self.lin(b + 1)


@pytest.mark.parametrize("rows", [(slice(0, 4), slice(2, 6)), (slice(0, 4), slice(4, 8))])
def test_dynamo_graph_is_not_reused_when_inputs_alias_otherwise(rows: Any) -> None:
    """Dynamo's guards pass for two rows of one tensor where the graph was compiled for
    two tensors: the graph wrote ``a`` without ``b`` seeing it (``b + 1`` read the old
    rows; torch's ``aot_eager`` too). aotgrad's forward checks how the written inputs
    share storage and guards such a call itself."""
    torch.manual_seed(0)
    m = _WritesFirst()
    torch._dynamo.reset()
    g = torch.compile(m, backend="aotgrad_eager")
    g(torch.randn(4, 4, dtype=DT), torch.randn(4, 4, dtype=DT))
    x = torch.randn(8, 4, dtype=DT)
    xe = x.clone()
    out, expected = g(x[rows[0]], x[rows[1]]), m(xe[rows[0]], xe[rows[1]])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x, xe)
    grads = torch.autograd.grad(out.sum(), list(m.parameters()))
    for got, want in zip(grads, torch.autograd.grad(expected.sum(), list(m.parameters()))):
        torch.testing.assert_close(got, want)


def _retain_sibling_after_write(w, x2, x3):
    x2.add_(w)
    x3.retain_grad()
    return x3 * 2, x3.retains_grad


@pytest.mark.parametrize("compiler", COMPILERS)
def test_retain_grad_on_a_sibling_member(compiler: str) -> None:
    """``retain_grad()`` on a member of a synthetic base is called on the caller's tensor
    (after the writes that made it require grad). Known open: its backward does not
    fill ``x3.grad`` (aotgrad's gradient reaches the base without passing ``x3``), and
    where the base did not require grad, traced apart, ``x3`` does not require grad when
    ``retain_grad()`` runs: aotgrad raises where eager runs."""
    (w, x2, x3), _ = _rows(True)()
    out, retains = COMPILERS[compiler](_retain_sibling_after_write)(w, x2, x3)
    assert retains and x3.retains_grad and out.requires_grad


# Views made under no_grad, made stale by a later write. Eager's siblings share their
# base's version counter: a write through ``x2`` (a data write or a metadata change, even
# under no_grad) moves the counter that a no_grad view of ``x3`` recorded, so reading
# that view's ``grad_fn`` (``is_leaf``, a backward through it) raises "A view was created
# in no_grad mode and its base ... has been modified inplace". Traced, each sibling had
# its own counter: the view came back fresh (soak 29933, 28737, 25871).


def _no_grad_view_then_sibling_metadata(w, x2, x3):
    with torch.no_grad():
        _a, b = x3.split(2)
        x2.transpose_(0, 1)
    return b, x3 * w


def _no_grad_view_then_sibling_write(w, x2, x3):
    with torch.no_grad():
        v = x3[:2]
        x2.mul_(2)
    return v, x3 * w


def _no_grad_view_then_sibling_write_with_grad(w, x2, x3):
    with torch.no_grad():
        v = x3[1:]
    x2.mul_(w)
    return v, x2


def _view_with_grad_then_sibling_write(w, x2, x3):
    v = x3[:2]
    with torch.no_grad():
        x2.zero_()
    return v * w, v


def _no_grad_view_then_own_metadata(w, x2, x3):
    with torch.no_grad():
        v = x3[:2]
        v.t_()
    return v, x3 * w


STALE_PROGRAMS = [
    _no_grad_view_then_sibling_metadata,
    _no_grad_view_then_sibling_write,
    _no_grad_view_then_sibling_write_with_grad,
    _view_with_grad_then_sibling_write,
    _no_grad_view_then_own_metadata,
]


def _leaf_rows() -> tuple[list[Any], list[torch.Tensor]]:
    """Row views of a leaf that requires grad (written only under no_grad)."""
    w = torch.randn(4, 4, dtype=DT, requires_grad=True)
    leaf = torch.randn(8, 4, dtype=DT, requires_grad=True)
    return [w, leaf[:4], leaf[4:]], [w, leaf]


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", STALE_PROGRAMS)
def test_no_grad_view_made_stale_by_a_sibling(fn: Any, compiler: str) -> None:
    _check(fn, _rows(True), compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("fn", STALE_PROGRAMS[:2])
def test_no_grad_view_of_a_leaf_row_made_stale(fn: Any, compiler: str) -> None:
    _check(fn, _leaf_rows, compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_no_grad_view_of_a_chunk_made_stale(compiler: str) -> None:
    def fn(w, c1, c2, c3):
        with torch.no_grad():
            v = c3[1:]
            c1.add_(1)
        return v, c2 * w

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        w = torch.randn(4, dtype=DT, requires_grad=True)
        leaf = torch.randn(12, 4, dtype=DT, requires_grad=True)
        return [w, *leaf.clone().chunk(3)], [w, leaf]

    _check(fn, make, compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_no_grad_view_of_a_returned_intermediate_written_after(compiler: str) -> None:
    """The view's base is returned too: eager's view is stale, its ``._base`` that output,
    and both have version 1 (aotgrad's came back a stale copy at version 2)."""

    def fn(w, x2, x3):
        t = x3 * 1
        with torch.no_grad():
            v = t[:2]
        t.mul_(2)
        return v, t

    _check(fn, _rows(True), compiler)


@pytest.mark.parametrize("compiler", COMPILERS)
def test_stale_chunk_of_a_saved_intermediate_keeps_eager_version(compiler: str) -> None:
    """A no_grad chunk of an intermediate the backward saves, made stale by a write
    through its sibling: eager's chunk is at version 1; aotgrad's was at 2 (the saved
    intermediate already had eager's count when the stale view was made: soak 36221)."""

    def fn(w, x2, x3):
        t = x3.sin()
        with torch.no_grad():
            m0, m1 = t.chunk(2, -1)
            m0.zero_()
        return torch.mm(w, t), m1

    _check(fn, _rows(True), compiler)


# --------- a view made a leaf of its own (``requires_grad_()`` on a view of a base that
# does not require grad), overlapping a written sibling: rebuilt from the synthetic base,
# it lost its ``requires_grad`` (a branch on it took the other path: soak seed 32535,
# called twice) and, with grad on, its gradient (every entry point, Dynamo too).


def _branch_on_requires_grad(x0, x1):
    if x1.requires_grad:
        with torch.no_grad():
            x0.t().sub_(1)
    return x1 * 1


def _sibling_written_then_read(x0, x1):
    with torch.no_grad():
        x0.mul_(2)
    return x1 * 3


def _leaf_view_and_sibling() -> tuple[list[Any], list[torch.Tensor]]:
    b = torch.randn(8, 4, dtype=DT)
    x0, x1 = b[0:4], b[2:6]
    x1.requires_grad_()
    return [x0, x1], [x1]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", [_branch_on_requires_grad, _sibling_written_then_read])
def test_a_leaf_view_of_a_synthetic_base_keeps_requires_grad(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, _leaf_view_and_sibling, COMPILERS[compiler], ctx=torch.no_grad)


# Called with grad on, an output computed from the leaf view reaches its gradient: the
# runtime passes the caller's tensor into the compiled Function for the traced member
# (``trace.InnerLeaf.member``), which aotgrad refused before ("its gradient would not
# reach the caller's tensor"; 28 of 10,000 soak programs, seeds 50000-59999).


def _leaf_view_written_without_grad(x0, x1):
    t = x1.detach()
    with torch.no_grad():
        x1.fill_(0.25)
        t.mul_(2)
    return x1.unsqueeze(0), x1 * x0.sum(), x1


def _leaf_view_turned_off(x0, x1):
    t = torch.stack([x0, x1])
    x1.requires_grad_(False)
    with torch.no_grad():
        x1[:, 1:3].mul_(x0.sum())
    return t.transpose(0, 1), x0


def _sibling_made_a_leaf_inside(x0, x1):
    with torch.no_grad():
        x1.mul_(2)
    x0.requires_grad_()
    return x0 * x1, x0[1:].sum(0)


def _leaf_columns() -> tuple[list[Any], list[torch.Tensor]]:
    b = torch.randn(4, 8, dtype=DT)
    x0, x1 = b[:, :4], b[:, 4:]
    x1.requires_grad_()
    return [x0, x1], [x1]


def _view_of_the_leaf_read_after_a_write(x0, x1):
    # eager rebuilds ``t``'s node after the write as an ``as_strided`` of the base, which
    # does not require grad: ``t``'s gradient reaches nothing (the trace failed on
    # autograd's "new_fn INTERNAL ASSERT": soak seeds 54986, 58338)
    t = x1[0]
    with torch.no_grad():
        t[0].relu_()
        x0.mul_(2)
    return x1 / (t.abs() + 1), x1


_LEAF_PROGRAMS = [
    _view_of_the_leaf_read_after_a_write,
    _branch_on_requires_grad,
    _sibling_written_then_read,
    _leaf_view_written_without_grad,
    _leaf_view_turned_off,
    _sibling_made_a_leaf_inside,
]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", _LEAF_PROGRAMS)
@pytest.mark.parametrize("make", [_leaf_view_and_sibling, _leaf_columns], ids=["rows", "columns"])
def test_a_leaf_view_of_a_synthetic_base_gets_its_gradient(
    fn: Callable, make: Callable, compiler: str
) -> None:
    _check(fn, make, compiler)


# A write that requires grad to the leaf view's sibling gives the base a history:
# eager's leaf view is then a view of the graph's interior, and a backward reaching its
# accumulator raises "leaf variable has been moved into the graph interior". aotgrad
# refused this by name; under Dynamo (whose graph returns the written sibling itself,
# no output) the gradient was silently lost: ``x1.grad`` None where eager raises.


def _write_with_grad_from_leaf(x0, x1, w):
    x0.mul_(x1.sum())
    return (x0,)


def _write_with_grad_from_other(x0, x1, w):
    x0.add_(w)
    return x0 * 2, x1.exp()


def _read_leaf_then_write_with_grad(x0, x1, w):
    t = x1 * 3
    x0.add_(w)
    return (t,)


def _leaf_view_sibling_and_weight(
    views: str,
) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        b = torch.randn(8, 4, dtype=DT)
        w = torch.randn(4, 4, dtype=DT, requires_grad=True)
        pick = {
            "overlapping_rows": lambda: (b[0:4], b[2:6]),
            "disjoint_rows": lambda: (b[0:4], b[4:8]),
            "disjoint_columns": lambda: (b.view(4, 8)[:, :4], b.view(4, 8)[:, 4:]),
        }
        x0, x1 = pick[views]()
        x1.requires_grad_()
        return [x0, x1, w], [x1, w]

    return make


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("views", ["overlapping_rows", "disjoint_rows", "disjoint_columns"])
@pytest.mark.parametrize(
    "fn",
    [_write_with_grad_from_leaf, _write_with_grad_from_other, _read_leaf_then_write_with_grad],
)
def test_a_leaf_view_moved_into_the_graph_interior_raises_in_backward(
    fn: Callable, views: str, compiler: str
) -> None:
    _check(fn, _leaf_view_sibling_and_weight(views), compiler)
