"""OpInfo sweep: aotgrad's AOT Autograd against torch's, both checked against eager.

Every op of torch's ``op_db`` that supports autograd and float32 on CPU: its first
samples (``op.sample_inputs("cpu", torch.float32, requires_grad=True)``) go through

* ``aotgrad``: ``aotgrad.aot_function`` with ``aotgrad.nop`` compilers and aotgrad's
  min-cut partitioner, and
* ``torch``: ``functorch.compile.aot_function`` with ``functorch.compile.nop``
  (torch's default partition),

and each one's outputs and input gradients (one fixed random cotangent per
differentiable output) are compared with eager's, with the op's own float32
tolerances (the loosest ``toleranceOverride``/``precisionOverride`` its OpInfo
declares for CPU, never tighter than ``assert_close``'s defaults) — the same for
both. Samples whose eager run fails, or is not reproducible under a fixed seed,
are skipped. Each compiled function that passes is called once more, unchanged, on
other values of the same shapes (``perturb``): a graph that baked an input's value
into itself answers stale values there.

Printed: both pass counts; the ops aotgrad fails and torch passes (rerun with aotgrad's
default partitioner and with torch's min-cut inside aotgrad, to tell a partitioner bug
from a trace/runtime one); the ops torch fails and aotgrad passes; the ops both fail,
and among them those where aotgrad answers wrong values while torch raises.
Exit status 1 when aotgrad fails an op torch passes.

    .venv/bin/python benches/opinfo_sweep.py --json /tmp/opinfo.json
    .venv/bin/python benches/opinfo_sweep.py --ops sin,nn.functional.gelu --tracebacks
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import logging
import signal
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.utils._pytree as pytree

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent))
from common import environment, import_aotgrad, write_json

SEED = 0
COTANGENT_SEED = 1234
DEFAULT_ATOL = 1e-5  # assert_close's float32 defaults
DEFAULT_RTOL = 1.3e-6
IMPLS = ("aotgrad", "torch")
_VALUE_PHASES = ("outputs", "grads")  # failures that are wrong answers, not errors


# ------------------------------------------------------------------ timeouts


class SweepTimeout(Exception):
    """Raised by SIGALRM when one (op, implementation) runs past ``--timeout``."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise SweepTimeout("timed out")


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Interrupt the body after ``seconds`` (only while the main thread runs Python:
    a hang inside native code is interrupted when it returns to the interpreter)."""
    if seconds <= 0:
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _is_timeout(e: BaseException) -> bool:
    seen = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, SweepTimeout):
            return True
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return False


# ------------------------------------------------------------------ results


@dataclass
class Outcome:
    """One implementation's result on one op."""

    status: str  # "pass" | "fail" | "skip"
    error: str = ""  # "ExcType: first line"
    phase: str = ""  # compile/forward | outputs | backward | grads | timeout
    sample: int = -1
    seconds: float = 0.0
    traceback: str = ""


@dataclass
class OpResult:
    name: str
    samples_run: int = 0
    skipped: str = ""
    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL
    results: dict[str, Outcome] = field(default_factory=dict)


class Mismatch(AssertionError):
    pass


def _first_line(e: BaseException) -> str:
    msg = str(e).strip()
    if isinstance(e, Mismatch):  # keep assert_close's summary (greatest differences)
        line = "; ".join(x.strip() for x in msg.splitlines() if x.strip())
    else:
        line = msg.splitlines()[0] if msg else ""
    return f"{type(e).__name__}: {line}"[:400]


# ------------------------------------------------------------------ ops


def op_full_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def select_ops(names: list[str] | None, limit: int | None) -> list[Any]:
    try:
        from torch.testing._internal.common_methods_invocations import op_db
    except ModuleNotFoundError as e:  # torch's test helpers import expecttest
        raise SystemExit(
            f"cannot load torch's op_db ({e}); install it: .venv/bin/pip install expecttest"
        ) from None

    ops = [
        op for op in op_db if op.supports_autograd and torch.float32 in op.supported_dtypes("cpu")
    ]
    if names:
        wanted = set(names)
        ops = [op for op in ops if op.name in wanted or op_full_name(op) in wanted]
        missing = wanted - {op.name for op in ops} - {op_full_name(op) for op in ops}
        if missing:
            print(f"warning: no such autograd/float32 op: {', '.join(sorted(missing))}")
    if limit is not None:
        ops = ops[:limit]
    return ops


