"""What a fidelity program is once generated (``tests/fidelity_generator.py``): its calls
(``Call``: inputs' seed and ``requires_grad`` flags, call mode, scalars, what the caller
does between the call and the backward) and the program itself (``Program``: its source,
compiled once, and the facts the harness needs about it).
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass, field


@dataclass
class Call:
    seed: int
    rg: tuple
    mode: str
    scalars: tuple
    post_mutate: int | None = None  # outs[i].mul_(2) after the call (a tensor output)
    # called twice on the same inputs, then one backward through both calls' outputs
    # (gradient accumulation, D(real) + D(fake)); drawn from its own stream so that the
    # programs of earlier seeds are unchanged
    twice: bool = False
    # the caller writes input x<i> (under no_grad) between the call and the backward:
    # what the backward reads of it is stale, as eager's saved-tensor check says
    write_input: int | None = None
    # the caller writes an input or output past autograd (through ``.data``, or through
    # a ``detach()``) between the call and the backward: ("x" | "out", index, how), how
    # in ``fidelity_vocabulary_extra.CALLER_WRITES``; its own stream, like write_input
    caller_write: tuple | None = None
    # how the caller runs the backward: None (one ``backward`` over every differentiable
    # output), "per_output" (one ``backward(retain_graph=True)`` per output, in order)
    # or "autograd_grad" (``torch.autograd.grad`` for the inputs that require grad, then
    # the ``backward``), or "create_graph" (a second-order backward first: a gradient
    # penalty, ``fidelity_vocabulary_hooks``); its own stream, like write_input
    backward_how: str | None = None


@dataclass
class Program:
    seed: int
    dtype: str
    n_args: int
    scalar_names: list
    first_arg_plain: bool  # x0 is a plain root (a parameter/buffer in aot_module)
    inputs_src: str
    fn_src: str
    calls: list
    uses_autocast: bool
    source: str = ""
    _code: object = field(default=None, repr=False)

    def namespace(self):
        """A fresh namespace with ``make_inputs``, ``f`` and the prelude's Functions."""
        if self._code is None:
            fname = f"<fidelity program {self.seed}>"
            linecache.cache[fname] = (len(self.source), None, self.source.splitlines(True), fname)
            self._code = compile(self.source, fname, "exec")
        ns = {"__name__": f"fidelity_program_{self.seed}"}
        exec(self._code, ns)
        return ns

    @property
    def tol(self):
        return (5e-2, 5e-2) if self.uses_autocast else (1e-6, 1e-6)
