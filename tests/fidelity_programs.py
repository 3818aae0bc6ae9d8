"""Random short programs, run eagerly and through aotgrad's entry points, compared on
everything eager exposes.

A program is generated from one integer seed (``random.Random(seed)``) as Python source:
a ``make_inputs(seed, rg)`` that builds the tensor inputs (leaves, ``leaf.clone()``
non-leaves, tensors without grad, one tensor passed twice, overlapping and disjoint
views of one base, transposed inputs, 0-dim inputs), a function ``f(x0, ..., s0, ...)``
(elementwise / reduction / matmul ops, in-place writes to inputs, views and
intermediates, metadata mutations, detach, custom autograd Functions, grad-mode and
autocast blocks, multi-output views, Python branches) and two calls (other values,
other ``requires_grad`` flags, a call mode: grad, ``no_grad``, ``inference_mode``,
``autocast``). ``print(program.source)`` is the reproducer; ``python
tests/fidelity_programs.py SEED [ENTRY]`` replays one.

``observe`` runs a program through an entry point (or eagerly: the oracle) and records
outputs (values, dtype, shape, strides, requires_grad, is_leaf, grad_fn, identity,
``_base``, storage sharing, version), every input after the call (values, metadata,
version, storage), the raise of an in-place write into an output after the call,
gradients of every leaf after ``backward(retain_graph=True)`` and after a second
``backward``, and every exception (with its stage). ``diff`` compares two observations
and returns findings by category.
"""

from __future__ import annotations

import contextlib
import linecache
import math
import os
import random
import sys
import warnings
from dataclasses import dataclass, field

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

PRELUDE = '''\
import torch


class HalfGrad(torch.autograd.Function):
    """Identity forward (returns its input itself), backward g * 0.5."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 0.5


class ViewOf(torch.autograd.Function):
    """Returns a view of its input; backward g * 2."""

    @staticmethod
    def forward(ctx, x):
        return x.view(x.shape)

    @staticmethod
    def backward(ctx, g):
        return g * 2


class DirtyMul(torch.autograd.Function):
    """Writes its input in place (x *= 2), ctx.mark_dirty, returns it."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


class SavedSquare(torch.autograd.Function):
    """x * x with the input saved for backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

'''

ENTRIES = [
    "aot_function_default",
    "aot_function_mincut",
    "aot_module",
    "aot_module_simplified",
    "dynamo_aotgrad_eager",
    "dynamo_aotgrad_inductor",
]

# ---------------------------------------------------------------------------------------
# Generator
# ---------------------------------------------------------------------------------------


