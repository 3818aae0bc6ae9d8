use super::facts::{input_bits as I, output_bits as O};
use super::*;
use crate::Error;
use proptest::prelude::*;

fn inputs(flags: &[u32], storage: &[i32]) -> AliasFacts {
    AliasFacts::new(
        flags.to_vec(),
        storage.to_vec(),
        vec![],
        vec![],
        vec![],
        vec![],
    )
    .unwrap()
}

fn verdict_of_input(flags: u32) -> InputVerdict {
    classify(&inputs(&[flags], &[0])).inputs[0]
}

#[test]
fn input_verdicts_follow_the_rule_table() {
    use InputVerdict::*;
    let cases = [
        (0, Unmutated),
        (I::MUTATES_DATA, Data),
        (
            I::MUTATES_DATA | I::GRAD_MODE | I::NEW_VALUE_REQUIRES_GRAD,
            DataDifferentiable,
        ),
        // under no_grad the new value carries no history even if it "requires grad"
        (
            I::MUTATES_DATA | I::NEW_VALUE_REQUIRES_GRAD | I::GRAD_MODE | I::MUTATIONS_HIDDEN,
            Data,
        ),
        (I::MUTATES_DATA | I::KEEP_IN_GRAPH, DataInGraph),
        (I::MUTATES_METADATA, Metadata),
        (I::MUTATES_METADATA | I::MUTATES_DATA, DataAndMetadata),
        (
            I::MUTATES_DATA | I::REQUIRES_GRAD | I::IS_LEAF | I::GRAD_MODE,
            ErrorLeafMutated,
        ),
        // under an enable_grad block inside a no_grad call: eager raises too
        (
            I::MUTATES_DATA | I::REQUIRES_GRAD | I::IS_LEAF,
            ErrorLeafMutated,
        ),
        // a leaf updated under no_grad (an optimizer step) or through a detach() is fine
        (
            I::MUTATES_DATA | I::REQUIRES_GRAD | I::IS_LEAF | I::GRAD_MODE | I::MUTATIONS_HIDDEN,
            Data,
        ),
        // t_() on a leaf that requires grad: eager raises
        (
            I::MUTATES_METADATA | I::REQUIRES_GRAD | I::IS_LEAF,
            ErrorLeafMutated,
        ),
        // t_() on a non-leaf that requires grad is replayed (with autograd)
        (I::MUTATES_METADATA | I::REQUIRES_GRAD, Metadata),
        (
            I::MUTATES_METADATA | I::MUTATES_DATA | I::NEW_VALUE_REQUIRES_GRAD,
            DataAndMetadataDifferentiable,
        ),
        // an enable_grad write under a no_grad call keeps its history
        (
            I::MUTATES_DATA | I::NEW_VALUE_REQUIRES_GRAD,
            DataDifferentiable,
        ),
        (
            I::MUTATED_IN_BACKWARD | I::MUTATES_DATA,
            ErrorMutatedInBackward,
        ),
    ];
    for (flags, want) in cases {
        assert_eq!(verdict_of_input(flags), want, "flags {flags:#x}");
    }
}

#[test]
fn a_mutated_input_sharing_storage_is_refused_the_others_are_not() {
    let facts = inputs(&[I::MUTATES_DATA, 0, I::MUTATES_DATA], &[3, 3, 4]);
    let c = classify(&facts);
    assert_eq!(
        c.inputs,
        vec![
            InputVerdict::ErrorAliasedMutation,
            InputVerdict::Unmutated,
            InputVerdict::Data
        ]
    );
    assert!(c.inputs[0].is_error() && !c.inputs[2].is_error());
}

struct Out {
    flags: u32,
    input: i32,
    base: i32,
    base_output: i32,
}

fn out(flags: u32) -> Out {
    Out {
        flags: flags | O::IS_TENSOR,
        input: -1,
        base: -1,
        base_output: -1,
    }
}

fn outputs(n_inputs: usize, rows: &[Out]) -> Result<AliasFacts, Error> {
    AliasFacts::new(
        vec![0; n_inputs],
        (0..i32::try_from(n_inputs).unwrap()).collect(),
        rows.iter().map(|o| o.flags).collect(),
        rows.iter().map(|o| o.input).collect(),
        rows.iter().map(|o| o.base).collect(),
        rows.iter().map(|o| o.base_output).collect(),
    )
}

const VIEW: u32 = O::VIEW_OF_INTERMEDIATE | O::REQUIRES_GRAD | O::BASE_REQUIRES_GRAD;

