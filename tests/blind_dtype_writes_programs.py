"""Blind programs: writes that change or depend on dtype, ``out=`` arguments and index
writes. A compiled function receives tensors (leaves that require grad, non-leaf clones
of such leaves, tensors without grad, views and slices of one base, 0-dim tensors,
integer and bool tensors, float32 next to float64) and writes them in place with the type
promotion eager allows (a float32 input ``.add_(float64 tensor)``, ``.mul_(int tensor)``,
``.add_(python scalar)``, an int input ``.add_(2)``) or refuses (an int input
``.add_(float tensor)``: "result type Float can't be cast ..."); writes them through
``out=`` arguments (``torch.add(a, b, out=x)``, ``out=x[1:]``, ``torch.sum(a, 0, out=x)``,
an ``out=`` of another shape, resized with a warning, or of another dtype; eager refuses
``out=`` under grad mode where an argument requires grad); writes them by index
(``index_put_``, ``x[mask] = v``, ``x[idx] += v``, ``scatter_``, ``scatter_add_``,
``index_add_``, ``index_copy_``, ``masked_fill_``, ``masked_scatter_``, ``copy_`` from
another dtype or a broadcast source, ``fill_`` with a 0-dim tensor that requires grad,
``x.copy_(y)`` where only ``y`` requires grad); then returns the inputs, views of them or
computed values. Second calls change ``requires_grad`` or dtypes; some calls run under
``torch.no_grad``. The caller records everything eager exposes: the outputs' values,
dtype, shape, strides and autograd flags, the inputs afterwards (values, dtype, version),
each leaf's gradient after a backward with non-trivial cotangents, and errors.

Written in round 64 by a helper who had not read the implementation, from the family's
description alone. Each program is ``fn(C, R)``: ``C`` compiles a function or an
``nn.Module`` (identity under eager), ``R`` (``blind_fed_outputs_harness.Recorder``)
records what the caller observes; ``P`` maps each program's name to it. The test module
``test_fidelity_blind_dtype_writes`` runs each under eager and under each entry point and
compares the recordings.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from blind_fed_outputs_harness import L, W, registry

P, prog = registry()

f64, f32 = torch.float64, torch.float32
i64, i32, bool_ = torch.int64, torch.int32, torch.bool


# =====================================================================
# helpers
# =====================================================================
def ver(R, name, t):
    """Record an input as the caller sees it after the call, and its version."""
    R.rec(name, t)
    R.rec(name + ".version", t._version)


def rl(t):
    """A weighted loss of ``t`` (non-uniform cotangent)."""
    return (t * W(t)).sum()


def bw(R, *outs, name="bw"):
    """``R.step(name)``: backward of the weighted losses of ``outs``."""
    R.step(name, lambda: sum(rl(o) for o in outs).backward())


def grads(R, **ts):
    for k, t in ts.items():
        R.grad(k, t)


def _observe(R, out, watched, leaves=None, *, also=(), same=None, name="out", bw_name="bw"):
    """The usual tail of a program: ``R.rec(name, out)`` (then ``R.rec("same", out is
    same)`` when ``same`` is given), ``ver`` of each of ``watched`` (name to tensor, in
    order); when ``leaves`` is given, ``bw(R, out, *also, name=bw_name)`` and ``grads`` of
    ``leaves`` (name to tensor)."""
    R.rec(name, out)
    if same is not None:
        R.rec("same", out is same)
    for k, t in watched.items():
        ver(R, k, t)
    if leaves is not None:
        bw(R, out, *also, name=bw_name)
        grads(R, **leaves)


def Z(seed, dtype=f64, rg=True):
    """A seeded 0-dim leaf (drawn by ``L``)."""
    t = L(1, seed=seed, dtype=dtype, rg=False).reshape(()).clone()
    return t.requires_grad_() if rg else t


def I(*vals, dtype=i64):  # noqa: E743
    return torch.tensor(vals, dtype=dtype)


def M(*vals):
    return torch.tensor(vals, dtype=bool_)


def wcall(R, name, g, *args):
    """Call ``g(*args)`` recording its result (or error) under ``name`` and whether a
    "was resized" warning came out under ``name + '.resized_warn'``."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = R.step(name, lambda: g(*args))
    R.rec(name + ".resized_warn", any("resized" in str(x.message) for x in w))
    return out


# =====================================================================
# in-place type promotion that eager allows
# =====================================================================
@prog()
def f32_clone_add_f64_tensor(C, R):
    def f(x, y):
        x.add_(y)
        return x

    g = C(f)
    leaf = L(3, seed=1, dtype=f32)
    y = L(3, seed=2)
    x = leaf.clone()
    out = g(x, y)
    _observe(R, out, {"x": x}, {"leaf": leaf, "y": y}, same=x)


@prog()
def f32_clone_mul_int_tensor(C, R):
    def f(x, i):
        x.mul_(i)
        return x * 2

    g = C(f)
    leaf = L(4, seed=3, dtype=f32)
    x = leaf.clone()
    i = I(1, -2, 3, 0)
    out = g(x, i)
    _observe(R, out, {"x": x, "i": i}, {"leaf": leaf}, also=(x,))