def op_tolerance(op: Any) -> tuple[float, float]:
    """The loosest float32 tolerance the OpInfo declares for CPU (or any device)."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

    atol, rtol = DEFAULT_ATOL, DEFAULT_RTOL
    for info in op.decorators:
        device = getattr(info, "device_type", None)
        if device not in (None, "cpu"):
            continue
        for dec in getattr(info, "decorators", [info]):
            if isinstance(dec, toleranceOverride) and torch.float32 in dec.d:
                t = dec.d[torch.float32]
                atol, rtol = max(atol, t.atol), max(rtol, t.rtol)
            elif isinstance(dec, precisionOverride) and torch.float32 in dec.d:
                atol = max(atol, dec.d[torch.float32])
    return atol, rtol


# ------------------------------------------------------------------ one run


def _clone(t: Any) -> Any:
    if isinstance(t, torch.Tensor):
        c = t.detach().clone()
        return c.requires_grad_(t.requires_grad)
    return t


def _differentiable(x: Any) -> bool:
    return (
        isinstance(x, torch.Tensor)
        and x.requires_grad
        and (x.is_floating_point() or x.is_complex())
    )


def _detach(x: Any) -> Any:
    return x.detach() if isinstance(x, torch.Tensor) else x


@dataclass
class RunResult:
    outputs: Any
    diff_outputs: int
    grads: list[Any]


def run_forward_backward(f: Callable[[list[Any]], Any], tensors: list[Any], phase: list[str]):
    """Call ``f`` on fresh copies of ``tensors``; backward with fixed cotangents."""
    inputs = [_clone(t) for t in tensors]
    phase[0] = "compile/forward"
    torch.manual_seed(SEED)
    out = f(inputs)
    leaves = pytree.tree_leaves(out)
    diff_outs = [o for o in leaves if _differentiable(o)]
    diff_ins = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    grads: list[Any] = []
    if diff_outs and diff_ins:
        phase[0] = "backward"
        gen = torch.Generator().manual_seed(COTANGENT_SEED)
        cots = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in diff_outs]
        raw = torch.autograd.grad(diff_outs, diff_ins, cots, allow_unused=True)
        grads = [
            torch.zeros_like(t) if g is None else g.detach()
            for g, t in zip(raw, diff_ins, strict=True)
        ]
    return RunResult(pytree.tree_map(_detach, out), len(diff_outs), grads)


def compare(ref: RunResult, got: RunResult, atol: float, rtol: float, phase: list[str]) -> None:
    phase[0] = "outputs"
    try:
        torch.testing.assert_close(
            got.outputs, ref.outputs, atol=atol, rtol=rtol, equal_nan=True, check_device=True
        )
    except AssertionError as e:
        raise Mismatch(f"outputs differ from eager: {e}") from None
    if got.diff_outputs != ref.diff_outputs:
        raise Mismatch(f"{got.diff_outputs} differentiable outputs, eager has {ref.diff_outputs}")
    phase[0] = "grads"
    try:
        torch.testing.assert_close(got.grads, ref.grads, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as e:
        raise Mismatch(f"input grads differ from eager: {e}") from None


def perturb(tensors: list[Any], seed: int) -> list[Any]:
    """Same shapes, dtypes and strides, other values: floats scaled by a random factor
    near 1 (to stay in the op's domain), integer/bool tensors permuted (to stay valid
    indices), one-element integer tensors moved by one. A compiled graph that baked an
    input's value into itself gives a stale answer on these."""
    gen = torch.Generator().manual_seed(seed)

    def one(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        x = t.detach().clone()
        if x.is_floating_point() or x.is_complex():
            x.mul_(1 + 0.25 * torch.rand(x.shape, generator=gen, dtype=x.real.dtype))
        elif x.numel() == 1 and x.dtype != torch.bool:
            x.add_(1)
        elif x.numel() > 1:
            flat = x.reshape(-1)
            x = flat[torch.randperm(flat.numel(), generator=gen)].reshape(x.shape)
            x = x.as_strided(t.shape, t.stride()) if x.is_contiguous() == t.is_contiguous() else x
        return x.requires_grad_(t.requires_grad)

    return [one(t) for t in tensors]


# ------------------------------------------------------------------ compilers


PARTITIONERS = ("min_cut", "default", "torch_min_cut")


def aotgrad_partition_fn(aotgrad: Any, which: str) -> Callable[..., Any]:
    """aotgrad's partitioner to use (``torch_min_cut``: torch's, inside aotgrad, to tell
    a partitioner bug from a trace/runtime bug)."""
    if which == "min_cut":
        return aotgrad.partition.min_cut_rematerialization_partition
    if which == "default":
        return aotgrad.partition.default_partition
    if which == "torch_min_cut":
        from torch._functorch.partitioners import min_cut_rematerialization_partition

        return min_cut_rematerialization_partition
    raise ValueError(f"unknown partitioner {which!r}")


def make_compilers(
    impls: list[str], aotgrad: Any, partition: str = "min_cut"
) -> dict[str, Callable[[Callable], Callable]]:
    out: dict[str, Callable[[Callable], Callable]] = {}
    if "aotgrad" in impls:
        partition_fn = aotgrad_partition_fn(aotgrad, partition)

        def ours(fn: Callable) -> Callable:
            return aotgrad.aot_function(fn, aotgrad.nop, aotgrad.nop, partition_fn=partition_fn)

        out["aotgrad"] = ours
    if "torch" in impls:
        from functorch.compile import aot_function, nop

        def theirs(fn: Callable) -> Callable:
            return aot_function(fn, nop, nop)

        out["torch"] = theirs
    return out


def sample_function(op: Any, sample: Any) -> tuple[Callable[[list[Any]], Any], list[Any]]:
    """A function of the sample's tensors alone (everything else closed over)."""
    flat, spec = pytree.tree_flatten(((sample.input, *sample.args), sample.kwargs))
    tensors = [a for a in flat if isinstance(a, torch.Tensor)]

    def fn(ts: list[Any]) -> Any:
        it = iter(ts)
        full = [next(it) if isinstance(a, torch.Tensor) else a for a in flat]
        args, kwargs = pytree.tree_unflatten(full, spec)
        return op(*args, **kwargs)

    return fn, tensors


def sweep_op(
    op: Any,
    compilers: dict[str, Callable[[Callable], Callable]],
    n_samples: int,
    timeout: int,
    keep_tracebacks: bool,
    data_check: bool = True,
) -> OpResult:
    res = OpResult(op_full_name(op))
    res.atol, res.rtol = op_tolerance(op)
    try:
        with time_limit(timeout):
            samples = list(
                itertools.islice(
                    op.sample_inputs("cpu", torch.float32, requires_grad=True), n_samples
                )
            )
    except Exception as e:
        res.skipped = f"sample_inputs failed: {_first_line(e)}"
        return res
    outcomes: dict[str, Outcome] = {name: Outcome("skip") for name in compilers}
    for si, sample in enumerate(samples):
        fn, tensors = sample_function(op, sample)
        phase = [""]
        try:
            with time_limit(timeout):
                ref = run_forward_backward(fn, tensors, phase)
                again = run_forward_backward(fn, tensors, phase)
        except Exception as e:
            res.skipped = f"eager failed on sample {si}: {_first_line(e)}"
            continue
        try:
            compare(ref, again, res.atol, res.rtol, phase)
        except Mismatch:
            res.skipped = f"eager not reproducible on sample {si}"
            continue
        res.samples_run += 1
        # Eager on other values of the same shapes (for the data-specialization check).
        ref2 = None
        tensors2: list[Any] = []
        if data_check:
            tensors2 = perturb(tensors, 100 + si)
            try:
                with time_limit(timeout):
                    ref2 = run_forward_backward(fn, tensors2, phase)
                    compare(
                        ref2, run_forward_backward(fn, tensors2, phase), res.atol, res.rtol, phase
                    )
            except Exception:
                ref2 = None
        for name, make in compilers.items():
            prev = outcomes[name]
            if prev.status == "fail":
                continue
            phase = [""]
            t0 = time.perf_counter()
            try:
                compiled = make(fn)
                with time_limit(timeout):
                    got = run_forward_backward(compiled, tensors, phase)
                compare(ref, got, res.atol, res.rtol, phase)
                if ref2 is not None:
                    # The same compiled function (no recompilation: same shapes) on other values.
                    with time_limit(timeout):
                        got2 = run_forward_backward(compiled, tensors2, phase)
                    try:
                        compare(ref2, got2, res.atol, res.rtol, phase)
                    except Mismatch as e:
                        raise Mismatch(f"on other input values (same shapes): {e}") from None
                outcomes[name] = Outcome("pass", seconds=prev.seconds)
            except Exception as e:
                timed_out = _is_timeout(e)
                outcomes[name] = Outcome(
                    "fail",
                    error=f"timeout after {timeout}s" if timed_out else _first_line(e),
                    phase="timeout" if timed_out else phase[0],
                    sample=si,
                    seconds=prev.seconds,
                    traceback=traceback.format_exc(limit=-12) if keep_tracebacks else "",
                )
            outcomes[name].seconds += time.perf_counter() - t0
    if res.samples_run:
        res.skipped = ""
    res.results = outcomes
    return res


# ------------------------------------------------------------------ main


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    for name in ("torch", "torch._functorch", "torch._dynamo", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--limit", type=int, default=None, help="first N selected ops only")
    p.add_argument("--ops", default="", help="comma-separated op names (name or name.variant)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per op and implementation")
    p.add_argument("--samples", type=int, default=2, help="samples per op (default 2)")
    p.add_argument("--impls", default=",".join(IMPLS), help="aotgrad,torch (default both)")
    p.add_argument(
        "--partition",
        default="min_cut",
        choices=PARTITIONERS,
        help="aotgrad's partition_fn (default: aotgrad's min-cut)",
    )
    p.add_argument(
        "--no-blame",
        action="store_true",
        help="do not rerun aotgrad-only failures with other partitioners",
    )
    p.add_argument(
        "--no-data-check",
        action="store_true",
        help="skip rerunning each compiled function on other input values of the same shapes",
    )
    p.add_argument("--json", default=None, help="write a JSON report here")
    p.add_argument("--tracebacks", action="store_true", help="print aotgrad-only tracebacks")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per op")
    args = p.parse_args(argv)
    _quiet()
    torch.set_num_threads(max(1, torch.get_num_threads()))

    impls = [s for s in args.impls.split(",") if s]
    aotgrad, import_error = (None, None)
    if "aotgrad" in impls:
        aotgrad, import_error = import_aotgrad()
        if aotgrad is None:
            print("aotgrad does not import:\n" + (import_error or ""))
            return 2
    compilers = make_compilers(impls, aotgrad, args.partition)

    t_start = time.perf_counter()
    ops = select_ops([s for s in args.ops.split(",") if s] or None, args.limit)
    print(f"{len(ops)} ops (autograd + float32 on CPU), {args.samples} samples each")
    results: list[OpResult] = []
    for i, op in enumerate(ops):
        r = sweep_op(op, compilers, args.samples, args.timeout, True, not args.no_data_check)
        results.append(r)
        if args.verbose or any(o.status == "fail" for o in r.results.values()):
            cells = " ".join(
                f"{k}={o.status}" + (f"[{o.phase}: {o.error[:90]}]" if o.status == "fail" else "")
                for k, o in r.results.items()
            )
            print(f"[{i + 1}/{len(ops)}] {r.name}: {r.skipped or cells}", flush=True)
        if i % 25 == 24:
            gc.collect()
            print(f"  ... {i + 1} ops, {time.perf_counter() - t_start:.0f}s", flush=True)
    total = time.perf_counter() - t_start

    ran = [r for r in results if r.samples_run]
    skipped = [r for r in results if not r.samples_run]
    passes = {k: sum(r.results[k].status == "pass" for r in ran) for k in compilers}
    fails = {k: [r for r in ran if r.results[k].status == "fail"] for k in compilers}
    only_ours: list[OpResult] = []
    only_theirs: list[OpResult] = []
    if len(compilers) == 2:
        only_ours = [
            r
            for r in ran
            if r.results["aotgrad"].status == "fail" and r.results["torch"].status == "pass"
        ]
        only_theirs = [
            r
            for r in ran
            if r.results["torch"].status == "fail" and r.results["aotgrad"].status == "pass"
        ]

    wrong_vs_error = [
        r
        for r in ran
        if len(compilers) == 2
        and r.results["aotgrad"].phase in _VALUE_PHASES
        and r.results["torch"].status == "fail"
        and r.results["torch"].phase not in _VALUE_PHASES
    ]
    blame: dict[str, dict[str, str]] = {}
    if only_ours and not args.no_blame:
        by_name = {op_full_name(op): op for op in ops}
        for r in only_ours:
            blame[r.name] = {}
            for which in PARTITIONERS:
                if which == args.partition:
                    continue
                alt = make_compilers(["aotgrad"], aotgrad, which)
                o = sweep_op(
                    by_name[r.name], alt, args.samples, args.timeout, False, not args.no_data_check
                )
                res = o.results.get("aotgrad")
                blame[r.name][which] = res.status if res else "skip"

    print()
    print(f"ops selected: {len(ops)}; compared: {len(ran)}; skipped (eager): {len(skipped)}")
    for k in compilers:
        print(
            f"{k:8s} pass {passes[k]}/{len(ran)}  fail {len(fails[k])}  "
            f"compile+run {sum(r.results[k].seconds for r in ran):.1f}s"
        )
    print(f"total time {total:.1f}s")
    if len(compilers) == 2:
        print(f"\naotgrad fails, torch passes ({len(only_ours)}):")
        for r in only_ours:
            o = r.results["aotgrad"]
            print(f"  {r.name} [sample {o.sample}, {o.phase}] {o.error}")
            if r.name in blame:
                alts = ", ".join(f"{k}: {v}" for k, v in blame[r.name].items())
                print(f"    aotgrad with other partitioners: {alts}")
            if args.tracebacks:
                print("    " + o.traceback.replace("\n", "\n    "))
        print(f"\ntorch fails, aotgrad passes ({len(only_theirs)}):")
        for r in only_theirs:
            o = r.results["torch"]
            print(f"  {r.name} [sample {o.sample}, {o.phase}] {o.error}")
        both = [r for r in ran if all(r.results[k].status == "fail" for k in compilers)]
        print(f"\nboth fail ({len(both)}): {', '.join(r.name for r in both)}")
        print(f"\nof those, aotgrad answers wrongly where torch refuses ({len(wrong_vs_error)}):")
        for r in wrong_vs_error:
            o, t = r.results["aotgrad"], r.results["torch"]
            print(f"  {r.name} [sample {o.sample}] aotgrad: {o.error[:160]}")
            print(f"  {'':{len(r.name)}} torch: {t.error[:160]}")

    write_json(
        args.json,
        {
            "environment": environment(),
            "args": vars(args),
            "total_seconds": total,
            "ops_selected": len(ops),
            "ops_compared": len(ran),
            "pass": passes,
            "aotgrad_fails_torch_passes": [r.name for r in only_ours],
            "torch_fails_aotgrad_passes": [r.name for r in only_theirs],
            "blame": blame,
            "aotgrad_wrong_torch_refuses": [r.name for r in wrong_vs_error],
            "ops": [asdict(r) for r in results],
        },
    )
    return 1 if only_ours else 0


if __name__ == "__main__":
    sys.exit(main())
