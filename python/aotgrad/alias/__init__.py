"""Alias and mutation analysis: facts from the tracer (``facts``), their classification
in Rust (``classify``), and the view metadata the runtime replays (``views``)."""

from .classify import (
    DIFFERENTIABLE_WRITE,
    METADATA_WRITE,
    AliasPlan,
    InputVerdict,
    NeedsSyntheticBase,
    OutputVerdict,
    classify,
    refuse_backward_mutations,
)
from .facts import AliasFacts, collect
from .synthetic_base import SyntheticBase
from .views import ViewSpec

__all__ = [
    "DIFFERENTIABLE_WRITE",
    "METADATA_WRITE",
    "AliasFacts",
    "AliasPlan",
    "InputVerdict",
    "NeedsSyntheticBase",
    "OutputVerdict",
    "SyntheticBase",
    "ViewSpec",
    "classify",
    "collect",
    "refuse_backward_mutations",
]
