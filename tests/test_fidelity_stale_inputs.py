"""Views autograd cannot rebuild (outputs of ``split``/``chunk``/``unbind``, views made
under ``no_grad`` of a tensor that requires grad), compared with eager
(``eager_oracle.assert_like_eager``). Found by the fidelity generator once its inputs
included such views (``tests/fidelity_generator.py``, ``_multi_output_input_views``):

1. An input written before the call (through a sibling): eager runs the function unless
   it reads the view's node (records autograd on it). ``from_tensor`` read ``is_leaf``
   and raised, so the call ran eagerly (or raised); it now compiles, and raises eager's
   error where the function records autograd on the view (``trace/fakes._fake_of``).
2. Such an input written inside the function through a sibling, then written itself:
   the runtime's write-back read its ``is_leaf`` and raised (``leaf_if_readable``).
3. Returned as a ``detach()`` of a view of one: the runtime's view read its node.
4. Written under ``no_grad`` in a call under ``no_grad``: a joint graph was compiled (the
   input still requires grad), whose ``autograd.Function`` read the node.
5. A leaf view made under ``no_grad`` (it requires grad through its base) given
   ``requires_grad_(False)`` inside: eager's flag stays on, with no accumulator; the
   output did not require grad (``EagerCalls.own_flags``).
6. Under inference mode, an ``enable_grad`` block writing one: refused as if autograd
   recorded it (nothing records under inference mode).

And two neighbours the same programs found: a saved tensor restrided (``as_strided_``)
and then ``detach_()``ed ran eagerly (the trace's backward read the new layout), and a
Dynamo graph with SymInt inputs traced for inference mode ran eagerly.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from aotgrad.errors import EagerReplayWarning
from eager_oracle import COMPILERS, assert_like_eager

ENTRIES = sorted(COMPILERS)
KINDS = ["split", "chunk", "unbind", "no_grad"]


@pytest.fixture(autouse=True)
def _replays_are_failures():
    """A call that ran eagerly (the trace raised where eager runs) is a gap: an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", EagerReplayWarning)
        yield


def _pair(kind: str, base: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    if kind == "split":
        return base.split(4)
    if kind == "chunk":
        return base.chunk(2)
    if kind == "unbind":
        return base.view(2, 4, 4).unbind(0)
    with torch.no_grad():
        return base[:4], base[4:]


def _views(kind: str, written_before: bool) -> Callable[[], tuple[list[Any], list[Any]]]:
    """Two disjoint views of a clone of a leaf that requires grad; ``written_before``:
    the caller wrote the second under no_grad (the first is then stale too)."""

    def make() -> tuple[list[Any], list[Any]]:
        leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
        x, y = _pair(kind, leaf.clone())
        if written_before:
            with torch.no_grad():
                y.mul_(2)
        return [x, y], [leaf]

    return make


def _read_without_grad(x, y):
    with torch.no_grad():
        z = x * 3
    return z, x.detach() + 1, y.argmax()


def _records_on_it(x, y):
    return x * 3


def _only_the_other(x, y):
    return y.detach() * 2, x.shape[0]


def _returned_itself(x, y):
    return x.to(x.dtype), x.contiguous(), y.to(torch.float64)


def _written_with_grad(x, y):
    x.mul_(2)
    return x


# (not Dynamo: its own fakification reads the node, under backend="eager" too)
@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.startswith("aot_function")])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "fn",
    [_read_without_grad, _records_on_it, _only_the_other, _returned_itself, _written_with_grad],
)
def test_input_written_before_the_call(fn, kind, entry):
    assert_like_eager(fn, _views(kind, True), COMPILERS[entry], calls=2)


def _sibling_then_itself(x, y):
    with torch.no_grad():
        y.t().sub_(1)
    x[:, 1:3].sub_(2)
    return x.detach() + 0


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", ["split", "chunk", "unbind"])
def test_written_through_a_sibling_then_itself_under_inference_mode(kind, entry):
    assert_like_eager(
        _sibling_then_itself, _views(kind, False), COMPILERS[entry], ctx=torch.inference_mode
    )


def _detached_view_returned(x, y):
    t = x.detach()
    a, b = t.chunk(2, -1)
    b.zero_()
    return a.detach(), x, a


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", ["split", "chunk", "unbind"])
def test_view_of_a_detach_returned_after_a_write(kind, entry):
    assert_like_eager(_detached_view_returned, _views(kind, False), COMPILERS[entry], calls=2)


