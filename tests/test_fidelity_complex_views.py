"""Outputs that are views of complex tensors (fidelity family "complex: views of complex
tensors returned", seeds 130, 227, 282, 298, also 240, and soak 200018, 200165, 200225,
200366).

``torch.view_as_real(t)``, ``t.conj()``, ``t.imag`` / ``t.real``, ``view_as_complex``
returned, of an intermediate or of an input, with and without grad, written or not:
eager's output is a view of its base (``._base``, its storage and version counter, its
gradient through the view into the base). Each reinterprets its base's bytes (another
dtype, a conj or neg bit), which no ``as_strided`` of the base can make: such outputs were
returned as the graph computed them, tensors of their own (no view at all where another
output required grad: the compiled autograd.Function's output), or copies where the base
was written. They are now rebuilt as views of the real base, reinterpreted as eager's
(``alias.reinterpret.Reinterpret``), also where made of another tensor over an input's
bytes (another output, a leaf made inside, a custom Function's view). A detached one
(``x.imag.detach()``, ``x.view(torch.float64)``) is no view in eager, and is none here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from eager_oracle import COMPILERS, ViewOf, assert_like_eager

C = torch.complex128


# views of a complex intermediate


def _view_as_real_of_intermediate(x, y):
    t = torch.polar(x.abs(), x)
    return torch.view_as_real(t), y * 2


def _view_as_real_of_complex_made(x, y):
    t = torch.complex(x, x.cos())
    return y.sin(), torch.view_as_real(t)


def _conj_of_intermediate(x, y):
    t = x * (1 + 1j)
    u = t / (t.abs() + 1)
    return y + 1, u.conj()


def _conj_of_product(x, y):
    z = torch.complex(x, y)
    t = z @ z.mH
    return t.conj()


def _imag_of_intermediate(x, y):
    t = torch.complex(x, y)
    return t.imag, t.real


def _row_of_view_as_real(x, y):
    t = torch.complex(x, y) * 2
    return torch.view_as_real(t)[1:]


def _view_as_complex_of_intermediate(x, y):
    t = torch.stack([x, y], -1) * 2
    return torch.view_as_complex(t)


def _view_as_real_of_written_dtype_view(x, y):
    t = x / (x.abs() + 1)
    c = t.view(C)
    with torch.no_grad():
        c.imag.zero_()
    return y * 2, torch.view_as_real(c)


def _view_as_real_of_sum(x, y):
    t = x * (1 + 1j)
    return x, torch.view_as_real(t.sum())


def _real_pair(rg: tuple[bool, bool]) -> Callable:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        ls = [torch.randn(4, 4, dtype=torch.float64, requires_grad=r) for r in rg]
        return ls, [a for a in ls if a.requires_grad]

    return make


#: which inputs require grad: where the view does not and another output does, it came
#: out of the compiled autograd.Function as no view at all (seeds 130, 227, 298)
REAL_KINDS = {
    "both": _real_pair((True, True)),
    "second": _real_pair((False, True)),
    "first": _real_pair((True, False)),
    "none": _real_pair((False, False)),
}


OF_INTERMEDIATES: dict[str, Callable] = {
    "view_as_real": _view_as_real_of_intermediate,
    "view_as_real_of_complex": _view_as_real_of_complex_made,
    "conj": _conj_of_intermediate,
    "conj_of_product": _conj_of_product,
    "imag_and_real": _imag_of_intermediate,
    "row_of_view_as_real": _row_of_view_as_real,
    "view_as_complex": _view_as_complex_of_intermediate,
    "view_as_real_of_written_dtype_view": _view_as_real_of_written_dtype_view,
    "view_as_real_of_sum": _view_as_real_of_sum,
}


@pytest.mark.parametrize("kind", sorted(REAL_KINDS))
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(OF_INTERMEDIATES))
def test_view_of_a_complex_intermediate_is_eagers_view(name: str, compiler: str, kind: str) -> None:
    assert_like_eager(OF_INTERMEDIATES[name], REAL_KINDS[kind], COMPILERS[compiler], calls=2)


# views of a complex input


def _conj_of_input(x, y):
    t = x.angle()
    return y.sum(), x.conj(), t


def _view_as_real_of_input(x, y):
    return torch.view_as_real(x), y * 2


def _imag_of_input(x, y):
    return x.imag, x.real[1:], y.sin()


def _conj_imag_of_input(x, y):
    return x.conj().imag, y * 1


def _imag_detached(x, y):
    t = x.imag
    with torch.no_grad():
        x.imag.zero_()
    return x, t.detach(), x.real.detach(), y + 1


def _view_as_real_of_written_input(x, y):
    with torch.no_grad():
        x.imag.zero_()
    return y * 2, torch.view_as_real(x)


def _view_as_real_of_input_written_with_grad(x, y):
    x.mul_(y)
    return torch.view_as_real(x), x.conj()


def _complex_pair(rg: tuple[bool, bool], leaf: bool = True) -> Callable:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        ls = [torch.randn(4, 3, dtype=C, requires_grad=r) for r in rg]
        args = [a if leaf or not a.requires_grad else a.clone() for a in ls]
        return args, [a for a in ls if a.requires_grad]

    return make


OF_INPUTS: dict[str, Callable] = {
    "conj": _conj_of_input,
    "view_as_real": _view_as_real_of_input,
    "imag_and_real": _imag_of_input,
    "conj_imag": _conj_imag_of_input,
    "imag_detached": _imag_detached,
    "view_as_real_of_written": _view_as_real_of_written_input,
}

INPUT_KINDS = {
    "leaf": _complex_pair((True, True)),
    "no_grad": _complex_pair((False, True)),
    "non_leaf": _complex_pair((True, False), leaf=False),
}


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(OF_INPUTS))
def test_view_of_a_complex_input_is_eagers_view(name: str, compiler: str, kind: str) -> None:
    assert_like_eager(OF_INPUTS[name], INPUT_KINDS[kind], COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_view_of_an_input_written_with_grad(compiler: str) -> None:
    make = _complex_pair((False, True))
    assert_like_eager(_view_as_real_of_input_written_with_grad, make, COMPILERS[compiler], calls=2)
    make = _complex_pair((True, True), leaf=False)
    assert_like_eager(_view_as_real_of_input_written_with_grad, make, COMPILERS[compiler], calls=2)


def _later_write(outs: Any) -> None:
    outs[-1].mul_(3)  # through the output: eager's reaches its base


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_a_later_write_through_the_view_reaches_its_base(compiler: str) -> None:
    def fn(x, y):
        t = x * 2
        return t, torch.view_as_real(t)

    assert_like_eager(fn, _complex_pair((False, False)), COMPILERS[compiler], after=_later_write)


def _dynamic(fn: Callable) -> Callable:
    torch._dynamo.reset()
    return torch.compile(fn, backend="aotgrad_eager", dynamic=True)


DYNAMIC = {
    "aot_function": lambda fn: aotgrad.aot_function(fn, aotgrad.nop, dynamic=True),
    "dynamo": _dynamic,
}


@pytest.mark.parametrize("compiler", sorted(DYNAMIC))
@pytest.mark.parametrize(
    "name", ["view_as_real", "conj", "row_of_view_as_real", "view_as_real_of_written_dtype_view"]
)
def test_with_symbolic_sizes(name: str, compiler: str) -> None:
    """Sizes traced as symbols: the view's layout is evaluated per call."""
    assert_like_eager(OF_INTERMEDIATES[name], REAL_KINDS["second"], DYNAMIC[compiler], calls=2)
    make = _complex_pair((False, True))
    assert_like_eager(_conj_imag_of_input, make, DYNAMIC[compiler], calls=2)


