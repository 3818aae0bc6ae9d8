//! The store verifier: re-checks every invariant of a [`GraphStore`].
//!
//! Tests run it after every pass; a store built by `GraphStore::from_table`
//! always passes. It never panics, whatever the store holds.
//!
//! Arguments: any store. Returns: `Ok(())`, or `Error::Graph` naming the
//! first bad node, with the surrounding nodes printed (`crate::printer`).
//! Complexity: `O(N + E + M)` time, `O(N + E)` extra space (the expected
//! users CSR).

use crate::error::{Error, Result};
use crate::ids::NodeId;
use crate::printer::render_window;
use crate::store::{flags, GraphStore, NodeKind};
use crate::table::{GET_ATTR_OP, PLACEHOLDER_OP};

/// Nodes shown either side of the failing one.
const RADIUS: usize = 3;

fn whole(detail: impl Into<String>) -> Error {
    Error::Graph {
        node: None,
        detail: detail.into(),
    }
}

fn at(store: &GraphStore, node: usize, detail: &str) -> Error {
    Error::Graph {
        node: Some(node as u32),
        detail: format!("{detail}\n{}", render_window(store, node, RADIUS)),
    }
}

/// Checks all store invariants (see the module docs).
pub fn verify(store: &GraphStore) -> Result<()> {
    check_lengths(store)?;
    check_csr("arg", &store.arg_ptr, store.arg_idx.len())?;
    check_csr("user", &store.user_ptr, store.user_idx.len())?;
    check_nodes(store)?;
    check_users(store)?;
    check_outputs(store)
}

fn check_lengths(s: &GraphStore) -> Result<()> {
    let n = s.len();
    if n > i32::MAX as usize {
        return Err(whole(format!("{n} nodes exceed the limit of {}", i32::MAX)));
    }
    let columns = [
        ("op", s.op.len(), n),
        ("nbytes", s.nbytes.len(), n),
        ("const_hash", s.const_hash.len(), n),
        ("flags", s.flags.len(), n),
        ("region", s.region.len(), n),
        ("arg_ptr", s.arg_ptr.len(), n + 1),
        ("user_ptr", s.user_ptr.len(), n + 1),
    ];
    for (name, got, want) in columns {
        if got != want {
            return Err(whole(format!(
                "`{name}` has length {got}, expected {want} for {n} nodes"
            )));
        }
    }
    Ok(())
}

fn check_csr(what: &str, ptr: &[u32], len: usize) -> Result<()> {
    if ptr.first() != Some(&0) || ptr.last().map(|&p| p as usize) != Some(len) {
        return Err(whole(format!(
            "{what}_ptr must run from 0 to len({what}_idx) = {len}"
        )));
    }
    if let Some(i) = ptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(whole(format!("{what}_ptr decreases at node {i}")));
    }
    Ok(())
}

fn reserved(name: &str) -> u8 {
    match name {
        PLACEHOLDER_OP => 1,
        GET_ATTR_OP => 2,
        _ => 0,
    }
}

fn check_nodes(s: &GraphStore) -> Result<()> {
    for i in 0..s.len() {
        let kind = s.kind[i];
        let Some(name) = s.op_names.get(s.op[i].index()) else {
            return Err(at(s, i, &format!("op id {} is out of range", s.op[i].0)));
        };
        let want = match kind {
            NodeKind::Primal | NodeKind::Tangent => 1,
            NodeKind::GetAttr => 2,
            NodeKind::Call => 0,
        };
        if reserved(name) != want {
            return Err(at(
                s,
                i,
                &format!("a {kind:?} node cannot have op `{name}`"),
            ));
        }
        let f = s.flags[i];
        if f & !flags::KNOWN_INPUT != 0 {
            return Err(at(s, i, &format!("unknown flag bits {f:#x}")));
        }
        if s.region[i] < -1 {
            return Err(at(s, i, &format!("region {} < -1", s.region[i])));
        }
        let args = &s.arg_idx[s.arg_ptr[i] as usize..s.arg_ptr[i + 1] as usize];
        if kind != NodeKind::Call && !args.is_empty() {
            return Err(at(s, i, &format!("a {kind:?} node has arguments")));
        }
        let mut derived = kind == NodeKind::Tangent;
        for a in args {
            if a.index() >= i {
                return Err(at(
                    s,
                    i,
                    &format!("argument {a} is not before %{i} (not in topological order)"),
                ));
            }
            derived |= s.flags[a.index()] & flags::TANGENT_DERIVED != 0;
        }
        if derived != (f & flags::TANGENT_DERIVED != 0) {
            return Err(at(
                s,
                i,
                &format!(
                    "TANGENT_DERIVED is {}, but the node {} a tangent-derived value",
                    if derived { "unset" } else { "set" },
                    if derived {
                        "is or reads"
                    } else {
                        "neither is nor reads"
                    }
                ),
            ));
        }
    }
    Ok(())
}

