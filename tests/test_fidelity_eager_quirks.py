"""Where aotgrad knowingly departs from eager: answers eager gives by a bug of its own
(the soak counts these as soft, ``fidelity_programs``), each shown here with eager's
answer and the one a correct computation gives.

``torch.stack([x0, x1]).sum(0)``: stack's backward hands the two leaves views of one
gradient buffer, and eager's accumulator keeps each as the leaf's ``.grad``: after the
first backward ``x0.grad`` and ``x1.grad`` share memory, and a second backward's in-place
sums add into both, so each ends at three times the gradient, not two (four through a
clone's node: soak 249076). The
compiled backward gives each leaf a buffer of its own.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from eager_oracle import COMPILERS


def _stacked(x0, x1):
    return (torch.stack([x0, x1]).sum(0),)


def _twice(run: Callable) -> tuple[list[torch.Tensor], bool]:
    g = torch.Generator().manual_seed(0)
    x0, x1 = (torch.randn(4, 4, generator=g, requires_grad=True) for _ in "xy")
    (out,) = run(x0, x1)
    cot = torch.randn(4, 4, generator=g)
    out.backward(cot.clone(), retain_graph=True)
    shared = x0.grad.untyped_storage().data_ptr() == x1.grad.untyped_storage().data_ptr()
    out.backward(cot.clone())
    return [x0.grad / cot, x1.grad / cot], shared


@pytest.mark.parametrize("compiler", list(COMPILERS))
def test_gradients_eager_aliases_are_accumulated_apart(compiler: str) -> None:
    eager, eager_shared = _twice(_stacked)
    got, shared = _twice(COMPILERS[compiler](_stacked))
    assert eager_shared and not shared
    torch.testing.assert_close(eager, [torch.full((4, 4), 3.0)] * 2)  # (eager's quirk)
    torch.testing.assert_close(got, [torch.full((4, 4), 2.0)] * 2)
