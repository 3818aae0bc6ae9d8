"""Model sweep: every case of the model zoo (``tests/zoo.py``) through aotgrad's backends and
torch's, static and dynamic shapes, each checked against eager (two training steps:
outputs, input mutations, gradients, buffers).

Printed: a table of ok / FAIL (and the first line of the error) per case, backend
and shape mode, then the pass counts per column. aotgrad's backends run strict (no
eager fallback). Exit status 1 when an aotgrad backend fails a case that torch's
counterpart (aotgrad_eager ↔ aot_eager, aotgrad ↔ inductor) passes.

    .venv/bin/python benches/model_sweep.py
    .venv/bin/python benches/model_sweep.py --cases conv_batchnorm,lstm --backends aotgrad,inductor
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # tests/zoo.py
import zoo
from common import format_table, write_json

COUNTERPART = {"aotgrad_eager": "aot_eager", "aotgrad": "inductor"}


def run_one(name: str, backend: str, dynamic: bool) -> tuple[str, float]:
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zoo.check(name, backend, dynamic=dynamic)
        verdict = "ok"
    except Exception as e:  # the sweep reports every failure, of any kind
        first = (str(e).strip().splitlines() or [""])[0][:90]
        verdict = f"FAIL {type(e).__name__}: {first}"
    return verdict, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--backends", default="aotgrad_eager,aot_eager,aotgrad,inductor")
    ap.add_argument("--modes", default="static,dynamic")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    names = args.cases.split(",") if args.cases else sorted(zoo.CASES)
    backends = args.backends.split(",")
    modes = args.modes.split(",")
    columns = [(b, m) for m in modes for b in backends]
    results: dict[str, dict[str, tuple[str, float]]] = {}
    for name in names:
        results[name] = {}
        for backend, mode in columns:
            results[name][f"{backend}/{mode}"] = run_one(name, backend, mode == "dynamic")
        print(name, *(v for v, _ in results[name].values()), sep="  ", flush=True)
    headers = ["case", *(f"{b}/{m}" for b, m in columns)]
    rows = [[n, *(v[:40] for v, _ in results[n].values())] for n in names]
    print()
    print(format_table(headers, rows))
    passed = {c: sum(results[n][c][0] == "ok" for n in names) for c in headers[1:]}
    seconds = {c: sum(results[n][c][1] for n in names) for c in headers[1:]}
    print()
    for c in headers[1:]:
        print(f"{c:28s} {passed[c]:3d}/{len(names)} passed  ({seconds[c]:.1f} s)")
    regressions = [
        (n, f"{b}/{m}")
        for n in names
        for b, m in columns
        if b in COUNTERPART
        and f"{COUNTERPART[b]}/{m}" in results[n]
        and results[n][f"{b}/{m}"][0] != "ok"
        and results[n][f"{COUNTERPART[b]}/{m}"][0] == "ok"
    ]
    for n, c in regressions:
        print(f"aotgrad fails where torch passes: {n} {c}: {results[n][c][0]}")
    write_json(args.json, {"results": results, "passed": passed, "seconds": seconds})
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
