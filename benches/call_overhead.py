"""Per-call runtime overhead: aotgrad.aot_function vs torch's functorch.compile.aot_function.

A tiny function (a few elementwise ops on 4-element tensors) compiled with nop
compilers by both, called many times in the same process, with and without
grad; also the cost of aotgrad's guard check alone (``aotgrad.guards.call_key``
plus the cache lookup). Figures are medians of several repeats, in µs per call.

    python benches/call_overhead.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import sys

import torch
from functorch.compile import aot_function as torch_aot_function
from functorch.compile import nop as torch_nop

import aotgrad
from aotgrad import guards
from aotgrad.bench import per_call_us


def fn(x, y):
    return (x * y + 1).relu()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--calls", type=int, default=20000)
    args = p.parse_args()
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4)
    ours = aotgrad.aot_function(fn, aotgrad.nop)
    theirs = torch_aot_function(fn, torch_nop)
    rows = []
    cases = (("training (x requires grad)", (x, y)), ("inference (no_grad)", (x, y)))
    for label, inputs in cases:
        ctx = torch.no_grad() if "no_grad" in label else contextlib.nullcontext()
        with ctx:
            a = per_call_us(ours, inputs, args.calls)
            t = per_call_us(theirs, inputs, args.calls)
            e = per_call_us(fn, inputs, args.calls)
        rows.append((label, a, t, e))
    flat = [x, y]
    cache = {guards.call_key(flat, dynamic=False): None}
    guard_us = per_call_us(
        lambda *a: cache.get(guards.call_key(list(a), dynamic=False)), flat, args.calls
    )
    # Overhead: per-call time above running the same function eagerly.
    print(
        f"{'per call (µs)':28}{'aotgrad':>9}{'torch aot':>11}{'eager':>8}"
        f"{'overhead aotgrad':>18}{'overhead torch':>16}{'ratio':>7}"
    )
    for label, a, t, e in rows:
        print(
            f"{label:28}{a:9.1f}{t:11.1f}{e:8.1f}{a - e:18.1f}{t - e:16.1f}{(a - e) / (t - e):7.2f}"
        )
    print(f"{'aotgrad guard check alone':28}{guard_us:9.1f}")
    a, t, e = rows[0][1:]
    ok = (a - e) <= 0.5 * (t - e)
    print(f"training-call overhead at most half of torch's: {'yes' if ok else 'NO'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
