"""Vocabulary the fidelity generator (``tests/fidelity_generator.py``) draws each from its
own random stream, so that a program whose seed fires none of it keeps its text:

- complex tensors (``Extra.complex``, ~12% of the programs without autocast): a complex
  input (``complex128`` leaf, ``view_as_complex`` of a real ``(..., 2)`` leaf, or a
  ``view(torch.complex128)`` dtype view), complex views of real values
  (``view_as_complex``, ``.view(torch.complex128)``) and real views of complex ones
  (``view_as_real``, ``.real``, ``.imag``, ``.view(torch.float64)``), complex arithmetic,
  writes through those views, ``abs()`` back to real, a complex operand of a real
  in-place op (eager: "result type ComplexDouble can't be cast"), complex outputs;
- a momentum-like Python float ``m0`` that changes between the calls (~10%): arithmetic,
  ``clamp(min=m0)``, ``lerp``, ``alpha=m0``, in-place ``mul_(m0)`` and a branch
  ``if m0 > 0.5:`` (Dynamo specialises on it, or not);
- a running buffer (~25% of the programs whose ``x0`` is a plain root: ~11%): ``x0``
  (no grad: a module buffer in aot_module) updated in place under ``no_grad`` with the
  momentum ``m0``, as BatchNorm updates its running statistics;
- the caller's writes past autograd between the call and the backward (``Call.caller_write``,
  ~6% of the calls): ``.data.mul_``, ``.data.copy_``, ``.data =``, ``detach().add_`` on
  an input or an output (``tests/fidelity_observe.py`` applies them).
"""

from __future__ import annotations

import random

from fidelity_vocabulary import Val, bcast

#: how the caller writes a tensor past autograd (``fidelity_observe._caller_write``)
CALLER_WRITES = ("data.mul_", "data.copy_", "data=", "detach.add_")


def caller_write(call_seed: int, n_args: int):
    """("x" | "out", index, how) for one call, or None; its own stream."""
    own = random.Random(call_seed * 73 + 29)
    if own.random() >= 0.06:
        return None
    where = "x" if own.random() < 0.6 else "out"
    i = own.randrange(n_args) if where == "x" else own.randrange(4)
    return (where, i, own.choice(CALLER_WRITES))


def backward_how(call_seed: int):
    """How the caller runs one call's backward (``Call.backward_how``); its own stream."""
    x = random.Random(call_seed * 83 + 17).random()
    return "per_output" if x < 0.12 else "autograd_grad" if x < 0.24 else None


def _w(rng, items):
    """Weighted choice from [(item, weight)] with ``rng``."""
    items = [(i, w) for i, w in items if w > 0]
    x = rng.random() * sum(w for _, w in items)
    for i, w in items:
        x -= w
        if x <= 0:
            return i
    return items[-1][0]


