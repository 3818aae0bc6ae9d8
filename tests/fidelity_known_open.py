"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES = {
    # complex vocabulary (tests/fidelity_vocabulary_extra.py): a float view of a
    # view_as_complex input through ViewOf raises setStorage out of bounds; a complex
    # input's view written under inference mode returned as an inference tensor
    "complex: views of complex tensors written or made by a custom Function": {
        51,
        240,
    },
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
