"""Random short programs through aotgrad, against eager PyTorch.

A program is a list of steps over a pool of 4x4 float64 values: elementwise
ops, reductions (keepdim, so they broadcast back), matmuls, views, in-place
updates of non-leaf intermediates (directly and through a view) and of an
input that does not require grad, and non-tensor arguments (a float, an int,
a bool) passed to the function. Each program runs eagerly and through
``aotgrad.aot_function(fn, aotgrad.nop, partition_fn=...)`` with both
partitioners; outputs, gradients and the inputs after the call must agree.

``make test`` checks ``AOTGRAD_RANDOM_PROGRAMS`` programs (default 250, each
with both partitioners), the same ones every run; ``make soak`` draws 2000 fresh
ones (``AOTGRAD_RANDOM_FRESH=1``). A failing program is
printed as its step list: paste it into ``tests/test_regressions.py``.
"""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]

# Inputs: x, y require grad; buf does not (and may be mutated); alpha, k, flag
# are non-tensor arguments. Pool indices 0, 1, 2 are x, y, buf.
N_TENSOR_INPUTS = 3

UNARY = {
    "sin": torch.sin,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "neg": torch.neg,
    "exp_tanh": lambda a: torch.exp(a.tanh()),
    "square": lambda a: a * a,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "matmul": torch.matmul,
    "where": lambda a, b: torch.where(a > 0, a, b),
}
REDUCE = {
    "sum": lambda a, d: a.sum(d, keepdim=True),
    "mean": lambda a, d: a.mean(d, keepdim=True),
    "amax": lambda a, d: a.amax(d, keepdim=True),
    "logsumexp": lambda a, d: a.logsumexp(d, keepdim=True),
}
VIEW = {
    "t": lambda a: a.t(),
    "reshape": lambda a: a.view(16).view(2, 8).view(4, 4),
    "unsqueeze": lambda a: a.unsqueeze(0).squeeze(0),
    "slice_cat": lambda a: torch.cat([a[:, 2:], a[:, :2]], 1),
    "expand": lambda a: a[:1].expand(4, 4),
}
SCALAR = {
    "mul_alpha": lambda a, alpha, k, flag: a * alpha,
    "pow_k": lambda a, alpha, k, flag: a.pow(k),
    "clamp_alpha": lambda a, alpha, k, flag: a.clamp(min=-alpha, max=alpha),
    "branch_flag": lambda a, alpha, k, flag: a.cos() if flag else a + k,
}
INPLACE = {
    "add_": lambda t, o: t.add_(o),
    "mul_": lambda t, o: t.mul_(o),
    "t_mul_": lambda t, o: t.t().mul_(o),
    "row_copy_": lambda t, o: t[1].copy_(o[0]),
    "row_setitem_col": lambda t, o: t.__setitem__(1, o[:, 0]),
    "col_copy_row": lambda t, o: t[:, 2].copy_(o[1]),
    "relu_": lambda t, o: t.relu_(),
}
BUF_INPLACE = {
    "buf_add_": lambda b, alpha: b.add_(alpha),
    "buf_mul_": lambda b, alpha: b.mul_(2.0),
    "buf_copy_": lambda b, alpha: b.copy_(b.t() * alpha),
}


@st.composite
def programs(draw):
    """A list of steps ``(kind, name, operands...)``; the pool grows by one per step."""
    steps = []
    size = N_TENSOR_INPUTS
    intermediates: list[int] = []
    input_views: set[int] = set()
    for _ in range(draw(st.integers(1, 8))):
        pick = st.integers(0, size - 1)
        kind = draw(
            st.sampled_from(["unary", "binary", "reduce", "view", "scalar", "inplace", "buf"])
        )
        if kind == "inplace" and not intermediates:
            kind = "unary"
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), draw(pick)))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), draw(pick), draw(pick)))
        elif kind == "reduce":
            name = draw(st.sampled_from(sorted(REDUCE)))
            steps.append(("reduce", name, draw(pick), draw(st.integers(0, 1))))
        elif kind == "view":
            base = draw(pick)
            steps.append(("view", draw(st.sampled_from(sorted(VIEW))), base))
            if base < N_TENSOR_INPUTS or base in input_views:
                # Mutating a view of an input with a value that requires grad is
                # a known bug (tests/test_regressions.py, xfail): not drawn.
                input_views.add(size)
                size += 1
                continue
        elif kind == "scalar":
            steps.append(("scalar", draw(st.sampled_from(sorted(SCALAR))), draw(pick)))
        elif kind == "inplace":
            # Mutate a non-leaf intermediate; the pool entry is the mutated value.
            name = draw(st.sampled_from(sorted(INPLACE)))
            steps.append(("inplace", name, draw(st.sampled_from(intermediates)), draw(pick)))
            continue
        else:
            steps.append(("buf", draw(st.sampled_from(sorted(BUF_INPLACE)))))
            continue
        intermediates.append(size)
        size += 1
    n_out = draw(st.integers(1, 3))
    outs = draw(st.lists(st.integers(0, size - 1), min_size=n_out, max_size=n_out))
    args = (
        draw(st.sampled_from([0.5, 1.5, -2.0])),
        draw(st.integers(1, 3)),
        draw(st.booleans()),
    )
    return steps, outs, args


