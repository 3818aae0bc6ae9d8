"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES: dict[str, set[int]] = {
    # torch.autograd.grad with respect to an input the function wrote whose new node the
    # compiled call does not route the reads after the write through: one whose new value
    # another written input reads after the write (x2.t_(), then x0's write reads x2:
    # seed 109). A plain input written or re-laid and read is routed
    # (``trace.post_write_reads``, round 50), so are views and overlapping views (199:
    # round 51).
    "autograd_grad_after_write": {109},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