class Extra:
    """The extra vocabulary of one program; ``Gen`` calls its hooks."""

    def __init__(self, g):
        self.g = g
        self.crng = random.Random(g.seed * 61 + 17)  # complex
        self.mrng = random.Random(g.seed * 67 + 19)  # the momentum scalar
        self.brng = random.Random(g.seed * 71 + 23)  # the running buffer
        self.complex = self.crng.random() < 0.12 and not g.autocast
        self.momentum = self.mrng.random() < 0.1
        self.buffer = self.brng.random() < 0.25
        self.cpool: list[Val] = []  # complex values (never in Gen.pool)
        self.at: dict = {}  # step index -> statements' makers
        self.scalars: list = []

    # ---- hooks ---------------------------------------------------------------------------
    def inputs(self, lines, args, watch, rg1, rg2):
        """Sometimes a complex input (its own root), after the others."""
        own = self.crng
        if not self.complex or own.random() >= 0.6:
            return
        k = len(rg1)
        rg1.append(own.random() < 0.7)
        rg2.append(rg1[-1] if own.random() < 0.5 else not rg1[-1])
        x = f"x{len(args)}"
        form = own.choice(["randn", "view_as_complex", "dtype_view"])
        if form == "randn":
            lines.append(
                f"{x} = torch.randn(4, 4, generator=g, dtype=torch.complex128).requires_grad_(rg[{k}])"
            )
        else:
            shape, e = ("4, 4, 2", "torch.view_as_complex(l{k})")
            if form == "dtype_view":
                shape, e = ("4, 8", "l{k}.view(torch.complex128)")
            lines.append(f"l{k} = r({shape}).requires_grad_(rg[{k}])")
            lines.append(f"{x} = {e.format(k=k)}  # a complex input")
            watch.append(f"l{k}")
        args.append(x)
        watch.append(x)
        self.cpool.append(Val(x, [(4, 4)], "input"))

    def after_inputs(self):
        """The running buffer needs a plain ``x0``: it then never requires grad."""
        g = self.g
        self.buffer = self.buffer and g.first_plain
        if self.buffer:
            g.rg1 = (False, *g.rg1[1:])
            g.rg2 = (False, *g.rg2[1:])

    def plan(self, n):
        """Where (after which of the ``n`` steps) the extra statements go."""
        if self.complex:
            for _ in range(self.crng.choice([1, 1, 2])):
                self.at.setdefault(self.crng.randrange(n), []).append(self.complex_segment)
        if self.momentum or self.buffer:
            a = self.mrng.choice([0.1, 0.3, 0.9])
            b = a if self.mrng.random() < 0.3 else self.mrng.choice([0.1, 0.6, 0.7])
            self.scalars.append(("m0", "float", a, b))
        if self.momentum:
            for _ in range(self.mrng.choice([1, 2])):
                self.at.setdefault(self.mrng.randrange(n), []).append(self.momentum_step)
        if self.buffer:
            self.at.setdefault(self.brng.randrange(n), []).append(self.buffer_update)

    def after_step(self, k):
        out = []
        for make in self.at.get(k, []):
            out += make()
        return out

    def finish(self, ret):
        """The extra scalar joins the parameters; sometimes a complex output."""
        self.g.scalars += self.scalars
        if not self.cpool or self.crng.random() >= 0.6:
            return ret
        c = self.crng.choice(self.cpool).name
        e = self.crng.choice(["{c}", "{c}", "torch.view_as_real({c})", "{c}.conj()"])
        e = e.format(c=c)
        body = ret[len("return ") :]
        if body.startswith("(") and body.endswith(")"):
            return f"return {body[:-1].rstrip(',')}, {e})"
        return f"return ({body}, {e})"

    # ---- complex ----------------------------------------------------------------------------
    def _cadd(self, e, shape, group=None, kind="inter"):
        name = self.g.fresh()
        self.cpool.append(Val(name, [shape], kind, group=group))
        return [f"{name} = {e}"]

    def _cpick(self, pred=lambda c: True):
        cands = [c for c in self.cpool if pred(c)]
        return self.crng.choice(cands) if cands else None

    def complex_segment(self):
        lines = []
        if not self.cpool or self.crng.random() < 0.3:
            lines += self._to_complex()
        for _ in range(self.crng.randint(1, 3)):
            k = _w(
                self.crng,
                [("unary", 3), ("binary", 1.5), ("inplace", 2), ("back", 3), ("bad", 0.5)],
            )
            lines += getattr(self, "_c_" + k)()
        return lines

    def _to_complex(self):
        v = self.crng.choice(self.g.pool)
        n, s = v.name, v.shape
        opts = [
            (f"torch.complex({n}, {n}.cos())", s, None),
            (f"{n} * (1 + 1j)", s, None),
            (f"torch.polar({n}.abs(), {n})", s, None),
        ]
        if s and s[-1] % 2 == 0:
            h = (*s[:-1], s[-1] // 2)
            dims = ", ".join(str(d) for d in (*h, 2))
            opts += [
                (f"torch.view_as_complex({n}.reshape({dims}))", h, v.group),
                (f"{n}.view(torch.complex128)  # a complex dtype view", h, v.group),
                (f"{n}.view(torch.complex128)  # a complex dtype view", h, v.group),
            ]
        e, shape, group = self.crng.choice(opts)
        view = "input_view" if v.kind.startswith("input") else "inter_view"
        return self._cadd(e, shape, group, view if group else "inter")

    def _c_unary(self):
        c = self.crng.choice(self.cpool)
        s = c.shape
        opts = [
            ("{c}.conj()", s, c.group),
            ("{c}.exp()", s, None),
            ("{c} * {c}", s, None),
            ("{c} * (0.5 - 1j)", s, None),
            ("{c}.sin()", s, None),
            ("{c} / ({c}.abs() + 1)", s, None),
            ("{c}.conj_physical()", s, None),
            ("{c}.sum()", (), None),
        ]
        if len(s) == 2:
            opts.append(("{c} @ {c}.mH", (s[0], s[0]), None))
        e, shape, group = self.crng.choice(opts)
        return self._cadd(e.format(c=c.name), shape, group)

    def _c_binary(self):
        a = self.crng.choice(self.cpool)
        if self.crng.random() < 0.4:  # with a real value
            b = [v for v in self.g.pool if bcast(v.shape, a.shape) is not None]
            b = self.crng.choice(b or [a])
        else:
            b = self._cpick(lambda c: bcast(c.shape, a.shape) is not None)
        e = self.crng.choice(
            ["{a} + {b}", "{a} * {b}", "{a} - {b}.conj()", "{b} / (1 + {a}.abs())"]
        )
        return self._cadd(e.format(a=a.name, b=b.name), bcast(a.shape, b.shape))

    def _c_inplace(self):
        c = self.crng.choice(self.cpool)
        o = self._cpick(lambda u: bcast(u.shape, c.shape) == c.shape)
        on = "(1 - 2j)" if o is None else o.name
        if o is not None and o.group is c.group and o is not c:
            on = f"{o.name}.clone()"
        stmt = self.crng.choice(
            [
                "{c}.mul_(1j)",
                "{c}.real.mul_(2)  # a write through .real",
                "{c}.imag.zero_()  # a write through .imag",
                "torch.view_as_real({c}).add_(1)  # a write through view_as_real",
                "{c}.conj().mul_(2)",
                "{c}.add_({o})",
            ]
        ).format(c=c.name, o=on)
        if self.crng.random() < 0.4:
            return ["with torch.no_grad():", "    " + stmt]
        return [stmt]

    def _c_back(self):
        c = self.crng.choice(self.cpool)
        s, view = c.shape, "input_view" if c.kind.startswith("input") else "inter_view"
        opts = [
            ("{c}.abs()", s, "inter"),
            ("{c}.angle()", s, "inter"),
            ("({c} * {c}.conj()).real", s, "inter"),
            ("torch.view_as_real({c})", (*s, 2), view),
            ("{c}.real", s, view),
            ("{c}.imag", s, view),
        ]
        if s:
            opts.append(("{c}.view(torch.float64)", (*s[:-1], s[-1] * 2), view))
        e, shape, kind = self.crng.choice(opts)
        group = c.group if kind != "inter" else None
        return self.g.add(e.format(c=c.name), shape, kind=kind, group=group)

    def _c_bad(self):
        """A real value written in place with a complex operand: eager raises (or, for
        copy_, discards the imaginary part)."""
        c = self.crng.choice(self.cpool)
        v = self.crng.choice(self.g.pool)
        forms = ["{v}.add_({c}.sum())", "{v}.mul_(1j)"]
        if bcast(c.shape, v.shape) == v.shape:
            forms += ["{v}.mul_({c})", "{v}.copy_({c})"]
        return [self.crng.choice(forms).format(v=v.name, c=c.name)]

    # ---- the momentum scalar and the running buffer -----------------------------------------
    def momentum_step(self):
        own, g = self.mrng, self.g
        v = own.choice(g.pool)
        w = own.choice([u for u in g.pool if bcast(u.shape, v.shape) == v.shape])
        wn = f"{w.name}.clone()" if w.group is v.group and w is not v else w.name
        k = own.choice(["expr", "expr", "expr", "branch", "inplace"])
        if k == "inplace":
            stmt = own.choice(["{v}.mul_(m0)", "{v}.add_({w}, alpha=m0)", "{v}.lerp_({w}, m0)"])
            stmt = stmt.format(v=v.name, w=wn)
            return ["with torch.no_grad():", "    " + stmt] if own.random() < 0.4 else [stmt]
        if k == "branch":
            name = g.fresh()
            g.pool.append(Val(name, [v.shape], "inter", v.bf16))
            return [
                "if m0 > 0.5:",
                f"    {name} = {v.name}.sin()",
                "else:",
                f"    {name} = {v.name} * m0",
            ]
        e = own.choice(
            [
                "{v} * m0",
                "{v} * (1 - m0) + {w} * m0",
                "torch.clamp({v}, min=m0)",
                "torch.lerp({v}, {w}, m0)",
                "torch.nn.functional.leaky_relu({v}, m0)",
                "{v}.add({w}, alpha=m0)",
                "{v} * max(m0, 0.2)",
                "torch.full_like({v}, m0)",
            ]
        )
        return g.add(e.format(v=v.name, w=w.name), v.shape, bf16=v.bf16)

    def buffer_update(self):
        own, g = self.brng, self.g
        b = g.pool[0]  # x0
        v = own.choice([u for u in g.pool if u is not b] or [b])
        if bcast(v.shape, b.shape) == b.shape:
            upd = own.choice(["x0.lerp_({v}, m0)", "x0.mul_(1 - m0).add_({v}, alpha=m0)"])
        else:
            upd = "x0.mul_(1 - m0).add_({v}.mean() * m0)"
        lines = [
            "with torch.no_grad():  # a running buffer updated in place",
            "    " + upd.format(v=v.name),
        ]
        if own.random() < 0.5:
            u = own.choice(g.pool)
            lines += g.add(f"{u.name} - x0.mean()", u.shape, bf16=u.bf16)
        return lines
