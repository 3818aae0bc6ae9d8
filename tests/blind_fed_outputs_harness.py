"""Harness of the blind "fed outputs" suite (``blind_fed_outputs_programs``, tested by
``test_fidelity_blind_fed_outputs``): the ``Recorder`` the programs write their
observations to, the entry points that compile them, an in-process runner and the
comparison of an entry's recordings with eager's.

Carried over from the round-56 helper's out-of-tree runner (which ran each entry in
subprocesses): same snapshots, same tolerances, same comparison. A difference whose path
ends in ``.is_view`` or ``.stride`` is *soft* (a gradient handed back as a fresh tensor
where eager hands an expanded view of the incoming gradient, say); any other one is
*real*. A call that warns ``EagerReplayWarning`` (ran eagerly where aotgrad should have
compiled) counts as a real difference too, as the repo's pytest configuration would have
it.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

ENTRIES = ["aot_mincut", "aot_default", "dynamo"]
SOFT_KEYS = (".is_view", ".stride")
TENSOR_KEYS = (
    "dtype",
    "shape",
    "stride",
    "requires_grad",
    "is_leaf",
    "grad_fn_none",
    "is_inference",
    "is_view",
    "layout",
    "version",
)


# ---------------------------------------------------------------- snapshots


def _excinfo(e: BaseException) -> dict[str, Any]:
    """An exception as its type, its cause chain's types and its message's first line."""
    chain = []
    cur: BaseException | None = e
    seen = set()
    while cur is not None and id(cur) not in seen and len(chain) < 4:
        seen.add(id(cur))
        chain.append(f"{type(cur).__module__}.{type(cur).__name__}")
        cur = cur.__cause__ or getattr(cur, "inner_exception", None)
    return {"__exc__": type(e).__name__, "chain": chain, "msg": str(e).strip().split("\n")[0][:300]}


def tinfo(t: torch.Tensor) -> dict[str, Any]:
    """A tensor's metadata, autograd flags and values (as doubles for floating types)."""
    d: dict[str, Any] = {
        "__T__": 1,
        "dtype": str(t.dtype),
        "shape": list(t.shape),
        "layout": str(t.layout),
    }
    try:
        d["stride"] = list(t.stride())
    except Exception:
        d["stride"] = None
    d["requires_grad"] = t.requires_grad
    d["is_leaf"] = t.is_leaf
    d["grad_fn_none"] = t.grad_fn is None
    d["is_inference"] = t.is_inference()
    d["is_view"] = t._is_view()
    with torch.no_grad():
        v = t.detach()
        if v.is_complex():
            v = torch.view_as_real(v)
        d["values"] = (
            v.double().flatten().tolist() if v.dtype.is_floating_point else v.flatten().tolist()
        )
    return d


def snap(o: Any) -> Any:
    """A comparable snapshot of ``o``: tensors by ``tinfo``, containers item by item."""
    if isinstance(o, torch.Tensor):
        return tinfo(o)
    if o is None or isinstance(o, (bool, int, str)):
        return o
    if isinstance(o, float):
        return {"__float__": o}
    if isinstance(o, (torch.dtype, torch.Size, torch.device, torch.memory_format)):
        return str(o)
    if isinstance(o, dict):
        return {"__dict__": type(o).__name__, "items": {str(k): snap(v) for k, v in o.items()}}
    if isinstance(o, tuple) and hasattr(o, "_fields"):
        return {"__nt__": type(o).__name__, "items": [snap(v) for v in o]}
    if isinstance(o, (list, tuple)):
        return {"__seq__": type(o).__name__, "items": [snap(v) for v in o]}
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        fields = dataclasses.fields(o)
        return {
            "__dc__": type(o).__name__,
            "items": {f.name: snap(getattr(o, f.name)) for f in fields},
        }
    return {"__obj__": type(o).__name__}


