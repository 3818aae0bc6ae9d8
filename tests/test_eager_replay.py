"""A call whose trace raised the function's own error runs eagerly (``aotgrad.eager_replay``):
eager raises part way through, with what the function did before the raise done; so
does the compiled call. Where eager runs the program, the call returns eager's result
with an ``EagerReplayWarning`` (aotgrad's gap, named)."""

from __future__ import annotations

import warnings

import pytest
import torch

import aotgrad
from aotgrad.errors import EagerReplayWarning, mark_raised_while_tracing


def _writes_then_raises(x, y):
    with torch.no_grad():
        x.mul_(2)  # done before the raise, in eager
    x[0].add_(1)
    return x @ y  # (4, 4) @ (3, 4): eager raises here


def _raised(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return type(e), str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("calls", [1, 3])
def test_inputs_written_before_eagers_raise_are_written(calls):
    x_eager = torch.randn(4, 4)
    x_ours = x_eager.clone()
    y = torch.randn(3, 4)
    compiled = aotgrad.aot_function(_writes_then_raises, aotgrad.nop)
    for _ in range(calls):
        theirs = _raised(_writes_then_raises, x_eager, y)
        ours = _raised(compiled, x_ours, y)
        assert theirs is not None and ours == theirs
        assert torch.equal(x_ours, x_eager)
        assert x_ours._version == x_eager._version
    # the key is remembered: nothing was compiled, and later calls do not trace again
    assert compiled.compilations == 0
    assert len(compiled.eager.keys) == 1


def test_a_parameter_written_before_an_in_place_refusal_keeps_eagers_value():
    """A module's parameter written under no_grad, then in place with grad: eager refuses
    the second write (a leaf that requires grad) after the first is done; the next call
    starts from the written value and version."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4, dtype=torch.float64))

        def forward(self, x):
            with torch.no_grad():
                torch.sin(self.w, out=self.w)
            self.w[0].copy_(x.sum())
            return self.w * x

    torch.manual_seed(0)
    eager = M()
    torch.manual_seed(0)
    ours = M()  # (the same values at version 0)
    compiled = aotgrad.aot_module(ours, fw_compiler=aotgrad.nop)
    x = torch.randn(4, 4, dtype=torch.float64)
    for _ in range(2):
        theirs = _raised(eager, x)
        got = _raised(compiled, x)
        assert theirs is not None and got == theirs
        assert torch.equal(ours.w, eager.w)
        assert ours.w._version == eager.w._version


def test_a_trace_that_raises_where_eager_runs_runs_eagerly_with_a_warning(monkeypatch):
    """Injected: tracing raises an error marked as the function's own; eager runs the
    function: the call returns eager's result, gradients included, and warns once."""
    import aotgrad.api as api

    def failing_trace(*args, **kwargs):
        e = RuntimeError("a trace-only failure")
        mark_raised_while_tracing(e)
        raise e

    monkeypatch.setattr(api, "compile_for", failing_trace)

    def f(x):
        return x.sin() * 2

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    x = torch.randn(3, requires_grad=True)
    with pytest.warns(EagerReplayWarning, match="a trace-only failure"):
        out = compiled(x)
    assert out.grad_fn is not None and torch.equal(out, f(x))
    out.sum().backward()
    assert torch.allclose(x.grad, 2 * x.detach().cos())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per compiled function
        assert torch.equal(compiled(x), f(x))


def test_an_error_that_is_not_the_functions_is_not_replayed(monkeypatch):
    """A compiler's failure (not raised while tracing the function) propagates: nothing
    runs eagerly behind the caller's back."""
    import aotgrad.api as api

    def failing_compile(*args, **kwargs):
        raise RuntimeError("a compiler failure")

    monkeypatch.setattr(api, "compile_for", failing_compile)
    calls = []

    def f(x):
        calls.append(1)
        return x * 2

    compiled = aotgrad.aot_function(f, aotgrad.nop)
    with pytest.raises(RuntimeError, match="a compiler failure"):
        compiled(torch.randn(3))
    assert not calls and not compiled.eager.keys


def _writes_then_indexes_out_of_range(x, y):
    x.fill_(3.0)
    y.zero_()
    return torch.index_select(x, 0, torch.tensor([5]))  # raised by the kernel, not the trace


@pytest.mark.parametrize("entry", ["aot_function", "aotgrad_eager", "aotgrad"])
def test_writes_before_a_graphs_runtime_error_are_written(entry):
    """Blind suite (G1): the trace succeeds, the compiled graph raises as it runs (only
    values show the index out of range): eager's writes before it are done all the same."""
    if entry == "aot_function":
        compiled = aotgrad.aot_function(_writes_then_indexes_out_of_range, aotgrad.nop)
    else:
        torch._dynamo.reset()
        compiled = torch.compile(_writes_then_indexes_out_of_range, backend=entry)
    x_eager, y_eager = torch.randn(3, 4), torch.randn(3, 4)
    x_ours, y_ours = x_eager.clone(), y_eager.clone()
    for _ in range(2):
        theirs = _raised(_writes_then_indexes_out_of_range, x_eager, y_eager)
        ours = _raised(compiled, x_ours, y_ours)
        assert theirs is not None and ours == theirs
        for a, b in ((x_ours, x_eager), (y_ours, y_eager)):
            assert torch.equal(a, b) and a._version == b._version


def test_a_module_buffer_written_before_a_runtime_error():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(4))
            self.emb = torch.nn.Embedding(5, 4)

        def forward(self, x):
            self.b.add_(x)
            return self.emb(torch.tensor([2, 6]))  # 6 is out of range

    torch.manual_seed(0)
    eager = M()
    torch.manual_seed(0)
    ours = M()
    compiled = aotgrad.aot_module(ours, fw_compiler=aotgrad.nop)
    for _ in range(2):
        x = torch.randn(4)
        theirs, got = _raised(eager, x), _raised(compiled, x)
        assert theirs is not None and got == theirs
        assert torch.equal(ours.b, eager.b) and ours.b._version == eager.b._version


