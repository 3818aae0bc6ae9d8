"""Python state a compiled function changes (``aotgrad.python_state``): its calls run
eagerly, the trace's own changes set back, so that counters, logs and stashes hold what
eager's hold after every call (a blind suite: a global counter counted 2 and baked its
value into the graph; a log held two unreadable ``FunctionalTensor``s)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning

COUNTER = 0
LOG: list[Any] = []


def _global_counter() -> tuple[Callable, Callable]:
    def f(x):
        global COUNTER
        COUNTER += 1
        return x * COUNTER

    def state():
        return COUNTER

    return f, state


def _global_log_of_items() -> tuple[Callable, Callable]:
    def f(x):
        LOG.append(x.sum().item())
        return x.sin()

    return f, lambda: list(LOG)


def _closure_stash() -> tuple[Callable, Callable]:
    stash: dict[str, Any] = {}

    def f(x):
        h = x.exp()
        stash["h"] = h  # (used by the caller: its gradient flows)
        return h.sum()

    return f, lambda: {k: v.detach().clone() for k, v in stash.items()}


def _nonlocal_counter() -> tuple[Callable, Callable]:
    n = 0

    def f(x):
        nonlocal n
        n += 1
        return x + n

    return f, lambda: n


def _set_of_shapes() -> tuple[Callable, Callable]:
    seen: set = set()

    def f(x):
        seen.add(("called", len(seen)))
        return x.cos()

    return f, lambda: sorted(seen)


PROGRAMS = [
    _global_counter,
    _global_log_of_items,
    _closure_stash,
    _nonlocal_counter,
    _set_of_shapes,
]


def _run(make: Callable, compiled: bool) -> list[Any]:
    global COUNTER
    COUNTER = 0
    LOG.clear()
    f, state = make()
    run = aotgrad.aot_function(f, aotgrad.nop) if compiled else f
    seen = []
    for k in range(3):
        x = torch.linspace(-1, 1, 4, dtype=torch.float64).add(k).requires_grad_()
        out = run(x)
        out.sum().backward()
        seen.append((out.detach(), x.grad, state()))
    return seen


def _same(got: Any, want: Any) -> None:
    if isinstance(want, torch.Tensor):
        assert type(got) is torch.Tensor
        torch.testing.assert_close(got, want)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    else:
        assert got == want


@pytest.mark.parametrize("make", PROGRAMS, ids=lambda m: m.__name__.strip("_"))
def test_state_the_function_changes_is_eagers_after_every_call(make: Callable) -> None:
    want = _run(make, False)
    with pytest.warns(EagerReplayWarning, match="changes Python state"):
        got = _run(make, True)
    _same(got, want)


def test_state_only_read_keeps_the_function_compiled() -> None:
    scale = {"k": 3.0}

    def f(x):
        return x * scale["k"] + COUNTER

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        for _ in range(2):
            x = torch.ones(3, requires_grad=True)
            compiled(x).sum().backward()
            torch.testing.assert_close(x.grad, torch.full((3,), 3.0))
    assert compiled.artifacts  # (compiled, not replayed)


class _Logged(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x):
        y = self.lin(x)
        LOG.append(y.detach())
        return y.relu().sum()


def test_a_modules_forward_logging_to_a_global_list_is_eagers() -> None:
    torch.manual_seed(0)
    module = _Logged()
    runs = []
    for run in (module, aotgrad.aot_module(module, aotgrad.nop)):
        LOG.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EagerReplayWarning)
            for k in range(2):
                run(torch.full((2, 3), float(k))).backward()
        runs.append(list(LOG))
    _same(runs[1], runs[0])


def test_drawing_from_pythons_or_numpys_generator_runs_eagerly_with_eagers_draws() -> None:
    """``random.random()`` inside: a trace baked one draw into the graph (every call
    scaled by it) and moved the generator twice; eager draws once per call."""
    import random

    import numpy as np

    def py(x):
        return x * random.random()

    def npy(x):
        return x * float(np.random.rand())

    for fn in (py, npy):
        compiled = aotgrad.aot_function(fn, aotgrad.nop)
        draws = []
        for run in (fn, compiled):
            random.seed(0)
            np.random.seed(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EagerReplayWarning)
                draws.append([run(torch.ones(1)).item() for _ in range(3)])
            draws.append((random.random(), float(np.random.rand())))  # (where they left off)
        assert draws[2:] == draws[:2]


SCALE = 1.0
CONFIG = {"scale": 1.0}


class _Cfg:
    scale = 1.0


def test_plain_values_the_caller_changes_between_calls_are_read_again() -> None:
    """A trace bakes ``SCALE`` into the graph: eager reads the caller's new value every
    call. The values read are part of the guard (``ReadValues``): a change retraces."""
    global SCALE
    cfg = _Cfg()

    def f(x):
        return x * SCALE * CONFIG["scale"] * cfg.scale

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    try:
        for k, (a, b, c) in enumerate([(1.0, 1.0, 1.0), (2.0, 1.0, 1.0), (2.0, 3.0, 0.5)]):
            SCALE, CONFIG["scale"], cfg.scale = a, b, c
            x = torch.ones(2, requires_grad=True)
            out = compiled(x)
            out.sum().backward()
            torch.testing.assert_close(out, torch.full((2,), a * b * c), msg=str(k))
            torch.testing.assert_close(x.grad, torch.full((2,), a * b * c))
    finally:
        SCALE, CONFIG["scale"] = 1.0, 1.0
    assert compiled.compilations == 3


def test_a_value_the_caller_keeps_changing_runs_eagerly_past_the_limit() -> None:
    """A step count read by the function: each new value retraces, up to
    ``recompile_limit``; past it, those calls run eagerly (not a ``GuardError``)."""
    global SCALE

    def f(x):
        return x * SCALE

    compiled = aotgrad.aot_function(f, aotgrad.nop, recompile_limit=3)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for step in range(6):
                SCALE = float(step)
                torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), float(step)))
    finally:
        SCALE = 1.0
    assert compiled.compilations == 3
    assert any(issubclass(w.category, EagerReplayWarning) for w in seen)


def test_a_counter_the_function_changes_is_not_guarded() -> None:
    """The function's own writes run eagerly (``refuse_changes``) and are not part of the
    guard: one retrace, not one per call."""
    global COUNTER
    COUNTER = 0

    def f(x):
        global COUNTER
        COUNTER += 1
        return x * COUNTER

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EagerReplayWarning)
        outs = [compiled(torch.ones(1)).item() for _ in range(5)]
    assert outs == [1.0, 2.0, 3.0, 4.0, 5.0] and COUNTER == 5
    assert len(compiled.eager.keys) <= 2


def test_an_iterator_the_function_reads_runs_it_eagerly_without_taking_an_item() -> None:
    """``next(scales)`` inside: a trace took two items (metadata, joint) and froze the
    second; what a trace takes cannot be put back, so the calls run eagerly before any
    trace runs."""
    import itertools

    got = []
    for compile_it in (False, True):
        steps = itertools.count()

        def f(x, steps=steps):
            return x * next(steps)

        run = aotgrad.aot_function(f, aotgrad.nop) if compile_it else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EagerReplayWarning)
            got.append([run(torch.ones(1)).item() for _ in range(3)] + [next(steps)])
    assert got[1] == got[0] == [0.0, 1.0, 2.0, 3]


def _turns_autocast_on(x, w):
    torch.set_autocast_enabled("cpu", True)  # (left on: eager's later ops run under it)
    return x @ w


def test_a_function_leaving_autocast_on_runs_eagerly_every_call() -> None:
    """A trace set it once (blind autocast suite: from the second call the caller's
    autocast stayed off, its next ``x @ w`` in float32 where eager's is bfloat16)."""
    seen, caught = [], []
    for run in (_turns_autocast_on, aotgrad.aot_function(_turns_autocast_on, aotgrad.nop)):
        states = []
        for _ in range(2):
            x, w = torch.randn(3, 4), torch.randn(4, 2)
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                out = run(x, w)
            caught += warned
            states.append((out.dtype, torch.is_autocast_enabled("cpu")))
            torch.set_autocast_enabled("cpu", False)
        seen.append(states)
    assert seen[1] == seen[0] == [(torch.bfloat16, True)] * 2
    assert any(isinstance(w.message, EagerReplayWarning) for w in caught)