class Recorder:
    """What a program observes: ``obs`` by name, and each hook tag's calls in ``hooks``."""

    def __init__(self) -> None:
        self.obs: dict[str, Any] = {}
        self.hooks: dict[str, list[Any]] = {}

    def rec(self, name: str, val: Any) -> None:
        assert name not in self.obs, name
        self.obs[name] = snap(val)

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``, recording its result or the exception it raised (then None)."""
        try:
            v = fn()
            self.obs[name] = {"__ok__": snap(v)}
            return v
        except Exception as e:
            self.obs[name] = _excinfo(e)
            return None

    def grad(self, name: str, t: torch.Tensor) -> torch.Tensor | None:
        """Record ``t.grad`` and whether reading it warned that ``t`` is not a leaf."""
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            g = t.grad
        self.obs["grad." + name] = snap(g)
        self.obs["grad." + name + ".warn_nonleaf"] = any("not a leaf" in str(x.message) for x in w)
        return g

    def hook(self, tag: str, ret: Callable[[Any], Any] | None = None) -> Callable[[Any], Any]:
        """A hook recording each gradient it sees under ``tag``, returning ``ret(g)`` if given."""
        lst = self.hooks.setdefault(tag, [])

        def h(g):
            lst.append(snap(g))
            if ret is not None:
                return ret(g)
            return None

        return h


def L(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64, rg: bool = True):
    """A seeded ``randn`` leaf (its own generator: the same values under every entry)."""
    g = torch.Generator().manual_seed(1000 + seed)
    t = torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)
    if rg:
        t.requires_grad_()
    return t


# ---------------------------------------------------------------- entry points and runner


def make_C(entry: str) -> Callable[[Any], Any]:
    """The ``C`` handed to a program: compiles a function or module under ``entry``."""

    def C(obj):
        if entry == "eager":
            return obj
        if entry in ("aot_mincut", "aot_default"):
            part = min_cut_rematerialization_partition
            if entry == "aot_default":
                part = default_partition
            if isinstance(obj, torch.nn.Module):
                return aotgrad.aot_module(obj, aotgrad.nop, partition_fn=part)
            return aotgrad.aot_function(obj, aotgrad.nop, partition_fn=part)
        if entry == "dynamo_backend_eager":  # (Dynamo's own answer, to tell its differences)
            return torch.compile(obj, backend="eager")
        assert entry == "dynamo", entry
        return torch.compile(obj, backend="aotgrad_eager")

    return C


def run_program(fn: Callable[[Any, Recorder], None], entry: str) -> dict[str, Any]:
    """Run one program under ``entry`` in this process; its observations, with the hooks'
    calls under ``hooks``, an exception escaping the program under ``__top__`` and whether a
    call ran eagerly under ``__eager_replay__`` (aotgrad entries only)."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    R = Recorder()
    with warnings.catch_warnings(record=True) as W:
        warnings.simplefilter("always")
        try:
            fn(make_C(entry), R)
        except Exception as e:
            R.obs["__top__"] = _excinfo(e)
    torch._dynamo.reset()
    R.obs["hooks"] = R.hooks
    if entry != "eager":
        R.obs["__eager_replay__"] = any(issubclass(w.category, EagerReplayWarning) for w in W)
    return R.obs


# ---------------------------------------------------------------- comparison


def tol(dtype: str) -> tuple[float, float]:
    """(rtol, atol) for a snapshot's dtype string."""
    if "float64" in dtype or "complex128" in dtype:
        return 1e-7, 1e-9
    if "float32" in dtype or "complex64" in dtype:
        return 1e-5, 1e-6
    return 1e-2, 1e-2


def _cmp_values(a: dict, b: dict, path: str, diffs: list) -> None:
    va, vb = a["values"], b["values"]
    if len(va) != len(vb):
        diffs.append((path + ".values", f"len{len(va)}", f"len{len(vb)}"))
        return
    rt, at = tol(a["dtype"])
    for x, y in zip(va, vb):
        if isinstance(x, float) or isinstance(y, float):
            if (math.isnan(x) and math.isnan(y)) or x == y:
                continue
            if not abs(x - y) <= at + rt * abs(x):
                diffs.append((path + ".values", va[:6], vb[:6]))
                return
        elif x != y:
            diffs.append((path + ".values", va[:6], vb[:6]))
            return


def _cmp_exceptions(a: dict, b: dict, path: str, diffs: list) -> None:
    if "__exc__" in a and "__exc__" in b:
        if a["__exc__"] != b["__exc__"]:
            diffs.append(
                (
                    path + ".exc_type",
                    a["__exc__"] + ": " + a["msg"][:120],
                    b["__exc__"] + ": " + b["msg"][:120],
                )
            )
        return
    da = (a["__exc__"] + ": " + a["msg"]) if "__exc__" in a else "no exception"
    db = (
        (b["__exc__"] + ": " + b["msg"] + " " + str(b.get("chain")))
        if "__exc__" in b
        else "no exception"
    )
    diffs.append((path + ".exception", da, db))