def build(steps, outs):
    """The Python function of a program: ``fn(x, y, buf, alpha, k, flag)``."""

    def fn(x, y, buf, alpha, k, flag):
        pool = [x, y, buf]
        for step in steps:
            kind, name, *ops = step
            if kind == "unary":
                pool.append(UNARY[name](pool[ops[0]]))
            elif kind == "binary":
                pool.append(BINARY[name](pool[ops[0]], pool[ops[1]]))
            elif kind == "reduce":
                pool.append(REDUCE[name](pool[ops[0]], ops[1]) + pool[ops[0]])
            elif kind == "view":
                pool.append(VIEW[name](pool[ops[0]]))
            elif kind == "scalar":
                pool.append(SCALAR[name](pool[ops[0]], alpha, k, flag))
            elif kind == "inplace":
                INPLACE[name](pool[ops[0]], pool[ops[1]])
            else:
                with torch.no_grad():
                    BUF_INPLACE[name](buf, alpha)
        return (*(pool[i] for i in outs), k)

    return fn


def make_inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    y = torch.randn(4, 4, generator=g, dtype=torch.float64, requires_grad=True)
    buf = torch.randn(4, 4, generator=g, dtype=torch.float64)
    return [x, y, buf]


def _clone(ts):
    return [t.detach().clone().requires_grad_(t.requires_grad) for t in ts]


def run_eager(fn, tensors, scalars):
    """Outputs, grads and inputs after the call, or None when eager itself refuses."""
    ts = _clone(tensors)
    try:
        outs = fn(*ts, *scalars)
        _backward(outs)
    except RuntimeError:
        return None  # e.g. a value saved for backward was overwritten in place
    return outs, ts


def _backward(outs):
    gen = torch.Generator().manual_seed(1)
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
    if diff:
        cots = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in diff]
        torch.autograd.backward(diff, cots)


def check_program(steps, outs, scalars, partition_fn, seed=0):
    """Asserts that aotgrad agrees with eager on one program (skips eager refusals)."""
    fn = build(steps, outs)
    tensors = make_inputs(seed)
    ref = run_eager(fn, tensors, scalars)
    if ref is None:
        return False
    ref_outs, ref_ts = ref
    ts = _clone(tensors)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)
    got = compiled(*ts, *scalars)
    assert len(got) == len(ref_outs)
    for r, o in zip(ref_outs, got):
        if isinstance(r, torch.Tensor):
            torch.testing.assert_close(o, r, equal_nan=True)
            assert o.requires_grad == r.requires_grad
        else:
            assert o == r
    _backward(got)
    for r, a in zip(ref_ts, ts):
        torch.testing.assert_close(a, r, equal_nan=True)  # inputs after the call
        assert a.requires_grad == r.requires_grad
        if r.is_leaf and r.requires_grad:
            torch.testing.assert_close(a.grad, r.grad, equal_nan=True)
    return True


N_PROGRAMS = int(os.environ.get("AOTGRAD_RANDOM_PROGRAMS", "250"))
#: ``make test`` draws the same programs every run (a CI verdict does not depend on the
#: draw); ``make soak`` sets ``AOTGRAD_RANDOM_FRESH=1`` to draw new ones each time.
FRESH = bool(os.environ.get("AOTGRAD_RANDOM_FRESH"))


@settings(
    max_examples=N_PROGRAMS,
    derandomize=not FRESH,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(programs())
def test_random_program_matches_eager(prog):
    steps, outs, scalars = prog
    note = f"steps={steps!r}, outs={outs!r}, scalars={scalars!r}"
    for partition_fn in PARTITIONERS:
        try:
            ok = check_program(steps, outs, scalars, partition_fn)
        except Exception as e:
            raise AssertionError(f"{partition_fn.__name__}: {note}") from e
        assume(ok)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_a_fixed_program_of_every_kind(partition_fn):
    steps = [
        ("binary", "matmul", 0, 1),
        ("reduce", "logsumexp", 3, 1),
        ("view", "t", 4),
        ("inplace", "add_", 4, 2),
        ("scalar", "pow_k", 5),
        ("buf", "buf_add_"),
        ("unary", "tanh", 6),
    ]
    assert check_program(steps, [7, 5, 2], (1.5, 2, True), partition_fn)


#: Programs the random test drew that failed once: (steps, outs, scalars).
DRAWN = [
    # an in-place copy from a transposed row of the written tensor: eager copies the
    # elements in order, each reading what the one before wrote (``ordered_copies``)
    (
        [("unary", "exp_tanh", 0), ("view", "t", 3), ("inplace", "row_copy_", 3, 4)],
        [0],
        (0.5, 1, False),
    ),
]


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
@pytest.mark.parametrize("drawn", DRAWN, ids=lambda d: "-".join(s[1] for s in d[0]))
def test_a_program_drawn_before(drawn, partition_fn):
    steps, outs, scalars = drawn
    assert check_program(steps, outs, scalars, partition_fn)