/// `users` must be the exact transpose of `args`: per node, each reader once
/// per argument slot, readers in ascending order.
fn check_users(s: &GraphStore) -> Result<()> {
    let n = s.len();
    let mut want_ptr = vec![0u32; n + 1];
    for a in &s.arg_idx {
        want_ptr[a.index() + 1] += 1;
    }
    for i in 0..n {
        want_ptr[i + 1] += want_ptr[i];
    }
    let want_idx = crate::table::transpose(&s.arg_ptr, &s.arg_idx, &want_ptr);
    for i in 0..n {
        let want = &want_idx[want_ptr[i] as usize..want_ptr[i + 1] as usize];
        let got = &s.user_idx[s.user_ptr[i] as usize..s.user_ptr[i + 1] as usize];
        if want != got {
            return Err(at(
                s,
                i,
                &format!(
                    "users are {}, but the readers are {} (users must be the transpose of args)",
                    list(got),
                    list(want)
                ),
            ));
        }
    }
    Ok(())
}

fn list(ids: &[NodeId]) -> String {
    let v: Vec<String> = ids.iter().map(ToString::to_string).collect();
    format!("[{}]", v.join(", "))
}

fn check_outputs(s: &GraphStore) -> Result<()> {
    let n = s.len();
    if let Some(j) = s
        .outputs
        .iter()
        .position(|o| o.is_some_and(|o| o.index() >= n))
    {
        return Err(whole(format!("output {j} is not a node id in 0..{n}")));
    }
    if s.num_fwd_outputs > s.outputs.len() {
        return Err(whole(format!(
            "num_fwd_outputs = {} exceeds the {} outputs",
            s.num_fwd_outputs,
            s.outputs.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::cast_possible_wrap, clippy::many_single_char_names)]
mod tests {
    use super::*;
    use crate::table::Columns;

    /// x, w: primals; t: tangent; y = mm(x, w); g = mm(t, y); h = add(y, y).
    fn store() -> GraphStore {
        let mut c = Columns::new();
        let mm = c.intern("aten.mm.default");
        let add = c.intern("aten.add.Tensor");
        let x = c.push(0, 0, &[], 16, 0);
        let w = c.push(0, 0, &[], 16, 0);
        let t = c.push(1, 0, &[], 16, 0);
        let y = c.push(2, mm, &[x, w], 16, 0);
        let g = c.push(2, mm, &[t, y], 16, 0);
        let h = c.push(2, add, &[y, y], 16, 0);
        c.outputs = vec![h as i32, g as i32];
        c.num_fwd_outputs = 1;
        GraphStore::from_table(&c.view()).expect("valid")
    }

    fn graph_err(s: &GraphStore) -> (Option<u32>, String) {
        match verify(s) {
            Err(Error::Graph { node, detail }) => (node, detail),
            other => panic!("expected a graph error, got {other:?}"),
        }
    }

    #[test]
    fn valid_store_passes() {
        verify(&store()).expect("valid");
        verify(&GraphStore::default()).expect_err("no arg_ptr");
        verify(&GraphStore::from_table(&Columns::new().view()).expect("empty")).expect("empty ok");
    }

    #[test]
    fn users_are_the_transpose() {
        let s = store();
        assert_eq!(s.users(NodeId(3)), &[NodeId(4), NodeId(5), NodeId(5)]);
        let mut bad = s.clone();
        let last = bad.user_idx.len() - 1;
        bad.user_idx.swap(0, last);
        let (node, detail) = graph_err(&bad);
        assert_eq!(node, Some(0));
        assert!(detail.contains("transpose"), "{detail}");
        assert!(detail.contains("==> %0 = placeholder()"), "{detail}");
    }

    #[test]
    fn forward_reference_is_reported_with_a_window() {
        let mut s = store();
        s.arg_idx[0] = NodeId(4);
        let (node, detail) = graph_err(&s);
        assert_eq!(node, Some(3));
        assert!(
            detail.contains("==> %3 = aten.mm.default(%4, %1)"),
            "{detail}"
        );
    }

    #[test]
    fn tangent_derived_must_be_consistent() {
        let mut s = store();
        s.flags[4] &= !flags::TANGENT_DERIVED;
        assert_eq!(graph_err(&s).0, Some(4));
        let mut s = store();
        s.flags[5] |= flags::TANGENT_DERIVED;
        assert_eq!(graph_err(&s).0, Some(5));
    }

    #[test]
    fn each_broken_invariant_is_caught() {
        let breakers: [fn(&mut GraphStore); 11] = [
            |s| {
                s.nbytes.pop();
            },
            |s| {
                s.const_hash.pop();
            },
            |s| s.arg_ptr[6] += 1,
            |s| s.user_ptr.swap(1, 2),
            |s| s.op[1] = crate::OpId(77),
            |s| s.op[3] = crate::OpId(0),
            |s| s.flags[2] |= 1 << 30,
            |s| s.region[1] = -5,
            |s| s.outputs[0] = Some(NodeId(6)),
            |s| s.num_fwd_outputs = 3,
            |s| s.kind[0] = NodeKind::Call,
        ];
        for (k, brk) in breakers.iter().enumerate() {
            let mut s = store();
            brk(&mut s);
            assert!(verify(&s).is_err(), "breaker {k} not caught");
        }
    }
}
