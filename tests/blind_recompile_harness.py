"""Shared harness of the blind recompile fidelity tests (``test_fidelity_blind_recompile_*``):
one compiled object called again and again with inputs whose metadata changes between calls
(dtype, shape, rank, strides, storage offset, requires_grad, leaf-ness, aliasing, grad mode,
autocast, Python scalars, containers) and, for modules, with parameters / buffers / training
mode changing between calls. Every call must observe exactly what eager observes
(``eager_oracle.observe``): a stale graph shows up as a difference. Written from the family
description only, without reading aotgrad's source.

Holds the input builders, the mode helpers, the program registries, the known-open table and
the runners; the programs and their tests live in the test modules.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, _differences, observe

F32, F64, BF16, F16, I64 = torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64
NULL = contextlib.nullcontext
NOGRAD = torch.no_grad
INFER = torch.inference_mode


def AUTOCAST():
    return torch.autocast("cpu", dtype=torch.bfloat16)


# ---------------------------------------------------------------- input builders
# A spec is a function () -> (tensor, leaf or None); ``A(*specs)`` makes a make_args.


def leaf(*shape, dtype=F64, rg=True):
    def b():
        if dtype.is_floating_point or dtype.is_complex:
            t = torch.randn(shape, dtype=dtype, requires_grad=rg)
        elif dtype == torch.bool:
            t = torch.randn(*shape) > 0
        else:
            t = torch.randint(-5, 5, shape, dtype=dtype)
        return t, (t if t.requires_grad else None)

    return b


def clone(*shape, dtype=F64):
    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=True)
        return x.clone(), x

    return b


def tview(*shape, dtype=F64, rg=True):
    """A transposed view of a leaf of shape ``shape`` (the view has the reversed 2 dims)."""

    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=rg)
        return x.t(), (x if rg else None)

    return b


def tclone(*shape, dtype=F64):
    """A transposed non-leaf (a clone of a leaf, then .t())."""

    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=True)
        return x.clone().t(), x

    return b


def step(*shape, dtype=F64, rg=True):
    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=rg)
        return x[::2], (x if rg else None)

    return b


def stepclone(*shape, dtype=F64):
    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=True)
        return x.clone()[::2], x

    return b


def offs(*shape, dtype=F64, rg=True):
    def b():
        x = torch.randn(*shape, dtype=dtype, requires_grad=rg)
        return x[1:], (x if rg else None)

    return b


def expand(n, *shape, dtype=F64, rg=True):
    def b():
        x = torch.randn(1, *shape, dtype=dtype, requires_grad=rg)
        return x.expand(n, *shape), (x if rg else None)

    return b


def chlast(*shape, dtype=F64, rg=True):
    def b():
        x = torch.randn(*shape, dtype=dtype).to(memory_format=torch.channels_last)
        x.requires_grad_(rg)
        return x, (x if rg else None)

    return b


def inference(*shape, dtype=F64):
    def b():
        with torch.inference_mode():
            t = torch.randn(*shape, dtype=dtype)
        return t, None

    return b


def val(v):
    return lambda: (v, None)


def A(*specs):
    def make():
        args, lv = [], []
        for s in specs:
            a, lf = s()
            args.append(a)
            if lf is not None:
                lv.append(lf)
        return args, lv

    return make


def same_twice(*shape):
    """The same non-leaf passed twice."""

    def make():
        x = torch.randn(*shape, dtype=F64, requires_grad=True)
        c = x.clone()
        return [c, c], [x]

    return make


def two_clones(*shape):
    def make():
        x = torch.randn(*shape, dtype=F64, requires_grad=True)
        y = torch.randn(*shape, dtype=F64, requires_grad=True)
        return [x.clone(), y.clone()], [x, y]

    return make


def same_leaf_twice(*shape):
    def make():
        x = torch.randn(*shape, dtype=F64, requires_grad=True)
        return [x, x], [x]

    return make


def overlapping(n=6, k=4):
    """Two overlapping views of one non-leaf base: base[0:k], base[n-k:n]."""

    def make():
        x = torch.randn(n, dtype=F64, requires_grad=True)
        b = x.clone()
        return [b[0:k], b[n - k : n]], [x]

    return make


def disjoint(n=6, k=3):
    def make():
        x = torch.randn(n, dtype=F64, requires_grad=True)
        b = x.clone()
        return [b[0:k], b[k : 2 * k]], [x]

    return make


def listarg(*shapes, rg=True, kind=list):
    def make():
        ts = [torch.randn(*s, dtype=F64, requires_grad=rg) for s in shapes]
        return [kind(ts)], (ts if rg else [])

    return make


def dictarg(**shapes):
    def make():
        ts = {k: torch.randn(*s, dtype=F64, requires_grad=True) for k, s in shapes.items()}
        return [ts], list(ts.values())

    return make


def with_scalar(spec, *vals):
    def make():
        t, lf = spec()
        return [t, *vals], ([lf] if lf is not None else [])

    return make


# ---------------------------------------------------------------- programs
# name -> (fn, [(make_args, ctx), ...])

#: every program name over all the test modules (a name is one program across the files)
_ALL_NAMES: set[str] = set()


def registry():
    """A test module's program table and its ``prog`` / ``progp`` registrars."""
    programs: dict[str, tuple[Any, list[tuple[Any, Any]]]] = {}

    def prog(name, fn, *steps):
        assert name not in _ALL_NAMES
        _ALL_NAMES.add(name)
        programs[name] = (fn, [s if isinstance(s, tuple) else (s, NULL) for s in steps])

    def progp(name, fn, build, *changes):
        prog(name, fn, *persistent(build, *changes))

    return programs, prog, progp


