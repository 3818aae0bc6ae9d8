"""Outputs reinterpreting an input with gaps between its rows as complex
(``torch.view_as_complex(x.reshape(4, 2, 2))`` of ``x = b[:, :4]``), compared with eager
(``eager_oracle.assert_like_eager``).

Eager's output is a view of ``b``. With any input requiring grad, aotgrad returned a
fresh tensor (soak 254172): the runtime's reinterpreting steps paired up the elements
of a contiguous tensor only. Pairs within each row are taken of a strided one now
(``alias.reinterpret.Reinterpret.apply``).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

VIEWS = {
    "reshape": lambda x: torch.view_as_complex(x.reshape(4, 2, 2)),
    "unflatten": lambda x: torch.view_as_complex(x.unflatten(-1, (2, 2))),
    "view_dtype": lambda x: x.view(torch.complex128),
    "conj": lambda x: torch.view_as_complex(x.reshape(4, 2, 2)).conj(),
    "row": lambda x: torch.view_as_complex(x.reshape(4, 2, 2))[1],
    "imag": lambda x: torch.view_as_complex(x.reshape(4, 2, 2)).imag,
}
INPUTS = {
    "columns": lambda b: b[:, :4],
    "rows": lambda b: b.view(8, 4)[2:6],
    "offset_columns": lambda b: b[:, 2:6],
}
GRADS = {"input": (True, False), "other": (False, True), "none": (False, False)}


def _make(inp: str, grads: tuple[bool, bool]):
    def make():
        leaf = torch.randn(4, 8, dtype=torch.float64, requires_grad=grads[0])
        other = torch.randn(3, dtype=torch.float64, requires_grad=grads[1])
        b = leaf.clone() if grads[0] else leaf
        return [INPUTS[inp](b), other], [t for t in (leaf, other) if t.requires_grad]

    return make


CASES = list(itertools.product(VIEWS, INPUTS, GRADS))


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_a_complex_view_of_a_strided_input_is_a_view(case, compiler: str) -> None:
    view, inp, grads = case

    def f(x, w):
        return VIEWS[view](x), (w * 2).sum()

    assert_like_eager(f, _make(inp, GRADS[grads]), COMPILERS[compiler])
