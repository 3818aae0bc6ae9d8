"""Blind programs: complex numbers and dtype-reinterpreting views. A compiled function or
module works with complex tensors (complex64/complex128 leaves and their clones, real
``(..., 2)`` inputs read through ``torch.view_as_complex``, complex inputs read through
``torch.view_as_real``, ``.real`` / ``.imag``, the lazy ``conj()`` bit, ``conj_physical``,
``.view(dtype)`` reinterpretations such as complex64 -> float32 or float64 -> int64,
non-contiguous complex inputs, views of a caller's base), writes in place through those
views (``view_as_real(z)[..., 0].mul_(2)``, ``z.real.add_(1)``, ``z.imag.zero_()``,
``view_as_complex(x).mul_(1j)``, writes under ``torch.no_grad``, ``as_strided`` /
``as_strided_`` of real views), registers hooks on such views, returns the views
themselves (outputs aliasing inputs, several views of one base) or computes with
``abs``, ``angle``, ``sin``, ``z * z.conj()``, ``torch.fft`` and complex matmul; the
caller then observes everything eager exposes: the outputs' values, dtype, shape,
strides, conjugate and negative bits, autograd flags and ``_base``; the inputs' values and
versions after the call; gradients of real losses by ``autograd.grad`` and ``backward``;
``retain_grad``; hooks registered after the call; ``retain_graph`` with a second
backward; second calls with fresh inputs or other ``requires_grad`` flags; calls under
``torch.no_grad`` / ``torch.inference_mode``; and the errors eager raises.

Written in round 63 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_complex_views`` runs each under eager and under each entry point and
compares the recordings.

The harness snapshots a complex tensor through ``view_as_real``, which refuses a tensor
whose conjugate bit is set; such tensors (and gradients, which may carry the bit) are
recorded here through ``ob`` / ``rs``: their flags as read, their values resolved.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from blind_fed_outputs_harness import L, W, init_params, registry, snap

P, prog = registry()


ag = torch.autograd
f64, f32 = torch.float64, torch.float32
c128, c64 = torch.complex128, torch.complex64


# =====================================================================
# helpers
# =====================================================================
def CL(*shape, seed=0, dtype=c128, rg=True):
    """A seeded complex leaf (real and imaginary parts drawn by ``L``)."""
    re = L(*shape, seed=seed, rg=False)
    im = L(*shape, seed=seed + 50, rg=False)
    z = torch.complex(re, im).to(dtype)
    if rg:
        z.requires_grad_()
    return z


def rs(o):
    """``o`` with each tensor's conjugate / negative bit resolved (for snapshots)."""
    if isinstance(o, torch.Tensor):
        if o.is_conj() or o.is_neg():
            with torch.no_grad():
                return o.detach().resolve_conj().resolve_neg()
        return o
    if isinstance(o, (list, tuple)):
        return type(o)(rs(x) for x in o)
    return o


def ob(R, name, t):
    """Record tensor ``t`` as the caller sees it: its flags (conj, neg, ``_base``), its
    metadata and its values (resolved where a bit is set)."""
    R.rec(name + ".is_conj", t.is_conj())
    R.rec(name + ".is_neg", t.is_neg())
    R.rec(name + ".has_base", t._base is not None)
    if t.is_conj() or t.is_neg():
        R.rec(
            name + ".meta",
            dict(
                dtype=str(t.dtype),
                shape=list(t.shape),
                stride=list(t.stride()),
                requires_grad=t.requires_grad,
                is_leaf=t.is_leaf,
                grad_fn_none=t.grad_fn is None,
            ),
        )
        R.rec(name, rs(t))
    else:
        R.rec(name, t)


def ver(R, name, t):
    """Record an input's values and version after the call."""
    ob(R, name, t)
    R.rec(name + ".version", t._version)


