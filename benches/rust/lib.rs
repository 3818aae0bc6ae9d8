//! Shared helpers for the benchmark targets.
