"""``aotgrad demo``: train a small GPT on the shipped corpus with ``torch.compile(backend="aotgrad")``
and eagerly, side by side; print loss parity, step and compile time, and the saved activation
memory of aotgrad's min-cut, torch's min-cut and save-everything on the same joint graph; write
the HTML partition report."""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import NamedTuple

import torch

from .models import GPT, GPTConfig

TOLERANCE = 1e-3  # worst per-step relative loss difference accepted as parity


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    p.add_argument("--layers", type=int, default=4, help="transformer blocks (default 4)")
    p.add_argument("--width", type=int, default=128, help="embedding width (default 128)")
    p.add_argument("--seq", type=int, default=64, help="sequence length (default 64)")
    p.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--backend", default="aotgrad", choices=["aotgrad", "aotgrad_eager"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--cache",
        action="store_true",
        help="let the backend reuse compiled graphs from aotgrad's caches (default: compile "
        "afresh, so that the compile time and the report's comparison are of this run)",
    )
    p.add_argument(
        "--report",
        default="out/demo_report.html",
        help="the HTML report to write, JSON beside it (default out/demo_report.html)",
    )
    p.add_argument("--no-report", action="store_true", help="skip the report and the comparison")


def load_corpus() -> str:
    return resources.files("aotgrad.tools.data").joinpath("corpus.txt").read_text()


def batches(
    text: str, vocab: list[str], seq: int, batch: int, steps: int, seed: int
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        ix = torch.randint(len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[i : i + seq] for i in ix])
        y = torch.stack([data[i + 1 : i + seq + 1] for i in ix])
        yield x, y


class Progress:
    """A one-line progress bar on a terminal; a line per quarter otherwise (logs, CI)."""

    def __init__(self, total: int, stream=None) -> None:  # type: ignore[no-untyped-def]
        self.total = total
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.t0 = time.perf_counter()
        self.last_quarter = 0

    def update(self, step: int, loss_a: float, loss_e: float, step_s: float | None) -> None:
        width = 28
        done = int(width * step / self.total)
        bar = "█" * done + "·" * (width - done)
        eta = ""
        if step_s is not None and step < self.total:
            eta = f"  eta {step_s * (self.total - step):.0f}s"
        line = f"  [{bar}] {step}/{self.total}  loss aotgrad {loss_a:.4f}  eager {loss_e:.4f}{eta}"
        if self.tty:
            self.stream.write("\r" + line.ljust(100))
            self.stream.flush()
        elif step * 4 // self.total > self.last_quarter or step == self.total:
            self.last_quarter = step * 4 // self.total
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def _table(rows: Sequence[Sequence[str]], indent: str = "  ") -> str:
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(map(len, rows)))]
    return "\n".join(
        indent + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows
    )


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def _saved_rows(graphs: list) -> list[list[str]]:  # type: ignore[type-arg]
    from .report.svg import fmt_bytes

    by_name: dict[str, list] = {}  # type: ignore[type-arg]
    for g in graphs:
        for p in g.partitions:
            by_name.setdefault(p.name, []).append(p)
    rows = []
    for name, ps in by_name.items():
        if any(p.saved_bytes is None for p in ps):
            err = next(p.error for p in ps if p.saved_bytes is None)
            rows.append([f"  {name}", "failed", err or ""])
            continue
        tensors = sum(p.saved_tensors or 0 for p in ps)
        rows.append([f"  {name}", fmt_bytes(sum(p.saved_bytes for p in ps)), f"{tensors} tensors"])
    return rows


@dataclass
class _Training:
    """What the side-by-side training loop measured."""

    times_c: list[float] = field(default_factory=list)  # step seconds, compiled, past step 1
    times_e: list[float] = field(default_factory=list)  # step seconds, eager, past step 1
    worst: float = 0.0  # worst per-step relative loss difference
    compile_time: float = 0.0  # seconds of the first compiled step
    loss_c: torch.Tensor = field(default_factory=lambda: torch.zeros(()))
    loss_e: torch.Tensor = field(default_factory=lambda: torch.zeros(()))


class _Models(NamedTuple):
    """The eager GPT, its compiled copy, and an optimizer for each."""

    eager: torch.nn.Module
    compiled: Callable[..., torch.Tensor]
    opt_e: torch.optim.Optimizer
    opt_c: torch.optim.Optimizer


def _models(args: argparse.Namespace, cfg: GPTConfig) -> _Models:
    """The eager GPT, its compiled copy, and an AdamW for each (same seed, same weights)."""
    torch.manual_seed(args.seed)
    eager = GPT(cfg).to(args.device)
    model = copy.deepcopy(eager)
    compiled = torch.compile(model, backend=args.backend, options={"cache": args.cache})
    opt_e = torch.optim.AdamW(eager.parameters(), lr=3e-3)
    opt_c = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return _Models(eager, compiled, opt_e, opt_c)


