"""Observation of the random fidelity programs: run one (``tests/fidelity_generator.py``)
eagerly or through one of aotgrad's entry points and record everything eager exposes.

``observe`` records outputs (values, dtype, shape, strides, requires_grad, is_leaf,
grad_fn, identity, ``_base``, storage sharing, version), every input after the call
(values, metadata, version, storage), the raise of an in-place write into an output after
the call, gradients of every leaf after ``backward(retain_graph=True)`` and after a second
``backward``, and every exception (with its stage). ``tests/fidelity_programs.py``
compares two observations.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass

if "AOTGRAD_CACHE_DIR" not in os.environ:
    # a private disk cache per process (removed at exit): runs don't see each other's graphs
    import atexit
    import shutil
    import tempfile

    _cache_dir = tempfile.mkdtemp(prefix="aotgrad_fidelity_cache_")
    os.environ["AOTGRAD_CACHE_DIR"] = _cache_dir
    atexit.register(shutil.rmtree, _cache_dir, True)

import torch

import aotgrad
from aotgrad.errors import UnsupportedError
from aotgrad.partition import (
    default_partition,
    min_cut_rematerialization_partition,
)
from fidelity_generator import Call, Program

ENTRIES = [
    "aot_function_default",
    "aot_function_mincut",
    "aot_module",
    "aot_module_simplified",
    "dynamo_aotgrad_eager",
    "dynamo_aotgrad_inductor",
]


class Untraceable(Exception):
    """symbolic_trace failed: the program is skipped for aot_module_simplified."""


#: Whether eager's autocast keeps its cache of casts (``fidelity_programs``' check turns it
#: off to tell its stale casts from aotgrad's differences).
AUTOCAST_CACHE = [True]


def _mode(name):
    if name == "grad":
        return torch.enable_grad()
    if name == "no_grad":
        return torch.no_grad()
    if name == "inference_mode":
        return torch.inference_mode()
    if name == "autocast":
        return torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=AUTOCAST_CACHE[0])
    raise ValueError(name)


def root_exception(e: BaseException) -> BaseException:
    """Unwraps Dynamo's wrappers (TorchRuntimeError, BackendCompilerFailed, ...)."""
    seen = set()
    while id(e) not in seen:
        seen.add(id(e))
        mod = type(e).__module__ or ""
        inner = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
        if mod.startswith("torch._dynamo") and inner is not None:
            e = inner
            continue
        break
    return e


def find_unsupported(e: BaseException):
    seen = set()
    stack = [e]
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, UnsupportedError):
            return x
        # explicit chaining only: an error raised while handling an UnsupportedError
        # (a failing fallback) is not a refusal
        stack += [x.__cause__, getattr(x, "inner_exception", None)]
        if (type(x).__module__ or "").startswith("torch._dynamo"):
            stack.append(x.__context__)
    return None


@dataclass
class Exc:
    type: str
    msg: str
    unsupported: str | None  # message of an UnsupportedError in the chain
    mro: tuple = ()  # class names of the (unwrapped) exception's type

    def same_kind(self, eager: Exc) -> bool:
        """The compiled exception is an instance of eager's exception type."""
        return eager.type in self.mro

    def __repr__(self):
        return f"{self.type}({self.msg[:150]!r})"


def _exc(e):
    r = root_exception(e)
    u = find_unsupported(e)
    return Exc(
        type(r).__name__,
        str(r).strip().split("\n")[0][:300],
        None if u is None else str(u),
        tuple(c.__name__ for c in type(r).__mro__),
    )


def _safe(fn):
    try:
        return fn()
    except Exception as e:
        # (torch's own internal asserts are told apart: fidelity_programs._eager_bug)
        internal = "INTERNAL ASSERT FAILED" in str(e)
        return ("raises", type(e).__name__ + (": INTERNAL ASSERT FAILED" if internal else ""))


class T:
    """A tensor value for comparison (allclose)."""

    __slots__ = ("v",)

    def __init__(self, t):
        self.v = t

    def __repr__(self):
        v = self.v
        if v.numel() <= 6:
            return f"T({v.tolist()})"
        return f"T(shape={tuple(v.shape)}, first={v.flatten()[:4].tolist()})"


def _val(t):
    try:
        with torch.inference_mode(False), torch.no_grad():
            dt = torch.complex128 if t.is_complex() else torch.float64
            return T(t.detach().to("cpu", dt).clone())
    except Exception as e:
        return ("raises", type(e).__name__)


