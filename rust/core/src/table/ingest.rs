//! `GraphStore::from_table`: validate a node table and build the store.
//!
//! Arguments: a [`TableView`] holding arbitrary, untrusted data.
//! Returns: a store satisfying every invariant `crate::verify` checks, or
//! `Error::Table` naming the first offending column and node.
//! Complexity: `O(N + E + M + K)` time, two passes over the arguments (one to
//! validate and count users, one to fill the users CSR); no hashing, no
//! allocation beyond the store's own arrays.
//!
//! Every input element is read exactly once, validated, and then copied, so
//! the store is consistent even if the caller's buffers change during the call.

use super::{TableView, FORMAT_VERSION, GET_ATTR_OP, PLACEHOLDER_OP};
use crate::error::{Error, Result};
use crate::ids::{NodeId, OpId};
use crate::store::{flags, GraphStore, NodeKind};

/// Which kinds an op id may carry, precomputed from `op_names`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reserved {
    Placeholder,
    GetAttr,
    Call,
}

fn err(column: &'static str, node: Option<usize>, detail: impl Into<String>) -> Error {
    Error::table(column, node.map(|n| n as u32), detail)
}

fn kind_name(kind: NodeKind) -> &'static str {
    match kind {
        NodeKind::Primal => "PRIMAL",
        NodeKind::Tangent => "TANGENT",
        NodeKind::Call => "CALL",
        NodeKind::GetAttr => "GET_ATTR",
    }
}

/// Lengths, version and the attributes; returns `N`.
fn check_shape(t: &TableView<'_>) -> Result<usize> {
    check_version(t)?;
    let n = row_count(t)?;
    check_limits(t, n)?;
    check_offsets(t, n)?;
    Ok(n)
}

fn check_version(t: &TableView<'_>) -> Result<()> {
    if t.version == FORMAT_VERSION {
        return Ok(());
    }
    Err(err(
        "version",
        None,
        format!(
            "format version {} is not supported (expected {FORMAT_VERSION})",
            t.version
        ),
    ))
}

/// `N`, the length most per-node columns agree on, so that a single column of the
/// wrong length is the one blamed (even if it is `kind`); any column of another
/// length is an error.
fn row_count(t: &TableView<'_>) -> Result<usize> {
    let lens = [
        ("kind", t.kind.len()),
        ("op", t.op.len()),
        ("arg_ptr", t.arg_ptr.len().wrapping_sub(1)),
        ("nbytes", t.nbytes.len()),
        ("const_hash", t.const_hash.len()),
        ("flags", t.flags.len()),
        ("region", t.region.len()),
    ];
    let votes = |len: usize| lens.iter().filter(|(_, l)| *l == len).count();
    let n = lens
        .iter()
        .map(|(_, l)| *l)
        .max_by_key(|l| (votes(*l), *l == t.kind.len()))
        .unwrap_or(t.kind.len());
    for (column, len) in lens {
        if len != n {
            let (got, want) = if column == "arg_ptr" {
                (
                    t.arg_ptr.len(),
                    "N + 1 = ".to_string() + &(n + 1).to_string(),
                )
            } else {
                (len, format!("N = {n}"))
            };
            return Err(err(
                column,
                None,
                format!("has length {got}, expected {want} (the length of the other columns)"),
            ));
        }
    }
    Ok(n)
}

/// Rows, op names and forward outputs within what the ids can count.
fn check_limits(t: &TableView<'_>, n: usize) -> Result<()> {
    if n > i32::MAX as usize {
        return Err(err(
            "kind",
            None,
            format!("{n} rows exceed the limit of {}", i32::MAX),
        ));
    }
    if t.op_names.len() > u32::MAX as usize {
        return Err(err("op_names", None, "more than 2^32 op names"));
    }
    let m = t.outputs.len();
    if t.num_fwd_outputs < 0 || t.num_fwd_outputs as u64 > m as u64 {
        return Err(err(
            "num_fwd_outputs",
            None,
            format!(
                "{} is not in 0..={m} (the number of outputs)",
                t.num_fwd_outputs
            ),
        ));
    }
    Ok(())
}