@prog()
def f32_add_python_scalar_then_mul(C, R):
    def f(x):
        x.add_(2.5)
        x.mul_(3)
        return x.sin()

    g = C(f)
    leaf = L(2, 3, seed=4, dtype=f32)
    x = leaf.clone()
    out = g(x)
    _observe(R, out, {"x": x}, {"leaf": leaf})


@prog()
def int_input_add_int_scalar(C, R):
    def f(n, w):
        n.add_(2)
        return n, n.to(w.dtype) * w

    g = C(f)
    n = I(1, 2, 3)
    w = L(3, seed=5)
    a, b = g(n, w)
    R.rec("a", a)
    R.rec("a_is_n", a is n)
    _observe(R, b, {"n": n}, {"w": w}, name="b")


@prog()
def f32_mul_f64_zero_dim_leaf(C, R):
    def f(x, s):
        x.mul_(s)
        return x

    g = C(f)
    leaf = L(4, seed=8, dtype=f32)
    s = Z(9)
    x = leaf.clone()
    out = g(x, s)
    _observe(R, out, {"x": x}, {"leaf": leaf, "s": s})


@prog()
def promotion_write_through_slice_input(C, R):
    def f(v, y):
        v.add_(y)
        return v.sum()

    g = C(f)
    leaf = L(5, seed=18, dtype=f32)
    base = leaf.clone()
    y = L(3, seed=19)
    out = g(base[1:4], y)
    _observe(R, out, {"base": base}, {"leaf": leaf, "y": y}, also=(base,))


@prog()
def f32_and_f64_write_each_other(C, R):
    def f(a, b):
        a.add_(b)
        b.mul_(a)
        return a + b

    g = C(f)
    la, lb = L(3, seed=20, dtype=f32), L(3, seed=21)
    a, b = la.clone(), lb.clone()
    out = g(a, b)
    _observe(R, out, {"a": a, "b": b}, {"la": la, "lb": lb}, also=(a, b))


@prog()
def nograd_f32_input_gets_grad_from_f64(C, R):
    def f(x, y):
        x.sub_(y)
        return x

    g = C(f)
    x = L(4, seed=22, dtype=f32, rg=False)
    y = L(4, seed=23)
    out = g(x, y)
    _observe(R, out, {"x": x}, {"y": y})


@prog()
def zero_dim_f32_input_add_f64_vector_err(C, R):
    """0-dim f32 ``add_`` of a 1-element f64 vector: broadcasting the output fails."""

    def f(s, y):
        s.add_(y)
        return s

    g = C(f)
    s = Z(24, dtype=f32).clone()
    R.step("call", lambda: g(s, L(2, seed=25)))
    ver(R, "s", s)


@prog()
def zero_dim_inputs_promotion(C, R):
    def f(s, t):
        s.mul_(t)
        s.add_(1)
        return s * t

    g = C(f)
    ls, lt = Z(26, dtype=f32), Z(27)
    s = ls.clone()
    out = g(s, lt)
    _observe(R, out, {"s": s}, {"ls": ls, "lt": lt}, also=(s,))


@prog()
def int32_floor_div_by_big_int64(C, R):
    """int32 ``div_`` (floor) by an int64 beyond int32's range: eager divides in int64."""

    def f(n, k):
        n.div_(k, rounding_mode="floor")
        return n + 1

    g = C(f)
    n = I(100, -7, 9, dtype=i32)
    out = g(n, I(2**32 + 2, 2, 2**33 + 3))
    _observe(R, out, {"n": n})


@prog()
def int32_remainder_by_big_int64(C, R):
    def f(n, k):
        n.remainder_(k)
        return n * 2

    g = C(f)
    n = I(100, 50, -3, dtype=i32)
    out = g(n, I(2**32 + 7, 7, 2**32 + 5))
    _observe(R, out, {"n": n})


@prog()
def uint8_add_negative_int64_wraps(C, R):
    def f(u, k, w):
        u.add_(k)
        return u.to(w.dtype) * w

    g = C(f)
    u = I(3, 200, 0, dtype=torch.uint8)
    w = L(3, seed=153)
    out = g(u, I(-5, 100, -1), w)
    _observe(R, out, {"u": u}, {"w": w})


# =====================================================================
# in-place type promotion that eager refuses
# =====================================================================
@prog()
def err_int_add_float_tensor(C, R):
    def f(n, x):
        n.add_(x)
        return n

    g = C(f)
    n = I(1, 2, 3)
    R.step("call", lambda: g(n, L(3, seed=28, dtype=f32, rg=False)))
    ver(R, "n", n)


@prog()
def err_int_add_float_leaf_rg(C, R):
    def f(n, x):
        y = x * 2
        n.add_(y)
        return y

    g = C(f)
    n = I(1, 2, 3)
    R.step("call", lambda: g(n, L(3, seed=29, dtype=f32)))
    ver(R, "n", n)


