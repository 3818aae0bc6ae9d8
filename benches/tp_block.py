"""A tensor- and sequence-parallel transformer block trained with backend="aotgrad"
against backend="inductor", in the same run (2 processes, gloo, CPU).

The block is ``tests/test_dtensor.py``'s ``TransformerBlock`` under torch's Llama plan
(q, k, v and the MLP's up projection colwise, the output projections rowwise, the norms
and residuals sequence parallel: DTensor activations sharded on the sequence). Each
rank builds two copies (same seed), compiles one with each backend (``fullgraph=True``)
and trains both on the same batches:

* First-call compile time: each backend's first training step, in its own fresh Inductor
  cache (and an empty aotgrad disk cache); the order alternates between rounds.
* Step time: then the two copies step in turn, the order alternating every step, so
  each pair sees the same load; the figure is the median over steps of the paired ratio
  aotgrad / inductor (rank 0's; a step is forward, loss, backward).
* Loss parity between the two at every step.

    python benches/tp_block.py [--steps 30] [--dim 256] [--head-dim 32] [--seq 128]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from common import format_table, write_json

BACKENDS = ("inductor", "aotgrad")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _batch(args: Any, mesh: Any, step: int) -> Any:
    from torch.distributed.tensor import Shard, distribute_tensor

    gen = torch.Generator().manual_seed(step)
    x = torch.randn(args.batch, args.seq, args.dim, generator=gen)
    return distribute_tensor(x, mesh, [Shard(1)])


def _step(model: Any, x: Any) -> tuple[float, float]:
    """(seconds, loss) of one forward and backward, ranks aligned before it."""
    dist.barrier()
    t0 = time.perf_counter()
    loss = model(x).to_local().float().pow(2).mean()
    loss.backward()
    dist.barrier()
    return time.perf_counter() - t0, float(loss)


def _round(args: Any, mesh: Any, r: int) -> dict[str, Any]:
    from torch._inductor.utils import fresh_cache

    from test_dtensor import tp_sp_transformer_block

    torch._dynamo.reset()
    models = {}
    for b in BACKENDS:
        block = tp_sp_transformer_block(mesh, args.dim, args.head_dim)
        models[b] = torch.compile(block, backend=b, fullgraph=True)
    compile_s = {}
    order = BACKENDS if r % 2 == 0 else BACKENDS[::-1]
    for b in order:  # the first step compiles, cold
        with fresh_cache():
            compile_s[b] = _step(models[b], _batch(args, mesh, 0))[0]
    ratios, losses_differ = [], 0
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for step in range(1, args.steps + 1):
        x = _batch(args, mesh, step)
        seen = {}
        for b in BACKENDS if step % 2 else BACKENDS[::-1]:
            t, seen[b] = _step(models[b], x)
            times[b].append(t)
        ratios.append(times["aotgrad"][-1] / times["inductor"][-1])
        losses_differ += abs(seen["aotgrad"] - seen["inductor"]) > 1e-4 * max(
            1.0, abs(seen["inductor"])
        )
    return {
        "compile_s": compile_s,
        "step_ms": {b: 1e3 * statistics.median(ts) for b, ts in times.items()},
        "step_ratio": statistics.median(ratios),
        "losses_differ": losses_differ,
    }


def _worker(rank: int, args: Any, port: int, results: Any) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["AOTGRAD_CACHE_DIR"] = f"/tmp/aotgrad_tp_block_cache_{port}_{rank}"
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        from torch.distributed.device_mesh import init_device_mesh

        import aotgrad  # noqa: F401 - registers the backends

        mesh = init_device_mesh("cpu", (2,))
        rounds = [_round(args, mesh, r) for r in range(args.rounds)]
        if rank == 0:
            results["rounds"] = rounds
    finally:
        dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--head-dim", type=int, default=32)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    results = mp.Manager().dict()
    mp.spawn(_worker, args=(args, _free_port(), results), nprocs=2, join=True)
    rounds = list(results["rounds"])
    rows = [
        [
            r,
            f"{x['compile_s']['inductor']:.1f}",
            f"{x['compile_s']['aotgrad']:.1f}",
            f"{x['step_ms']['inductor']:.2f}",
            f"{x['step_ms']['aotgrad']:.2f}",
            f"{x['step_ratio']:.3f}",
            x["losses_differ"],
        ]
        for r, x in enumerate(rounds)
    ]
    head = ["round", "compile inductor s", "compile aotgrad s", "step inductor ms"]
    print(format_table([*head, "step aotgrad ms", "step ratio", "losses differ"], rows))
    ratio = statistics.median(x["step_ratio"] for x in rounds)
    compile_ratio = statistics.median(
        x["compile_s"]["aotgrad"] / x["compile_s"]["inductor"] for x in rounds
    )
    print(f"step time aotgrad / inductor (median of paired steps, median of rounds): {ratio:.3f}")
    print(f"first-call compile aotgrad / inductor: {compile_ratio:.3f}")
    write_json(args.json, {"args": vars(args), "rounds": rounds, "step_ratio": ratio})


if __name__ == "__main__":
    main()