def _bcast(a, b):
    """Broadcast shape of two shapes, or None."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def _numel(s):
    return math.prod(s)


class Val:
    """A name in the generated function and what the generator believes about it."""

    def __init__(self, name, cell, kind, bf16=False, multi=False, group=None):
        self.name = name
        # values that may share memory share a group (views, detach, the same input)
        self.group = group if group is not None else object()
        # non-overlapping and dense (eager's partial-overlap check of in-place ops works)
        self.dense = False
        self.cell = cell  # [shape]; shared by names for the same tensor object
        self.kind = kind  # input, input_view, inter, inter_view, detached
        self.bf16 = bf16
        self.multi = multi

    @property
    def shape(self):
        return self.cell[0]

    @shape.setter
    def shape(self, s):
        self.cell[0] = s


def _views_for(shape):
    """(template, new shape) for view ops applicable to ``shape``; {v} is the operand."""
    nd, n = len(shape), _numel(shape)
    out = [
        ("{v}.view_as({v})", shape),
        ("{v}.view(-1)", (n,)),
        ("{v}.unsqueeze(0)", (1, *shape)),
        (
            "{v}.expand(2, " + ", ".join(map(str, shape)) + ")" if nd else "{v}.expand(2)",
            (2, *shape),
        ),
        ("{v}.squeeze()", tuple(d for d in shape if d != 1)),
    ]
    if nd <= 2:
        out.append(("{v}.t()", tuple(reversed(shape))))
    if nd >= 1:
        out.append(("{v}[0]", shape[1:]))
        out.append(("{v}[::2]", ((shape[0] + 1) // 2, *shape[1:])))
        if shape[0] >= 3:
            out.append(("{v}[1:3]", (2, *shape[1:])))
        if shape[-1] >= 3:
            out.append(("{v}.narrow(-1, 1, 2)", (*shape[:-1], 2)))
        if shape[-1] == 4:
            out.append(("{v}.unflatten(-1, (2, 2))", (*shape[:-1], 2, 2)))
    if nd == 2:
        out.append(("{v}.diagonal()", (min(shape),)))
        out.append(("{v}[:, 1]", (shape[0],)))
        out.append(("{v}.mT", (shape[1], shape[0])))
    if nd >= 2:
        s = list(shape)
        s[0], s[1] = s[1], s[0]
        out.append(("{v}.transpose(0, 1)", tuple(s)))
    if n % 2 == 0 and n >= 2:
        out.append(("{v}.reshape(2, -1)", (2, n // 2)))
    if n >= 4:
        out.append(("{v}.as_strided((2, 2), (1, 2))", (2, 2)))
    return out


def _suffixes_for(shape):
    """(suffix, shape) for in-place targets: the value itself, or a view/slice of it."""
    nd = len(shape)
    out = [("", shape), ("", shape)]
    if nd >= 1:
        out.append(("[0]", shape[1:]))
        if shape[0] >= 3:
            out.append(("[1:3]", (2, *shape[1:])))
    if nd == 2:
        out.append(
            (
                "[:, 1:3]" if shape[1] >= 3 else "[:, 0]",
                (shape[0], 2) if shape[1] >= 3 else (shape[0],),
            )
        )
        out.append((".t()", (shape[1], shape[0])))
        out.append((".diagonal()", (min(shape),)))
    return out


UNARY = [
    "{v}.sin()",
    "{v}.tanh()",
    "torch.sigmoid({v})",
    "{v}.relu()",
    "-{v}",
    "{v}.exp()",
    "{v} * {v}",
    "{v}.abs()",
    "{v}.clamp(-0.5, 0.5)",
    "{v}.pow(2)",
    "{v}.cos()",
    "{v}.clone()",
    "{v}.contiguous()",  # returns self when contiguous
    "{v}.to(DT)",  # returns self (same dtype)
    "{v}.softmax(-1)",
    "{v}.cumsum(-1)",
]
BINARY = [
    "{a} + {b}",
    "{a} - {b}",
    "{a} * {b}",
    "torch.maximum({a}, {b})",
    "torch.where({a} > 0, {a}, {b})",
    "{a} / ({b}.abs() + 1)",
    "torch.lerp({a}, {b}, 0.3)",
]
MATMUL = ["{a} @ {b}", "torch.mm({a}, {b})", "{a}.matmul({b})", "torch.addmm({b}, {a}, {b})"]
INPLACE_UNARY = [
    "{T}.zero_()",
    "{T}.fill_(0.25)",
    "{T}.relu_()",
    "{T}.sin_()",
    "{T}.clamp_(-1, 1)",
    "{T}.add_(1)",
    "{T}.mul_(2)",
    "{T}.masked_fill_({T} > 0, 0.5)",
]
INPLACE_BINARY = [
    "{T}.add_({O})",
    "{T}.mul_({O})",
    "{T}.sub_({O})",
    "{T}.copy_({O})",
    "{T}.copy_({O})",
    "{T}.addcmul_({O}, {O})",
    "{T}.lerp_({O}, 0.5)",
]


@dataclass
class Call:
    seed: int
    rg: tuple
    mode: str
    scalars: tuple
    post_mutate: int | None = None  # outs[i].mul_(2) after the call (a tensor output)


@dataclass
class Program:
    seed: int
    dtype: str
    n_args: int
    scalar_names: list
    first_arg_plain: bool  # x0 is a plain root (a parameter/buffer in aot_module)
    inputs_src: str
    fn_src: str
    calls: list
    uses_autocast: bool
    source: str = ""
    _code: object = field(default=None, repr=False)

    def namespace(self):
        """A fresh namespace with ``make_inputs``, ``f`` and the prelude's Functions."""
        if self._code is None:
            fname = f"<fidelity program {self.seed}>"
            linecache.cache[fname] = (len(self.source), None, self.source.splitlines(True), fname)
            self._code = compile(self.source, fname, "exec")
        ns = {"__name__": f"fidelity_program_{self.seed}"}
        exec(self._code, ns)
        return ns

    @property
    def tol(self):
        return (5e-2, 5e-2) if self.uses_autocast else (1e-6, 1e-6)