@prog()
def err_bool_add_int(C, R):
    def f(m):
        m.add_(1)
        return m

    g = C(f)
    m = M(True, False)
    R.step("call", lambda: g(m))
    ver(R, "m", m)


@prog()
def err_int_mul_zero_dim_f64_leaf(C, R):
    def f(n, s):
        n.mul_(s)
        return n

    g = C(f)
    n = I(1, 2, 3)
    R.step("call", lambda: g(n, Z(30)))
    ver(R, "n", n)


@prog()
def err_in_place_on_leaf_that_requires_grad(C, R):
    def f(x, y):
        x.add_(y)
        return x

    g = C(f)
    x = L(3, seed=33, dtype=f32)
    R.step("call", lambda: g(x, L(3, seed=34)))
    ver(R, "x", x)


@prog()
def int_error_then_valid_second_call(C, R):
    def f(n, k):
        n.add_(k)
        return n * 2

    g = C(f)
    n = I(1, 2, 3)
    R.step("call1", lambda: g(n, torch.ones(3)))
    ver(R, "n1", n)
    R.step("call2", lambda: g(n, I(5, 5, 5)))
    ver(R, "n2", n)


# =====================================================================
# out= arguments
# =====================================================================
@prog()
def out_add_into_nograd_input(C, R):
    def f(a, b, x, w):
        torch.add(a, b, out=x)
        return x * w

    g = C(f)
    a, b = L(3, seed=35, rg=False), L(3, seed=36, rg=False)
    x = torch.zeros(3, dtype=f64)
    w = L(3, seed=37)
    out = g(a, b, x, w)
    _observe(R, out, {"x": x}, {"w": w})


@prog()
def err_out_add_args_require_grad(C, R):
    def f(a, b, x):
        torch.add(a, b, out=x)
        return x

    g = C(f)
    x = torch.zeros(3, dtype=f64)
    R.step("call", lambda: g(L(3, seed=38), L(3, seed=39), x))
    ver(R, "x", x)


@prog()
def err_out_into_leaf_requires_grad(C, R):
    def f(a, x):
        torch.mul(a, 2, out=x)
        return x

    g = C(f)
    x = L(3, seed=40)
    R.step("call", lambda: g(L(3, seed=41, rg=False), x))
    ver(R, "x", x)


@prog()
def out_into_leaf_requires_grad_under_no_grad(C, R):
    def f(a, b, x):
        torch.add(a, b, alpha=2, out=x)
        return x.sum()

    g = C(f)
    x = L(3, seed=44)
    a, b = L(3, seed=45), L(3, seed=46)
    with torch.no_grad():
        out = g(a, b, x)
    _observe(R, out, {"x": x})
    bw(R, x * a)
    grads(R, x=x, a=a, b=b)


@prog()
def out_with_grad_args_inside_no_grad_block(C, R):
    def f(a, b, x, w):
        with torch.no_grad():
            torch.mul(a, b, out=x)
        return x * w + a

    g = C(f)
    a, b, w = L(3, seed=47), L(3, seed=48), L(3, seed=49)
    x = torch.empty(3, dtype=f64)
    out = g(a, b, x, w)
    _observe(R, out, {"x": x}, {"a": a, "b": b, "w": w})


@prog()
def out_mul_into_input_slice(C, R):
    def f(a, b, x):
        torch.mul(a, b, out=x[1:])
        return x + 1

    g = C(f)
    a, b = L(3, seed=50, rg=False), L(3, seed=51, rg=False)
    x = torch.zeros(4, dtype=f64)
    out = g(a, b, x)
    _observe(R, out, {"x": x})


@prog()
def out_sum_dim0_into_input(C, R):
    def f(a, x, w):
        torch.sum(a, 0, out=x)
        return (x * w).sum()

    g = C(f)
    a = L(2, 3, seed=52, rg=False)
    x = torch.full((3,), 7.0, dtype=f64)
    w = L(3, seed=53)
    out = g(a, x, w)
    _observe(R, out, {"x": x}, {"w": w})


@prog()
def out_sum_into_zero_dim_input(C, R):
    def f(a, s):
        torch.sum(a, (0, 1), out=s)
        return s * 2

    g = C(f)
    a = L(2, 3, seed=54, rg=False)
    s = torch.tensor(0.0, dtype=f64)
    out = g(a, s)
    _observe(R, out, {"s": s})


@prog()
def out_returned_is_input(C, R):
    def f(a, b, x):
        return torch.add(a, b, out=x)

    g = C(f)
    a, b = L(2, 2, seed=55, rg=False), L(2, 2, seed=56, rg=False)
    x = torch.zeros(2, 2, dtype=f64)
    out = g(a, b, x)
    _observe(R, out, {"x": x}, same=x)


@prog()
def out_resized_larger_warns(C, R):
    def f(a, x):
        torch.mul(a, 3, out=x)
        return x.sum()

    g = C(f)
    a = L(5, seed=57, rg=False)
    x = torch.zeros(3, dtype=f64)
    wcall(R, "call", g, a, x)
    ver(R, "x", x)


