"""The process survives what a trace leaves behind when the function raises, and a trace
does not hang.

Soak 239468 aborted the interpreter ("cannot call get_autograd_meta() on undefined
tensor", from ``traverse_node``): the trace holds the accumulators of leaf views it moved
into the graph's interior (``EagerCalls.leaf_nodes``); a custom Function's ``mark_dirty``
write resets such a node's variable, and when the function then raised (here as eager
does: an in-place write to a view of a leaf that requires grad), the error's frames kept
the node alive after its graph, and the next cyclic collection traversed it: a torch bug
that kills the process. ``trace.failures`` now drops the held nodes from those frames.
Run in a subprocess: a regression is an abort, not an exception.

Soak 239762 hung (no CPU used): a stand-in for a view input requiring grad of a base
that does not (``gradless_bases``) was asked for its ``grad_fn`` inside an op the trace
dispatched while autograd rebuilt that view's node, whose lock the read takes again. A
view written since the function started is not asked (its node is another one anyway).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import gc
    import torch
    import aotgrad


    class DirtyMul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2


    def f(x0, x2, x3, x5):
        x2[0].copy_(x0.sum())
        DirtyMul.apply(x3)
        x3[:, 1:3].mul_(2)
        x5.mul_(1j)  # eager raises here: a view of a leaf that requires grad
        return x0, x5


    def inputs():
        x0 = torch.randn(4, 4, dtype=torch.float64, requires_grad=True).clone()
        b2 = torch.randn(8, 4, dtype=torch.float64)
        x2, x3 = b2[:4], b2[4:]
        x3.requires_grad_()
        leaf = torch.randn(4, 4, 2, dtype=torch.float64, requires_grad=True)
        return x0, x2, x3, torch.view_as_complex(leaf)


    for fn in (f, aotgrad.aot_function(f, aotgrad.nop)):
        try:
            fn(*inputs())
        except RuntimeError as e:
            print("raised:", str(e).splitlines()[0])
        gc.collect()
    print("survived")
    """
)


def test_a_trace_that_raised_leaves_nothing_the_gc_aborts_on(tmp_path) -> None:
    env = {**os.environ, "AOTGRAD_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "survived"
    # eager's error, and the compiled call's the same
    assert (
        lines[:2]
        == [
            "raised: a view of a leaf Variable that requires grad is being used "
            "in an in-place operation."
        ]
        * 2
    )


def test_a_view_input_written_under_no_grad_does_not_hang_the_trace(tmp_path) -> None:
    env = {**os.environ, "AOTGRAD_CACHE_DIR": str(tmp_path)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(root, "python"), os.path.join(root, "tests")])
    script = os.path.join(root, "tests", "fidelity_programs.py")
    done = subprocess.run(
        [sys.executable, script, "239762", "aot_function_mincut"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "== aot_function_mincut: ok" in done.stdout
