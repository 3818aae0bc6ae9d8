//! The alias table: raw facts about a traced function's flat inputs and
//! outputs, as Python's tracer observed them (`docs/node_table.md`, "The alias
//! table"). Plain columns; [`AliasFacts::new`] validates them so that the
//! classification never sees an impossible combination.

use crate::error::{Error, Result};

/// Bits of `input_flags`: what the function did to one flat tensor input.
pub mod input_bits {
    crate::codes::codes! { u32;
        /// The input's data was written in place (`x.add_(1)`, `x[0] = 1`).
        MUTATES_DATA = 1 << 0;
        /// The input's sizes, strides or storage offset changed (`x.t_()`).
        MUTATES_METADATA = 1 << 1;
        /// Every data mutation ran under `torch.no_grad()` or inference mode.
        MUTATIONS_HIDDEN = 1 << 2;
        /// The input requires grad.
        REQUIRES_GRAD = 1 << 3;
        /// The input is an autograd leaf.
        IS_LEAF = 1 << 4;
        /// The input's new value requires grad (it has autograd history).
        NEW_VALUE_REQUIRES_GRAD = 1 << 5;
        /// The backward (not the forward) wrote into the input.
        MUTATED_IN_BACKWARD = 1 << 6;
        /// The caller asked for data mutations to stay inside the graph
        /// (`keep_inference_input_mutations` on a forward-only graph).
        KEEP_IN_GRAPH = 1 << 7;
        /// Grad mode was on during the call.
        GRAD_MODE = 1 << 8;
    }
    /// Every bit the tracer may set.
    pub const ALL: u32 = (1 << 9) - 1;
    /// Derived, never in a table: another input shares this input's storage.
    pub const STORAGE_SHARED: u32 = 1 << 16;
}

/// Bits of `output_flags`: what one flat output is.
pub mod output_bits {
    crate::codes::codes! { u32;
        /// A tensor (other outputs are Python scalars, `SymInt`s, `None`).
        IS_TENSOR = 1 << 0;
        /// The output requires grad.
        REQUIRES_GRAD = 1 << 1;
        /// The output is the very input `output_input` (the same tensor object).
        IS_INPUT = 1 << 2;
        /// The output shares the storage of input `output_input` (a view of it).
        ALIASES_INPUT = 1 << 3;
        /// The storage of the output was swapped (`set_`): storage identity
        /// says nothing about aliasing.
        STORAGE_CHANGED = 1 << 4;
        /// The output is a view of a tensor created inside the function (its
        /// `_base`, identified by the group id in `output_base`).
        VIEW_OF_INTERMEDIATE = 1 << 5;
        /// That intermediate base requires grad.
        BASE_REQUIRES_GRAD = 1 << 6;
        /// That intermediate base is itself user output `output_base_output`.
        BASE_IS_OUTPUT = 1 << 7;
        /// The output reinterprets its input or intermediate: another dtype
        /// (`view_as_complex`, `x.view(torch.int32)`) or conj/neg bit (`conj()`);
        /// `as_strided` cannot rebuild it.
        REINTERPRETED = 1 << 8;
    }
    /// Every bit the tracer may set.
    pub const ALL: u32 = (1 << 9) - 1;
    /// Derived, never in a table: the first output viewing its base.
    pub const FIRST_VIEW_OF_BASE: u32 = 1 << 16;
}

/// Validated alias facts: one row per flat tensor input, one per flat output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AliasFacts {
    pub input_flags: Vec<u32>,
    /// Storage identity: inputs with equal ids share a storage (`>= 0`).
    pub input_storage: Vec<i32>,
    pub output_flags: Vec<u32>,
    /// The input an output is or aliases, else `-1`.
    pub output_input: Vec<i32>,
    /// Group id of the intermediate an output views, else `-1`.
    pub output_base: Vec<i32>,
    /// The user output that is that intermediate, else `-1`.
    pub output_base_output: Vec<i32>,
}

fn bad(column: &'static str, row: usize, detail: impl Into<String>) -> Error {
    Error::Alias {
        column,
        row: u32::try_from(row).ok(),
        detail: detail.into(),
    }
}

fn index_in(v: i32, len: usize) -> Option<usize> {
    usize::try_from(v).ok().filter(|&i| i < len)
}

