//! A validated flow network in CSR form with paired residual arcs.
//!
//! Every input edge `u -> v` with capacity `c` becomes two arcs: a forward arc
//! at `u` (capacity `c`) and its reverse arc at `v` (capacity `0`), each
//! knowing the other through `rev`. `f64::INFINITY` is an uncuttable edge.
//!
//! Arguments (of [`FlowNetwork::from_edges`]): the node count, three parallel
//! edge columns (`src`, `dst`, `capacity`) and the two terminals.
//! Returns: the network, or [`Error::Flow`] naming the first offending edge.
//! Complexity: `O(V + E)` time and memory (a counting sort of the arcs by tail;
//! arcs of a node keep the input edge order, so everything downstream is
//! deterministic).

// Flow notation: `s`/`t` terminals, `u`/`v`/`w` nodes, `a`/`b` arcs, `e` edges.
#![allow(clippy::many_single_char_names)]

use crate::error::{Error, Result};

/// A directed network with `f64` capacities, ready for a max-flow solver.
#[derive(Clone, Debug)]
pub struct FlowNetwork {
    num_nodes: usize,
    source: u32,
    sink: u32,
    /// CSR offsets: the arcs leaving node `v` are `first[v]..first[v + 1]`.
    first: Vec<u32>,
    /// Head (target node) of each arc.
    head: Vec<u32>,
    /// The paired arc of each arc (forward <-> reverse).
    rev: Vec<u32>,
    /// Capacity of each arc: the edge's capacity on a forward arc, 0 on a reverse arc.
    cap: Vec<f64>,
    /// The forward arc of each input edge, in input order.
    edge_arc: Vec<u32>,
    /// Whether some edge has infinite capacity.
    has_infinite: bool,
}

fn flow_err(detail: String) -> Error {
    Error::Flow(detail)
}

/// Converts a caller's node id (any integer type) into a checked `u32`.
fn node_id<I: Copy + Into<i64>>(id: I, num_nodes: usize, what: &dyn Fn() -> String) -> Result<u32> {
    let v: i64 = id.into();
    if v < 0 || v as u64 >= num_nodes as u64 {
        return Err(flow_err(format!(
            "{} is {v}, not a node id in 0..{num_nodes}",
            what()
        )));
    }
    Ok(v as u32)
}

/// The edge columns read and validated once (the columns may be a caller's shared
/// buffers), with the arc count of every tail (forward + reverse) in `degree[v + 1]`.
struct Edges {
    tails: Vec<u32>,
    heads: Vec<u32>,
    caps: Vec<f64>,
    degree: Vec<u32>,
    has_infinite: bool,
}

/// The arcs in CSR order: edge `j`'s forward arc at its tail, its reverse at its head.
struct Arcs {
    first: Vec<u32>,
    head: Vec<u32>,
    rev: Vec<u32>,
    cap: Vec<f64>,
    edge_arc: Vec<u32>,
}

/// Rejects columns of different lengths and more nodes or edges than `u32` arc ids hold.
fn check_sizes(num_nodes: usize, e: usize, num_dst: usize, num_cap: usize) -> Result<()> {
    if num_dst != e || num_cap != e {
        return Err(flow_err(format!(
            "edge columns differ in length: src has {e}, dst has {num_dst}, capacity has {num_cap}"
        )));
    }
    if num_nodes >= u32::MAX as usize {
        return Err(flow_err(format!(
            "{num_nodes} nodes exceed the limit of {}",
            u32::MAX - 1
        )));
    }
    if e > (u32::MAX / 2) as usize {
        return Err(flow_err(format!(
            "{e} edges exceed the limit of {}",
            u32::MAX / 2
        )));
    }
    Ok(())
}

/// The checked terminals, which must be two different nodes.
fn terminals<I: Copy + Into<i64>>(source: I, sink: I, num_nodes: usize) -> Result<(u32, u32)> {
    let s = node_id(source, num_nodes, &|| "source".to_string())?;
    let t = node_id(sink, num_nodes, &|| "sink".to_string())?;
    if s == t {
        return Err(flow_err(format!("source and sink are the same node {s}")));
    }
    Ok((s, t))
}

/// Reads every edge once: node ids in range, capacities `>= 0` and not NaN, and a sum
/// of the finite capacities that `f64` represents.
fn read_edges<I: Copy + Into<i64>>(
    num_nodes: usize,
    src: &[I],
    dst: &[I],
    capacity: &[f64],
) -> Result<Edges> {
    let e = src.len();
    let mut edges = Edges {
        tails: Vec::with_capacity(e),
        heads: Vec::with_capacity(e),
        caps: Vec::with_capacity(e),
        degree: vec![0u32; num_nodes + 1],
        has_infinite: false,
    };
    let mut finite_sum = 0.0f64;
    for j in 0..e {
        let u = node_id(src[j], num_nodes, &|| format!("edge {j}: src"))?;
        let v = node_id(dst[j], num_nodes, &|| format!("edge {j}: dst"))?;
        let c = capacity[j];
        if c.is_nan() || c < 0.0 {
            return Err(flow_err(format!(
                "edge {j} ({u} -> {v}): capacity {c} is not a number >= 0"
            )));
        }
        if c.is_finite() {
            finite_sum += c;
        } else {
            edges.has_infinite = true;
        }
        edges.degree[u as usize + 1] += 1;
        edges.degree[v as usize + 1] += 1;
        edges.tails.push(u);
        edges.heads.push(v);
        edges.caps.push(c);
    }
    if !finite_sum.is_finite() {
        return Err(flow_err(
            "the sum of the finite capacities overflows f64".to_string(),
        ));
    }
    Ok(edges)
}