/// `arg_ptr` starts at 0, never decreases, and ends at `len(arg_idx)`.
fn check_offsets(t: &TableView<'_>, n: usize) -> Result<()> {
    if t.arg_ptr.first() != Some(&0) {
        return Err(err(
            "arg_ptr",
            Some(0),
            format!("arg_ptr[0] must be 0, found {}", t.arg_ptr[0]),
        ));
    }
    if let Some(i) = t.arg_ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(err(
            "arg_ptr",
            Some(i),
            format!(
                "offsets decrease: arg_ptr[{i}] = {} > arg_ptr[{}] = {}",
                t.arg_ptr[i],
                i + 1,
                t.arg_ptr[i + 1]
            ),
        ));
    }
    let e = t.arg_idx.len();
    if t.arg_ptr[n] as usize != e {
        return Err(err(
            "arg_idx",
            None,
            format!("has length {e}, but arg_ptr[N] = {}", t.arg_ptr[n]),
        ));
    }
    Ok(())
}

fn reserved_of(op_names: &[String]) -> Vec<Reserved> {
    op_names
        .iter()
        .map(|name| match name.as_str() {
            PLACEHOLDER_OP => Reserved::Placeholder,
            GET_ATTR_OP => Reserved::GetAttr,
            _ => Reserved::Call,
        })
        .collect()
}

/// The validated scalar fields of one row.
struct Row {
    kind: NodeKind,
    op: u32,
    bits: u32,
    region: i32,
}

/// Checks row `i` (all but its arguments), whose arguments span `lo..hi`. The
/// columns are checked in a fixed order, so that a corrupt value is blamed on its own
/// column: `arg_ptr`, `kind`, `op`, `flags`, `region`, then the argument count.
fn check_row(
    tbl: &TableView<'_>,
    reserved: &[Reserved],
    i: usize,
    lo: u32,
    hi: u32,
) -> Result<Row> {
    check_arg_span(tbl, i, lo, hi)?;
    let kind = check_kind(tbl, i)?;
    let op = check_op(tbl, reserved, i, kind)?;
    let bits = check_flags(tbl, i)?;
    let region = check_region(tbl, i)?;
    if kind != NodeKind::Call && hi > lo {
        return Err(err(
            "arg_idx",
            Some(i),
            format!("a {} node cannot have arguments", kind_name(kind)),
        ));
    }
    Ok(Row {
        kind,
        op,
        bits: bits & !flags::TANGENT_DERIVED,
        region,
    })
}

/// Row `i`'s arguments `lo..hi`: increasing offsets, within `arg_idx`.
fn check_arg_span(tbl: &TableView<'_>, i: usize, lo: u32, hi: u32) -> Result<()> {
    if hi < lo {
        return Err(err(
            "arg_ptr",
            Some(i),
            format!(
                "offsets decrease: arg_ptr[{i}] = {lo} > arg_ptr[{}] = {hi}",
                i + 1
            ),
        ));
    }
    if hi as usize > tbl.arg_idx.len() {
        return Err(err(
            "arg_ptr",
            Some(i),
            format!(
                "arg_ptr[{}] = {hi} exceeds len(arg_idx) = {}",
                i + 1,
                tbl.arg_idx.len()
            ),
        ));
    }
    Ok(())
}

fn check_kind(tbl: &TableView<'_>, i: usize) -> Result<NodeKind> {
    let raw_kind = tbl.kind[i];
    NodeKind::from_u8(raw_kind).ok_or_else(|| {
        err(
            "kind",
            Some(i),
            format!("unknown kind {raw_kind} (known: 0 PRIMAL, 1 TANGENT, 2 CALL, 3 GET_ATTR)"),
        )
    })
}

/// Row `i`'s op id: in range, and reserved for its kind (placeholder, `get_attr`) or not.
fn check_op(tbl: &TableView<'_>, reserved: &[Reserved], i: usize, kind: NodeKind) -> Result<u32> {
    let op = tbl.op[i];
    let Some(&res) = reserved.get(op as usize) else {
        return Err(err(
            "op",
            Some(i),
            format!(
                "op id {op} is out of range (len(op_names) = {})",
                reserved.len()
            ),
        ));
    };
    let want = match kind {
        NodeKind::Primal | NodeKind::Tangent => Reserved::Placeholder,
        NodeKind::GetAttr => Reserved::GetAttr,
        NodeKind::Call => Reserved::Call,
    };
    if res != want {
        return Err(err(
            "op",
            Some(i),
            format!(
                "a {} node cannot have op `{}`",
                kind_name(kind),
                tbl.op_names[op as usize]
            ),
        ));
    }
    Ok(op)
}

fn check_flags(tbl: &TableView<'_>, i: usize) -> Result<u32> {
    let bits = tbl.flags[i];
    if bits & !flags::KNOWN_INPUT != 0 {
        return Err(err(
            "flags",
            Some(i),
            format!("unknown flag bits {:#x} set", bits & !flags::KNOWN_INPUT),
        ));
    }
    Ok(bits)
}

