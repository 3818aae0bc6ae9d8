"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES = {
    "version counter of a view of an intermediate that requires grad, written through another view": {
        42
    },
    "eager raises at backward (a saved value written afterwards), aotgrad does not (min-cut, Dynamo)": {
        125
    },
    "output values differ (overlapping writes with metadata changes)": {131, 84},
    "is_leaf / grad of an output differs": {297},
    "aot_module only (not analysed)": {89, 258},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