/// A counting sort of the arcs by tail: the arcs of a node keep the input edge order.
fn place_arcs(num_nodes: usize, edges: Edges) -> Arcs {
    let mut first = edges.degree;
    for v in 0..num_nodes {
        first[v + 1] += first[v];
    }
    let e = edges.tails.len();
    let arcs = 2 * e;
    let mut cursor: Vec<u32> = first[..num_nodes].to_vec();
    let mut head = vec![0u32; arcs];
    let mut rev = vec![0u32; arcs];
    let mut cap = vec![0.0f64; arcs];
    let mut edge_arc = Vec::with_capacity(e);
    let ends = edges.tails.iter().zip(&edges.heads);
    for ((&u, &v), &c) in ends.zip(&edges.caps) {
        let (u, v) = (u as usize, v as usize);
        let a = cursor[u];
        cursor[u] += 1;
        let b = cursor[v];
        cursor[v] += 1;
        head[a as usize] = v as u32;
        head[b as usize] = u as u32;
        rev[a as usize] = b;
        rev[b as usize] = a;
        cap[a as usize] = c;
        edge_arc.push(a);
    }
    Arcs {
        first,
        head,
        rev,
        cap,
        edge_arc,
    }
}

impl FlowNetwork {
    /// Builds and validates a network (see the module docs).
    ///
    /// Rejected: columns of different lengths; more than `u32::MAX / 2` edges
    /// or `u32::MAX - 1` nodes; a node id outside `0..num_nodes`; a capacity
    /// that is negative or NaN; `source == sink`; finite capacities whose sum
    /// overflows `f64` (the flow value could not be represented).
    pub fn from_edges<I: Copy + Into<i64>>(
        num_nodes: usize,
        src: &[I],
        dst: &[I],
        capacity: &[f64],
        source: I,
        sink: I,
    ) -> Result<Self> {
        check_sizes(num_nodes, src.len(), dst.len(), capacity.len())?;
        let (s, t) = terminals(source, sink, num_nodes)?;
        let edges = read_edges(num_nodes, src, dst, capacity)?;
        let has_infinite = edges.has_infinite;
        let arcs = place_arcs(num_nodes, edges);
        Ok(Self {
            num_nodes,
            source: s,
            sink: t,
            first: arcs.first,
            head: arcs.head,
            rev: arcs.rev,
            cap: arcs.cap,
            edge_arc: arcs.edge_arc,
            has_infinite,
        })
    }

    #[inline]
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of input edges (half the number of arcs).
    #[inline]
    pub fn num_edges(&self) -> usize {
        self.edge_arc.len()
    }

    #[inline]
    pub fn source(&self) -> u32 {
        self.source
    }

    #[inline]
    pub fn sink(&self) -> u32 {
        self.sink
    }

    /// The arc range of node `v`.
    #[inline]
    pub(crate) fn arcs(&self, v: u32) -> std::ops::Range<usize> {
        self.first[v as usize] as usize..self.first[v as usize + 1] as usize
    }

    #[inline]
    pub(crate) fn head(&self) -> &[u32] {
        &self.head
    }

    #[inline]
    pub(crate) fn rev(&self) -> &[u32] {
        &self.rev
    }

    /// Capacities per arc (0 on reverse arcs).
    #[inline]
    pub(crate) fn arc_capacity(&self) -> &[f64] {
        &self.cap
    }

    /// The input edges as `(src, dst, capacity)`, in input order.
    pub fn edges(&self) -> impl ExactSizeIterator<Item = (u32, u32, f64)> + '_ {
        self.edge_arc.iter().map(move |&a| {
            let a = a as usize;
            let b = self.rev[a] as usize;
            (self.head[b], self.head[a], self.cap[a])
        })
    }

    /// The sum of the capacities of the edges leaving `source_side` for the
    /// other side. `source_side` has one entry per node.
    pub fn cut_value(&self, source_side: &[bool]) -> f64 {
        self.edges()
            .filter(|&(u, v, _)| source_side[u as usize] && !source_side[v as usize])
            .map(|(_, _, c)| c)
            .sum()
    }

    /// A source-to-sink path made only of infinite-capacity edges, as a node
    /// list from source to sink, if one exists. When it does the maximum flow
    /// is unbounded. Breadth-first, so the path is a shortest one.
    ///
    /// Complexity: `O(V + E)`.
    pub fn infinite_path(&self) -> Option<Vec<u32>> {
        const UNSEEN: u32 = u32::MAX;
        if !self.has_infinite {
            return None;
        }
        let mut parent = vec![UNSEEN; self.num_nodes];
        parent[self.source as usize] = self.source;
        let mut queue = std::collections::VecDeque::from([self.source]);
        while let Some(v) = queue.pop_front() {
            for a in self.arcs(v) {
                let w = self.head[a];
                if self.cap[a] == f64::INFINITY && parent[w as usize] == UNSEEN {
                    parent[w as usize] = v;
                    if w == self.sink {
                        let mut path = vec![w];
                        let mut x = w;
                        while x != self.source {
                            x = parent[x as usize];
                            path.push(x);
                        }
                        path.reverse();
                        return Some(path);
                    }
                    queue.push_back(w);
                }
            }
        }
        None
    }
}