@prog()
def out_resized_smaller_warns(C, R):
    def f(a, x):
        torch.add(a, 1, out=x)
        return x * 2

    g = C(f)
    a = L(2, seed=58, rg=False)
    x = torch.ones(2, 3, dtype=f64)
    wcall(R, "call", g, a, x)
    ver(R, "x", x)


@prog()
def out_empty_resized_silently(C, R):
    def f(a, b, x):
        torch.mul(a, b, out=x)
        return x + 0

    g = C(f)
    a, b = L(2, 3, seed=59, rg=False), L(3, seed=60, rg=False)
    x = torch.empty(0, dtype=f64)
    wcall(R, "call", g, a, b, x)
    ver(R, "x", x)


@prog()
def out_slice_resized_grows_storage(C, R):
    def f(a, x):
        torch.add(a, 1, out=x)
        return x

    g = C(f)
    a = L(4, seed=61, rg=False)
    base = torch.zeros(6, dtype=f64)
    v = base[3:]
    wcall(R, "call", g, a, v)
    ver(R, "v", v)
    ver(R, "base", base)


@prog()
def out_int_args_float_out(C, R):
    def f(n, x):
        torch.add(n, 2, out=x)
        return x * 0.5

    g = C(f)
    n = I(1, 2, 3)
    x = torch.zeros(3, dtype=f32)
    out = g(n, x)
    _observe(R, out, {"x": x})


@prog()
def err_out_float_result_int_out(C, R):
    def f(a, x):
        torch.add(a, a, out=x)
        return x

    g = C(f)
    x = I(0, 0, 0)
    R.step("call", lambda: g(L(3, seed=63, rg=False), x))
    ver(R, "x", x)


@prog()
def out_sum_float_into_int(C, R):
    def f(a, x):
        torch.sum(a * 3, 0, out=x)
        return x

    g = C(f)
    x = I(0, 0, 0)
    R.step("call", lambda: g(L(2, 3, seed=64, rg=False), x))
    ver(R, "x", x)


@prog()
def err_out_mm_other_dtype(C, R):
    def f(a, b, x):
        torch.mm(a, b, out=x)
        return x

    g = C(f)
    x = torch.zeros(2, 2, dtype=f64)
    R.step(
        "call",
        lambda: g(L(2, 2, seed=65, dtype=f32, rg=False), L(2, 2, seed=66, dtype=f32, rg=False), x),
    )
    ver(R, "x", x)


@prog()
def out_cat_into_transposed_input(C, R):
    def f(a, b, x):
        torch.cat([a, b], 0, out=x)
        return x * 2

    g = C(f)
    a, b = L(1, 3, seed=68, rg=False), L(2, 3, seed=69, rg=False)
    base = torch.zeros(3, 3, dtype=f64)
    xt = base.t()
    out = g(a, b, xt)
    _observe(R, out, {"xt": xt, "base": base})


@prog()
def out_second_call_other_dtype(C, R):
    def f(a, x):
        torch.mul(a, 2, out=x)
        return x + 1

    g = C(f)
    x1 = torch.zeros(3, dtype=f32)
    o1 = g(L(3, seed=72, dtype=f32, rg=False), x1)
    _observe(R, o1, {"x1": x1}, name="o1")
    x2 = torch.zeros(3, dtype=f64)
    o2 = g(L(3, seed=73, rg=False), x2)
    _observe(R, o2, {"x2": x2}, name="o2")


@prog()
def out_second_call_args_require_grad(C, R):
    def f(a, x):
        torch.exp(a, out=x)
        return x

    g = C(f)
    x = torch.zeros(3, dtype=f64)
    R.step("call1", lambda: g(L(3, seed=74, rg=False), x))
    ver(R, "x1", x)
    R.step("call2", lambda: g(L(3, seed=75), x))
    ver(R, "x2", x)


@prog()
def out_whole_call_under_no_grad(C, R):
    def f(a, x):
        torch.tanh(a, out=x)
        return x * a

    g = C(f)
    a = L(3, seed=76)
    x = torch.zeros(3, dtype=f64)
    with torch.no_grad():
        out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_sum_f32_into_f64_cancellation(C, R):
    """``sum`` into a float64 ``out=`` of float32 values: eager sums in float64."""

    def f(a, x):
        torch.sum(a, 0, out=x)
        return x * 2

    g = C(f)
    a = torch.tensor([[1e8, 3.0], [1.0, 1e8], [-1e8, -1e8]], dtype=f32)
    x = torch.zeros(2, dtype=f64)
    out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_sum_f64_into_f32_cancellation(C, R):
    """``sum`` into a float32 ``out=`` of float64 values: eager sums in float32."""

    def f(a, x):
        torch.sum(a, 1, out=x)
        return x + 0

    g = C(f)
    a = torch.tensor([[1e8 + 1, -1e8], [0.5, 0.25]], dtype=f64)
    x = torch.zeros(2, dtype=f32)
    out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_mean_f32_into_f64(C, R):
    def f(a, x):
        torch.mean(a, 0, out=x)
        return x

    g = C(f)
    a = torch.tensor([[1e8, 2.0], [1.0, 1.0], [-1e8, 0.5]], dtype=f32)
    x = torch.zeros(2, dtype=f64)
    out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_cumsum_float_into_int(C, R):
    def f(a, x):
        torch.cumsum(a, 0, out=x)
        return x * 2

    g = C(f)
    a = torch.tensor([1.7, 2.6, -0.5, 3.9])
    x = I(0, 0, 0, 0)
    out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_prod_float_into_int(C, R):
    def f(a, x):
        torch.prod(a, 1, out=x)
        return x

    g = C(f)
    a = torch.tensor([[1.7, 2.6], [3.5, -1.5]])
    x = I(0, 0)
    out = g(a, x)
    _observe(R, out, {"x": x})