class Obs:
    """Ordered observations: key -> (category, value)."""

    def __init__(self):
        self.d: dict[str, tuple[str, object]] = {}
        self.info: dict[str, object] = {}

    def add(self, key, cat, value):
        self.d[key] = (cat, value)


def _flat_outs(out):
    if isinstance(out, (tuple, list)):
        return type(out).__name__, list(out)
    return "bare", [out]


def _names_matching(x, watch, outs, i, rel):
    names = [n for n, w in watch.items() if rel(x, w)]
    names += [
        f"out{j}"
        for j, o in enumerate(outs)
        if j != i and isinstance(o, torch.Tensor) and rel(x, o)
    ]
    return tuple(names)


def _dp(t):
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return None


def _tensor_meta(obs, pre, t, cat_prefix):
    obs.add(f"{pre}.dtype", f"{cat_prefix}_dtype", str(t.dtype))
    obs.add(f"{pre}.shape", f"{cat_prefix}_shape", tuple(t.shape))
    obs.add(f"{pre}.requires_grad", f"{cat_prefix}_requires_grad", _safe(lambda: t.requires_grad))
    obs.add(f"{pre}.is_leaf", f"{cat_prefix}_is_leaf", _safe(lambda: t.is_leaf))
    obs.add(f"{pre}.grad_fn_none", f"{cat_prefix}_grad_fn", _safe(lambda: t.grad_fn is None))
    obs.add(f"{pre}.is_inference", f"{cat_prefix}_is_inference", _safe(t.is_inference))
    obs.add(f"{pre}.version", f"{cat_prefix}_version", _safe(lambda: t._version))


class Runner:
    """Builds the callable for one entry point (or the eager oracle) over a program."""

    def __init__(self, prog: Program, entry: str, eager: bool, ns: dict):
        self.prog, self.entry, self.eager, self.ns = prog, entry, eager, ns
        self.fn = ns["f"]
        self.compiled = None
        self.module = None
        self.gm = None
        if entry == "aot_module":
            pass  # built at the first call, around that call's x0 (a parameter or buffer)
        elif entry == "aot_module_simplified":
            self.gm = self._make_gm()
        elif not eager:
            if entry == "aot_function_default":
                self.compiled = aotgrad.aot_function(
                    self.fn, aotgrad.nop, partition_fn=default_partition
                )
            elif entry == "aot_function_mincut":
                self.compiled = aotgrad.aot_function(
                    self.fn, aotgrad.nop, partition_fn=min_cut_rematerialization_partition
                )
            elif entry == "dynamo_aotgrad_eager":
                torch._dynamo.reset()
                self.compiled = torch.compile(self.fn, backend="aotgrad_eager")
            elif entry == "dynamo_aotgrad_inductor":
                torch._dynamo.reset()
                self.compiled = torch.compile(self.fn, backend="aotgrad")
            elif entry == "dynamo_eager":  # control: Dynamo with torch's eager backend
                torch._dynamo.reset()
                self.compiled = torch.compile(self.fn, backend="eager")
            else:
                raise ValueError(entry)

    def _make_module(self):
        prog, fn = self.prog, self.fn
        holds = prog.first_arg_plain

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.holds = holds

            def forward(self, *args):
                if self.holds:
                    return fn(self.w, *args)
                return fn(*args)

        return Wrapped()

    def _make_gm(self):
        prog = self.prog
        names = [f"x{i}" for i in range(prog.n_args)]
        scal = ", ".join(repr(v) for v in prog.calls[0].scalars)
        call_args = ", ".join(names + ([scal] if scal else []))
        src = (
            f"def forward(self, {', '.join(names)}):\n"
            f"    out = f({call_args})\n"
            "    return out if isinstance(out, tuple) else (out,)\n"
        )
        ns = {"f": self.fn, "torch": torch}
        exec(src, ns)
        M = type("Traced", (torch.nn.Module,), {"forward": ns["forward"]})
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return torch.fx.symbolic_trace(M())
        except Exception as e:
            raise Untraceable(f"{type(e).__name__}: {e}") from e

    def prepare(self, ci, args, watch, scalars, mode):
        """Returns (callable, call args, watch) for call ci."""
        if self.entry == "aot_module":
            if self.module is None:
                self.module = m = self._make_module()
                if m.holds:
                    x0 = args[0]
                    if x0.requires_grad:
                        m.w = torch.nn.Parameter(x0.detach(), requires_grad=True)
                    else:
                        m.register_buffer("w", x0.detach())
                if not self.eager:
                    self.compiled = aotgrad.aot_module(m, fw_compiler=aotgrad.nop)
            m = self.module
            if m.holds:
                x0 = args[0]
                if ci > 0:
                    with torch.no_grad():
                        m.w.copy_(x0)
                    m.w.requires_grad_(x0.requires_grad)
                    m.w.grad = None
                watch = dict(watch)
                watch["x0"] = m.w
                args = args[1:]
            target = m if self.eager else self.compiled
            return target, list(args) + list(scalars), watch
        if self.entry == "aot_module_simplified":
            if self.eager:
                return self.gm, list(args), watch
            if self.compiled is None:
                ex, _ = self.ns["make_inputs"](self.prog.calls[0].seed, self.prog.calls[0].rg)
                with _mode(mode):  # compiled under the call's mode, as Dynamo would
                    self.compiled = aotgrad.aot_module_simplified(
                        self.gm, ex, fw_compiler=aotgrad.nop
                    )
            return self.compiled, list(args), watch
        target = self.fn if self.eager else self.compiled
        return target, list(args) + list(scalars), watch


