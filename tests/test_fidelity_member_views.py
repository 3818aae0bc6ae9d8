"""Views the function takes of an input that shares its base with a written input (a
synthetic-base member), compared with eager by the gradient the caller asks for at the
member itself (``torch.autograd.grad(out, x2)``).

Eager's view taken of ``x2`` after the group's last write goes through ``x2``'s node; one
taken before goes through the base's. An ``as_strided`` of a member has the one view op of
the base the member has, so it was not recognised as taken of the member, and the runtime
made it of the base: the gradient at ``x2`` came back None (soak 247773). The trace now
notes which member each view was taken of and whether the group was written since.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from eager_oracle import COMPILERS

DT = torch.float64


def _strided_after_a_no_grad_write(x1, x2):
    with torch.no_grad():
        x1.copy_(torch.full_like(x1, 1.5))
    return (x2.as_strided((2, 2), (1, 2)),)


def _strided_after_a_write_with_grad(x1, x2):
    x1.mul_(2)
    return x2.as_strided((2, 2), (1, 2)), x1.sum()


def _strided_before_the_write(x1, x2):
    o = x2.as_strided((2, 2), (1, 2))  # (eager's node is rebuilt of the base by the write)
    with torch.no_grad():
        x1.copy_(torch.full_like(x1, 1.5))
    return (o,)


def _strided_of_a_view_of_the_member(x1, x2):
    with torch.no_grad():
        x1.mul_(3)
    return (x2[1:].as_strided((2, 3), (1, 2)), x2.squeeze())


def _strided_of_a_view_taken_before_the_write(x1, x2):
    t = x2[::2]  # (the write rebuilds its node of the base, and so the strided view's)
    with torch.no_grad():
        x1.copy_(torch.full_like(x1, 1.5))
    return (t.as_strided((2, 2), (1, 2)),)


PROGRAMS = [
    _strided_after_a_no_grad_write,
    _strided_after_a_write_with_grad,
    _strided_before_the_write,
    _strided_of_a_view_of_the_member,
    _strided_of_a_view_taken_before_the_write,
]


def _observed(fn: Callable) -> list[Any]:
    g = torch.Generator().manual_seed(0)
    leaf = torch.randn(8, 4, dtype=DT, generator=g, requires_grad=True)
    b = leaf.clone()
    x1, x2 = b[0:4], b[2:6]
    outs = [o for o in fn(x1, x2) if o.requires_grad]
    cots = [torch.full_like(o, 1.0 + k) for k, o in enumerate(outs)]
    found = torch.autograd.grad(outs, [x2, x1, leaf], cots, allow_unused=True)
    return [[o._base is b for o in outs], [o.detach() for o in outs], list(found)]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__.strip("_"))
def test_the_gradient_at_the_member_is_eagers(fn: Callable, compiler: str) -> None:
    want = _observed(fn)
    got = _observed(COMPILERS[compiler](fn))
    assert got[0] == want[0]
    for g, w in zip(got[2], want[2], strict=True):
        assert (g is None) == (w is None)
    torch.testing.assert_close(got[1:], want[1:])


def _complex_view_of_a_member(x1, x2):
    x1[:, 1:3].sub_(1)  # (soak 250696: remade of the member in its own dtype, float64)
    return (torch.view_as_complex(x2.view(4, 2, 2)),)


def _dtype_view_of_a_member_conj(x1, x2):
    x1[:, 1:3].sub_(1)
    return (x2.view(torch.complex128).conj(),)


def _complex_view_after_a_no_grad_write(x1, x2):
    with torch.no_grad():
        x1.mul_(2)
    return (torch.view_as_complex(x2[1:].reshape(3, 2, 2)).conj(), x2.sum())


REINTERPRETING = [
    _complex_view_of_a_member,
    _dtype_view_of_a_member_conj,
    _complex_view_after_a_no_grad_write,
]


def _observed_everything(fn: Callable, rg: bool) -> list[Any]:
    """Outputs' dtype, conj bit, ``_base``, values; where they require grad, the gradients
    at the members and the leaf of a real loss."""
    g = torch.Generator().manual_seed(0)
    leaf = torch.randn(8, 4, dtype=DT, generator=g, requires_grad=rg)
    b = leaf.clone()
    x1, x2 = b[0:4], b[2:6]
    outs = fn(x1, x2)
    seen = [[(o.dtype, o.is_conj(), o._base is b) for o in outs]]
    seen.append([torch.view_as_real(o.resolve_conj()) if o.is_complex() else o for o in outs])
    diff = [o for o in outs if o.requires_grad]
    if diff:
        loss = sum(
            torch.view_as_real(o.resolve_conj()).sum() if o.is_complex() else o.sum() for o in diff
        )
        seen.append(list(torch.autograd.grad(loss, [x2, x1, leaf], allow_unused=True)))
    return seen


@pytest.mark.parametrize("rg", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("fn", REINTERPRETING, ids=lambda f: f.__name__.strip("_"))
def test_a_reinterpreting_view_of_a_member_is_eagers(fn: Callable, compiler: str, rg: bool) -> None:
    """A member's view in another dtype or with a conj bit keeps them (it came back as a
    float64 view of the base, with the wrong values), and its gradient reaches the member."""
    want = _observed_everything(fn, rg)
    got = _observed_everything(COMPILERS[compiler](fn), rg)
    assert got[0] == want[0]
    torch.testing.assert_close(got[1], want[1])
    if len(want) > 2:
        for g, w in zip(got[2], want[2], strict=True):
            assert (g is None) == (w is None)
            if w is not None:
                torch.testing.assert_close(g, w)


def _write_the_base_read_its_conj(a, b):
    a.mul_(2)  # (blind complex views: b's conj bit was lost, the values conjugated)
    return (b * 1,)


def _write_the_conj_read_the_base(a, b):
    b.mul_(1j)
    return a + 0, b


def _both_conj_one_written(a, b):
    b.add_(a.sin())
    return (a * b,)


def _conj_pairs() -> dict[str, Callable[[], tuple[list[Any], list[Any]]]]:
    def make(pick: Callable[[Any], tuple[Any, Any]]) -> Callable[[], tuple[list, list]]:
        def args() -> tuple[list[Any], list[Any]]:
            g = torch.Generator().manual_seed(4)
            leaf = torch.randn(3, 2, dtype=torch.complex128, generator=g, requires_grad=True)
            return list(pick(leaf.clone())), [leaf]

        return args

    return {
        "base_and_conj": make(lambda b: (b, b.conj())),
        "slice_and_conj": make(lambda b: (b[:2], b.conj())),
        "conj_and_its_slice": make(lambda b: (b.conj(), b.conj()[1:])),
    }


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("pair", list(_conj_pairs()))
@pytest.mark.parametrize(
    "fn",
    [_write_the_base_read_its_conj, _write_the_conj_read_the_base, _both_conj_one_written],
    ids=lambda f: f.__name__.strip("_"),
)
def test_members_with_a_conj_bit_keep_it(fn: Callable, pair: str, compiler: str) -> None:
    """A complex input passed beside its ``conj()`` (one of them written): the member is
    made of the group's base with the caller's conj bit."""
    from eager_oracle import assert_like_eager

    assert_like_eager(fn, _conj_pairs()[pair], COMPILERS[compiler])
