"""Guards: what a compiled artefact assumed about its call, checked cheaply on every call.

A compiled graph is specialised on

* the modes of the call: grad mode, inference mode, autocast (per device type,
  with its dtype) and the default dtype — all four change what gets traced;
* per tensor input: dtype (and for a complex one, its conjugate bit), device,
  requires_grad (and, for one that does, whether it is a leaf: eager refuses an
  in-place write to a leaf, and whether a non-leaf retains grad: the compiled backward
  fills its ``.grad`` where the function writes it), sizes and strides (under
  ``dynamic=True`` only the rank, which sizes are 0 or 1 and which sizes within
  the tensor are equal; the rest is checked by the symbolic guard, below);
* which inputs share storage (``alias_groups``) and, for those that do, their
  storage offsets and which pairs of them overlap in memory (``storage_layout``);
* the values of non-tensor arguments (ints, floats — ``-0.0`` and ``nan`` told
  apart —, bools, strings, dtypes…, also inside lists, tuples and dicts; the
  pytree structure of the arguments, dict keys included, is part of the key;
  an unhashable object is keyed by identity);
* a caller-supplied state: for modules, every submodule's ``training`` flag
  (``module_state``; ``aot_module`` gets it from ``api.module_snapshot``, with each
  submodule's plain settings: ``ModuleSettings``, ``Dropout.p``, ``self.scale``). A
  module's parameters and buffers are not keyed by identity: they are graph
  inputs read by name on every call, so a replaced one is simply the next
  call's input, checked like any tensor argument; their names are part of the
  key, and tied ones (one tensor under two names) show up as aliasing.

``call_key`` turns one call into a hashable key; equal keys may share a
compiled artefact. Under ``dynamic=True`` the key alone is not enough: the
ShapeEnv of the compilation holds guards on the symbolic sizes (duck sizing
across tensors, strides, ``x.shape[0] > 3`` branches taken while tracing);
``ShapeGuard`` compiles them once into one Python expression evaluated on the
real inputs of a call whose key matches.

Cost per call (``benches/call_overhead.py`` prints it): about 1 µs plus 1.2 µs
per tensor argument on an idle core (3 to 4 µs for two tensors: every tensor
attribute read is a ~160 ns call into torch), the key's hash and one dict probe
included. The overlap checks run only when inputs share storage, the symbolic
guard only under ``dynamic=True`` (one precompiled expression), and
``aot_module`` adds one walk over the module (``module_snapshot``: ~4 µs for a
three-module Sequential; 50 µs for the 4-layer GPT of ``aotgrad.tools.models``, 38
modules, 29 µs of it without the plain settings of ``ModuleSettings``).

``describe_change`` says which assumption differs between two keys, for the
recompilation-limit error.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

# Whether two inputs can reach a common byte: the same test that decides synthetic bases.
from .alias.storage import overlaps as overlapping
from .errors import EagerRefusal, UnderFunctorchTransform, UnsupportedError

_AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu")


#: Device types whose autocast dtype a block the function enters reads when it names none
#: (``with torch.autocast("cpu"):``), where the caller's autocast is off.
_DEFAULT_DTYPE_DEVICES = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)


def _autocast_state() -> tuple[Any, ...]:
    """Per enabled device type its dtype, and whether casts are cached (a function that
    writes a weight between two uses reads the stale cast only where they are); with
    autocast off, the dtypes a block inside would take (``torch.set_autocast_dtype``,
    or an outer ``autocast(dtype=..., enabled=False)``, changes them)."""
    if not torch._C._is_any_autocast_enabled():
        return tuple(torch.get_autocast_dtype(d) for d in _DEFAULT_DTYPE_DEVICES)
    state: list[Any] = [torch.is_autocast_cache_enabled()]
    for d in _AUTOCAST_DEVICES:
        try:
            if torch.is_autocast_enabled(d):
                state.append((d, torch.get_autocast_dtype(d)))
        except RuntimeError:  # a device type this build does not know
            continue
    return tuple(state)


def _dynamic_shape(t: torch.Tensor, static: tuple[int, ...] = ()) -> tuple[Any, ...]:
    # Sizes 0 and 1 are specialised; equal sizes share one symbol (duck sizing); the
    # ``static`` dimensions are sizes of their own.
    first: dict[int, int] = {}
    pattern = []
    for d, s in enumerate(t.shape):
        if s < 2 or d in static:
            pattern.append(("const", s))
        else:
            pattern.append(("sym", first.setdefault(s, d)))
    return tuple(pattern)


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``b`` may be passed to the graph as ``a``: the very same tensor. Another
    object on the same memory seen the same way (``x`` and ``x.detach()``) is an input of
    its own: what the function returns of it is that object or a view of it (as one graph
    input, ``return t1`` gave the caller ``x1``, and ``t1[0]._base`` was ``x1``)."""
    return a is b


