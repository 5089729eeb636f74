//! The run's seeded random numbers (SplitMix64): poisson gaps and random URL picks, repeatable from
//! the recorded seed.

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and every seed (0 included) gives a
/// full-period, well-mixed stream. Used for poisson gaps and random URL picks, so a run is
/// repeatable from its recorded seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// Independent stream for thread `index` of a run seeded with `seed`.
    pub fn for_thread(seed: u64, index: usize, purpose: u64) -> Self {
        let mut r = Rng(seed ^ purpose.wrapping_mul(0xA076_1D64_78BD_642F));
        for _ in 0..=index {
            r.next_u64();
        }
        Rng(r.next_u64())
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1]: never 0, so `-ln(u)` is finite.
    pub fn next_open01(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (Lemire's multiply-shift; the bias for n << 2^64 is negligible).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_streams_differ() {
        let mut a = Rng::for_thread(7, 0, 1);
        let mut b = Rng::for_thread(7, 1, 1);
        let mut c = Rng::for_thread(7, 0, 2);
        let (x, y, z) = (a.next_u64(), b.next_u64(), c.next_u64());
        assert!(x != y && x != z && y != z);
        assert_eq!(Rng::for_thread(7, 0, 1).next_u64(), x);
        let mut r = Rng::new(3);
        let mut seen = [0u32; 5];
        for _ in 0..50_000 {
            seen[r.below(5)] += 1;
        }
        assert!(
            seen.iter().all(|&n| (9_000..11_000).contains(&n)),
            "{seen:?}"
        );
    }
}
