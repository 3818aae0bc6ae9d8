"""Autocast's cast cache, compared with eager (``eager_oracle.assert_like_eager``).

Under autocast eager casts a float32 leaf that requires grad once per autocast region and
reuses the cast: two uses of one weight share one ``_to_copy`` node, and the backward
sums their gradients in bfloat16 before casting the sum back. The trace cast at every use
and summed in float32: a gradient rounded differently from eager's, without a word
(``x @ w, x @ w`` under bfloat16: eager -1.0859375, aotgrad -1.087890625), under every
entry point. Tensors eager does not cache (non-leaves, views, no grad, another dtype)
must still be cast at each use; a function compiled for leaves and called with
non-leaves (or the other way) must not reuse the other's graph. A weight written under
``no_grad`` between two uses in one region: eager's second use reads the cast made
before the write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = sorted(COMPILERS)
BF16 = torch.bfloat16


def _bf16() -> Any:
    return torch.autocast("cpu", dtype=BF16)


def _inputs(*shapes: tuple[int, ...], leaf: bool = True, grad: bool = True) -> Callable:
    """float32 inputs that require grad (``grad``): leaves, or clones of leaves."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        ls = [torch.randn(*s, requires_grad=grad) for s in shapes]
        return (ls if leaf or not grad else [t.clone() for t in ls]), [t for t in ls if grad]

    return make


def _twice(x, w):
    with _bf16():
        return x @ w, x @ w


def _linear_twice(x, w, b):
    with _bf16():
        h = F.linear(x, w, b)
        return F.linear(torch.relu(h), w, b).sum(0)


def _two_blocks_one_region(x, w):
    # (nested blocks: the cache lives until the outermost region ends)
    with _bf16():
        with _bf16():
            a = x @ w
        b = torch.mm(x, w)
    return a * 3 + b


def _weight_and_its_view(x, w):
    with _bf16():
        return x @ w, x @ w[:, :2].sum(1, keepdim=True).expand(-1, 4)


def _cast_then_float_op(x, w):
    with _bf16():
        a = x @ w
        b = (x * 2) @ w  # x * 2 runs in float32: a new tensor, cast on its own
    return a, b.float().sin()


def _disabled_between(x, w):
    with _bf16():
        a = x @ w
        with torch.autocast("cpu", enabled=False):
            c = x @ w
        b = x @ w
    return a * 3 + b, c


def _written_between_uses(x, w):
    # eager's second use reads its cast of w from before the write (a stale cast)
    with _bf16():
        a = x @ w
        with torch.no_grad():
            w.add_(1)
        b = x @ w
    return a, b


def _written_between_blocks(x, w):
    # stale only inside the caller's region: leaving the outermost block clears the cache
    with _bf16():
        a = x @ w
    with torch.no_grad():
        w.mul_(2)
    with _bf16():
        b = x @ w
    return a, b * 3


def _written_in_callers_region(x, w):
    a = x @ w
    with torch.no_grad():
        w.sub_(1)
    return a, x @ w


_LEAVES = _inputs((4, 8), (8, 4))
_PROGRAMS = [
    (_twice, _LEAVES),
    (_linear_twice, _inputs((3, 8), (8, 8), (8,))),
    (_two_blocks_one_region, _LEAVES),
    (_weight_and_its_view, _LEAVES),
    (_cast_then_float_op, _LEAVES),
    (_disabled_between, _LEAVES),
    (_written_between_uses, _LEAVES),
    (_written_between_blocks, _LEAVES),
    (_written_in_callers_region, _LEAVES),
    (_written_between_uses, _inputs((4, 8), (8, 4), leaf=False)),
    # eager caches nothing of these: each use is cast on its own
    (_twice, _inputs((4, 8), (8, 4), leaf=False)),
    (_linear_twice, _inputs((3, 8), (8, 8), (8,), leaf=False)),
]


@pytest.mark.parametrize("compiler", ENTRIES)
@pytest.mark.parametrize("caller_ctx", ["none", "bf16"])
@pytest.mark.parametrize(
    ("fn", "make"), _PROGRAMS, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(_PROGRAMS)]
)
def test_a_weight_used_twice_under_autocast_is_cast_once(
    fn: Any, make: Any, compiler: str, caller_ctx: str
) -> None:
    ctx = _bf16 if caller_ctx == "bf16" else contextlib.nullcontext
    assert_like_eager(fn, make, COMPILERS[compiler], ctx=ctx)


def test_the_caller_turning_the_cache_off_is_followed() -> None:
    def f(x, w):
        with torch.autocast("cpu", dtype=BF16, cache_enabled=False):
            return x @ w, x @ w

    for compiler in ENTRIES:
        assert_like_eager(f, _LEAVES, COMPILERS[compiler])


