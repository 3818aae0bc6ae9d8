"""Per-call runtime overhead: aotgrad.aot_function vs torch's functorch.compile.aot_function.

A tiny function (a few elementwise ops on 4-element tensors) compiled with nop
compilers by both, called many times in the same process, with and without
grad; and the cost of aotgrad's guard check alone (``aotgrad.guards.call_key``
plus the cache lookup), for the same two tensors, for a call with a Python
scalar, and for a module (``aot_module``: the key plus reading the parameters
and every submodule's training flag).

Robust to noise: the implementations are timed in interleaved rounds (eager,
aotgrad, torch, eager, aotgrad, torch, …), each round ``--calls`` calls; the
figures are medians over rounds, and the overhead ratio is computed per round
(same moment, same machine load) and its median reported.

    python benches/call_overhead.py [--calls 1000] [--rounds 21] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
from functorch.compile import aot_function as torch_aot_function
from functorch.compile import nop as torch_nop

import aotgrad
from aotgrad import guards

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from common import environment, write_json


def fn(x, y):
    return (x * y + 1).relu()


def _us_per_call(f: Callable[..., Any], args: Sequence[Any], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        f(*args)
    return (time.perf_counter() - t0) / calls * 1e6


def interleaved(
    impls: dict[str, Callable[..., Any]], args: Sequence[Any], calls: int, rounds: int
) -> dict[str, list[float]]:
    """µs per call of each implementation, one figure per round, rounds interleaved."""
    for f in impls.values():  # warm up (and compile)
        for _ in range(min(200, calls)):
            f(*args)
    out: dict[str, list[float]] = {k: [] for k in impls}
    for _ in range(rounds):
        for name, f in impls.items():
            out[name].append(_us_per_call(f, args, calls))
    return out


def _module_check(mod: torch.nn.Module, inp: torch.Tensor) -> Callable[..., Any]:
    """What ``AotModule.forward`` does before running: snapshot the module (names, tensors,
    training flags), build the key, look it up."""
    cache: dict[tuple, Any] = {}

    def check(x: torch.Tensor) -> Any:
        names, tensors, flags = aotgrad.api.module_snapshot(mod)
        flat = [names, *tensors, x]
        key = guards.call_key(flat, dynamic=False, state=flags, extra=len(flat))
        return cache.setdefault(key, None)

    check(inp)
    return check


def guard_costs(calls: int, rounds: int) -> dict[str, float]:
    """µs per guard check (key + cache lookup), median over rounds."""
    from aotgrad.tools.models import GPT, GPTConfig

    x, y = torch.randn(4, requires_grad=True), torch.randn(4)
    base = torch.randn(8)
    cache: dict[tuple, Any] = {}

    def check(*flat: Any) -> Any:
        return cache.setdefault(guards.call_key(flat, dynamic=False, extra=len(flat)), None)

    small = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    gpt = GPT(GPTConfig(vocab_size=96, block_size=64, n_layer=4, n_embd=128))
    n_gpt = len(aotgrad.api.module_snapshot(gpt)[1])
    cases: dict[str, tuple[Callable[..., Any], Sequence[Any]]] = {
        "aot_function, 2 tensors": (check, (x, y)),
        "aot_function, 2 tensors + 1 float": (check, (x, y, 0.5)),
        "aot_function, 2 views of one storage": (check, (base[:4], base[2:6])),
        "aot_module, 2 Linear (5 tensors)": (
            _module_check(small, torch.randn(2, 4)),
            (torch.randn(2, 4),),
        ),
        f"aot_module, GPT 4x128 ({n_gpt + 1} tensors)": (
            _module_check(gpt, torch.zeros(8, 64, dtype=torch.long)),
            (torch.zeros(8, 64, dtype=torch.long),),
        ),
    }
    out = {}
    for name, (f, args) in cases.items():
        n = calls if "GPT" not in name else max(1, calls // 10)
        out[name] = statistics.median(interleaved({name: f}, args, n, rounds)[name])
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--json", help="write the figures to this file")
    args = p.parse_args()
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4)
    ours = aotgrad.aot_function(fn, aotgrad.nop)
    theirs = torch_aot_function(fn, torch_nop)
    results: dict[str, Any] = {"environment": environment(), "calls": args.calls}
    print(f"{args.rounds} interleaved rounds of {args.calls} calls; medians in µs per call")
    print(
        f"{'per call (µs)':28}{'aotgrad':>9}{'torch aot':>11}{'eager':>8}"
        f"{'overhead aotgrad':>18}{'overhead torch':>16}{'ratio':>7}"
    )
    ratios_training: list[float] = []
    for label in ("training (x requires grad)", "inference (no_grad)"):
        ctx = torch.no_grad() if "no_grad" in label else contextlib.nullcontext()
        with ctx:
            r = interleaved(
                {"eager": fn, "aotgrad": ours, "torch": theirs}, (x, y), args.calls, args.rounds
            )
        ratios = [(a - e) / (t - e) for a, t, e in zip(r["aotgrad"], r["torch"], r["eager"])]
        med = {k: statistics.median(v) for k, v in r.items()}
        ratio = statistics.median(ratios)
        if label.startswith("training"):
            ratios_training = ratios
        print(
            f"{label:28}{med['aotgrad']:9.1f}{med['torch']:11.1f}{med['eager']:8.1f}"
            f"{med['aotgrad'] - med['eager']:18.1f}{med['torch'] - med['eager']:16.1f}"
            f"{ratio:7.2f}"
        )
        print(f"{'  per-round ratios':28}" + " ".join(f"{q:.2f}" for q in ratios))
        results[label] = {"median_us": med, "rounds_us": r, "ratio": ratio, "ratios": ratios}
    print("aotgrad guard check alone (key + cache lookup), median µs per call:")
    costs = guard_costs(args.calls, args.rounds)
    for name, us in costs.items():
        print(f"  {name:44}{us:8.2f}")
    results["guard_us"] = costs
    ok = statistics.median(ratios_training) <= 0.5
    print(f"training-call overhead at most half of torch's (median ratio): {'yes' if ok else 'NO'}")
    write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
