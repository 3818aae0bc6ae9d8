"""Tensors outside what aotgrad traces, and ops without a derivative (blind suite 6):

- a sparse input raised "Cannot access data pointer of Tensor that doesn't have storage"
  (a plain RuntimeError from the guard key); a sparse output that requires grad gave an
  obscure error in the backward. Both are refused by name now (``UnsupportedError``);
- ``torch.unique`` of a tensor that requires grad: eager's forward runs and only a
  backward reaching it raises (``NotImplementedError``); aotgrad's trace raised at the
  first call. The compiled backward now raises for those outputs, and differentiates
  the others.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning, UnsupportedError
from eager_oracle import COMPILERS, assert_like_eager

AOT = [c for c in COMPILERS if c.startswith("aot_function")]


def _sparse() -> torch.Tensor:
    i = torch.tensor([[0, 1, 2], [1, 0, 2]])
    return torch.sparse_coo_tensor(i, torch.tensor([1.0, -2.0, 3.0]), (3, 3)).coalesce()


def test_a_sparse_input_is_refused_by_name() -> None:
    compiled = aotgrad.aot_function(lambda s, w: torch.sparse.mm(s, w), aotgrad.nop)
    with pytest.raises(UnsupportedError, match="sparse_coo"):
        compiled(_sparse(), torch.ones(3, 2, requires_grad=True))


def test_a_sparse_output_that_requires_grad_is_refused_by_name() -> None:
    compiled = aotgrad.aot_function(lambda x: (x * 2).to_sparse(), aotgrad.nop)
    with pytest.raises(UnsupportedError, match="sparse_coo"):
        compiled(torch.randn(2, 2, requires_grad=True))
    with torch.no_grad():  # without grad, nothing to differentiate: as eager
        out = compiled(torch.ones(2, 2))
    assert out.layout == torch.sparse_coo
    torch.testing.assert_close(out.to_dense(), torch.full((2, 2), 2.0))


def _unique_beside(x):
    return torch.unique(x), x * 2


def _unique_inverse_in_sum(x):
    u, inverse = torch.unique(x, return_inverse=True)
    return u.sum() + x.sin().sum(), inverse


def _unique_consecutive(x):
    return torch.unique_consecutive(x), x.exp()


def _unique_rows(x):
    return x.view(2, 2).unique(dim=0), x.cos()


def _ties() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    x = torch.tensor([1.0, 0.0, 2.0, 0.0], dtype=torch.float64, requires_grad=True)
    return [x], [x]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn",
    [_unique_beside, _unique_inverse_in_sum, _unique_consecutive, _unique_rows],
    ids=lambda f: f.__name__.strip("_"),
)
def test_an_output_through_an_op_without_a_derivative(fn: Callable, compiler: str) -> None:
    assert_like_eager(fn, _ties, COMPILERS[compiler], calls=2)


@pytest.mark.parametrize("compiler", AOT)
def test_the_other_outputs_differentiate_as_eager(compiler: str) -> None:
    # the oracle's backward runs through every output at once (and so raises); here
    # only through the one eager differentiates
    grads = []
    for f in (_unique_beside, COMPILERS[compiler](_unique_beside)):
        (x,), _ = _ties()
        _, y = f(x)
        y.pow(2).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], grads[1])


def _add_one(x):
    x.add_(1)
    return x * 2


def test_an_input_overlapping_itself_written_in_place_runs_eagerly() -> None:
    # eager's add_ visits the 12 elements in memory order: slots reached twice get 2
    # ([1, 2, 3, 3, 2, 1]); a functional write gives 1 everywhere (torch's AOT Autograd
    # too), silently. Refused by name before round 58; now the call runs eagerly (its
    # refusal: a view whose elements share memory), with eager's values
    compiled = aotgrad.aot_function(_add_one, aotgrad.nop)
    theirs, ours = torch.zeros(6), torch.zeros(6)
    with pytest.warns(EagerReplayWarning, match="share memory"):
        out = compiled(ours.as_strided((4, 3), (1, 1)))
    assert torch.equal(out, _add_one(theirs.as_strided((4, 3), (1, 1))))
    assert torch.equal(ours, theirs) and ours.tolist() == [1, 2, 3, 3, 2, 1]
    base = torch.zeros(4, 8)
    compiled(base[:, :4])  # gaps between rows, no overlap: compiled as before
    assert base[:, :4].eq(1).all() and base[:, 4:].eq(0).all()


# In-place ops that would write a complex result into a real tensor (blind suite
# "tensor kinds", real_mul_1j_error): eager raises "result type ComplexFloat can't be
# cast to the desired output type Float"; functionalization made them an op then a cast
# back that dropped the imaginary part, and the compiled function returned it silently.


def _mul_by_1j(x):
    return (x * 1).mul_(1j)


def _add_a_complex_tensor(x):
    return x.clone().add_(torch.ones(4, 4, dtype=torch.complex64))


def _operator_times_complex(x):
    y = x * 2
    y *= torch.tensor(1j)
    return y


def _input_without_grad_times_1j(x, y):
    y.sub_(1j)
    return x * 2


def _real_part_of_complex_written(x, z):
    z.real.mul_(2)  # a real view written with a real factor: allowed
    return x * z.imag


def _copy_of_complex_into_real(x):
    return (x * 1).copy_(torch.ones(4, 4, dtype=torch.complex64))  # allowed (eager warns)


def _complex_args() -> tuple[list, list]:
    x = torch.randn(4, 4, requires_grad=True)
    return [x, torch.randn(4, 4)], [x]


def _complex_input() -> tuple[list, list]:
    x = torch.randn(4, 4, requires_grad=True)
    return [x, torch.randn(4, 4, dtype=torch.complex64)], [x]


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (_mul_by_1j, _complex_args),
        (_add_a_complex_tensor, _complex_args),
        (_operator_times_complex, _complex_args),
        (_input_without_grad_times_1j, _complex_args),
        (_real_part_of_complex_written, _complex_input),
        (_copy_of_complex_into_real, _complex_args),
    ],
    ids=["mul_1j", "add_complex", "imul_operator", "input_sub_1j", "real_view", "copy_"],
)
def test_complex_result_written_into_a_real_tensor_as_eager(fn, make, compiler: str) -> None:
    import inspect

    n = len(inspect.signature(fn).parameters)

    def make_args():
        args, leaves = make()
        return args[:n], leaves

    assert_like_eager(fn, make_args, COMPILERS[compiler], calls=2)
