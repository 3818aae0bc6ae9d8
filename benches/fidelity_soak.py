"""Soak: N random fidelity programs per entry point, in crash-proof subprocess chunks.

    python benches/fidelity_soak.py [N] [--entries a,b] [--start S] [--chunk C] [--jobs J]

Each entry point's seeds ``S .. S+N-1`` run in worker subprocesses of ``--chunk``
programs (``tests/fidelity_programs.py`` generates and compares them). A worker writes
the seed it is about to run to a file before each program and one JSON line per
finished program, so when a worker dies (segfault, abort, out of memory) or hangs
(``--timeout`` per chunk) the parent records that seed as ``crash``/``hang`` and
restarts after it. Prints, per entry point: programs run, statuses, mismatches by
category, refusals (``UnsupportedError`` where eager runs) by reason, eager/aotgrad
raise agreement, and the failing seeds; ``--json FILE`` also writes every result.
Replay one program: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

DEFAULT_ENTRIES = [
    "aot_function_default",
    "aot_function_mincut",
    "aot_module",
    "aot_module_simplified",
    "dynamo_aotgrad_eager",
]


def worker(entry, start, count, out_path, cur_path):
    import warnings

    warnings.filterwarnings("ignore")
    import fidelity_programs as fp

    crash_seed = os.environ.get("FIDELITY_SOAK_CRASH_SEED")  # to test the crash handling
    with open(out_path, "a") as out:
        for seed in range(start, start + count):
            with open(cur_path, "w") as cur:
                cur.write(str(seed))
            if crash_seed == str(seed):
                import ctypes

                ctypes.string_at(0)  # segfault
            try:
                r = fp.result_dict(fp.check(seed, entry))
            except BaseException as e:
                r = {
                    "seed": seed,
                    "entry": entry,
                    "status": "crash",
                    "categories": ["crash"],
                    "findings": [],
                    "refusal": "",
                    "eager_raised": False,
                    "aot_raised": False,
                    "warnings": [],
                    "note": f"check raised {type(e).__name__}: {e}"[:300],
                }
            out.write(json.dumps(r) + "\n")
            out.flush()


def _dead(seed, entry, status, note):
    return {
        "seed": seed,
        "entry": entry,
        "status": status,
        "categories": [status],
        "findings": [],
        "refusal": "",
        "eager_raised": False,
        "aot_raised": False,
        "warnings": [],
        "note": note,
    }


def run_chunk(entry, start, count, timeout, tmp):
    """Runs seeds start..start+count-1 in subprocesses until all are accounted for."""
    results = {}
    seed = start
    end = start + count
    tag = f"{entry}_{start}"
    while seed < end:
        out_path = os.path.join(tmp, f"{tag}_{seed}.jsonl")
        cur_path = os.path.join(tmp, f"{tag}_{seed}.cur")
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            entry,
            str(seed),
            str(end - seed),
            out_path,
            cur_path,
        ]
        t0 = time.time()
        try:
            p = subprocess.run(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout, text=True
            )
            rc, err = p.returncode, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, err = (
                "timeout",
                (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or ""),
            )
        if os.path.exists(out_path):
            with open(out_path) as f:
                for line in f:
                    line = line.strip()
                    if line:
                        r = json.loads(line)
                        results[r["seed"]] = r
        if rc == 0 and all(s in results for s in range(seed, end)):
            break
        # the worker died or hung: the seed in the cur file is the culprit
        try:
            with open(cur_path) as f:
                bad = int(f.read().strip())
        except (OSError, ValueError):
            bad = seed
        status = "hang" if rc == "timeout" else "crash"
        tail = err.strip().splitlines()[-1] if err and err.strip() else ""
        results[bad] = _dead(
            bad, entry, status, f"worker rc={rc} after {time.time() - t0:.0f}s {tail}"[:300]
        )
        print(f"  [{entry}] {status} at seed {bad} (rc={rc}); continuing", flush=True)
        seed = bad + 1
    return [results[s] for s in sorted(results)]


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("n", nargs="?", type=int, default=10000, help="programs per entry point")
    ap.add_argument("--entries", default=",".join(DEFAULT_ENTRIES))
    ap.add_argument(
        "--inductor",
        type=int,
        default=10,
        help="also run this many through backend='aotgrad' (slow: ~10 s each)",
    )
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--timeout", type=float, default=1800, help="seconds per chunk before it counts as a hang"
    )
    ap.add_argument("--json", help="write every result here (JSON lines)")
    a = ap.parse_args(argv)

    import fidelity_programs as fp

    plan = [(e, a.n) for e in a.entries.split(",") if e]
    if a.inductor:
        plan.append(("dynamo_aotgrad_inductor", a.inductor))
    t0 = time.time()
    by_entry: dict = {e: [] for e, _ in plan}
    with (
        tempfile.TemporaryDirectory(prefix="fidelity_soak_") as tmp,
        ThreadPoolExecutor(a.jobs) as pool,
    ):
        futs = []
        for entry, n in plan:
            for s in range(a.start, a.start + n, a.chunk):
                futs.append(
                    (
                        entry,
                        pool.submit(
                            run_chunk, entry, s, min(a.chunk, a.start + n - s), a.timeout, tmp
                        ),
                    )
                )
        for entry, f in futs:
            by_entry[entry] += f.result()
    total = sum(len(v) for v in by_entry.values())
    print(
        f"fidelity soak: {total} programs run in {time.time() - t0:.0f} s (seeds from {a.start})\n"
    )
    for entry, rs in by_entry.items():
        rs.sort(key=lambda r: r["seed"])
        print(fp.summarize(rs, entry))
        print()
    if a.json:
        with open(a.json, "w") as f:
            for rs in by_entry.values():
                for r in rs:
                    f.write(json.dumps(r) + "\n")
    bad = sum(r["status"] in fp.FAILING_STATUSES for rs in by_entry.values() for r in rs)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _, _, entry, start, count, out_path, cur_path = sys.argv
        worker(entry, int(start), int(count), out_path, cur_path)
        sys.exit(0)
    sys.exit(main())
