//! Alias and mutation analysis: the tracer's raw facts about a function's
//! inputs and outputs ([`AliasFacts`]) → a typed verdict per input and per
//! output ([`Classification`]), by the rule tables in [`rules`]. The runtime
//! acts on the verdicts (replays input mutations, regenerates aliased outputs).

pub mod facts;
pub mod rules;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

pub use facts::{input_bits, output_bits, AliasFacts};
pub use rules::{InputVerdict, OutputVerdict, INPUT_RULES, OUTPUT_RULES};

/// The verdicts for one traced function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classification {
    pub inputs: Vec<InputVerdict>,
    pub outputs: Vec<OutputVerdict>,
    /// Per output, what it is regenerated from: the input index (`IsInput`,
    /// `AliasOfInput`), the user output index (`…BaseIsUserOutput`), the
    /// intermediate-base slot (`AliasOfIntermediate…`), else `-1`.
    pub output_source: Vec<i32>,
    /// Per intermediate-base slot, the output whose `_base` it is (the graph
    /// returns these bases after the user outputs, in slot order).
    pub intermediate_bases: Vec<u32>,
}

/// Classifies every input and output of `facts` (already validated).
pub fn classify(facts: &AliasFacts) -> Classification {
    let inputs = classify_inputs(facts);
    let mut outputs = Vec::with_capacity(facts.output_flags.len());
    let mut output_source = Vec::with_capacity(facts.output_flags.len());
    let mut slots: HashMap<i32, i32> = HashMap::new();
    let mut intermediate_bases = Vec::new();
    for (row, &flags) in facts.output_flags.iter().enumerate() {
        let base = facts.output_base[row];
        let first = base >= 0 && !slots.contains_key(&base);
        let bits = flags
            | if first {
                output_bits::FIRST_VIEW_OF_BASE
            } else {
                0
            };
        let verdict = rules::first_match(OUTPUT_RULES, bits, OutputVerdict::NonAlias);
        let source = match verdict {
            OutputVerdict::NonAlias => -1,
            OutputVerdict::IsInput | OutputVerdict::AliasOfInput => facts.output_input[row],
            OutputVerdict::AliasOfIntermediateBaseIsUserOutput => facts.output_base_output[row],
            OutputVerdict::AliasOfIntermediateSaveAsOutput => {
                let slot = i32::try_from(intermediate_bases.len()).unwrap_or(i32::MAX);
                slots.insert(base, slot);
                // `row` < output count, which came from a Python list.
                intermediate_bases.push(u32::try_from(row).unwrap_or(u32::MAX));
                slot
            }
            OutputVerdict::AliasOfIntermediate => slots.get(&base).copied().unwrap_or(-1),
        };
        outputs.push(verdict);
        output_source.push(source);
    }
    Classification {
        inputs,
        outputs,
        output_source,
        intermediate_bases,
    }
}

fn classify_inputs(facts: &AliasFacts) -> Vec<InputVerdict> {
    let mut per_storage: HashMap<i32, u32> = HashMap::new();
    for &s in &facts.input_storage {
        *per_storage.entry(s).or_default() += 1;
    }
    facts
        .input_flags
        .iter()
        .zip(&facts.input_storage)
        .map(|(&flags, s)| {
            let shared = per_storage.get(s).copied().unwrap_or(0) > 1;
            let bits = flags
                | if shared {
                    input_bits::STORAGE_SHARED
                } else {
                    0
                };
            rules::first_match(INPUT_RULES, bits, InputVerdict::Unmutated)
        })
        .collect()
}
