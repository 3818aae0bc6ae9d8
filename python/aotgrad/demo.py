"""``aotgrad demo``: train a small GPT on the shipped corpus with ``backend="aotgrad"``
and eagerly, side by side, and print how they compare."""

from __future__ import annotations

import argparse
import copy
import time
from importlib import resources

import torch

from .models import GPT, GPTConfig


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backend", default="aotgrad", choices=["aotgrad", "aotgrad_eager"])
    p.add_argument("--seed", type=int, default=0)


def load_corpus() -> str:
    return resources.files("aotgrad.data").joinpath("corpus.txt").read_text()


def batches(text: str, vocab: list[str], seq: int, batch: int, steps: int, seed: int):
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ix = torch.randint(len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[i : i + seq] for i in ix])
        y = torch.stack([data[i + 1 : i + seq + 1] for i in ix])
        yield x, y


def _progress(step: int, total: int, loss_a: float, loss_e: float) -> None:
    width = 30
    done = int(width * step / total)
    bar = "#" * done + "." * (width - done)
    print(f"\r[{bar}] {step}/{total} loss aotgrad {loss_a:.4f} eager {loss_e:.4f}", end="")


def run(args: argparse.Namespace) -> int:
    text = load_corpus()
    vocab = sorted(set(text))
    cfg = GPTConfig(
        vocab_size=len(vocab), block_size=args.seq, n_layer=args.layers, n_embd=args.width
    )
    torch.manual_seed(args.seed)
    eager = GPT(cfg).to(args.device)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend=args.backend)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=3e-3)
    opt_c = torch.optim.AdamW(model.parameters(), lr=3e-3)
    times_c, times_e, worst = [], [], 0.0
    compile_time = 0.0
    print(
        f"aotgrad demo: GPT {args.layers}x{args.width}, seq {args.seq}, batch {args.batch}, "
        f"{args.steps} steps on {args.device}, backend={args.backend}"
    )
    for step, (x, y) in enumerate(
        batches(text, vocab, args.seq, args.batch, args.steps, args.seed)
    ):
        x, y = x.to(args.device), y.to(args.device)
        t0 = time.perf_counter()
        opt_c.zero_grad(set_to_none=True)
        loss_c = compiled(x, y)
        loss_c.backward()
        opt_c.step()
        t1 = time.perf_counter()
        opt_e.zero_grad(set_to_none=True)
        loss_e = eager(x, y)
        loss_e.backward()
        opt_e.step()
        t2 = time.perf_counter()
        if step == 0:
            compile_time = t1 - t0
        else:
            times_c.append(t1 - t0)
            times_e.append(t2 - t1)
        rel = abs(loss_c.item() - loss_e.item()) / max(abs(loss_e.item()), 1e-12)
        worst = max(worst, rel)
        _progress(step + 1, args.steps, loss_c.item(), loss_e.item())
    print()
    med = lambda v: sorted(v)[len(v) // 2] if v else float("nan")  # noqa: E731
    rows = [
        ("final loss (aotgrad / eager)", f"{loss_c.item():.5f} / {loss_e.item():.5f}"),
        ("worst per-step loss rel. diff", f"{worst:.2e}"),
        (
            "step time, median (aotgrad / eager)",
            f"{med(times_c) * 1e3:.1f} ms / {med(times_e) * 1e3:.1f} ms",
        ),
        ("first step incl. compile", f"{compile_time:.2f} s"),
    ]
    w = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{w}}  {v}")
    return 0 if worst < 1e-3 else 1