# made of another output, of a leaf made inside, by a custom Function: each path that
# made the view with an as_strided of another tensor over the input's bytes


def _imag_of_detached_output(x, y):
    t = x.detach()
    return t, t.imag, y * 2


def _view_as_real_of_leaf_output(x, y):
    t = x.detach().requires_grad_()
    return t, torch.view_as_real(t), y * 2


def _view_as_real_of_leaf(x, y):
    t = x.detach().requires_grad_()
    return torch.view_as_real(t), y * 2


def _conj_of_leaf_view(x, y):
    t = x[1:]
    t.requires_grad_()
    return t, t.conj()


def _view_as_real_of_written_detached(x, y):
    t = x.detach()
    t.mul_(y)
    return t, torch.view_as_real(t)


def _custom_view_of_imag(x, y):
    return ViewOf.apply(x.imag), y * 2


THROUGH_OTHERS: dict[str, Callable] = {
    "imag_of_detached_output": _imag_of_detached_output,
    "view_as_real_of_leaf_output": _view_as_real_of_leaf_output,
    "view_as_real_of_leaf": _view_as_real_of_leaf,
    "conj_of_leaf_view": _conj_of_leaf_view,
    "view_as_real_of_written_detached": _view_as_real_of_written_detached,
    "custom_view_of_imag": _custom_view_of_imag,  # (seed 240)
}


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(THROUGH_OTHERS))
def test_view_made_of_another_tensor_over_the_input(name: str, compiler: str, grad: bool) -> None:
    make = _complex_pair((grad, True))
    assert_like_eager(THROUGH_OTHERS[name], make, COMPILERS[compiler], calls=2)


# ``as_strided`` of a real view of complex bytes (soak 150496): eager's backward gives
# gradient only to the elements the as_strided's input covered (``x.imag``'s: the
# imaginary parts); rebuilt of the whole reinterpreted base, it reached the real parts.

AS_STRIDED_OF_REINTERPRETED: dict[str, Callable] = {
    "imag_of_input": lambda x, y: (x.imag.as_strided((2, 2), (1, 2)), y * 2),
    "real_of_input_offset": lambda x, y: (x.real.as_strided((2, 2), (1, 3), 1), y.sin()),
    "imag_of_input_twice": lambda x, y: (x.imag.as_strided((2, 2), (1, 2)), x.imag, y),
    "imag_of_intermediate": lambda x, y: ((x * 2).imag.as_strided((2, 2), (1, 2)), y),
    "real_of_intermediate": lambda x, y: ((x + y).real.as_strided((2, 2), (1, 2), 3),),
    "conj_imag_of_input": lambda x, y: (x.conj().imag.as_strided((2, 2), (1, 2)), y),
}


@pytest.mark.parametrize("kind", sorted(INPUT_KINDS))
@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("name", sorted(AS_STRIDED_OF_REINTERPRETED))
def test_as_strided_of_a_reinterpreted_view(name: str, compiler: str, kind: str) -> None:
    fn = AS_STRIDED_OF_REINTERPRETED[name]
    assert_like_eager(fn, INPUT_KINDS[kind], COMPILERS[compiler], calls=2)
