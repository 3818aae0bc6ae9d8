"""DTensor through aotgrad, 2 processes (gloo, CPU): a tensor-parallel MLP
(``ColwiseParallel`` then ``RowwiseParallel``), a sequence-parallel block (LayerNorm
under ``SequenceParallel``, its input a DTensor sharded on the sequence), a tensor and
sequence parallel transformer block (torch's Llama plan) and an FSDP2 (``fully_shard``)
block, trained under ``torch.compile`` with ``backend="aotgrad_eager"`` and
``backend="aotgrad"`` (Inductor, strict): losses and gradients equal to eager's (full
tensors, and their placements: a sequence-parallel norm's gradient is ``Partial`` as in
eager, not all-reduced in the graph). TP and SP compile once; their DTensor parameters
and inputs are flattened to local shards at the boundary of the trace
(``aotgrad.subclasses``), the collectives being the functional collectives DTensor
issues while traced. FSDP2's hooks unshard outside the compiled regions (graph breaks,
as under torch's own backends), which hold plain tensors only."""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _mlp(mesh: object) -> torch.nn.Module:
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    return parallelize_module(m, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


def _sequence_parallel_block(mesh: object) -> torch.nn.Module:
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    torch.manual_seed(0)
    plan = {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
    }
    return parallelize_module(_Block(), mesh, plan)


class _Attention(torch.nn.Module):
    """Causal self-attention; under tensor parallelism each rank holds ``heads / world``
    heads (``q``, ``k``, ``v`` colwise, ``out`` rowwise), hence the ``-1`` heads."""

    def __init__(self, dim: int, head_dim: int) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.q, self.k, self.v, self.out = (torch.nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, s, -1, self.head_dim).transpose(1, 2)

        y = torch.nn.functional.scaled_dot_product_attention(
            heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), is_causal=True
        )
        return self.out(y.transpose(1, 2).reshape(b, s, -1))


class _Mlp(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(dim, 4 * dim)
        self.down = torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


class TransformerBlock(torch.nn.Module):
    """A pre-norm transformer block (also ``benches/tp_block.py``'s)."""

    def __init__(self, dim: int = 8, head_dim: int = 2) -> None:
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.attn = _Attention(dim, head_dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = _Mlp(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def tp_sp_transformer_block(mesh: object, dim: int = 8, head_dim: int = 2) -> torch.nn.Module:
    """Tensor parallel attention and MLP, sequence parallel norms and residuals (the
    activations between them are DTensors sharded on the sequence): torch's Llama plan."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    torch.manual_seed(0)
    gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    back = RowwiseParallel(output_layouts=Shard(1), use_local_output=False)
    plan = {
        "norm1": SequenceParallel(),
        "attn": gather,
        "attn.q": ColwiseParallel(),
        "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(),
        "attn.out": back,
        "norm2": SequenceParallel(),
        "mlp": gather,
        "mlp.up": ColwiseParallel(),
        "mlp.down": back,
    }
    return parallelize_module(TransformerBlock(dim, head_dim), mesh, plan)


def _fsdp2_block(mesh: object) -> torch.nn.Module:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    m = _Block()
    fully_shard(m, mesh=mesh)
    return m


def _case(case: str, mesh: object, step: int) -> Any:
    """The eager and compiled models (``step < 0``) or the input of ``step``."""
    make = {
        "tp_mlp": _mlp,
        "sp_block": _sequence_parallel_block,
        "tp_sp_transformer": tp_sp_transformer_block,
        "fsdp2": _fsdp2_block,
    }[case]
    if step >= 0:
        gen = torch.Generator().manual_seed(step)
        if case == "tp_mlp":
            return torch.randn(4, 8, generator=gen)
        x = torch.randn(2, 4, 8, generator=gen)
        if case in ("sp_block", "tp_sp_transformer"):
            from torch.distributed.tensor import Shard, distribute_tensor

            return distribute_tensor(x, mesh, [Shard(1)])
        return x
    return make(mesh), make(mesh), None


def _loss(out: torch.Tensor) -> torch.Tensor:
    return out.full_tensor().sum() if hasattr(out, "full_tensor") else out.sum()


def _worker(rank: int, world: int, port: int, backend: str, case: str, results: dict) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        import aotgrad.program

        compilations = []
        compile_flat = aotgrad.program.compile_flat

        def counting(*args, **kwargs):
            compilations.append(1)
            return compile_flat(*args, **kwargs)

        aotgrad.program.compile_flat = counting
        mesh = init_device_mesh("cpu", (world,))
        eager, model, _ = _case(case, mesh, -1)
        full = case != "fsdp2"  # FSDP2's hooks break the graph where torch's backends do
        compiled = torch.compile(model, backend=backend, fullgraph=full, options={"strict": True})
        errors = []
        for step in range(3):
            x = _case(case, mesh, step)
            want, got = _loss(eager(x)), _loss(compiled(x))
            want.backward()
            got.backward()
            if not torch.allclose(want, got, atol=1e-5):
                errors.append(f"step {step}: loss {got.item()} != {want.item()}")
            for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
                if type(p.grad) is not type(q.grad) or not torch.allclose(
                    p.grad.full_tensor(), q.grad.full_tensor(), atol=1e-5
                ):
                    errors.append(f"step {step}: grad of {name}")
                elif p.grad.placements != q.grad.placements:  # eager's: Partial for norms
                    errors.append(f"step {step}: {name}.grad is {p.grad.placements}")
        results[rank] = (errors, len(compilations))
    except Exception as e:  # reported by the parent
        results[rank] = ([f"{type(e).__name__}: {e}"], -1)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["aotgrad_eager", "aotgrad"])
@pytest.mark.parametrize("case", ["tp_mlp", "sp_block", "tp_sp_transformer", "fsdp2"])
def test_dtensor_two_processes(case: str, backend: str) -> None:
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(2, _free_port(), backend, case, results), nprocs=2, join=True)
    for rank in range(2):
        errors, compilations = results[rank]
        assert not errors, (rank, errors)
        if case != "fsdp2":  # FSDP2's compiled regions hold plain (unsharded) tensors
            assert compilations == 1, (rank, compilations)
