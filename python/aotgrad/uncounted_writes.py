"""Writes eager makes without moving a version counter.

Batch norm's kernels update the running statistics in place, but their schemas do not
mark those arguments written, so eager's counters stay where they were
(``bn.running_mean._version`` is 0 after any number of training steps). The traced
call writes them through functionalization, which counts each write; autograd's
checks then disagree with eager's: a backward node that read ``running_mean`` raises
"modified by an inplace operation" after a second forward (two forwards, one
backward: ``D(real) + D(fake)``). ``uncounted`` names the tensors such a call writes
and their counts before it; ``restore`` puts the counts back afterwards, so the trace
sees eager's counts and the runtime keeps them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

#: (position, keyword) of the running statistics, per function.
_RUNNING_STATS: dict[Any, tuple[tuple[int, str], ...]] = {
    F.batch_norm: ((1, "running_mean"), (2, "running_var")),
    torch.batch_norm: ((3, "running_mean"), (4, "running_var")),
    torch.native_batch_norm: ((3, "running_mean"), (4, "running_var")),
    torch._native_batch_norm_legit: ((3, "running_mean"), (4, "running_var")),
}


def uncounted(func: Any, args: Any, kwargs: dict) -> list[tuple[torch.Tensor, int]]:
    """The tensors ``func`` writes without counting, with their version counts now."""
    spots = _RUNNING_STATS.get(func)
    if spots is None:
        return []
    found = [args[p] if p < len(args) else kwargs.get(name) for p, name in spots]
    return [(t, t._version) for t in found if isinstance(t, torch.Tensor) and not t.is_inference()]


def restore(counts: list[tuple[torch.Tensor, int]]) -> None:
    for t, v in counts:
        if t._version != v:
            torch._C._autograd._unsafe_set_version_counter((t,), (v,))