@prog()
def out_add_f32_args_into_f64_out(C, R):
    """``torch.add`` of float32 values into a float64 ``out=``: eager adds in float32."""

    def f(a, b, x):
        torch.add(a, b, out=x)
        return x - 1e8

    g = C(f)
    a = torch.tensor([1e8, 1e8], dtype=f32)
    b = torch.tensor([1.0, 3.0], dtype=f32)
    x = torch.zeros(2, dtype=f64)
    out = g(a, b, x)
    _observe(R, out, {"x": x})


@prog()
def out_floor_divide_int64_into_int32(C, R):
    def f(a, b, x):
        torch.floor_divide(a, b, out=x)
        return x

    g = C(f)
    x = I(0, 0, dtype=i32)
    out = g(I(2**32 + 10, 9), I(3, 2), x)
    _observe(R, out, {"x": x})


@prog()
def err_out_partially_overlaps_input(C, R):
    def f(x):
        torch.add(x[:3], 1, out=x[1:4])
        return x

    g = C(f)
    x = torch.zeros(5, dtype=f64)
    R.step("call", lambda: g(x))
    ver(R, "x", x)


@prog()
def err_out_expanded_input(C, R):
    def f(a, e):
        torch.mul(a, 2, out=e)
        return e

    g = C(f)
    base = torch.zeros(1, dtype=f64)
    R.step("call", lambda: g(L(3, seed=154, rg=False), base.expand(3)))
    ver(R, "base", base)


# =====================================================================
# index writes on inputs
# =====================================================================
@prog()
def index_put_values_require_grad(C, R):
    def f(x, v):
        x.index_put_((I(0, 2),), v)
        return x

    g = C(f)
    leaf = L(4, seed=77)
    v = L(2, seed=78)
    x = leaf.clone()
    out = g(x, v)
    _observe(R, out, {"x": x}, {"leaf": leaf, "v": v})


@prog()
def index_put_accumulate_duplicates(C, R):
    def f(x, idx, v):
        x.index_put_((idx,), v, accumulate=True)
        return x * x

    g = C(f)
    leaf = L(3, seed=79)
    v = L(4, seed=80)
    x = leaf.clone()
    out = g(x, I(0, 2, 0, 1), v)
    _observe(R, out, {"x": x}, {"leaf": leaf, "v": v})


@prog()
def err_index_put_other_dtype(C, R):
    def f(x, v):
        x.index_put_((I(0),), v)
        return x

    g = C(f)
    x = L(3, seed=83, dtype=f32, rg=False)
    R.step("call", lambda: g(x, L(1, seed=84)))
    ver(R, "x", x)


@prog()
def mask_setitem_vector(C, R):
    def f(x, m, v):
        x[m] = v
        return x * 2

    g = C(f)
    leaf = L(5, seed=85)
    v = L(3, seed=86)
    x = leaf.clone()
    out = g(x, M(True, False, True, False, True), v)
    _observe(R, out, {"x": x}, {"leaf": leaf, "v": v})


@prog()
def mask_setitem_zero_dim_leaf(C, R):
    def f(x, s):
        x[x > 0] = s
        return x

    g = C(f)
    leaf = L(2, 3, seed=87)
    s = Z(88)
    x = leaf.clone()
    out = g(x, s)
    _observe(R, out, {"x": x}, {"leaf": leaf, "s": s})


@prog()
def err_mask_setitem_other_dtype(C, R):
    def f(x, v):
        x[x > 0] = v
        return x

    g = C(f)
    x = torch.tensor([1.0, -1.0, 2.0], dtype=f32)
    R.step("call", lambda: g(x, torch.tensor([5.0, 6.0], dtype=f64)))
    ver(R, "x", x)


@prog()
def index_iadd_unique(C, R):
    def f(x, idx, v):
        x[idx] += v
        return x

    g = C(f)
    leaf = L(5, seed=89)
    v = L(3, seed=90)
    x = leaf.clone()
    out = g(x, I(4, 0, 2), v)
    _observe(R, out, {"x": x}, {"leaf": leaf, "v": v})


