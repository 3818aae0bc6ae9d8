"""The child: a call holding subclasses runs an ordinary ``AotFunction`` over their
leaves, one per input layout; the plain function it traces rebuilds the subclasses,
calls the user's function and flattens what it returns; the call's written subclass
arguments are brought up to date afterwards (values, autograd history, versions)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from ..errors import AotgradError, UnsupportedError
from .boundary import (
    PlainGradient,
    as_traced,
    flatten_args,
    flatten_differentiably,
    unflatten_values,
)
from .layout import TRACING_TYPES, Layout, is_subclass, layout_of, leaves, ragged

# ---------------------------------------------------------------- the child function


@dataclass
class _Traced:
    """What one trace of the function returned and wrote, for the calls of its grad
    signature (``_signature``): the child compiles one graph per signature, and what it
    returns (its outputs' layouts, the written inputs it appends) is that graph's."""

    spec: Any = None
    layouts: tuple[Layout | None, ...] = ()
    #: Per subclass argument the function wrote, how far the write moved the rebuilt
    #: wrapper's version counter in the trace (its leaves' own counters are the child's).
    input_writes: dict[int, int] = dataclasses.field(default_factory=dict)
    #: The written subclass arguments whose autograd history the write changed (made
    #: with grad on): their values after the call, which the child returns after the
    #: function's outputs (one per written argument), are written into the caller's
    #: wrapper with autograd.
    history_writes: tuple[int, ...] = ()
    #: Per subclass argument whose metadata the function changed (``t_``,
    #: ``transpose_``, ``unsqueeze_``): its outer size, stride and offset afterwards.
    input_metadata: dict[int, tuple[Any, ...]] = dataclasses.field(default_factory=dict)
    #: Outputs that are a subclass argument itself (``return x``), by output position.
    output_inputs: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Outputs made leaves that require grad inside (``y.requires_grad_()``).
    output_leaves: tuple[int, ...] = ()
    #: Outputs that are an earlier output itself (``return y, y``): its position.
    output_repeats: dict[int, int] = dataclasses.field(default_factory=dict)
    #: Outputs that view a subclass argument (``"input"``) or an earlier output
    #: (``"output"``): which, and the view's outer size, stride and offset.
    output_views: dict[int, tuple[Any, ...]] = dataclasses.field(default_factory=dict)


@dataclass
class _Outputs:
    """What the traced function returned, per grad signature of its calls."""

    traces: dict[Any, _Traced] = dataclasses.field(default_factory=dict)
    last: _Traced | None = None
    #: Per subclass argument, how the traced backward laid out its gradient.
    grad_layouts: dict[int, Layout] = dataclasses.field(default_factory=dict)

    def of(self, args: Sequence[Any]) -> _Traced:
        traced = self.traces.get(_signature(args), self.last)
        assert traced is not None, "the child ran without tracing the function"
        return traced


def _signature(args: Sequence[Any]) -> tuple[Any, ...]:
    """The grad mode and which of the child's arguments require grad: what decides which
    graph the child runs (and so what it returns)."""
    return (
        torch.is_grad_enabled(),
        tuple(isinstance(a, torch.Tensor) and a.requires_grad for a in args),
    )


_INPLACE_DUNDERS = frozenset(
    {"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__"}
)


class _LeafWrites(torch.overrides.TorchFunctionMode):
    """While the traced function runs: an in-place op with grad on, on a subclass
    argument that is a leaf requiring grad (or on a view of one), raises eager's error
    at the write. (Rebuilt from its leaves, the argument is no leaf inside the trace.)"""

    def __init__(self, leaves: set[int]) -> None:
        super().__init__()
        self.leaves = leaves

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if self.leaves and args and torch.is_grad_enabled() and _writes(func, kwargs):
            t = args[0]
            if id(t) in self.leaves:
                raise RuntimeError(
                    "a leaf Variable that requires grad is being used in an in-place operation."
                )
            if isinstance(t, torch.Tensor) and id(t._base) in self.leaves:
                raise RuntimeError(
                    "a view of a leaf Variable that requires grad is being used in an "
                    "in-place operation."
                )
        return func(*args, **kwargs)


#: Methods named like in-place ops that do not write the tensor's values.
_NOT_WRITES = frozenset({"requires_grad_", "detach_", "share_memory_"})


def _writes(func: Any, kwargs: dict[str, Any]) -> bool:
    name = getattr(func, "__name__", "")
    if name in _INPLACE_DUNDERS or "out" in kwargs:
        return True
    return name.endswith("_") and not name.endswith("__") and name not in _NOT_WRITES


def _flatten_outputs(
    out_flat: Sequence[Any], args: Sequence[Any]
) -> tuple[tuple[Layout | None, ...], list[Any]]:
    """The traced function's outputs as plain tensors (differentiably where they require
    grad), and each output's layout (None: plain)."""
    given = {id(x) for x in args if isinstance(x, torch.Tensor)}

    def fresh(x: Any) -> Any:
        # An inner tensor the function received (``return x``) or one that requires
        # grad itself: a view, so the flatten node does not take over its history.
        if id(x) in given or x.requires_grad:
            return x.view_as(x)
        return x

    out_layouts: list[Layout | None] = []
    plain_outs: list[Any] = []
    for o in out_flat:
        if not is_subclass(o):
            out_layouts.append(None)
            plain_outs.append(o)
            continue
        layout = layout_of(o)
        out_layouts.append(layout)
        if torch.is_grad_enabled() and o.requires_grad:
            plain_outs.extend(flatten_differentiably(layout, fresh, as_traced, o))
        else:
            plain_outs.extend(leaves(o, layout, []))
    return tuple(out_layouts), plain_outs