def _record_outputs(obs, pre, outs, watch, before_dp):
    for i, o in enumerate(outs):
        p = f"{pre}.out{i}"
        if not isinstance(o, torch.Tensor):
            obs.add(f"{p}.value", "out_nontensor", repr(o))
            continue
        obs.add(f"{p}.value", "out_value", _val(o))
        _tensor_meta(obs, p, o, "out")
        is_view = _safe(o._is_view)
        obs.add(f"{p}.is_view", "out_alias", is_view)
        obs.add(f"{p}.stride", "out_stride_view" if is_view else "out_stride", tuple(o.stride()))
        obs.add(
            f"{p}.storage_offset",
            "out_stride_view" if is_view else "out_stride",
            o.storage_offset(),
        )
        obs.add(f"{p}.is", "out_identity", _names_matching(o, watch, outs, i, lambda a, b: a is b))
        base = _safe(lambda o=o: o._base)
        if isinstance(base, tuple):
            b = base
        elif base is None:
            b = "none"
        else:
            b = _names_matching(base, watch, outs, i, lambda a, b: a is b) or "other"
        obs.add(f"{p}._base", "out_alias", b)
        dp = _dp(o)
        obs.add(
            f"{p}.storage",
            "out_alias",
            _names_matching(o, watch, outs, i, lambda a, b, dp=dp: dp is not None and _dp(b) == dp),
        )


def _record_inputs(obs, pre, watch, before_dp, cat="inp"):
    for n, w in watch.items():
        p = f"{pre}.{n}"
        obs.add(f"{p}.value", f"{cat}_value", _val(w))
        _tensor_meta(obs, p, w, cat)
        obs.add(f"{p}.stride", f"{cat}_stride", tuple(w.stride()))
        obs.add(f"{p}.storage_offset", f"{cat}_stride", w.storage_offset())
        obs.add(f"{p}.same_storage", f"{cat}_storage", _dp(w) == before_dp.get(n))
        base = _safe(lambda w=w: w._base)
        if not isinstance(base, tuple):
            base = (
                "none"
                if base is None
                else (tuple(m for m, x in watch.items() if x is base) or "other")
            )
        obs.add(f"{p}._base", f"{cat}_alias", base)


def _record_grads(obs, pre, watch, outs, cat):
    seen = {}
    for n, w in list(watch.items()) + [(f"out{i}", o) for i, o in enumerate(outs)]:
        if (
            not isinstance(w, torch.Tensor)
            or (_safe(lambda w=w: w.is_leaf) is not True and not _retains_grad(w))
            or id(w) in seen
        ):
            continue
        if n.startswith("out") and not w.requires_grad:
            continue
        seen[id(w)] = n
        g = _safe(lambda w=w: w.grad)
        if isinstance(g, tuple):
            obs.add(f"{pre}.{n}", cat, g)
            continue
        obs.add(f"{pre}.{n}", cat, None if g is None else _val(g))
    _note_aliased_grads(obs, pre, watch, seen)


