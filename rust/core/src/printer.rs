//! Text form of a graph store, for error messages, dumps and tests.
//!
//! One line per node:
//!
//! ```text
//! %12 = aten.mm.default(%3, %7)  [nbytes=4096, flags=RANDOM|VIEW]
//! %0 = placeholder()  [primal, nbytes=64]
//! ```
//!
//! Every function here is total: it prints `?` for anything out of range
//! instead of panicking, so it can show a store that failed verification.

use std::fmt::Write;

use crate::store::{GraphStore, NodeKind};

/// Flag names by bit, in bit order (`docs/node_table.md`).
pub const FLAG_NAMES: [&str; 12] = [
    "SYMBOLIC_SIZE",
    "RANDOM",
    "VIEW",
    "IMPURE",
    "COMPUTE_INTENSIVE",
    "TANGENT_DERIVED",
    "SYMINT",
    "MUST_SAVE",
    "MUST_RECOMPUTE",
    "NON_TENSOR",
    "MULTI_OUTPUT",
    "MUTATED_INPUT",
];

/// `RANDOM|VIEW`; unknown bits as a hex remainder; `-` for none.
pub fn flags_to_string(bits: u32) -> String {
    if bits == 0 {
        return "-".to_string();
    }
    let mut parts: Vec<String> = FLAG_NAMES
        .iter()
        .enumerate()
        .filter(|(b, _)| bits & (1 << b) != 0)
        .map(|(_, name)| (*name).to_string())
        .collect();
    let unknown = bits & !((1u32 << FLAG_NAMES.len()) - 1);
    if unknown != 0 {
        parts.push(format!("{unknown:#x}"));
    }
    parts.join("|")
}

fn kind_label(kind: NodeKind) -> Option<&'static str> {
    match kind {
        NodeKind::Primal => Some("primal"),
        NodeKind::Tangent => Some("tangent"),
        NodeKind::GetAttr => Some("get_attr"),
        NodeKind::Call => None,
    }
}

/// The arguments of node `i`, or `None` if the store's CSR is broken there.
fn args_of(store: &GraphStore, i: usize) -> Option<&[crate::NodeId]> {
    let lo = *store.arg_ptr.get(i)? as usize;
    let hi = *store.arg_ptr.get(i + 1)? as usize;
    store.arg_idx.get(lo..hi)
}

/// One node as a line (no trailing newline).
pub fn node_to_string(store: &GraphStore, node: usize) -> String {
    let mut s = format!("%{node} = ");
    let op = store
        .op
        .get(node)
        .and_then(|o| store.op_names.get(o.index()))
        .map_or("?", String::as_str);
    s.push_str(op);
    s.push('(');
    match args_of(store, node) {
        Some(args) => {
            for (j, a) in args.iter().enumerate() {
                if j > 0 {
                    s.push_str(", ");
                }
                let _ = write!(s, "{a}");
            }
        }
        None => s.push('?'),
    }
    s.push_str(")  [");
    if let Some(label) = store.kind.get(node).copied().and_then(kind_label) {
        let _ = write!(s, "{label}, ");
    }
    match store.nbytes.get(node) {
        Some(b) => {
            let _ = write!(s, "nbytes={b}");
        }
        None => s.push_str("nbytes=?"),
    }
    match store.flags.get(node) {
        Some(0) => {}
        Some(&f) => {
            let _ = write!(s, ", flags={}", flags_to_string(f));
        }
        None => s.push_str(", flags=?"),
    }
    if let Some(&r) = store.region.get(node) {
        if r != -1 {
            let _ = write!(s, ", region={r}");
        }
    }
    s.push(']');
    s
}

/// The nodes within `radius` of `node`, the problem node marked with `==>`
/// (in the style of JAX's `check_jaxpr` errors). `...` marks elided nodes.
pub fn render_window(store: &GraphStore, node: usize, radius: usize) -> String {
    let n = store.len();
    if n == 0 {
        return "    (empty graph)\n".to_string();
    }
    let center = node.min(n - 1);
    let lo = center.saturating_sub(radius);
    let hi = center.saturating_add(radius).min(n - 1);
    let mut out = String::new();
    if lo > 0 {
        out.push_str("    ...\n");
    }
    for i in lo..=hi {
        out.push_str(if i == node { "==> " } else { "    " });
        out.push_str(&node_to_string(store, i));
        out.push('\n');
    }
    if hi + 1 < n {
        out.push_str("    ...\n");
    }
    out
}

