"""Inputs that share bytes with an input that requires grad without being views of it:
its ``detach()`` (Dynamo passes one across a graph break, e.g. the output of a
``mark_dirty`` custom Function applied under ``no_grad``). One is written: they were
refused ("... they are not views of one common tensor", 46 of 10,000 soak programs
through ``torch.compile``; torch's AOT Autograd asserts). The alias is now a detached view
of the group's synthetic base: its writes reach the input's bytes, not its gradient."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS, DirtyMul, assert_like_eager

ENTRIES = sorted(COMPILERS)


def _r(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


def _leaf_and_its_detach() -> tuple[list[Any], list[torch.Tensor]]:
    x = _r(4, 4).requires_grad_()
    return [x, x.detach()], [x]


def _clone_and_a_detached_row() -> tuple[list[Any], list[torch.Tensor]]:
    w = _r(4, 4).requires_grad_()
    x = w * 1
    return [x, x.detach()[1], w], [w]


def _write_through_the_alias(x, d, *rest):
    y = x.sin()
    with torch.no_grad():
        d.mul_(2)
    return y, x * 3, d


def _write_the_input_read_the_alias(x, d, *rest):
    with torch.no_grad():
        x[0].add_(1)
    return d * 2, (x * x).sum()


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.startswith("dynamo")])
@pytest.mark.parametrize("make", [_leaf_and_its_detach, _clone_and_a_detached_row])
@pytest.mark.parametrize("fn", [_write_through_the_alias, _write_the_input_read_the_alias])
def test_a_detached_alias_beside_its_input(fn, make, entry):
    assert_like_eager(fn, make, COMPILERS[entry], calls=2)


def _mark_dirty_under_no_grad(x0, x1, x2):
    """Dynamo breaks the graph at the custom Function; the next graph gets ``x0`` and the
    Function's output, an alias of it that is no view (soak 80008)."""
    with torch.no_grad():
        t1 = DirtyMul.apply(x0)
    with torch.no_grad():
        x0.diagonal().copy_(x1)
    t2 = torch.mm(x2, t1)
    return t1.sin().detach(), t2, x2


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_mark_dirty_output_across_a_graph_break(entry):
    def make():
        x0 = _r(4, 4).requires_grad_()
        w = _r(4, 4).requires_grad_()
        return [x0, _r(()), w * 1], [x0, w]

    assert_like_eager(_mark_dirty_under_no_grad, make, COMPILERS[entry], calls=2)


def _alias_written_with_grad(x0):
    """``t1`` requires grad and is the grad root; ``x0``, an alias of its bytes that is no
    view of it, gains a history from the write (soak 71646): refused, as before, where
    the caller's tensor would not get eager's history."""
    t1 = x0.detach().requires_grad_()
    t2 = t1 * 1
    x0.add_(t2)
    return t2


def test_an_alias_written_with_grad_is_refused():
    torch._dynamo.reset()
    compiled = torch.compile(_alias_written_with_grad, backend="aotgrad_eager")
    x0 = _r(4, 4)
    with pytest.raises(Exception, match="shares bytes with an input that requires grad"):
        compiled(x0.t())


# Two tensors on the same memory seen the same way, neither requiring grad (``x1`` and
# ``t1 = x1.detach()``): they were one graph input, so ``return t1`` gave the caller
# ``x1``, and ``t1.expand(2)._base`` was ``x1`` (soak 244260, under Dynamo, whose graph
# break passes ``x1.detach()`` beside ``x1``). Each is an input of its own now; written,
# their views are told apart by the member they were taken of.


def _gradless_and_its_detach() -> tuple[list[Any], list[torch.Tensor]]:
    x = _r(3)
    return [x, x.detach()], []


def _returns_the_alias(x1, t1):
    return t1, t1[0], x1 * 2


def _views_of_the_alias_after_a_write(x1, t1):
    with torch.no_grad():
        x1.clamp_(-1, 1)
    return t1.expand(2, 3), t1[0]


def _one_view_of_the_alias_returned_twice(x1, t1):
    # (one tensor to the caller: each place was remade apart, CI at 4be5c2f, soak 119548)
    with torch.no_grad():
        x1.clamp_(-1, 1)
    v = t1[1:]
    return v, t1.expand(2, 3), v


def _views_of_both_after_a_write(x1, t1):
    x1.mul_(2)
    return t1[1:], x1[:2], t1


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "fn",
    [
        _returns_the_alias,
        _views_of_the_alias_after_a_write,
        _one_view_of_the_alias_returned_twice,
        _views_of_both_after_a_write,
    ],
)
def test_a_gradless_alias_of_the_same_layout_is_its_own_input(fn: Any, entry: str) -> None:
    assert_like_eager(fn, _gradless_and_its_detach, COMPILERS[entry])
