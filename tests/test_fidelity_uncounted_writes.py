"""Writes eager does not count: batch norm's kernels update the running statistics
without moving their version counters (their schemas do not mark them written), so a
training-mode model can run forward twice before one backward (``D(real) + D(fake)``,
summed micro-batches) although its backward nodes saved ``running_mean``. The compiled
call must leave the counters where eager does: it counted the write, and the second
forward made the first backward raise "modified by an inplace operation" (blind H1).
A write the caller makes (``reset_running_stats()``) still counts, as in eager.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition
from eager_oracle import COMPILERS, assert_like_eager

DT = torch.float64


def _bn_inputs():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 4, generator=g, dtype=DT, requires_grad=True)
    w = torch.randn(4, generator=g, dtype=DT, requires_grad=True)
    b = torch.randn(4, generator=g, dtype=DT, requires_grad=True)
    rm, rv = torch.zeros(4, dtype=DT), torch.ones(4, dtype=DT)
    return [x, rm, rv, w, b], [x, w, b]


def _functional_bn(x, rm, rv, w, b):
    return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)


def _torch_batch_norm(x, rm, rv, w, b):
    return torch.batch_norm(x, w, b, rm, rv, True, 0.3, 1e-5, False).tanh()


def _native_batch_norm(x, rm, rv, w, b):
    out, mean, _invstd = torch.native_batch_norm(x, w, b, rm, rv, True, 0.3, 1e-5)
    return out, mean


def _bn_then_written_stat(x, rm, rv, w, b):
    # a write the function itself makes after batch norm's counts, as in eager
    y = F.batch_norm(x, rm, rv, w, b, training=True)
    rm.mul_(0.5)
    return y


@pytest.mark.parametrize("compiler", list(COMPILERS))
@pytest.mark.parametrize(
    "fn", [_functional_bn, _torch_batch_norm, _native_batch_norm, _bn_then_written_stat]
)
def test_running_statistics_keep_eagers_version_counts(fn, compiler):
    assert_like_eager(fn, _bn_inputs, COMPILERS[compiler], calls=2)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Tanh(), nn.Linear(4, 1)).to(DT)


def _aot_module(partition_fn):
    return lambda m: aotgrad.aot_module(m, aotgrad.nop, partition_fn=partition_fn)


def _dynamo(backend, partitioner):
    def wrap(m):
        torch._dynamo.reset()
        return torch.compile(m, backend=backend, options={"partitioner": partitioner})

    return wrap


WRAPS = {
    "aot_module-min_cut": _aot_module(min_cut_rematerialization_partition),
    "aot_module-default": _aot_module(default_partition),
    "aotgrad_eager-min_cut": _dynamo("aotgrad_eager", "min_cut"),
    "aotgrad_eager-default": _dynamo("aotgrad_eager", "default"),
}


def _between_nothing(m, f):
    pass


def _between_no_grad_call(m, f):
    with torch.no_grad():
        f(torch.randn(5, 3, dtype=DT))


def _between_reset(m, f):
    m[1].reset_running_stats()  # the caller's write: eager's backward raises


def _two_forwards_one_backward(wrap, between):
    m = _model()
    f = wrap(m)
    torch.manual_seed(1)
    a, b = torch.randn(5, 3, dtype=DT), torch.randn(5, 3, dtype=DT)
    loss = f(a).sum()
    between(m, f)
    loss = loss + f(b).sum()
    try:
        loss.backward()
    except RuntimeError as e:
        return type(e), None
    bn = m[1]
    return None, (
        [p.grad.clone() for p in m.parameters()],
        bn.running_mean.clone(),
        bn.running_var.clone(),
        bn.running_mean._version,
        bn.num_batches_tracked.item(),
    )


@pytest.mark.parametrize("between", [_between_nothing, _between_no_grad_call, _between_reset])
@pytest.mark.parametrize("wrap", list(WRAPS))
def test_batch_norm_model_two_forwards_one_backward(wrap, between):
    expected = _two_forwards_one_backward(lambda m: m, between)
    got = _two_forwards_one_backward(WRAPS[wrap], between)
    assert got[0] == expected[0]
    if expected[1] is None:
        return
    grads, rm, rv, version, batches = got[1]
    e_grads, e_rm, e_rv, e_version, e_batches = expected[1]
    for g, e in zip(grads, e_grads):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(rm, e_rm)
    torch.testing.assert_close(rv, e_rv)
    assert (version, batches) == (e_version, e_batches)


def test_batch_norm_model_two_forwards_one_backward_under_inductor():
    expected = _two_forwards_one_backward(lambda m: m, _between_nothing)
    got = _two_forwards_one_backward(_dynamo("aotgrad", "min_cut"), _between_nothing)
    assert got[0] is None
    for g, e in zip(got[1][0], expected[1][0]):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[1][1], expected[1][1])
