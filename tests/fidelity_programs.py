"""Random short programs, run eagerly and through aotgrad's entry points, compared on
everything eager exposes.

Programs come from ``tests/fidelity_generator.py`` (one seed, one program as Python
source); ``tests/fidelity_observe.py`` runs one and records what it shows; ``diff`` here
compares two observations and returns findings by category, ``check`` runs one seed
through one entry point. ``python tests/fidelity_programs.py SEED [ENTRY]`` replays one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch

import fidelity_observe as observe_module
from fidelity_generator import Program, generate, short_source
from fidelity_observe import ENTRIES, Obs, T, Untraceable, find_unsupported, observe

__all__ = [
    "ENTRIES",
    "check",
    "find_unsupported",
    "format_result",
    "generate",
    "result_dict",
    "summarize",
]
# ---------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------


@dataclass
class Finding:
    category: str
    key: str
    eager: object
    got: object

    def __str__(self):
        return f"[{self.category}] {self.key}: eager {self.eager!r}, aotgrad {self.got!r}"


def _same(a, b, tol):
    if isinstance(a, T) and isinstance(b, T):
        x, y = a.v, b.v
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        return bool(torch.allclose(x, y, rtol=tol[0], atol=tol[1], equal_nan=True))
    if isinstance(a, T) or isinstance(b, T):
        return False
    return a == b


def _none_vs_zero(a, b):
    return any(x is None and isinstance(y, T) and not bool(y.v.any()) for x, y in ((a, b), (b, a)))


STAGES = [
    "setup",
    "c0.call",
    "c0.post",
    "c0.write_input",
    "c0.caller_write",
    "c0.autograd_grad",
    "c0.create_graph",
    "c0.bw1",
    "c0.bw2",
    "c1.call",
    "c1.post",
    "c1.write_input",
    "c1.caller_write",
    "c1.autograd_grad",
    "c1.create_graph",
    "c1.bw1",
    "c1.bw2",
]


def diff(prog: Program, e: Obs, c: Obs) -> list[Finding]:
    """Findings of the compiled observation ``c`` against eager's ``e``."""
    found: list[Finding] = []
    skip_prefixes: list[str] = []

    def skipped(k):
        return any(k.startswith(p) for p in skip_prefixes)

    for stage in STAGES:
        if skipped(stage):
            continue
        rk = f"{stage}.raise"
        if rk in e.d or rk in c.d:
            ee = e.d.get(rk, (None, None))[1]
            ce = c.d.get(rk, (None, None))[1]
            stop = None
            if ee is not None and ce is None:
                found.append(
                    Finding(
                        f"missing_raise:{stage.split('.')[-1]}",
                        rk,
                        ee,
                        "no raise" if rk in c.d else "not reached",
                    )
                )
                stop = True
            elif ce is not None and ee is None:
                if ce.unsupported is not None:
                    found.append(
                        Finding("refusal", rk, "no raise" if rk in e.d else "not reached", ce)
                    )
                else:
                    found.append(
                        Finding(
                            f"spurious_raise:{stage.split('.')[-1]}",
                            rk,
                            "no raise" if rk in e.d else "not reached",
                            ce,
                        )
                    )
                stop = True
            elif ce is not None and ee is not None:
                if not ce.same_kind(ee):
                    found.append(Finding("raise_type", rk, ee, ce))
                stop = True
            if stop:
                if stage == "setup":
                    return found
                call = stage.split(".")[0]
                # the rest of this call is not comparable
                after = STAGES[STAGES.index(stage) + 1 :]
                skip_prefixes += [s for s in after if s.startswith(call)]
                continue
        # compare this stage's keys
        for k, (cat, ev) in e.d.items():
            if not k.startswith(stage + ".") or k == rk:
                continue
            if k not in c.d:
                found.append(Finding(cat, k, ev, "missing"))
                continue
            cv = c.d[k][1]
            if not _same(ev, cv, prog.tol):
                if cat.startswith("grad") and _none_vs_zero(ev, cv):
                    cat = cat.replace("grad", "grad_none_vs_zeros", 1)
                found.append(Finding(cat, k, ev, cv))
        for k, (cat, cv) in c.d.items():
            if k.startswith(stage + ".") and k not in e.d:
                found.append(Finding(cat, k, "missing", cv))
    found = [_past_data_write(prog, _eager_bug(f)) for f in found]
    found = _past_aliased_grads(e, found)
    # past eager's internal assert in a call, its state is torch's bug's: the rest of
    # that call's findings are no answer to copy either
    broken = {f.key.split(".")[0] for f in found if f.category.startswith("eager_bug:")}
    return [
        Finding(f"eager_bug:{f.category}", f.key, f.eager, f.got)
        if f.key.split(".")[0] in broken and not is_soft(f.category)
        else f
        for f in found
    ]


