"""The eager oracle of the fidelity tests: ``observe`` records everything eager exposes
about one call — output values, dtype, shape, strides, ``requires_grad``, ``is_leaf``,
``grad_fn``, identity with and storage sharing with the inputs, the inputs afterwards
(values, metadata, version counters), every leaf's gradient and the errors raised — and
``assert_like_eager`` requires a compiled function to observe the same as eager through
``aot_function`` (both partitioners) and ``torch.compile(backend="aotgrad_eager")``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

import aotgrad
from aotgrad.partition import default_partition, min_cut_rematerialization_partition


def _aot(partition_fn: Callable[..., Any]) -> Callable[[Callable], Callable]:
    return lambda fn: aotgrad.aot_function(fn, aotgrad.nop, partition_fn=partition_fn)


def aot_inductor(fn: Callable) -> Callable:
    """``aot_function`` with Inductor as the ``"aotgrad"`` backend runs it (its compilers,
    partitioner wrapper and decompositions)."""
    from aotgrad import inductor

    return aotgrad.aot_function(
        fn,
        inductor.inductor_forward,
        inductor.inductor_backward,
        partition_fn=inductor.inductor_partition(min_cut_rematerialization_partition),
        decompositions=inductor.inductor_decompositions(),
    )


def _dynamo(fn: Callable) -> Callable:
    torch._dynamo.reset()
    return torch.compile(fn, backend="aotgrad_eager")


COMPILERS = {
    "aot_function-min_cut": _aot(min_cut_rematerialization_partition),
    "aot_function-default": _aot(default_partition),
    "dynamo-aotgrad_eager": _dynamo,
}


def _tensor_facts(t: torch.Tensor, args: list[Any]) -> dict[str, Any]:
    storage = t.untyped_storage()
    return {
        "value": t.detach().clone() if storage.nbytes() else None,
        "dtype": t.dtype,
        "shape": tuple(t.shape),
        "stride": tuple(t.stride()),
        "requires_grad": t.requires_grad,
        "retains_grad": _attempt(lambda: t.retains_grad),
        "is_leaf": _attempt(lambda: t.is_leaf),
        "is_view": t._is_view(),
        "has_grad_fn": _attempt(lambda: t.grad_fn is not None),
        "is_input": [t is a for a in args],
        "base_is_input": [t._base is a for a in args],
        "shares_storage": [
            isinstance(a, torch.Tensor)
            and storage.data_ptr() == a.untyped_storage().data_ptr()
            and storage.nbytes() > 0
            for a in args
        ],
        "storage_bytes": storage.nbytes(),
    }


def _attempt(read: Callable[[], Any]) -> Any:
    """A read that eager may refuse (``grad_fn`` of a stale custom-Function view)."""
    try:
        return read()
    except RuntimeError as e:
        return _error(e)


def _version(t: torch.Tensor) -> int | None:
    return None if t.is_inference() else t._version  # inference tensors have none


def _cotangent(o: torch.Tensor, k: int) -> torch.Tensor:
    """A fixed random cotangent for the ``k``-th differentiable output, the same for eager
    and compiled: unlike ones, it tells a gradient from its transpose or permutation."""
    g = torch.Generator().manual_seed(1000 + k)
    return torch.randn(o.shape, generator=g, dtype=torch.float32).to(o.device)


def _error(e: BaseException) -> str:
    """The exception's nearest built-in type (aotgrad's own errors mix in eager's)."""
    kind = next(c for c in type(e).__mro__ if c.__module__ == "builtins")
    return f"raises {kind.__name__}"


def observe(
    fn: Callable,
    make_args: Callable[[], tuple[list[Any], list[torch.Tensor]]],
    compiler: Callable[[Callable], Callable] | None = None,
    ctx: Callable[[], Any] = contextlib.nullcontext,
    after: Callable[[Any], Any] | None = None,
    calls: int = 1,
) -> list[dict[str, Any]]:
    """What one program shows, per call: ``make_args`` returns the arguments and the leaves
    whose gradients are compared; ``after`` runs on the outputs (an in-place write to one)."""
    torch.manual_seed(0)
    g = fn if compiler is None else compiler(fn)
    seen = []
    for _ in range(calls):
        args, leaves = make_args()
        rec: dict[str, Any] = {}
        try:
            with ctx():
                out = g(*args)
        except Exception as e:
            seen.append({"call": _error(e)})
            continue
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        rec["outputs"] = [
            _tensor_facts(o, args) if isinstance(o, torch.Tensor) else o for o in outs
        ]
        rec["same_object"] = [[o is p for p in outs] for o in outs if isinstance(o, torch.Tensor)]
        rec["base_is_output"] = [
            [o._base is p for p in outs] for o in outs if isinstance(o, torch.Tensor)
        ]
        rec["output_versions"] = [_version(o) for o in outs if isinstance(o, torch.Tensor)]
        rec["inputs"] = [
            {**_tensor_facts(a, []), "version": _version(a)} if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        if after is not None:
            try:
                after(outs)
                rec["after"] = "ok"
            except Exception as e:
                rec["after"] = _error(e)
        diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
        if diff:
            try:
                torch.autograd.backward(
                    [(o.float() * _cotangent(o, k)).sum() for k, o in enumerate(diff)]
                )
                rec["grads"] = [None if x.grad is None else x.grad.clone() for x in leaves]
                # leaves the function made and returned: the backward fills their .grad
                rec["output_leaf_grads"] = [
                    None if o.grad is None else o.grad.clone()
                    for o in outs
                    if isinstance(o, torch.Tensor) and o.is_leaf and o.requires_grad
                ]
                # tensors retain_grad() was called on (inside the function or by the caller)
                rec["retained_grads"] = [
                    None if t.grad is None else t.grad.clone()
                    for t in [*outs, *args]
                    if isinstance(t, torch.Tensor) and t.retains_grad
                ]
                rec["inputs_after_backward"] = [
                    {"value": a.detach().clone(), "version": a._version}
                    if isinstance(a, torch.Tensor) and a.untyped_storage().nbytes()
                    else None
                    for a in args
                ]
            except Exception as e:
                rec["grads"] = _error(e)
        seen.append(rec)
    return seen


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b))
        return [d for k in keys for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _differences(x, y, f"{path}[{i}]")]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.shape == b.shape and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
        return (
            []
            if same
            else [f"{path}: eager {a.flatten()[:4].tolist()} compiled {b.flatten()[:4].tolist()}"]
        )
    return [] if a == b else [f"{path}: eager {a!r} compiled {b!r}"]


