"""aotgrad's default partition against torch's ``default_partition``, node by node.

Both save the values the forward traced that the backward reads, and compute in the
backward what the backward traced (the weights' transposes, ``cos`` of a forward
``sin``'s input): same saved nodes, same backward nodes, same forward nodes, on graphs
traced the way torch's joint tracer tags them (``tests/graphs.py``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch._functorch.partitioners import default_partition as torch_default_partition

import aotgrad
from aotgrad.partition import partition_joint
from aotgrad.split import IN_BACKWARD, IN_FORWARD
from graphs import MLP, Transformer, joint_graph_of


class ReluSin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(8, 32, bias=False)
        self.down = nn.Linear(32, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x + self.down(torch.relu(self.up(x)).sin())).sum()


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(6, track_running_stats=False)
        self.ln = nn.LayerNorm(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.bn(x)).tanh()


def _cos_of_sin(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (x @ w).sin().cos().sum(0), (x * 2).exp()


def _softmax(x: torch.Tensor) -> torch.Tensor:
    return F.softmax(x * 3, dim=-1).log1p()


CASES: dict[str, Any] = {
    "relu-sin": lambda: (ReluSin(), torch.randn(4, 8)),
    "mlp-dropout": lambda: (MLP(), torch.randn(4, 8)),
    "norms": lambda: (Norms(), torch.randn(5, 6)),
    "transformer-2": lambda: (Transformer(2), torch.randn(2, 16, 32)),
    "cos-of-sin": lambda: (
        _cos_of_sin,
        torch.randn(3, 4, requires_grad=True),
        torch.randn(4, 5, requires_grad=True),
    ),
    "softmax": lambda: (_softmax, torch.randn(3, 7, requires_grad=True)),
}


def _names(nodes: Any) -> set[str]:
    return {n.name for n in nodes}


def _torch_split(gm: fx.GraphModule, num_fwd_outputs: int) -> tuple[set, set, set]:
    """torch's saved values, forward calls and backward calls, by joint node name (live
    ones: torch's backward keeps an unread copy of a multi-output forward op)."""
    fw, bw = torch_default_partition(copy.deepcopy(gm), None, num_fwd_outputs=num_fwd_outputs)
    (out,) = fw.graph.find_nodes(op="output")
    saved = {a.name for a in out.args[0][num_fwd_outputs:] if isinstance(a, fx.Node)}
    calls = lambda g: {n.name for n in g.graph.nodes if n.op == "call_function" and n.users}  # noqa: E731
    return saved, calls(fw), calls(bw)


@pytest.mark.parametrize("case", sorted(CASES))
def test_default_partition_saves_what_torchs_saves(case: str) -> None:
    torch.manual_seed(0)
    j = joint_graph_of(*CASES[case]())
    res = partition_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs, kind="default", cse=False)
    want_saved, want_fw, want_bw = _torch_split(j.gm, j.num_fwd_outputs)
    calls = [(n, p) for n, p in zip(res.nodes, res.placement) if n.op == "call_function"]
    saved = _names(res.saved_nodes())
    assert saved == want_saved
    assert {n.name for n, p in calls if p & IN_FORWARD} == want_fw
    # torch's backward holds its computed nodes (the saved ones are placeholders there)
    assert {n.name for n, p in calls if p & IN_BACKWARD and n.name not in saved} == want_bw


@pytest.mark.parametrize("case", sorted(c for c in CASES if c != "mlp-dropout"))
def test_default_partition_grads_equal_eager(case: str) -> None:
    torch.manual_seed(0)
    fn, *args = CASES[case]()
    pf = aotgrad.partition.default_partition
    if isinstance(fn, nn.Module):
        ref_fn, leaves = copy.deepcopy(fn), lambda m: list(m.parameters())
        compiled = aotgrad.aot_module(fn, aotgrad.nop, partition_fn=pf)
        ref_args, ours, theirs = args, leaves(fn), leaves(ref_fn)
    else:
        ref_fn, compiled = fn, aotgrad.aot_function(fn, aotgrad.nop, partition_fn=pf)
        ref_args = [a.detach().requires_grad_() for a in args]
        ours, theirs = args, ref_args
    for f, a in ((compiled, args), (ref_fn, ref_args)):
        out = f(*a)
        sum(o.sum() for o in (out if isinstance(out, tuple) else (out,))).backward()
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad)