@pytest.mark.parametrize("compiler", ENTRIES)
def test_leaves_then_non_leaves_each_as_eager(compiler: str) -> None:
    # one compiled function, called with leaves, then with clones, then leaves again
    g = COMPILERS[compiler](_twice)
    for leaf in (True, False, True):
        make = _inputs((4, 8), (8, 4), leaf=leaf)
        assert_like_eager(_twice, make, lambda _fn, g=g: g)


def test_the_compiled_graph_reads_one_cast_per_weight() -> None:
    from aotgrad import aot_function

    graphs: list[torch.fx.GraphModule] = []

    def keep(gm: torch.fx.GraphModule, *_: Any) -> torch.fx.GraphModule:
        graphs.append(gm)
        return gm

    x, w = (torch.randn(4, 8, requires_grad=True), torch.randn(8, 4, requires_grad=True))
    aot_function(_twice, fw_compiler=keep, bw_compiler=keep)(x, w)
    backward = graphs[1]
    casts = [n for n in backward.graph.nodes if n.target is torch.ops.aten._to_copy.default]
    # eager's backward: the two uses' bfloat16 gradients summed, then one cast per input
    assert len(casts) == 2
    assert all(n.args[0].target is torch.ops.aten.add.Tensor for n in casts)


def _stale_cast_between_uses(x, w):
    a = F.linear(x, w)
    with torch.no_grad():
        w.mul_(2.0)
    b = F.linear(x, w)  # with the cache on: the cast made before the write
    with torch.no_grad():
        w.div_(2.0)
    return a, b


@pytest.mark.parametrize("compiler", ENTRIES)
def test_one_function_called_with_the_cache_on_then_off(compiler: str) -> None:
    """The cache setting is part of the guard (blind autocast suite: the graph traced with
    the cache on, reading the stale cast, was reused with it off, where eager's second
    use reads the written weight)."""
    g = COMPILERS[compiler](_stale_cast_between_uses)
    for cache in (True, False, True):
        ctx = lambda c=cache: torch.autocast("cpu", dtype=BF16, cache_enabled=c)  # noqa: E731
        make = _inputs((4, 6), (5, 6))
        assert_like_eager(_stale_cast_between_uses, make, lambda _fn: g, ctx=ctx)


def _block_without_a_dtype(x, w):
    with torch.autocast("cpu"):
        return x @ w


@pytest.mark.parametrize(
    "compiler",
    [
        pytest.param(
            c,
            marks=pytest.mark.xfail(
                strict=True,
                reason="Dynamo reads the device's dtype when it traces the block and does not "
                "guard it (backend='aot_eager' the same): its graph holds the first dtype",
            ),
        )
        if c.startswith("dynamo")
        else c
        for c in ENTRIES
    ],
)
def test_a_block_without_a_dtype_follows_the_devices_dtype(compiler: str) -> None:
    """``torch.autocast("cpu")`` inside takes the device's autocast dtype, which the caller
    sets (``torch.set_autocast_dtype``, or an outer ``autocast(dtype=..., enabled=False)``):
    the graph traced for bfloat16 was reused for float16."""
    g = COMPILERS[compiler](_block_without_a_dtype)
    before = torch.get_autocast_dtype("cpu")
    try:
        for dtype in (BF16, torch.float16, BF16):
            torch.set_autocast_dtype("cpu", dtype)
            assert_like_eager(_block_without_a_dtype, _inputs((4, 6), (6, 5)), lambda _fn: g)
    finally:
        torch.set_autocast_dtype("cpu", before)


def _writes_its_weight(x, w):
    y = F.linear(x, w)
    with torch.no_grad():
        w.mul_(2.0)
    return y


@pytest.mark.parametrize("compiler", ENTRIES)
def test_two_calls_in_one_region_read_the_weight_as_written(compiler: str) -> None:
    """Known departure (soak 248149): called twice in one caller's autocast region, a
    function that writes its weight in place reads, in eager, the cast its first call
    cached (no version count invalidates torch's cache: the stale weight that freezes
    training when an optimizer steps inside one region). The compiled call casts the
    weight as it is: eager's answer with ``cache_enabled=False``."""

    def twice(run: Callable, cache: bool) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(0)
        x, w = torch.randn(4, 6, generator=g), torch.randn(5, 6, generator=g)
        w.requires_grad_()
        with torch.autocast("cpu", dtype=BF16, cache_enabled=cache):
            return [run(x, w), run(x, w)]

    got = twice(COMPILERS[compiler](_writes_its_weight), True)
    torch.testing.assert_close(got, twice(_writes_its_weight, False))
    stale = twice(_writes_its_weight, True)
    assert not torch.equal(got[1], stale[1])  # (eager's stale cast)
