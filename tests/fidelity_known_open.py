"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES = {
    "out= resizes a view (functionalization cannot replay the resize)": {99, 3, 43, 78, 177, 51},
    "requires_grad_(False) on a leaf input (the traced wrapper is not a leaf)": {210, 37, 13, 142},
    "raises 'a view was created in no_grad mode' where eager runs (enable_grad metadata writes, overlapping inputs)": {
        250,
        279,
        63,
    },
    "raises 'Output 0 of HalfGrad is a view ... modified inplace' where eager runs": {218, 238},
    "outputs: a view where eager returns a fresh tensor, or the reverse (._base, is_view)": {205},
    "version counter of views of an intermediate written through another view": {42},
    "eager raises (internal overlap of an in-place op; a saved value written), aotgrad does not": {
        24,
        89,
        125,
    },
    "output values differ (overlapping writes with metadata changes)": {131, 84},
    "is_leaf / grad of an output differs": {297},
    "aot_module only (not analysed)": {258},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