def alias_groups(tensors: Sequence[torch.Tensor]) -> tuple[tuple[int, int], ...]:
    """Per tensor input: (index of the first input sharing its storage, index of the first
    input that is the very same view of it — same data pointer, sizes, strides, dtype, and
    the same tensor object when either requires grad).

    A storage is identified by its base address (``data_ptr - storage_offset * itemsize``),
    which costs three attribute reads and no Python storage object."""
    first: dict[int, int] = {}
    out: list[tuple[int, int]] = []
    for i, t in enumerate(tensors):
        p = t.data_ptr()
        j = first.setdefault(p - t.storage_offset() * t.element_size() if p else -1 - i, i)
        if j == i:
            out.append((i, i))
            continue
        same = next((k for k in range(i) if out[k][0] == j and _same_view(tensors[k], t)), i)
        out.append((j, same))
    return tuple(out)


@functools.cache
def _unaliased(n: int) -> tuple[tuple[int, int], ...]:
    """``alias_groups`` of ``n`` tensors no two of which share storage."""
    return tuple((i, i) for i in range(n)) if n > 1 else ()


def storage_layout(
    tensors: Sequence[torch.Tensor], groups: tuple[tuple[int, int], ...]
) -> tuple[Any, ...]:
    """For the inputs that share storage with another input: ``((index, storage_offset)…,
    (overlapping pairs (i, j), i < j…))``; ``()`` when no two inputs share storage."""
    shared = [i for i, (j, _) in enumerate(groups) if j != i]
    if not shared:
        return ()
    members: dict[int, list[int]] = {}
    for i in shared:
        members.setdefault(groups[i][0], [groups[i][0]]).append(i)
    offsets = []
    pairs = []
    for group in members.values():
        for n, i in enumerate(group):
            offsets.append((i, tensors[i].storage_offset()))
            for j in group[n + 1 :]:
                if overlapping(tensors[i], tensors[j]):
                    pairs.append((i, j))
    return (tuple(sorted(offsets)), tuple(pairs))


def _const(a: Any) -> tuple[Any, ...]:
    if type(a) is torch.SymInt and a.node.is_nested_int():
        # a nested tensor's ragged size (Dynamo passes it to a graph over a jagged input):
        # new for every offsets tensor; the offsets themselves are guarded as a leaf
        return ("nested int", a.node.nested_int_coeff())
    if type(a) is float and (a != a or a == 0.0):
        return ("const", float, repr(a))  # nan == nan for the key; -0.0 != 0.0
    try:
        hash(a)
    except TypeError:
        return ("const-id", type(a), id(a))
    return ("const", type(a), a)


def call_key(
    flat_args: Sequence[Any],
    *,
    dynamic: bool,
    state: Any = None,
    extra: Any = (),
    static_dims: dict[int, tuple[int, ...]] | None = None,
) -> tuple:
    """The guard key of one call (see the module docstring):
    ``(modes, per-argument facts, alias groups, storage layout, state, extra)``;
    ``static_dims``: under ``dynamic``, per tensor argument, the sizes kept static."""
    tensors: list[torch.Tensor] = []
    parts: list[Any] = []
    bases: dict[int, int] = {}  # storage base address -> first tensor on it
    shared = False
    for a in flat_args:
        if isinstance(a, torch.Tensor):
            rg = a.requires_grad
            leaf = rg and _is_leaf(a)
            kept = leaf is False and a.retains_grad
            dt = a.dtype
            if dt.is_complex and a.is_conj():  # (a lazily conjugated view: ``x.is_conj()``)
                dt = (dt, "conjugated")
            if dynamic:
                static = static_dims.get(len(tensors), ()) if static_dims else ()
                parts.append((dt, a.device, rg, leaf, kept, _dynamic_shape(a, static)))
            else:
                parts.append((dt, a.device, rg, leaf, kept, a.shape, a.stride()))
            try:
                p = a.data_ptr()
            except RuntimeError:  # no storage: a sparse layout, which aotgrad does not trace
                raise _without_storage(a, len(parts) - 1) from None
            n = len(tensors)
            if p and bases.setdefault(p - a.storage_offset() * a.element_size(), n) != n:
                shared = True
            tensors.append(a)
        else:
            parts.append(_const(a))
    if shared:  # rare: the full analysis
        aliases = alias_groups(tensors)
        layout = storage_layout(tensors, aliases)
    else:
        aliases = _unaliased(len(tensors))
        layout = ()
    return (call_modes(), tuple(parts), aliases, layout, state, extra)


def _is_leaf(t: torch.Tensor) -> bool | str:
    """``t.is_leaf``; ``"stale"`` where reading its node raises (a no_grad view whose
    base was written with grad): the call then raises as eager's does."""
    try:
        return t.is_leaf
    except RuntimeError:
        return "stale"


