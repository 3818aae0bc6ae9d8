"""Programs of the default fidelity sample (seeds 0-299) that still differ from eager,
by family: the open part of the fidelity issue, written down so that ``make test`` fails
on any program outside it (a regression, or a new family) while these are fixed. A seed
fixed by a change is reported and should be deleted here.

Replay one: ``python tests/fidelity_programs.py SEED ENTRY``.
"""

FAMILIES: dict[str, set[int]] = {
    # torch.autograd.grad with respect to an input the function wrote (or whose alias it
    # wrote, or whose metadata it changed): eager's reads after the write go through
    # the input's new node, the compiled call's through the node it had when called
    # (aot_module_simplified, "autograd_grad" call mode).
    "autograd_grad_after_write": {109, 199},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