def _announce(args: argparse.Namespace, n_params: int) -> None:
    """The run's header: model size, shape of the batches, device, backend."""
    print(
        f"aotgrad demo: GPT {args.layers}x{args.width} ({n_params / 1e6:.2f}M parameters), "
        f"seq {args.seq}, batch {args.batch}, {args.steps} steps on {args.device}, "
        f"backend={args.backend}"
    )
    print(
        "  step 1 compiles the model (Dynamo, aotgrad trace + partition, codegen) ...", flush=True
    )


def _step(
    model: Callable[..., torch.Tensor],
    opt: torch.optim.Optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
) -> torch.Tensor:
    """One training step; the loss."""
    opt.zero_grad(set_to_none=True)
    loss = model(x, y)
    loss.backward()
    opt.step()
    return loss


def _train(args: argparse.Namespace, text: str, vocab: list[str], models: _Models) -> _Training:
    """Train compiled and eager on the same batches, timing each step and comparing losses."""
    eager, compiled, opt_e, opt_c = models
    out = _Training()
    progress = Progress(args.steps)
    try:
        for step, (x, y) in enumerate(
            batches(text, vocab, args.seq, args.batch, args.steps, args.seed)
        ):
            x, y = x.to(args.device), y.to(args.device)
            t0 = time.perf_counter()
            out.loss_c = _step(compiled, opt_c, x, y)
            t1 = time.perf_counter()
            out.loss_e = _step(eager, opt_e, x, y)
            t2 = time.perf_counter()
            if step == 0:
                out.compile_time = t1 - t0
            else:
                out.times_c.append(t1 - t0)
                out.times_e.append(t2 - t1)
            rel = abs(out.loss_c.item() - out.loss_e.item()) / max(abs(out.loss_e.item()), 1e-12)
            out.worst = max(out.worst, rel)
            per_step = (t2 - t0) if step else None
            progress.update(step + 1, out.loss_c.item(), out.loss_e.item(), per_step)
    finally:
        progress.close()
    return out


def _summary_rows(t: _Training, graphs: list) -> list[list[str]]:  # type: ignore[type-arg]
    """The result table: losses, parity, step and compile time, saved activations."""
    med_c = statistics.median(t.times_c) if t.times_c else float("nan")
    med_e = statistics.median(t.times_e) if t.times_e else float("nan")
    stages = graphs[0].timings if graphs else {}
    breakdown = " · ".join(f"{k} {_fmt_s(v)}" for k, v in stages.items())
    ok = t.worst < TOLERANCE
    rows = [
        ["", "aotgrad", "eager"],
        ["final loss", f"{t.loss_c.item():.5f}", f"{t.loss_e.item():.5f}"],
        [
            "loss parity, worst step",
            f"{t.worst:.1e} rel. diff",
            f"{'ok' if ok else 'FAILED'} (tolerance {TOLERANCE:g})",
        ],
        [
            "step time, median",
            f"{med_c * 1e3:.1f} ms",
            f"{med_e * 1e3:.1f} ms" + (f"  (aotgrad {med_e / med_c:.2f}x)" if t.times_c else ""),
        ],
        ["compile, first step", _fmt_s(t.compile_time), breakdown],
    ]
    if graphs:
        rows.append(["saved activations", "(same joint graph)", ""])
        rows += _saved_rows(graphs)
    return rows


def run(args: argparse.Namespace) -> int:
    """Train, print the comparison, write the report; 0 when the losses agree."""
    from .report import Recorder

    text = load_corpus()
    vocab = sorted(set(text))
    cfg = GPTConfig(
        vocab_size=len(vocab), block_size=args.seq, n_layer=args.layers, n_embd=args.width
    )
    models = _models(args, cfg)
    _announce(args, sum(p.numel() for p in models.eager.parameters()))
    recorder = Recorder(args.report, title=f"GPT {args.layers}x{args.width}", defer=True)
    if not args.no_report:
        recorder.start()
    try:
        t = _train(args, text, vocab, models)
    finally:
        recorder.stop()
    print()
    print(_table(_summary_rows(t, recorder.graphs)))
    if not args.no_report:
        if recorder.graphs:
            print(f"\nreport: {recorder.path} (data: {recorder.path.with_suffix('.json')})")
        else:
            print("\nreport: not written (no training graph was compiled; see the warnings)")
    return 0 if t.worst < TOLERANCE else 1