def _without_storage(t: torch.Tensor, position: int) -> Exception:
    if torch._C._functorch.is_functorch_wrapped_tensor(t):
        return UnderFunctorchTransform(
            f"argument {position} is a torch.func transform's tensor (torch.func.grad, "
            "vmap, jacrev... over the compiled function)"
        )
    return UnsupportedError(
        f"argument {position} is a tensor without storage (layout {t.layout}): aotgrad "
        "traces strided tensors only; pass it dense (.to_dense()), or compile with "
        "torch.compile, where Dynamo runs the sparse operations outside the graph"
    )


def call_modes() -> tuple[Any, ...]:
    """The modes a traced graph depends on: grad mode, inference mode, autocast (per
    device type, with its dtype), the default dtype."""
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        _autocast_state(),
        torch.get_default_dtype(),
    )


def module_state(mod: torch.nn.Module) -> tuple[bool, ...]:
    """Every submodule's ``training`` flag, in ``mod.modules()`` order."""
    return tuple(m.training for m in mod.modules())


#: Attribute values a forward reads as constants, which the trace bakes in.
_PLAIN = frozenset((bool, int, float, str, type(None)))


def plain_settings(mod: torch.nn.Module) -> list[tuple[Any, str, Any]]:
    """(submodule, name, value) of every public plain setting or tensor attribute in
    ``mod``'s tree (settings as ``ModuleSettings`` finds them; a name the forward may
    set: ``_GONE``), before a traced forward runs."""
    found = []
    for _, m in mod.named_modules():
        found.append((m, _NAMES, frozenset(m.__dict__)))
        for k, v in m.__dict__.items():
            if k[0] != "_" and k != "training" and (type(v) in _PLAIN or _tensor(v)):
                found.append((m, k, v))
    return found


def _tensor(v: Any) -> bool:
    return isinstance(v, torch.Tensor)


def refuse_changed_settings(before: list[tuple[Any, str, Any]]) -> None:
    """After a traced forward: where it changed a plain setting (``self.calls += 1``),
    that setting set back as it was, and the call run eagerly (an ``EagerRefusal``; the
    setting is no longer guarded: ``ModuleSettings.forget_written``). A trace would bake
    the value in and run the forward more than once (blind training-patterns probe:
    three calls gave ``x * 2, x * 4, x * 4`` and ``calls == 4``; eager's ``1, 2, 3``)."""
    changed = set_back_settings(before)
    if not changed:
        return
    m, k, v, now = changed[0]
    raise EagerRefusal(
        f"the module's forward sets {type(m).__name__}.{k} ({_shown(v)} -> {_shown(now)}), "
        "Python state a traced call would bake in or hand back as a traced tensor: the "
        "calls run eagerly (torch.compile traces it)"
    )


def set_back_settings(before: list[tuple[Any, str, Any]]) -> list[tuple[Any, str, Any, Any]]:
    """The settings of ``before`` (``plain_settings``) a traced forward changed, each set
    back as it was: ``(module, name, old value, the new one)``."""
    changed = []
    for m, k, v in before:
        if k is _NAMES:  # (public tensor attributes the forward set anew)
            changed += [
                (m, n, _GONE)
                for n, t in m.__dict__.items()
                if n not in v and n[0] != "_" and _tensor(t)
            ]
        elif _changed(v, m.__dict__.get(k, _GONE)):
            changed.append((m, k, v))
    shown = [(m, k, v, m.__dict__.get(k, _GONE)) for m, k, v in changed]
    for m2, k2, v2 in changed:
        if v2 is _GONE:
            del m2.__dict__[k2]
        else:
            setattr(m2, k2, v2)
    return shown


_GONE = object()
_NAMES = object()  # (the entry holding a module's attribute names)


def _changed(old: Any, now: Any) -> bool:
    return now is not old and (_tensor(old) or _tensor(now) or now is _GONE or now != old)


def _shown(v: Any) -> str:
    if v is _GONE:
        return "unset"
    return f"a {type(v).__name__}" if _tensor(v) else repr(v)