@prog()
def index_iadd_rows_f32_with_f64(C, R):
    """``x[idx] += v`` with a float64 ``v``: the gathered float32 rows add in place."""

    def f(x, v):
        x[I(1)] += v
        return x

    g = C(f)
    x = L(3, 2, seed=91, dtype=f32, rg=False)
    v = L(1, 2, seed=92)
    out = g(x, v)
    _observe(R, out, {"x": x}, {"v": v})


@prog()
def scatter_src_requires_grad(C, R):
    def f(x, idx, src):
        x.scatter_(1, idx, src)
        return x

    g = C(f)
    leaf = L(2, 4, seed=93)
    src = L(2, 2, seed=94)
    x = leaf.clone()
    out = g(x, torch.tensor([[0, 3], [2, 1]]), src)
    _observe(R, out, {"x": x}, {"leaf": leaf, "src": src})


@prog()
def err_scatter_other_dtype(C, R):
    def f(x, src):
        x.scatter_(0, I(0), src)
        return x

    g = C(f)
    x = L(3, seed=96, dtype=f32, rg=False)
    R.step("call", lambda: g(x, L(1, seed=97)))
    ver(R, "x", x)


@prog()
def scatter_add_src_requires_grad(C, R):
    def f(x, idx, src):
        x.scatter_add_(0, idx, src)
        return x * 2

    g = C(f)
    leaf = L(3, seed=98)
    src = L(5, seed=99)
    x = leaf.clone()
    out = g(x, I(0, 2, 2, 1, 0), src)
    _observe(R, out, {"x": x}, {"leaf": leaf, "src": src})


@prog()
def scatter_add_into_int_counts(C, R):
    def f(c, idx, w):
        c.scatter_add_(0, idx, torch.ones_like(idx))
        return c.to(w.dtype) * w

    g = C(f)
    c = I(0, 0, 0)
    w = L(3, seed=100)
    out = g(c, I(0, 2, 2, 2), w)
    _observe(R, out, {"c": c}, {"w": w})


@prog()
def index_add_alpha_src_grad(C, R):
    def f(x, src):
        x.index_add_(0, I(2, 0, 2), src, alpha=-1.5)
        return x

    g = C(f)
    leaf = L(3, 2, seed=103)
    src = L(3, 2, seed=104)
    x = leaf.clone()
    out = g(x, src)
    _observe(R, out, {"x": x}, {"leaf": leaf, "src": src})


@prog()
def err_index_add_other_dtype(C, R):
    def f(x, src):
        x.index_add_(0, I(0), src)
        return x

    g = C(f)
    x = L(3, seed=105, dtype=f32, rg=False)
    R.step("call", lambda: g(x, L(1, seed=106)))
    ver(R, "x", x)


@prog()
def index_copy_src_grad_on_transposed_input(C, R):
    def f(x, src):
        x.index_copy_(1, I(2, 0), src)
        return x

    g = C(f)
    leaf = L(3, 2, seed=107)
    base = leaf.clone()
    xt = base.t()
    src = L(2, 2, seed=108)
    out = g(xt, src)
    _observe(R, out, {"base": base}, {"leaf": leaf, "src": src})


@prog()
def masked_fill_zero_dim_f64_leaf_into_f32(C, R):
    def f(x, m, s):
        x.masked_fill_(m, s)
        return x

    g = C(f)
    leaf = L(4, seed=113, dtype=f32)
    s = Z(114)
    x = leaf.clone()
    out = g(x, M(True, True, False, True), s)
    _observe(R, out, {"x": x}, {"leaf": leaf, "s": s})


@prog()
def masked_fill_float_on_int_input(C, R):
    def f(n, m):
        n.masked_fill_(m, 1.75)
        return n

    g = C(f)
    n = I(5, 6, 7)
    out = g(n, M(True, False, True))
    _observe(R, out, {"n": n})


@prog()
def masked_scatter_source_grad(C, R):
    def f(x, m, src):
        x.masked_scatter_(m, src)
        return x * 3

    g = C(f)
    leaf = L(2, 3, seed=115)
    src = L(6, seed=116)
    x = leaf.clone()
    out = g(x, torch.tensor([[True, False, True], [False, True, False]]), src)
    _observe(R, out, {"x": x}, {"leaf": leaf, "src": src})


@prog()
def err_masked_scatter_other_dtype(C, R):
    def f(x, src):
        x.masked_scatter_(M(True, False, True), src)
        return x

    g = C(f)
    x = L(3, seed=117, dtype=f32, rg=False)
    R.step("call", lambda: g(x, L(3, seed=118)))
    ver(R, "x", x)


# =====================================================================
# copy_ and fill_
# =====================================================================
@prog()
def copy_from_f64_into_f32_clone(C, R):
    def f(x, y):
        x.copy_(y * 2)
        return x

    g = C(f)
    leaf = L(3, seed=119, dtype=f32)
    y = L(3, seed=120)
    x = leaf.clone()
    out = g(x, y)
    _observe(R, out, {"x": x}, {"leaf": leaf, "y": y})


