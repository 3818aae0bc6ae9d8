"""Blind probes (written from the family description, not the implementation): custom
``torch.autograd.Function`` inside the compiled function — returning its input or a view of
it, several outputs (non-tensor, None), ``mark_non_differentiable``,
``set_materialize_grads(False)``, ``needs_input_grad``, saved inputs/outputs/intermediates,
non-tensor ``ctx`` attributes, ``once_differentiable``, ``mark_dirty``, backwards returning
None or writing their gradient in place — on leaves, clones, views, overlapping views,
gradless and 0-dim inputs, under ``no_grad``/``inference_mode``/``enable_grad``/autocast,
and a second call with other ``requires_grad`` flags."""

from __future__ import annotations

from typing import Any

import pytest

import fidelity_blind_custom_function_programs_b  # noqa: F401  (registers its programs)
import fidelity_blind_custom_function_programs_c  # noqa: F401  (registers its programs)
from eager_oracle import COMPILERS, assert_like_eager, params_with_known
from fidelity_blind_custom_function_programs import CASES

AOT = ["aot_function-min_cut", "aot_function-default"]
ALL = [*AOT, "dynamo-aotgrad_eager"]
DYN = ["dynamo-aotgrad_eager"]

# (program, compilers, the difference, and whether torch.compile(backend="aot_eager") shares it)
KNOWN: list[tuple[str, list[str], str]] = [
    (
        "c12_ident_on_no_grad_input",
        DYN,
        "Dynamo: a Function returning its gradless input returns the input itself, eager "
        "returns a view of it (is_view, _base is the input); torch's aot_eager and "
        "backend='eager' too",
    ),
    (
        "c20_nomat_flag_second_unused",
        DYN,
        "Dynamo: with ctx.set_materialize_grads(False) the unused output's gradient reaches "
        "backward as zeros, eager passes None (the leaf's gradient differs by 100); torch's "
        "aot_eager and backend='eager' too",
    ),
    (
        "c21_nomat_flag_second_detached",
        DYN,
        "Dynamo: as c20, the detached output's gradient reaches backward as zeros where eager "
        "passes None; torch's aot_eager and backend='eager' too",
    ),
    (
        "c47_called_under_no_grad",
        DYN,
        "Dynamo: called under no_grad, Ident.apply(x) returns x itself (requires_grad, "
        "grad_fn), eager returns a fresh gradless leaf; torch's aot_eager and backend='eager' "
        "too",
    ),
    (
        "c52_inference_mode_block_inside",
        ALL,
        "y.clone() of a tensor made in an inference_mode block has version 0, eager's clone "
        "of an inference tensor has version 1; torch's aot_eager too (backend='eager' "
        "matches)",
    ),
    (
        "c95_item_in_forward",
        AOT,
        "a Function whose forward reads float(x.sum()): aot_function cannot trace it and "
        "replays eagerly with EagerReplayWarning (an error under this suite's settings), "
        "values match; Dynamo and torch's aot_eager match eager (graph break)",
    ),
    (
        "c99_backward_grad_for_scalar_raises",
        DYN,
        "Dynamo: a backward returning a tensor for a float argument runs, eager's backward "
        "raises RuntimeError; torch's aot_eager and backend='eager' too",
    ),
    (
        "c103_backward_raises",
        AOT,
        "a backward that raises ValueError: aot_function runs it while tracing at the call, "
        "and replays eagerly with EagerReplayWarning (eager raises only at backward); Dynamo "
        "and torch's aot_eager match eager",
    ),
    (
        "c119_dirty_overlap_flag_flip",
        DYN,
        "Dynamo: on the second call (base gradless) Ident.apply(x1) returns x1 itself, eager a "
        "view of it (as c12); backend='eager' too; torch's aot_eager fails harder: the first "
        "call raises BackendCompilerFailed (AssertionError: outs_to_grad length (3) != "
        "tangents length (2))",
    ),
    (
        "c122_nomat_flag_flip",
        DYN,
        "Dynamo: as c20, the unused output's gradient reaches a set_materialize_grads(False) "
        "backward as zeros where eager passes None; torch's aot_eager and backend='eager' too",
    ),
]
_KNOWN = {(n, c): r for n, cs, r in KNOWN for c in cs}


def _params(names: Any, compilers: Any) -> list[Any]:
    return params_with_known(names, compilers, _KNOWN)


@pytest.mark.parametrize(("name", "compiler"), _params(CASES, COMPILERS))
def test_blind_custom_functions_like_eager(name: str, compiler: str) -> None:
    fn, make, kw = CASES[name]
    assert_like_eager(fn, make, COMPILERS[compiler], calls=2, **kw)
