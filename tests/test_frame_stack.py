"""aotgrad.frame_stack: compilation runs with room on CPython's frame stack, so calls
at a depth straddling a 16 KiB frame-chunk boundary stop mapping a chunk each time."""

from __future__ import annotations

import resource
import sys

import pytest
import torch

from aotgrad import frame_stack
from aotgrad.frame_stack import with_frame_room


def _down(n: int) -> int:
    return 0 if n == 0 else _down(n - 1) + 1


def _faults_of_deep_calls(times: int = 5_000, depth: int = 300) -> int:
    """Minor page faults while calling ``depth`` frames deep ``times`` times: 300 frames
    take more than one 16 KiB chunk, so each round trip crosses a boundary."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(times):
        _down(depth)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_deep_calls_fault_no_pages_inside_the_room():
    plain = _faults_of_deep_calls()
    if plain < 5_000:
        pytest.skip(f"this interpreter keeps its frame chunks ({plain} faults): nothing to fix")
    roomy = with_frame_room(_faults_of_deep_calls)()
    assert roomy < 500, (plain, roomy)


def test_arguments_results_and_exceptions_pass_through():
    def f(a, *rest, scale=1, **extra):
        if extra.get("fail"):
            raise KeyError("asked to")
        return (a + sum(rest)) * scale

    g = with_frame_room(f)
    assert g(1, 2, 3, scale=10) == 60
    assert g.__name__ == "f" and g.__wrapped__ is f
    with pytest.raises(KeyError, match="asked to"):
        g(1, fail=True)


def test_nested_rooms_and_deep_recursion_inside_work():
    assert with_frame_room(lambda: with_frame_room(_down)(900))() == 900


_seen_room: list[bool] = []


def _record_room(x: torch.Tensor) -> torch.Tensor:
    """A graph node that notes whether a frame with room is below it on the stack."""
    f = sys._getframe()
    room = False
    while f is not None:
        room = room or f.f_code.co_stacksize >= frame_stack.ROOM_SLOTS
        f = f.f_back
    _seen_room.append(room)
    return x


def _graph(calls: int) -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x = g.call_function(_record_room, (x,))
    for _ in range(calls - 1):
        x = g.call_function(torch.ops.aten.add.Tensor, (x, 1))
    g.output((x,))
    return torch.fx.GraphModule(torch.nn.Module(), g)


@pytest.mark.skipif(not frame_stack.APPLIES, reason="no frame chunks before CPython 3.11")
def test_long_graphs_run_op_by_op_get_room_short_ones_not() -> None:
    """A GraphModule of ``ROOMY_CALLS`` op calls or more (``aotgrad_eager``'s graphs) runs
    with room (each op is a Python call: at an unlucky depth each mapped a fresh chunk);
    a shorter one runs as it is (the room's mapping would cost more than it saves)."""
    from aotgrad.compile import ROOMY_CALLS, boxed

    _seen_room.clear()
    for calls in (ROOMY_CALLS, ROOMY_CALLS - 1):
        out = boxed(_graph(calls))([torch.zeros(2)])
        torch.testing.assert_close(out[0], torch.full((2,), float(calls - 1)))
    assert _seen_room == [True, False]
