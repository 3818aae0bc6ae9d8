"""Python state the traced function changes: what makes its calls run eagerly.

A trace runs the function on stand-ins, twice (the metadata trace, then the joint
one), and never again: ``global COUNTER; COUNTER += 1`` counted 2 on the first call
and then nothing, the value baked into the graph (outputs wrong); ``log.append(y)`` or
``stash[name] = y`` kept two unreadable ``FunctionalTensor``s (a blind suite's programs:
torch's own AOT Autograd does the same; ``torch.compile`` replays such effects). Eager
changes that state once per call, with real values.

``watch(fn)`` notes, before a trace, the globals ``fn``'s code names and the variables
it closes over: plain values (numbers, strings, None) and the length of lists, dicts and
sets; ``refuse_changes`` after the trace sets a changed value back (a list or set
grown, a dict given keys: the new entries removed) and raises ``EagerRefusal``: the
calls run eagerly, with an ``EagerReplayWarning`` naming the variable. Drawing from
Python's or NumPy's global random generator (``random.random()``,
``np.random.rand()``: the trace would bake one draw into the graph) counts as a change:
the generators are set back and the calls run eagerly. State reached through
attributes (``self.log.append``) is not seen here (a module's own attributes are:
``guards.refuse_changed_settings``).
"""

from __future__ import annotations

import functools
import random
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from .errors import EagerRefusal

__all__ = ["refuse_changes", "watch"]

_PLAIN = (int, float, bool, complex, str, bytes, type(None))
_CONTAINERS = (list, dict, set)


@dataclass
class _Watched:
    name: str
    holder: Any  # a globals dict or a closure cell
    value: Any
    before: Any  # the value (plain) or a copy of the keys / length (containers)

    def now(self) -> Any:
        if isinstance(self.holder, dict):
            return self.holder.get(self.name, _GONE)
        try:
            return self.holder.cell_contents
        except ValueError:
            return _GONE

    def changed(self) -> bool:
        now = self.now()
        if now is not self.value:
            return not (
                isinstance(now, _PLAIN) and type(now) is type(self.value) and now == self.value
            )
        if isinstance(now, list):
            return len(now) != self.before
        if isinstance(now, _CONTAINERS):
            return len(now) != len(self.before)
        return False

    def set_back(self) -> None:
        now = self.now()
        if now is not self.value:
            if isinstance(self.holder, dict):
                self.holder[self.name] = self.value
            else:
                self.holder.cell_contents = self.value
        elif isinstance(now, list):
            del now[self.before :]
        elif isinstance(now, dict):
            for k in [k for k in now if k not in self.before]:
                del now[k]
        elif isinstance(now, set):
            now.intersection_update(self.before)


_GONE = object()


def _function(fn: Any) -> Any:
    """The Python function ``fn`` runs (through partials, bound methods, modules and
    callable objects), or None."""
    for _ in range(8):
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif isinstance(fn, types.MethodType):
            fn = fn.__func__
        elif isinstance(fn, torch.nn.Module):
            fn = type(fn).forward
        elif isinstance(fn, types.FunctionType):
            return fn
        elif callable(fn) and not isinstance(fn, type):
            fn = type(fn).__call__
        else:
            return None
    return None


def _names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for c in code.co_consts:
        if isinstance(c, types.CodeType):  # (lambdas and comprehensions inside)
            yield from _names(c)


def _snapshot(name: str, holder: Any, value: Any) -> _Watched | None:
    if isinstance(value, _PLAIN):
        return _Watched(name, holder, value, value)
    if isinstance(value, list):
        return _Watched(name, holder, value, len(value))
    if isinstance(value, (dict, set)):
        return _Watched(name, holder, value, set(value) if isinstance(value, set) else list(value))
    return None


class _Generator:
    """Python's or NumPy's global random generator, as ``_Watched`` is read."""

    def __init__(self, name: str, get: Any, set_: Any) -> None:
        self.name, self.get, self.set = name, get, set_
        self.before = get()

    def changed(self) -> bool:
        now = self.get()
        if isinstance(now, tuple) and len(now) > 1 and hasattr(now[1], "shape"):  # numpy
            return any(
                not (a == b).all() if hasattr(a, "shape") else a != b
                for a, b in zip(now, self.before)
            )
        return now != self.before

    def set_back(self) -> None:
        self.set(self.before)


def _generators() -> list[Any]:
    found: list[Any] = [_Generator("random", random.getstate, random.setstate)]
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        found.append(_Generator("numpy.random", numpy.random.get_state, numpy.random.set_state))
    return found


def watch(fn: Any) -> list[Any]:
    """The state ``refuse_changes`` checks after a trace of ``fn``."""
    f = _function(fn)
    if f is None:
        return []
    found: list[Any] = list(_generators())
    g = f.__globals__
    for name in dict.fromkeys(_names(f.__code__)):
        if name in g and not name.startswith("__"):
            found.append(_snapshot(name, g, g[name]))
    for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
        try:
            found.append(_snapshot(name, cell, cell.cell_contents))
        except ValueError:  # (an empty cell)
            continue
    return [w for w in found if w is not None]


def refuse_changes(watched: list[Any], fn: Any) -> None:
    """After a trace: a change to ``watched`` set back, and an ``EagerRefusal``."""
    changed = [w for w in watched if w.changed()]
    if not changed:
        return
    for w in changed:
        w.set_back()
    name = getattr(_function(fn), "__qualname__", "the function")
    raise EagerRefusal(
        f"{name} changes Python state ({', '.join(w.name for w in changed)}), which a "
        "traced call would change once, at trace time, with stand-in values; eager "
        "changes it every call: the calls run eagerly (torch.compile replays such changes)"
    )
