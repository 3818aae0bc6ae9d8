//! Shared helpers for the benchmark targets: a summary that records each
//! benchmark's per-iteration times (fed from criterion's `iter_custom`, so
//! nothing is timed twice) and prints them as one table at the end.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Per-iteration times of each benchmark, in the order first recorded.
#[derive(Default)]
pub struct Summary {
    rows: RefCell<Vec<(String, Vec<f64>)>>,
}

impl Summary {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `f` `iters` times, records the mean time per run under `id`, and
    /// returns the total (the contract of criterion's `iter_custom`).
    pub fn time<R>(&self, id: &str, iters: u64, mut f: impl FnMut() -> R) -> Duration {
        let start = Instant::now();
        for _ in 0..iters {
            std::hint::black_box(f());
        }
        let total = start.elapsed();
        let per = total.as_secs_f64() / iters.max(1) as f64;
        let mut rows = self.rows.borrow_mut();
        match rows.iter_mut().find(|(name, _)| name == id) {
            Some((_, times)) => times.push(per),
            None => rows.push((id.to_string(), vec![per])),
        }
        total
    }

    /// Median seconds per run of `id`, if it ran.
    pub fn median(&self, id: &str) -> Option<f64> {
        let rows = self.rows.borrow();
        let (_, times) = rows.iter().find(|(name, _)| name == id)?;
        let mut t = times.clone();
        t.sort_by(f64::total_cmp);
        t.get(t.len() / 2).copied()
    }

    /// The table: benchmark, median and minimum time per run.
    pub fn table(&self) -> String {
        let rows = self.rows.borrow();
        let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(9).max(9);
        let mut out = format!("{:width$}  {:>12}  {:>12}\n", "benchmark", "median", "min");
        for (name, times) in rows.iter() {
            let min = times.iter().copied().fold(f64::INFINITY, f64::min);
            let med = self.median(name).unwrap_or(f64::NAN);
            let _ = writeln!(out, "{name:width$}  {:>12}  {:>12}", human(med), human(min));
        }
        out
    }
}

/// Seconds in a readable unit.
pub fn human(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else {
        format!("{:.3} us", s * 1e6)
    }
}