def sin2(x):
    return x.sin() * 2


def mul(a, b):
    return a * b


# ---------------------------------------------------------------- mode helpers


@contextlib.contextmanager
def DEFAULT_F64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def AUTOCAST_F16():
    return torch.autocast("cpu", dtype=torch.float16)


def AUTOCAST_OFF():
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=False)


@contextlib.contextmanager
def DETERMINISTIC():
    old = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old)


# the same tensor object passed again after its metadata was changed in place between calls


def persistent(build, *changes):
    """Step 0 builds the tensor (and its leaves); step i first applies ``changes[i-1]``
    to the very same object. Step 0 rebuilds it, so eager and compiled runs start alike."""
    held: dict[str, Any] = {}

    def first():
        held["x"], held["leaves"] = build()
        return [held["x"]], held["leaves"]

    def later(change):
        def make():
            with torch.no_grad():
                change(held["x"])
            return [held["x"]], held["leaves"]

        return make

    return [first, *[later(c) for c in changes]]


def _plain(*shape, dtype=F64, rg=False):
    def b():
        t = torch.randn(*shape, dtype=dtype, requires_grad=rg)
        return t, ([t] if rg else [])

    return b


def _rg(flag):
    return lambda x: x.requires_grad_(flag)


def _data_swap(*shape, dtype=F64):
    def c(x):
        x.data = torch.randn(*shape, dtype=dtype)

    return c


def _set_to_offset(x):
    base = torch.randn(x.numel() + 3, dtype=x.dtype)
    x.set_(base.untyped_storage(), 2, x.shape, x.stride())


def meta(*shape, dtype=F64):
    return lambda: (torch.empty(*shape, dtype=dtype, device="meta"), None)


# ---------------------------------------------------------------- runner


def norm(v):
    """Tuples as lists (the oracle's differ walks lists, not tuples of tensors)."""
    if isinstance(v, (tuple, list)):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        return {k: norm(x) for k, x in v.items()}
    if isinstance(v, float) and v != v:
        return "nan"  # nan != nan: a Python nan argument compares as its name
    return v


def run_sequence(fn, steps, compiler):
    g = None if compiler is None else compiler(fn)
    seen = []
    for st in steps:
        make, ctx = st[0], st[1]
        after = st[2] if len(st) > 2 else None
        seen.append(observe(fn, make, None if g is None else (lambda f: g), ctx=ctx, after=after))
    return norm(seen)


FN_COMPILERS = list(COMPILERS)

# (program, compiler) -> what differs from eager; filled from the runs of the test files.
KNOWN: dict[tuple[str, str], str] = {}

_AOT = ("aot_function-min_cut", "aot_function-default")
_DYN_UPSTREAM = " (torch.compile's own guards: the same with backend='eager', not aotgrad's)"
for _n, _r in {
    "branch_is_inference": "x.is_inference() reads False while tracing: call with an inference tensor gives x*3, eager x*2",
    "branch_storage_offset": "x.storage_offset() baked in from an earlier call of the same shape: offset 2 gives x*1, eager x*2",
    "branch_is_parameter": "isinstance(x, nn.Parameter) not guarded: a Parameter after a plain tensor gives x*3, eager x*2",
    "branch_is_view": "x._base is not None not guarded: a view of a leaf after a leaf gives x*3, eager x*2",
    "branch_version": "x._version not guarded: a written-to input (version 1) after a fresh one gives x*3, eager x*2",
    "branch_grad_is_none": "x.grad is None not guarded: a leaf with .grad set after one without gives x*2, eager x*3",
    "branch_python_attr": "a Python attribute on the input tensor (hasattr) not guarded: gives x*3, eager x*2",
    "branch_retains_grad": "x.retains_grad not guarded: after retain_grad() gives x*3, eager x*2",
    "branch_inference_mode_enabled": "torch.is_inference_mode_enabled() not guarded: under inference_mode gives x*3, eager x*2",
    "branch_deterministic": "torch.are_deterministic_algorithms_enabled() not guarded: after use_deterministic_algorithms(True) gives x*3, eager x*2",
    "same_obj_data_swap": "the same leaf called again after `x.data = torch.randn(5)` (it still holds a .grad of shape (3,) from the first call's backward): the call raises RuntimeError 'attempting to assign a gradient of size [3] to a tensor of size [5]'; eager's forward runs (only its backward's accumulation fails)",
}.items():
    for _c in _AOT:
        KNOWN[_n, _c] = _r