#[test]
fn output_verdicts_cover_every_category() {
    use OutputVerdict::*;
    let rows = [
        Out { flags: 0, ..out(0) }, // 0: a Python int
        out(O::REQUIRES_GRAD),      // 1: fresh tensor
        Out {
            input: 1,
            ..out(O::IS_INPUT | O::ALIASES_INPUT)
        }, // 2: `return y`
        Out {
            input: 0,
            ..out(O::ALIASES_INPUT | O::REQUIRES_GRAD)
        }, // 3: x[1:]
        Out {
            base: 7,
            ..out(VIEW)
        }, // 4: (x*2)[0]
        Out {
            base: 7,
            ..out(VIEW)
        }, // 5: (x*2)[1], same base
        Out {
            base: 9,
            base_output: 1,
            ..out(VIEW | O::BASE_IS_OUTPUT)
        }, // 6: out1.view(-1)
        Out {
            base: 8,
            ..out(O::VIEW_OF_INTERMEDIATE)
        }, // 7: view, no grad: rebuilt from its own base too (eager returns a view)
        Out {
            input: 0,
            ..out(O::ALIASES_INPUT | O::STORAGE_CHANGED)
        }, // 8: after set_
        Out {
            input: 0,
            ..out(O::ALIASES_INPUT | O::REINTERPRETED)
        }, // 9: view_as_complex
    ];
    let c = classify(&outputs(2, &rows).unwrap());
    assert_eq!(
        c.outputs,
        vec![
            NonAlias,
            NonAlias,
            IsInput,
            AliasOfInput,
            AliasOfIntermediateSaveAsOutput,
            AliasOfIntermediate,
            AliasOfIntermediateBaseIsUserOutput,
            AliasOfIntermediateSaveAsOutput,
            NonAlias,
            NonAlias
        ]
    );
    assert_eq!(c.output_source, vec![-1, -1, 1, 0, 0, 0, 1, 1, -1, -1]);
    assert_eq!(c.intermediate_bases, vec![4, 7]);
    let tangents: Vec<bool> = c.outputs.iter().map(|v| v.takes_tangent()).collect();
    assert_eq!(tangents.iter().filter(|&&t| t).count(), 4);
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "a table of cases, one per malformed column"
)]
fn malformed_facts_name_the_column_and_row() {
    let cases: Vec<(Result<AliasFacts, Error>, &str, u32)> = vec![
        (
            outputs(
                1,
                &[Out {
                    input: 5,
                    ..out(O::ALIASES_INPUT)
                }],
            ),
            "output_input",
            0,
        ),
        (
            outputs(1, &[out(0), Out { input: 0, ..out(0) }]),
            "output_input",
            1,
        ),
        (
            outputs(1, &[out(O::VIEW_OF_INTERMEDIATE)]),
            "output_base",
            0,
        ),
        (outputs(1, &[Out { base: 2, ..out(0) }]), "output_base", 0),
        (
            outputs(
                1,
                &[Out {
                    base: 1,
                    base_output: 0,
                    ..out(VIEW | O::BASE_IS_OUTPUT)
                }],
            ),
            "output_base_output",
            0,
        ),
        (outputs(1, &[out(1 << 12)]), "output_flags", 0),
        (
            outputs(
                1,
                &[Out {
                    flags: O::REQUIRES_GRAD,
                    ..out(0)
                }],
            ),
            "output_flags",
            0,
        ),
        (
            AliasFacts::new(vec![1 << 20], vec![0], vec![], vec![], vec![], vec![]),
            "input_flags",
            0,
        ),
        (
            AliasFacts::new(vec![0], vec![-1], vec![], vec![], vec![], vec![]),
            "input_storage",
            0,
        ),
        (
            AliasFacts::new(vec![0, 0], vec![0], vec![], vec![], vec![], vec![]),
            "input_storage",
            1,
        ),
        (
            AliasFacts::new(vec![], vec![], vec![1], vec![], vec![-1], vec![-1]),
            "output_input",
            0,
        ),
    ];
    for (i, (result, column, row)) in cases.into_iter().enumerate() {
        match result {
            Err(Error::Alias {
                column: c, row: r, ..
            }) => {
                assert_eq!((c, r), (column, Some(row)), "case {i}");
            }
            other => panic!("case {i}: expected an alias-table error, got {other:?}"),
        }
    }
}

proptest! {
    /// Arbitrary columns never panic: they validate or fail with a typed
    /// error, and a valid table classifies every row with consistent sources.
    #[test]
    fn arbitrary_facts_validate_or_fail_typed(
        input_flags in prop::collection::vec(0u32..(1 << 10), 0..6),
        output_flags in prop::collection::vec(0u32..(1 << 10), 0..8),
        seed in prop::collection::vec(-2i32..8, 0..40),
    ) {
        let ni = input_flags.len();
        let no = output_flags.len();
        let pick = |k: usize| seed.get(k).copied().unwrap_or(-1);
        let storage: Vec<i32> = (0..ni).map(|k| pick(k).max(0)).collect();
        let oi: Vec<i32> = (0..no).map(|k| pick(k + 8)).collect();
        let ob: Vec<i32> = (0..no).map(|k| pick(k + 16)).collect();
        let obo: Vec<i32> = (0..no).map(|k| pick(k + 24)).collect();
        match AliasFacts::new(input_flags, storage, output_flags, oi, ob, obo) {
            Err(e) => { let typed = matches!(e, Error::Alias { .. }); prop_assert!(typed, "untyped error {:?}", e) }
            Ok(facts) => {
                let c = classify(&facts);
                prop_assert_eq!(c.inputs.len(), ni);
                prop_assert_eq!(c.outputs.len(), no);
                for (row, (v, &s)) in c.outputs.iter().zip(&c.output_source).enumerate() {
                    match v {
                        OutputVerdict::NonAlias => prop_assert_eq!(s, -1),
                        OutputVerdict::IsInput | OutputVerdict::AliasOfInput => {
                            prop_assert!(s >= 0 && (s as usize) < ni);
                        }
                        OutputVerdict::AliasOfIntermediateBaseIsUserOutput => {
                            prop_assert!(s >= 0 && (s as usize) < no && s as usize != row);
                        }
                        _ => prop_assert!(s >= 0 && (s as usize) < c.intermediate_bases.len()),
                    }
                }
            }
        }
    }
}
