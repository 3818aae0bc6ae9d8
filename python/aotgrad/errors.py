"""aotgrad's exceptions: one hierarchy rooted at :class:`AotgradError`.

Raised by Rust (defined in ``aotgrad._rust``, re-exported here):

- :class:`TableError`: a node table breaks the format contract
  (``docs/node_table.md``). ``err.column`` names the column, ``err.node`` the
  row (or ``None``); the message says what is wrong.
- :class:`GraphError`: a graph is not a valid joint graph (a broken store
  invariant, a value read where it cannot be). ``err.node`` names the node;
  messages from the verifier print the nodes around it.
- :class:`FlowError`: bad input to a max-flow / min-cut primitive.
- :class:`PartitionError`: a partition cannot satisfy its constraints (e.g. a
  forward output that depends on a tangent).
- :class:`InternalError`: Rust code panicked. Always a bug in aotgrad.

Raised by Python:

- :class:`TraceError`: a function cannot be traced (a data-dependent branch,
  an op without a fake kernel). The message names the op and the user's line.
- :class:`UnsupportedError`: a feature aotgrad does not handle (yet).
  :class:`NeedsSyntheticBase`, one of them, is caught: the function is compiled
  again over the inputs' common base.
- :class:`EagerRefusal`: a program eager PyTorch itself refuses (also a
  ``RuntimeError``, the type eager raises), e.g. an in-place write to a leaf
  that requires grad.
- :class:`GuardError`: a compiled artefact's assumptions keep failing (too
  many recompilations), or a guard cannot be expressed.
- :class:`CompileError`: the downstream compiler (Inductor, a user's
  ``fw_compiler``) failed on a graph aotgrad produced.

``except aotgrad.errors.AotgradError`` catches all of them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from ._rust import (
    AotgradError,
    FlowError,
    GraphError,
    InternalError,
    PartitionError,
    TableError,
)

__all__ = [
    "AotgradError",
    "CompileError",
    "EagerReplayWarning",
    "FlowError",
    "GraphError",
    "GuardError",
    "HookedViewRead",
    "InternalError",
    "NeedsSyntheticBase",
    "PartitionError",
    "TableError",
    "TraceError",
    "UnsupportedError",
]


def _with_context(message: str, op: object | None, where: str | None) -> str:
    parts = [message]
    if op is not None:
        parts.append(f"op: {op}")
    if where is not None:
        parts.append(f"at: {where}")
    return "; ".join(parts)


class TraceError(AotgradError):
    """A function that cannot be traced into a joint graph.

    ``op`` (the failing op) and ``where`` (the user's ``file:line``) are kept as
    attributes and appended to the message when given.
    """

    def __init__(self, message: str, *, op: object | None = None, where: str | None = None):
        super().__init__(_with_context(message, op, where))
        self.op = op
        self.where = where


class UnsupportedError(AotgradError):
    """A program or feature aotgrad does not support (yet)."""


class NeedsSyntheticBase(UnsupportedError):
    """Inputs that overlap in memory are written: the caller can retry with the group
    passed as one synthetic base (``aotgrad.alias.synthetic_base``). Raised
    after the trace (``alias.classify``), or during it where the function reaches past an
    input into its base (``EagerCalls``)."""

    def __init__(
        self,
        message: str,
        inputs: list[int],
        groups: Sequence[int] = (),
        whole_storage: Sequence[int] = (),
    ) -> None:
        super().__init__(message)
        self.inputs = inputs
        #: Per input, its alias group (``AliasFacts.input_storage``).
        self.groups = list(groups)
        #: Inputs whose group is every input on their storage, overlapping or not (the
        #: function reaches past the input onto the others' elements).
        self.whole_storage = list(whole_storage)


class EagerRefusal(AotgradError, RuntimeError):
    """A program eager PyTorch refuses too; a ``RuntimeError`` like eager's error."""


class GuardError(AotgradError):
    """A compiled artefact's assumptions failed too often, or cannot be guarded."""


class CompileError(AotgradError):
    """The downstream compiler failed on a forward, backward or inference graph."""


def table_error(column: str, node: int | None, detail: str) -> TableError:
    """A :class:`TableError` raised from Python, worded and shaped like Rust's."""
    at = f" at node {node}" if node is not None else ""
    err = TableError(f"malformed node table: column `{column}`{at}: {detail}")
    err.column = column
    err.node = node
    return err


class HookedViewRead(RuntimeError):
    """Raised by the runtime before the graph runs: a view input hooked before the call
    and read before the function writes it, whose hooks eager runs with those reads'
    gradient only (``runtime.call_inputs.unhooked_views``); the call runs eagerly."""


class UnderFunctorchTransform(RuntimeError):
    """Raised by the guard before anything runs: an argument is a ``torch.func`` wrapper
    (``grad``, ``vmap``, ``jacrev`` over the compiled function): the call runs eagerly,
    under the transform, as eager's does."""


class EagerReplayWarning(UserWarning):
    """A call whose trace raised an error eager PyTorch does not raise ran eagerly
    (``aotgrad.eager_replay``): aotgrad could not compile a program eager runs."""


_RAISED_WHILE_TRACING = "_aotgrad_raised_while_tracing"


def mark_raised_while_tracing(e: BaseException) -> None:
    """Note on ``e`` that tracing the user's function raised it (not an aotgrad verdict)."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(e, _RAISED_WHILE_TRACING, True)


def run_eagerly(e: BaseException) -> BaseException:
    """``e``, marked (``mark_raised_while_tracing``) so that the calls run eagerly with an
    ``EagerReplayWarning`` naming it: eager runs the function, only a trace cannot."""
    mark_raised_while_tracing(e)
    return e


def raised_while_tracing(e: BaseException) -> bool:
    return getattr(e, _RAISED_WHILE_TRACING, False) is True


_RAISED_BY_GRAPH = "_aotgrad_raised_by_graph"


def mark_raised_by_graph(e: BaseException) -> None:
    """Note on ``e`` that a compiled graph raised it as it ran (an index out of range that
    only values show), before the call wrote anything the caller sees."""
    with contextlib.suppress(AttributeError, TypeError):
        setattr(e, _RAISED_BY_GRAPH, True)


def raised_by_graph(e: BaseException) -> bool:
    return getattr(e, _RAISED_BY_GRAPH, False) is True
