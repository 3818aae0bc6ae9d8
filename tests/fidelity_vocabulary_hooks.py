"""Vocabulary the fidelity generator draws from a stream of its own, so that a program
whose seed fires none of it keeps its text (``tests/fidelity_vocabulary_extra.py``):

- tensor hooks the function registers (``Hooks``, ~12% of the programs): on an
  intermediate or on an input (or a view of one), where it requires grad at run time
  (``if t.requires_grad: t.register_hook(...)``), hooks that scale, clamp, flip or only
  look at the gradient (returning None), one or two per program;
- a second-order backward (``backward_how`` "create_graph", ~6% of the calls the other
  streams give the plain backward): ``torch.autograd.grad(..., create_graph=True)`` for
  the leaves that require grad, then the backward of the gradients' squared sum (a
  gradient penalty), as ``tests/fidelity_observe.py`` runs it.
"""

from __future__ import annotations

import random

#: what a hook the function registers does with the gradient (``gr``)
HOOKS = (
    "gr * 0.5",
    "gr.clamp(-0.5, 0.5)",
    "None",
    "gr + 1",
    "gr.flip(0)",
)


def create_graph(call_seed: int) -> bool:
    """Whether a call whose other streams gave the plain backward takes a second-order one."""
    return random.Random(call_seed * 89 + 13).random() < 0.06


class Hooks:
    """Tensor hooks of one program; ``generate`` calls ``plan`` and ``after_step``."""

    def __init__(self, g):
        self.g = g
        self.rng = random.Random(g.seed * 79 + 31)
        self.on = self.rng.random() < 0.12
        self.at: set[int] = set()

    def plan(self, n: int) -> None:
        if self.on:
            self.at = {self.rng.randrange(n) for _ in range(self.rng.choice([1, 1, 2]))}

    def after_step(self, k: int) -> list[str]:
        if k not in self.at:
            return []
        own = self.rng
        v = own.choice(self.g.pool)
        hooks = [h for h in HOOKS if v.shape or ".flip(" not in h]
        return [
            f"if {v.name}.requires_grad:  # a hook the function registers",
            f"    {v.name}.register_hook(lambda gr: {own.choice(hooks)})",
        ]
