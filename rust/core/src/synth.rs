//! Synthetic joint graphs shaped like a transformer's, at any size, for tests
//! and benchmarks.
//!
//! [`transformer_like`] stacks blocks (layer norm, attention with an optional
//! dropout, an MLP, two skip connections) over a residual stream, then
//! mirrors them in a backward that starts from a tangent, reads forward
//! activations and weights, and returns one gradient per primal. Op names
//! come from a small aten vocabulary (`str(OpOverload)` form), so the rule
//! tables apply as on a real graph. Some blocks are checkpointed (selective
//! activation checkpointing: matmuls `MUST_SAVE`, the rest `MUST_RECOMPUTE`,
//! one region per block), some read a `SymInt` size in the backward.
//!
//! Arguments: a target node count (the result has about that many nodes,
//! rounded to whole blocks of ~100) and a seed.
//! Returns: a validated [`GraphStore`] (built through the node table).
//! Complexity: `O(num_nodes_target)`.

// Names follow the model's math (`h`, `q`, `k`, `w`, ...).
#![allow(clippy::many_single_char_names)]

use std::collections::HashMap;

use crate::store::{flags, GraphStore};
use crate::table::Columns;

/// `SplitMix64` (Steele, Lea, Flood 2014): a tiny deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `1 / k`.
    fn one_in(&mut self, k: u64) -> bool {
        self.next() % k == 0
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// At most this many blocks (10^9 nodes), so node ids fit the table's `i32` columns.
const MAX_BLOCKS: usize = 10_000_000;

/// A node id or block index as the table's `i32` (in range by [`MAX_BLOCKS`]).
fn node_i32<T: TryInto<i32>>(v: T) -> i32 {
    v.try_into().unwrap_or(i32::MAX)
}

/// Node-table builder with interned op names and the current checkpoint tag.
struct Builder {
    c: Columns,
    ops: HashMap<&'static str, u32>,
    /// Checkpoint region of the nodes being added (`-1`: none).
    region: i32,
}

const MATMULS: [&str; 3] = ["aten.mm.default", "aten.bmm.default", "aten.addmm.default"];

impl Builder {
    fn op(&mut self, name: &'static str) -> u32 {
        if let Some(&id) = self.ops.get(name) {
            return id;
        }
        let id = self.c.intern(name);
        self.ops.insert(name, id);
        id
    }

    fn placeholder(&mut self, kind: u8, nbytes: u64) -> u32 {
        let op = self.op(crate::table::PLACEHOLDER_OP);
        self.c.push(kind, op, &[], nbytes, 0)
    }

    fn call(&mut self, name: &'static str, args: &[u32], nbytes: u64, extra: u32) -> u32 {
        let op = self.op(name);
        let mut f = extra;
        if self.region >= 0 {
            f |= if MATMULS.contains(&name) {
                flags::MUST_SAVE
            } else {
                flags::MUST_RECOMPUTE
            };
        }
        let id = self.c.push(2, op, args, nbytes, f);
        self.c.region[id as usize] = self.region;
        id
    }

    fn view(&mut self, name: &'static str, args: &[u32], nbytes: u64) -> u32 {
        self.call(name, args, nbytes, flags::VIEW)
    }
}

/// Sizes (bytes) of one graph's tensors.
#[derive(Clone, Copy)]
struct Dims {
    act: u64,
    small: u64,
    att: u64,
    mlp: u64,
    weight: u64,
    w_mlp: u64,
    vec: u64,
}

/// Primals of one block.
#[derive(Clone, Copy)]
struct Weights {
    g1: u32,
    wq: u32,
    wk: u32,
    wv: u32,
    wo: u32,
    g2: u32,
    w1: u32,
    b1: u32,
    w2: u32,
}

/// Forward values of one layer norm that its backward reads.
#[derive(Clone, Copy)]
struct Norm {
    c: u32,
    r: u32,
    n: u32,
    out: u32,
}

/// Forward values of one block that its backward reads.
struct Saved {
    ln1: Norm,
    x1: u32,
    k: u32,
    qh: u32,
    vv: u32,
    sm: u32,
    p: u32,
    mask: Option<u32>,
    ov: u32,
    ln2: Norm,
    u: u32,
    g: u32,
    sym: Option<u32>,
}

/// Builds a transformer-shaped joint graph of about `num_nodes_target` nodes.
pub fn transformer_like(num_nodes_target: usize, seed: u64) -> GraphStore {
    let mut rng = Rng(seed);
    let tokens = rng.pick(&[512u64, 1024, 2048, 4096]);
    let d = rng.pick(&[256u64, 512, 768, 1024]);
    let heads = d / 64;
    let seq = rng.pick(&[128u64, 256, 512]).min(tokens);
    let dims = Dims {
        act: tokens * d * 2,
        small: tokens * 4,
        att: (tokens / seq) * heads * seq * seq * 2,
        mlp: tokens * d * 8,
        weight: d * d * 2,
        w_mlp: d * d * 8,
        vec: d * 2,
    };
    let blocks = num_nodes_target.div_ceil(100).clamp(1, MAX_BLOCKS);
    let mut b = Builder {
        c: Columns::new(),
        ops: HashMap::new(),
        region: -1,
    };
    let x = b.placeholder(0, dims.act);
    let weights: Vec<Weights> = (0..blocks)
        .map(|_| Weights {
            g1: b.placeholder(0, dims.vec),
            wq: b.placeholder(0, dims.weight),
            wk: b.placeholder(0, dims.weight),
            wv: b.placeholder(0, dims.weight),
            wo: b.placeholder(0, dims.weight),
            g2: b.placeholder(0, dims.vec),
            w1: b.placeholder(0, dims.w_mlp),
            b1: b.placeholder(0, dims.vec * 4),
            w2: b.placeholder(0, dims.w_mlp),
        })
        .collect();
    let tangent = b.placeholder(1, dims.act);

    let mut h = x;
    let mut saved = Vec::with_capacity(blocks);
    for (i, w) in weights.iter().enumerate() {
        b.region = if rng.one_in(4) { node_i32(i) } else { -1 };
        let (hn, s) = forward_block(&mut b, &mut rng, dims, w, h);
        h = hn;
        saved.push(s);
    }
    b.region = -1;
    let mut grads: Vec<Option<u32>> = vec![None; 1 + 9 * blocks];
    let mut dh = tangent;
    for (i, (w, s)) in weights.iter().zip(&saved).enumerate().rev() {
        let (dprev, g) = backward_block(&mut b, dims, w, s, dh);
        dh = dprev;
        let at = 1 + 9 * i;
        grads[at..at + 9].copy_from_slice(&g.map(Some));
    }
    grads[0] = Some(dh);
    b.c.outputs = std::iter::once(node_i32(h))
        .chain(grads.iter().map(|g| g.map_or(-1, node_i32)))
        .collect();
    b.c.num_fwd_outputs = 1;
    GraphStore::from_table(&b.c.view()).expect("synth builds a valid table")
}

fn layer_norm(b: &mut Builder, dims: Dims, h: u32, gamma: u32) -> Norm {
    let m = b.call("aten.mean.dim", &[h], dims.small, 0);
    let c = b.call("aten.sub.Tensor", &[h, m], dims.act, 0);
    let sq = b.call("aten.mul.Tensor", &[c, c], dims.act, 0);
    let v = b.call("aten.mean.dim", &[sq], dims.small, 0);
    let r = b.call("aten.rsqrt.default", &[v], dims.small, 0);
    let n = b.call("aten.mul.Tensor", &[c, r], dims.act, 0);
    let out = b.call("aten.mul.Tensor", &[n, gamma], dims.act, 0);
    Norm { c, r, n, out }
}

fn forward_block(b: &mut Builder, rng: &mut Rng, dims: Dims, w: &Weights, h: u32) -> (u32, Saved) {
    let sym = rng
        .one_in(2)
        .then(|| b.call("aten.sym_size.int", &[h], 8, flags::SYMINT));
    let ln1 = layer_norm(b, dims, h, w.g1);
    let x1 = b.view("aten.view.default", &[ln1.out], dims.act);
    let q = b.call("aten.mm.default", &[x1, w.wq], dims.act, 0);
    let k = b.call("aten.mm.default", &[x1, w.wk], dims.act, 0);
    let vv = b.call("aten.mm.default", &[x1, w.wv], dims.act, 0);
    let qh = b.view("aten.view.default", &[q], dims.act);
    let kt = b.view("aten.permute.default", &[k], dims.act);
    let s = b.call("aten.bmm.default", &[qh, kt], dims.att, 0);
    let sm = b.call("aten._softmax.default", &[s], dims.att, 0);
    let (p, mask) = if rng.one_in(2) {
        let dr = b.call(
            "aten.native_dropout.default",
            &[sm],
            dims.att + dims.att / 2,
            flags::RANDOM | flags::MULTI_OUTPUT,
        );
        let p = b.call("_operator.getitem", &[dr], dims.att, 0);
        let mask = b.call("_operator.getitem", &[dr], dims.att / 2, 0);
        (p, Some(mask))
    } else {
        (sm, None)
    };
    let o = b.call("aten.bmm.default", &[p, vv], dims.act, 0);
    let ov = b.view("aten.view.default", &[o], dims.act);
    let proj = b.call("aten.mm.default", &[ov, w.wo], dims.act, 0);
    let h2 = b.call("aten.add.Tensor", &[h, proj], dims.act, 0);
    let ln2 = layer_norm(b, dims, h2, w.g2);
    let u = b.call("aten.addmm.default", &[w.b1, ln2.out, w.w1], dims.mlp, 0);
    let g = b.call("aten.gelu.default", &[u], dims.mlp, 0);
    let dn = b.call("aten.mm.default", &[g, w.w2], dims.act, 0);
    let h3 = b.call("aten.add.Tensor", &[h2, dn], dims.act, 0);
    let saved = Saved {
        ln1,
        x1,
        k,
        qh,
        vv,
        sm,
        p,
        mask,
        ov,
        ln2,
        u,
        g,
        sym,
    };
    (h3, saved)
}

/// The backward of a layer norm; returns (d input, d gamma).
fn layer_norm_backward(b: &mut Builder, dims: Dims, ln: &Norm, gamma: u32, dy: u32) -> (u32, u32) {
    let t = b.call("aten.mul.Tensor", &[dy, ln.n], dims.act, 0);
    let dgamma = b.call("aten.sum.dim_IntList", &[t], dims.vec, 0);
    let dn = b.call("aten.mul.Tensor", &[dy, gamma], dims.act, 0);
    let t1 = b.call("aten.mul.Tensor", &[dn, ln.r], dims.act, 0);
    let t2 = b.call("aten.mul.Tensor", &[dn, ln.c], dims.act, 0);
    let t3 = b.call("aten.sum.dim_IntList", &[t2], dims.small, 0);
    let t4 = b.call("aten.mul.Tensor", &[t3, ln.r], dims.small, 0);
    let t5 = b.call("aten.mul.Tensor", &[ln.c, t4], dims.act, 0);
    let dc = b.call("aten.sub.Tensor", &[t1, t5], dims.act, 0);
    let dm = b.call("aten.mean.dim", &[dc], dims.small, 0);
    let dx = b.call("aten.sub.Tensor", &[dc, dm], dims.act, 0);
    (dx, dgamma)
}

/// The backward of one block; returns (d h, gradients of the block's nine primals).
fn backward_block(b: &mut Builder, dims: Dims, w: &Weights, s: &Saved, dh: u32) -> (u32, [u32; 9]) {
    let mlp = backward_mlp(b, dims, w, s, dh);
    let (dprev, dg1, dqkv, dwo) = backward_attention(b, dims, w, s, mlp.dh);
    let [dwq, dwk, dwv] = dqkv;
    (
        dprev,
        [dg1, dwq, dwk, dwv, dwo, mlp.dg2, mlp.dw1, mlp.db1, mlp.dw2],
    )
}

/// What the MLP half of a block's backward computes.
struct MlpGrads {
    /// d of the attention half's output (the residual plus the MLP's path).
    dh: u32,
    dg2: u32,
    dw1: u32,
    db1: u32,
    dw2: u32,
}

/// The backward of a block's MLP half (and its layer norm).
fn backward_mlp(b: &mut Builder, dims: Dims, w: &Weights, s: &Saved, dh: u32) -> MlpGrads {
    let gt = b.view("aten.t.default", &[s.g], dims.mlp);
    let dw2 = b.call("aten.mm.default", &[gt, dh], dims.w_mlp, 0);
    let w2t = b.view("aten.t.default", &[w.w2], dims.w_mlp);
    let dg = b.call("aten.mm.default", &[dh, w2t], dims.mlp, 0);
    let du = b.call("aten.gelu_backward.default", &[dg, s.u], dims.mlp, 0);
    let x2t = b.view("aten.t.default", &[s.ln2.out], dims.act);
    let dw1 = b.call("aten.mm.default", &[x2t, du], dims.w_mlp, 0);
    let db1 = b.call("aten.sum.dim_IntList", &[du], dims.vec * 4, 0);
    let w1t = b.view("aten.t.default", &[w.w1], dims.w_mlp);
    let dx2 = b.call("aten.mm.default", &[du, w1t], dims.act, 0);
    let (dln2, dg2) = layer_norm_backward(b, dims, &s.ln2, w.g2, dx2);
    let dh2 = b.call("aten.add.Tensor", &[dh, dln2], dims.act, 0);
    MlpGrads {
        dh: dh2,
        dg2,
        dw1,
        db1,
        dw2,
    }
}

/// The backward of a block's attention half (and its layer norm); returns (d of the
/// block's input, d gamma 1, d of the q/k/v weights, d of the output weight).
fn backward_attention(
    b: &mut Builder,
    dims: Dims,
    w: &Weights,
    s: &Saved,
    dh2: u32,
) -> (u32, u32, [u32; 3], u32) {
    let ovt = b.view("aten.t.default", &[s.ov], dims.act);
    let dwo = b.call("aten.mm.default", &[ovt, dh2], dims.weight, 0);
    let wot = b.view("aten.t.default", &[w.wo], dims.weight);
    let dov = b.call("aten.mm.default", &[dh2, wot], dims.act, 0);
    let dout = b.view("aten.view.default", &[dov], dims.act);
    let vvt = b.view("aten.permute.default", &[s.vv], dims.act);
    let dp = b.call("aten.bmm.default", &[dout, vvt], dims.att, 0);
    let pt = b.view("aten.permute.default", &[s.p], dims.att);
    let dvv = b.call("aten.bmm.default", &[pt, dout], dims.act, 0);
    let dsm = match s.mask {
        Some(mask) => b.call(
            "aten.native_dropout_backward.default",
            &[dp, mask],
            dims.att,
            0,
        ),
        None => dp,
    };
    let ds = b.call(
        "aten._softmax_backward_data.default",
        &[dsm, s.sm],
        dims.att,
        0,
    );
    let dq = b.call("aten.bmm.default", &[ds, s.k], dims.act, 0);
    let dst = b.view("aten.permute.default", &[ds], dims.att);
    let dk = b.call("aten.bmm.default", &[dst, s.qh], dims.act, 0);
    let x1t = b.view("aten.t.default", &[s.x1], dims.act);
    let mut dqkv = [dwo; 3];
    let mut dx1 = None;
    for (j, (dy, wt)) in [(dq, w.wq), (dk, w.wk), (dvv, w.wv)]
        .into_iter()
        .enumerate()
    {
        dqkv[j] = b.call("aten.mm.default", &[x1t, dy], dims.weight, 0);
        let wtt = b.view("aten.t.default", &[wt], dims.weight);
        let part = b.call("aten.mm.default", &[dy, wtt], dims.act, 0);
        dx1 = Some(dx1.map_or(part, |acc| {
            b.call("aten.add.Tensor", &[acc, part], dims.act, 0)
        }));
    }
    let mut dx1 = dx1.unwrap_or(dh2);
    if let Some(sym) = s.sym {
        dx1 = b.view("aten.view.default", &[dx1, sym], dims.act);
    }
    let (dln1, dg1) = layer_norm_backward(b, dims, &s.ln1, w.g1, dx1);
    let dprev = b.call("aten.add.Tensor", &[dh2, dln1], dims.act, 0);
    (dprev, dg1, dqkv, dwo)
}
