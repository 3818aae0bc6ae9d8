//! Common-subexpression elimination: find the CALL nodes that compute a value
//! an earlier node already computed, and redirect their readers.
//!
//! Two CALL nodes `a < b` compute the same value when both are *mergeable*
//! and they have the same op, the same `const_hash` (their constant,
//! non-node arguments), the same value facts (`nbytes`, and the flag bits
//! that describe the op or the value) and, once every argument is replaced by
//! its representative, the same arguments in the same order. A node is
//! mergeable when it is a CALL whose op is pure: not `IMPURE`, not `RANDOM`
//! (by flag or op table), not [`OpClass::NONDETERMINISTIC`] (random ops,
//! `empty`), and it does not share storage with a graph output (a view of an
//! output, or a value an output is a view of: merging two outputs would
//! alias two tensors the caller sees as distinct). Nodes on either side of
//! an `IMPURE` node are never merged (torch's mutation regions).
//!
//! Checkpoint tags and regions are not compared: the representative's win,
//! as in torch, whose partitioner runs the same pass first.
//!
//! Before (`ones`/`tril` are CALLs with equal `const_hash`):
//!
//! ```text
//! %3 = aten.ones.default()      %4 = aten.tril.default(%3)
//! %7 = aten.ones.default()      %8 = aten.tril.default(%7)   %9 = aten.where.self(%8, ...)
//! ```
//!
//! After: `rep[7] = 3`, `rep[8] = 4`; in [`eliminate`]'s store `%9` reads
//! `%4`, and `%7`, `%8` have no arguments and no readers (dead rows that keep
//! their ids, so row `i` is still the caller's node `i`).
//!
//! Arguments: a store ([`cse`]); a store and a representative map
//! ([`eliminate`]).
//! Returns: `rep` with `rep[i] <= i` the first node that computes node `i`'s
//! value (`rep[i] == i` for every node kept); [`eliminate`] returns the store
//! with readers and outputs redirected to representatives.
//! Complexity: `O(N + E)` expected: one hash-map probe per CALL node, and a
//! comparison of the argument lists of nodes whose keys collide.
//! Reference: `torch._functorch.compile_utils.fx_graph_cse`.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::error::{Error, Result};
use crate::ids::NodeId;
use crate::partition::OpClass;
use crate::store::{flags, GraphStore, NodeKind};
use crate::table::transpose;

/// Flag bits that need not agree for two nodes to be the same value: tags
/// (the representative's win), and what follows from the arguments.
const IGNORED_BITS: u32 =
    flags::MUST_SAVE | flags::MUST_RECOMPUTE | flags::TANGENT_DERIVED | flags::MUTATED_INPUT;

/// What decides whether two nodes may merge, computed once per store.
pub(crate) struct Mergeable {
    /// The node may be merged into another or be a representative.
    pub ok: Vec<bool>,
    /// Mutation region: the number of `IMPURE` nodes before the node.
    pub epoch: Vec<u32>,
}

impl Mergeable {
    pub(crate) fn new(store: &GraphStore) -> Self {
        let class: Vec<OpClass> = store.op_names.iter().map(|n| OpClass::of(n)).collect();
        let shares_output = shares_output_storage(store, &class);
        let mut epoch = Vec::with_capacity(store.len());
        let mut impure_seen = 0u32;
        let ok = store
            .node_ids()
            .map(|v| {
                let i = v.index();
                let impure = store.has_flag(v, flags::IMPURE);
                impure_seen += u32::from(impure);
                epoch.push(impure_seen);
                let c = class[store.op[i].index()];
                store.kind[i] == NodeKind::Call
                    && !impure
                    && !store.has_flag(v, flags::RANDOM)
                    && !c.has(OpClass::RANDOM | OpClass::NONDETERMINISTIC)
                    && !shares_output[i]
            })
            .collect();
        Self { ok, epoch }
    }

    /// Whether `a` and `b` compute the same value, given representatives
    /// `rep` of every node before `b`.
    pub(crate) fn same_value(
        &self,
        store: &GraphStore,
        rep: &[NodeId],
        a: NodeId,
        b: NodeId,
    ) -> bool {
        let (i, j) = (a.index(), b.index());
        self.ok[i]
            && self.ok[j]
            && self.epoch[i] == self.epoch[j]
            && store.op[i] == store.op[j]
            && store.const_hash[i] == store.const_hash[j]
            && store.nbytes[i] == store.nbytes[j]
            && store.flags[i] & !IGNORED_BITS == store.flags[j] & !IGNORED_BITS
            && store.args(a).len() == store.args(b).len()
            && store
                .args(a)
                .iter()
                .zip(store.args(b))
                .all(|(x, y)| rep[x.index()] == rep[y.index()])
    }
}

/// Per node: whether it shares storage with a graph output. A node that may
/// alias its input (the `VIEW` flag, or the view / may-alias op tables) has
/// the storage of its first argument; any other node its own.
fn shares_output_storage(store: &GraphStore, class: &[OpClass]) -> Vec<bool> {
    let mut base: Vec<u32> = (0..store.len() as u32).collect();
    for v in store.node_ids() {
        let c = class[store.op[v.index()].index()];
        if store.has_flag(v, flags::VIEW) || c.has(OpClass::VIEW | OpClass::MAY_ALIAS) {
            if let Some(a) = store.args(v).first() {
                base[v.index()] = base[a.index()];
            }
        }
    }
    let mut output_base = vec![false; store.len()];
    for o in store.outputs.iter().flatten() {
        output_base[base[o.index()] as usize] = true;
    }
    base.iter().map(|&b| output_base[b as usize]).collect()
}