class _MadeToRequireGrad(AotgradError):
    """Raised while tracing: the function made these subclass arguments require grad."""

    def __init__(self, inputs: tuple[int, ...]) -> None:
        super().__init__(f"subclass arguments {inputs} made to require grad")
        self.inputs = inputs


def _made_to_require_grad(wrappers: Sequence[Any], was_rg: Sequence[bool], args: Any) -> None:
    """While tracing (fake arguments: nothing ran), raises ``_MadeToRequireGrad`` for the
    subclass arguments the function called ``requires_grad_()`` on (leaves that require
    grad now; one written with a value that requires grad is no leaf): their leaves were
    traced without grad, so no gradient could reach them."""
    made = tuple(
        k
        for k, x in enumerate(wrappers)
        if x is not None and x.requires_grad and x.is_leaf and not was_rg[k]
    )
    tracing = any(isinstance(a, TRACING_TYPES) for a in args)
    if made and tracing:
        raise _MadeToRequireGrad(made)


def _geometry(t: torch.Tensor) -> tuple[Any, ...]:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset())


def _note_output_aliases(traced: _Traced, out_flat: Sequence[Any], wrappers: Sequence[Any]) -> None:
    """Which outputs repeat an earlier one, and which view a subclass argument or another
    output (rebuilt as views at runtime: ``views_of_inputs``)."""
    first: dict[int, int] = {}
    for j, o in enumerate(out_flat):
        if isinstance(o, torch.Tensor):
            first.setdefault(id(o), j)
    for j, o in enumerate(out_flat):
        if not isinstance(o, torch.Tensor):
            continue
        i = first[id(o)]
        if i != j:
            traced.output_repeats[j] = i
            continue
        base = o._base if is_subclass(o) else None
        if base is None or j in traced.output_inputs:
            continue
        where = next((("input", k) for k, x in enumerate(wrappers) if x is base), None)
        if where is None and first.get(id(base), j) != j:
            where = ("output", first[id(base)])
        geometry = _geometry(o)
        if where is not None and all(isinstance(v, int) for v in (*geometry[0], *geometry[1])):
            traced.output_views[j] = (*where, *geometry)


def _plain_function(
    fn: Callable[..., Any],
    shape: Any,
    layouts: tuple[Layout | None, ...],
    record: _Outputs,
    leaf_inputs: frozenset[int],
) -> Callable[..., list[Any]]:
    """The function the child traces: rebuilds the subclass arguments from their
    leaves, calls ``fn`` (through the caller's pytree ``shape``), flattens its outputs
    to plain tensors and records their layouts in ``record``. ``leaf_inputs``: the
    subclass arguments that are leaves requiring grad (writing one raises, as in eager)."""

    def plain(*args: Any) -> list[Any]:
        full = unflatten_values(args, layouts, record.grad_layouts)
        if torch.is_grad_enabled():
            full = [
                PlainGradient.apply(x)
                if layout is None and isinstance(x, torch.Tensor) and x.requires_grad
                else x
                for x, layout in zip(full, layouts, strict=True)
            ]
        if isinstance(shape, int):
            a, kw = full, {}
        else:
            a, kw = pytree.tree_unflatten(full, shape)
        wrappers = [x if layout is not None else None for x, layout in zip(full, layouts)]
        nodes = [None if x is None else x.grad_fn for x in wrappers]
        before = [None if x is None else _geometry(x) for x in wrappers]
        was_rg = [x is not None and x.requires_grad for x in wrappers]
        with _LeafWrites({id(full[k]) for k in leaf_inputs}):
            out_flat, spec = pytree.tree_flatten(fn(*a, **kw))
        _made_to_require_grad(wrappers, was_rg, args)
        traced = _Traced(spec)
        traced.input_writes = {
            k: x._version for k, x in enumerate(wrappers) if x is not None and x._version
        }
        traced.input_metadata = {
            k: _geometry(x)
            for k, x in enumerate(wrappers)
            if x is not None and _geometry(x) != before[k]
        }
        traced.history_writes = tuple(
            k for k in traced.input_writes if wrappers[k].grad_fn is not nodes[k]
        )
        traced.output_inputs = {
            j: k for j, o in enumerate(out_flat) for k, x in enumerate(wrappers) if o is x
        }
        _note_output_aliases(traced, out_flat, wrappers)
        traced.output_leaves = tuple(
            j
            for j, o in enumerate(out_flat)
            if is_subclass(o) and o.is_leaf and o.requires_grad and j not in traced.output_inputs
        )
        written = [full[k] for k in traced.input_writes]
        traced.layouts, outs = _flatten_outputs([*out_flat, *written], args)
        record.traces[_signature(args)] = record.last = traced
        return outs

    plain.__qualname__ = getattr(fn, "__qualname__", type(fn).__qualname__)
    return plain


