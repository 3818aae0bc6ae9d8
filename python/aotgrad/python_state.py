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

import collections
import collections.abc
import contextlib
import dis
import functools
import io
import os
import random
import sys
import types
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .autocast_state import restore as restore_autocast
from .autocast_state import snapshot as autocast_snapshot
from .errors import EagerRefusal

__all__ = ["ReadValues", "refuse_changes", "set_back", "tracing", "watch"]

_PLAIN = (int, float, bool, complex, str, bytes, type(None))
_CONTAINERS = (list, dict, set, collections.deque)
#: Attributes of one object, entries of one dict looked at (one level below a name).
_MOST_CHILDREN = 64


class _Slot:
    """Where a watched value lives: a dict's key (globals, a dict, an instance's
    ``__dict__``), a closure cell, or a class attribute."""

    def __init__(self, holder: Any, key: Any = None) -> None:
        self.holder, self.key = holder, key

    def get(self) -> Any:
        h = self.holder
        if isinstance(h, dict):
            return h.get(self.key, _GONE)
        if isinstance(h, list):
            return h[self.key] if -len(h) <= self.key < len(h) else _GONE
        if isinstance(h, type):
            return h.__dict__.get(self.key, _GONE)
        try:
            return h.cell_contents
        except ValueError:
            return _GONE

    def set(self, value: Any) -> None:
        h = self.holder
        if isinstance(h, (dict, list)):
            h[self.key] = value
        elif isinstance(h, type):
            setattr(h, self.key, value)
        else:
            h.cell_contents = value


@dataclass
class _Watched:
    label: str
    slot: _Slot
    value: Any
    before: Any  # the value (plain), the length (list) or a copy (other containers)

    def changed(self) -> bool:
        now = self.slot.get()
        if now is not self.value:
            return not (
                isinstance(now, _PLAIN) and type(now) is type(self.value) and now == self.value
            )
        if isinstance(now, list):
            return len(now) != self.before
        if isinstance(now, collections.deque):
            return len(now) != len(self.before) or any(a is not b for a, b in zip(now, self.before))
        if isinstance(now, _CONTAINERS):
            return len(now) != len(self.before)
        return False

    def set_back(self) -> None:
        now = self.slot.get()
        if now is not self.value:
            self.slot.set(self.value)
        elif isinstance(now, list):
            del now[self.before :]
        elif isinstance(now, dict):
            for k in [k for k in now if k not in self.before]:
                del now[k]
        elif isinstance(now, set):
            now.intersection_update(self.before)
        elif isinstance(now, collections.deque):
            now.clear()
            now.extend(self.before)


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


def _snapshot(label: str, slot: _Slot, value: Any) -> _Watched | None:
    if isinstance(value, _PLAIN):
        return _Watched(label, slot, value, value)
    if isinstance(value, list):
        return _Watched(label, slot, value, len(value))
    if isinstance(value, set):
        return _Watched(label, slot, value, set(value))
    if isinstance(value, (dict, collections.deque)):
        return _Watched(label, slot, value, list(value))
    return None


def _users_object(value: Any) -> bool:
    """An object of the user's whose attributes a function may change (``cfg.calls``):
    not a module, function, tensor or ``nn.Module`` (``guards`` watches those), nor one
    of Python's or torch's own."""
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType)):
        return False
    if isinstance(value, (torch.Tensor, torch.nn.Module, *_PLAIN, *_CONTAINERS)):
        return False
    owner = value if isinstance(value, type) else type(value)
    return not owner.__module__.startswith(("torch", "builtins", "aotgrad", "numpy", "typing"))


def _children(label: str, value: Any) -> Iterator[_Watched | None]:
    """One level below a watched name: a dict's entries, a user object's or class's
    attributes (``G["calls"] += 1``, ``cfg.calls += 1``, ``Counter.n += 1``)."""
    if isinstance(value, dict):
        items = list(value.items())[:_MOST_CHILDREN]
        holder: Any = value
    elif isinstance(value, list):  # (``SCALE[0]``)
        items = list(enumerate(value[:_MOST_CHILDREN]))
        holder = value
    elif _users_object(value) and isinstance(
        getattr(value, "__dict__", None), (dict, types.MappingProxyType)
    ):
        holder = value if isinstance(value, type) else value.__dict__
        items = [(k, v) for k, v in vars(value).items() if not k.startswith("__")][:_MOST_CHILDREN]
    else:
        return
    for k, v in items:
        yield _snapshot(
            f"{label}[{k!r}]" if isinstance(value, (dict, list)) else f"{label}.{k}",
            _Slot(holder, k),
            v,
        )


def _watched_names(f: types.FunctionType) -> Iterator[tuple[str, _Slot]]:
    g = f.__globals__
    for name in dict.fromkeys(_names(f.__code__)):
        if name in g and not name.startswith("__"):
            yield name, _Slot(g, name)
    for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
        yield name, _Slot(cell)
    for k, d in enumerate((*(f.__defaults__ or ()), *(f.__kwdefaults__ or {}).values())):
        if isinstance(d, (*_CONTAINERS, collections.abc.Iterator)):  # (``acc=[]``)
            yield f"default {k}", _Slot({0: d}, 0)


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


def _module_containers(mod: torch.nn.Module) -> Iterator[_Watched | None]:
    """The lists, dicts, sets and deques ``mod`` and its submodules hold as attributes
    (``self.history.append(loss.item())``, ``self.feats["h"] = h``; their plain settings
    are ``guards``')."""
    for name, m in mod.named_modules():
        for k, v in m.__dict__.items():
            if not k.startswith("_") and isinstance(v, _CONTAINERS):
                yield _snapshot(f"{name or type(mod).__name__}.{k}", _Slot(m.__dict__, k), v)