fn check_region(tbl: &TableView<'_>, i: usize) -> Result<i32> {
    let region = tbl.region[i];
    if region < -1 {
        return Err(err(
            "region",
            Some(i),
            format!("region {region} is not -1 or a region id >= 0"),
        ));
    }
    Ok(region)
}

fn check_outputs(outputs: &[i32], num_nodes: usize) -> Result<Vec<Option<NodeId>>> {
    let limit = i64::try_from(num_nodes).unwrap_or(i64::MAX);
    outputs
        .iter()
        .enumerate()
        .map(|(j, &out)| {
            if out < -1 || i64::from(out) >= limit {
                Err(err(
                    "outputs",
                    None,
                    format!("output {j} is {out}, not -1 or a node id in 0..{num_nodes}"),
                ))
            } else {
                Ok(u32::try_from(out).ok().map(NodeId))
            }
        })
        .collect()
}

impl GraphStore {
    /// Validates a node table and builds the store (see the module docs).
    pub fn from_table(tbl: &TableView<'_>) -> Result<GraphStore> {
        let num_nodes = check_shape(tbl)?;
        let reserved = reserved_of(tbl.op_names);

        let mut kind = Vec::with_capacity(num_nodes);
        let mut op = Vec::with_capacity(num_nodes);
        let mut node_flags: Vec<u32> = Vec::with_capacity(num_nodes);
        let mut region = Vec::with_capacity(num_nodes);
        let mut arg_ptr = Vec::with_capacity(num_nodes + 1);
        let mut arg_idx: Vec<NodeId> = Vec::with_capacity(tbl.arg_idx.len());
        // user_ptr[a + 1] counts the readers of `a`; prefix-summed below.
        let mut user_ptr = vec![0u32; num_nodes + 1];
        arg_ptr.push(0u32);

        for i in 0..num_nodes {
            let (lo, hi) = (arg_ptr[i], tbl.arg_ptr[i + 1]);
            let row = check_row(tbl, &reserved, i, lo, hi)?;
            let mut derived = row.kind == NodeKind::Tangent;
            for (slot, &arg) in tbl.arg_idx[lo as usize..hi as usize].iter().enumerate() {
                if arg as usize >= i {
                    return Err(err(
                        "arg_idx",
                        Some(i),
                        format!(
                            "argument {slot} is %{arg}, which is not before %{i} \
                             (a forward reference or a cycle)"
                        ),
                    ));
                }
                derived |= node_flags[arg as usize] & flags::TANGENT_DERIVED != 0;
                user_ptr[arg as usize + 1] += 1;
                arg_idx.push(NodeId(arg));
            }
            kind.push(row.kind);
            op.push(OpId(row.op));
            node_flags.push(row.bits | if derived { flags::TANGENT_DERIVED } else { 0 });
            region.push(row.region);
            arg_ptr.push(hi);
        }
        let outputs = check_outputs(tbl.outputs, num_nodes)?;

        for i in 0..num_nodes {
            user_ptr[i + 1] += user_ptr[i];
        }
        let user_idx = transpose(&arg_ptr, &arg_idx, &user_ptr);

        Ok(GraphStore {
            kind,
            op,
            op_names: tbl.op_names.to_vec(),
            arg_ptr,
            arg_idx,
            user_ptr,
            user_idx,
            nbytes: tbl.nbytes.to_vec(),
            const_hash: tbl.const_hash.to_vec(),
            flags: node_flags,
            region,
            outputs,
            num_fwd_outputs: tbl.num_fwd_outputs as usize,
        })
    }
}

/// Fills the users CSR given its offsets: each reader once per argument slot,
/// readers in ascending order. Inputs must already be consistent (argument
/// ids < N, offsets in bounds); the indexing below relies on it.
pub(crate) fn transpose(arg_ptr: &[u32], arg_idx: &[NodeId], user_ptr: &[u32]) -> Vec<NodeId> {
    let n = arg_ptr.len().saturating_sub(1);
    let mut cursor: Vec<u32> = user_ptr[..n].to_vec();
    let mut user_idx = vec![NodeId(0); arg_idx.len()];
    for reader in 0..n {
        for a in &arg_idx[arg_ptr[reader] as usize..arg_ptr[reader + 1] as usize] {
            let c = &mut cursor[a.index()];
            user_idx[*c as usize] = NodeId(reader as u32);
            *c += 1;
        }
    }
    user_idx
}
