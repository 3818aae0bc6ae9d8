"""Regional compilation: a 12-block GPT (``aotgrad.tools.models.gpt``, CPU) with its
blocks marked by ``torch.compiler.nested_compile_region``, under ``backend="aotgrad"``,
against the same model with and without the marks under ``backend="inductor"``.

Each configuration runs in a fresh process (cold: a fresh Inductor cache, an empty
aotgrad disk cache), in turn, for ``--rounds`` rounds:

* compile: the first training step (forward and backward), which compiles;
* step: the median of ``--steps`` further steps;
* parity: the loss and every gradient against eager's.

    python benches/regional_compile.py [--rounds 2] [--layers 12] [--steps 10]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import format_table, write_json

CONFIGS = [("inductor", False), ("inductor", True), ("aotgrad", False), ("aotgrad", True)]


def _one(backend: str, marked: bool, layers: int, steps: int) -> None:
    """In the child process: one configuration; prints ``RESULT compile step diff``."""
    import torch
    from torch._inductor.utils import fresh_cache

    import aotgrad  # noqa: F401 - registers the backends
    from aotgrad.tools.models.gpt import GPT, Block, GPTConfig

    torch.set_num_threads(1)
    if marked:
        Block.forward = torch.compiler.nested_compile_region(Block.forward)
    torch.manual_seed(0)
    cfg = GPTConfig(n_layer=layers, n_embd=64, n_head=4, block_size=32)
    model = GPT(cfg)
    ref = copy.deepcopy(model)
    idx = torch.randint(0, cfg.vocab_size, (4, 32))
    tgt = torch.randint(0, cfg.vocab_size, (4, 32))
    compiled = torch.compile(model, backend=backend)
    with fresh_cache():
        t0 = time.perf_counter()
        loss = compiled(idx, tgt)
        loss.backward()
        compile_s = time.perf_counter() - t0
    want = ref(idx, tgt)
    want.backward()
    diff = max(
        abs(loss.item() - want.item()),
        *(
            (p.grad - q.grad).abs().max().item()
            for p, q in zip(model.parameters(), ref.parameters())
        ),
    )
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        compiled(idx, tgt).backward()
        times.append(time.perf_counter() - t0)
    print(f"RESULT {compile_s} {statistics.median(times)} {diff}")


def _run(backend: str, marked: bool, args: argparse.Namespace) -> tuple[float, float, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "AOTGRAD_CACHE_DIR": cache}
        cmd = [sys.executable, __file__, "--one", backend, str(int(marked))]
        cmd += ["--layers", str(args.layers), "--steps", str(args.steps)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    line = next(x for x in out.splitlines() if x.startswith("RESULT"))
    compile_s, step_s, diff = map(float, line.split()[1:])
    return compile_s, step_s, diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--one", nargs=2, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.one:
        _one(args.one[0], args.one[1] == "1", args.layers, args.steps)
        return
    seen: dict[tuple[str, bool], list[tuple[float, float, float]]] = {c: [] for c in CONFIGS}
    for r in range(args.rounds):
        for backend, marked in CONFIGS if r % 2 == 0 else CONFIGS[::-1]:
            seen[(backend, marked)].append(_run(backend, marked, args))
    med = {c: tuple(statistics.median(x[i] for x in v) for i in range(3)) for c, v in seen.items()}
    rows = [
        [b, "marked" if m else "unmarked", f"{c:.1f}", f"{1e3 * s:.2f}", f"{d:.1e}"]
        for (b, m), (c, s, d) in med.items()
    ]
    print(format_table(["backend", "blocks", "compile s", "step ms", "max diff vs eager"], rows))
    ours, ind, ind_m = med[("aotgrad", True)], med[("inductor", False)], med[("inductor", True)]
    print(f"aotgrad marked compile / inductor unmarked: {ours[0] / ind[0]:.2f} (goal <= 0.5)")
    print(f"aotgrad marked compile / inductor marked:   {ours[0] / ind_m[0]:.2f} (goal <= 1)")
    print(f"aotgrad marked step / inductor unmarked:    {ours[1] / ind[1]:.2f} (goal <= 1.05)")
    write_json(
        args.json, {"args": vars(args), "runs": {f"{b}-{m}": v for (b, m), v in seen.items()}}
    )


if __name__ == "__main__":
    main()
