//! `GraphStore::from_table` on arbitrary column bytes: either a typed
//! `Error::Table`, or a store that verifies, round-trips and partitions
//! (see `aotgrad_fuzz::exercise`).
//!
//! The first byte picks column lengths: consistent with one `N` (so that
//! the value checks are reached) or each drawn on its own.
#![no_main]

use aotgrad_core::{Columns, Error, GraphStore};
use aotgrad_fuzz::{exercise, options, OPS};
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;

fn vec<T>(
    u: &mut Unstructured<'_>,
    len: usize,
    mut f: impl FnMut(&mut Unstructured<'_>, usize) -> Result<T>,
) -> Result<Vec<T>> {
    (0..len).map(|i| f(u, i)).collect()
}

fn columns(u: &mut Unstructured<'_>) -> Result<Columns> {
    let mode: u8 = u.arbitrary()?;
    let n = u.int_in_range(0..=40usize)?;
    let len = |u: &mut Unstructured<'_>, base: usize| -> Result<usize> {
        if mode & 1 == 0 {
            Ok(base)
        } else {
            u.int_in_range(0..=base + 2)
        }
    };
    let version = if mode & 2 == 0 { 2 } else { u.arbitrary()? };
    let names = if mode & 4 == 0 {
        OPS.iter().map(ToString::to_string).collect()
    } else {
        let k = u.int_in_range(0..=4)?;
        vec(u, k, |u, _| u.arbitrary::<String>())?
    };
    let k = names.len().max(1) as u32;
    let raw = mode & 8 != 0;
    let l = len(u, n)?;
    let kind = vec(u, l, |u, _| {
        let b: u8 = u.arbitrary()?;
        Ok(if raw { b } else { b % 4 })
    })?;
    let l = len(u, n)?;
    let op = vec(u, l, |u, i| {
        let b: u32 = u.arbitrary()?;
        Ok(match (raw, kind.get(i)) {
            (true, _) => b,
            (false, Some(0 | 1)) => 0,
            (false, Some(3)) => 1,
            _ => 2 + b % k.saturating_sub(2).max(1),
        })
    })?;
    // Arguments: each row gets a few, mostly earlier ids.
    let mut arg_ptr = vec![0u32];
    let mut arg_idx = Vec::new();
    let l = len(u, n)?;
    for i in 0..l {
        if kind.get(i) == Some(&2) || raw {
            for _ in 0..u.int_in_range(0..=3)? {
                let a: u32 = u.arbitrary()?;
                arg_idx.push(if raw || i == 0 { a } else { a % i as u32 });
            }
        }
        arg_ptr.push(arg_idx.len() as u32);
    }
    if raw && u.arbitrary::<bool>()? {
        for p in &mut arg_ptr {
            *p ^= u32::from(u.arbitrary::<u8>()?);
        }
    }
    let l = len(u, n)?;
    let nbytes = vec(u, l, |u, _| u.arbitrary())?;
    let l = len(u, n)?;
    let const_hash = vec(u, l, |u, _| Ok(u64::from(u.arbitrary::<u8>()? % 4)))?;
    let l = len(u, n)?;
    let flags = vec(u, l, |u, _| {
        let f: u32 = u.arbitrary()?;
        Ok(if raw {
            f
        } else {
            f & aotgrad_core::flags::KNOWN_INPUT & !aotgrad_core::flags::TANGENT_DERIVED
        })
    })?;
    let l = len(u, n)?;
    let region = vec(u, l, |u, _| Ok(i32::from(u.arbitrary::<i8>()?) % 4))?;
    let m = u.int_in_range(0..=6usize)?;
    let outputs = vec(u, m, |u, _| {
        let o: i32 = u.arbitrary()?;
        Ok(if raw {
            o
        } else {
            o.rem_euclid(n as i32 + 1) - 1
        })
    })?;
    let num_fwd_outputs = if raw {
        u.arbitrary()?
    } else {
        u.int_in_range(0..=m as i64)?
    };
    Ok(Columns {
        version,
        kind,
        op,
        arg_ptr,
        arg_idx,
        nbytes,
        const_hash,
        flags,
        region,
        outputs,
        num_fwd_outputs,
        op_names: names,
    })
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(c) = columns(&mut u) else { return };
    let Ok(opts) = options(&mut u) else { return };
    match GraphStore::from_table(&c.view()) {
        Ok(store) => exercise(&store, &opts),
        Err(Error::Table { .. }) => {}
        Err(e) => panic!("from_table returned a non-table error: {e}"),
    }
});
