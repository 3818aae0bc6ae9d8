"""Outputs computed from another output (``return h, head(h)``): eager's ``head(h)`` has
a history through ``h``'s node, so the caller's ``torch.autograd.grad(logits, h)``
(Grad-CAM), ``h.retain_grad()`` and hooks on ``h`` see what ``head(h)`` passes back. The
compiled Function returned them side by side: ``autograd.grad`` raised that ``h`` was
not used, ``h.grad`` stayed None, a hook saw the caller's part only
(``trace.fed_outputs``, ``runtime.fed_outputs_link``). Compared with eager under every
entry point, for each way a caller observes the gradient at ``h``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from aotgrad.errors import UnsupportedError
from eager_oracle import COMPILERS, Half, aot_inductor

DT = torch.float64


def _head(x, w, v):
    h = (x @ w).tanh()
    return h, (h * v).sum()


def _chain(x, w, v):
    h1 = x @ w
    h2 = h1.sin() * v
    return h1, h2, (h2 * h1).sum()


def _listed(x, w, v):
    h1 = (x @ w).relu()
    h2 = h1 * v + h1.cos()
    return [h1, h2], (h2 @ w.t()).sum()


def _transposed_read(x, w, v):
    h = x * v[0]
    return h, w @ h.t()


def _two_readers(x, w, v):
    h = x @ w
    return h, (h * 2).sum(), (h * v).mean()


def _read_twice_down(x, w, v):
    h = x @ w
    g = h.exp()
    return g, h, g * h


def _split_piece(x, w, v):
    a, b = (x @ w).split(2)
    return a, b * 2, (a * 3).sum()


def _other_dtype(x, w, v):
    h = (x @ w).float()
    return h, (h.double() * v).sum()


def _flattened(x, w, v):
    h = (x @ w).relu()
    f = h.flatten()
    return f, (f.view(4, 3) @ w.t()).sum()


def _transposed_view(x, w, v):
    h = (x * v).t()
    return h, (h * 2).sum(), w * 1


def _view_of_output(x, w, v):
    h = (x @ w).relu()
    f = h.t()
    return h, f, (f * v[:, None]).sum() + h.sum()


def _flattened_output(x, w, v):
    h = (x @ w).sigmoid()
    f = h.flatten()
    return h, f, (f.view(4, 3) @ w).sum()


def _returned_twice(x, w, v):
    h = (x * v).tanh()
    return h, h, (h * 3).sum()


def _view_of_input(x, w, v):
    f = x.flatten()
    return f, (f.view(4, 3) @ w).sum()


def _input_row(x, w, v):
    r = x[1]
    return r, (r * v).sum() + (x * 2).sum()


def _input_view_of_view(x, w, v):
    t = x.as_strided((2, 3), (3, 1), 3)
    _, b = t.chunk(2, -1)
    return t, b.t(), (t * v).sum()


def _input_row_feeds_a_viewed_output(x, w, v):
    r = x[1]
    h = (r * w).tanh()  # (soak 251811: h.t() was made of h before h's link, and skipped it)
    return h.t(), h, r


def _custom_view_feeds_a_viewed_output(x, w, v):
    t = Half.apply(x)
    h = x.t() @ t
    return h.unsqueeze(0), h, t


PROGRAMS = [_head, _chain, _listed, _transposed_read, _two_readers, _read_twice_down]
PROGRAMS += [_split_piece, _other_dtype, _flattened, _transposed_view, _view_of_output]
PROGRAMS += [_flattened_output, _returned_twice, _view_of_input, _input_row]
PROGRAMS += [_input_view_of_view, _input_row_feeds_a_viewed_output]
PROGRAMS += [_custom_view_feeds_a_viewed_output]


def _flat(outs: Any) -> list[torch.Tensor]:
    if isinstance(outs, torch.Tensor):
        return [outs]
    return [t for o in outs for t in _flat(o)]


def _args() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, dtype=DT, generator=g, requires_grad=True)
    w = torch.randn(3, 3, dtype=DT, generator=g, requires_grad=True)
    v = torch.randn(3, dtype=DT, generator=g, requires_grad=True)
    return x, w, v


def _loss(outs: list[torch.Tensor], skip: int = -1) -> torch.Tensor:
    return sum(
        (o.sum() * (k + 1) for k, o in enumerate(outs) if k != skip), torch.zeros((), dtype=DT)
    )


def _leaf_grads(args: tuple) -> list[Any]:
    return [None if a.grad is None else a.grad.clone() for a in args]


def _autograd_grad(outs: list, args: tuple) -> list:
    last = outs[-1].sum()
    return [list(torch.autograd.grad(last, outs[:-1], retain_graph=True, allow_unused=True))]


def _autograd_grad_with_inputs(outs: list, args: tuple) -> list:
    got = torch.autograd.grad(_loss(outs, 0), [outs[0], *args], allow_unused=True)
    return [list(got)]


def _retained(outs: list, args: tuple) -> list:
    for o in outs:
        o.retain_grad()
    _loss(outs).backward()
    return [[o.grad for o in outs], _leaf_grads(args)]


def _hooked(outs: list, args: tuple) -> list:
    seen: list[Any] = []
    for k, o in enumerate(outs[:-1]):
        o.register_hook(lambda g, k=k: seen.append((k, g.clone())) or g * (k + 2))
    _loss(outs).backward()
    # (by output: the order the engine calls them in may differ, its nodes being others)
    return [sorted(seen, key=lambda s: s[0]), _leaf_grads(args)]


def _backward_inputs(outs: list, args: tuple) -> list:
    outs[0].retain_grad()
    _loss(outs, 0).backward(inputs=[outs[0], args[1]])
    return [outs[0].grad, _leaf_grads(args)]


def _second_order(outs: list, args: tuple) -> list:
    (g,) = torch.autograd.grad(outs[-1].sum(), outs[0], create_graph=True)
    (g.pow(2).sum() + outs[-1].sum()).backward()
    return [g.detach(), _leaf_grads(args)]


def _plain(outs: list, args: tuple) -> list:
    _loss(outs).backward()
    return [_leaf_grads(args)]


USES = [_autograd_grad, _autograd_grad_with_inputs, _retained, _hooked, _backward_inputs]
USES += [_second_order, _plain]


def _observed(fn: Callable, compiler: Callable | None, use: Callable) -> list:
    run = fn if compiler is None else compiler(fn)
    args = _args()
    outs = _flat(run(*args))
    facts = [(o.requires_grad, o.is_leaf, o.grad_fn is not None, o.detach().clone()) for o in outs]
    try:
        return [facts, *use(outs, args)]
    except RuntimeError as e:
        return [facts, f"raises {type(e).__name__}"]


@pytest.mark.parametrize("use", USES, ids=[u.__name__.strip("_") for u in USES])
@pytest.mark.parametrize("fn", PROGRAMS, ids=[f.__name__.strip("_") for f in PROGRAMS])
@pytest.mark.parametrize("entry", list(COMPILERS))
def test_the_gradient_at_an_output_others_are_computed_from_is_eagers(
    entry: str, fn: Callable, use: Callable
) -> None:
    want = _observed(fn, None, use)
    got = _observed(fn, COMPILERS[entry], use)
    _assert_same(got, want)


def _assert_same(got: list, want: list) -> None:
    if isinstance(want[-1], str) or isinstance(got[-1], str):  # (an error)
        assert got[-1] == want[-1]
        got, want = got[:-1], want[:-1]
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("use", [_autograd_grad, _hooked, _second_order], ids=str)
def test_under_inductor(use: Callable) -> None:
    want = _observed(_chain, None, use)
    got = _observed(_chain, aot_inductor, use)
    _assert_same(got, want)


def test_a_call_under_no_grad_links_nothing() -> None:
    run = COMPILERS["aot_function-min_cut"](_head)
    with torch.no_grad():
        outs = run(*_args())
    assert not any(o.requires_grad for o in outs)
    torch.testing.assert_close(list(outs), list(_head(*_args())))


def test_a_plain_backward_runs_the_compiled_backward_once() -> None:
    """Unobserved (no hook, retained gradient or ``autograd.grad`` on ``h``), the link
    passes gradients straight through: one run of a backward without the totals; the
    link's backward (the totals alone: ``backward_for_links``) is compiled on the first
    pass that hands them on."""
    import aotgrad

    compiled, runs = [], []

    def counting_bw(gm: Any, example_inputs: Any) -> Any:
        outs = list(gm.graph.output_node().args[0])
        compiled.append(sum(o is not None for o in outs))

        def run(*a: Any) -> Any:
            runs.append(len(compiled))
            return gm(*a)

        return run

    run = aotgrad.aot_function(_head, aotgrad.nop, counting_bw)
    _loss(list(run(*_args()))).backward()
    assert runs == [1] and len(compiled) == 1
    outs = run(*_args())
    outs[0].register_hook(lambda g: g)
    _loss(list(outs)).backward()
    assert len(compiled) == 2 and compiled[1] == 1  # (the total alone)
    assert runs[1:] == [2, 2]  # (the link's run with the totals, then the Function's)


def _head_mm(x, w, v):
    h = (x @ w).tanh()
    return h, h @ w


def _head_sum(x, w, v):
    h = (x @ w).tanh()
    return h, h.sum()


@pytest.mark.parametrize("fn", [_head_mm, _head_sum], ids=["head_saves", "head_saves_nothing"])
@pytest.mark.parametrize("entry", list(COMPILERS))
def test_a_pass_through_a_freed_head_raises_as_eagers(entry: str, fn: Callable) -> None:
    """``autograd.grad(logits, h)`` without ``retain_graph`` frees what eager's nodes
    between them saved (``mm``'s operands; ``sum`` saves nothing): a later backward
    through them raises in eager, and so in the compiled call."""

    def observed(compiler: Callable | None) -> list:
        args = _args()
        h, lo = (fn if compiler is None else compiler(fn))(*args)
        torch.autograd.grad(lo.sum(), h)
        try:
            lo.sum().backward()
        except RuntimeError as e:
            assert "backward through the graph a second time" in str(e)
            return ["raised"]
        return _leaf_grads(args)

    _assert_same(observed(COMPILERS[entry]), observed(None))


# Outputs the function also writes into an input (``x += h; return h``): eager's ``x``
# has a history through ``h``'s node after the call, so the gradient at ``h`` takes in
# what the caller's later uses of ``x`` pass back (soak 246196: ``autograd.grad`` with
# respect to ``h`` missed it). The caller's ``x`` is observed as one more output.


def _into_input(x, w, v):
    h = (w[0] * v).tanh()
    x += h
    return h, (h * v).sum()


def _into_returned_input(x, w, v):
    h = (w[0] * v).tanh()
    x.add_(h * 2)
    return x, h


def _into_a_row(x, w, v):
    h = (w[0] * v).tanh()
    x[1] = h
    return (h,)


def _chain_into_input(x, w, v):
    h = (w[0] * v).tanh()
    u = h.exp()
    x.mul_(u)
    return h, u


def _read_after_the_write(x, w, v):
    h = (w[0] * v).tanh()
    x += h  # (then read: the value's link before the write, the read's onto x's node)
    return x * 3, h


def _read_after_the_write_and_directly(x, w, v):
    h = (w[0] * v).tanh()
    x += h
    return x * 3 + h, h  # (reads h both through x and not: the values' link is left out)


WRITTEN = [_into_input, _into_returned_input, _into_a_row, _chain_into_input]
WRITTEN += [_read_after_the_write, _read_after_the_write_and_directly]


def _observed_written(fn: Callable, compiler: Callable | None, use: Callable) -> list:
    run = fn if compiler is None else compiler(fn)
    args = _args()
    x = args[0].clone()
    outs = [*_flat(run(x, *args[1:])), x]
    facts = [(o.requires_grad, o.is_leaf, o.grad_fn is not None, o.detach().clone()) for o in outs]
    try:
        return [facts, *use(outs, args)]
    except UnsupportedError as e:
        assert "double backward" in str(e)
        return _REFUSED
    except RuntimeError as e:
        return [facts, f"raises {type(e).__name__}"]


_REFUSED = ["refused"]


@pytest.mark.parametrize("use", USES, ids=[u.__name__.strip("_") for u in USES])
@pytest.mark.parametrize("fn", WRITTEN, ids=[f.__name__.strip("_") for f in WRITTEN])
@pytest.mark.parametrize("entry", list(COMPILERS))
def test_the_gradient_at_an_output_written_into_an_input_is_eagers(
    entry: str, fn: Callable, use: Callable
) -> None:
    want = _observed_written(fn, None, use)
    got = _observed_written(fn, COMPILERS[entry], use)
    if got == _REFUSED:  # (only there: double backward through a written input)
        assert use is _second_order
        return
    if fn is _read_after_the_write_and_directly and use in _SEEN_AT_H:
        with pytest.raises(AssertionError):  # (strict: a fix shows here)
            _assert_same(got, want)
        pytest.xfail(
            "known open: an output reading h both through the written x and not: the "
            "caller's later uses of x do not reach h (each link would hand h that part)"
        )
    _assert_same(got, want)


#: The uses that observe the gradient at the output itself.
_SEEN_AT_H = (_autograd_grad, _retained, _hooked)
