"""The persistent caches: first-call compile time of a second process against the first.

Each process is fresh and trains the GPT of ``backend_vs_inductor.py`` for one
step (forward, backward, optimizer step), timing that first call. Scenarios,
each a chain of processes sharing cache directories:

* ``aotgrad``: process 1 compiles cold (empty aotgrad and Inductor caches);
  process 2 reuses both: aotgrad's disk cache skips tracing and partitioning,
  Inductor's FX-graph cache skips code generation.
* ``aotgrad, own cache only``: process 2 finds aotgrad's entries but an empty
  Inductor cache, so the figure is what aotgrad's cache alone saves.
* ``inductor`` (reference): torch's AOTAutograd and FX-graph caches, same chain.

A one-time import warm-up (an unrelated tiny model, in throwaway caches) runs
first in every process. Losses must be equal across the processes of a chain.

Besides the whole first call, each process times the backend's own part: Dynamo's
call into the backend (``OutputGraph.call_user_compiler``), which is aotgrad's cache
lookup and reload, or torch's AOT Autograd and its cache. The rest of the call is
Dynamo's tracing and the run, the same work for both backends: it bounds the ratio of
the whole warm starts from below.

    python benches/cache_second_process.py [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any


def _timing_backend_calls() -> list[float]:
    """Seconds of each call Dynamo makes into the backend from now on."""
    from torch._dynamo.output_graph import OutputGraph

    spent: list[float] = []
    inner = OutputGraph.call_user_compiler

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(self, *args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t0)

    OutputGraph.call_user_compiler = timed  # type: ignore[method-assign]
    return spent


def worker(backend: str) -> dict[str, Any]:
    import torch

    import aotgrad.observe as observe
    from aotgrad.tools.models import GPT, GPTConfig
    from backend_vs_inductor import _warm_up

    aotgrad_dir = os.environ["AOTGRAD_CACHE_DIR"]
    scratch = tempfile.mkdtemp(prefix="aotgrad-warm-")
    _warm_up(scratch)  # sets AOTGRAD_CACHE_DIR to a throwaway directory: restore it
    os.environ["AOTGRAD_CACHE_DIR"] = aotgrad_dir
    hits: list[bool] = []
    observe.on_compiled(lambda artifact: hits.append("cache" in artifact.timings))
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=96, block_size=64, n_layer=4, n_embd=128))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 96, (8, 64), generator=g)
    y = torch.randint(0, 96, (8, 64), generator=g)
    compiled = torch.compile(model, backend=backend)
    backend_seconds = _timing_backend_calls()
    t0 = time.perf_counter()
    loss = compiled(x, y)
    loss.backward()
    opt.step()
    seconds = time.perf_counter() - t0
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "seconds": seconds,
        "backend_seconds": sum(backend_seconds),
        "loss": loss.item(),
        "aotgrad_disk_hits": hits,
    }


def run_process(backend: str, aotgrad_dir: str, inductor_dir: str) -> dict[str, Any]:
    from backend_vs_inductor import run_worker

    return run_worker(
        __file__,
        [backend],
        1,
        AOTGRAD_CACHE_DIR=aotgrad_dir,
        TORCHINDUCTOR_CACHE_DIR=inductor_dir,
    )


def chain(backend: str, root: str, name: str, *, fresh_inductor_second: bool) -> list[dict]:
    a_dir, i_dir = os.path.join(root, name, "aotgrad"), os.path.join(root, name, "inductor")
    first = run_process(backend, a_dir, i_dir)
    second_i = os.path.join(root, name, "inductor-2") if fresh_inductor_second else i_dir
    second = run_process(backend, a_dir, second_i)
    return [first, second]


SCENARIOS = (
    ("aotgrad", "aotgrad", False),
    ("aotgrad, own cache only", "aotgrad", True),
    ("inductor (reference)", "inductor", False),
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=1, help="chains per scenario")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return 0
    root = tempfile.mkdtemp(prefix="aotgrad-cache-bench-")
    ok = True
    print("GPT 4x128, seq 64, batch 8, CPU; first-call compile time of each fresh process")
    print(
        f"{'scenario':26}{'repeat':>7}{'process 1 (s)':>15}{'process 2 (s)':>15}{'2 / 1':>8}"
        f"  aotgrad disk hits (1 | 2)"
    )
    warm: dict[str, list[float]] = {"aotgrad": [], "inductor": []}
    own: dict[str, list[float]] = {"aotgrad": [], "inductor": []}
    try:
        # Repeats interleave the scenarios, so that the machine's drift hits them alike.
        for r in range(args.repeats):
            for label, backend, fresh in SCENARIOS:
                name = f"{label.split()[0]}-{int(fresh)}-{r}"
                first, second = chain(backend, root, name, fresh_inductor_second=fresh)
                if not fresh:
                    warm[backend].append(second["seconds"])
                    own[backend].append(second["backend_seconds"])
                same = first["loss"] == second["loss"]
                ok &= same
                if backend == "aotgrad":
                    ok &= not any(first["aotgrad_disk_hits"]) and all(second["aotgrad_disk_hits"])
                hits = f"{first['aotgrad_disk_hits']} | {second['aotgrad_disk_hits']}"
                print(
                    f"{label:26}{r + 1:7}{first['seconds']:15.2f}{second['seconds']:15.2f}"
                    f"{second['seconds'] / first['seconds']:8.3f}  {hits}"
                    + ("" if same else "  LOSSES DIFFER")
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    a, i = statistics.median(warm["aotgrad"]), statistics.median(warm["inductor"])
    print(
        f"warm start (process 2, both caches warm), median of {args.repeats}: aotgrad {a:.2f} s, "
        f"inductor {i:.2f} s, aotgrad / inductor {a / i:.3f}"
    )
    oa, oi = statistics.median(own["aotgrad"]), statistics.median(own["inductor"])
    print(
        f"  the backend's own part of it: aotgrad {oa:.3f} s, torch's AOT Autograd + "
        f"Inductor {oi:.3f} s, aotgrad / torch {oa / oi:.3f}; the rest (Dynamo's, the "
        f"same for both) bounds the whole ratio from below at {(i - oi) / i:.3f}"
    )
    print(
        f"losses equal across processes, aotgrad cache hit only in process 2: {'yes' if ok else 'NO'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
