"""aotgrad from several threads at once: compiling, partitioning (in Rust,
with the GIL released) and running must give each thread correct results."""

from __future__ import annotations

import threading

import pytest
import torch

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]
N_THREADS = 2
ROUNDS = 4


def _fn(x, w, scale):
    h = torch.tanh(x @ w) * scale
    return (h.softmax(-1) * h).sum(), h.t()


def _run_threads(target):
    """Runs ``target(i)`` in N_THREADS threads released together; re-raises failures."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(N_THREADS)

    def body(i):
        try:
            barrier.wait()
            target(i)
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def _check_call(compiled, i, r):
    g = torch.Generator().manual_seed(100 * i + r)
    n = 3 + (i + r) % 3  # different shapes: guards miss, recompiles race
    x = torch.randn(n, 8, generator=g, dtype=torch.float64)
    w = torch.randn(8, 8, generator=g, dtype=torch.float64, requires_grad=True)
    w_ref = w.detach().clone().requires_grad_()
    scale = 0.5 + i
    loss, ht = compiled(x, w, scale)
    loss_ref, ht_ref = _fn(x, w_ref, scale)
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(ht, ht_ref)
    (loss + ht.sum()).backward()
    (loss_ref + ht_ref.sum()).backward()
    torch.testing.assert_close(w.grad, w_ref.grad)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_one_shared_function_from_two_threads(partition_fn):
    compiled = aotgrad.aot_function(_fn, aotgrad.nop, partition_fn=partition_fn)

    def target(i):
        for r in range(ROUNDS):
            _check_call(compiled, i, r)

    _run_threads(target)


@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_separate_functions_compiled_concurrently(partition_fn):
    def target(i):
        for r in range(ROUNDS):
            compiled = aotgrad.aot_function(_fn, aotgrad.nop, partition_fn=partition_fn)
            _check_call(compiled, i, r)

    _run_threads(target)


def test_rust_partitioner_from_two_threads():
    """Both threads partition the same joint graph in Rust at once (the binding
    releases the GIL): each gets the single-threaded decision."""
    from aotgrad.partition import partition_joint
    from graphs import transformer_joint

    j = transformer_joint(8)
    expected = {
        kind: partition_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs, kind=kind)
        for kind in ("default", "min_cut")
    }
    results: dict[int, list] = {}

    def target(i):
        out = []
        for r in range(ROUNDS):
            kind = ("default", "min_cut")[(i + r) % 2]
            got = partition_joint(j.gm, num_fwd_outputs=j.num_fwd_outputs, kind=kind)
            out.append((kind, got))
        results[i] = out

    _run_threads(target)
    for i in range(N_THREADS):
        for kind, got in results[i]:
            want = expected[kind]
            assert (got.placement == want.placement).all()
            assert (got.saved == want.saved).all()
            assert (got.recomputed == want.recomputed).all()
            assert got.saved_bytes == want.saved_bytes
