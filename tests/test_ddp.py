"""A compiled model inside DistributedDataParallel (gloo, 2 processes) trains like eager DDP."""

from __future__ import annotations

import copy
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


def _worker(rank: int, world: int, port: int, backend: str, results: dict) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        base = torch.nn.Sequential(
            torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.Tanh()
        )
        ref = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base))
        ddp = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base))
        compiled = torch.compile(ddp, backend=backend)
        opt_r = torch.optim.SGD(ref.parameters(), lr=0.05)
        opt_c = torch.optim.SGD(ddp.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
        for _ in range(3):
            x = torch.randn(8, 16, generator=g)
            for m, opt in ((ref, opt_r), (compiled, opt_c)):
                opt.zero_grad()
                m(x).square().mean().backward()
                opt.step()
        diffs = [(a - b).abs().max().item() for a, b in zip(ref.parameters(), ddp.parameters())]
        results[rank] = max(diffs)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("backend", ["aotgrad_eager", "aotgrad"])
def test_ddp_gloo_two_processes(backend):
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(_worker, args=(2, _free_port(), backend, results), nprocs=2, join=True)
    assert sorted(results.keys()) == [0, 1]
    for rank, diff in results.items():
        assert diff < 1e-5, f"rank {rank}: parameters differ from eager DDP by {diff}"
