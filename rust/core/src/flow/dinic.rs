//! Dinic's maximum-flow algorithm on a CSR [`FlowNetwork`].
//!
//! Arguments: a validated network.
//! Returns: the maximum flow value and the residual capacity of every arc, or
//! [`Error::Flow`] when an all-infinite source-to-sink path makes the flow
//! unbounded.
//! Complexity: `O(V² E)` time in the worst case (each of at most `V` phases is
//! a breadth-first search, `O(E)`, plus a blocking flow, `O(V E)`), far less on
//! the shallow, layered networks the partitioner builds; `O(V + E)` memory.
//! Reference: E. A. Dinitz, "Algorithm for solution of a problem of maximum
//! flow in a network with power estimation", Soviet Math. Doklady 11 (1970);
//! the levels are distances to the sink (a breadth-first search backwards
//! from it), so the blocking-flow search only enters nodes that reach the
//! sink; it keeps a current-arc pointer per node and an explicit path stack
//! (no recursion: path length is bounded only by memory).
//!
//! Exactness with `f64`: infinite capacities are kept as `f64::INFINITY`
//! (`inf - x == inf`, `min(inf, x) == x`). Once [`FlowNetwork::infinite_path`]
//! has ruled out an all-infinite path, every residual source-to-sink path has
//! an arc of finite residual capacity (a finite edge's forward arc or any
//! reverse arc), so each augmentation is finite. The arc that attains the
//! bottleneck is set to exactly zero (`x - x == 0`), the others stay `>= 0`
//! (`x >= b` implies `fl(x - b) >= 0`), so the residual graph never holds a
//! negative capacity and the final cut is read off exact zeros.

// Flow notation: `s`/`t` terminals, `u`/`v`/`w` nodes, `a`/`b` arcs, `e` edges.
#![allow(clippy::many_single_char_names)]

use super::network::FlowNetwork;
use crate::error::{Error, Result};

/// The outcome of a maximum-flow computation.
#[derive(Clone, Debug)]
pub struct MaxFlow {
    /// The total flow from source to sink.
    pub value: f64,
    /// Residual capacity of every arc of the network (see [`FlowNetwork`]).
    pub residual: Vec<f64>,
}

const UNSET: u32 = u32::MAX;

/// Returns the error for an unbounded flow, naming the infinite path.
pub(crate) fn unbounded(path: &[u32]) -> Error {
    let shown: Vec<String> = path.iter().take(16).map(u32::to_string).collect();
    let more = if path.len() > 16 { " -> ..." } else { "" };
    Error::Flow(format!(
        "the maximum flow is unbounded: an infinite-capacity path runs from source to sink ({}{more})",
        shown.join(" -> ")
    ))
}

/// How each phase labels the level graph. Both give the same flow value and
/// the same residual reachability; they differ in speed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Levels {
    /// Breadth-first from the source. Fastest on the partitioner's networks
    /// (the source fans out to every banned node; one array lookup per arc).
    FromSource,
    /// Breadth-first backwards from the sink, so the blocking-flow search
    /// only enters nodes that reach the sink. Fastest on random sparse
    /// networks, where most nodes a forward search visits are dead ends.
    FromSink,
}

/// Computes a maximum flow with Dinic's algorithm (see the module docs),
/// labelling [`Levels::FromSink`].
pub fn dinic(net: &FlowNetwork) -> Result<MaxFlow> {
    dinic_with(net, Levels::FromSink)
}

/// [`dinic`] with a choice of [`Levels`].
pub fn dinic_with(net: &FlowNetwork, levels: Levels) -> Result<MaxFlow> {
    if let Some(path) = net.infinite_path() {
        return Err(unbounded(&path));
    }
    Ok(dinic_bounded(net, levels))
}

/// [`dinic_with`] for a caller that has already ruled out an all-infinite
/// path with [`FlowNetwork::infinite_path`].
pub(crate) fn dinic_bounded(net: &FlowNetwork, levels: Levels) -> MaxFlow {
    let mut state = State {
        net,
        res: net.arc_capacity().to_vec(),
        level: vec![UNSET; net.num_nodes()],
        cur: vec![0; net.num_nodes()],
        queue: Vec::with_capacity(net.num_nodes()),
        path: Vec::new(),
    };
    let mut value = 0.0;
    while state.build_levels(levels) {
        value += state.blocking_flow();
    }
    MaxFlow {
        value,
        residual: state.res,
    }
}

