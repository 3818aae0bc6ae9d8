//! Which forward nodes the min-cut partitioner must not recompute.
//!
//! Arguments: the store, its rules and roles, the forward order, the distance
//! of each forward node from the backward, and the options.
//! Returns: a [`Ban`] per node. Primals, `MUST_SAVE` values, random and impure
//! ops are always banned; forward CALL nodes are banned by op (the allowlist,
//! or compute-intensive ops) and by torch's heuristics: values the backward
//! must materialize, reductions, far from the backward, fusible readers used
//! far apart, long fusible chains. Views and `MUST_RECOMPUTE` nodes are exempt
//! from the op and heuristic bans.
//! Complexity: `O(N + E)` for the per-node rules; the two chain heuristics are
//! `O(E log N)` (long chains, one global visit) and `O(E' log N)` where `E'` is
//! what the "first unfusible use" search explores (bounded by the span of each
//! value's forward readers).
//! Reference: `should_ban_recomputation`, `ban_recomputation_if_allowed` and the
//! two heuristics after them in `torch._functorch.partitioners.solve_min_cut`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::classify::{NodeInfo, NOT_FW};
use super::rules::{OpClass, OpRules, PartitionOptions};
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

/// Why a node may not be recomputed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ban {
    None,
    Primal,
    MustSave,
    /// By op: random, impure, compute-intensive, not in the allowlist.
    Op,
    /// By one of the heuristics.
    Heuristic,
}

pub(crate) struct BanInput<'a> {
    pub store: &'a GraphStore,
    pub rules: &'a OpRules,
    pub info: &'a NodeInfo,
    pub fw_order: &'a [u32],
    pub fw_nodes: &'a [NodeId],
    pub dist: &'a [u32],
    pub opts: &'a PartitionOptions,
}

pub(crate) fn compute_bans(x: &BanInput<'_>) -> Vec<Ban> {
    let store = x.store;
    let mut bans: Vec<Ban> = store.node_ids().map(|v| per_node(x, v)).collect();
    if x.opts.ban_if_used_far_apart {
        used_far_apart(x, &mut bans);
    }
    if x.opts.ban_if_long_fusible_chains {
        long_fusible_chains(x, &mut bans);
    }
    bans
}

/// Bans `v` by a heuristic unless it is exempt or already banned.
fn ban_if_allowed(x: &BanInput<'_>, bans: &mut [Ban], v: NodeId) {
    if bans[v.index()] == Ban::None && !x.rules.is_view(x.store, v) && !x.rules.must_recompute(v) {
        bans[v.index()] = Ban::Heuristic;
    }
}

fn per_node(x: &BanInput<'_>, v: NodeId) -> Ban {
    let (store, rules) = (x.store, x.rules);
    let i = v.index();
    if x.info.td[i] {
        return Ban::None;
    }
    match store.kind[i] {
        NodeKind::Primal => return Ban::Primal,
        NodeKind::Tangent | NodeKind::GetAttr => return Ban::None,
        NodeKind::Call => {}
    }
    if rules.must_save(v) {
        return Ban::MustSave;
    }
    if store.has_flag(v, flags::IMPURE) || rules.is_random(store, v) {
        return Ban::Op;
    }
    let class = rules.class(store, v);
    if !x.info.required_fw[i]
        || rules.must_recompute(v)
        || class.has(OpClass::ALWAYS_RECOMPUTABLE)
        || (x.opts.recompute_views && class.has(OpClass::VIEW))
    {
        return Ban::None;
    }
    let by_op = rules.is_compute_intensive(store, v)
        || (x.opts.ban_if_not_in_allowlist && !class.has(OpClass::RECOMPUTABLE));
    let ban = if by_op {
        Ban::Op
    } else if heuristic(x, v) {
        Ban::Heuristic
    } else {
        Ban::None
    };
    if class.has(OpClass::VIEW) {
        Ban::None
    } else {
        ban
    }
}

/// torch's per-node heuristics: materialized in the backward, too far from
/// the backward, a reduction.
fn heuristic(x: &BanInput<'_>, v: NodeId) -> bool {
    let store = x.store;
    if x.opts.ban_if_materialized_backward && materialized_backwards(x, v) {
        return true;
    }
    let d = x.dist[v.index()];
    // torch skips the check beyond 1000 (its "not connected" sentinel is 1e9).
    if d < 1000 && d > x.opts.max_dist_from_bw {
        return true;
    }
    if x.opts.ban_if_reduction {
        let inputs: u64 = store
            .args(v)
            .iter()
            .fold(0u64, |s, a| s.saturating_add(store.nbytes[a.index()]));
        if store.nbytes[v.index()].saturating_mul(4) < inputs {
            return true;
        }
    }
    false
}