def _note_aliased_grads(obs, pre, watch, seen):
    """Whether two leaves' ``.grad`` share memory (eager's accumulator keeps a gradient
    it is handed, and ``stack``'s backward hands two leaves views of one buffer: the next
    backward's in-place sums then add into both, soak 249076). Soft: a later difference
    in those gradients is eager's aliasing (``fidelity_programs._past_aliased_grads``)."""
    ptrs = set()
    for n in seen.values():
        g = _safe(lambda n=n: watch[n].grad if n in watch else None)
        if isinstance(g, torch.Tensor) and not g.is_sparse and g.numel():
            ptr = _safe(lambda g=g: g.untyped_storage().data_ptr())
            if ptr in ptrs:
                obs.add(f"{pre}.grads_alias", "eager_bug:grads_alias", True)
                return
            ptrs.add(ptr)


def _retains_grad(t):
    """``retain_grad()`` was called on ``t`` (its ``.grad`` is filled though no leaf)."""
    return _safe(lambda: t.retains_grad) is True


def _cotangents(outs):
    """The differentiable outputs and their cotangents (each a function of the output's
    position, so both sides weight the same output the same way)."""
    diff, cots = [], []
    for i, o in enumerate(outs):
        # differentiable: requires grad and has history (or is a real leaf); a view made
        # under no_grad of a tensor that requires grad says requires_grad and is_leaf
        # but backward refuses it
        if (
            isinstance(o, torch.Tensor)
            and _safe(
                lambda o=o: (
                    o.requires_grad
                    and (o.grad_fn is not None or (o.is_leaf and not o._is_view()))
                    and (o.is_floating_point() or o.is_complex())
                )
            )
            is True
        ):
            gen = torch.Generator().manual_seed(7 + i)
            diff.append(o)
            dt = torch.complex128 if o.is_complex() else torch.float64
            cots.append(torch.randn(o.shape, generator=gen, dtype=dt).to(o.dtype))
    return diff, cots


def observe(prog: Program, entry: str, eager: bool) -> Obs:
    """Runs the program's two calls eagerly (the oracle) or through ``entry``."""
    if entry == "aot_module_simplified":
        # fx's GraphModule prints the generated code of a failing line to stderr
        import io

        with contextlib.redirect_stderr(io.StringIO()):
            return _observe(prog, entry, eager)
    return _observe(prog, entry, eager)


def _observe(prog: Program, entry: str, eager: bool) -> Obs:
    obs = Obs()
    ns = prog.namespace()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            runner = Runner(prog, entry, eager, ns)
        except Untraceable:
            raise
        except Exception as e:
            obs.add("setup.raise", "raise", _exc(e))
            return obs
        obs.add("setup.raise", "raise", None)
        for ci, call in enumerate(prog.calls):
            if entry == "aot_module_simplified" and ci > 0:
                # compiled once for the first call's metadata (unguarded, as under
                # Dynamo, which guards): later calls change values only
                c0 = prog.calls[0]
                call = Call(
                    call.seed,
                    c0.rg,
                    c0.mode,
                    c0.scalars,
                    call.post_mutate,
                    call.twice,
                    call.write_input,
                    call.caller_write,
                    call.backward_how,
                )
            _observe_call(obs, prog, runner, ns, ci, call)
    obs.info["warnings"] = [
        str(w.message).split("\n")[0][: int(os.environ.get("FIDELITY_WARNING_CHARS", "120"))]
        for w in caught
        if "aotgrad" in str(w.message).lower()
    ]
    return obs


def _show(e: BaseException) -> None:
    """``FIDELITY_TRACEBACK=1``: print where a call or backward raised (replaying one)."""
    if os.environ.get("FIDELITY_TRACEBACK"):
        import traceback

        traceback.print_exception(e)


def _write_input(obs, pre, watch, i) -> bool:
    """The caller writes input ``x<i>`` under no_grad after the call; False: it raised."""
    t = watch.get(f"x{i}")
    if not isinstance(t, torch.Tensor):
        return True
    try:
        with torch.no_grad():
            t.mul_(2)
    except Exception as e:
        obs.add(f"{pre}.write_input.raise", "raise", _exc(e))
        return False
    obs.add(f"{pre}.write_input.raise", "raise", None)
    return True


