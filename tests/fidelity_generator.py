"""The fidelity program generator: one integer seed (``random.Random(seed)``) → a
program as Python source: a ``make_inputs(seed, rg)`` that builds the tensor inputs
(leaves, ``leaf.clone()`` non-leaves, tensors without grad, one tensor passed twice,
overlapping and disjoint views of one base (one of them sometimes made to require
grad by the caller), transposed inputs, 0-dim inputs), a function
``f(x0, ..., s0, ...)`` (elementwise / reduction / matmul ops, in-place writes to inputs,
views and intermediates, metadata mutations, detach, custom autograd Functions,
grad-mode and autocast blocks, multi-output views, Python branches) and two calls (other
values, other ``requires_grad`` flags, a call mode: grad, ``no_grad``,
``inference_mode``, ``autocast``; some calls run the function twice on the same inputs
before one backward through both results; some write an input between the call and the
backward). ``tests/fidelity_vocabulary_extra.py`` adds, each from its own stream,
complex tensors, a momentum float, a running buffer and the caller's ``.data`` writes;
``tests/fidelity_vocabulary_hooks.py`` tensor hooks the function registers and a
second-order backward (a gradient penalty).
``print(program.source)`` is the reproducer.
``tests/fidelity_programs.py`` runs and compares them.
"""

from __future__ import annotations

import random

