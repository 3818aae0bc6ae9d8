//! What the partitioners may do with each node: rule tables keyed by op, the
//! node flags, the checkpoint tags, and an explicit [`PartitionOptions`].
//!
//! An op name is looked up twice: as is (Python callables such as
//! `"_operator.getitem"`) and as its overload packet, the name before the last
//! `.` (`"aten.mm.default"` → `"aten.mm"`, covering every overload). Each
//! interned op is resolved once per partition ([`OpRules::new`]), so per-node
//! questions are array lookups.

use super::cost_model::CostModel;
use super::op_tables;
use crate::ids::NodeId;
use crate::store::{flags, GraphStore, NodeKind};

/// Options of the min-cut partitioner, passed down explicitly (no globals).
///
/// Defaults follow torch 2.15's `torch._functorch.config`.
// Independent switches, one per torch config flag.
#[allow(clippy::struct_excessive_bools)]
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionOptions {
    /// Ban recomputing any op outside the recomputable allowlist
    /// (`ban_recompute_not_in_allowlist`); when `false`, only random and
    /// compute-intensive ops are banned by op.
    pub ban_if_not_in_allowlist: bool,
    /// Ban recomputing ops whose output is over 4x smaller than their inputs
    /// (`ban_recompute_reductions`): saving a reduction is cheap.
    pub ban_if_reduction: bool,
    /// Ban recomputing values that the backward must materialize anyway
    /// because a backward reader cannot fuse them (`ban_recompute_materialized_backward`).
    pub ban_if_materialized_backward: bool,
    /// Ban recomputing a fusible reader that sits after the first unfusible
    /// reader of the same value (`ban_recompute_used_far_apart`).
    pub ban_if_used_far_apart: bool,
    /// Break chains of more than [`Self::long_chain`] fusible forward ops
    /// (`ban_recompute_long_fusible_chains`).
    pub ban_if_long_fusible_chains: bool,
    /// Length of a "long" fusible chain (torch hardcodes 100).
    pub long_chain: u32,
    /// Ban recomputing forward nodes further than this from the backward
    /// (`max_dist_from_bw`; torch's default of 1000 effectively disables it).
    pub max_dist_from_bw: u32,
    /// Never ban view ops, whatever the heuristics say (`recompute_views`).
    pub recompute_views: bool,
    /// Merge common subexpressions first ([`crate::passes::cse`], torch's
    /// `config.cse`); applies to both partitioners.
    pub cse: bool,
    /// What recomputing costs (the memory-budget partitioner's
    /// [`super::cost`] table): machine balance and per-op factors.
    pub cost: CostModel,
}

impl Default for PartitionOptions {
    fn default() -> Self {
        Self {
            ban_if_not_in_allowlist: true,
            ban_if_reduction: true,
            ban_if_materialized_backward: true,
            ban_if_used_far_apart: true,
            ban_if_long_fusible_chains: true,
            long_chain: 100,
            max_dist_from_bw: 1000,
            recompute_views: false,
            cse: true,
            cost: CostModel::default(),
        }
    }
}

impl PartitionOptions {
    /// torch's `aggressive_recomputation`: every ban heuristic off except the
    /// reduction ban, and a denylist instead of the allowlist.
    pub fn aggressive() -> Self {
        Self {
            ban_if_not_in_allowlist: false,
            ban_if_materialized_backward: false,
            ban_if_used_far_apart: false,
            ban_if_long_fusible_chains: false,
            ..Self::default()
        }
    }
}

/// The classes an op belongs to (a bit set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpClass(u8);

impl OpClass {
    pub const RECOMPUTABLE: u8 = 1;
    pub const COMPUTE_INTENSIVE: u8 = 1 << 1;
    pub const RANDOM: u8 = 1 << 2;
    pub const VIEW: u8 = 1 << 3;
    pub const FUSE_INTO: u8 = 1 << 4;
    pub const ALWAYS_RECOMPUTABLE: u8 = 1 << 5;
    /// Two calls may differ ([`op_tables::NONDETERMINISTIC`]): never merged.
    pub const NONDETERMINISTIC: u8 = 1 << 6;
    /// May return (a view of) its first argument ([`op_tables::MAY_ALIAS`]).
    pub const MAY_ALIAS: u8 = 1 << 7;

    /// Classes of an op name, from the tables in [`op_tables`].
    pub fn of(name: &str) -> Self {
        let packet = name.rsplit_once('.').map_or(name, |(p, _)| p);
        let has = |table: &[&str]| {
            table.binary_search(&name).is_ok() || table.binary_search(&packet).is_ok()
        };
        let mut c = 0;
        let tables: [(&[&str], u8); 8] = [
            (op_tables::RECOMPUTABLE, Self::RECOMPUTABLE),
            (op_tables::COMPUTE_INTENSIVE, Self::COMPUTE_INTENSIVE),
            (op_tables::RANDOM, Self::RANDOM),
            (op_tables::VIEW, Self::VIEW),
            (op_tables::FUSE_INTO, Self::FUSE_INTO),
            (op_tables::ALWAYS_RECOMPUTABLE, Self::ALWAYS_RECOMPUTABLE),
            (op_tables::NONDETERMINISTIC, Self::NONDETERMINISTIC),
            (op_tables::MAY_ALIAS, Self::MAY_ALIAS),
        ];
        for (table, bit) in tables {
            if has(table) {
                c |= bit;
            }
        }
        if packet.starts_with("aten._scaled_dot_product_") {
            c |= Self::COMPUTE_INTENSIVE;
        }
        Self(c)
    }