class ModuleSettings:
    """The plain settings of one module tree that ``aot_module`` guards: per submodule, its
    ``training`` flag with the public attributes holding a bool, int, float, str or None
    (``Dropout.p``, ``self.scale = 2.0``), whose values a traced forward bakes in. Their
    names are found again only when a module's ``__dict__`` grows or shrinks. A setting
    the forward itself changes (``self.calls += 1``) makes the calls run eagerly
    (``refuse_changed_settings``), and is not guarded: a key holding it would differ on
    every call. A nan setting compares unequal to
    itself: each call then compiles again, as a changed value would."""

    def __init__(self) -> None:
        #: module id -> (its ``__dict__``'s length, the names of its settings)
        self.names_of: dict[int, tuple[int, tuple[str, ...]]] = {}
        #: (module id, name) of settings a traced forward changed
        self.changed_by_forward: set[tuple[int, str]] = set()

    def of(self, m: torch.nn.Module) -> Any:
        """What of submodule ``m`` the key holds: ``training``, or it and the settings."""
        d = m.__dict__
        known = self.names_of.get(id(m))
        if known is None or known[0] != len(d):
            skip = self.changed_by_forward
            names = tuple(
                k
                for k, v in d.items()
                if k[0] != "_" and k != "training" and type(v) in _PLAIN and (id(m), k) not in skip
            )
            known = self.names_of[id(m)] = (len(d), names)
        if not known[1]:
            return m.training
        return (m.training, *[d.get(k) for k in known[1]])

    def forget_written(self, modules: Sequence[torch.nn.Module], before: Sequence[Any]) -> None:
        """After a call that traced: stop guarding the settings its forward changed
        (``before``: what ``of`` gave for each of ``modules`` ahead of the call)."""
        for m, b in zip(modules, before):
            known = self.names_of.get(id(m))
            if not known or not isinstance(b, tuple):
                continue
            d = m.__dict__
            for k, old in zip(known[1], b[1:]):
                if d.get(k) is not old and d.get(k) != old:
                    self.changed_by_forward.add((id(m), k))
                    self.names_of.pop(id(m), None)


class ShapeGuard:
    """The symbolic-shape guards of one ``dynamic=True`` compilation, compiled once into a
    Python expression over the real graph inputs (``L['t0'].size()[0] == …``)."""

    def __init__(self, code: str) -> None:
        from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

        self.code = code
        self._globals = dict(SYMPY_INTERP)
        self._compiled = compile(code, "<aotgrad shape guard>", "eval")

    @staticmethod
    def of(fake_mode: Any, fake_inputs: Sequence[Any]) -> ShapeGuard | None:
        shape_env = getattr(fake_mode, "shape_env", None)
        if shape_env is None:
            return None
        code = shape_env.produce_guards_expression(list(fake_inputs), ignore_static=False)
        return ShapeGuard(code) if code else None

    def _locals(self, inputs: Sequence[Any]) -> dict[str, Any]:
        return {"L": {f"t{i}": x for i, x in enumerate(inputs)}}

    def __call__(self, inputs: Sequence[Any]) -> bool:
        return bool(eval(self._compiled, self._globals, self._locals(inputs)))

    def failing(self, inputs: Sequence[Any]) -> list[str]:
        """The conjuncts that ``inputs`` violate (for error messages; slow)."""
        env = self._locals(inputs)
        return [c for c in self.code.split(" and ") if not eval(c, self._globals, env)]


_MODE_NAMES = ("grad mode", "inference mode", "autocast", "default dtype")
_FIELD_NAMES = ("modes", "inputs", "input aliasing", "input storage overlap", "module state")


def describe_change(old: tuple, new: tuple) -> str:
    """Name the first assumption that differs between two call keys."""
    if len(old) != len(new):
        return "the call's structure changed"
    for name, a, b in zip(_FIELD_NAMES, old, new):
        if a == b:
            continue
        if name == "modes":
            for mode, x, y in zip(_MODE_NAMES, a, b):
                if x != y:
                    return f"{mode} {x} -> {y}"
        if name == "inputs" and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    return f"input {i}: {_describe_input(x, y)}"
        if name == "module state" and a is not None and b is not None and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    return f"module state: submodule {i} {_describe_setting(x, y)}"
        return f"{name} changed: {a} -> {b}"
    if old[-1] != new[-1]:
        return f"argument structure changed: {old[-1]} -> {new[-1]}"
    return "nothing (identical keys)"


def _describe_setting(x: Any, y: Any) -> str:
    """One submodule's ``ModuleSettings.of`` change: its training flag, else its settings."""
    tx, ty = (v[0] if isinstance(v, tuple) else v for v in (x, y))
    if tx != ty:
        return f"training {tx} -> {ty}"
    sx, sy = (v[1:] if isinstance(v, tuple) else () for v in (x, y))
    return f"settings (plain attributes) {sx} -> {sy}"


def _describe_input(x: Any, y: Any) -> str:
    if x[0] in ("const", "const-id") or y[0] in ("const", "const-id"):
        return f"non-tensor argument value {x[-1]!r} -> {y[-1]!r}"
    labels = ("dtype", "device", "requires_grad", "is_leaf", "retains_grad", "shape", "stride")
    for label, a, b in zip(labels, x, y):
        if a != b:
            return f"{label} {a} -> {b}"
    return "changed"