@prog()
def copy_broadcast_row_into_nograd(C, R):
    def f(x, y):
        x.copy_(y)
        return x

    g = C(f)
    x = torch.zeros(3, 4, dtype=f32)
    y = L(4, seed=121)
    out = g(x, y)
    _observe(R, out, {"x": x}, {"y": y}, same=x)


@prog()
def copy_rg_into_nograd_returns_other(C, R):
    """``x.copy_(y)`` where only ``y`` requires grad; ``x`` is not returned."""

    def f(x, y):
        x.copy_(y)
        return y * 2

    g = C(f)
    x = torch.zeros(3, dtype=f64)
    y = L(3, seed=122)
    out = g(x, y)
    _observe(R, out, {"x": x}, {"y": y}, also=(x,))


@prog()
def copy_float_into_int_input(C, R):
    def f(n, y):
        n.copy_(y * 3)
        return n, y.sum()

    g = C(f)
    n = I(0, 0, 0, 0)
    y = L(4, seed=123)
    a, b = g(n, y)
    R.rec("a", a)
    _observe(R, b, {"n": n}, {"y": y}, name="b")


@prog()
def copy_into_view_of_base_other_dtype(C, R):
    def f(v, y):
        v.copy_(y)
        return v.sum()

    g = C(f)
    leaf = L(2, 3, seed=124, dtype=f32)
    base = leaf.clone()
    y = L(3, seed=125)
    out = g(base[1], y)
    _observe(R, out, {"base": base}, {"leaf": leaf, "y": y}, also=(base,))


@prog()
def fill_slice_with_zero_dim_leaf(C, R):
    def f(x, s):
        x[1:].fill_(s)
        return x

    g = C(f)
    leaf = L(4, seed=126)
    s = Z(127)
    x = leaf.clone()
    out = g(x, s)
    _observe(R, out, {"x": x}, {"leaf": leaf, "s": s})


@prog()
def fill_nograd_with_zero_dim_f64_leaf(C, R):
    def f(x, s):
        x.fill_(s)
        return x * torch.arange(3, dtype=x.dtype)

    g = C(f)
    x = torch.zeros(3, dtype=f32)
    s = Z(128)
    out = g(x, s)
    _observe(R, out, {"x": x}, {"s": s}, also=(x,))


@prog()
def fill_int_with_zero_dim_float(C, R):
    def f(n, s):
        n.fill_(s)
        return n + 1

    g = C(f)
    n = I(1, 2)
    out = g(n, torch.tensor(2.7))
    _observe(R, out, {"n": n})


@prog()
def zero_dim_input_copy_from_vector_sum(C, R):
    def f(s, v):
        s.copy_(v.sum())
        return s * v

    g = C(f)
    s = torch.tensor(0.0, dtype=f32)
    v = L(3, seed=129)
    out = g(s, v)
    _observe(R, out, {"s": s}, {"v": v}, also=(s,))


# =====================================================================
# views of one base, several writes
# =====================================================================
@prog()
def two_disjoint_slices_index_writes(C, R):
    def f(a, b, v):
        a.index_add_(0, I(0, 1), v)
        b.masked_fill_(b < 0, 0.0)
        return a.sum() + b.sum()

    g = C(f)
    leaf = L(6, seed=130)
    base = leaf.clone()
    v = L(2, seed=131)
    out = g(base[:3], base[3:], v)
    _observe(R, out, {"base": base}, {"leaf": leaf, "v": v}, also=(base,))


@prog()
def overlapping_slices_write_then_read(C, R):
    def f(a, b):
        a.mul_(2)
        return b * 1

    g = C(f)
    leaf = L(5, seed=132)
    base = leaf.clone()
    out = g(base[:3], base[1:4])
    _observe(R, out, {"base": base}, {"leaf": leaf}, also=(base,))


@prog()
def base_and_row_view_dtype_promotion(C, R):
    def f(base, row, y):
        row.add_(y)
        return base * 2

    g = C(f)
    leaf = L(2, 3, seed=133, dtype=f32)
    base = leaf.clone()
    y = L(3, seed=134)
    out = g(base, base[0], y)
    _observe(R, out, {"base": base}, {"leaf": leaf, "y": y})


@prog()
def index_tensor_input_modified_before_use(C, R):
    def f(x, idx, v):
        idx.add_(1)
        x.index_add_(0, idx, v)
        return x

    g = C(f)
    leaf = L(4, seed=135)
    x = leaf.clone()
    idx = I(0, 2)
    v = L(2, seed=136)
    out = g(x, idx, v)
    _observe(R, out, {"idx": idx}, {"leaf": leaf, "v": v})


@prog()
def bool_mask_input_flipped_then_used(C, R):
    def f(x, m):
        m.logical_not_()
        x.masked_fill_(m, 0.0)
        return x

    g = C(f)
    leaf = L(4, seed=137)
    x = leaf.clone()
    m = M(True, False, False, True)
    out = g(x, m)
    _observe(R, out, {"m": m}, {"leaf": leaf})


