"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES: dict[str, set[int]] = {
    # A hook the function registers on an output of a multi-output view op (``unbind``)
    # that nothing reads, beside a sibling that is read: eager's backward runs the op's
    # node and calls the hook with None (``lambda g: g.flip(0)`` raises there); the
    # compiled backward has no such gradient to hand it, and does not call it (225).
    "hook_called_with_none": {225},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
