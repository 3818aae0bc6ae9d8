"""The memory-budget partitioner and its frontier (aotgrad.partition.budget)."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest
import torch

import aotgrad
from aotgrad import _rust
from aotgrad.errors import PartitionError
from aotgrad.partition import (
    BudgetExceededWarning,
    frontier,
    memory_budget_joint,
    memory_budget_partition,
    recompute_costs,
)
from aotgrad.table import to_table
from graphs import mlp_joint, transformer_joint

BUDGETS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def _store(j):
    table, _ = to_table(j.gm, num_fwd_outputs=j.num_fwd_outputs)
    return _rust.GraphStore.from_table(table)


@pytest.mark.parametrize("blocks", [1, 4])
def test_budgets_met_on_transformer_and_partitions_valid(blocks):
    j = transformer_joint(blocks)
    store = _store(j)
    sols = _rust.memory_frontier(store, list(BUDGETS))
    assert sols[0].met
    for s in sols:
        _rust.check_partition(store, s.partition)
        assert s.met == (s.activation_bytes <= s.target_bytes)
        assert s.met == (s.min_bytes <= s.target_bytes), "met exactly when achievable"
        if s.met:
            assert s.activation_bytes <= s.budget * s.min_cut_bytes
    assert all(s.met for s in sols), "matmuls may be recomputed: every budget down to 0.1 is met"


@pytest.mark.parametrize("j", [transformer_joint(4), mlp_joint()], ids=["transformer", "mlp"])
def test_saved_bytes_monotone_as_budget_falls(j):
    pts = frontier(j.gm, num_fwd_outputs=j.num_fwd_outputs, budgets=BUDGETS)
    assert [p.budget for p in pts] == list(BUDGETS)
    for hi, lo in itertools.pairwise(pts):
        assert lo.activation_bytes <= hi.activation_bytes
        assert lo.recompute_cost >= hi.recompute_cost
    assert pts[0].activation_bytes <= pts[0].min_cut_bytes


def test_frontier_agrees_with_single_budget_solves():
    j = transformer_joint(1)
    pts = frontier(j.gm, num_fwd_outputs=j.num_fwd_outputs, budgets=(0.9, 0.6))
    for p in pts:
        _, single = memory_budget_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs, budget=p.budget)
        assert single.met == p.met
        assert single.activation_bytes <= single.target_bytes
        # One pass reuses every multiplier across budgets: never worse than one solve.
        assert p.recompute_cost <= single.recompute_cost + 1e-6


def test_exact_on_small_graph():
    """The MLP graph has few recompute candidates: the solver enumerates every
    subset and says so (the approximate solver's gap to this exact one is
    measured by the Rust tests, `budget_tests.rs`)."""
    j = mlp_joint()
    store = _store(j)
    sols = _rust.memory_frontier(store, list(BUDGETS))
    assert all(s.exact for s in sols)
    costs = recompute_costs(j.gm, num_fwd_outputs=j.num_fwd_outputs)
    for s in sols:
        rec = np.frombuffer(s.partition.recomputed, dtype=np.uint32)
        assert s.recompute_cost == pytest.approx(float(costs[rec].sum()))
    # Exact answers: none is beaten by another budget's answer that also fits.
    for a in sols:
        for b in sols:
            if b.activation_bytes <= a.target_bytes:
                assert a.recompute_cost <= b.recompute_cost + 1e-9


def test_unmeetable_budget_raises_with_smallest_figure():
    """The MLP's dropout mask is random: never recomputed, so it bounds the
    smallest achievable figure from below (0.2 of min-cut's bytes here)."""
    j = mlp_joint()
    with pytest.raises(
        PartitionError,
        match=r"budget 0.1 cannot be met: the smallest achievable is \d+ bytes \(0\.\d\d of min-cut",
    ):
        memory_budget_partition(j.gm, None, num_fwd_outputs=j.num_fwd_outputs, budget=0.1)
    with pytest.warns(BudgetExceededWarning):
        _, p = memory_budget_joint(
            j.gm, num_fwd_outputs=j.num_fwd_outputs, budget=0.1, allow_exceed=True
        )
    assert not p.met and p.activation_bytes == p.min_bytes > 0
    with pytest.raises(PartitionError, match="budget"):
        memory_budget_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs, budget=-1.0)