class Gen:
    def __init__(self, seed):
        self.seed = seed
        self.rng = random.Random(seed)
        self.autocast = self.rng.random() < 0.15
        self.dt = "torch.float32" if self.autocast else "torch.float64"
        self.pool: list[Val] = []
        self.n = 0
        self.in_autocast = False
        self.in_autocast_off = False

    def fresh(self, p="t"):
        self.n += 1
        return f"{p}{self.n}"

    def w(self, items):
        """Weighted choice from [(item, weight)]."""
        items = [(i, w) for i, w in items if w > 0]
        tot = sum(w for _, w in items)
        x = self.rng.random() * tot
        for i, w in items:
            x -= w
            if x <= 0:
                return i
        return items[-1][0]

    def pick(self, pred=lambda v: True, weights=None):
        cands = [v for v in self.pool if pred(v)]
        if not cands:
            return None
        weights = weights or {}
        return self.w([(v, weights.get(v.kind, 1.0) * (2.0 if v.multi else 1.0)) for v in cands])

    # ---- inputs ------------------------------------------------------------------------
    def gen_inputs(self):
        rng = self.rng
        lines, args, watch = [], [], []
        rg1: list[bool] = []
        rg2: list[bool] = []
        arg_vals: list[Val] = []
        first_plain = False

        def root(default):
            k = len(rg1)
            rg1.append(default)
            rg2.append(default if rng.random() < 0.5 else not default)
            return k

        def add_arg(name, shape=(4, 4), cell=None, kind="input", group=None):
            args.append(name)
            watch.append(name)
            v = Val(name, cell or [shape], kind, group=group)
            arg_vals.append(v)
            return v

        n_slots = rng.randint(1, 4)
        for slot in range(n_slots):
            if len(args) >= 5:
                break
            kind = self.w(
                [
                    ("leaf", 4),
                    ("nonleaf", 3),
                    ("nograd", 3),
                    ("same", 1.5 if args else 0),
                    ("views", 3 if len(args) <= 3 else 0),
                    ("transposed", 1.5),
                    ("zerodim", 1.5),
                ]
            )
            i = len(args)
            x = f"x{i}"
            if kind in ("leaf", "nograd"):
                k = root(kind == "leaf")
                lines.append(f"{x} = r(4, 4).requires_grad_(rg[{k}])")
                add_arg(x).dense = True
                if slot == 0:
                    first_plain = True
            elif kind == "nonleaf":
                k = root(True)
                lines.append(f"l{k} = r(4, 4).requires_grad_(rg[{k}])")
                lines.append(f"{x} = l{k}.clone()")
                watch.append(f"l{k}")
                add_arg(x)
            elif kind == "same":
                j = rng.randrange(len(args))
                lines.append(f"{x} = x{j}  # the same tensor twice")
                src = arg_vals[j]
                add_arg(x, cell=src.cell, group=src.group)
            elif kind == "transposed":
                k = root(rng.random() < 0.6)
                if rng.random() < 0.5:
                    lines.append(
                        f"{x} = torch.empty_strided((4, 4), (1, 4), dtype=DT).copy_(r(4, 4)).requires_grad_(rg[{k}])"
                    )
                else:
                    lines.append(f"l{k} = r(4, 4).requires_grad_(rg[{k}])")
                    lines.append(f"b{k} = l{k}.clone()")
                    lines.append(f"{x} = b{k}.t()")
                    watch += [f"l{k}", f"b{k}"]
                add_arg(x)
            elif kind == "zerodim":
                k = root(rng.random() < 0.6)
                lines.append(f"{x} = r().requires_grad_(rg[{k}])")
                add_arg(x, shape=())
            else:  # views of one base
                k = root(rng.random() < 0.7)
                y = f"x{i + 1}"
                vk = self.w([("overlap", 3), ("disjoint", 2), ("cols", 1.5), ("overlap_t", 1)])
                base_shape = "(4, 8)" if vk == "cols" else "(8, 4)"
                lines.append(f"l{k} = r{base_shape}.requires_grad_(rg[{k}])")
                watch.append(f"l{k}")
                if rng.random() < 0.75:
                    lines.append(f"b{k} = l{k}.clone()")
                    watch.append(f"b{k}")
                    b = f"b{k}"
                else:
                    b = f"l{k}"  # views of a leaf
                if vk == "overlap":
                    lines.append(f"{x}, {y} = {b}[0:4], {b}[2:6]  # overlapping views")
                elif vk == "disjoint":
                    lines.append(f"{x}, {y} = {b}[:4], {b}[4:]  # disjoint views")
                elif vk == "cols":
                    lines.append(f"{x}, {y} = {b}[:, :4], {b}[:, 4:]  # disjoint column views")
                else:
                    lines.append(f"{x}, {y} = {b}[0:4], {b}[2:6].t()  # overlapping views")
                v = add_arg(x)
                add_arg(y, group=v.group)
        self.args = args
        for v in arg_vals:
            self.pool.append(v)
        src = [
            "def make_inputs(seed, rg):",
            "    g = torch.Generator().manual_seed(seed)",
            "",
            "    def r(*shape):",
            "        return torch.randn(shape, generator=g, dtype=DT)",
            "",
        ]
        src += ["    " + ln for ln in lines]
        src.append(f"    return [{', '.join(args)}], dict({', '.join(f'{n}={n}' for n in watch)})")
        self.inputs_src = "\n".join(src) + "\n"
        self.rg1, self.rg2 = tuple(rg1), tuple(rg2)
        # x0 is a plain root not passed twice: aot_module holds it as a parameter/buffer
        self.first_plain = first_plain and not any(
            ln.startswith("x") and "= x0  #" in ln for ln in lines
        )

    def gen_scalars(self):
        rng = self.rng
        self.scalars = []  # (name, type, v1, v2)
        for i in range(rng.randint(0, 2)):
            t = self.w([("float", 2), ("int", 1.5), ("bool", 1)])
            if t == "float":
                a = rng.choice([0.5, 1.5, -2.0])
                b = a if rng.random() < 0.3 else rng.choice([0.25, -1.0, 3.0])
            elif t == "int":
                a = rng.randint(1, 3)
                b = a if rng.random() < 0.3 else rng.randint(1, 4)
            else:
                a = rng.random() < 0.5
                b = a if rng.random() < 0.3 else not a
            self.scalars.append((f"s{i}", t, a, b))

    def scalar(self, types):
        c = [s for s in self.scalars if s[1] in types]
        return self.rng.choice(c)[0] if c else None

    # ---- steps ---------------------------------------------------------------------------
    def add(self, expr, shape, kind="inter", bf16=False, cell=None, multi=False, group=None):
        name = self.fresh()
        self.pool.append(Val(name, cell or [shape], kind, bf16, multi, group))
        return [f"{name} = {expr}"]

    def step(self, depth=0):
        kind = self.w(
            [
                ("unary", 3),
                ("binary", 3),
                ("matmul", 1.5),
                ("reduce", 1.5),
                ("view", 2.5),
                ("inplace", 4.5),
                ("meta", 1.2),
                ("detach", 1.3),
                ("custom", 1.3),
                ("block", 1.6 if depth < 2 else 0),
                ("multi", 0.8),
                ("branch", 0.7 if depth < 1 else 0),
            ]
        )
        return getattr(self, "s_" + kind)(depth)

    def s_unary(self, depth):
        v = self.pick()
        r = self.rng.random()
        fs = self.scalar(("float", "int"))
        bs = self.scalar(("bool",))
        if fs and r < 0.2:
            e = self.rng.choice(
                ["{v} * {s}", "{v} + {s}", "torch.where({v} > 0, {v}, {s})", "{v}.clamp(max={s})"]
            )
            e = e.format(v=v.name, s=fs)
        elif bs and r < 0.3:
            e = f"({v.name} if {bs} else -{v.name})"
        else:
            e = self.rng.choice(UNARY).replace("DT", self.dt).format(v=v.name)
        alias = " if " in e or ".contiguous()" in e or ".to(" in e  # may return v itself
        out = self.add(e, v.shape, bf16=v.bf16, group=v.group if alias else None)
        self.pool[-1].dense = not alias
        return out

    def s_binary(self, depth):
        a = self.pick()
        b = self.pick(lambda u: _bcast(u.shape, a.shape) is not None)
        if self.rng.random() < 0.15 and a.shape and a.shape == b.shape:
            e = self.rng.choice(["torch.cat([{a}, {b}])", "torch.stack([{a}, {b}])"]).format(
                a=a.name, b=b.name
            )
            s = (a.shape[0] * 2, *a.shape[1:]) if "cat" in e else (2, *a.shape)
            return self.add(e, s, bf16=a.bf16 and b.bf16)
        e = self.rng.choice(BINARY).format(a=a.name, b=b.name)
        return self.add(e, _bcast(a.shape, b.shape), bf16=a.bf16 and b.bf16)

    def s_matmul(self, depth):
        a = self.pick(lambda u: u.shape == (4, 4))
        b = self.pick(lambda u: u.shape == (4, 4))
        if a is None:
            return self.s_unary(depth)
        e = self.rng.choice(MATMUL).format(a=a.name, b=b.name)
        bf = self.in_autocast and not self.in_autocast_off
        return self.add(e, (4, 4), bf16=bf or (a.bf16 and b.bf16))

    def s_reduce(self, depth):
        v = self.pick()
        s = v.shape
        opts = [("{v}.sum()", ()), ("{v}.mean()", ()), ("{v}.norm()", ())]
        if s:
            opts += [
                ("{v}.sum(0)", s[1:]),
                ("{v}.sum(0, keepdim=True)", (1, *s[1:])),
                ("{v}.amax(-1, keepdim=True)", (*s[:-1], 1)),
                ("{v}.logsumexp(-1, keepdim=True)", (*s[:-1], 1)),
            ]
            if s[0] >= 2:
                opts.append(("{v}.var(0)", s[1:]))
        e, shape = self.rng.choice(opts)
        return self.add(e.format(v=v.name), shape, bf16=v.bf16)

    def s_view(self, depth):
        v = self.pick(weights={"input": 2.0})
        e, shape = self.rng.choice(_views_for(v.shape))
        kind = "input_view" if v.kind in ("input", "input_view") else "inter_view"
        return self.add(e.format(v=v.name), shape, kind=kind, bf16=v.bf16, group=v.group)

    def operand(self, tshape, target=None, suffix=""):
        """An expression broadcastable to tshape (result shape tshape). A value that may
        share memory with the target (other than the target itself) is cloned: eager's
        result of an in-place op whose input partially overlaps its output depends on
        the kernel's iteration order."""
        o = self.pick(lambda u: _bcast(u.shape, tshape) == tshape)
        r = self.rng.random()
        if o is None or r < 0.12:
            u = self.pick()
            return f"{u.name}.sum()"
        if r < 0.2 and self.scalars:
            s = self.scalar(("float", "int"))
            if s:
                return s
        if target is not None and o.group is target.group and (o is not target or suffix):
            if o is target and suffix == ".t()" and target.dense:
                return o.name  # x.t().op_(x) on a dense x: eager's overlap check raises
            return f"{o.name}.clone()"
        return o.name

    def s_inplace(self, depth):
        rng = self.rng
        t = self.pick(
            weights={
                "input": 3.0,
                "input_view": 2.0,
                "inter_view": 1.5,
                "inter": 1.0,
                "detached": 1.0,
            }
        )
        suffix, tshape = rng.choice(_suffixes_for(t.shape))
        T = t.name + suffix
        r = rng.random()
        if r < 0.3:
            stmt = rng.choice(INPLACE_UNARY).format(T=T)
        elif r < 0.45:
            opnd = self.operand(tshape, t, suffix)
            forms = [f"torch.mul({opnd}, 2, out={T})", f"torch.sin({opnd}, out={T})"]
            if suffix.startswith("["):
                forms.append(f"{t.name}{suffix} = {opnd}")
            elif "[" not in t.name:
                forms.append(f"{t.name} += {opnd}")
            forms.append(f"{t.name}[{t.name} > 0] = 0.0")
            stmt = rng.choice(forms)
        else:
            opnd = self.operand(tshape, t, suffix)
            stmt = rng.choice(INPLACE_BINARY).format(T=T, O=opnd)
        lines = [stmt]
        if rng.random() < (0.5 if t.kind.startswith("input") else 0.3):
            lines = ["with torch.no_grad():", "    " + stmt]
        return lines

    def s_meta(self, depth):
        rng = self.rng
        v = self.pick(weights={"input": 3.0, "input_view": 1.5})
        s = v.shape
        opts = [("unsqueeze_(0)", (1, *s))]
        if len(s) <= 2:
            opts.append(("t_()", tuple(reversed(s))))
        if len(s) >= 2:
            opts.append(("transpose_(0, 1)", (s[1], s[0], *s[2:])))
        if len(s) >= 1:
            opts.append(("squeeze_(0)", s[1:] if s[0] == 1 else s))
        if s == (4, 4):
            opts += [
                ("as_strided_((4, 4), (1, 4))", (4, 4)),
                ("as_strided_((2, 2), (4, 1))", (2, 2)),
            ]
        op, shape = rng.choice(opts)
        v.shape = shape
        if "as_strided" in op:
            v.dense = False
        return [f"{v.name}.{op}"]

    def s_detach(self, depth):
        rng = self.rng
        v = self.pick(weights={"input": 2.0})
        r = rng.random()
        if r < 0.4:
            return self.add(
                f"{v.name}.detach()", v.shape, kind="detached", bf16=v.bf16, group=v.group
            )
        if r < 0.55:
            return [f"{v.name}.detach_()"]
        if r < 0.75:
            return self.add(
                f"{v.name}.detach().requires_grad_()",
                v.shape,
                kind="inter",
                bf16=v.bf16,
                group=v.group,
            )
        return [f"{v.name}.requires_grad_({rng.choice(['', 'False', 'True'])})"]

    def s_custom(self, depth):
        v = self.pick(weights={"input": 2.0})
        fn = self.w([("HalfGrad", 2), ("ViewOf", 1.5), ("DirtyMul", 1.5), ("SavedSquare", 1)])
        same = fn in ("HalfGrad", "DirtyMul")
        kind = "input_view" if fn == "ViewOf" and v.kind.startswith("input") else "inter"
        return self.add(
            f"{fn}.apply({v.name})",
            v.shape,
            kind=kind,
            bf16=v.bf16,
            cell=v.cell if same else None,
            group=None if fn == "SavedSquare" else v.group,
        )

    def s_block(self, depth):
        opts = [("no_grad", 3), ("enable_grad", 2), ("autocast_off", 1)]
        if self.autocast:
            opts.append(("autocast", 4))
        k = self.w(opts)
        header = {
            "no_grad": "with torch.no_grad():",
            "enable_grad": "with torch.enable_grad():",
            "autocast_off": 'with torch.autocast("cpu", enabled=False):',
            "autocast": 'with torch.autocast("cpu", dtype=torch.bfloat16):',
        }[k]
        saved = (self.in_autocast, self.in_autocast_off)
        if k == "autocast":
            self.in_autocast, self.in_autocast_off = True, False
        elif k == "autocast_off":
            self.in_autocast_off = True
        body = []
        if k in ("autocast", "autocast_off"):
            body += self.s_matmul(depth + 1)
        for _ in range(self.rng.randint(1, 2)):
            body += self.step(depth + 1)
        self.in_autocast, self.in_autocast_off = saved
        return [header] + ["    " + ln for ln in body]

    def s_multi(self, depth):
        v = self.pick(
            lambda u: (
                len(u.shape) >= 1 and u.shape[0] <= 4 and (u.shape[0] >= 2 or len(u.shape) >= 2)
            )
        )
        if v is None:
            return self.s_view(depth)
        s = v.shape
        opts = []
        if s[0] >= 2:
            opts.append(("unbind(0)", [s[1:]] * s[0]))
            opts.append(("split(2)", [(min(2, s[0] - i), *s[1:]) for i in range(0, s[0], 2)]))
        if s[-1] >= 2:
            c = -(-s[-1] // 2)
            opts.append(
                ("chunk(2, -1)", [(*s[:-1], min(c, s[-1] - i)) for i in range(0, s[-1], c)])
            )
        if not opts:
            return self.s_view(depth)
        op, shapes = self.rng.choice(opts)
        base = self.fresh("m")
        names = [f"{base}_{i}" for i in range(len(shapes))]
        kind = "input_view" if v.kind.startswith("input") else "inter_view"
        for n, sh in zip(names, shapes):
            self.pool.append(Val(n, [sh], kind, v.bf16, multi=True, group=v.group))
        lines = [f"{', '.join(names)}{',' if len(names) == 1 else ''} = {v.name}.{op}"]
        if self.rng.random() < 0.5:
            target = self.pool[-len(names) + self.rng.randrange(len(names))]
            st = self.rng.choice(["{T}.mul_(2)", "{T}.add_({O})", "{T}.zero_()"])
            st = st.format(T=target.name, O=self.operand(target.shape, target))
            lines.append(st)
        return lines

    def s_branch(self, depth):
        rng = self.rng
        conds = ["torch.is_grad_enabled()", f"{rng.choice(self.args)}.requires_grad"]
        b = self.scalar(("bool",))
        f = self.scalar(("float", "int"))
        if b:
            conds += [b, b]
        if f:
            conds.append(f"{f} > 1")
        cond = rng.choice(conds)
        if rng.random() < 0.6:
            v = self.pick()
            e1 = rng.choice(UNARY).replace("DT", self.dt).format(v=v.name)
            e2 = rng.choice(UNARY).replace("DT", self.dt).format(v=v.name)
            name = self.fresh()
            self.pool.append(Val(name, [v.shape], "inter", v.bf16, group=v.group))
            return [f"if {cond}:", f"    {name} = {e1}", "else:", f"    {name} = {e2}"]
        body = self.s_inplace(depth + 1)
        return [f"if {cond}:"] + ["    " + ln for ln in body]

    # ---- outputs -------------------------------------------------------------------------
    def gen_outputs(self):
        rng = self.rng
        outs: list[str] = []
        n = rng.randint(1, 4)
        while len(outs) < n:
            k = self.w(
                [
                    ("entry", 4),
                    ("input", 1.5),
                    ("view", 2),
                    ("same", 1 if outs else 0),
                    ("detach", 1),
                    ("none", 0.4),
                    ("int", 0.6),
                    ("views_of_one", 0.8),
                ]
            )
            if k == "entry":
                outs.append(self.pick(weights={"inter": 2.0, "inter_view": 1.5}).name)
            elif k == "input":
                outs.append(rng.choice(self.args))
            elif k == "view":
                v = self.pick()
                e, _ = rng.choice(_views_for(v.shape))
                outs.append(e.format(v=v.name))
            elif k == "same":
                outs.append(rng.choice(outs))
            elif k == "detach":
                outs.append(f"{self.pick().name}.detach()")
            elif k == "none":
                outs.append("None")
            elif k == "int":
                s = self.scalar(("int",))
                outs.append(s or rng.choice(["3", f"{self.pick().name}.dim()"]))
            else:
                v = self.pick()
                vs = _views_for(v.shape)
                for e, _ in rng.sample(vs, 2):
                    outs.append(e.format(v=v.name))
        if len(outs) == 1 and rng.random() < 0.3:
            return f"return {outs[0]}"
        return f"return ({', '.join(outs)}{',' if len(outs) == 1 else ''})"

    def gen_calls(self):
        rng = self.rng
        modes = [("grad", 6), ("no_grad", 1.2), ("inference_mode", 1.2)]
        if self.autocast:
            modes.append(("autocast", 4))
        calls = []
        for i in range(2):
            seed = self.seed * 2 + i + 1000
            rg = self.rg1 if i == 0 else self.rg2
            scal = tuple(s[2] if i == 0 else s[3] for s in self.scalars)
            pm = rng.randrange(4) if i == 0 and rng.random() < 0.25 else None
            calls.append(Call(seed, rg, self.w(modes), scal, pm))
        return calls


def generate(seed: int) -> Program:
    g = Gen(seed)
    g.gen_inputs()
    g.gen_scalars()
    body = []
    for _ in range(g.rng.randint(1, 7)):
        body += g.step()
    ret = g.gen_outputs()
    params = g.args + [s[0] for s in g.scalars]
    fn_src = (
        f"def f({', '.join(params)}):\n"
        + "".join("    " + ln + "\n" for ln in body)
        + "    "
        + ret
        + "\n"
    )
    calls = g.gen_calls()
    uses_autocast = g.autocast
    head = f"# fidelity program, seed {seed}\nDT = {g.dt}\n\n"
    calls_src = (
        "CALLS = [  # seed, requires_grad flags, call mode, scalars, post-call outs[i].mul_(2)\n"
    )
    for c in calls:
        calls_src += f"    dict(seed={c.seed}, rg={c.rg}, mode={c.mode!r}, scalars={c.scalars}, post_mutate={c.post_mutate}),\n"
    calls_src += "]\n"
    source = PRELUDE + "\n" + head + g.inputs_src + "\n\n" + fn_src + "\n\n" + calls_src
    return Program(
        seed=seed,
        dtype=g.dt,
        n_args=len(g.args),
        scalar_names=[s[0] for s in g.scalars],
        first_arg_plain=g.first_plain,
        inputs_src=g.inputs_src,
        fn_src=fn_src,
        calls=calls,
        uses_autocast=uses_autocast,
        source=source,
    )


def short_source(prog: Program) -> str:
    """The program without the prelude (the custom Functions are always the same)."""
    return prog.source[len(PRELUDE) :].strip() + "\n"


# ---------------------------------------------------------------------------------------
# Running and observing
# ---------------------------------------------------------------------------------------


class Untraceable(Exception):
    """symbolic_trace failed: the program is skipped for aot_module_simplified."""


def _mode(name):
    if name == "grad":
        return torch.enable_grad()
    if name == "no_grad":
        return torch.no_grad()
    if name == "inference_mode":
        return torch.inference_mode()
    if name == "autocast":
        return torch.autocast("cpu", dtype=torch.bfloat16)
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
        return ("raises", type(e).__name__)


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
            return T(t.detach().to("cpu", torch.float64).clone())
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
            or _safe(lambda w=w: w.is_leaf) is not True
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
                    and o.is_floating_point()
                )
            )
            is True
        ):
            gen = torch.Generator().manual_seed(7 + i)
            diff.append(o)
            cots.append(torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype))
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
                call = Call(call.seed, c0.rg, c0.mode, c0.scalars, call.post_mutate)
            _observe_call(obs, prog, runner, ns, ci, call)
    obs.info["warnings"] = [
        str(w.message).split("\n")[0][:120] for w in caught if "aotgrad" in str(w.message).lower()
    ]
    return obs


