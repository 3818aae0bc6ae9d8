"""DTensor through aotgrad: a 2-process (gloo, CPU) tensor-parallel MLP
(``ColwiseParallel`` then ``RowwiseParallel``) trained under ``torch.compile`` with
``backend="aotgrad_eager"`` and ``backend="aotgrad"`` (Inductor, strict), losses and
gradients (full tensors) equal to eager's, compiled once. The DTensor parameters are
flattened to their local shards at the boundary of the trace (``aotgrad.subclasses``);
the collectives are the functional collectives DTensor issues while traced."""

from __future__ import annotations

import os
import socket

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


def _worker(rank: int, world: int, port: int, backend: str, results: dict) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        import aotgrad.api

        compilations = []
        compile_flat = aotgrad.api.compile_flat

        def counting(*args, **kwargs):
            compilations.append(1)
            return compile_flat(*args, **kwargs)

        aotgrad.api.compile_flat = counting
        mesh = init_device_mesh("cpu", (world,))
        eager, model = _mlp(mesh), _mlp(mesh)
        compiled = torch.compile(model, backend=backend, fullgraph=True, options={"strict": True})
        errors = []
        for step in range(3):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(step))
            want, got = eager(x).sum(), compiled(x).sum()
            want.backward()
            got.backward()
            if not torch.allclose(want, got, atol=1e-5):
                errors.append(f"step {step}: loss {got.item()} != {want.item()}")
            for (name, p), q in zip(model.named_parameters(), eager.parameters(), strict=True):
                if type(p.grad) is not type(q.grad) or not torch.allclose(
                    p.grad.full_tensor(), q.grad.full_tensor(), atol=1e-5
                ):
                    errors.append(f"step {step}: grad of {name}")
        results[rank] = (errors, len(compilations))
    except Exception as e:  # reported by the parent
        results[rank] = ([f"{type(e).__name__}: {e}"], -1)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["aotgrad_eager", "aotgrad"])
def test_tensor_parallel_mlp_two_processes(backend: str) -> None:
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(2, _free_port(), backend, results), nprocs=2, join=True)
    for rank in range(2):
        errors, compilations = results[rank]
        assert not errors, (rank, errors)
        assert compilations == 1, (rank, compilations)
