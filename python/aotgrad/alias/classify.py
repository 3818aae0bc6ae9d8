"""Alias facts → an ``AliasPlan``: the Rust classification's verdicts, and what the
tracer and the runtime do about each input and output."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .. import _rust
from ..errors import EagerRefusal, NeedsSyntheticBase, UnsupportedError
from ..vocab import IN_MUTATED_IN_BACKWARD, InputVerdict, OutputVerdict
from .facts import AliasFacts
from .views import ViewSpec

#: The graph returns the input's new value (the runtime copies it in).
RETURNS_NEW_VALUE = frozenset(
    {
        InputVerdict.DATA,
        InputVerdict.DATA_DIFFERENTIABLE,
        InputVerdict.DATA_AND_METADATA,
        InputVerdict.DATA_AND_METADATA_DIFFERENTIABLE,
    }
)

#: The new value has autograd history: a graph output with a tangent, copied in with grad.
DIFFERENTIABLE_WRITE = frozenset(
    {InputVerdict.DATA_DIFFERENTIABLE, InputVerdict.DATA_AND_METADATA_DIFFERENTIABLE}
)

#: The input's sizes/strides/offset change: the runtime replays them.
METADATA_WRITE = frozenset(
    {
        InputVerdict.METADATA,
        InputVerdict.DATA_AND_METADATA,
        InputVerdict.DATA_AND_METADATA_DIFFERENTIABLE,
    }
)

_REFUSALS = {
    InputVerdict.ERROR_LEAF_MUTATED: (
        "is a leaf Variable that requires grad and is being used in an in-place operation "
        "(data or metadata), as eager refuses it too; write under torch.no_grad() or "
        "through .detach()"
    ),
    InputVerdict.ERROR_ALIASED_MUTATION: (
        "is updated in place and shares storage with another input; aliased inputs that "
        "are written must be passed as one synthetic base"
    ),
    InputVerdict.ERROR_MUTATED_IN_BACKWARD: "is updated in place by the backward pass: not supported",
}


@dataclass(frozen=True)
class AliasPlan:
    """Per flat input and output, what the tracer returns and the runtime replays."""

    inputs: tuple[InputVerdict, ...]
    outputs: tuple[OutputVerdict, ...]
    #: Per output: the input / user output / intermediate-base slot it comes from, or -1.
    output_source: tuple[int, ...]
    #: Per intermediate-base slot, the output whose ``_base`` the graph also returns.
    intermediate_bases: tuple[int, ...]
    facts: AliasFacts = field(compare=False)

    @property
    def mutated_inputs(self) -> list[int]:
        """Inputs whose new value the graph returns (in this order)."""
        return [i for i, v in enumerate(self.inputs) if v in RETURNS_NEW_VALUE]

    @property
    def in_graph_mutations(self) -> list[int]:
        return [i for i, v in enumerate(self.inputs) if v == InputVerdict.DATA_IN_GRAPH]

    def output_view(self, k: int) -> ViewSpec | None:
        return self.facts.output_view.get(k)


def classify(facts: AliasFacts) -> AliasPlan:
    """Run the Rust classification; an input it refuses raises ``UnsupportedError``."""
    ins, outs, source, bases = _rust.classify_aliases(*facts.columns())
    plan = AliasPlan(
        tuple(InputVerdict(v) for v in ins),
        tuple(OutputVerdict(v) for v in outs),
        tuple(source),
        tuple(bases),
        facts,
    )
    aliased = [i for i, v in enumerate(plan.inputs) if v == InputVerdict.ERROR_ALIASED_MUTATION]
    if aliased:
        message = f"inputs {aliased} {_REFUSALS[plan.inputs[aliased[0]]]}"
        raise NeedsSyntheticBase(message, aliased, facts.input_storage)
    for i, v in enumerate(plan.inputs):
        if v == InputVerdict.ERROR_LEAF_MUTATED:
            raise EagerRefusal(f"input {i} {_REFUSALS[v]}")
        if v in _REFUSALS:
            raise UnsupportedError(f"input {i} {_REFUSALS[v]}")
    return plan


def refuse_backward_mutations(plan: AliasPlan, inputs: list[int]) -> None:
    """The joint trace saw the backward write into ``inputs``: classify again with that
    fact (the rule table refuses it) and raise."""
    flags = list(plan.facts.input_flags)
    for i in inputs:
        flags[i] |= IN_MUTATED_IN_BACKWARD
    classify(dataclasses.replace(plan.facts, input_flags=flags))
    raise AssertionError("the rule table accepted a backward mutation")  # pragma: no cover
