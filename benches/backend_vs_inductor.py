"""torch.compile(backend="aotgrad") against backend="inductor" on a small GPT, on CPU.

Each round is one fresh process that trains three copies of the same GPT (same
seed, same batches): eager (the reference), backend="aotgrad" and
backend="inductor".

* First-call compile time: the first training step (forward, backward,
  optimizer step) of each compiled copy. Both compile cold: each compilation
  runs in its own empty Inductor cache (``torch._inductor.utils.fresh_cache``:
  a new cache directory and cleared in-memory code caches, so neither backend
  reuses the other's kernels) and with its own empty aotgrad disk cache; and
  before either, a warm-up compiles an unrelated tiny model with both backends,
  so that one-time process costs (imports, compile workers, ISA probes) fall on
  neither. The order of the two compilations alternates between rounds.
* Steady step time: the remaining steps run the three copies in turn, the
  order of aotgrad and inductor alternating every step, so that each pair of
  steps sees the same machine load; the per-round figure is the median over
  steps of the paired ratio aotgrad / inductor.
* Activation memory held between forward and backward (glibc's in-use heap
  bytes right after the forward minus right before it), median over steps.
* Loss parity with eager at every step.

Ratios are computed within a round; the headline is the median over rounds.
Intra-op threads default to 1 (``--threads``): on a shared machine OpenMP's
spinning threads turn a busy neighbour into 10x step-time spikes.

    python benches/backend_vs_inductor.py [--rounds 3] [--steps 20] [--layers 4] [--width 128]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

BACKENDS = ("aotgrad", "inductor")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_in_use() -> int:
    """Bytes glibc malloc has handed out and not taken back (arena + mmapped chunks)."""
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    m = libc.mallinfo2()
    return int(m.uordblks + m.hblkhd)


def _warm_up(tmp: str) -> None:
    """Compile an unrelated tiny model with both backends, in a cache that is thrown away."""
    import torch
    from torch._inductor.utils import fresh_cache

    os.environ["AOTGRAD_CACHE_DIR"] = os.path.join(tmp, "warm-aotgrad")
    with fresh_cache(dir=tmp):
        for backend in BACKENDS:
            m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 1))
            torch.compile(m, backend=backend)(torch.randn(4, 8)).sum().backward()


def worker(args: argparse.Namespace, first: str) -> dict[str, Any]:
    import copy

    import torch
    from torch._inductor.utils import fresh_cache

    from aotgrad.tools.models import GPT, GPTConfig

    tmp = tempfile.mkdtemp(prefix="aotgrad-bench-")
    _warm_up(tmp)
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=96, block_size=args.seq, n_layer=args.layers, n_embd=args.width)
    eager = GPT(cfg)
    models = {b: copy.deepcopy(eager) for b in BACKENDS}
    compiled = {b: torch.compile(models[b], backend=b) for b in BACKENDS}
    opts = {b: torch.optim.SGD(models[b].parameters(), lr=0.05) for b in BACKENDS}
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    order = [first, next(b for b in BACKENDS if b != first)]
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    held: dict[str, list[int]] = {b: [] for b in BACKENDS}
    rel: dict[str, list[float]] = {b: [] for b in BACKENDS}
    compile_s: dict[str, float] = {}

    def step(b: str, x: torch.Tensor, y: torch.Tensor) -> tuple[float, int, float]:
        opts[b].zero_grad(set_to_none=True)
        before = heap_in_use()
        t0 = time.perf_counter()
        loss = compiled[b](x, y)
        after = heap_in_use()
        loss.backward()
        opts[b].step()
        return time.perf_counter() - t0, after - before, loss.item()

    for s in range(args.steps):
        x = torch.randint(0, 96, (args.batch, args.seq), generator=g)
        y = torch.randint(0, 96, (args.batch, args.seq), generator=g)
        losses = {}
        for b in order if s % 2 == 0 else order[::-1]:
            if s == 0:  # the first call compiles, cold (see the module docstring)
                os.environ["AOTGRAD_CACHE_DIR"] = os.path.join(tmp, f"aotgrad-{b}")
                with fresh_cache(dir=tmp):
                    dt, h, losses[b] = step(b, x, y)
                compile_s[b] = dt
            else:
                dt, h, losses[b] = step(b, x, y)
                times[b].append(dt)
                held[b].append(h)
        opt_e.zero_grad(set_to_none=True)
        loss_e = eager(x, y)
        loss_e.backward()
        opt_e.step()
        for b in BACKENDS:
            rel[b].append(abs(losses[b] - loss_e.item()) / abs(loss_e.item()))
    shutil.rmtree(tmp, ignore_errors=True)
    # Steady state: from the third step on (the second may still compile lazily).
    steady = slice(1, None) if args.steps > 2 else slice(None)
    paired = [a / i for a, i in zip(times["aotgrad"][steady], times["inductor"][steady])]
    return {
        "first": first,
        "compile_s": compile_s,
        "second_step_ms": {b: 1e3 * times[b][0] for b in BACKENDS},
        "step_ms": {b: 1e3 * statistics.median(times[b][steady]) for b in BACKENDS},
        "step_ratio": statistics.median(paired),
        "step_times_ms": {b: [1e3 * t for t in times[b]] for b in BACKENDS},
        "held_bytes": {b: statistics.median(held[b]) for b in BACKENDS},
        "max_rel_loss_diff": {b: max(rel[b]) for b in BACKENDS},
    }


def run_worker(script: str, argv: list[str], threads: int, **env: str) -> dict[str, Any]:
    """Run ``script --worker ARGV`` in a fresh process (hash seed 0, ``threads`` OpenMP
    threads, extra environment ``env``); its last stdout line is the JSON result."""
    full_env = dict(os.environ, PYTHONHASHSEED="0", OMP_NUM_THREADS=str(threads), **env)
    cmd = [sys.executable, script, "--worker", *argv]
    out = subprocess.run(cmd, env=full_env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"worker failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_round(first: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = [first]
    for name in ("steps", "layers", "width", "seq", "batch", "threads"):
        argv += [f"--{name}", str(getattr(args, name))]
    return run_worker(__file__, argv, args.threads)


def _print_metric(name: str, rounds: list[dict[str, Any]], get: Any, ratio_of: Any) -> dict:
    ratios = []
    for k, rd in enumerate(rounds):
        a, i = get(rd, "aotgrad"), get(rd, "inductor")
        ratios.append(ratio_of(rd, a, i))
        label = name if k == 0 else ""
        print(f"{label:34}{k + 1:6}{a:10.2f}{i:10.2f}{ratios[-1]:8.3f}")
    med_a = statistics.median(get(rd, "aotgrad") for rd in rounds)
    med_i = statistics.median(get(rd, "inductor") for rd in rounds)
    med_r = statistics.median(ratios)
    print(f"{'':34}{'median':>6}{med_a:10.2f}{med_i:10.2f}{med_r:8.3f}")
    return {"aotgrad": med_a, "inductor": med_i, "ratio": med_r, "ratios": ratios}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads (OMP_NUM_THREADS)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args, args.worker)))
        return 0
    load = os.getloadavg()
    t_start = time.perf_counter()
    rounds = [run_round(BACKENDS[r % 2], args) for r in range(args.rounds)]
    end_load = os.getloadavg()
    print(
        f"small GPT {args.layers}x{args.width}, seq {args.seq}, batch {args.batch}, "
        f"{args.steps} steps, CPU, {args.threads} intra-op thread(s), {args.rounds} rounds"
    )
    print(
        f"{os.cpu_count()} CPUs; load average (1/5/15 min) at start "
        f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}, at end "
        f"{end_load[0]:.2f}/{end_load[1]:.2f}/{end_load[2]:.2f}; "
        f"bench wall time {time.perf_counter() - t_start:.0f} s"
    )
    print(f"compiled first per round: {', '.join(rd['first'] for rd in rounds)}")
    print(f"{'':34}{'round':>6}{'aotgrad':>10}{'inductor':>10}{'ratio':>8}")

    def plain(rd: dict, a: float, i: float) -> float:
        return a / i if i else float("nan")

    summary = {
        "first-call compile time (s)": _print_metric(
            "first-call compile time (s)", rounds, lambda rd, b: rd["compile_s"][b], plain
        ),
        "second step time (ms)": _print_metric(
            "second step time (ms)", rounds, lambda rd, b: rd["second_step_ms"][b], plain
        ),
        "steady step time (ms)": _print_metric(
            "steady step time (ms)",
            rounds,
            lambda rd, b: rd["step_ms"][b],
            lambda rd, a, i: rd["step_ratio"],  # median of the per-step paired ratios
        ),
        "activation memory held (MB)": _print_metric(
            "activation memory held (MB)",
            rounds,
            lambda rd, b: rd["held_bytes"][b] / 2**20,
            plain,
        ),
    }
    print("(steady step ratio: median over steps of the paired ratio, not of the medians)")
    worst = {b: max(rd["max_rel_loss_diff"][b] for rd in rounds) for b in BACKENDS}
    print(
        f"{'max per-step loss rel. diff vs eager':40}"
        f"{worst['aotgrad']:10.2e}{worst['inductor']:10.2e}"
    )
    ok = worst["aotgrad"] <= 1e-4
    print(f"loss within 1e-4 of eager at every step: {'yes' if ok else 'NO'}")
    goals = [
        ("steady step time (ms)", 1.05),
        ("activation memory held (MB)", 1.0),
        ("first-call compile time (s)", 1.0),
    ]
    for name, goal in goals:
        r = summary[name]["ratio"]
        print(f"goal: {name} ratio <= {goal}: {r:.3f} {'yes' if r <= goal else 'NO'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "summary": summary, "load": [load, end_load]}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