def _past_aliased_grads(e: Obs, found: list) -> list:
    """Gradients after a call's later backward where eager's leaves' ``.grad`` shared
    memory after its first (``fidelity_observe._note_aliased_grads``): eager's in-place
    sums added each into the other, an answer no correct accumulation gives (torch's
    own AOT Autograd neither): soft."""
    calls = {k.split(".")[0] for k in e.d if k.endswith(".grads_alias")}
    return [
        Finding(f"eager_bug:grads_alias:{f.category}", f.key, f.eager, f.got)
        if f.key.split(".")[0] in calls
        and f.category.startswith(("grad_second_backward", "grad"))
        and f.key.split(".")[1] != "bw1"
        else f
        for f in found
    ]


def _past_data_write(prog: Program, f: Finding) -> Finding:
    """A gradient found after the caller wrote through ``.data`` between the call and the
    backward: no version count sees that write, so eager's answer depends on which
    tensors its own formulas saved (an input read back, or a result), which the compiled
    backward's partition need not save alike (torch's AOT Autograd neither): soft."""
    call = f.key.split(".")[0]
    if not (f.category.startswith("grad") or f.category.startswith("autograd_grad")):
        return f
    if "none_vs_zeros" in f.category or any(v in (None, "missing") for v in (f.eager, f.got)):
        return f  # (whether a gradient is there at all is no saved value's doing)
    if not (call.startswith("c") and call[1:].isdigit() and int(call[1:]) < len(prog.calls)):
        return f
    cw = prog.calls[int(call[1:])].caller_write
    if cw and cw[2].startswith("data"):
        return Finding(f"past_data_write:{f.category}", f.key, f.eager, f.got)
    return f


#: torch's own bug: eager failing an internal assert (moving a retain-grad hook after
#: in-place view ops, variable.cpp) is no answer to copy
_INTERNAL_ASSERT = "INTERNAL ASSERT FAILED"


def _eager_bug(f: Finding) -> Finding:
    if _INTERNAL_ASSERT in str(f.eager):
        return Finding(f"eager_bug:{f.category}", f.key, f.eager, f.got)
    return f


# Categories that are softer (reported separately): exception type, non-view strides,
# differences Dynamo itself makes (torch.compile(backend="eager") shows the same), and
# eager's own internal asserts, gradients after a caller's ``.data`` write
# (``_past_data_write``).
SOFT = {"raise_type", "out_stride", "dynamo_itself", "eager_bug", "past_data_write"}


def is_soft(category: str) -> bool:
    return category.split(":")[0] in SOFT


@dataclass
class Result:
    seed: int
    entry: str
    status: str  # ok | mismatch | refusal | ran_eagerly | eager_raises_ok | untraceable | crash
    findings: list = field(default_factory=list)
    eager_raised: bool = False
    aot_raised: bool = False
    warnings: list = field(default_factory=list)
    note: str = ""