struct State<'a> {
    net: &'a FlowNetwork,
    res: Vec<f64>,
    /// Level of each node in the current phase: the source is 0, the sink
    /// the length `D` of a shortest augmenting path, and every arc of the
    /// level graph goes up by one. `UNSET`: outside the level graph.
    level: Vec<u32>,
    cur: Vec<u32>,
    queue: Vec<u32>,
    path: Vec<u32>,
}

impl State<'_> {
    /// Labels the level graph of the current residual network (see
    /// [`Levels`]), nodes no closer than the far terminal left unexpanded.
    /// Returns whether the source still reaches the sink.
    fn build_levels(&mut self, levels: Levels) -> bool {
        let (s, t) = (self.net.source(), self.net.sink());
        let (head, rev) = (self.net.head(), self.net.rev());
        let (start, goal) = match levels {
            Levels::FromSource => (s, t),
            Levels::FromSink => (t, s),
        };
        self.level.fill(UNSET);
        self.queue.clear();
        self.level[start as usize] = 0;
        self.queue.push(start);
        let mut qi = 0;
        while qi < self.queue.len() {
            let v = self.queue[qi];
            qi += 1;
            let lv = self.level[v as usize];
            if self.level[goal as usize] <= lv {
                break;
            }
            for a in self.net.arcs(v) {
                let w = head[a];
                if self.level[w as usize] != UNSET {
                    continue;
                }
                // From the sink, `a` is v -> w and a path would use its pair w -> v.
                let r = match levels {
                    Levels::FromSource => self.res[a],
                    Levels::FromSink => self.res[rev[a] as usize],
                };
                if r > 0.0 {
                    self.level[w as usize] = lv + 1;
                    self.queue.push(w);
                }
            }
        }
        let d = self.level[goal as usize];
        if d == UNSET {
            return false;
        }
        for &v in &self.queue {
            let l = &mut self.level[v as usize];
            if levels == Levels::FromSink {
                // Distance to the sink becomes distance from the source.
                *l = d.saturating_sub(*l);
            }
            self.cur[v as usize] = self.net.arcs(v).start as u32;
        }
        true
    }

    /// Saturates every shortest augmenting path of the current level graph.
    fn blocking_flow(&mut self) -> f64 {
        let (s, t) = (self.net.source(), self.net.sink());
        let head = self.net.head();
        let rev = self.net.rev();
        let mut total = 0.0;
        self.path.clear();
        let mut v = s;
        loop {
            if v == t {
                // Bottleneck: the first arc of least residual capacity.
                let mut k = 0;
                let mut b = f64::INFINITY;
                for (i, &a) in self.path.iter().enumerate() {
                    if self.res[a as usize] < b {
                        b = self.res[a as usize];
                        k = i;
                    }
                }
                for &a in &self.path {
                    self.res[a as usize] -= b;
                    self.res[rev[a as usize] as usize] += b;
                }
                total += b;
                // Resume from the tail of the saturated arc.
                self.path.truncate(k);
                v = self.path.last().map_or(s, |&a| head[a as usize]);
                continue;
            }
            let end = self.net.arcs(v).end as u32;
            // Dead ends are set to UNSET, which `next_level` never equals
            // (levels on the path are below the sink's).
            let next_level = self.level[v as usize] + 1;
            let mut c = self.cur[v as usize];
            while c < end {
                let w = head[c as usize];
                if self.res[c as usize] > 0.0 && self.level[w as usize] == next_level {
                    break;
                }
                c += 1;
            }
            self.cur[v as usize] = c;
            if c < end {
                self.path.push(c);
                v = head[c as usize];
            } else {
                // Dead end: drop `v` from the level graph and retreat.
                self.level[v as usize] = UNSET;
                match self.path.pop() {
                    None => return total,
                    Some(a) => {
                        v = head[rev[a as usize] as usize];
                        self.cur[v as usize] += 1;
                    }
                }
            }
        }
    }
}
