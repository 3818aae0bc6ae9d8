//! The codes that cross the Python/Rust boundary, each defined once, in the
//! core module that owns it: node kinds and flag bits (`crate::store`), alias
//! fact bits (`crate::alias::facts`), alias verdicts (`crate::alias::rules`),
//! placement bits and saved reasons (`crate::partition::result`).
//!
//! Those modules declare their codes with the two macros of `crate::codes`,
//! which also list every code by name; [`vocabulary`] gathers the lists. The binding
//! exports them as `aotgrad._rust.VOCABULARY` (`{vocabulary: {NAME: code}}`)
//! and `python/aotgrad/vocab.py` builds Python's enums from it at import,
//! failing there if a name is missing on either side. Nothing is mirrored by
//! hand.

use crate::alias::{input_bits, output_bits, InputVerdict, OutputVerdict};
use crate::partition::{placement, SavedReason};
use crate::store::{flags, NodeKind};

/// One vocabulary: its name and its codes, each with the name Python knows it
/// by (`SCREAMING_SNAKE_CASE`: a constant's own name, an enum variant's name
/// converted by [`screaming_snake`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    pub name: &'static str,
    pub codes: Vec<(String, u32)>,
}

fn consts<T: Copy + Into<u32>>(name: &'static str, named: &[(&str, T)]) -> Vocabulary {
    Vocabulary {
        name,
        codes: named
            .iter()
            .map(|&(n, v)| (n.to_string(), v.into()))
            .collect(),
    }
}

fn variants<E: Copy>(
    name: &'static str,
    variants: &[(&str, E)],
    code: impl Fn(E) -> u8,
) -> Vocabulary {
    Vocabulary {
        name,
        codes: variants
            .iter()
            .map(|&(n, v)| (screaming_snake(n), u32::from(code(v))))
            .collect(),
    }
}

/// Every code that crosses the boundary, by vocabulary.
///
/// | vocabulary       | defined in                                    |
/// |------------------|-----------------------------------------------|
/// | `node_kind`      | [`NodeKind`]                                  |
/// | `node_flags`     | [`flags`]                                     |
/// | `input_facts`    | [`input_bits`]                                |
/// | `output_facts`   | [`output_bits`]                               |
/// | `input_verdict`  | [`InputVerdict`]                              |
/// | `output_verdict` | [`OutputVerdict`]                             |
/// | `placement`      | [`placement`]                                 |
/// | `saved_reason`   | [`SavedReason`] (labels: [`SavedReason::label`]) |
pub fn vocabulary() -> Vec<Vocabulary> {
    vec![
        variants("node_kind", NodeKind::VARIANTS, |v| v as u8),
        consts("node_flags", flags::NAMED),
        consts("input_facts", input_bits::NAMED),
        consts("output_facts", output_bits::NAMED),
        variants("input_verdict", InputVerdict::VARIANTS, |v| v as u8),
        variants("output_verdict", OutputVerdict::VARIANTS, |v| v as u8),
        consts("placement", placement::NAMED),
        variants("saved_reason", SavedReason::VARIANTS, |v| v as u8),
    ]
}

/// `CamelCase` → `CAMEL_CASE`: an enum variant's name as a Python enum member.
pub fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for (i, c) in camel.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_convert_to_python_style() {
        assert_eq!(screaming_snake("GetAttr"), "GET_ATTR");
        assert_eq!(
            screaming_snake("DataAndMetadataDifferentiable"),
            "DATA_AND_METADATA_DIFFERENTIABLE"
        );
        assert_eq!(screaming_snake("Primal"), "PRIMAL");
    }

    #[test]
    fn every_vocabulary_has_unique_names_and_codes() {
        let all = vocabulary();
        for v in &all {
            assert!(!v.codes.is_empty(), "{} is empty", v.name);
            for (i, (name, code)) in v.codes.iter().enumerate() {
                for (other, other_code) in &v.codes[..i] {
                    assert_ne!(name, other, "{}: {name} twice", v.name);
                    assert_ne!(code, other_code, "{}: {name} and {other}", v.name);
                }
            }
        }
        let mut names: Vec<_> = all.iter().map(|v| v.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }

    #[test]
    fn bit_vocabularies_cover_their_masks() {
        let or = |name: &str| -> u32 {
            let v = vocabulary().into_iter().find(|v| v.name == name).unwrap();
            v.codes.iter().fold(0, |acc, (_, c)| {
                assert_eq!(c.count_ones(), 1, "{name}: {c:#x} is not one bit");
                acc | c
            })
        };
        assert_eq!(
            or("node_flags"),
            flags::KNOWN_INPUT | flags::TANGENT_DERIVED
        );
        assert_eq!(or("input_facts"), input_bits::ALL);
        assert_eq!(or("output_facts"), output_bits::ALL);
    }

    #[test]
    fn enum_codes_round_trip() {
        for &(_, k) in NodeKind::VARIANTS {
            assert_eq!(NodeKind::from_u8(k as u8), Some(k));
        }
        for &(_, r) in SavedReason::VARIANTS {
            assert_eq!(SavedReason::from_u8(r as u8), Some(r));
        }
        assert_eq!(NodeKind::from_u8(4), None);
    }
}