def result_dict(r: Result) -> dict:
    """A JSON-able summary of a result (what the soak script stores)."""
    return {
        "seed": r.seed,
        "entry": r.entry,
        "status": r.status,
        "categories": sorted({f.category for f in r.findings}),
        "findings": [str(f)[:300] for f in r.findings[:20]],
        "refusal": refusal_reason(r),
        "eager_raised": r.eager_raised,
        "aot_raised": r.aot_raised,
        "warnings": sorted(set(r.warnings))[:5],
        "note": r.note,
    }


def summarize(results: list, title: str = "") -> str:
    """Tallies of result dicts: statuses, categories, refusals, raise agreement, seeds."""
    from collections import Counter, defaultdict

    status = Counter(r["status"] for r in results)
    cats: Counter = Counter()
    cat_seeds: dict = defaultdict(list)
    for r in results:
        for c in r["categories"]:
            cats[c] += 1
            cat_seeds[c].append(r["seed"])
    refusals = Counter(r["refusal"] for r in results if r["status"] == "refusal")
    agree = Counter(
        (r["eager_raised"], r["aot_raised"])
        for r in results
        if r["status"] not in ("untraceable", "crash")
    )
    warns = Counter(w for r in results for w in r.get("warnings", []))
    out = [
        f"== {title}: {len(results)} programs: "
        + ", ".join(f"{k} {v}" for k, v in sorted(status.items()))
    ]
    if cats:
        out.append(
            "  findings by category (programs; soft: raise_type, out_stride, dynamo_itself:*, past_data_write:*):"
        )
        for c, n in cats.most_common():
            out.append(f"    {n:5d}  {c:32s} seeds {cat_seeds[c][:10]}")
    if refusals:
        out.append("  refusals (UnsupportedError where eager runs) by reason:")
        for m, n in refusals.most_common():
            out.append(f"    {n:5d}  {m}")
    out.append(
        f"  raise agreement (programs): both run {agree[(False, False)]} / both raise {agree[(True, True)]} / eager raises only {agree[(True, False)]} / aotgrad raises only {agree[(False, True)]}"
    )
    if warns:
        out.append("  aotgrad warnings (e.g. fallbacks to eager):")
        for m, n in warns.most_common(8):
            out.append(f"    {n:5d}  {m}")
    bad = [r["seed"] for r in results if r["status"] in FAILING_STATUSES]
    if bad:
        out.append(f"  failing seeds ({len(bad)}): {bad[:60]}{' ...' if len(bad) > 60 else ''}")
    crashes = [r for r in results if r["status"] in ("crash", "hang")]
    for r in crashes[:10]:
        out.append(f"  {r['status']} seed {r['seed']}: {r['note'][:200]}")
    return "\n".join(out)


#: What aotgrad warns when a call ran eagerly because its trace raised (``eager_replay``).
EAGER_REPLAY = "eagerly: tracing it raised"
#: Statuses that are gaps: eager's answer not given by a compiled call.
FAILING_STATUSES = ("mismatch", "refusal", "ran_eagerly", "crash", "hang")


def _raised(o: Obs):
    return any(k.endswith(".raise") and v[1] is not None for k, v in o.d.items())


_EAGER_CACHE: dict = {}


def eager_observation(prog, entry):
    oracle = entry if entry in ("aot_module", "aot_module_simplified") else "fn"
    key = (prog.seed, oracle)
    if key not in _EAGER_CACHE:
        if len(_EAGER_CACHE) > 2000:
            _EAGER_CACHE.clear()
        _EAGER_CACHE[key] = observe(prog, entry, eager=True)
    return _EAGER_CACHE[key]


def _past_autocast_cache(prog: Program, entry: str, co: Obs, fs: list) -> list:
    """Eager's autocast keeps the cast of each leaf that requires grad for its whole
    block: a function that writes such a leaf in place (under ``no_grad``) and is called
    twice in one block reads the stale cast the second time (soak 248149; torch's weight
    cache, which no version count invalidates). A finding that disappears against eager
    without that cache (``cache_enabled=False``) is that cache's: soft."""
    observe_module.AUTOCAST_CACHE[0] = False
    try:
        uncached = observe(prog, entry, eager=True)
    except Exception:
        return fs
    finally:
        observe_module.AUTOCAST_CACHE[0] = True
    left = {f.key for f in diff(prog, uncached, co)}
    return [
        Finding(f"eager_bug:autocast_cache:{f.category}", f.key, f.eager, f.got)
        if f.key not in left and not is_soft(f.category)
        else f
        for f in fs
    ]