# =====================================================================
# second calls and no_grad
# =====================================================================
@prog()
def second_call_values_lose_requires_grad(C, R):
    def f(x, v):
        x.index_put_((I(1),), v)
        return x

    g = C(f)
    leaf = L(3, seed=138)
    v = L(1, seed=139)
    x1 = leaf.clone()
    o1 = g(x1, v)
    _observe(R, o1, {}, {"leaf1": leaf, "v1": v}, name="o1", bw_name="bw1")
    x2 = torch.zeros(3, dtype=f64)
    o2 = g(x2, v.detach())
    _observe(R, o2, {"x2": x2}, name="o2")
    x3 = torch.zeros(3, dtype=f64)
    o3 = g(x3, v)
    _observe(R, o3, {"x3": x3}, {"v3": v}, name="o3", bw_name="bw3")


@prog()
def second_call_other_dtype_promotion(C, R):
    def f(x, y):
        x.mul_(y)
        return x + 1

    g = C(f)
    for i, (dx, dy) in enumerate([(f32, f64), (f64, f32), (f32, i64)]):
        leaf = L(3, seed=140 + i, dtype=dx)
        y = L(3, seed=150 + i, dtype=dy, rg=dy.is_floating_point) if dy != i64 else I(1, -2, 3)
        x = leaf.clone()
        out = g(x, y)
        _observe(R, out, {f"x{i}": x}, {f"leaf{i}": leaf}, name=f"out{i}", bw_name=f"bw{i}")
        if y.requires_grad:
            grads(R, **{f"y{i}": y})


@prog()
def second_call_int_then_float_input(C, R):
    def f(x):
        x.add_(2)
        return x * 3

    g = C(f)
    n = I(1, 2, 3)
    o1 = g(n)
    _observe(R, o1, {"n": n}, name="o1")
    leaf = L(3, seed=143, dtype=f32)
    x = leaf.clone()
    o2 = g(x)
    _observe(R, o2, {"x": x}, {"leaf": leaf}, name="o2")


@prog()
def index_write_leaf_under_no_grad_call(C, R):
    def f(x, v):
        x.index_add_(0, I(0, 2), v)
        return x * 2

    g = C(f)
    x = L(3, seed=144)
    v = L(2, seed=145)
    with torch.no_grad():
        out = g(x, v)
    _observe(R, out, {"x": x})
    bw(R, x)
    grads(R, x=x, v=v)


@prog()
def promotion_write_under_no_grad_then_grad_call(C, R):
    def f(x, y):
        x.add_(y)
        return x.sum()

    g = C(f)
    x0 = torch.zeros(3, dtype=f32)
    y = L(3, seed=146)
    with torch.no_grad():
        o1 = g(x0, y)
    _observe(R, o1, {"x0": x0}, name="o1")
    x1 = torch.zeros(3, dtype=f32)
    o2 = g(x1, y)
    _observe(R, o2, {"x1": x1}, {"y": y}, name="o2")


@prog()
def masked_scatter_no_grad_inside_then_grad(C, R):
    def f(x, m, src):
        with torch.no_grad():
            x.masked_scatter_(m, src)
        return x * src[:3]

    g = C(f)
    leaf = L(3, seed=147)
    x = leaf.clone()
    src = L(4, seed=148)
    out = g(x, M(False, True, True), src)
    _observe(R, out, {"x": x}, {"leaf": leaf, "src": src})


@prog()
def module_int_counter_buffer_and_f32_param(C, R):
    class Mod(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(3, dtype=i64))
            self.register_buffer("acc", torch.zeros(3, dtype=f64))
            self.w = nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=f32))

        def forward(self, x, idx):
            self.count.index_add_(0, idx, torch.ones_like(idx))
            with torch.no_grad():
                self.acc.add_(x)
            return x * self.w + self.count

    m = Mod()
    g = C(m)
    for i in range(2):
        x = L(3, seed=149 + i)
        out = g(x, I(0, 2) if i == 0 else I(1, 1))
        _observe(
            R,
            out,
            {f"count{i}": m.count, f"acc{i}": m.acc},
            {f"w{i}": m.w, f"x{i}": x},
            name=f"out{i}",
            bw_name=f"bw{i}",
        )


@prog()
def return_view_of_written_int_and_float(C, R):
    def f(n, x, y):
        n[1:].add_(1)
        x[::2].copy_(y)
        return n[1:], x[::2], x[1]

    g = C(f)
    n = I(0, 0, 0)
    leaf = L(4, seed=151, dtype=f32)
    x = leaf.clone()
    y = L(2, seed=152)
    a, b, c = g(n, x, y)
    R.rec("a", a)
    R.rec("b", b)
    R.rec("c", c)
    ver(R, "n", n)
    ver(R, "x", x)
    bw(R, b, c)
    grads(R, leaf=leaf, y=y)
