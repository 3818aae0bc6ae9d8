"""Random programs through every aotgrad entry point, compared with eager on everything
eager exposes (see ``tests/fidelity_programs.py`` for the generator and the comparison).

``AOTGRAD_FIDELITY_PROGRAMS`` programs (default 300) run through each of aot_function
(default and min-cut partitioners), aot_module, aot_module_simplified and
``torch.compile(backend="aotgrad_eager")``; ``AOTGRAD_FIDELITY_INDUCTOR`` programs
(default 3) through ``backend="aotgrad"``. ``AOTGRAD_FIDELITY_SEED`` moves the first
seed. A failure prints the tallies (mismatches by category, refusals by reason) and the
first failing programs as source; replay one with
``python tests/fidelity_programs.py SEED ENTRY``. ``benches/fidelity_soak.py`` runs many
more, in subprocesses.

Failures (outside the programs listed in ``tests/fidelity_known_open.py``, the open part
of the fidelity issue, which are tallied and printed): a mismatch, an ``UnsupportedError`` where eager runs (a refusal, tallied by
reason), a harness crash. Softer findings (printed, not failing): a different exception
type where both raise, different strides of a non-view output, and (for the Dynamo entry
points) differences that ``torch.compile(backend="eager")`` shows too (Dynamo's own).
aot_module_simplified compiles for the first call's metadata (it is unguarded; Dynamo
guards it), so its second call changes values only.
"""

from __future__ import annotations

import logging
import os
import time

import pytest

from fidelity_known_open import KNOWN_OPEN
from fidelity_programs import (
    ENTRIES,
    FAILING_STATUSES,
    check,
    format_result,
    generate,
    result_dict,
    summarize,
)

N_PROGRAMS = int(os.environ.get("AOTGRAD_FIDELITY_PROGRAMS", "300"))
N_INDUCTOR = int(os.environ.get("AOTGRAD_FIDELITY_INDUCTOR", "3"))
SEED0 = int(os.environ.get("AOTGRAD_FIDELITY_SEED", "0"))


@pytest.fixture(autouse=True)
def _no_trace_records():
    """Dynamo's structured-trace records (DEBUG, tens of thousands per run) would otherwise
    be captured and printed with every failure."""
    log = logging.getLogger("torch.__trace")
    was = log.disabled
    log.disabled = True
    yield
    log.disabled = was


def _run(entry, seeds):
    t = time.time()
    results = [check(s, entry) for s in seeds]
    dicts = [result_dict(r) for r in results]
    summary = summarize(dicts, f"{entry} ({time.time() - t:.1f} s)")
    failing = [r for r in results if r.status in FAILING_STATUSES]
    known = [r for r in failing if r.seed in KNOWN_OPEN]
    new = [r for r in failing if r.seed not in KNOWN_OPEN]
    fixed = sorted(KNOWN_OPEN.intersection(seeds) - {r.seed for r in failing})
    print(f"\n{summary}\n  known open (tests/fidelity_known_open.py): {len(known)}")
    if fixed:
        print(f"  known-open seeds that now match eager (delete them there): {fixed}")
    if new:
        shown = "\n\n".join(format_result(r) for r in new[:4])
        pytest.fail(f"{summary}\n\nfirst failing programs:\n\n{shown}", pytrace=False)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e != "dynamo_aotgrad_inductor"])
def test_random_programs_match_eager(entry):
    _run(entry, range(SEED0, SEED0 + N_PROGRAMS))


@pytest.mark.slow
@pytest.mark.skipif(N_INDUCTOR <= 0, reason="AOTGRAD_FIDELITY_INDUCTOR=0")
def test_random_programs_match_eager_inductor():
    _run("dynamo_aotgrad_inductor", range(SEED0, SEED0 + N_INDUCTOR))


# Every item of the vocabulary appears in the default programs (a generator regression
# would silently test less).
VOCABULARY = [
    "requires_grad_(rg[",  # leaves, inputs without grad
    ".clone()\n",  # non-leaf inputs
    "# the same tensor twice",
    "# overlapping views",
    "# disjoint views",
    "# disjoint column views",
    "# multi-output views",  # inputs: outputs of one split/chunk/unbind
    "# views made under no_grad",
    "# a weight used twice",  # under autocast: one cached cast
    ".retain_grad()",
    "# a gradient hook",
    "# a write through .data",
    "checkpoint(",
    "empty_strided((4, 4), (1, 4)",  # non-contiguous leaf
    "= b",  # transposed view of a base (x = bK.t())
    "r().requires_grad_",  # 0-dim
    "with torch.no_grad():",
    "with torch.enable_grad():",
    'torch.autocast("cpu", dtype=torch.bfloat16)',
    'torch.autocast("cpu", enabled=False)',
    ".t_()",
    ".transpose_(0, 1)",
    ".unsqueeze_(0)",
    ".squeeze_(0)",
    ".as_strided_(",
    ".detach()",
    ".detach_()",
    ".requires_grad_(",
    "HalfGrad.apply",
    "ViewOf.apply",
    "DirtyMul.apply",
    "SavedSquare.apply",
    ".unbind(0)",
    ".split(2)",
    ".chunk(2, -1)",
    ".copy_(",
    "out=",
    " += ",
    "] = ",
    "@",
    ".sum()",
    "if ",
    "None",
    "mode='no_grad'",
    "mode='inference_mode'",
    "mode='autocast'",
    "post_mutate=0",
    # tests/fidelity_vocabulary_extra.py (each from its own stream)
    "# a complex input",
    "torch.view_as_complex(",
    "view(torch.complex128)",
    "torch.view_as_real(",
    "# a write through .imag",
    "m0 > 0.5",  # a branch on a float that changes between the calls
    "# a running buffer updated in place",
    "caller_write=",
    # tests/fidelity_vocabulary_hooks.py
    "# a hook the function registers",
    "backward_how='create_graph'",
]


def test_generator_covers_the_vocabulary_and_is_reproducible():
    sources = [generate(s).source for s in range(SEED0, SEED0 + max(N_PROGRAMS, 300))]
    joined = "\n".join(sources)
    missing = [w for w in VOCABULARY if w not in joined]
    assert not missing, f"never generated: {missing}"
    assert generate(SEED0 + 7).source == sources[7]
    assert any(
        "bool" in str(type(v)) for s in range(50) for c in generate(s).calls for v in c.scalars
    )