/// Whether a reader outside the forward cannot fuse `v` (looking through views).
fn materialized_backwards(x: &BanInput<'_>, v: NodeId) -> bool {
    let (store, rules) = (x.store, x.rules);
    if rules.is_view(store, v) {
        return false;
    }
    let mut stack = vec![v];
    let mut seen = vec![v];
    while let Some(cur) = stack.pop() {
        for &u in store.users(cur) {
            if !x.info.required_fw[u.index()] && !rules.is_fusible(store, cur, u) {
                return true;
            }
            if rules.is_view(store, u) && !seen.contains(&u) {
                seen.push(u);
                stack.push(u);
            }
        }
    }
    false
}

/// Forward readers of `v`, each once, in node order.
fn fw_users<'a>(x: &'a BanInput<'a>, v: NodeId) -> impl Iterator<Item = NodeId> + 'a {
    let users = x.store.users(v);
    users
        .iter()
        .enumerate()
        .filter(move |&(k, u)| x.info.required_fw[u.index()] && (k == 0 || users[k - 1] != *u))
        .map(|(_, &u)| u)
}

/// Bans fusible forward readers of a value that come after its first
/// unfusible use: they are unlikely to fuse with the earlier readers.
fn used_far_apart(x: &BanInput<'_>, bans: &mut [Ban]) {
    // Scratch for the search, indexed by forward order: 0 absent, 1 queued
    // through fusible edges only, 2 queued through an unfusible edge.
    let mut state = vec![0u8; x.fw_nodes.len()];
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    for &used in x.fw_nodes {
        let Some(max_order) = fw_users(x, used).map(|u| x.fw_order[u.index()]).max() else {
            continue;
        };
        for u in fw_users(x, used) {
            let o = x.fw_order[u.index()];
            if state[o as usize] == 0 {
                state[o as usize] = 1;
                heap.push(Reverse(o));
            }
        }
        let first_unfusible = first_unfusible(x, &mut heap, &mut state, max_order);
        for u in fw_users(x, used) {
            if x.fw_order[u.index()] > first_unfusible && x.rules.is_fusible(x.store, used, u) {
                ban_if_allowed(x, bans, u);
            }
        }
    }
}

/// Forward order of the first node, in forward order, reached from the queued
/// nodes through an unfusible edge (`max_range` if none within it). Leaves
/// `heap` empty and `state` all zero.
fn first_unfusible(
    x: &BanInput<'_>,
    heap: &mut BinaryHeap<Reverse<u32>>,
    state: &mut [u8],
    max_range: u32,
) -> u32 {
    let mut found = max_range;
    while let Some(Reverse(o)) = heap.pop() {
        let s = std::mem::take(&mut state[o as usize]);
        if s == 2 {
            found = o;
            break;
        }
        let node = x.fw_nodes[o as usize];
        for &u in x.store.users(node) {
            let uo = x.fw_order[u.index()];
            if uo == NOT_FW || uo > max_range {
                continue;
            }
            let want = if x.rules.is_fusible(x.store, node, u) {
                1
            } else {
                2
            };
            let slot = &mut state[uo as usize];
            if *slot == 0 {
                heap.push(Reverse(uo));
            }
            *slot = (*slot).max(want);
        }
    }
    for Reverse(o) in heap.drain() {
        state[o as usize] = 0;
    }
    found
}

/// Breaks chains of fusible forward ops longer than `opts.long_chain`.
fn long_fusible_chains(x: &BanInput<'_>, bans: &mut [Ban]) {
    let mut visited = vec![false; x.fw_nodes.len()];
    let mut heap: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    for (start_order, _) in x.fw_nodes.iter().enumerate() {
        let start_order = start_order as u32;
        heap.clear();
        heap.push(Reverse(start_order));
        while let Some(Reverse(o)) = heap.pop() {
            if visited[o as usize] {
                continue;
            }
            visited[o as usize] = true;
            let cur = x.fw_nodes[o as usize];
            if o > start_order.saturating_add(x.opts.long_chain) && heap.is_empty() {
                ban_if_allowed(x, bans, cur);
                break;
            }
            for &u in x.store.users(cur) {
                let uo = x.fw_order[u.index()];
                if uo != NOT_FW
                    && bans[u.index()] == Ban::None
                    && x.rules.is_fusible(x.store, cur, u)
                {
                    heap.push(Reverse(uo));
                }
            }
        }
    }
}