/// `FxHash`'s mixing step (rustc's hasher): fast, good enough for a key
/// whose collisions are resolved by comparing nodes.
#[inline]
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
}

/// The hasher of a map whose `u64` keys are already mixed: passes them through.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0, u64::from(b));
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = x;
    }
}

/// The representative of every node (see the module docs).
pub fn cse(store: &GraphStore) -> Vec<NodeId> {
    let m = Mergeable::new(store);
    let n = store.len();
    let mut rep: Vec<NodeId> = store.node_ids().collect();
    // Key hash -> the latest kept node with it; `older[i]`: the one before `i`.
    let mut latest: HashMap<u64, NodeId, BuildHasherDefault<PreHashed>> = HashMap::default();
    let mut older: Vec<Option<NodeId>> = vec![None; n];
    for v in store.node_ids() {
        let i = v.index();
        if !m.ok[i] {
            continue;
        }
        let mut h = mix(u64::from(store.op[i].0), store.const_hash[i]);
        h = mix(h, u64::from(m.epoch[i]));
        h = mix(h, store.nbytes[i]);
        for a in store.args(v) {
            h = mix(h, u64::from(rep[a.index()].0));
        }
        let head = latest.get(&h).copied();
        let mut cand = head;
        while let Some(c) = cand {
            if m.same_value(store, &rep, c, v) {
                rep[i] = c;
                break;
            }
            cand = older[c.index()];
        }
        if rep[i] == v {
            older[i] = head;
            latest.insert(h, v);
        }
    }
    rep
}

/// The store with every reader and output of a merged node redirected to its
/// representative. Merged rows stay (ids are stable) with no arguments and
/// no readers; `TANGENT_DERIVED` is recomputed. Errors: [`Error::Graph`] if
/// `rep` is not a representative map of `store` (wrong length, `rep[i] > i`,
/// a representative that is itself merged, a merged row that is not a CALL).
pub fn eliminate(store: &GraphStore, rep: &[NodeId]) -> Result<GraphStore> {
    check_shape(store, rep)?;
    let n = store.len();
    let mut arg_ptr = Vec::with_capacity(n + 1);
    let mut arg_idx = Vec::with_capacity(store.arg_idx.len());
    let mut user_ptr = vec![0u32; n + 1];
    let mut node_flags = store.flags.clone();
    arg_ptr.push(0u32);
    for v in store.node_ids() {
        let i = v.index();
        let mut derived = store.kind[i] == NodeKind::Tangent;
        if rep[i] == v {
            for a in store.args(v) {
                let r = rep[a.index()];
                derived |= node_flags[r.index()] & flags::TANGENT_DERIVED != 0;
                user_ptr[r.index() + 1] += 1;
                arg_idx.push(r);
            }
        }
        node_flags[i] = (node_flags[i] & !flags::TANGENT_DERIVED)
            | if derived { flags::TANGENT_DERIVED } else { 0 };
        arg_ptr.push(arg_idx.len() as u32);
    }
    for i in 0..n {
        user_ptr[i + 1] += user_ptr[i];
    }
    let user_idx = transpose(&arg_ptr, &arg_idx, &user_ptr);
    Ok(GraphStore {
        kind: store.kind.clone(),
        op: store.op.clone(),
        op_names: store.op_names.clone(),
        arg_ptr,
        arg_idx,
        user_ptr,
        user_idx,
        nbytes: store.nbytes.clone(),
        const_hash: store.const_hash.clone(),
        flags: node_flags,
        region: store.region.clone(),
        outputs: store
            .outputs
            .iter()
            .map(|o| o.map(|o| rep[o.index()]))
            .collect(),
        num_fwd_outputs: store.num_fwd_outputs,
    })
}

/// Whether `rep` is the identity (nothing merged).
pub fn is_identity(rep: &[NodeId]) -> bool {
    rep.iter().enumerate().all(|(i, r)| r.index() == i)
}

fn check_shape(store: &GraphStore, rep: &[NodeId]) -> Result<()> {
    let bad = |i: usize, detail: String| {
        Err(Error::Graph {
            node: Some(i as u32),
            detail,
        })
    };
    if rep.len() != store.len() {
        return Err(Error::Graph {
            node: None,
            detail: format!(
                "representative map has {} entries for {} nodes",
                rep.len(),
                store.len()
            ),
        });
    }
    for (i, r) in rep.iter().enumerate() {
        if r.index() == i {
            continue;
        }
        if r.index() > i {
            return bad(i, format!("representative {r} comes after %{i}"));
        }
        if rep[r.index()] != *r {
            return bad(i, format!("representative {r} of %{i} is itself merged"));
        }
        if store.kind[i] != NodeKind::Call {
            return bad(i, format!("%{i} is merged but is not a CALL node"));
        }
    }
    Ok(())
}

/// Checks that `rep` only merges nodes that compute the same value (the
/// partition checker runs it): `Error::Partition` naming the first bad node.
pub(crate) fn check_rep(store: &GraphStore, rep: &[NodeId]) -> Result<()> {
    check_shape(store, rep).map_err(|e| Error::Partition(e.to_string()))?;
    let m = Mergeable::new(store);
    for v in store.node_ids() {
        let r = rep[v.index()];
        if r != v && !m.same_value(store, rep, r, v) {
            return Err(Error::Partition(format!(
                "{v} ({}) is merged into {r}, which does not compute the same value",
                store.op_name(v)
            )));
        }
    }
    Ok(())
}