def test_matmuls_recomputed_at_their_flop_cost():
    """Low budgets are met by recomputing matmuls, priced by FLOPs from shapes."""
    from aotgrad.partition.budget import node_flops

    j = transformer_joint(1)
    store = _store(j)
    _, nodes = to_table(j.gm, num_fwd_outputs=j.num_fwd_outputs)
    flops = node_flops(nodes)
    # The forward's matmuls (the backward's are `mm`s).
    mms = [i for i, n in enumerate(nodes) if n.target is torch.ops.aten.addmm.default]
    assert mms and all(flops[i] > 0 for i in mms)
    costs = recompute_costs(j.gm, num_fwd_outputs=j.num_fwd_outputs)
    estimated = np.frombuffer(_rust.recompute_costs(store), dtype=np.float64)
    for i in mms:
        # bytes moved + FLOPs / 16: the same figure from shapes or from byte sizes
        # (exact for a matmul of 4-byte elements).
        assert costs[i] == pytest.approx(estimated[i])
        assert costs[i] > flops[i] / 16
    (s,) = _rust.memory_frontier(store, [0.1], None, flops)
    assert s.met
    _rust.check_partition(store, s.partition)
    rec = set(np.frombuffer(s.partition.recomputed, dtype=np.uint32).tolist())
    assert rec & set(mms), "a budget of 0.1 needs a recomputed matmul"
    with pytest.raises(PartitionError, match="flops has"):
        _rust.memory_frontier(store, [0.5], None, np.zeros(3))


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 64)
        self.fc2 = torch.nn.Linear(64, 16)
        self.ln = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(self.ln(x)))
        return (x + self.fc2(h.sin() * h.exp())).tanh().sum()


@pytest.mark.parametrize("budget", [1.0, 0.8, 0.6])
def test_grads_equal_eager(budget):
    torch.manual_seed(0)
    net = _Net()
    params = [p.detach().clone().requires_grad_(True) for p in net.parameters()]
    names = [n for n, _ in net.named_parameters()]

    def fn(x, *ps):
        return torch.func.functional_call(net, dict(zip(names, ps, strict=True)), (x,))

    x = torch.randn(8, 16, requires_grad=True)
    pf = functools.partial(memory_budget_partition, budget=budget)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=pf)
    out = compiled(x, *params)
    grads = torch.autograd.grad(out, [x, *params])
    ref_params = [p.detach().clone().requires_grad_(True) for p in params]
    xr = x.detach().clone().requires_grad_(True)
    ref = fn(xr, *ref_params)
    ref_grads = torch.autograd.grad(ref, [xr, *ref_params])
    torch.testing.assert_close(out, ref)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r)


# ------------------------------------------------------------------ cost model


def test_cost_model_options_price_matmuls_and_memory_bound_ops():
    """A larger machine balance makes matmul FLOPs cheaper; a smaller fused factor makes
    memory-bound ops cheaper; the options are checked."""
    j = transformer_joint(1)
    nfo = j.num_fwd_outputs
    _, nodes = to_table(j.gm, num_fwd_outputs=nfo)
    packet = [getattr(n.target, "overloadpacket", None) for n in nodes]
    mm = [i for i, p in enumerate(packet) if p in (torch.ops.aten.mm, torch.ops.aten.addmm)]
    gelu = [i for i, p in enumerate(packet) if p is torch.ops.aten.gelu]
    assert mm and gelu
    base = recompute_costs(j.gm, num_fwd_outputs=nfo, flops_per_byte=4.0, fused_factor=1.0)
    balance = recompute_costs(j.gm, num_fwd_outputs=nfo, flops_per_byte=64.0, fused_factor=1.0)
    fused = recompute_costs(j.gm, num_fwd_outputs=nfo, flops_per_byte=4.0, fused_factor=0.5)
    assert all(balance[i] < base[i] for i in mm)
    assert all(fused[i] == pytest.approx(base[i] / 2) for i in gelu)
    factors = recompute_costs(
        j.gm, num_fwd_outputs=nfo, fused_factor=1.0, op_factors={"aten.gelu": 3.0}
    )
    assert all(factors[i] == pytest.approx(3 * base[i]) for i in gelu)
    for bad in ({"flops_per_byte": 0.0}, {"fused_factor": float("nan")}, {"op_factors": 3}):
        with pytest.raises(PartitionError):
            recompute_costs(j.gm, num_fwd_outputs=nfo, **bad)


def test_calibration_file_is_read_and_options_override_it(tmp_path, monkeypatch):
    from aotgrad.partition import calibration
    from aotgrad.tools import calibrate

    path = tmp_path / "cal.json"
    monkeypatch.setenv("AOTGRAD_CALIBRATION", str(path))
    calibration.forget()
    assert calibration.cost_options() == {}
    rc = calibrate.run(calibrate_args(repeats=1, fused_factor=0.5, output=None, print_only=False))
    assert rc == 0 and path.exists()
    got = calibration.cost_options()
    assert got["fused_factor"] == 0.5 and got["flops_per_byte"] > 0
    assert "aten._softmax" in got["op_factors"]
    assert calibration.cost_options({"fused_factor": 1.0})["fused_factor"] == 1.0
    # the budget partitioner prices with it (one pass; figures valid)
    j = transformer_joint(1)
    (p,) = frontier(j.gm, num_fwd_outputs=j.num_fwd_outputs, budgets=[0.5])
    assert p.met
    calibration.forget()


def calibrate_args(**kw):
    import argparse

    return argparse.Namespace(**kw)
