"""``as_strided`` of a view a hook sits on (or of a view of one): eager's gradient of the
result passes through the view's node, and so through the hook.

The trace takes ``v.as_strided(...)`` within ``v``'s elements from ``v``'s base
(functionalization refuses a write through a view chain with an ``as_strided`` past its
first step), which skipped ``v``'s node: the hook never saw the gradient, silently
(soak 241072: ``t1 = x0.expand(2, 4, 4); t1.register_hook(lambda g: g * 2); return
t1.as_strided((2, 2), (1, 2))``, the leaf's gradient half of eager's). A hooked node on
the path now keeps the ``as_strided`` on ``v``. Each program is compared with eager
(``eager_oracle``: outputs, their flags and aliasing, the inputs after the call, every
gradient), with a linear and a non-linear hook.
"""

from __future__ import annotations

import pytest
import torch

from eager_oracle import COMPILERS, assert_like_eager

HOOKS = {
    "double": lambda g: g * 2,
    "clamp": lambda g: g.clamp(-0.1, 0.1),
}


def _programs(hook):
    def input_expand(x):
        t = x.expand(2, 4, 4)
        t.register_hook(hook)
        return t.as_strided((2, 2), (1, 2)), x

    def input_slice_computed(x):
        v = x[1:]
        v.register_hook(hook)
        return v.as_strided((2, 2), (1, 2)) * 3

    def intermediate_slice(x):
        v = (x * 1)[1:]
        v.register_hook(hook)
        return v.as_strided((2, 2), (1, 2)) * 3, v.sum()

    def view_of_hooked_view(x):
        v = (x * 1)[1:]
        v.register_hook(hook)
        w = v.view(-1)
        return w.as_strided((2, 2), (1, 2)).sin()

    def transposed_returned(x):
        v = (x * 2).t()
        v.register_hook(hook)
        return v.as_strided((2, 2), (1, 4), 1), v

    def removed_hook(x):
        v = (x * 1)[1:]
        v.register_hook(hook).remove()
        return v.as_strided((2, 2), (1, 2)) * 3

    return [
        input_expand,
        input_slice_computed,
        intermediate_slice,
        view_of_hooked_view,
        transposed_returned,
        removed_hook,
    ]


def _input():
    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x], [x]


CASES = [
    pytest.param(fn, id=f"{fn.__name__}-{name}")
    for name, hook in HOOKS.items()
    for fn in _programs(hook)
]
#: Dynamo's own: ``backend="eager"`` raises too ("idx must not be None for hook removal").
DYNAMO_OWN = {"removed_hook"}


@pytest.mark.parametrize("entry", sorted(COMPILERS))
@pytest.mark.parametrize("fn", CASES)
def test_as_strided_of_a_hooked_view_like_eager(fn, entry):
    if entry.startswith("dynamo") and fn.__name__ in DYNAMO_OWN:
        pytest.xfail("Dynamo's own: a removed hook's handle fails it (backend='eager' too)")
    assert_like_eager(fn, _input, COMPILERS[entry], calls=2)


def _complex_programs(hook):
    def real_view_of_input(z):
        t = torch.view_as_real(z)  # (soak 249890: remade of z at z's itemsize, raised)
        t.register_hook(hook)
        return (t.as_strided((2, 2), (1, 2)),)

    def real_view_of_intermediate(z):
        t = torch.view_as_real(z * 2)
        t.register_hook(hook)
        return t.as_strided((3, 2), (2, 1), 2).cos(), t.sum()

    def real_view_returned_beside(z):
        t = torch.view_as_real(z)
        t.register_hook(hook)
        return t.as_strided((4,), (3,)), t[0]

    return [real_view_of_input, real_view_of_intermediate, real_view_returned_beside]


def _complex_input():
    z = torch.randn(4, 4, dtype=torch.complex128, requires_grad=True)
    return [z], [z]


COMPLEX_CASES = [
    pytest.param(fn, id=f"{fn.__name__}-{name}")
    for name, hook in HOOKS.items()
    for fn in _complex_programs(hook)
]


@pytest.mark.parametrize("entry", sorted(COMPILERS))
@pytest.mark.parametrize("fn", COMPLEX_CASES)
def test_as_strided_of_a_hooked_real_view_of_a_complex_tensor(fn, entry):
    """The hooked view is real, its base complex: the view is remade of the base's real
    view (``view_as_real``), in real elements."""
    assert_like_eager(fn, _complex_input, COMPILERS[entry], calls=2)
