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
    # torch.autograd.grad with respect to an input the function wrote whose new node the
    # compiled call does not route the reads after the write through: one whose new value
    # another written input reads after the write (x2.t_(), then x0's write reads x2:
    # seed 109, aot_module_simplified). A plain input written or re-laid and read is
    # routed (``trace.post_write_reads``, round 50), so are views and overlapping views.
    "autograd_grad_after_write": {109},
    # A second-order backward (a gradient penalty) through a call that writes an input
    # with a value autograd records (fx's symbolic trace for aot_module_simplified drops
    # the ``no_grad`` blocks of 238 and 282): refused by name; the replay would need the
    # write's own history (writes under no_grad are replayed on copies, round 55).
    "double_backward_recorded_write": {238, 282},
}

KNOWN_OPEN = frozenset(s for seeds in FAMILIES.values() for s in seeds)
