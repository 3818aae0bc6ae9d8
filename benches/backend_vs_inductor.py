"""torch.compile(backend="aotgrad") against backend="inductor" on a small GPT, on CPU.

Each backend trains in its own fresh process with its own empty Inductor cache
directory (so neither reuses the other's compiled kernels), the same seed, the
same batches, and eager PyTorch alongside as the reference. Printed per backend:
loss parity with eager at every step, first-call compile time, steady-state
step time (median), and the activation memory held between forward and
backward (glibc's in-use heap bytes right after the forward, minus those right
before it). Then the ratios aotgrad / inductor.

    python benches/backend_vs_inductor.py [--steps 20] [--layers 4] [--width 128]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
import time


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


def worker(backend: str, steps: int, layers: int, width: int, seq: int, batch: int) -> dict:
    import copy

    import torch

    from aotgrad.models import GPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=96, block_size=seq, n_layer=layers, n_embd=width)
    eager = GPT(cfg)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend=backend)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.05)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    rel_diffs, step_times, held = [], [], []
    compile_time = 0.0
    for step in range(steps):
        x = torch.randint(0, 96, (batch, seq), generator=g)
        y = torch.randint(0, 96, (batch, seq), generator=g)
        opt_c.zero_grad(set_to_none=True)
        before = heap_in_use()
        t0 = time.perf_counter()
        loss_c = compiled(x, y)
        after = heap_in_use()
        loss_c.backward()
        opt_c.step()
        dt = time.perf_counter() - t0
        if step == 0:
            compile_time = dt
        else:
            step_times.append(dt)
            held.append(after - before)
        opt_e.zero_grad(set_to_none=True)
        loss_e = eager(x, y)
        loss_e.backward()
        opt_e.step()
        rel_diffs.append(abs(loss_c.item() - loss_e.item()) / abs(loss_e.item()))
    step_times.sort()
    held.sort()
    return {
        "backend": backend,
        "compile_s": compile_time,
        "step_ms": 1e3 * step_times[len(step_times) // 2],
        "held_bytes": held[len(held) // 2],
        "max_rel_loss_diff": max(rel_diffs),
        "rel_loss_diffs": rel_diffs,
    }


def run_isolated(backend: str, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, PYTHONHASHSEED="0")
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            backend,
            *("--steps", str(args.steps), "--layers", str(args.layers)),
            *("--width", str(args.width), "--seq", str(args.seq), "--batch", str(args.batch)),
        ]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"{backend} worker failed:\n{out.stderr[-4000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    if args.worker:
        r = worker(args.worker, args.steps, args.layers, args.width, args.seq, args.batch)
        print(json.dumps(r))
        return 0
    res = {b: run_isolated(b, args) for b in ("inductor", "aotgrad")}
    a, i = res["aotgrad"], res["inductor"]
    print(
        f"small GPT {args.layers}x{args.width}, seq {args.seq}, batch {args.batch}, "
        f"{args.steps} steps, CPU"
    )
    print(f"{'':34}{'aotgrad':>12}{'inductor':>12}{'ratio':>9}")
    rows = [
        ("first-call compile time (s)", a["compile_s"], i["compile_s"]),
        ("steady step time, median (ms)", a["step_ms"], i["step_ms"]),
        ("activation memory held (MB)", a["held_bytes"] / 2**20, i["held_bytes"] / 2**20),
    ]
    for name, x, y in rows:
        print(f"{name:34}{x:12.3f}{y:12.3f}{x / y:9.3f}")
    print(
        f"{'max per-step loss rel. diff vs eager':34}"
        f"{a['max_rel_loss_diff']:12.2e}{i['max_rel_loss_diff']:12.2e}"
    )
    ok = a["max_rel_loss_diff"] <= 1e-4
    print(f"loss within 1e-4 of eager at every step: {'yes' if ok else 'NO'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