from fidelity_program_types import Call, Program
from fidelity_vocabulary import (
    BINARY,
    INPLACE_BINARY,
    INPLACE_UNARY,
    MATMUL,
    PRELUDE,
    UNARY,
    Val,
    bcast,
    suffixes_for,
    views_for,
)
from fidelity_vocabulary_extra import Extra, backward_how, caller_write
from fidelity_vocabulary_hooks import Hooks, create_graph


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
        self.extra = Extra(self)  # vocabulary drawn from its own streams
        self.hooks = Hooks(self)

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
                # multi-output views (split/chunk/unbind) and views made under no_grad
                # (nodes autograd cannot rebuild once written); own stream, as below
                multi = random.Random(self.seed * 43 + i).random()
                if vk in ("disjoint", "cols") and multi < 0.4:
                    lines += self._multi_output_input_views(x, y, b, vk, multi)
                elif vk == "overlap":
                    lines.append(f"{x}, {y} = {b}[0:4], {b}[2:6]  # overlapping views")
                elif vk == "disjoint":
                    lines.append(f"{x}, {y} = {b}[:4], {b}[4:]  # disjoint views")
                elif vk == "cols":
                    lines.append(f"{x}, {y} = {b}[:, :4], {b}[:, 4:]  # disjoint column views")
                else:
                    lines.append(f"{x}, {y} = {b}[0:4], {b}[2:6].t()  # overlapping views")
                # the caller makes one view require grad (a leaf where the base does not
                # require grad); drawn from its own stream: earlier seeds keep their program
                if random.Random(self.seed * 41 + i).random() < 0.25:
                    lines.append(f"{y}.requires_grad_()  # a view made to require grad")
                v = add_arg(x)
                add_arg(y, group=v.group)
        self.extra.inputs(lines, args, watch, rg1, rg2)
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

    @staticmethod
    def _multi_output_input_views(x, y, b, vk, r):
        """Two disjoint input views of ``b`` whose autograd nodes eager cannot rebuild once
        they are written: outputs of one split/chunk/unbind, or slices made under no_grad."""
        dim = ", 1" if vk == "cols" else ""
        if r < 0.1:
            return [
                "with torch.no_grad():",
                f"    {x}, {y} = {b}.chunk(2{dim})  # views made under no_grad",
            ]
        if r < 0.2 or vk == "cols":
            return [f"{x}, {y} = {b}.split(4{dim})  # multi-output views"]
        if r < 0.3:
            return [f"{x}, {y} = {b}.chunk(2)  # multi-output views"]
        return [f"{x}, {y} = {b}.view(2, 4, 4).unbind(0)  # multi-output views"]

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
        b = self.pick(lambda u: bcast(u.shape, a.shape) is not None)
        if self.rng.random() < 0.15 and a.shape and a.shape == b.shape:
            e = self.rng.choice(["torch.cat([{a}, {b}])", "torch.stack([{a}, {b}])"]).format(
                a=a.name, b=b.name
            )
            s = (a.shape[0] * 2, *a.shape[1:]) if "cat" in e else (2, *a.shape)
            return self.add(e, s, bf16=a.bf16 and b.bf16)
        e = self.rng.choice(BINARY).format(a=a.name, b=b.name)
        return self.add(e, bcast(a.shape, b.shape), bf16=a.bf16 and b.bf16)

    def s_matmul(self, depth):
        a = self.pick(lambda u: u.shape == (4, 4))
        b = self.pick(lambda u: u.shape == (4, 4))
        if a is None:
            return self.s_unary(depth)
        e = self.rng.choice(MATMUL).format(a=a.name, b=b.name)
        bf = self.in_autocast and not self.in_autocast_off
        lines = self.add(e, (4, 4), bf16=bf or (a.bf16 and b.bf16))
        if self.autocast:
            lines += self._weight_used_again(b, bf)
        return lines

    def _weight_used_again(self, w, bf):
        """Under autocast eager casts a float32 leaf once per region and reuses the cast:
        a weight used twice shares one cast (and sums its gradients in bfloat16). Drawn
        from its own stream, so that the programs of earlier seeds keep their statements."""
        own = random.Random(self.seed * 47 + self.n)
        if own.random() >= 0.5:
            return []
        cands = [u for u in self.pool if u.shape == (4, 4)]
        inputs = [u for u in cands if u.kind == "input"]
        if inputs and own.random() < 0.7:
            w = own.choice(inputs)
        a = own.choice(cands)
        e = own.choice(
            ["{a} @ {w}", "torch.nn.functional.linear({a}, {w})", "torch.mm({w}, {a})", "{w} @ {w}"]
        )
        e = e.format(a=a.name, w=w.name)
        return self.add(f"{e} + {a.name} @ {w.name}  # a weight used twice", (4, 4), bf16=bf)

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
        e, shape = self.rng.choice(views_for(v.shape))
        kind = "input_view" if v.kind in ("input", "input_view") else "inter_view"
        return self.add(e.format(v=v.name), shape, kind=kind, bf16=v.bf16, group=v.group)

    def operand(self, tshape, target=None, suffix=""):
        """An expression broadcastable to tshape (result shape tshape). A value that may
        share memory with the target (other than the target itself) is cloned: eager's
        result of an in-place op whose input partially overlaps its output depends on
        the kernel's iteration order."""
        o = self.pick(lambda u: bcast(u.shape, tshape) == tshape)
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
        suffix, tshape = rng.choice(suffixes_for(t.shape))
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

    def autograd_api_step(self):
        """Sometimes (its own stream: other seeds keep their programs) a last statement of
        autograd's API: ``retain_grad()``, a gradient hook, ``.data`` read or written, a
        non-reentrant ``checkpoint``."""
        own = random.Random(self.seed * 53 + 7)
        if own.random() >= 0.15 or not self.pool:
            return []
        v = own.choice(self.pool)
        k = own.choice(["retain_grad", "hook", "data_read", "data_write", "checkpoint"])
        if k == "retain_grad":
            return [f"{v.name}.retain_grad()"]
        if k == "hook":
            return [f"{v.name}.register_hook(lambda g: g * 2)  # a gradient hook"]
        if k == "data_write":
            return [f"{v.name}.data.mul_(2)  # a write through .data"]
        if k == "data_read":
            return self.add(f"{v.name}.data * 2", v.shape, bf16=v.bf16)
        return self.add(
            f"torch.utils.checkpoint.checkpoint(lambda a: a.sin() * a, {v.name}, use_reentrant=False)",
            v.shape,
            bf16=v.bf16,
        )

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
                e, _ = rng.choice(views_for(v.shape))
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
                vs = views_for(v.shape)
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
            mode = self.w(modes)
            twice = mode != "inference_mode" and random.Random(seed * 31 + 5).random() < 0.2
            own = random.Random(seed * 37 + 11)
            wi = own.randrange(len(self.args)) if own.random() < 0.15 else None
            cw = caller_write(seed, len(self.args))
            how = backward_how(seed) or ("create_graph" if create_graph(seed) else None)
            calls.append(Call(seed, rg, mode, scal, pm, twice, wi, cw, how))
        return calls


def generate(seed: int) -> Program:
    g = Gen(seed)
    g.gen_inputs()
    g.extra.after_inputs()
    g.gen_scalars()
    body = []
    g.extra.plan(n_steps := g.rng.randint(1, 7))
    g.hooks.plan(n_steps)
    for k in range(n_steps):
        body += g.step() + g.extra.after_step(k) + g.hooks.after_step(k)
    body += g.autograd_api_step()
    ret = g.extra.finish(g.gen_outputs())
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
        twice = ", twice=True" if c.twice else ""
        twice += f", write_input={c.write_input}" if c.write_input is not None else ""
        twice += f", caller_write={c.caller_write!r}" if c.caller_write else ""
        twice += f", backward_how={c.backward_how!r}" if c.backward_how else ""
        calls_src += f"    dict(seed={c.seed}, rg={c.rg}, mode={c.mode!r}, scalars={c.scalars}, post_mutate={c.post_mutate}{twice}),\n"
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
