//! The node table: the one format in which graphs cross the Python/Rust
//! boundary (`docs/node_table.md`, format version 4).
//!
//! [`TableView`] borrows the columns (zero-copy from Python's buffers, or from
//! an owned [`Columns`]); [`crate::GraphStore::from_table`] validates a view
//! and builds the store in one pass; [`crate::GraphStore::to_columns`] goes
//! back. `from_table(&store.to_columns().view())` reproduces `store` exactly.

mod ingest;
pub(crate) use ingest::transpose;
#[cfg(test)]
mod tests;

use crate::ids::NodeId;
use crate::store::GraphStore;

/// The format version this crate reads and writes.
///
/// Version 2 added the `const_hash` column (and flag bit 11, `MUTATED_INPUT`);
/// version 3 flag bit 12, `STATIC_INPUT`; version 4 flag bit 13, `BACKWARD_REGION`.
pub const FORMAT_VERSION: i64 = 4;

/// Reserved op name of `PRIMAL` and `TANGENT` rows.
pub const PLACEHOLDER_OP: &str = "placeholder";
/// Reserved op name of `GET_ATTR` rows.
pub const GET_ATTR_OP: &str = "get_attr";

/// Borrowed columns of a node table. Nothing is checked until
/// [`GraphStore::from_table`]; a view may hold any bytes at all.
///
/// Integer attributes are `i64` so that any value a caller passes (negative,
/// huge) reaches validation and is reported there, not lost in a conversion.
#[derive(Clone, Copy, Debug)]
pub struct TableView<'a> {
    pub version: i64,
    pub kind: &'a [u8],
    pub op: &'a [u32],
    pub arg_ptr: &'a [u32],
    pub arg_idx: &'a [u32],
    pub nbytes: &'a [u64],
    pub const_hash: &'a [u64],
    pub flags: &'a [u32],
    pub region: &'a [i32],
    pub outputs: &'a [i32],
    pub num_fwd_outputs: i64,
    pub op_names: &'a [String],
}

/// Owned columns of a node table, in the layout of [`TableView`]. Used for
/// round trips, for handing a store's columns back to Python, and for building
/// tables by hand in tests and benchmarks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Columns {
    pub version: i64,
    pub kind: Vec<u8>,
    pub op: Vec<u32>,
    pub arg_ptr: Vec<u32>,
    pub arg_idx: Vec<u32>,
    pub nbytes: Vec<u64>,
    pub const_hash: Vec<u64>,
    pub flags: Vec<u32>,
    pub region: Vec<i32>,
    pub outputs: Vec<i32>,
    pub num_fwd_outputs: i64,
    pub op_names: Vec<String>,
}

impl Columns {
    /// An empty table of the current version with the two reserved op names
    /// interned as op ids 0 (`placeholder`) and 1 (`get_attr`).
    pub fn new() -> Self {
        Self {
            version: FORMAT_VERSION,
            arg_ptr: vec![0],
            op_names: vec![PLACEHOLDER_OP.to_string(), GET_ATTR_OP.to_string()],
            ..Self::default()
        }
    }

    /// Borrows the columns as a [`TableView`].
    pub fn view(&self) -> TableView<'_> {
        TableView {
            version: self.version,
            kind: &self.kind,
            op: &self.op,
            arg_ptr: &self.arg_ptr,
            arg_idx: &self.arg_idx,
            nbytes: &self.nbytes,
            const_hash: &self.const_hash,
            flags: &self.flags,
            region: &self.region,
            outputs: &self.outputs,
            num_fwd_outputs: self.num_fwd_outputs,
            op_names: &self.op_names,
        }
    }

    /// Number of rows (`N`).
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Interns `name`, returning its op id.
    pub fn intern(&mut self, name: &str) -> u32 {
        if let Some(i) = self.op_names.iter().position(|n| n == name) {
            return i as u32;
        }
        self.op_names.push(name.to_string());
        (self.op_names.len() - 1) as u32
    }

    /// Appends a row and returns its node id. Checks nothing: a builder for
    /// tests and benchmarks, whose output still goes through validation.
    ///
    /// The row's `const_hash` is its own id, so that hand-built rows never
    /// count as the same value; set `const_hash[id]` (or use
    /// [`Self::push_const`]) to model calls with equal constant arguments.
    pub fn push(&mut self, kind: u8, op: u32, args: &[u32], nbytes: u64, flags: u32) -> u32 {
        let id = self.kind.len() as u32;
        self.push_const(kind, op, args, nbytes, flags, u64::from(id))
    }

    /// [`Self::push`] with an explicit `const_hash`.
    pub fn push_const(
        &mut self,
        kind: u8,
        op: u32,
        args: &[u32],
        nbytes: u64,
        flags: u32,
        const_hash: u64,
    ) -> u32 {
        let id = self.kind.len() as u32;
        self.kind.push(kind);
        self.op.push(op);
        self.arg_idx.extend_from_slice(args);
        self.arg_ptr.push(self.arg_idx.len() as u32);
        self.nbytes.push(nbytes);
        self.const_hash.push(const_hash);
        self.flags.push(flags);
        self.region.push(-1);
        id
    }
}

impl GraphStore {
    /// The store's columns, in table layout. `flags` include the computed
    /// `TANGENT_DERIVED` bit (ignored when the table is read back).
    // Node ids and output counts fit i32/i64: `from_table` and `verify` bound N by i32::MAX.
    #[allow(clippy::cast_possible_wrap)]
    pub fn to_columns(&self) -> Columns {
        Columns {
            version: FORMAT_VERSION,
            kind: self.kind.iter().map(|k| *k as u8).collect(),
            op: self.op.iter().map(|o| o.0).collect(),
            arg_ptr: self.arg_ptr.clone(),
            arg_idx: self.arg_idx.iter().map(|a| a.0).collect(),
            nbytes: self.nbytes.clone(),
            const_hash: self.const_hash.clone(),
            flags: self.flags.clone(),
            region: self.region.clone(),
            outputs: self
                .outputs
                .iter()
                .map(|o| o.map_or(-1, |n: NodeId| n.0 as i32))
                .collect(),
            num_fwd_outputs: self.num_fwd_outputs as i64,
            op_names: self.op_names.clone(),
        }
    }
}
