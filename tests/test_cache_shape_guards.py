"""A cached specialisation brings its symbolic-shape guards (``aotgrad.shape_guards``).

Under Dynamo with dynamic sizes, tracing ``x.split(3, 1)`` specialises the width where
the backward reads the last piece's size: the trace adds that guard to Dynamo's shape
environment, and Dynamo recompiles for another width. Taken from the in-process or the
on-disk cache, the graph was not traced again and the guard was never added: Dynamo
reused the graph for a width the compiled backward had not seen ("invalid gradient ...
got [5, 7] but expected shape compatible with [5, 9]"; blind dynamic-shapes suite).
"""

from __future__ import annotations

import pytest
import torch

import aotgrad  # noqa: F401 - registers the backends
from aotgrad import cache


def _split_sum(x, w):
    return sum(p.sum(1) for p in x.split(3, 1)) * w[: x.shape[0]]


SHAPES = [(2, 3), (4, 7), (5, 9), (3, 8)]


def _gradients(fn):
    torch._dynamo.reset()
    g = torch.compile(fn, backend="aotgrad_eager")
    w = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    found = []
    for k, shape in enumerate(SHAPES):
        x = torch.linspace(-2, 2, shape[0] * shape[1], dtype=torch.float64)
        x = x.reshape(shape).requires_grad_()
        found.append(torch.autograd.grad(g(x, w).sum() * (k + 1), [x, w]))
    torch._dynamo.reset()
    return found


def _eager():
    w = torch.linspace(-1, 1, 5, dtype=torch.float64, requires_grad=True)
    found = []
    for k, shape in enumerate(SHAPES):
        x = torch.linspace(-2, 2, shape[0] * shape[1], dtype=torch.float64)
        x = x.reshape(shape).requires_grad_()
        found.append(torch.autograd.grad(_split_sum(x, w).sum() * (k + 1), [x, w]))
    return found


@pytest.mark.parametrize("reload", ["in_process", "on_disk"])
def test_a_cache_hit_adds_the_guards_its_trace_added(reload, tmp_path, monkeypatch):
    monkeypatch.setenv("AOTGRAD_CACHE_DIR", str(tmp_path))
    cache.memory_clear()
    want = _eager()
    first = _gradients(_split_sum)  # traced: fills both caches
    if reload == "on_disk":
        cache.memory_clear()
    again = _gradients(_split_sum)  # every specialisation from a cache
    for got in (first, again):
        for (gx, gw), (ex, ew) in zip(got, want, strict=True):
            torch.testing.assert_close(gx, ex)
            torch.testing.assert_close(gw, ew)
    cache.memory_clear()
