"""``runtime.unreached_tangents``: the backward graph without some tangents, checked on
graphs made by ``make_fx`` (the rules), then end to end in
``tests/test_blind_training_patterns.py``."""

from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from aotgrad.runtime.unreached_tangents import without_tangents

aten = torch.ops.aten


def _backward_like(saved, t0, t1):
    # (a gradient: linear in the tangents; t1's part multiplies a nan-able value)
    a = t1 / saved.sqrt()
    b = t0.expand(3) * saved
    return a + b, t1.sum(), (t0 * 2).expand(3) + t1


def _graph():
    saved = torch.tensor([-1.0, 4.0, 9.0], dtype=torch.float64)
    return make_fx(_backward_like)(saved, torch.tensor(1.0, dtype=torch.float64), saved * 0)


def test_a_pruned_tangent_adds_nothing_and_its_ops_are_dead() -> None:
    gm = _graph()
    pruned = without_tangents(gm, 2, [1], n_grads=2)
    assert pruned is not None
    targets = {n.target for n in pruned.graph.nodes if n.op == "call_function"}
    assert aten.sqrt.default not in targets  # (only the pruned tangent read it)
    saved = torch.tensor([-1.0, 4.0, 9.0], dtype=torch.float64)
    t0 = torch.tensor(1.5, dtype=torch.float64)
    grads = pruned(saved, t0, torch.full((3,), float("nan"), dtype=torch.float64))
    torch.testing.assert_close(grads[0], t0 * saved)  # no nan from sqrt(-1)
    assert grads[1] is None  # an input gradient only t1 fed: None, as eager's
    # past the gradients, what only t1 fed is a real zero; t0's part stays
    torch.testing.assert_close(grads[2], (t0 * 2).expand(3))


def test_every_tangent_reached_is_the_same_graph_values() -> None:
    gm = _graph()
    pruned = without_tangents(gm, 2, [], n_grads=2)
    args = (
        torch.tensor([1.0, 4.0, 9.0], dtype=torch.float64),
        torch.tensor(0.5, dtype=torch.float64),
        torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
    )
    for got, want in zip(pruned(*args), gm(*args), strict=True):
        torch.testing.assert_close(got, want)


def test_a_zero_the_graph_must_make_real_keeps_its_shape() -> None:
    def bw(saved, t0, t1):
        return (t1 + saved[:1]).exp(), t0 * saved  # (exp is not linear: t1 made real)

    saved = torch.tensor([2.0, 3.0], dtype=torch.float64)
    gm = make_fx(bw)(saved, saved.clone(), saved.clone())
    pruned = without_tangents(gm, 2, [1], n_grads=2)
    got = pruned(saved, torch.ones(2, dtype=torch.float64), None)
    torch.testing.assert_close(got[0], saved[:1].exp().expand(2))
    torch.testing.assert_close(got[1], saved)


def test_a_pruned_backward_that_fails_to_compile_falls_back_with_a_warning() -> None:
    import pytest

    from aotgrad.runtime.unreached_tangents import PrunedBackwards

    def failing(gm):
        raise RuntimeError("no kernel")

    full = object()
    pruned = PrunedBackwards(_graph(), 2, failing)
    with pytest.warns(UserWarning, match="full backward runs"):
        assert pruned.for_pass((1,), 2, full) is full
    assert pruned.for_pass((1,), 2, full) is full  # (decided once per set)