def GR(R, name, t):
    """``R.grad`` with the gradient's bits resolved (a complex gradient may carry one)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = t.grad
    R.rec("grad." + name, rs(g))
    R.rec("grad." + name + ".warn_nonleaf", any("not a leaf" in str(x.message) for x in w))


def grads(R, **ts):
    for k, t in ts.items():
        GR(R, k, t)


def hk(R, tag, ret=None):
    """A hook recording each gradient it sees (bits resolved) under ``tag``."""
    lst = R.hooks.setdefault(tag, [])

    def h(g):
        lst.append(snap(rs(g)))
        lst.append({"is_conj": g.is_conj()})
        return ret(g) if ret is not None else None

    return h


def rl(t):
    """A real, weighted loss of ``t`` (complex through ``view_as_real``)."""
    if t.is_complex():
        t = torch.view_as_real(t.resolve_conj())
    return (t * W(t)).sum()


def agr(R, name, outs, ins, **kw):
    """``R.step(name)``: ``autograd.grad`` of ``outs`` with respect to ``ins``, resolved."""
    R.step(name, lambda: rs(ag.grad(outs, ins, **kw)))


def cnt(R, tag):
    return len(R.hooks.get(tag, []))


def init_(m, seed=0):
    return init_params(m, seed, offset=630)


# =====================================================================
# functional complex math on complex leaves and clones
# =====================================================================
@prog()
def abs_of_complex_leaf(C, R):
    g = C(lambda z: z.abs() * 2)
    z = CL(2, 3, seed=1)
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", out.sum(), [z])


@prog()
def angle_and_abs_two_outputs(C, R):
    def f(z):
        return z.angle(), z.abs().log()

    g = C(f)
    leaf = CL(4, seed=2)
    z = leaf.clone()
    a, m = g(z)
    ob(R, "a", a)
    ob(R, "m", m)
    agr(R, "g", [rl(a), m.sum()], [leaf, z])


@prog()
def sin_complex_view_as_real_loss(C, R):
    g = C(lambda z: z.sin())
    z = CL(3, 2, seed=3)
    out = g(z)
    ob(R, "out", out)
    torch.view_as_real(out).sum().backward()
    grads(R, z=z)


@prog()
def z_times_conj_real(C, R):
    g = C(lambda z: (z * z.conj()).real)
    z = CL(5, seed=4)
    out = g(z)
    ob(R, "out", out)
    out.retain_grad()
    rl(out).backward()
    grads(R, out=out, z=z)


@prog()
def complex64_exp_times_weight(C, R):
    def f(z, w):
        return (z * w).exp()

    g = C(f)
    z = CL(2, 2, seed=5, dtype=c64)
    w = CL(2, 2, seed=6, dtype=c64)
    out = g(z, w)
    ob(R, "out", out)
    agr(R, "g", (out * w.detach()).real.sum(), [z, w])


@prog()
def complex_matmul(C, R):
    def f(a, b):
        return a @ b

    g = C(f)
    a = CL(2, 3, seed=7)
    b = CL(3, 2, seed=8)
    out = g(a, b)
    ob(R, "out", out)
    agr(R, "g", out.abs().sum(), [a, b])


@prog()
def fft_abs_grad(C, R):
    g = C(lambda z: torch.fft.fft(z).abs())
    z = CL(6, seed=9)
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [z])


@prog()
def ifft_of_scaled_clone(C, R):
    def f(z):
        return torch.fft.ifft(z * 2, norm="ortho")

    g = C(f)
    leaf = CL(2, 4, seed=10)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    out.retain_grad()
    rl(out).backward()
    grads(R, out=out, leaf=leaf)


@prog()
def rfft_of_real_input(C, R):
    g = C(lambda x: torch.fft.rfft(x))
    x = L(8, seed=11)
    out = g(x)
    ob(R, "out", out)
    agr(R, "g", rl(out), [x])


@prog()
def real_times_complex_promotes(C, R):
    def f(x, z):
        return x * z + x.sin()

    g = C(f)
    x = L(3, seed=12)
    z = CL(3, seed=13)
    out = g(x, z)
    ob(R, "out", out)
    agr(R, "g", (out * out.conj()).real.sum(), [x, z])


@prog()
def complex128_to_complex64(C, R):
    g = C(lambda z: z.to(c64) * (1 - 2j))
    z = CL(4, seed=14)
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [z])


@prog()
def polar_from_real_leaves(C, R):
    def f(r, th):
        return torch.polar(r.abs() + 0.1, th)

    g = C(f)
    r, th = L(5, seed=15), L(5, seed=16)
    out = g(r, th)
    ob(R, "out", out)
    agr(R, "g", rl(out), [r, th])


# =====================================================================
# real inputs read as complex, complex inputs read as real
# =====================================================================
@prog()
def view_as_complex_of_real_input(C, R):
    def f(x):
        return torch.view_as_complex(x) * (1 + 2j)

    g = C(f)
    x = L(3, 2, seed=17)
    out = g(x)
    ob(R, "out", out)
    agr(R, "g", out.abs().sum(), [x])


@prog()
def view_as_complex_returned_alias(C, R):
    g = C(lambda x: torch.view_as_complex(x))
    leaf = L(2, 3, 2, seed=18)
    x = leaf.clone()
    out = g(x)
    ob(R, "out", out)
    R.rec("base_is_x", out._base is x)
    R.rec("shares", out.data_ptr() == x.data_ptr())
    agr(R, "g", rl(out), [leaf, x])


@prog()
def view_as_real_returned_alias(C, R):
    g = C(lambda z: torch.view_as_real(z))
    leaf = CL(3, seed=19)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    R.rec("base_is_z", out._base is z)
    out.retain_grad()
    rl(out).backward()
    grads(R, out=out, leaf=leaf)


@prog()
def real_and_imag_returned(C, R):
    def f(z):
        return z.real, z.imag

    g = C(f)
    leaf = CL(2, 3, seed=20)
    z = leaf.clone()
    re, im = g(z)
    ob(R, "re", re)
    ob(R, "im", im)
    R.rec("bases", (re._base is z, im._base is z))
    agr(R, "g", [rl(re), (im * 3).sum()], [leaf, z])


@prog()
def several_views_of_one_base(C, R):
    def f(z):
        return torch.view_as_real(z), z.real, z[1:], z.imag * 2

    g = C(f)
    leaf = CL(3, seed=21)
    z = leaf.clone()
    outs = g(z)
    for i, o in enumerate(outs):
        ob(R, f"o{i}", o)
    agr(R, "g", [rl(o) for o in outs], [leaf])


@prog()
def real_view_of_complex_leaf_input(C, R):
    """A real view of a complex leaf is the input."""

    def f(x):
        return x.pow(2).sum(-1)

    g = C(f)
    leaf = CL(4, seed=22)
    x = torch.view_as_real(leaf)
    out = g(x)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf, x])


@prog()
def real_attr_input_noncontiguous(C, R):
    def f(x):
        return x * 3 + 1

    g = C(f)
    leaf = CL(2, 3, seed=23)
    x = leaf.real
    R.rec("x_stride", list(x.stride()))
    out = g(x)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def noncontiguous_complex_input(C, R):
    g = C(lambda z: z.sin().abs() + z.angle())
    leaf = CL(3, 4, seed=24)
    z = leaf.clone().t()
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def strided_complex_slice_input(C, R):
    g = C(lambda z: torch.view_as_real(z * 1j))
    leaf = CL(6, seed=25)
    z = leaf[::2]
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


# =====================================================================
# conj bits
# =====================================================================
@prog()
def conj_returned_lazy_bit(C, R):
    g = C(lambda z: z.conj())
    leaf = CL(3, seed=26)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    R.rec("base_is_z", out._base is z)
    agr(R, "g", rl(out), [leaf])


@prog()
def conj_physical_returned(C, R):
    g = C(lambda z: z.conj_physical())
    z = CL(3, seed=27)
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [z])


@prog()
def conj_input_math(C, R):
    g = C(lambda z: z * 2 + z.abs())
    leaf = CL(4, seed=28)
    zc = leaf.conj()
    out = g(zc)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def conj_input_view_returned(C, R):
    g = C(lambda z: z[1:])
    leaf = CL(4, seed=29)
    zc = leaf.clone().conj()
    out = g(zc)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def imag_of_conj_is_neg(C, R):
    g = C(lambda z: z.conj().imag)
    leaf = CL(3, seed=30)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def conj_flag_changes_between_calls(C, R):
    g = C(lambda z: z * (2 + 1j))
    a = CL(3, seed=31)
    o1 = g(a)
    ob(R, "o1", o1)
    b = CL(3, seed=32)
    o2 = g(b.conj())
    ob(R, "o2", o2)
    o3 = g(b.conj().resolve_conj())
    ob(R, "o3", o3)
    agr(R, "g", [rl(o1), rl(o2), rl(o3)], [a, b])


@prog()
def write_into_conj_input(C, R):
    def f(z):
        z.mul_(2j)
        return z.abs()

    g = C(f)
    leaf = CL(3, seed=33)
    base = leaf.clone()
    zc = base.conj()
    out = g(zc)
    ob(R, "out", out)
    ver(R, "zc", zc)
    ver(R, "base", base)
    agr(R, "g", [rl(base), out.sum()], [leaf])


# =====================================================================
# dtype views
# =====================================================================
@prog()
def complex64_view_float32_returned(C, R):
    g = C(lambda z: z.view(torch.float32))
    leaf = CL(2, 3, seed=34, dtype=c64)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    R.rec("base_is_z", out._base is z)
    R.step("bw", lambda: rl(out).backward())
    grads(R, leaf=leaf)


@prog()
def complex64_view_float32_math_nograd(C, R):
    def f(z):
        return z.view(torch.float32) * 2, z.abs()

    g = C(f)
    z = CL(4, seed=35, dtype=c64, rg=False)
    a, m = g(z)
    ob(R, "a", a)
    ob(R, "m", m)


@prog()
def float32_pairs_view_complex64(C, R):
    def f(x):
        return x.view(c64) * 1j

    g = C(f)
    x = L(3, 4, seed=36, dtype=f32, rg=False)
    out = g(x)
    ob(R, "out", out)


@prog()
def float64_bits_as_int64_nograd(C, R):
    def f(x):
        with torch.no_grad():
            bits = x.view(torch.int64)
        return bits, x * 2

    g = C(f)
    x = L(5, seed=37)
    bits, y = g(x)
    ob(R, "bits", bits)
    ob(R, "y", y)
    agr(R, "g", y.sum(), [x])


@prog()
def int64_view_write_clears_sign(C, R):
    def f(x):
        with torch.no_grad():
            x.view(torch.int64).bitwise_and_(0x7FFFFFFFFFFFFFFF)
        return x + 1

    g = C(f)
    x = L(6, seed=38, rg=False)
    out = g(x)
    ob(R, "out", out)
    ver(R, "x", x)


@prog()
def dtype_view_write_then_read_complex(C, R):
    def f(z):
        with torch.no_grad():
            z.view(torch.float32)[..., 1::2].mul_(-1)
        return z * 2

    g = C(f)
    leaf = CL(4, seed=39, dtype=c64)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", rl(out), [leaf])


# =====================================================================
# in-place writes through views inside the function
# =====================================================================
@prog()
def view_as_real_slice_mul_(C, R):
    def f(z):
        torch.view_as_real(z)[..., 0].mul_(2)
        return z.abs()

    g = C(f)
    leaf = CL(2, 3, seed=40)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", [rl(out), rl(z)], [leaf])


@prog()
def real_add_(C, R):
    def f(z):
        z.real.add_(1)
        return z * 2

    g = C(f)
    leaf = CL(3, seed=41)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    ver(R, "z", z)
    z.retain_grad()
    rl(out).backward()
    grads(R, z=z, leaf=leaf)


@prog()
def imag_zero_returns_input(C, R):
    def f(z):
        z.imag.zero_()
        return z

    g = C(f)
    leaf = CL(4, seed=42)
    z = leaf.clone()
    out = g(z)
    R.rec("same", out is z)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", rl(out), [leaf])


@prog()
def view_as_complex_mul_1j(C, R):
    def f(x):
        xc = torch.view_as_complex(x)
        xc.mul_(1j)
        return xc.abs()

    g = C(f)
    leaf = L(3, 2, seed=43)
    x = leaf.clone()
    out = g(x)
    ob(R, "out", out)
    ver(R, "x", x)
    agr(R, "g", [rl(x), out.sum()], [leaf])


@prog()
def view_as_complex_mul_returned(C, R):
    def f(x, w):
        xc = torch.view_as_complex(x)
        xc.mul_(w)
        return xc

    g = C(f)
    leaf = L(4, 2, seed=44)
    x = leaf.clone()
    w = CL(4, seed=45)
    out = g(x, w)
    ob(R, "out", out)
    R.rec("base_is_x", out._base is x)
    ver(R, "x", x)
    agr(R, "g", [rl(out), rl(x)], [leaf, w])


@prog()
def imag_write_under_no_grad(C, R):
    def f(z):
        with torch.no_grad():
            z.imag.mul_(0.5)
        return z.sin()

    g = C(f)
    leaf = CL(3, seed=46)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", rl(out), [leaf])


@prog()
def copy_into_real_from_abs(C, R):
    def f(z, w):
        z.real.copy_(w.abs())
        return w.angle()

    g = C(f)
    leaf = CL(3, seed=47)
    z = leaf.clone()
    w = CL(3, seed=48)
    out = g(z, w)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", [rl(z), out.sum()], [leaf, w])


@prog()
def fft_write_back(C, R):
    def f(z):
        y = torch.fft.fft(z)
        z.copy_(torch.fft.ifft(y * 2))
        return y

    g = C(f)
    leaf = CL(4, seed=49)
    z = leaf.clone()
    y = g(z)
    ob(R, "y", y)
    ver(R, "z", z)
    agr(R, "g", [rl(y), rl(z)], [leaf])


@prog()
def mutate_then_return_views(C, R):
    def f(z):
        z.real.mul_(2)
        return z.real, z.imag, torch.view_as_real(z)

    g = C(f)
    leaf = CL(2, 2, seed=51)
    z = leaf.clone()
    re, im, vr = g(z)
    for n, t in (("re", re), ("im", im), ("vr", vr)):
        ob(R, n, t)
    ver(R, "z", z)
    agr(R, "g", [rl(re), rl(im), rl(vr)], [leaf])


@prog()
def as_strided_of_real_view_returned(C, R):
    def f(z):
        r = torch.view_as_real(z)
        return r.as_strided((z.numel(),), (2,))

    g = C(f)
    leaf = CL(4, seed=52)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def as_strided_inplace_then_write(C, R):
    def f(z):
        r = torch.view_as_real(z)
        r.as_strided_((z.numel(),), (2,), 1)
        r.mul_(3)
        return z.abs()

    g = C(f)
    leaf = CL(3, seed=53)
    z = leaf.clone()
    out = g(z)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", [rl(z), out.sum()], [leaf])


@prog()
def hook_on_real_view_inside(C, R):
    h = hk(R, "inner")

    def f(z):
        r = torch.view_as_real(z)
        r.register_hook(h)
        return (r * r).sum(-1)

    g = C(f)
    z = CL(3, seed=54)
    out = g(z)
    ob(R, "out", out)
    rl(out).backward()
    grads(R, z=z)
    R.rec("n", cnt(R, "inner"))


@prog()
def hook_on_complex_intermediate_inside(C, R):
    h = hk(R, "y", lambda g: g * 2)

    def f(z):
        y = z * (1 + 1j)
        y.register_hook(h)
        return y.abs()

    g = C(f)
    z = CL(3, seed=55)
    out = g(z)
    ob(R, "out", out)
    out.sum().backward()
    grads(R, z=z)


# =====================================================================
# views of a caller's base
# =====================================================================
@prog()
def caller_base_row_imag_add(C, R):
    def f(z):
        z.imag.add_(1)
        return z.abs()

    g = C(f)
    leaf = CL(3, 2, seed=56)
    base = leaf.clone()
    z = base[1]
    out = g(z)
    ob(R, "out", out)
    ver(R, "base", base)
    ver(R, "z", z)
    agr(R, "g", [rl(base), out.sum()], [leaf])


@prog()
def caller_real_view_of_complex_base(C, R):
    def f(x):
        x[..., 1].mul_(-1)
        return x.sum(-1)

    g = C(f)
    leaf = CL(4, seed=57)
    base = leaf.clone()
    x = torch.view_as_real(base)
    out = g(x)
    ob(R, "out", out)
    ver(R, "base", base)
    base.retain_grad()
    rl(base).backward()
    grads(R, base=base, leaf=leaf)


@prog()
def caller_real_attr_written(C, R):
    def f(x):
        x.mul_(3)
        return x * 2

    g = C(f)
    leaf = CL(2, 3, seed=58)
    base = leaf.clone()
    x = base.real
    out = g(x)
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(base), out.sum()], [leaf])


@prog()
def caller_complex_view_of_real_base(C, R):
    def f(z):
        z.mul_(1 - 1j)
        return z.real

    g = C(f)
    leaf = L(3, 2, seed=59)
    base = leaf.clone()
    z = torch.view_as_complex(base)
    out = g(z)
    ob(R, "out", out)
    ver(R, "base", base)
    base.register_hook(hk(R, "base"))
    rl(base).backward()
    grads(R, leaf=leaf)


@prog()
def base_and_its_complex_view_both_passed(C, R):
    def f(x, z):
        z.add_(1j)
        return x * 2

    g = C(f)
    leaf = L(2, 2, seed=60)
    x = leaf.clone()
    out = g(x, torch.view_as_complex(x))
    ob(R, "out", out)
    ver(R, "x", x)
    agr(R, "g", [rl(out), rl(x)], [leaf])


# =====================================================================
# the caller's observations: retain_grad, hooks, retain_graph, calls
# =====================================================================
@prog()
def retain_grad_complex_output_and_input(C, R):
    def f(z, w):
        return z * w + z.conj()

    g = C(f)
    leaf = CL(3, seed=61)
    z = leaf.clone()
    w = CL(3, seed=62)
    out = g(z, w)
    out.retain_grad()
    z.retain_grad()
    (out * W(out)).real.sum().backward()
    grads(R, out=out, z=z, leaf=leaf, w=w)


@prog()
def hooks_on_output_and_input_after_call(C, R):
    g = C(lambda z: torch.fft.fft(z) * 0.5)
    leaf = CL(4, seed=63)
    z = leaf.clone()
    out = g(z)
    out.register_hook(hk(R, "out", lambda gr: gr * 1j))
    z.register_hook(hk(R, "z"))
    leaf.register_hook(hk(R, "leaf"))
    rl(out).backward()
    grads(R, leaf=leaf)


@prog()
def retain_graph_second_backward(C, R):
    def f(z):
        return z.sin() * z.abs()

    g = C(f)
    z = CL(3, seed=64)
    out = g(z)
    loss = rl(out)
    R.step("bw1", lambda: loss.backward(retain_graph=True))
    grads(R, z1=z)
    R.step("bw2", lambda: loss.backward())
    grads(R, z2=z)
    R.step("bw3", lambda: loss.backward())


@prog()
def second_call_other_requires_grad(C, R):
    def f(z, w):
        return (z @ w).abs(), z.real

    g = C(f)
    z = CL(2, 2, seed=65)
    w = CL(2, 2, seed=66, rg=False)
    a, r = g(z, w)
    ob(R, "a", a)
    ob(R, "r", r)
    agr(R, "g1", [a.sum(), r.sum()], [z])
    z2 = CL(2, 2, seed=67, rg=False)
    w2 = CL(2, 2, seed=68)
    a2, r2 = g(z2, w2)
    ob(R, "a2", a2)
    ob(R, "r2", r2)
    agr(R, "g2", a2.sum(), [w2])
    a3, r3 = g(z2.clone(), w2.detach())
    ob(R, "a3", a3)
    ob(R, "r3", r3)


@prog()
def call_under_no_grad(C, R):
    def f(z):
        z.real.mul_(2)
        return z.abs(), z.imag

    g = C(f)
    leaf = CL(3, seed=69)
    z = leaf.clone()
    with torch.no_grad():
        a, im = g(z)
    ob(R, "a", a)
    ob(R, "im", im)
    ver(R, "z", z)
    agr(R, "g", rl(z), [leaf])


@prog()
def call_under_inference_mode(C, R):
    def f(z):
        torch.view_as_real(z)[..., 1].add_(1)
        return z.angle(), torch.view_as_real(z)

    g = C(f)
    z = CL(3, seed=70, rg=False)
    with torch.inference_mode():
        a, vr = g(z)
    ob(R, "a", a)
    ob(R, "vr", vr)
    ver(R, "z", z)
    R.rec("inf", (a.is_inference(), vr.is_inference(), z.is_inference()))


@prog()
def caller_writes_returned_real_view(C, R):
    g = C(lambda z: z.real)
    leaf = CL(3, seed=71)
    z = leaf.clone()
    out = g(z)
    out.add_(1)
    ver(R, "z", z)
    ob(R, "out", out)
    agr(R, "g", rl(z), [leaf])


@prog()
def caller_writes_returned_conj_view(C, R):
    g = C(lambda z: z.conj())
    leaf = CL(3, seed=72)
    z = leaf.clone()
    out = g(z)
    R.step("mul_", lambda: out.mul_(1j) is out)
    ver(R, "z", z)
    ob(R, "out", out)
    agr(R, "g", rl(z), [leaf])


@prog()
def module_complex_parameter(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(3, 3, dtype=c128))
            self.lin = nn.Linear(3, 3, dtype=f64)

        def forward(self, x):
            h = self.lin(x).to(c128)
            return (h @ self.w).abs()

    m = init_(M())
    with torch.no_grad():
        m.w.add_(torch.view_as_complex(L(3, 3, 2, seed=73, rg=False)))
    g = C(m)
    x = L(2, 3, seed=74)
    out = g(x)
    ob(R, "out", out)
    rl(out).backward()
    for n, p in m.named_parameters():
        GR(R, n, p)
    GR(R, "x", x)


@prog()
def module_real_param_as_complex(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.p = nn.Parameter(torch.zeros(4, 2, dtype=f64))

        def forward(self, z):
            pc = torch.view_as_complex(self.p)
            return torch.fft.ifft(z * pc)

    m = init_(M(), seed=1)
    g = C(m)
    z = CL(4, seed=75)
    out = g(z)
    ob(R, "out", out)
    out.register_hook(hk(R, "out"))
    rl(out).backward()
    GR(R, "p", m.p)
    GR(R, "z", z)


# =====================================================================
# errors eager raises
# =====================================================================
@prog()
def err_view_as_real_of_conj(C, R):
    g = C(lambda z: torch.view_as_real(z.conj()))
    z = CL(3, seed=76)
    R.step("call", lambda: rs(g(z)))


@prog()
def err_view_as_complex_wrong_last_dim(C, R):
    g = C(lambda x: torch.view_as_complex(x) * 2)
    x = L(3, 3, seed=77)
    R.step("call", lambda: g(x))
    R.step("call_ok", lambda: g(L(3, 2, seed=78)))


@prog()
def err_complex_write_into_real(C, R):
    def f(x):
        x.mul_(1j)
        return x

    g = C(f)
    x = L(3, seed=79).clone()
    R.step("call", lambda: g(x))
    ver(R, "x", x)


@prog()
def err_inplace_on_view_of_complex_leaf(C, R):
    def f(x):
        x.add_(1)
        return x * 2

    g = C(f)
    leaf = CL(3, seed=80)
    R.step("call", lambda: g(leaf.real))
    ver(R, "leaf", leaf)


@prog()
def err_backward_of_complex_output(C, R):
    g = C(lambda z: z * z)
    z = CL(3, seed=81)
    out = g(z)
    R.step("bw", lambda: out.sum().backward())
    R.step("grad", lambda: ag.grad(out.sum(), z))
    agr(R, "g_ok", out.abs().sum(), [z])


@prog()
def err_dtype_view_noncontiguous(C, R):
    g = C(lambda z: z.view(torch.float32) + 1)
    z = CL(3, 2, seed=82, dtype=c64, rg=False).t()
    R.step("call", lambda: g(z))
    R.step("call_ok", lambda: g(z.contiguous()))


# =====================================================================
# more: bits on intermediates, zeros, identities, leaves written under no_grad
# =====================================================================
@prog()
def conj_of_intermediate_returned(C, R):
    def f(z):
        return (z * 2).conj(), (z + 1).conj().contiguous()

    g = C(f)
    z = CL(3, seed=83)
    a, b = g(z)
    ob(R, "a", a)
    ob(R, "b", b)
    agr(R, "g", [rl(a), rl(b)], [z])


@prog()
def real_of_intermediate_returned(C, R):
    def f(z):
        y = z.exp()
        return y.real, y.imag, torch.view_as_real(y)

    g = C(f)
    z = CL(2, 2, seed=84)
    outs = g(z)
    for i, o in enumerate(outs):
        ob(R, f"o{i}", o)
    agr(R, "g", [rl(o) for o in outs], [z])


@prog()
def imag_zero_on_intermediate_returned(C, R):
    def f(z):
        y = z * 2
        y.imag.zero_()
        return y

    g = C(f)
    leaf = CL(3, seed=85)
    out = g(leaf.clone())
    ob(R, "out", out)
    out.retain_grad()
    rl(out).backward()
    grads(R, out=out, leaf=leaf)


@prog()
def round_trip_real_view_mul_1j(C, R):
    def f(x):
        torch.view_as_complex(x).mul_(1j)
        return x

    g = C(f)
    leaf = CL(3, seed=86)
    base = leaf.clone()
    x = torch.view_as_real(base)
    out = g(x)
    R.rec("same", out is x)
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", rl(base), [leaf])


@prog()
def imag_of_conj_input_written(C, R):
    def f(zc):
        zc.imag.add_(1)
        return zc * 1

    g = C(f)
    leaf = CL(3, seed=87)
    base = leaf.clone()
    out = g(base.conj())
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(out), rl(base)], [leaf])


@prog()
def caller_writes_real_view_of_leaf_output(C, R):
    g = C(lambda z: torch.view_as_real(z))
    leaf = CL(3, seed=88)
    out = g(leaf)
    ob(R, "out", out)
    R.step("mul_", lambda: out.mul_(2) is out)
    ver(R, "leaf", leaf)


@prog()
def leaf_updated_under_no_grad_inside(C, R):
    def f(z, w):
        with torch.no_grad():
            z.real.mul_(0.5)
            torch.view_as_real(z)[..., 1].sub_(w.detach().real)
        return (z * w).abs()

    g = C(f)
    z = CL(3, seed=89)
    w = CL(3, seed=90)
    out = g(z, w)
    ob(R, "out", out)
    ver(R, "z", z)
    out.sum().backward()
    grads(R, z=z, w=w)


@prog()
def view_returned_then_input_scaled(C, R):
    def f(z):
        r = z.real
        z.mul_(2)
        return r

    g = C(f)
    leaf = CL(3, seed=91)
    z = leaf.clone()
    r = g(z)
    ob(R, "r", r)
    ver(R, "z", z)
    agr(R, "g", [rl(r), rl(z)], [leaf])


@prog()
def abs_angle_sgn_at_zero(C, R):
    def f(z):
        return z.abs(), z.angle(), z.sgn()

    g = C(f)
    z = torch.tensor([0j, 1 + 1j, -2 + 0j, 0 - 3j], dtype=c128, requires_grad=True)
    outs = g(z)
    for i, o in enumerate(outs):
        ob(R, f"o{i}", o)
    for i, o in enumerate(outs):
        agr(R, f"g{i}", rl(o), [z])


@prog()
def real_attr_of_real_input_is_self(C, R):
    def f(x):
        return x.real, x.real * 2

    g = C(f)
    leaf = L(3, seed=92)
    x = leaf.clone()
    a, b = g(x)
    R.rec("same", a is x)
    ob(R, "a", a)
    ob(R, "b", b)
    agr(R, "g", [rl(a), rl(b)], [leaf])


@prog()
def err_imag_of_real_input(C, R):
    g = C(lambda x: x.imag * 2)
    x = L(3, seed=93)
    R.step("call", lambda: g(x))


@prog()
def zero_dim_complex_view_as_real(C, R):
    def f(z):
        return torch.view_as_real(z), z.abs()

    g = C(f)
    leaf = torch.tensor(1.5 - 2j, dtype=c128, requires_grad=True)
    z = leaf.clone()
    vr, a = g(z)
    ob(R, "vr", vr)
    ob(R, "a", a)
    agr(R, "g", [rl(vr), a], [leaf])


@prog()
def clone_of_conj_input(C, R):
    g = C(lambda z: (z.clone(), z.contiguous()))
    leaf = CL(3, seed=94)
    a, b = g(leaf.conj())
    ob(R, "a", a)
    ob(R, "b", b)
    agr(R, "g", [rl(a), rl(b)], [leaf])


@prog()
def leaf_bits_written_under_no_grad(C, R):
    def f(x):
        with torch.no_grad():
            x.view(torch.int64).bitwise_xor_(1 << 63)
        return x * 3

    g = C(f)
    x = L(4, seed=95)
    out = g(x)
    ob(R, "out", out)
    ver(R, "x", x)
    agr(R, "g", out.sum(), [x])


@prog()
def dtype_view_of_intermediate(C, R):
    def f(x):
        y = x * 2
        return y.view(torch.int64), y

    g = C(f)
    x = L(3, seed=96)
    bits, y = g(x)
    ob(R, "bits", bits)
    ob(R, "y", y)
    agr(R, "g", y.sum(), [x])


@prog()
def hook_on_input_real_view_inside(C, R):
    h = hk(R, "re", lambda g: g * 3)

    def f(z):
        re = z.real
        re.register_hook(h)
        return re * re + z.imag

    g = C(f)
    leaf = CL(3, seed=97)
    out = g(leaf.clone())
    ob(R, "out", out)
    rl(out).backward()
    grads(R, leaf=leaf)


# =====================================================================
# more: aliasing between inputs and between outputs, inputs gaining grad
# =====================================================================
@prog()
def write_with_conj_then_plain_input(C, R):
    def f(z):
        z.real.add_(1)
        return z * 2

    g = C(f)
    leaf = CL(3, seed=98)
    b1 = leaf.clone()
    o1 = g(b1.conj())
    ob(R, "o1", o1)
    ver(R, "b1", b1)
    b2 = leaf.clone()
    o2 = g(b2)
    ob(R, "o2", o2)
    ver(R, "b2", b2)
    agr(R, "g", [rl(o1), rl(o2), rl(b1), rl(b2)], [leaf])


@prog()
def real_view_input_then_plain_input(C, R):
    def f(x):
        x[..., 0].mul_(2)
        return x.sum(-1)

    g = C(f)
    leaf = CL(3, seed=99)
    base = leaf.clone()
    o1 = g(torch.view_as_real(base))
    ob(R, "o1", o1)
    ver(R, "base", base)
    x2 = L(3, 2, seed=100)
    y2 = x2.clone()
    o2 = g(y2)
    ob(R, "o2", o2)
    ver(R, "y2", y2)
    agr(R, "g", [rl(o1), rl(o2), rl(base), rl(y2)], [leaf, x2])


@prog()
def complex_view_of_offset_real_base(C, R):
    def f(z):
        z.mul_(1j)
        return z.abs()

    g = C(f)
    leaf = L(4, 2, seed=101)
    base = leaf.clone()
    z = torch.view_as_complex(base[1:])
    out = g(z)
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(base), out.sum()], [leaf])


@prog()
def input_and_its_conj_both_passed(C, R):
    def f(a, b):
        a.mul_(2)
        return b * 1

    g = C(f)
    leaf = CL(3, seed=102)
    base = leaf.clone()
    out = g(base, base.conj())
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(out), rl(base)], [leaf])


@prog()
def input_and_its_real_read_only(C, R):
    def f(z, r):
        return z.abs() + r

    g = C(f)
    leaf = CL(3, seed=103)
    z = leaf.clone()
    out = g(z, z.real)
    ob(R, "out", out)
    agr(R, "g", rl(out), [leaf])


@prog()
def outputs_alias_each_other_caller_writes(C, R):
    def f(z):
        y = z * 2
        return y, torch.view_as_real(y)

    g = C(f)
    z = CL(3, seed=104)
    y, yr = g(z)
    R.rec("yr_base_is_y", yr._base is y)
    R.step("mul_", lambda: yr[..., 1].mul_(0) is not None)
    ob(R, "y", y)
    ob(R, "yr", yr)
    agr(R, "g", [rl(y)], [z])


@prog()
def real_imag_of_intermediate_caller_writes(C, R):
    def f(z):
        y = z * (2 - 1j) + 1
        return y.real, y.imag

    g = C(f)
    z = CL(3, seed=105)
    re, im = g(z)
    R.step("add_", lambda: re.add_(10) is not None)
    ob(R, "re", re)
    ob(R, "im", im)
    R.rec("same_base", re._base is im._base)
    if re._base is not None:
        ob(R, "base", re._base)
    agr(R, "g", [rl(re), rl(im)], [z])


@prog()
def input_and_real_view_returned_caller_writes(C, R):
    def f(z):
        return z, torch.view_as_real(z)

    g = C(f)
    leaf = CL(3, seed=106)
    z = leaf.clone()
    a, b = g(z)
    R.rec("a_is_z", a is z)
    b[..., 0].zero_()
    ver(R, "z", z)
    ob(R, "a", a)
    ob(R, "b", b)
    agr(R, "g", [rl(a), rl(b)], [leaf])


@prog()
def complex_grad_outputs(C, R):
    g = C(lambda z: z.sin() * z)
    z = CL(3, seed=107)
    out = g(z)
    go = torch.full_like(out, 1 - 2j)
    agr(R, "g", [out], [z], grad_outputs=[go])


@prog()
def double_backward_abs_squared(C, R):
    g = C(lambda z: (z * z.conj()).real.pow(2))
    z = CL(3, seed=108)
    out = g(z)
    R.step(
        "gg",
        lambda: rs(ag.grad(rl(ag.grad(out.sum(), z, create_graph=True)[0]), z)),
    )


@prog()
def plain_input_imag_gets_grad(C, R):
    def f(z, w):
        z.imag.copy_(w.real)
        return w.abs()

    g = C(f)
    z = CL(3, seed=109, rg=False)
    w = CL(3, seed=110)
    out = g(z, w)
    ob(R, "out", out)
    ver(R, "z", z)
    agr(R, "g", [rl(z), out.sum()], [w])


@prog()
def plain_real_view_slot_gets_grad(C, R):
    def f(z, w):
        torch.view_as_real(z)[..., 0].copy_(w * 2)
        return z

    g = C(f)
    z = CL(3, seed=111, rg=False)
    w = L(3, seed=112)
    out = g(z, w)
    R.rec("same", out is z)
    ver(R, "z", z)
    z.retain_grad()
    rl(z).backward()
    grads(R, z=z, w=w)


@prog()
def plain_real_base_complex_view_gets_grad(C, R):
    def f(z, w):
        z.mul_(w)
        return z.abs()

    g = C(f)
    base = L(3, 2, seed=113, rg=False)
    z = torch.view_as_complex(base)
    w = CL(3, seed=114)
    out = g(z, w)
    ob(R, "out", out)
    ver(R, "base", base)
    ver(R, "z", z)
    agr(R, "g", [rl(base), out.sum()], [w])


@prog()
def imag_and_conj_imag_both_passed(C, R):
    def f(a, b):
        a.add_(1)
        return b * 1

    g = C(f)
    leaf = CL(3, seed=115)
    base = leaf.clone()
    out = g(base.imag, base.conj().imag)
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(out), rl(base)], [leaf])


@prog()
def real_and_imag_both_passed_one_written(C, R):
    def f(re, im):
        re.mul_(2)
        return im * re

    g = C(f)
    leaf = CL(3, seed=116)
    base = leaf.clone()
    out = g(base.real, base.imag)
    ob(R, "out", out)
    ver(R, "base", base)
    agr(R, "g", [rl(out), rl(base)], [leaf])


@prog()
def module_complex_buffer_rotated(C, R):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("phase", torch.ones(3, dtype=c128))
            self.w = nn.Parameter(torch.zeros(3, 2, dtype=f64))

        def forward(self, z):
            self.phase.mul_(1j)
            torch.view_as_real(self.phase)[..., 0].add_(0.5)
            return z * self.phase * torch.view_as_complex(self.w)

    m = init_(M(), seed=2)
    g = C(m)
    z1 = CL(3, seed=117)
    o1 = g(z1)
    ob(R, "o1", o1)
    ob(R, "phase1", m.phase.clone())
    rl(o1).backward()
    grads(R, w1=m.w, z1=z1)
    z2 = CL(3, seed=118)
    o2 = g(z2)
    ob(R, "o2", o2)
    ver(R, "phase2", m.phase)
    rl(o2).backward()
    grads(R, w2=m.w, z2=z2)


@prog()
def second_call_repeats_view_write(C, R):
    def f(z, w):
        torch.view_as_real(z)[..., 1].mul_(w)
        return z.abs() * w

    g = C(f)
    leaf = CL(3, seed=119)
    w = L(3, seed=120)
    zs, outs = [], []
    for i in range(2):
        z = leaf.clone() * (i + 1)
        outs.append(g(z, w))
        zs.append(z)
        ob(R, f"out{i}", outs[i])
        ver(R, f"z{i}", z)
    agr(R, "g", [rl(o) for o in outs] + [rl(z) for z in zs], [leaf, w])