@dataclass
class _Child:
    compiled: Any  # an api.AotFunction over the leaves
    outputs: _Outputs


#: A jagged nested tensor's leaves and their ragged (dynamic) dimension; the values'
#: is its ``ragged_idx - 1``.
_RAGGED_LEAF_DIM = {"_offsets": 0, "_lengths": 0, "_min_seqlen_tensor": 0, "_max_seqlen_tensor": 0}


def _dynamic_dims(layout: Layout) -> list[tuple[int, ...]]:
    """Per leaf of ``layout``, the dimensions a dynamic child leaves symbolic: a nested
    tensor's ragged ones (the values' ragged dimension, the offsets' length, the seqlen
    metadata); every other size is static (the layout key covers the outer sizes)."""
    is_ragged = ragged([layout])
    out: list[tuple[int, ...]] = []
    for attr, sub in zip(layout.attrs, layout.inner, strict=True):
        if isinstance(sub, Layout):
            out.extend(_dynamic_dims(sub))
        elif sub is None and not is_ragged:
            out.append(())
        elif sub is None:
            dim = layout.ctx["ragged_idx"] - 1 if attr == "_values" else _RAGGED_LEAF_DIM.get(attr)
            out.append(() if dim is None else (dim,))
    return out


def _child_options(options: Any, flat: Sequence[Any], layouts: Sequence[Layout | None]) -> Any:
    """The parent's options for the child: static inputs (parameters, buffers) mapped
    to their leaves; shapes static (outer sizes are part of the layout key) but for a
    nested tensor's ragged sizes when the parent is dynamic."""
    static = set(options.static_inputs)
    mapped: list[int] = []
    static_dims: dict[int, tuple[int, ...]] = {}
    tensor_index = 0
    for x, layout in zip(flat, layouts, strict=True):
        if not isinstance(x, torch.Tensor):
            continue
        inner = [x] if layout is None else leaves(x, layout, [])
        dynamic = [()] if layout is None else _dynamic_dims(layout)
        for leaf, dims in zip(inner, dynamic, strict=True):
            if tensor_index in static:
                mapped.append(len(static_dims))
            static_dims[len(static_dims)] = tuple(d for d in range(leaf.dim()) if d not in dims)
        tensor_index += 1
    return dataclasses.replace(
        options,
        dynamic=options.dynamic and ragged(layouts),
        static_input_indices=mapped,
        static_dims=static_dims,
        num_params_buffers=0,
        # (its leaves: a replay would not reach the caller's subclasses)
        no_replay="is not supported for this function (a tensor subclass's parts)",
    )


