"""Views of a custom ``autograd.Function``'s output returned beside it
(``t = Half.apply(x); return t.squeeze(), t``).

In eager the view's history goes through ``t``'s node, so ``torch.autograd.grad`` with
respect to ``t``, ``t.retain_grad()`` and a hook on ``t`` see the view's gradient too. The
compiled call returned both as tensors of their own: the gradient with respect to ``t``
missed the view's part, silently (soak 234770). Views of a Function's view of an input are
now made of the caller's ``t`` (``alias.facts.custom_view_base``); a Function's outputs
of an intermediate take part in the fed outputs' link (``runtime.fed_outputs_link``).
Eager PyTorch is the oracle.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
import torch

from eager_oracle import COMPILERS, Half, ViewOf

FUNCTIONS = {"identity": Half, "view_of": ViewOf}
SOURCES: dict[str, Callable] = {"input": lambda x: x, "intermediate": lambda x: x * 1.5}
VIEWS: dict[str, Callable] = {
    "squeeze": lambda t: t.squeeze(),
    "row": lambda t: t[0],
    "transposed": lambda t: t.t(),
    "flat": lambda t: t.view(-1),
}
OBSERVE = ["grad_outputs", "retain", "hook", "grad_inputs"]


def _program(function: str, source: str, view: str, view_first: bool) -> Callable:
    fn, src, v = FUNCTIONS[function], SOURCES[source], VIEWS[view]

    def f(x):
        t = fn.apply(src(x))
        return (v(t), t) if view_first else (t, v(t))

    return f


def _observe(f: Callable, compile_: Callable | None, how: str) -> list:
    x = torch.linspace(-1, 2, 12, dtype=torch.float64).view(3, 4).requires_grad_()
    outs = (f if compile_ is None else compile_(f))(x)
    seen: list = []
    if how == "retain":
        for o in outs:
            o.retain_grad()
    if how == "hook":
        for o in outs:
            o.register_hook(lambda g: seen.append(g.clone()))
    cots = [torch.linspace(0.5, 1.5, o.numel(), dtype=o.dtype).view(o.shape) for o in outs]
    if how == "grad_outputs":
        return list(torch.autograd.grad(outs, [x, *outs], cots))
    if how == "grad_inputs":
        return list(torch.autograd.grad(outs, [x], cots))
    torch.autograd.backward(outs, cots)
    return [x.grad, *seen] if how == "hook" else [x.grad, *(o.grad for o in outs)]


@pytest.mark.filterwarnings("ignore:The .grad attribute of a Tensor that is not a leaf")
@pytest.mark.parametrize(
    ("function", "source", "view", "view_first", "how", "compiler"),
    list(
        itertools.product(
            FUNCTIONS, SOURCES, VIEWS, [True, False], OBSERVE, ["aot_function-min_cut"]
        )
    ),
)
def test_views_of_custom_outputs_like_eager(
    function: str, source: str, view: str, view_first: bool, how: str, compiler: str
) -> None:
    f = _program(function, source, view, view_first)
    want = _observe(f, None, how)
    got = _observe(f, COMPILERS[compiler], how)
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert (a is None) == (b is None), f"result {k}: eager {b}, compiled {a}"
        if b is not None:
            torch.testing.assert_close(a, b, msg=f"result {k}")
