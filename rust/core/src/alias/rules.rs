//! The rule tables of the alias classification: an ordered list of
//! `(bits that must be set, bits that must be clear) → verdict` per input and
//! per output. The first matching rule wins; the last rule of each table
//! matches everything, so every row gets a verdict.

use super::facts::{input_bits as I, output_bits as O};

crate::codes::coded_enum! {
    /// What the runtime does about one flat tensor input.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum InputVerdict {
        /// Not written: nothing to do.
        Unmutated = 0,
        /// Data written: the graph returns the new value, the runtime copies it
        /// into the input under `no_grad`.
        Data = 1,
        /// Data written with a value that has autograd history: the new value is
        /// a differentiable graph output (it gets a tangent) and the runtime
        /// copies it into the input with grad mode on, so autograd records it.
        DataDifferentiable = 2,
        /// Data written, and the write stays in the (forward-only) graph.
        DataInGraph = 3,
        /// Sizes/strides/offset changed: the runtime replays them (`as_strided_`).
        Metadata = 4,
        /// Both: metadata replayed first, then the data copied.
        DataAndMetadata = 5,
        /// Both, the new value with autograd history: as `DataDifferentiable`
        /// after the metadata replay.
        DataAndMetadataDifferentiable = 6,
        /// Refused: eager itself raises (an autograd leaf that requires grad,
        /// written in place, or its metadata changed, visibly to autograd).
        ErrorLeafMutated = 16,
        /// Refused: the input shares storage with another input and is written;
        /// the caller must pass a synthetic base instead.
        ErrorAliasedMutation = 17,
        /// Refused: the backward writes into the input.
        ErrorMutatedInBackward = 18,
    }
}

crate::codes::coded_enum! {
    /// What one flat output is, for the runtime.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum OutputVerdict {
        /// A fresh tensor (or a non-tensor): returned as the graph computed it.
        NonAlias = 0,
        /// The input itself: the runtime returns the real input object.
        IsInput = 1,
        /// A view of an input: regenerated from the real input, so writes
        /// through it reach the input and `._base` is the input's.
        AliasOfInput = 2,
        /// A view of an intermediate that another output already brought out of
        /// the graph: regenerated from that base.
        AliasOfIntermediate = 3,
        /// The first view of an intermediate that no user output is: the graph
        /// also returns the intermediate (an extra output with a tangent), and the
        /// view is regenerated from it.
        AliasOfIntermediateSaveAsOutput = 4,
        /// A view of an intermediate that is itself a user output: regenerated
        /// from that output.
        AliasOfIntermediateBaseIsUserOutput = 5,
    }
}

impl InputVerdict {
    /// Refusals are verdicts too; the caller raises with the input's name.
    pub fn is_error(self) -> bool {
        self as u8 >= 16
    }
    /// Whether the graph returns the input's new value.
    pub fn returns_new_value(self) -> bool {
        matches!(
            self,
            Self::Data
                | Self::DataDifferentiable
                | Self::DataAndMetadata
                | Self::DataAndMetadataDifferentiable
        )
    }
}

impl OutputVerdict {
    /// Whether the output's gradient reaches the compiled backward as a
    /// tangent (views are differentiated through their regenerated base).
    pub fn takes_tangent(self) -> bool {
        self == Self::NonAlias
    }
}

/// One row of a rule table.
#[derive(Clone, Copy, Debug)]
pub struct Rule<V> {
    pub set: u32,
    pub clear: u32,
    pub verdict: V,
}

const fn r<V>(set: u32, clear: u32, verdict: V) -> Rule<V> {
    Rule {
        set,
        clear,
        verdict,
    }
}

/// Inputs, in priority order.
pub const INPUT_RULES: &[Rule<InputVerdict>] = &[
    r(
        I::MUTATED_IN_BACKWARD,
        0,
        InputVerdict::ErrorMutatedInBackward,
    ),
    r(
        I::MUTATES_DATA | I::STORAGE_SHARED,
        0,
        InputVerdict::ErrorAliasedMutation,
    ),
    r(
        I::MUTATES_METADATA | I::STORAGE_SHARED,
        0,
        InputVerdict::ErrorAliasedMutation,
    ),
    // Hidden: under no_grad, or through a detach()ed alias (autograd never saw it).
    r(
        I::MUTATES_DATA | I::REQUIRES_GRAD | I::IS_LEAF,
        I::MUTATIONS_HIDDEN,
        InputVerdict::ErrorLeafMutated,
    ),
    r(
        I::MUTATES_METADATA | I::REQUIRES_GRAD | I::IS_LEAF,
        I::MUTATIONS_HIDDEN,
        InputVerdict::ErrorLeafMutated,
    ),
    r(
        I::MUTATES_DATA | I::MUTATES_METADATA | I::NEW_VALUE_REQUIRES_GRAD,
        I::MUTATIONS_HIDDEN,
        InputVerdict::DataAndMetadataDifferentiable,
    ),
    r(
        I::MUTATES_DATA | I::MUTATES_METADATA,
        0,
        InputVerdict::DataAndMetadata,
    ),
    r(I::MUTATES_METADATA, 0, InputVerdict::Metadata),
    r(
        I::MUTATES_DATA | I::KEEP_IN_GRAPH,
        I::NEW_VALUE_REQUIRES_GRAD,
        InputVerdict::DataInGraph,
    ),
    // Grad mode at the call does not matter: an enable_grad block under no_grad
    // records the write as eager does.
    r(
        I::MUTATES_DATA | I::NEW_VALUE_REQUIRES_GRAD,
        I::MUTATIONS_HIDDEN,
        InputVerdict::DataDifferentiable,
    ),
    r(I::MUTATES_DATA, 0, InputVerdict::Data),
    r(0, 0, InputVerdict::Unmutated),
];

/// A view of an intermediate, with or without grad: eager returns a view
/// (`._base`, shared storage), so the runtime rebuilds one from the base.
const GRAD_VIEW: u32 = O::VIEW_OF_INTERMEDIATE;

/// Outputs, in priority order.
pub const OUTPUT_RULES: &[Rule<OutputVerdict>] = &[
    r(0, O::IS_TENSOR, OutputVerdict::NonAlias),
    r(O::IS_INPUT, 0, OutputVerdict::IsInput),
    // A view with another dtype or conj/neg bit is returned as computed.
    r(O::REINTERPRETED, 0, OutputVerdict::NonAlias),
    r(
        O::ALIASES_INPUT,
        O::STORAGE_CHANGED,
        OutputVerdict::AliasOfInput,
    ),
    r(
        GRAD_VIEW | O::BASE_IS_OUTPUT,
        0,
        OutputVerdict::AliasOfIntermediateBaseIsUserOutput,
    ),
    r(
        GRAD_VIEW | O::FIRST_VIEW_OF_BASE,
        0,
        OutputVerdict::AliasOfIntermediateSaveAsOutput,
    ),
    r(GRAD_VIEW, 0, OutputVerdict::AliasOfIntermediate),
    r(0, 0, OutputVerdict::NonAlias),
];

/// The verdict of the first rule whose bits match `bits`; `fallback` if
/// none does (never, for the tables here: each ends with a catch-all row).
pub fn first_match<V: Copy>(rules: &[Rule<V>], bits: u32, fallback: V) -> V {
    rules
        .iter()
        .find(|rule| bits & rule.set == rule.set && bits & rule.clear == 0)
        .map_or(fallback, |rule| rule.verdict)
}