def watch(fn: Any) -> list[Any]:
    """The state ``refuse_changes`` checks after a trace of ``fn``."""
    f = _function(fn)
    if f is None:
        return []
    found: list[Any] = list(_generators())
    if isinstance(fn, torch.nn.Module):
        found += _module_containers(fn)
    for label, slot in _watched_names(f):
        value = slot.get()
        if value is _GONE:
            continue
        found.append(_snapshot(label, slot, value))
        found += _children(label, value)
    return [w for w in found if w is not None]


def _iterators(fn: Any) -> list[str]:
    """The names ``fn``'s code reads that hold an iterator (``next(steps)``)."""
    f = _function(fn)
    if f is None:
        return []
    return [
        label
        for label, slot in _watched_names(f)
        if isinstance(slot.get(), collections.abc.Iterator)
    ]


def set_back(watched: list[Any]) -> list[Any]:
    """What of ``watched`` changed, set back."""
    changed = [w for w in watched if w.changed()]
    for w in changed:
        w.set_back()
    return changed


def refuse_changes(
    watched: list[Any], fn: Any, printed: bool = False, also: Sequence[str] = ()
) -> None:
    """After a trace: a change to ``watched`` set back, and an ``EagerRefusal``; also
    where the trace ``printed`` or warned from the user's code, or changed what ``also``
    names (set back by the caller)."""
    changed = [w.label for w in set_back(watched)]
    code = getattr(_function(fn), "__code__", None)
    if changed and code is not None:
        _written.setdefault(code, set()).update(changed)
    if printed:
        changed.append("what it prints or warns")
    changed += also
    if not changed:
        return
    name = getattr(_function(fn), "__qualname__", "the function")
    raise EagerRefusal(
        f"{name} changes Python state ({', '.join(changed)}), which a traced call would "
        "change once, at trace time, with stand-in values; eager changes it every call: "
        "the calls run eagerly (torch.compile replays such changes)"
    )


@contextlib.contextmanager
def tracing(fn: Any) -> Iterator[None]:
    """Around a trace of ``fn``'s code: ``watch``, with what it prints kept back and the
    warnings it emits recorded; a change refused (``refuse_changes``). Where the trace
    raises, the state is set back and the error goes on (the call replays eagerly or
    fails as it would have)."""
    state = watch(fn)
    autocast = autocast_snapshot()
    advanced = _iterators(fn)
    if advanced:  # (what a trace takes from one cannot be put back: refused before it)
        raise EagerRefusal(
            f"the function reads an iterator ({', '.join(advanced)}): a trace would take "
            "its items once; eager takes them every call: the calls run eagerly"
        )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            yield
        except BaseException:
            set_back(state)
            raise
    users = [w for w in seen if not _ours(w.filename)]
    for w in seen if not users else ():  # (torch's own, as they would have been)
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    also = []
    if autocast_snapshot() != autocast:  # (``torch.set_autocast_enabled(...)`` left on)
        restore_autocast(autocast)
        also.append("torch's autocast state, left changed")
    refuse_changes(state, fn, printed=bool(out.getvalue() or users), also=also)


def _ours(filename: str) -> bool:
    """A warning from torch's or aotgrad's code (not the user's)."""
    return any(f"{os.sep}{pkg}{os.sep}" in filename for pkg in ("torch", "aotgrad", "functorch"))


#: Labels of the state each function (its code object) was seen to change: not guarded.
_written: dict[types.CodeType, set[str]] = {}


class ReadValues:
    """The plain values ``fn``'s code reads from globals, closure cells, and one level
    below them (``CFG["scale"]``, ``cfg.scale``), as part of the guard: a trace bakes
    them into the graph, and eager reads them every call (a global scale the caller
    changed between calls kept its first value; a blind suite). What the function
    itself changes is not guarded (those calls run eagerly: ``refuse_changes``)."""

    def __init__(self, fn: Any) -> None:
        f = _function(fn)
        self.code = None if f is None else f.__code__
        self.slots: list[tuple[str, _Slot]] = []
        if f is not None:
            loaded, keys = _own_reads(f)
            for w in watch(f):
                if not isinstance(w, _Watched) or _read(w.value) is _UNREAD:
                    continue
                parent = w.label.split(".")[0].split("[")[0]
                child = parent != w.label
                if parent in loaded and (not child or w.slot.key in keys):
                    self.slots.append((w.label, w.slot))
        self._seen = -1

    def __bool__(self) -> bool:
        return bool(self.slots)

    def __call__(self) -> tuple[Any, ...]:
        written = _written.get(self.code) if self.code is not None else None
        if written is not None and len(written) != self._seen:
            self._seen = len(written)
            self.slots = [(label, slot) for label, slot in self.slots if label not in written]
        return tuple(_read(slot.get()) for _, slot in self.slots)


_UNREAD = object()


def _own_reads(f: types.FunctionType) -> tuple[set[str], set[Any]]:
    """The globals and closure variables ``f``'s own code loads (not its nested
    functions': a hook defined inside may change them as the backward runs), and the
    attribute names and constants it uses (``cfg.scale``, ``CFG["scale"]``)."""
    loads = ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF")
    loaded = {i.argval for i in dis.get_instructions(f) if i.opname in loads}
    code = f.__code__
    keys = set(code.co_names) | {c for c in code.co_consts if isinstance(c, (str, int))}
    return loaded, keys


def _read(value: Any) -> Any:
    """What of ``value`` the guard holds: a plain value itself; else ``_UNREAD``. (Not a
    list's items: a list hooks or the caller's loop append to would retrace each call.)"""
    return value if isinstance(value, _PLAIN) else _UNREAD
