"""Joint forward+backward FX graphs for tests and benchmarks.

``joint_graph_of(model_or_fn, *example_inputs)`` traces a joint graph the way
aotgrad's tracer does (fake tensors, ``make_fx``, ``torch.autograd.grad`` with
tangents), independently of ``aotgrad.trace`` so that table and partitioner
tests do not depend on the tracer. Placeholders are ``primals_*`` then
``tangents_*``, each with ``meta["aotgrad_role"]`` set.

``transformer_joint(blocks=64)`` is the joint graph of a small pre-norm
transformer (about 125 nodes per block: ~8,000 for 64 blocks), cached per
process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
import torch.nn.functional as F
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import get_proxy_mode, make_fx
from torch.utils import _pytree as pytree


@dataclass
class JointGraph:
    """A traced joint graph: outputs are the forward outputs, then one gradient per primal."""

    gm: fx.GraphModule
    num_fwd_outputs: int
    num_primals: int
    num_tangents: int


def _as_fn(model_or_fn: Any, example_inputs: Sequence[Any]) -> tuple[Callable[..., Any], list]:
    """A function of the flat primals (parameters first for a module) and the primals."""
    if not isinstance(model_or_fn, nn.Module):
        return model_or_fn, list(example_inputs)
    model = model_or_fn
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]

    def fn(*primals: Any) -> Any:
        state = dict(zip(names, primals[: len(names)], strict=True))
        return torch.func.functional_call(model, state, tuple(primals[len(names) :]))

    return fn, params + list(example_inputs)


def joint_graph_of(model_or_fn: Any, *example_inputs: Any) -> JointGraph:
    """Trace the joint graph of ``model_or_fn(*example_inputs)`` under fake tensors."""
    fn, primals = _as_fn(model_or_fn, example_inputs)
    fm = FakeTensorMode()
    fake_primals = [fm.from_tensor(p) if isinstance(p, torch.Tensor) else p for p in primals]
    with fm:
        outs = pytree.tree_leaves(fn(*fake_primals))
        fake_tangents = [
            torch.empty_like(o) for o in outs if isinstance(o, torch.Tensor) and o.requires_grad
        ]

    def joint(primals: list[Any], tangents: list[Any]) -> tuple[Any, ...]:
        outs = pytree.tree_leaves(fn(*primals))
        for node in get_proxy_mode().tracer.graph.nodes:  # as torch's joint tracer tags them
            node.meta.setdefault("partitioner_tag", "is_forward")
        diff_outs = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [p for p in primals if isinstance(p, torch.Tensor) and p.requires_grad]
        grads = torch.autograd.grad(diff_outs, wrt, tangents, allow_unused=True)
        it = iter(grads)
        all_grads = [
            next(it) if isinstance(p, torch.Tensor) and p.requires_grad else None for p in primals
        ]
        return (*outs, *all_grads)

    with fm:
        gm = make_fx(joint)(fake_primals, fake_tangents)
    gm.graph._codegen = fx.graph.CodeGen()
    gm.recompile()
    placeholders = gm.graph.find_nodes(op="placeholder")
    for i, node in enumerate(placeholders):
        node.meta["aotgrad_role"] = "primal" if i < len(primals) else "tangent"
    return JointGraph(gm, len(outs), len(primals), len(fake_tangents))


class Block(nn.Module):
    """A pre-norm transformer block: attention then a GELU MLP, both residual."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    def __init__(self, blocks: int, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(blocks)))
        self.head = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x)).sum()


class MLP(nn.Module):
    """Linear → ReLU → dropout → Linear; a small graph with a random op."""

    def __init__(self, dim: int = 8, dropout: float = 0.1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.dropout(torch.relu(self.fc1(x)), self.dropout, training=True)
        return self.fc2(h)


@functools.cache
def transformer_joint(blocks: int = 64) -> JointGraph:
    """The joint graph of ``Transformer(blocks)`` on a (2, 16, 32) input; cached."""
    torch.manual_seed(0)
    return joint_graph_of(Transformer(blocks), torch.randn(2, 16, 32))


@functools.cache
def mlp_joint() -> JointGraph:
    torch.manual_seed(0)
    return joint_graph_of(MLP(), torch.randn(4, 8))