def _caller_write(obs, pre, watch, outs, cw) -> bool:
    """The caller writes an input or an output past autograd (``.data``, ``detach()``)
    after the call, as ``Call.caller_write`` says; False: it raised."""
    where, i, how = cw
    t = watch.get(f"x{i}") if where == "x" else outs[i % len(outs)]
    if not isinstance(t, torch.Tensor):
        return True
    try:
        if how == "data.mul_":
            t.data.mul_(2)
        elif how == "data.copy_":
            t.data.copy_(torch.full_like(t.data, 0.5))
        elif how == "data=":
            gen = torch.Generator().manual_seed(11)
            t.data = torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype)
        else:
            t.detach().add_(1)
    except Exception as e:
        obs.add(f"{pre}.caller_write.raise", "raise", _exc(e))
        return False
    obs.add(f"{pre}.caller_write.raise", "raise", None)
    return True


def _observe_call(obs, prog, runner, ns, ci, call):
    pre = f"c{ci}"
    args, watch = ns["make_inputs"](call.seed, call.rg)
    try:
        target, cargs, watch = runner.prepare(ci, args, watch, call.scalars, call.mode)
        before_dp = {n: _dp(w) for n, w in watch.items()}
        versions = {n: _safe(lambda w=w: w._version) for n, w in watch.items()}
        with _mode(call.mode):
            first = target(*cargs) if call.twice else None
            out = target(*cargs)
    except Exception as e:
        _show(e)
        obs.add(f"{pre}.call.raise", "raise", _exc(e))
        return
    obs.add(f"{pre}.call.raise", "raise", None)
    kind, outs = _flat_outs(out)
    earlier = _flat_outs(first)[1] if call.twice else []
    obs.add(f"{pre}.call.out_structure", "out_structure", (kind, len(outs)))
    _record_outputs(obs, f"{pre}.call", outs, watch, before_dp)
    _record_inputs(obs, f"{pre}.call", watch, before_dp)
    if call.post_mutate is not None:
        i = call.post_mutate % len(outs)
        if isinstance(outs[i], torch.Tensor):
            try:
                outs[i].mul_(2)
                obs.add(f"{pre}.post.raise", "raise", None)
            except Exception as e:
                obs.add(f"{pre}.post.raise", "raise", _exc(e))
                return
            _record_inputs(obs, f"{pre}.post", watch, before_dp, cat="post_mutate")
    if call.write_input is not None and not _write_input(obs, pre, watch, call.write_input):
        return
    if call.caller_write and not _caller_write(obs, pre, watch, outs, call.caller_write):
        return
    diff, cots = _cotangents(earlier + outs)
    if not diff:
        return
    if call.backward_how == "autograd_grad" and not _autograd_grad(
        obs, pre, watch, diff, cots, versions, outs
    ):
        return
    if call.backward_how == "create_graph" and not _create_graph(obs, pre, watch, outs, diff, cots):
        return
    if call.backward_how == "per_output":
        ok = _backward_per_output(obs, pre, diff, cots)
    else:
        ok = _backward(obs, f"{pre}.bw1", diff, cots, retain_graph=True)
    if not ok:
        return
    _record_grads(obs, f"{pre}.bw1", watch, outs, "grad")
    if not _backward(obs, f"{pre}.bw2", diff, cots, retain_graph=False):
        return
    _record_grads(obs, f"{pre}.bw2", watch, outs, "grad_second_backward")


def _fresh(cots):
    """The cotangents copied for one backward: eager's ``AccumulateGrad`` may make a leaf's
    ``.grad`` a view of the cotangent it was handed (a ``reshape`` output's gradient is a
    view of its cotangent, and a grad that is not otherwise referenced is stolen), so a
    later accumulation writes into the caller's cotangent and a second pass reusing it
    reads other values: eager's aliasing of a caller's buffer, not a gradient rule."""
    return [c.clone() for c in cots]


def _backward(obs, key, diff, cots, retain_graph, passes=None) -> bool:
    """One ``backward`` over ``diff`` (or one per ``passes``: lists of positions in it);
    False: one raised (recorded under ``key``)."""
    try:
        for p in passes or [range(len(diff))]:
            sub = [diff[i] for i in p]
            torch.autograd.backward(sub, _fresh([cots[i] for i in p]), retain_graph=retain_graph)
    except Exception as e:
        _show(e)
        obs.add(f"{key}.raise", "raise", _exc(e))
        return False
    obs.add(f"{key}.raise", "raise", None)
    return True