    #[inline]
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Fusible ops: the recomputable allowlist and the random ops.
    #[inline]
    pub fn fusible(self) -> bool {
        self.has(Self::RECOMPUTABLE | Self::RANDOM | Self::ALWAYS_RECOMPUTABLE)
    }
}

/// Effective checkpoint tags of a node (see [`OpRules::new`]).
pub mod tag {
    pub const MUST_SAVE: u8 = 1;
    pub const MUST_RECOMPUTE: u8 = 2;
}

/// The rule tables resolved for one store: a class per interned op and the
/// effective checkpoint tag per node.
#[derive(Clone, Debug)]
pub struct OpRules {
    class: Vec<OpClass>,
    tags: Vec<u8>,
}

impl OpRules {
    /// Resolves every op of `store` and its checkpoint tags.
    ///
    /// Tags follow torch's `cleanup_recompute_tags`: a `MUST_RECOMPUTE` node
    /// read by a `MUST_RECOMPUTE` node of a later checkpoint region is the
    /// boundary between two regions and is saved instead. `MUST_RECOMPUTE` is
    /// dropped where recomputing is impossible: not a CALL, random, impure, or
    /// reading a value the backward can neither receive nor recompute (a
    /// tuple from a random op, say).
    pub fn new(store: &GraphStore) -> Self {
        let class: Vec<OpClass> = store.op_names.iter().map(|n| OpClass::of(n)).collect();
        let mut rules = Self {
            class,
            tags: vec![0u8; store.len()],
        };
        // Whether the backward could have each value: as a tangent-derived
        // node, saved (a tensor or SymInt), or recomputed from available args.
        let mut avail = vec![false; store.len()];
        for n in store.node_ids() {
            let i = n.index();
            let args_avail = store.args(n).iter().all(|a| avail[a.index()]);
            if store.has_flag(n, flags::MUST_SAVE) {
                rules.tags[i] = tag::MUST_SAVE;
            } else if store.has_flag(n, flags::MUST_RECOMPUTE) {
                let r = store.region[i];
                let boundary = r >= 0
                    && store.users(n).iter().any(|&u| {
                        store.has_flag(u, flags::MUST_RECOMPUTE) && store.region[u.index()] > r
                    });
                let possible = store.kind[i] == NodeKind::Call
                    && !store.has_flag(n, flags::IMPURE)
                    && !rules.is_random(store, n)
                    && args_avail;
                rules.tags[i] = if boundary {
                    tag::MUST_SAVE
                } else if possible {
                    tag::MUST_RECOMPUTE
                } else {
                    0
                };
            }
            let savable = !store.has_flag(n, flags::NON_TENSOR | flags::MULTI_OUTPUT)
                && rules.tags[i] != tag::MUST_RECOMPUTE;
            avail[i] = store.has_flag(n, flags::TANGENT_DERIVED)
                || savable
                || (args_avail && rules.never_recompute(store, n).is_none());
        }
        rules
    }

    #[inline]
    pub fn class(&self, store: &GraphStore, n: NodeId) -> OpClass {
        self.class[store.op[n.index()].index()]
    }

    #[inline]
    pub fn must_save(&self, n: NodeId) -> bool {
        self.tags[n.index()] == tag::MUST_SAVE
    }

    #[inline]
    pub fn must_recompute(&self, n: NodeId) -> bool {
        self.tags[n.index()] == tag::MUST_RECOMPUTE
    }

    /// Random by op table or by flag.
    #[inline]
    pub fn is_random(&self, store: &GraphStore, n: NodeId) -> bool {
        store.has_flag(n, flags::RANDOM) || self.class(store, n).has(OpClass::RANDOM)
    }

    /// Compute-intensive by op table or by the caller's flag.
    #[inline]
    pub fn is_compute_intensive(&self, store: &GraphStore, n: NodeId) -> bool {
        store.has_flag(n, flags::COMPUTE_INTENSIVE)
            || self.class(store, n).has(OpClass::COMPUTE_INTENSIVE)
    }

    /// A view op (by table, as torch's partitioner decides).
    #[inline]
    pub fn is_view(&self, store: &GraphStore, n: NodeId) -> bool {
        self.class(store, n).has(OpClass::VIEW)
    }

    /// Whether `b` reading `a` can be fused into one kernel.
    #[inline]
    pub fn is_fusible(&self, store: &GraphStore, a: NodeId, b: NodeId) -> bool {
        let cb = self.class(store, b);
        cb.has(OpClass::FUSE_INTO) || (self.class(store, a).fusible() && cb.fusible())
    }

    /// Why `n` may never be computed again in the backward, whatever the
    /// options: only CALL and `GET_ATTR` nodes can be recomputed; random and
    /// impure ops, `MUST_SAVE` values and compute-intensive ops (unless tagged
    /// `MUST_RECOMPUTE`) never are. `None` when recomputing is allowed.
    pub fn never_recompute(&self, store: &GraphStore, n: NodeId) -> Option<&'static str> {
        match store.kind[n.index()] {
            NodeKind::Primal => return Some("primal input"),
            NodeKind::Tangent => return Some("tangent"),
            NodeKind::GetAttr => return None,
            NodeKind::Call => {}
        }
        if self.must_save(n) {
            Some("must-save tag")
        } else if store.has_flag(n, flags::IMPURE) {
            Some("impure op")
        } else if self.is_random(store, n) {
            Some("random op")
        } else if self.is_compute_intensive(store, n) && !self.must_recompute(n) {
            Some("compute-intensive op")
        } else {
            None
        }
    }
}