impl AliasFacts {
    /// Checks every column against the format; the first violation is the error.
    pub fn new(
        input_flags: Vec<u32>,
        input_storage: Vec<i32>,
        output_flags: Vec<u32>,
        output_input: Vec<i32>,
        output_base: Vec<i32>,
        output_base_output: Vec<i32>,
    ) -> Result<Self> {
        let facts = Self {
            input_flags,
            input_storage,
            output_flags,
            output_input,
            output_base,
            output_base_output,
        };
        facts.validate()?;
        Ok(facts)
    }

    fn validate(&self) -> Result<()> {
        let (ni, no) = (self.input_flags.len(), self.output_flags.len());
        if self.input_storage.len() != ni {
            return Err(bad(
                "input_storage",
                self.input_storage.len().min(ni),
                format!(
                    "has {} rows, input_flags has {ni}",
                    self.input_storage.len()
                ),
            ));
        }
        for (column, len) in [
            ("output_input", self.output_input.len()),
            ("output_base", self.output_base.len()),
            ("output_base_output", self.output_base_output.len()),
        ] {
            if len != no {
                return Err(bad(
                    column,
                    len.min(no),
                    format!("has {len} rows, output_flags has {no}"),
                ));
            }
        }
        for (row, (&f, &s)) in self.input_flags.iter().zip(&self.input_storage).enumerate() {
            if f & !input_bits::ALL != 0 {
                return Err(bad(
                    "input_flags",
                    row,
                    format!("unknown flag bits {:#x}", f & !input_bits::ALL),
                ));
            }
            if s < 0 {
                return Err(bad(
                    "input_storage",
                    row,
                    format!("storage id {s} is negative"),
                ));
            }
        }
        for row in 0..no {
            self.validate_output(row, ni, no)?;
        }
        Ok(())
    }

    fn validate_output(&self, row: usize, ni: usize, no: usize) -> Result<()> {
        use output_bits::{ALL, IS_TENSOR};
        let f = self.output_flags[row];
        if f & !ALL != 0 {
            return Err(bad(
                "output_flags",
                row,
                format!("unknown flag bits {:#x}", f & !ALL),
            ));
        }
        if f & IS_TENSOR == 0 && f != 0 {
            return Err(bad(
                "output_flags",
                row,
                "a non-tensor output has tensor flags",
            ));
        }
        self.validate_output_input(row, ni)?;
        self.validate_output_base(row, no)
    }

    /// `output_input` agrees with the row's `IS_INPUT` / `ALIASES_INPUT` bits.
    fn validate_output_input(&self, row: usize, ni: usize) -> Result<()> {
        use output_bits::{ALIASES_INPUT, IS_INPUT};
        let f = self.output_flags[row];
        let aliases_input = f & (IS_INPUT | ALIASES_INPUT) != 0;
        let input = self.output_input[row];
        match (aliases_input, index_in(input, ni)) {
            (true, None) => {
                return Err(bad(
                    "output_input",
                    row,
                    format!("input {input} is out of range 0..{ni}"),
                ))
            }
            (false, _) if input != -1 => {
                return Err(bad(
                    "output_input",
                    row,
                    format!("is {input} but the output aliases no input"),
                ))
            }
            _ => {}
        }
        Ok(())
    }

    /// `output_base` and `output_base_output` agree with the row's base bits.
    fn validate_output_base(&self, row: usize, no: usize) -> Result<()> {
        use output_bits::{BASE_IS_OUTPUT, BASE_REQUIRES_GRAD, IS_TENSOR, VIEW_OF_INTERMEDIATE};
        let f = self.output_flags[row];
        let view = f & VIEW_OF_INTERMEDIATE != 0;
        let base = self.output_base[row];
        if view == (base < 0) || base < -1 {
            return Err(bad(
                "output_base",
                row,
                format!("group {base} disagrees with VIEW_OF_INTERMEDIATE"),
            ));
        }
        if !view && f & (BASE_REQUIRES_GRAD | BASE_IS_OUTPUT) != 0 {
            return Err(bad(
                "output_flags",
                row,
                "base bits set on an output that views no intermediate",
            ));
        }
        let base_output = self.output_base_output[row];
        if f & BASE_IS_OUTPUT != 0 {
            match index_in(base_output, no) {
                Some(j) if j != row && self.output_flags[j] & IS_TENSOR != 0 => {}
                _ => {
                    return Err(bad(
                        "output_base_output",
                        row,
                        format!("output {base_output} is not another tensor output"),
                    ))
                }
            }
        } else if base_output != -1 {
            return Err(bad(
                "output_base_output",
                row,
                format!("is {base_output} without BASE_IS_OUTPUT"),
            ));
        }
        Ok(())
    }
}
