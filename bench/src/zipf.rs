//! YCSB's request distributions, ported from `site.ycsb.generator` (ZipfianGenerator,
//! ScrambledZipfianGenerator, Utils.fnvhash64).

/// A small fast PRNG (splitmix64): the bench needs speed, not determinism.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// YCSB `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes, then Java's `Math.abs`.
pub fn fnvhash64(mut val: u64) -> u64 {
    const OFFSET: u64 = 0xCBF2_9CE4_8422_2325;
    const PRIME: u64 = 1_099_511_628_211;
    let mut hash = OFFSET;
    for _ in 0..8 {
        let octet = val & 0xff;
        val >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(PRIME);
    }
    (hash as i64).wrapping_abs() as u64
}

pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// YCSB `ZipfianGenerator` over [base, base + items) (Gray et al., "Quickly generating billion-record
/// synthetic databases").
#[derive(Clone, Debug)]
pub struct Zipfian {
    base: u64,
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    pub fn with_zetan(base: u64, items: u64, theta: f64, zetan: f64) -> Self {
        let zeta2theta = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian { base, items, theta, zeta2theta, alpha, zetan, eta }
    }
    #[cfg(test)]
    pub fn new(base: u64, items: u64, theta: f64) -> Self {
        Self::with_zetan(base, items, theta, zeta(items, theta))
    }
    pub fn next(&self, rng: &mut Rng) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let _ = self.zeta2theta;
        self.base + (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
    }
}

/// YCSB `ScrambledZipfianGenerator(min, max)`: a zipfian over a huge item space, hashed onto
/// [min, max] so the popular items are scattered over the key space.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: u64,
    count: u64,
    zipf: Zipfian,
}

impl ScrambledZipfian {
    /// YCSB's constants: ITEM_COUNT = 10^10 with its precomputed zeta for theta = 0.99.
    const ITEM_COUNT: u64 = 10_000_000_000;
    const ZETAN: f64 = 26.469_028_201_783_02;

    pub fn new(min: u64, max: u64) -> Self {
        let zipf = Zipfian::with_zetan(0, Self::ITEM_COUNT, ZIPFIAN_CONSTANT, Self::ZETAN);
        ScrambledZipfian { min, count: max - min + 1, zipf }
    }
    pub fn next(&self, rng: &mut Rng) -> u64 {
        self.min + fnvhash64(self.zipf.next(rng)) % self.count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_ycsb() {
        // Utils.fnvhash64(0) in YCSB (Java): FNV-1a of eight zero bytes, abs'd.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(fnvhash64(0), (h as i64).wrapping_abs() as u64);
    }

    #[test]
    fn scrambled_zipfian_is_skewed_and_in_range() {
        let z = ScrambledZipfian::new(0, 99_999);
        let mut rng = Rng::new(7);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..200_000 {
            let k = z.next(&mut rng);
            assert!(k < 100_000);
            *counts.entry(k).or_insert(0u32) += 1;
        }
        let mut c: Vec<u32> = counts.values().copied().collect();
        c.sort_unstable_by(|a, b| b.cmp(a));
        // The hottest key takes several percent of requests; a uniform choice would give 2.
        assert!(c[0] > 2_000, "hottest {}", c[0]);
        // The zipfian's zetan for small n agrees with the direct sum.
        let small = Zipfian::new(0, 10, 0.99);
        assert!((small.zetan - zeta(10, 0.99)).abs() < 1e-12);
    }
}
