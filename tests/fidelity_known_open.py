"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES = {
    # eager's error comes after it wrote the module's parameter; aotgrad's trace raises
    # before anything runs, so the parameter's version count and values stay as before
    "aot_module: eager raises partway through, after a write to the parameter": {89, 258},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
