"""Blind-test harness for aotgrad: realistic training-loop patterns.
Usage: .venv/bin/python benches/blind_training_patterns/run.py [prog_name ...]
Written in round 53 by a helper who had not read aotgrad's code (102 programs); what
still differs from eager is listed in the round-53 closing note.
Each program runs in its own subprocess (eager + 3 aotgrad entry points);
if the subprocess crashes, each entry point is rerun in isolation."""

import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def child(name, entries):
    import programs
    from harness_core import compare, run_program

    p = programs.PROGRAMS[name]
    ref, _ref_w = run_program(p, "eager")
    res = {
        "name": name,
        "rng": p.rng,
        "note": p.note,
        "eager_error": ref.get("__program_error"),
        "eager_tb": ref.get("__tb"),
        "entries": {},
    }
    for e in entries:
        t0 = time.time()
        got, w = run_program(p, e)
        diffs = []
        a = {k: v for k, v in ref.items() if k != "__tb"}
        b = {k: v for k, v in got.items() if k != "__tb"}
        for k in a:
            if k not in b:
                diffs.append(f"{k}: recorded in eager, missing in aot (program stopped early)")
            else:
                compare(a[k], b[k], k, p.rtol, p.atol, diffs)
        for k in b:
            if k not in a:
                diffs.append(f"{k}: recorded only in aot")
        res["entries"][e] = {
            "diffs": diffs,
            "tb": got.get("__tb"),
            "eager_replay": sum(1 for c, _ in w if c == "EagerReplayWarning"),
            "warnings": sorted(set(f"{c}: {m[:120]}" for c, m in w if c != "EagerReplayWarning"))[
                :5
            ],
            "time": round(time.time() - t0, 2),
        }
        print("@@PARTIAL " + json.dumps({"entry": e, "r": res["entries"][e]}), flush=True)
    print("@@RESULT " + json.dumps(res), flush=True)


def spawn(name, entries, timeout=400):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, ",".join(entries)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd="/work/main")
    except subprocess.TimeoutExpired:
        return None, "TIMEOUT"
    for line in p.stdout.splitlines():
        if line.startswith("@@RESULT "):
            return json.loads(line[9:]), None
    return None, f"rc={p.returncode} stderr_tail={p.stderr[-600:]}"


def main():
    import programs
    from harness_core import ENTRIES

    names = sys.argv[1:] or list(programs.PROGRAMS)
    allres = []
    for n in names:
        t0 = time.time()
        r, _err = spawn(n, ENTRIES)
        if r is None:  # crash or timeout: isolate entry points
            r = {
                "name": n,
                "entries": {},
                "rng": programs.PROGRAMS[n].rng,
                "note": programs.PROGRAMS[n].note,
            }
            for e in ENTRIES:
                r1, err1 = spawn(n, [e])
                if r1 is None:
                    r["entries"][e] = {
                        "diffs": [f"CRASH/TIMEOUT: {err1}"],
                        "eager_replay": 0,
                        "warnings": [],
                    }
                else:
                    r["entries"].update(r1["entries"])
                    r["eager_error"] = r1.get("eager_error")
        allres.append(r)
        bad = {e: len(v["diffs"]) for e, v in r["entries"].items() if v["diffs"]}
        er = {e: v["eager_replay"] for e, v in r["entries"].items() if v.get("eager_replay")}
        print(
            f"[{time.time() - t0:5.1f}s] {n:45s} {'OK' if not bad else 'MISMATCH ' + str(bad)}"
            f"{' (RNG)' if r.get('rng') else ''}{' EagerReplay=' + str(er) if er else ''}"
            f"{' eager_error=' + str(r.get('eager_error'))[:150] if r.get('eager_error') else ''}",
            flush=True,
        )
    with open(os.path.join(tempfile.gettempdir(), "blind_training_patterns.json"), "w") as f:
        json.dump(allres, f, indent=1)
    print("\n===== DETAILS =====")
    for r in allres:
        for e, v in r["entries"].items():
            if v["diffs"]:
                print(f"\n--- {r['name']} [{e}]{' (RNG program)' if r.get('rng') else ''}")
                for d in v["diffs"][:12]:
                    print("   ", d)
                if len(v["diffs"]) > 12:
                    print(f"    ... {len(v['diffs']) - 12} more")
                if v.get("tb"):
                    print("    tb:", v["tb"].splitlines()[-1][:300])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3].split(","))
    else:
        main()