for _n, _r in {
    "branch_is_leaf": "x.is_leaf not guarded: a non-leaf after a leaf gives x*2, eager x*3",
    "branch_grad_fn": "x.grad_fn is None not guarded: a non-leaf after a leaf gives x*2, eager x*3",
    "branch_is_view": "x._base is not None not guarded: a view after a leaf gives x*3, eager x*2",
    "branch_retains_grad": "x.retains_grad not guarded: after retain_grad() gives x*3, eager x*2",
}.items():
    KNOWN[_n, "dynamo-aotgrad_eager"] = _r + _DYN_UPSTREAM
KNOWN["mod_replace_param_with_tensor", "aot_module"] = (
    "refusal: after `del m.weight; m.weight = torch.full((3,), 4.0)` (a plain tensor attribute) the call raises"
    " UnsupportedError 'reads a tensor that is not one of its arguments'; eager runs"
)
KNOWN["same_obj_data_swap", "dynamo-aotgrad_eager"] = (
    KNOWN["same_obj_data_swap", _AOT[0]] + _DYN_UPSTREAM
)


#: A branch or conversion on a tensor's value: aot_function cannot trace it, and runs the
#: call eagerly with an EagerReplayWarning naming it (Dynamo breaks the graph there).
RUN_EAGERLY = {
    "branch_value_item": "data-dependent",
    "branch_data_tensor_bool": "data-dependent",
    "branch_bool_item": "data-dependent",
    "scalar_int_of_tensor": "data-dependent",
    # (a tensor from outside the arguments: its gradient and later values would be lost)
    "global_tensor_value": "not one of its arguments",
}


def _known(name, comp, request):
    reason = KNOWN.get((name, comp)) or KNOWN.get((name, "*"))
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))


def check_program(programs, name, comp, request):
    """Run program ``name`` of ``programs`` eagerly and under ``comp``: no difference."""
    _known(name, comp, request)
    fn, steps = programs[name]
    eager = run_sequence(fn, steps, None)
    if name in RUN_EAGERLY and comp in _AOT:
        with pytest.warns(EagerReplayWarning, match=RUN_EAGERLY[name]):
            compiled = run_sequence(fn, steps, COMPILERS[comp])
    else:
        compiled = run_sequence(fn, steps, COMPILERS[comp])
    diffs = _differences(eager, compiled)
    assert not diffs, "\n".join(diffs)


# ---------------------------------------------------------------- modules


def run_module_sequence(make_mod, steps, compile_mod):
    torch.manual_seed(1)
    mod = make_mod()
    g = mod if compile_mod is None else compile_mod(mod)
    seen = []
    for mutate, make in steps:
        mutate(mod)
        for p in mod.parameters():
            p.grad = None
        obs = observe(lambda *a: None, make, lambda f: g)
        obs.append(
            {
                "params": {
                    n: [
                        p.detach().clone(),
                        p.dtype,
                        p.requires_grad,
                        None if p.grad is None else p.grad.clone(),
                    ]
                    for n, p in mod.named_parameters()
                },
                "buffers": {n: b.clone() for n, b in mod.named_buffers()},
            }
        )
        seen.append(obs)
    return seen


def _aot_module(m):
    return aotgrad.aot_module(m, fw_compiler=aotgrad.nop)


def _dynamo_module(m):
    torch._dynamo.reset()
    return torch.compile(m, backend="aotgrad_eager")


MOD_COMPILERS = {"aot_module": _aot_module, "dynamo-aotgrad_eager": _dynamo_module}


def check_module(modules, name, comp, request):
    """Run module program ``name`` of ``modules`` eagerly and under ``comp``: no difference."""
    _known(name, comp, request)
    make_mod, steps = modules[name]
    eager = run_module_sequence(make_mod, steps, None)
    compiled = run_module_sequence(make_mod, steps, MOD_COMPILERS[comp])
    eager, compiled = norm(eager), norm(compiled)
    diffs = _differences(eager, compiled)
    assert not diffs, "\n".join(diffs)
