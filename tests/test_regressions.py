"""Regression tests for bugs found by the reliability work (issue 9): the
random programs, the fuzzers and the concurrency tests. Each test names the
bug it pins."""

from __future__ import annotations

import threading

import pytest
import torch

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition

PARTITIONERS = [default_partition, min_cut_rematerialization_partition]


def test_tracing_from_two_threads_at_once():
    """Bug: two threads compiling aotgrad functions at the same time failed with
    ``AssertionError: CURRENT_PATCHER is None in finally block``. make_fx keeps
    its patcher in a torch.fx module global, so concurrent traces clobbered each
    other. Fix: ``aotgrad.trace`` holds a process-wide re-entrant lock while
    tracing (``_TRACE_LOCK`` in ``_tracing_modes``)."""

    def fn(x, w):
        return (x @ w).tanh().sum()

    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def body(i):
        try:
            barrier.wait()
            for r in range(3):
                x = torch.randn(2 + i + r, 4)
                w = torch.randn(4, 4, requires_grad=True)
                w_ref = w.detach().clone().requires_grad_()
                out = aotgrad.aot_function(fn, aotgrad.nop)(x, w)
                ref = fn(x, w_ref)
                torch.testing.assert_close(out, ref)
                out.backward()
                ref.backward()
                torch.testing.assert_close(w.grad, w_ref.grad)
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]


@pytest.mark.parametrize("through_view", [False, True])
@pytest.mark.parametrize("partition_fn", PARTITIONERS)
def test_input_mutated_with_a_value_that_requires_grad(partition_fn, through_view):
    """Found by tests/test_random_programs.py (soak): steps
    ``[('view', 'reshape', 2), ('unary', 'exp_tanh', 0), ('unary', 'exp_tanh', 0),
    ('inplace', 'add_', 3, 0)]``, outs ``[2]``: ``buf.view(...).add_(x)``. Eager gives
    ``buf`` a grad_fn; aotgrad wrote the right values but lost that history, so gradients
    through ``buf`` were silently dropped. (Refused in session 1; since the alias analysis
    the new value is a differentiable output copied in with grad mode on.)"""

    def fn(x, buf):
        if through_view:
            buf.view(16).add_(x.view(16))
        else:
            buf.add_(x)
        return x.sin()

    x = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    compiled = aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)
    buf, ref_buf = torch.ones(4, 4, dtype=torch.float64), torch.ones(4, 4, dtype=torch.float64)
    out = compiled(x, buf)
    ref = fn(x, ref_buf)
    torch.testing.assert_close(buf, ref_buf)
    assert buf.requires_grad and buf.grad_fn is not None
    (g,) = torch.autograd.grad((out * 3).sum() + (buf * buf).sum(), x)
    (ref_g,) = torch.autograd.grad((ref * 3).sum() + (ref_buf * ref_buf).sum(), x)
    torch.testing.assert_close(g, ref_g)  # the gradient through buf is 2 * buf, not lost


def test_saved_tensors_released_by_ctx_but_kept_for_retain_graph():
    """The runtime drops ctx's references to saved activations when the backward starts
    (so a boxed backward frees each after its last use: 28.0 -> 25.5 MiB peak on a 4-layer
    MLP under backend="aotgrad", equal to backend="inductor"), but only when the graph is
    not retained: a second backward with retain_graph=True must still work."""
    import weakref

    def fn(x, w):
        return (x @ w).relu().sum()

    compiled = aotgrad.aot_function(fn, aotgrad.nop)
    x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    out = compiled(x, w)
    out.backward(retain_graph=True)
    first = w.grad.clone()
    out.backward()
    torch.testing.assert_close(w.grad, 2 * first)

    freed = []

    def spy(gm, example_inputs):
        def run(args):
            refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
            values = list(args)
            args.clear()  # what Inductor's boxed call does
            result = gm(*values)
            del values
            freed.append(sum(r() is None for r in refs))
            return result

        run._boxed_call = True
        return run

    compiled = aotgrad.aot_function(fn, aotgrad.nop, bw_compiler=spy)
    compiled(x, w).backward()
    # The activation (relu's input or mask) died inside the backward, not after it.
    assert freed and freed[0] >= 1


@pytest.mark.parametrize("entry", ["aot_module", "dynamo"])
def test_parameters_are_free_to_save_so_weight_transposes_are_not_saved(entry):
    """A parameter lives for the whole step, so saving it costs no memory (torch's
    treat_parameters_as_free_to_save): the min cut saves the weight and recomputes its
    transpose in the backward. Before, the forward computed and returned ``t(weight)`` for
    every Linear (17 extra forward outputs on a 4-layer GPT)."""
    import aotgrad.observe as observe

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    artifacts = []
    unregister = observe.on_compiled(artifacts.append)
    try:
        if entry == "aot_module":
            compiled = aotgrad.aot_module(model, aotgrad.nop)
        else:
            torch._dynamo.reset()
            compiled = torch.compile(model, backend="aotgrad_eager", options={"cache": False})
        x = torch.randn(5, 8)
        compiled(x).sum().backward()
    finally:
        unregister()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)
    fw = artifacts[-1].forward
    outputs = fw.graph.output_node().args[0]
    transposes = (torch.ops.aten.t.default, torch.ops.aten.permute.default)
    saved_views = [
        o.name for o in outputs if isinstance(o, torch.fx.Node) and o.target in transposes
    ]
    assert saved_views == []  # no transpose of a weight is saved (the weight is)
    saved_params = [o for o in outputs if isinstance(o, torch.fx.Node) and o.op == "placeholder"]
    assert len(saved_params) >= 2
    bw_targets = {n.target for n in artifacts[-1].backward.graph.nodes}
    assert bw_targets & {torch.ops.aten.t.default, torch.ops.aten.permute.default}
