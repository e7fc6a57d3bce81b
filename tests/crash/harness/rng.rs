//! The harness's seeded randomness (rand's `StdRng`): a run is described by its seed.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// A seeded generator with the few draws the harness makes.
#[derive(Debug)]
pub(crate) struct Rng(StdRng);

impl Rng {
    /// A generator from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(StdRng::seed_from_u64(seed))
    }

    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0.random()
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.0.random_range(0..n) }
    }

    /// A number in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0.random_range(lo..=hi.max(lo))
    }

    /// `true` with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