def assert_like_eager(fn: Callable, make_args: Callable, compiler: Callable, **kw: Any) -> None:
    eager = observe(fn, make_args, None, **kw)
    compiled = observe(fn, make_args, compiler, **kw)
    diffs = _differences(eager, compiled)
    assert not diffs, "\n".join(diffs)


def assert_same_results(got: list[Any], want: list[Any]) -> None:
    """Gradients (or None) seen by eager and by the compiled call, one by one."""
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert (g is None) == (w is None), f"result {k}: eager {w}, compiled {g}"
        if w is not None:
            torch.testing.assert_close(g, w, msg=f"result {k}")


def assert_same_observations(got: list[Any], want: list[Any]) -> None:
    """Observations (tensors, None, counts) seen by eager and by the compiled call."""
    assert len(got) == len(want), f"eager {want}, compiled {got}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if isinstance(w, int):
            assert g == w, f"result {k}: eager {w}, compiled {g}"
            continue
        assert (g is None) == (w is None), f"result {k}: eager {w}, compiled {g}"
        if w is not None:
            torch.testing.assert_close(g, w, msg=f"result {k}")


def _slice_input() -> tuple[torch.Tensor, torch.Tensor]:
    leaf = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    return leaf, (leaf * 1)[1:3]


def _transposed_input() -> tuple[torch.Tensor, torch.Tensor]:
    leaf = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    return leaf, (leaf * 1).t()


def _leaf_view_input() -> tuple[torch.Tensor, torch.Tensor]:
    leaf = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    return leaf, leaf[1:3]


def _view_of_view_input() -> tuple[torch.Tensor, torch.Tensor]:
    leaf = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    return leaf, (leaf * 1).view(2, 2, 3)[1]


#: One (2, 3) input that is a view in the caller: (the leaf under it, the view).
VIEW_INPUTS = {
    "slice": _slice_input,
    "transposed": _transposed_input,
    "leaf_view": _leaf_view_input,
    "view_of_view": _view_of_view_input,
}


def leaf_clone(*shape: int) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    """One input: a non-leaf clone of a leaf that requires grad."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
        return [x.clone()], [x]

    return make


def leaves(
    *specs: tuple[tuple[int, ...], bool],
) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        ts = [torch.randn(*s, dtype=torch.float64, requires_grad=rg) for s, rg in specs]
        return ts, [t for t in ts if t.requires_grad]

    return make


# Custom Functions the fidelity tests share.


class Half(torch.autograd.Function):
    """Returns its input as-is (eager: a view of it made in the Function); backward g/2."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 0.5


class DirtyMul(torch.autograd.Function):
    """Writes its input (``mark_dirty``) and returns it; backward g*2."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


class ViewOf(torch.autograd.Function):
    """Returns a view of its input (``x.view(x.shape)``); backward g*2."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * 2


class SavedSquare(torch.autograd.Function):
    """x * x with its input saved for backward (``ctx.save_for_backward``)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SaveOut(torch.autograd.Function):
    """exp(x), its output saved for backward."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * y


def params_with_known(names: Any, compilers: Any, known: dict[tuple[str, str], str]) -> list[Any]:
    """``pytest.param(name, compiler)`` for each pair, a strict xfail where ``known`` names
    the difference (the blind suites' lists of what still differs from eager)."""
    import pytest

    return [
        pytest.param(
            n,
            c,
            id=f"{n}-{c}",
            marks=[pytest.mark.xfail(strict=True, reason=known[n, c])] if (n, c) in known else [],
        )
        for n in names
        for c in compilers
    ]