def _observe_call(obs, prog, runner, ns, ci, call):
    pre = f"c{ci}"
    args, watch = ns["make_inputs"](call.seed, call.rg)
    try:
        target, cargs, watch = runner.prepare(ci, args, watch, call.scalars, call.mode)
        before_dp = {n: _dp(w) for n, w in watch.items()}
        with _mode(call.mode):
            out = target(*cargs)
    except Exception as e:
        obs.add(f"{pre}.call.raise", "raise", _exc(e))
        return
    obs.add(f"{pre}.call.raise", "raise", None)
    kind, outs = _flat_outs(out)
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
    diff, cots = _cotangents(outs)
    if not diff:
        return
    try:
        torch.autograd.backward(diff, cots, retain_graph=True)
        obs.add(f"{pre}.bw1.raise", "raise", None)
    except Exception as e:
        obs.add(f"{pre}.bw1.raise", "raise", _exc(e))
        return
    _record_grads(obs, f"{pre}.bw1", watch, outs, "grad")
    try:
        torch.autograd.backward(diff, cots)
        obs.add(f"{pre}.bw2.raise", "raise", None)
    except Exception as e:
        obs.add(f"{pre}.bw2.raise", "raise", _exc(e))
        return
    _record_grads(obs, f"{pre}.bw2", watch, outs, "grad_second_backward")


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
        if x.shape != y.shape:
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
    "c0.bw1",
    "c0.bw2",
    "c1.call",
    "c1.post",
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
    return found


# Categories that are softer (reported separately): exception type, non-view strides,
# and differences Dynamo itself makes (torch.compile(backend="eager") shows the same).
SOFT = {"raise_type", "out_stride", "dynamo_itself"}


def is_soft(category: str) -> bool:
    return category.split(":")[0] in SOFT


@dataclass
class Result:
    seed: int
    entry: str
    status: str  # ok | mismatch | refusal | eager_raises_ok | untraceable | crash
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
            "  findings by category (programs; soft: raise_type, out_stride, dynamo_itself:*):"
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
    bad = [r["seed"] for r in results if r["status"] in ("mismatch", "refusal", "crash", "hang")]
    if bad:
        out.append(f"  failing seeds ({len(bad)}): {bad[:60]}{' ...' if len(bad) > 60 else ''}")
    crashes = [r for r in results if r["status"] in ("crash", "hang")]
    for r in crashes[:10]:
        out.append(f"  {r['status']} seed {r['seed']}: {r['note'][:200]}")
    return "\n".join(out)


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
