"""Stage 6 — runtime: the compiled graphs run on the caller's tensors.

Where the call needs autograd, the compiled forward and backward are wrapped in a
``torch.autograd.Function`` (``training.py``); where it does not, the forward runs alone
(``inference.py``). Either way the graph itself is functional: after it runs, the
epilogue (``epilogue.py``) applies input mutations to the real inputs, sets their
version counters and rebuilds outputs that alias inputs or intermediates as real views;
``layout.py`` says what it replays; ``outputs.py`` makes the graph's outputs the
objects eager returns; ``saved_tensors.py`` says what goes to ``ctx.save_for_backward``
and what is kept beside it. This module only names what the rest of the package uses.
"""

from __future__ import annotations

from .inference import make_inference_function
from .layout import ForwardLayout, OutputAlias
from .training import make_training_function

__all__ = ["ForwardLayout", "OutputAlias", "make_inference_function", "make_training_function"]