def _written_under_no_grad(x, y):
    t = y.relu()
    with torch.no_grad():
        y.t().addcmul_(t, t)
    return t * 2


def _twice(fn: Callable) -> Callable:
    """``fn`` run twice on the same inputs: the second call gets views the first wrote."""

    def run(*args: Any) -> Any:
        fn(*args)
        return fn(*args)

    return run


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", KINDS)
def test_written_under_no_grad_in_a_no_grad_call_twice(kind, entry):
    compiled = _twice(COMPILERS[entry](_written_under_no_grad))
    assert_like_eager(
        _twice(_written_under_no_grad), _views(kind, False), lambda _: compiled, ctx=torch.no_grad
    )


def _leaf_view_inputs() -> tuple[list[Any], list[Any]]:
    leaf = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        x, y = leaf.chunk(2)
    y.requires_grad_()  # a leaf view that requires grad through its base anyway
    z = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    return [x, y, z], [leaf, y, z]


def _flag_off(x, y, z):
    y.requires_grad_(False)
    return z - y, y.requires_grad


def _flag_off_after_a_use(x, y, z):
    w = z * 2
    y.requires_grad_(False)
    return w - x, y.requires_grad


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("fn", [_flag_off, _flag_off_after_a_use])
def test_requires_grad_false_on_a_leaf_view_whose_base_requires_grad(fn, entry):
    assert_like_eager(fn, _leaf_view_inputs, COMPILERS[entry], calls=2)


def _enable_grad_write_under_inference(x, y):
    with torch.enable_grad():
        x.copy_(x.sum())
    return y.matmul(x.t())


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", ["split", "chunk", "unbind"])
def test_enable_grad_write_under_inference_mode(kind, entry):
    assert_like_eager(
        _enable_grad_write_under_inference,
        _views(kind, False),
        COMPILERS[entry],
        ctx=torch.inference_mode,
    )


def _restrided_saved_then_detached(x0, x1):
    t1 = torch.addmm(x1, x0, x1)
    t2 = torch.mm(x1, t1)
    t1.as_strided_((2, 2), (4, 1))
    t1.detach_()
    x0[:, 1:3].mul_(t2.sum())
    return t1.detach(), t2.detach()


def _two_clones() -> tuple[list[Any], list[Any]]:
    a, b = (torch.randn(4, 4, dtype=torch.float64, requires_grad=True) for _ in range(2))
    return [a.clone(), b.clone()], [a, b]


@pytest.mark.parametrize("entry", ENTRIES)
def test_saved_tensor_restrided_then_detached_compiles(entry):
    assert_like_eager(_restrided_saved_then_detached, _two_clones, COMPILERS[entry], calls=2)


def test_dynamo_graph_with_symint_inputs_traced_for_inference_mode():
    """A scalar Dynamo made a SymInt, and a graph traced for a call under inference mode
    after calls with grad: the metadata pass read ``grad_fn`` of the SymInt input."""

    def f(x0, x1, s):
        with torch.no_grad():
            x0.copy_(x1 * s)
        return x1.expand(2, 4, 4), x0 + s

    torch._dynamo.reset()
    g = torch.compile(f, backend="aotgrad_eager")
    for s in (3, 4):
        x0, x1 = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4).clone()
        g(x0, x1, s)
    for s in (5, 6):
        with torch.inference_mode():
            a0, a1 = torch.randn(4, 4), torch.randn(4, 4)
            e0, e1 = a0.clone(), a1.clone()
            out = g(a0, a1, s)
            ref = f(e0, e1, s)
        torch.testing.assert_close(out, ref)
        torch.testing.assert_close(a0, e0)


def _records_on_it_then_writes_it(x, y):
    t = y + 1
    u = t * t  # (recorded on y, unused: no gradient reaches y)
    with torch.no_grad():
        y.addcmul_(t, t)
    return y, u.detach()


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("kind", ["split", "chunk", "unbind"])
def test_second_call_records_on_the_view_the_first_wrote(kind, entry):
    """The second of two calls on the same inputs records autograd on a view the first
    wrote: eager raises, though no gradient reaches it (a Dynamo graph is not retraced:
    only views whose node the function never reads go to autograd detached)."""
    compiled = _twice(COMPILERS[entry](_records_on_it_then_writes_it))
    assert_like_eager(
        _twice(_records_on_it_then_writes_it), _views(kind, False), lambda _: compiled
    )
