"""Under Dynamo, a graph that writes an input, called again with inputs on one storage
that meet otherwise than when it was compiled: ``f(base[0:2], base[2:4])`` compiled,
then ``f(base[0:2], base[1:3])``. Dynamo's guards cover sizes and strides, not where
views of one base start, so the graph compiled for inputs apart ran for overlapping ones:
its write missed the other input's read (a silently wrong value; torch's ``aot_eager``
gives the same), and eager's overlap error was not raised. The backend now checks how
the inputs on one storage meet (``dynamo._meeting``) and sends another layout to the
guarded call. Every call is compared with eager: values, the base after the call, the
error eager raises.
"""

from __future__ import annotations

import pytest
import torch

import aotgrad  # noqa: F401  (registers the backends)


def _write_then_read(a, c):
    a.mul_(2)
    return c + 0


def _copy(a, c):
    a.copy_(c)
    return a + 0


def _read_then_write(a, c):
    t = c * 3
    a.add_(1)
    return t + c


FUNCTIONS = [_write_then_read, _copy, _read_then_write]
#: (first call's two views, second call's), each a pair of slices of rows of a 6 x 4 base
LAYOUTS = {
    "apart_then_overlapping": ((slice(0, 2), slice(2, 4)), (slice(0, 2), slice(1, 3))),
    "apart_then_same": ((slice(0, 2), slice(2, 4)), (slice(1, 3), slice(1, 3))),
    "overlapping_then_apart": ((slice(0, 2), slice(1, 3)), (slice(0, 2), slice(3, 5))),
    "apart_then_other_overlap": ((slice(0, 2), slice(3, 5)), (slice(2, 4), slice(3, 5))),
}


def _call(fn, views):
    base = torch.arange(24.0).reshape(6, 4)
    try:
        out = fn(base[views[0]], base[views[1]])
    except RuntimeError as e:
        return ("raises", str(e).split(".")[0]), base
    return out, base


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_later_calls_whose_inputs_meet_otherwise_are_eagers(fn, layout) -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="aotgrad_eager")
    for views in LAYOUTS[layout]:
        want, want_base = _call(fn, views)
        got, got_base = _call(compiled, views)
        if isinstance(want, tuple):
            assert got == want
        else:
            torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_base, want_base)
    torch._dynamo.reset()
