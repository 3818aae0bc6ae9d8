//! The partitioners on arbitrary valid joint graphs: primals, forward calls,
//! tangents, backward calls that read a tangent-derived value, random flags,
//! checkpoint regions, outputs and options. Every table decodes; each
//! partitioner returns a typed error or a partition that passes `check`,
//! identically on a second run (see `aotgrad_fuzz::exercise`).
#![no_main]

use aotgrad_core::{flags, Columns, GraphStore};
use aotgrad_fuzz::{exercise, options, OPS};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

const PRIMAL: u8 = 0;
const TANGENT: u8 = 1;
const CALL: u8 = 2;
const GET_ATTR: u8 = 3;

/// Flag bits a CALL row may carry, each with probability 1/2^w.
const CALL_FLAGS: [(u32, u32); 9] = [
    (flags::RANDOM, 3),
    (flags::VIEW, 3),
    (flags::IMPURE, 4),
    (flags::COMPUTE_INTENSIVE, 3),
    (flags::SYMINT, 3),
    (flags::MUST_SAVE, 3),
    (flags::MUST_RECOMPUTE, 2),
    (flags::NON_TENSOR, 5),
    (flags::MULTI_OUTPUT, 5),
];

fn call(u: &mut Unstructured<'_>, c: &mut Columns, pool: &[u32], must: Option<u32>) -> Result<u32> {
    let op = u.int_in_range(2..=OPS.len() as u32 - 1)?;
    let mut args = Vec::new();
    if !pool.is_empty() {
        for _ in 0..u.int_in_range(0..=3)? {
            args.push(*u.choose(pool)?);
        }
    }
    args.extend(must);
    let bits: u64 = u.arbitrary()?;
    let mut f = 0;
    for (k, (b, w)) in CALL_FLAGS.iter().enumerate() {
        if bits >> (6 * k) & ((1 << w) - 1) == 0 {
            f |= b;
        }
    }
    let nbytes = u64::from(u.arbitrary::<u16>()?);
    let id = c.push_const(
        CALL,
        op,
        &args,
        nbytes,
        f,
        u64::from(u.arbitrary::<u8>()? % 3),
    );
    c.region[id as usize] = i32::from(u.arbitrary::<u8>()? % 4) - 1;
    Ok(id)
}

fn joint(u: &mut Unstructured<'_>) -> Result<Columns> {
    let mut c = Columns::new();
    for name in &OPS[2..] {
        c.intern(name);
    }
    let mut fw = Vec::new();
    for k in 0..u.int_in_range(1..=5u32)? {
        let f = if u.arbitrary()? {
            flags::MUTATED_INPUT
        } else {
            0
        } | (k % 3 / 2) * flags::SYMINT;
        fw.push(c.push(PRIMAL, 0, &[], 64, f));
    }
    if u.ratio(1, 4)? {
        fw.push(c.push(GET_ATTR, 1, &[], 64, 0));
    }
    for _ in 0..u.int_in_range(0..=120u32)? {
        let id = call(u, &mut c, &fw, None)?;
        fw.push(id);
    }
    let mut td = Vec::new();
    for _ in 0..u.int_in_range(1..=3u32)? {
        td.push(c.push(TANGENT, 0, &[], 64, 0));
    }
    for _ in 0..u.int_in_range(0..=120u32)? {
        let must = *u.choose(&td)?;
        let id = call(u, &mut c, &fw, Some(must))?;
        td.push(id);
    }
    let nf = u.int_in_range(1..=3usize)?;
    for _ in 0..nf {
        c.outputs.push(*u.choose(&fw)? as i32);
    }
    for _ in 0..u.int_in_range(0..=4u32)? {
        let all = c.len() as u32;
        let o = if u.ratio(1, 4)? {
            -1
        } else {
            u.int_in_range(0..=all - 1)? as i32
        };
        c.outputs.push(o);
    }
    c.num_fwd_outputs = nf as i64;
    Ok(c)
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(c) = joint(&mut u) else { return };
    let Ok(opts) = options(&mut u) else { return };
    let store = GraphStore::from_table(&c.view()).expect("generated joint tables are valid");
    exercise(&store, &opts);
});