/// The outputs line: `return (%5, None | %9, %10)`, forward outputs before
/// the bar, gradients after.
pub fn outputs_to_string(store: &GraphStore) -> String {
    let fmt = |o: &Option<crate::NodeId>| o.map_or_else(|| "None".to_string(), |n| n.to_string());
    let split = store.num_fwd_outputs.min(store.outputs.len());
    let fwd: Vec<String> = store.outputs[..split].iter().map(fmt).collect();
    let bwd: Vec<String> = store.outputs[split..].iter().map(fmt).collect();
    format!("return ({} | {})", fwd.join(", "), bwd.join(", "))
}

/// The whole graph, one node per line, then the outputs line.
pub fn render_graph(store: &GraphStore) -> String {
    let mut out = String::new();
    for i in 0..store.len() {
        out.push_str(&node_to_string(store, i));
        out.push('\n');
    }
    out.push_str(&outputs_to_string(store));
    out.push('\n');
    out
}

#[cfg(test)]
#[allow(clippy::cast_possible_wrap, clippy::many_single_char_names)]
mod tests {
    use super::*;
    use crate::store::flags;
    use crate::table::Columns;

    fn tiny() -> GraphStore {
        let mut c = Columns::new();
        let mm = c.intern("aten.mm.default");
        let x = c.push(0, 0, &[], 64, 0);
        let w = c.push(0, 0, &[], 64, 0);
        let t = c.push(1, 0, &[], 64, 0);
        let y = c.push(2, mm, &[x, w], 64, flags::RANDOM | flags::VIEW);
        let g = c.push(2, mm, &[t, w], 64, 0);
        c.outputs = vec![y as i32, g as i32, -1];
        c.num_fwd_outputs = 1;
        GraphStore::from_table(&c.view()).expect("valid")
    }

    #[test]
    fn prints_a_call_node() {
        let s = tiny();
        assert_eq!(
            node_to_string(&s, 3),
            "%3 = aten.mm.default(%0, %1)  [nbytes=64, flags=RANDOM|VIEW]"
        );
        assert_eq!(
            node_to_string(&s, 2),
            "%2 = placeholder()  [tangent, nbytes=64, flags=TANGENT_DERIVED]"
        );
        assert_eq!(
            node_to_string(&s, 4),
            "%4 = aten.mm.default(%2, %1)  [nbytes=64, flags=TANGENT_DERIVED]"
        );
    }

    #[test]
    fn flag_strings() {
        assert_eq!(flags_to_string(0), "-");
        assert_eq!(flags_to_string(flags::SYMINT | 1 << 20), "SYMINT|0x100000");
    }

    #[test]
    fn window_marks_the_node_and_elides() {
        let s = tiny();
        let w = render_window(&s, 2, 1);
        assert_eq!(
            w,
            "    ...\n    %1 = placeholder()  [primal, nbytes=64]\n\
             ==> %2 = placeholder()  [tangent, nbytes=64, flags=TANGENT_DERIVED]\n    \
             %3 = aten.mm.default(%0, %1)  [nbytes=64, flags=RANDOM|VIEW]\n    ...\n"
        );
    }

    #[test]
    fn graph_and_outputs() {
        let s = tiny();
        assert!(render_graph(&s).ends_with("return (%3 | %4, None)\n"));
    }

    #[test]
    fn never_panics_on_broken_stores() {
        let mut s = tiny();
        s.arg_ptr.truncate(2);
        s.op[0] = crate::OpId(99);
        s.flags.clear();
        let w = render_window(&s, 7, 10);
        assert!(w.contains("%0 = ?()"));
        assert!(w.contains("%4 = aten.mm.default(?)"));
        assert!(w.contains("flags=?"));
        let _ = render_graph(&GraphStore::default());
    }
}