def cmp(a: Any, b: Any, path: str, diffs: list) -> None:
    """Append to ``diffs`` each ``(path, eager, got)`` where snapshot ``b`` differs from ``a``."""
    if isinstance(a, dict) and isinstance(b, dict):
        if "__T__" in a and "__T__" in b:
            for k in TENSOR_KEYS:
                if a.get(k) != b.get(k):
                    diffs.append((path + "." + k, a.get(k), b.get(k)))
            _cmp_values(a, b, path, diffs)
            return
        if "__exc__" in a or "__exc__" in b:
            _cmp_exceptions(a, b, path, diffs)
            return
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                diffs.append(
                    (
                        path + "." + k,
                        "present" if k in a else "missing",
                        "present" if k in b else "missing",
                    )
                )
            else:
                cmp(a[k], b[k], path + "." + k, diffs)
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            diffs.append((path + ".len", len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            cmp(x, y, f"{path}[{i}]", diffs)
        return
    if a != b:
        diffs.append((path, a, b))


def is_soft(diff: tuple[str, Any, Any]) -> bool:
    """Only a view flag or strides differ (the values, dtype, shape and flags agree)."""
    return diff[0].endswith(SOFT_KEYS)


def differences(eager_obs: dict[str, Any], got_obs: dict[str, Any]) -> tuple[list, list]:
    """``(soft, real)``: the differences of an entry's recordings from eager's."""
    got = dict(got_obs)
    diffs: list = []
    if got.pop("__eager_replay__", False):
        diffs.append(("__eager_replay__", False, True))
    cmp(eager_obs, got, "", diffs)
    soft = [d for d in diffs if is_soft(d)]
    real = [d for d in diffs if not is_soft(d)]
    return soft, real


def backward_of_outputs(R: Recorder, out: Any) -> None:
    """``R.step("bw")``: the backward of the sum of the outputs ``out`` (one or a tuple)
    that require grad."""
    outs = out if isinstance(out, tuple) else (out,)
    R.step("bw", lambda: sum(o.sum() for o in outs if o.requires_grad).backward())


def dynamo_own(eager: dict[str, Any], real: list, program: Callable[..., None]) -> str | None:
    """Where ``real`` (the differences of ``backend="aotgrad_eager"`` from ``eager``) are
    Dynamo's own (``backend="eager"`` differs at the same places, with the same error
    type or value): why, else None."""
    if not real:
        return None
    _soft, own = differences(eager, run_program(program, "dynamo_backend_eager"))
    keyed = lambda ds: {(p, str(got).split(" [")[0]) for p, _e, got in ds}  # noqa: E731
    if keyed(real) != keyed(own):
        return None
    return f"Dynamo's own (backend='eager' differs alike): {describe(own, 2)}"


def describe(diffs: list, limit: int = 20) -> str:
    """One line a difference: ``path: eager=... | got=...`` (each side cut to 300 chars)."""
    lines = [f"  {p}: eager={str(a)[:300]} | got={str(b)[:300]}" for p, a, b in diffs[:limit]]
    if len(diffs) > limit:
        lines.append(f"  ... and {len(diffs) - limit} more")
    return "\n".join(lines)


# ---------------------------------------------------------------- test modules


def blind_params(programs: dict[str, Any], known_open: dict[str, Any]) -> list[Any]:
    """``(name, entry)`` pytest params, one per program of ``programs`` and entry, strict
    xfails where ``known_open`` names the program: ``{name: reason}`` (every entry) or
    ``{name: (entries, reason)}``."""
    import pytest

    out = []
    for name in programs:
        why = known_open.get(name)
        entries, reason = (ENTRIES, why) if isinstance(why, str) else (why or ((), ""))
        for entry in ENTRIES:
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if entry in entries else []
            out.append(pytest.param(name, entry, marks=marks, id=f"{name}-{entry}"))
    return out


_EAGER: dict[tuple[int, str], dict[str, Any]] = {}


def assert_like_eager(programs: dict[str, Any], name: str, entry: str) -> None:
    """Program ``name`` of ``programs`` records under ``entry`` what it records under
    eager (eager's run once per program, shared by the entries), but for soft
    differences."""
    key = (id(programs), name)
    if key not in _EAGER:
        _EAGER[key] = run_program(programs[name]["fn"], "eager")
    _soft, real = differences(_EAGER[key], run_program(programs[name]["fn"], entry))
    assert not real, f"{name} under {entry} differs from eager:\n{describe(real)}"


def registry() -> tuple[dict[str, Any], Callable[..., Any]]:
    """A programs module's ``P`` (name -> ``dict(fn=..., inductor=...)``) and the ``prog()``
    decorator that fills it (``@prog()``, or ``@prog(inductor=True)``)."""
    programs: dict[str, Any] = {}

    def prog(inductor: bool = False) -> Callable[[Any], Any]:
        def deco(fn: Any) -> Any:
            programs[fn.__name__] = dict(fn=fn, inductor=inductor)
            return fn

        return deco

    return programs, prog


def init_params(m: torch.nn.Module, seed: int = 0, offset: int = 700) -> torch.nn.Module:
    """``m`` with every parameter drawn from a generator seeded ``offset + seed`` (float64
    draws, cast to the parameter's dtype, times 0.5): the same under every entry."""
    g = torch.Generator().manual_seed(offset + seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p.dtype) * 0.5)
    return m


def W(t: torch.Tensor) -> torch.Tensor:
    """Deterministic, non-uniform weights shaped like ``t`` (so flips, slices and permuted
    gradients show)."""
    return torch.linspace(-1.0, 1.5, t.numel(), dtype=t.dtype).reshape(t.shape)


def tensors(o: Any) -> list[torch.Tensor]:
    """The tensors of ``o`` (a tensor, or nested lists and tuples of them)."""
    if isinstance(o, torch.Tensor):
        return [o]
    if isinstance(o, (list, tuple)):
        return [t for x in o for t in tensors(x)]
    return []
