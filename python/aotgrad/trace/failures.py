"""torch's tracing failures as a ``TraceError`` naming the op and the user's line."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from typing import Any

import torch

from ..errors import (
    AotgradError,
    EagerRefusal,
    TraceError,
    UnsupportedError,
    mark_raised_while_tracing,
    run_eagerly,
)

_TORCH_DIRS = (torch.__file__.rsplit("/", 1)[0], __file__.rsplit("/", 2)[0])


def _user_frame(tb: Any) -> str:
    """The innermost frame of the traceback that is user code (not torch, not aotgrad)."""
    frames = [f for f in traceback.extract_tb(tb) if not f.filename.startswith(_TORCH_DIRS)]
    if not frames:
        return "<unknown location>"
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.line})"


def _failing_op(exc: BaseException) -> str:
    func = getattr(exc, "func", None)
    if func is not None:
        return str(func)
    return type(exc).__name__


def _runtime_error(name: str, e: RuntimeError) -> Exception | None:
    """torch's ``RuntimeError`` while tracing ``name``, worded; None: raised as it is."""
    msg = str(e)
    where = _user_frame(e.__traceback__)
    if "as_strided() is non-compositional" in msg:
        # functionalization replays a write into its view chain step by step, and an
        # as_strided step after the first cannot be inverted: eager runs it (a view of an
        # input an ``out=`` resized, then written), so the call runs eagerly
        return EagerRefusal(
            f"cannot trace {name}: a write through a view made by as_strided of a view "
            "(of a tensor whose metadata the function changed in place, or of a detached "
            f"alias) at {where}: not supported, run eagerly"
        )
    if msg.startswith("setStorage:") and "out of bounds for storage" in msg:
        # the traced input holds its own elements only; eager reads its base's storage
        return UnsupportedError(
            f"cannot trace {name}: a view reaching past the elements its input covers "
            f"(as_strided_ / as_strided beyond the input) at {where}: not supported (the "
            "compiled graph holds only the input's own elements; eager reads its base's "
            "storage)"
        )
    if "mutating a non-functional tensor with a functional tensor" in msg:
        # a tensor from outside the arguments written with a traced value: eager runs it
        return run_eagerly(
            UnsupportedError(
                f"cannot trace {name}: it writes a tensor that is not one of its arguments "
                f"(a global, or a closure's) at {where}: pass it as an argument (a "
                "module's buffers go through aot_module)"
            )
        )
    if msg == "slice() cannot be applied to a 0-dim tensor.":
        return IndexError(msg)  # torch's decomposition raises another type than eager's
    if "data-dependent" in msg or "Cannot access data pointer" in msg or "item()" in msg:
        return TraceError(
            f"cannot trace {name}: data-dependent operation at {where}: {msg.splitlines()[0]}"
        )
    return None


def _eagers_error(e: AssertionError) -> Exception | None:
    """The error eager raises where a decomposition torch traces with asserts instead."""
    msg = str(e)
    prefix = "matmul does not support 0-dimensional tensors, got dims: "
    if msg.startswith(prefix):
        a, _, b = msg[len(prefix) :].partition(" and ")
        return RuntimeError(
            f"both arguments to matmul need to be at least 1D, but they are {a}D and {b}D"
        )
    return None


def _on_dynamos_float(e: Any) -> bool:
    """A guard on a Python float Dynamo passed as a 0-dim tensor, read back with
    ``item()`` (an unbacked float: ``alpha=m`` of ``add_``, whose derivative asks
    ``alpha == 1``), met by a graph compiled at call time, outside Dynamo's compile
    (which would restart with the float specialised): the call runs eagerly
    (``eager_replay``), as eager runs it."""
    from torch._guards import CompileContext
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    symbols = getattr(getattr(e, "cond", None), "free_symbols", ())
    return CompileContext.try_get() is None and any(
        symbol_is_type(s, SymT.UNBACKED_FLOAT) for s in symbols
    )


@contextlib.contextmanager
def trace_errors(fn: Callable[..., Any]):
    """Turn torch's tracing failures into a ``TraceError`` naming the op and the user's line;
    an error that is not aotgrad's own verdict (what the function raised, an
    ``EagerRefusal``) is marked ``raised_while_tracing`` (``aotgrad.eager_replay``)."""
    try:
        with _translated(fn):
            yield
    except Exception as e:
        if not isinstance(e, AotgradError) or isinstance(e, EagerRefusal):
            mark_raised_while_tracing(e)
        _release_held_nodes(e.__traceback__)
        raise


def _release_held_nodes(tb: Any) -> None:
    """Drop the autograd nodes the traces' ``EagerCalls`` hold (``leaf_nodes``) from the
    frames an error leaves alive: an accumulator whose variable a write reset, kept alive
    after its graph by such a frame, aborts the process when the cyclic GC traverses it
    (a torch bug: soak 239468)."""
    from ..eager_calls import EagerCalls

    while tb is not None:
        for value in tb.tb_frame.f_locals.values():
            if isinstance(value, EagerCalls):
                value.leaf_nodes.clear()
        tb = tb.tb_next


@contextlib.contextmanager
def _translated(fn: Callable[..., Any]):
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    try:
        yield
    except (TraceError, UnsupportedError):
        raise
    except UnsupportedOperatorException as e:
        raise TraceError(
            f"cannot trace {name}: op {_failing_op(e)} has no fake (meta) kernel; "
            f"called at {_user_frame(e.__traceback__)}"
        ) from e
    except (DataDependentOutputException, DynamicOutputShapeException) as e:
        # a value the trace cannot know (``bool(t)``, ``t.item()``): eager runs the function,
        # and so does the call (``eager_replay``, with a warning naming this)
        error = TraceError(
            f"cannot trace {name}: op {_failing_op(e)} has a data-dependent output; "
            f"called at {_user_frame(e.__traceback__)}"
        )
        mark_raised_while_tracing(error)
        raise error from e
    except GuardOnDataDependentSymNode as e:
        # (a Python float Dynamo passed as a 0-dim tensor, read back: ``_on_dynamos_float``)
        error = TraceError(
            f"cannot trace {name}: data-dependent control flow (a Python branch or "
            f"conversion on a tensor's value) at {_user_frame(e.__traceback__)}"
        )
        mark_raised_while_tracing(error)
        raise error from e
    except RuntimeError as e:
        worded = _runtime_error(name, e)
        if worded is None:
            raise
        raise worded from e
    except AssertionError as e:
        eagers = _eagers_error(e)
        if eagers is not None:
            raise eagers from e
        if "Please convert all Tensors to FakeTensors" in str(e):
            # a real tensor met the traced ones: one the function reads from outside
            raise run_eagerly(
                UnsupportedError(
                    f"cannot trace {name}: it reads a tensor that is not one of its "
                    f"arguments (a global, or a closure's) at {_user_frame(e.__traceback__)}: "
                    "pass it as an argument (a module's parameters and buffers: aot_module)"
                )
            ) from e
        raise
    except ValueError as e:
        # torch's reference view raises ValueError where eager's kernel raises
        # RuntimeError ("view size is not compatible with input tensor's size and stride")
        if str(e).startswith("Cannot view a tensor"):
            raise EagerRefusal(str(e)) from e
        raise