def check(seed: int, entry: str) -> Result:
    """Generates program ``seed``, runs it eagerly and through ``entry``, compares."""
    prog = generate(seed)
    try:
        eo = eager_observation(prog, entry)
    except Untraceable as u:
        return Result(seed, entry, "untraceable", note=str(u)[:120])
    except Exception as ex:
        return Result(seed, entry, "crash", note=f"eager harness: {type(ex).__name__}: {ex}"[:300])
    try:
        co = observe(prog, entry, eager=False)
    except Untraceable as u:
        return Result(seed, entry, "untraceable", note=str(u)[:120])
    except Exception as ex:
        return Result(seed, entry, "crash", note=f"harness: {type(ex).__name__}: {ex}"[:300])
    finally:
        if entry.startswith("dynamo"):
            torch._dynamo.reset()
    fs = diff(prog, eo, co)
    if prog.uses_autocast and any(not is_soft(f.category) for f in fs):
        fs = _past_autocast_cache(prog, entry, co, fs)
    if fs and entry.startswith("dynamo"):
        fs = _attribute_to_dynamo(prog, eo, fs)
    r = Result(seed, entry, "ok", fs, _raised(eo), _raised(co), co.info.get("warnings", []))
    hard = [f for f in fs if not is_soft(f.category)]
    if any(f.category == "refusal" for f in fs):
        r.status = "refusal"
    elif hard:
        r.status = "mismatch"
    elif fs:
        r.status = "soft"
    elif r.eager_raised:
        r.status = "eager_raises_ok"
    if r.status not in FAILING_STATUSES and any(EAGER_REPLAY in w for w in r.warnings):
        r.status = "ran_eagerly"  # a gap: tracing raised where eager runs (eager_replay)
    return r


def _attribute_to_dynamo(prog, eo, fs):
    """Findings that torch.compile(backend="eager") shows too are Dynamo's own."""
    try:
        control = observe(prog, "dynamo_eager", eager=False)
    except Exception:
        return fs
    finally:
        torch._dynamo.reset()
    theirs = {(f.key, f.category) for f in diff(prog, eo, control)}
    out = []
    for f in fs:
        if (f.key, f.category) in theirs:
            f = Finding(f"dynamo_itself:{f.category}", f.key, f.eager, f.got)
        out.append(f)
    return out


def refusal_reason(r: Result) -> str:
    for f in r.findings:
        if f.category == "refusal":
            return (f.got.unsupported or "")[:80]
    return ""


def format_result(r: Result, max_findings=12) -> str:
    prog = generate(r.seed)
    lines = [f"--- seed {r.seed} via {r.entry}: {r.status} {r.note}"]
    for f in r.findings[:max_findings]:
        lines.append("  " + str(f)[:400])
    if len(r.findings) > max_findings:
        lines.append(f"  ... {len(r.findings) - max_findings} more")
    lines.append(short_source(prog))
    return "\n".join(lines)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description="Replay one fidelity program.")
    ap.add_argument("seed", type=int)
    ap.add_argument("entries", nargs="*", default=ENTRIES[:-1])
    ap.add_argument("--full", action="store_true", help="print the prelude too")
    a = ap.parse_args(argv)
    prog = generate(a.seed)
    print(prog.source if a.full else short_source(prog))
    for entry in a.entries:
        r = check(a.seed, entry)
        print(f"== {entry}: {r.status} {r.note}")
        for f in r.findings:
            print("  " + str(f)[:500])


if __name__ == "__main__":
    sys.exit(main())