def _writes_then_adds_into_long(x, o):
    x.add_(1)
    torch.add(x, x, out=o)  # float into long: eager refuses the cast
    return o


def _writes_then_sorts_into_float_indices(x, v, i):
    x.add_(1)
    torch.sort(x, dim=1, out=(v, i))  # indices into a float tensor: eager refuses
    return v, i


@pytest.mark.parametrize(
    "fn, make",
    [
        (_writes_then_adds_into_long, lambda: (torch.randn(3, 4), torch.zeros(3, 4).long())),
        (
            _writes_then_sorts_into_float_indices,
            lambda: (torch.randn(3, 4), torch.zeros(3, 4), torch.zeros(3, 4)),
        ),
    ],
    ids=["add_out_long", "sort_out_float_indices"],
)
def test_out_tensors_of_a_dtype_eager_refuses(fn, make):
    """Blind suite (G2): the fake kernels cast into the ``out=`` tensor; eager raises,
    after the function's earlier write."""
    torch.manual_seed(0)
    theirs_args = make()
    torch.manual_seed(0)
    ours_args = make()
    theirs = _raised(fn, *theirs_args)
    ours = _raised(aotgrad.aot_function(fn, aotgrad.nop), *ours_args)
    assert theirs is not None and ours == theirs
    for a, b in zip(ours_args, theirs_args):
        assert torch.equal(a, b) and a._version == b._version


def _copy_into_own_transpose(x):
    x.as_strided_((2, 2), (4, 1))  # not dense: eager's overlap check cannot judge
    x.t().copy_(x)  # eager copies element by element, reading what it already wrote
    return x * 1


def _add_own_column(x):
    x.add_(x[:, 1:2])  # a broadcast column of x: later elements read the new x[:, 1]
    return x * 1


def _copy_between_columns(x):
    x[:, 0].copy_(x[:, 1])  # one storage, disjoint elements: no order to depend on
    return x * 1


def _copy_column_into_row(x):
    x[0].copy_(x[:, 0])  # one shared element, read before it is written
    return x * 1


def _entries():
    yield "aot_function", lambda fn, x: aotgrad.aot_function(fn, aotgrad.nop)
    yield (
        "aot_module_simplified",
        lambda fn, x: aotgrad.aot_module_simplified(
            torch.fx.symbolic_trace(_Wrapped(fn)), [x], aotgrad.nop
        ),
    )


class _Wrapped(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("entry", ["aot_function", "aot_module_simplified"])
def test_a_write_whose_result_depends_on_eagers_order_runs_eagerly(entry):
    """``x.add_(x[:, 1:2])``: eager's result depends on the order its kernel writes in
    (a traced graph reads first: other values, silently). The call runs eagerly, named
    by an ``EagerReplayWarning``. A copy in such an order (``x.t().copy_(x)`` on a
    non-dense ``x``) compiles, made in eager's order (``ordered_copies``), as do writes
    between disjoint or shared elements read first."""
    make = dict(_entries())[entry]
    x = torch.arange(16.0).view(4, 4)
    compiled = make(_add_own_column, x.clone())
    theirs, ours = x.clone(), x.clone()
    with pytest.warns(EagerReplayWarning, match="order its kernel writes"):
        out = compiled(ours)
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert torch.equal(out, _add_own_column(theirs))
    assert torch.equal(ours, theirs)
    for fn in (_copy_into_own_transpose, _copy_between_columns, _copy_column_into_row):
        theirs, ours = x.clone(), x.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = make(fn, ours.clone())(ours)
        out = out[0] if isinstance(out, (tuple, list)) else out
        assert torch.equal(out, fn(theirs)) and torch.equal(ours, theirs)


# ----------------------- a raise inside an autocast block leaves the caller's autocast as it was
# Dynamo's graph enters and leaves autocast with nodes, not a ``with``: a graph that raised
# between them (traced, replayed eagerly, or run as the eager fallback) left the nesting
# count up and the block's dtype on (blind probe: later autocast regions never cleared
# their cast cache). Eager's ``with`` leaves nothing behind.


def _mixed_dtypes_in_a_disabled_block(x, w, w2):
    with torch.autocast("cpu", dtype=torch.float16):
        y = x @ w
        with torch.autocast("cpu", enabled=False):
            return y @ w2  # float16 @ float32: eager raises


def _index_error_in_a_block(x, w, i):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return (x @ w)[i]


def _autocast_state():
    level = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return level - 1, torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")


def _dynamo(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="aotgrad_eager", fullgraph=True)


@pytest.mark.parametrize("compile_fn", [_dynamo, lambda fn: aotgrad.aot_function(fn, aotgrad.nop)])
@pytest.mark.parametrize(
    ("fn", "args"),
    [
        (
            _mixed_dtypes_in_a_disabled_block,
            (torch.randn(4, 8), torch.randn(8, 4), torch.randn(4, 4)),
        ),
        (_index_error_in_a_block, (torch.randn(4, 8), torch.randn(8, 4), 9)),
    ],
)
def test_a_raise_inside_an_autocast_block_leaves_autocast_as_it_was(compile_fn, fn, args):
    before = _autocast_state()
    compiled = compile_fn(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            expected = _raised(fn, *args)
            assert _raised(compiled, *args)[0] is expected[0]
            assert _autocast_state() == before