def call(parent: Any, flat: list[Any], shape: Any, state: Any, make_child: Any) -> Any:
    """Run ``parent`` (an ``api.AotFunction``) on a call holding subclasses: through the
    child compiled for this layout of its arguments (``make_child(fn, options)``: the
    api's ``AotFunction``, passed in so that this stage does not import the api)."""
    layouts = tuple(layout_of(x) if is_subclass(x) else None for x in flat)
    leaf_inputs = frozenset(
        k
        for k, x in enumerate(flat)
        if layouts[k] is not None and x.requires_grad and x.is_leaf and torch.is_grad_enabled()
    )
    key = (tuple(None if lay is None else lay.key for lay in layouts), shape, leaf_inputs)
    made = parent.__dict__.setdefault("subclass_made_to_require_grad", {})
    if key in made:  # (the function calls x.requires_grad_() on these: see below)
        for k in made[key]:
            flat[k].requires_grad_()
        return call(parent, flat, shape, state, make_child)
    children: dict[Any, _Child] = parent.__dict__.setdefault("subclass_children", {})
    child = children.get(key)
    if child is None:
        record = _Outputs()
        fn = _plain_function(parent.fn, shape, layouts, record, leaf_inputs)
        options = _child_options(parent.options, flat, layouts)
        child = _Child(make_child(fn, options), record)
        children[key] = child
    plain = flatten_args(flat, layouts, child.outputs.grad_layouts)
    try:
        outs = child.compiled.call_flat(plain, len(plain), state)
    except _MadeToRequireGrad as e:
        # the trace found ``x.requires_grad_()`` on subclass arguments without grad,
        # before anything ran: they are made to require grad first, as the function makes
        # them, and the call runs the child compiled for that (its leaves differentiable)
        made[key] = e.inputs
        return call(parent, flat, shape, state, make_child)
    traced = child.outputs.of(plain)
    rebuilt = unflatten_values(outs, traced.layouts)
    n = len(rebuilt) - len(traced.input_writes)
    _rewrite_inputs(flat, traced, rebuilt[n:])
    for j, k in traced.output_inputs.items():
        rebuilt[j] = flat[k]
    views_of_inputs(traced, flat, rebuilt)
    return pytree.tree_unflatten(rebuilt[:n], traced.spec)


def views_of_inputs(traced: _Traced, flat: Sequence[Any], rebuilt: list[Any]) -> None:
    """Outputs that repeat an earlier one are that output; outputs that view a subclass
    argument or an earlier output are taken as views of it (``as_strided`` of the
    wrapper, which its ``__torch_dispatch__`` applies to its inner tensors): eager's
    ``._base``, shared version counter, and a later write into one reaches the base's
    history. Kept as the child returned them where the view does not land on the same
    inner tensors (a subclass whose ``as_strided`` is no view of its leaves)."""
    for j in traced.output_leaves:  # (a leaf, as eager's: no history through the child)
        rebuilt[j] = rebuilt[j].detach().requires_grad_()
    views = traced.output_views
    # views of arguments, then views of outputs (their bases final by then), then repeats
    for j in sorted(views, key=lambda j: (views[j][0] == "output", views[j][1], j)):
        where, k, size, stride, offset = views[j]
        base = flat[k] if where == "input" else rebuilt[k]
        got = rebuilt[j]
        try:
            view = base.as_strided(size, stride, offset)
        except Exception:  # (a subclass without as_strided: a nested tensor)
            continue
        if view.requires_grad == got.requires_grad and _same_leaves(view, got):
            rebuilt[j] = view
    for j, i in sorted(traced.output_repeats.items()):
        rebuilt[j] = rebuilt[i]


def _same_leaves(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two subclass values hold the same memory, laid out the same way."""
    if type(a) is not type(b):
        return False
    la, lb = leaves(a, layout_of(a), []), leaves(b, layout_of(b), [])
    return len(la) == len(lb) and all(
        x.data_ptr() == y.data_ptr()
        and x.shape == y.shape
        and x.stride() == y.stride()
        and x.dtype == y.dtype
        for x, y in zip(la, lb)
    )


def _relayout(x: torch.Tensor, geometry: tuple[Any, ...]) -> None:
    """The function changed the metadata of the subclass argument ``x`` (``x.t_()``): the
    wrapper takes its new size, stride and offset (``as_strided_``, which the subclass
    applies to its inner tensors too: where the child changed them already, the same
    geometry again). Recorded by autograd where ``x`` requires grad, as eager's ``t_``."""
    try:
        x.as_strided_(*geometry)
    except Exception as e:
        raise UnsupportedError(
            f"the function changed the metadata of a {type(x).__qualname__} argument "
            f"(to size {geometry[0]}), which its as_strided_ cannot replay: {e}"
        ) from e


def _rewrite_inputs(flat: Sequence[Any], traced: _Traced, values: Sequence[Any]) -> None:
    """The written subclass arguments: their leaves hold the new values already (the
    child wrote them); a wrapper whose history the write changed takes them with
    autograd too (a ``copy_``, as aotgrad writes a plain input), so that the caller's
    later uses of it differentiate through the function's write; each wrapper's version
    counter moves as eager's in-place ops on it moved it. (A wrapper without grad written
    with a value that requires grad requires grad afterwards, as eager's.)"""
    for k, new in zip(traced.input_writes, values, strict=True):
        x = flat[k]
        version = x._version + traced.input_writes[k]
        if k in traced.input_metadata:
            _relayout(x, traced.input_metadata[k])
        if k in traced.history_writes:
            x.copy_(new)
        torch._C._autograd._unsafe_set_version_counter((x,), (version,))