def _backward_per_output(obs, pre, diff, cots) -> bool:
    """One ``backward(retain_graph=True)`` per differentiable output, in order (a loss per
    head, a backward pass per output): each pass reaches part of the graph."""
    passes = [[i] for i in range(len(diff))]
    return _backward(obs, f"{pre}.bw1", diff, cots, retain_graph=True, passes=passes)


def _autograd_grad(obs, pre, watch, diff, cots, versions, outs=()) -> bool:
    """``torch.autograd.grad`` of the outputs for every watched tensor that requires grad
    (leaves and non-leaf inputs alike; nothing accumulates into ``.grad``), and for every
    output that requires grad (its own cotangent, plus what the outputs computed from it
    pass back: ``autograd_grad_output``): each result's value, dtype and strides; False:
    it raised.

    A tensor whose version count the call moved (the function wrote it, an alias of it,
    or changed its metadata) is asked for under its own category,
    ``autograd_grad_after_write``: eager's gradient with respect to it is what reached
    the node it has *now*, through the reads made after the write; the compiled call
    connects every read to the node it had when called (a known open family)."""
    names = [
        n
        for n, w in watch.items()
        if isinstance(w, torch.Tensor) and _safe(lambda w=w: w.requires_grad) is True
    ]
    seen: dict[int, str] = {}
    names = [seen.setdefault(id(watch[n]), n) for n in names if id(watch[n]) not in seen]
    targets = {n: watch[n] for n in names}
    for k, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.requires_grad and id(o) not in seen:
            seen[id(o)] = f"out{k}"
            targets[f"out{k}"] = o
    if not targets:
        return True
    names = list(targets)
    try:
        got = torch.autograd.grad(
            diff, list(targets.values()), _fresh(cots), retain_graph=True, allow_unused=True
        )
    except Exception as e:
        _show(e)
        obs.add(f"{pre}.autograd_grad.raise", "raise", _exc(e))
        return False
    obs.add(f"{pre}.autograd_grad.raise", "raise", None)
    for n, g in zip(names, got, strict=True):
        key = f"{pre}.autograd_grad.{n}"
        if n not in watch:
            cat = "autograd_grad_output"
        elif versions.get(n) != _safe(lambda n=n: watch[n]._version):
            cat = "autograd_grad_after_write"
        else:
            cat = "autograd_grad"
        obs.add(key, cat, None if g is None else _val(g))
        if g is not None:
            obs.add(f"{key}.dtype", f"{cat}_dtype", str(g.dtype))
            obs.add(f"{key}.stride", "out_stride", _safe(g.stride))
    return True


def _create_graph(obs, pre, watch, outs, diff, cots) -> bool:
    """A second-order backward, as a gradient penalty takes one: the gradients of the
    outputs for every watched leaf that requires grad with ``create_graph=True`` (each
    one's value and whether it requires grad), then the backward of their squared sum
    (the leaves' ``.grad`` recorded, then cleared for the plain backward that follows);
    False: one raised (recorded)."""
    names = [
        n
        for n, w in watch.items()
        if isinstance(w, torch.Tensor) and _safe(lambda w=w: w.requires_grad and w.is_leaf) is True
    ]
    seen: dict[int, str] = {}
    names = [seen.setdefault(id(watch[n]), n) for n in names if id(watch[n]) not in seen]
    if not names:
        return True
    key = f"{pre}.create_graph"
    try:
        got = torch.autograd.grad(
            diff, [watch[n] for n in names], _fresh(cots), create_graph=True, allow_unused=True
        )
        for n, g in zip(names, got, strict=True):
            obs.add(f"{key}.{n}", "create_graph_grad", None if g is None else _val(g))
            obs.add(
                f"{key}.{n}.requires_grad", "create_graph_grad", _safe(lambda g=g: g.requires_grad)
            )
        penalty = [(g * g).sum() for g in got if g is not None and g.requires_grad]
        if penalty:
            torch.autograd.backward(penalty)
    except Exception as e:
        _show(e)
        obs.add(f"{key}.raise", "raise", _exc(e))
        return False
    obs.add(f"{key}.raise", "raise", None)
    _record_grads(obs, key, watch, outs, "second_order_grad")
    for n in names:
        watch[n].grad = None
    return True
