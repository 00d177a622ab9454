//! Sums of squares that neither underflow nor overflow: the block norms' arithmetic.
//!
//! A block of f64 data holding only values near 1e-170 has squares below the smallest double, so an
//! unscaled sum of squares is 0, the block's norm is 0, its products are skipped at any τ > 0 and the
//! reported error bound misses them; values near 1e160 overflow to +∞ instead. The sums here are
//! Blue's three accumulators as LAPACK's `dnrm2` (since 3.10) keeps them: squares of values above
//! [`BIG`] are scaled down by [`SCALE_BIG`]², squares of values below [`SMALL`] scaled up by
//! [`SCALE_SMALL`]², the rest summed as they are; all scales are powers of two, so scaling is exact.
//!
//! Data of f32, f16 and bf16 lies entirely in the middle range (their squares in f64 can neither
//! underflow nor overflow), and so does nearly all f64 data: then only the middle sum is non-zero and
//! the norm is exactly the unscaled `sqrt(Σ x²)` in the same order. The CUDA get-norm kernel
//! (`norm_blocks` in kernels/spamm.cu) performs the same operations in the same order, so both
//! backends compute the same norms to the bit.

/// Values at or below this are summed scaled up (2⁻⁵¹¹: their squares could underflow).
pub const SMALL: f64 = f64::from_bits((1023 - 511) << 52);
/// Values above this are summed scaled down (2⁴⁸⁶: their squares, summed, could overflow).
pub const BIG: f64 = f64::from_bits((1023 + 486) << 52);
/// Factor applied to small values before squaring (2⁵³⁷).
pub const SCALE_SMALL: f64 = f64::from_bits((1023 + 537) << 52);
/// Factor applied to big values before squaring (2⁻⁵³⁸).
pub const SCALE_BIG: f64 = f64::from_bits((1023 - 538) << 52);

/// Σ x² of some values in three scaled parts. NaN among the values lands in `middle` and makes the
/// norm NaN; ±∞ lands in `big` and makes it +∞.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SquareSums {
    /// Σ (x·SCALE_SMALL)² over |x| < SMALL.
    pub small: f64,
    /// Σ x² over the rest (and NaN).
    pub middle: f64,
    /// Σ (x·SCALE_BIG)² over |x| > BIG.
    pub big: f64,
}

impl SquareSums {
    /// Adds x² to its part by one fused multiply-add.
    #[inline]
    pub fn add_square(&mut self, x: f64) {
        let magnitude = x.abs();
        if magnitude > BIG {
            let y = x * SCALE_BIG;
            self.big = y.mul_add(y, self.big);
        } else if magnitude < SMALL {
            let y = x * SCALE_SMALL;
            self.small = y.mul_add(y, self.small);
        } else {
            self.middle = x.mul_add(x, self.middle);
        }
    }

    /// Adds another sum part by part.
    #[inline]
    pub fn add(&mut self, other: &SquareSums) {
        self.small += other.small;
        self.middle += other.middle;
        self.big += other.big;
    }

    /// `sqrt(Σ x²)`, combining the parts as LAPACK's `dnrm2` does: where big values exist, small ones
    /// cannot matter; where only small and middle values exist, the two roots are combined as
    /// `ymax·sqrt(1 + (ymin/ymax)²)` squared and rooted.
    pub fn norm(&self) -> f64 {
        let (small, middle, big) = (self.small, self.middle, self.big);
        if big > 0.0 {
            let big = if middle > 0.0 || middle.is_nan() { big + (middle * SCALE_BIG) * SCALE_BIG } else { big };
            big.sqrt() / SCALE_BIG
        } else if small > 0.0 {
            if middle > 0.0 || middle.is_nan() {
                let (middle, small) = (middle.sqrt(), small.sqrt() / SCALE_SMALL);
                let (low, high) = if small > middle { (middle, small) } else { (small, middle) };
                let ratio = low / high;
                (high * high * (1.0 + ratio * ratio)).sqrt()
            } else {
                small.sqrt() / SCALE_SMALL
            }
        } else {
            middle.sqrt()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm_of(values: &[f64]) -> f64 {
        let mut sums = SquareSums::default();
        for &x in values {
            sums.add_square(x);
        }
        sums.norm()
    }

    #[test]
    fn constants_are_the_lapack_powers_of_two() {
        assert_eq!(SMALL, 2f64.powi(-511));
        assert_eq!(BIG, 2f64.powi(486));
        assert_eq!(SCALE_SMALL, 2f64.powi(537));
        assert_eq!(SCALE_BIG, 2f64.powi(-538));
    }

    #[test]
    fn middle_values_give_the_unscaled_norm_to_the_bit() {
        let values: [f64; 5] = [3.0, -4.0, 1e-100, 2.5e120, 0.0];
        let plain = values.iter().fold(0.0f64, |s, &x| x.mul_add(x, s)).sqrt();
        assert_eq!(norm_of(&values).to_bits(), plain.to_bits());
    }

    #[test]
    fn tiny_and_huge_values_keep_their_norm() {
        let tiny = norm_of(&[3e-170, 4e-170]);
        assert!((tiny / 5e-170 - 1.0).abs() < 1e-15, "{tiny:e}");
        let huge = norm_of(&[3e160, -4e160]);
        assert!((huge / 5e160 - 1.0).abs() < 1e-15, "{huge:e}");
        let mixed = norm_of(&[1e-170, 1.0]);
        assert_eq!(mixed, 1.0);
        let below_subnormal = norm_of(&[1e-320, 1e-320]);
        assert!((below_subnormal / (1e-320 * 2f64.sqrt()) - 1.0).abs() < 1e-3, "{below_subnormal:e}");
    }

    #[test]
    fn nan_and_infinity_are_not_lost() {
        assert!(norm_of(&[1.0, f64::NAN, 2.0]).is_nan());
        assert!(norm_of(&[1e-200, f64::NAN]).is_nan());
        assert!(norm_of(&[1e200, f64::NAN]).is_nan());
        assert_eq!(norm_of(&[1.0, f64::NEG_INFINITY]), f64::INFINITY);
        assert_eq!(norm_of(&[1e-200, f64::INFINITY]), f64::INFINITY);
    }
}
