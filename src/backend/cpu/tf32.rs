//! TF32 rounding on the CPU, bit for bit what the GPU kernels do: the 3xTF32 math modes of SpAMM and
//! SMaT split FP32 operands with it.

/// TF32 of an FP32 value rounded to nearest with ties away from zero: 10 explicit mantissa bits, on
/// the bits (as the GPU kernels do; a carry into the exponent is the correct rounding, up to ∞). NaN
/// stays NaN, as `cvt.rna.tf32.f32` keeps it (on the bits, a NaN such as 0x7fffffff would carry into
/// the sign and become -0; the kernels' 3xTF32 split, which rounds on the bits, keeps such a NaN in
/// its small part, so its products are NaN either way).
pub fn tf32_round(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    f32::from_bits(x.to_bits().wrapping_add(0x1000) & 0xffff_e000)
}

/// TF32 of an FP32 value rounded toward zero (the 13 low bits dropped: what a tensor core reads of a
/// register).
pub fn tf32_truncate(x: f32) -> f32 {
    f32::from_bits(x.to_bits() & 0xffff_e000)
}

/// The 3xTF32 split of an FP32 value: big = TF32 rounded to nearest, small = x − big (exact in FP32)
/// truncated to TF32; big + small is x to within 2⁻²¹|x|.
pub fn tf32_split(x: f32) -> (f32, f32) {
    let big = tf32_round(x);
    (big, tf32_truncate(x - big))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_with_ties_away_and_keeps_nan_and_infinity() {
        let ulp = 2f32.powi(-10);
        assert_eq!(tf32_round(1.0 + ulp / 2.0), 1.0 + ulp, "a tie goes away from zero");
        assert_eq!(tf32_round(-(1.0 + ulp / 2.0)), -(1.0 + ulp));
        assert_eq!(tf32_round(1.0 + ulp / 2.0 - f32::EPSILON), 1.0);
        assert_eq!(tf32_round(f32::MAX), f32::INFINITY, "past TF32's largest, ∞");
        assert_eq!(tf32_round(f32::NEG_INFINITY), f32::NEG_INFINITY);
        // CUDA's NaN from an invalid operation, and its negative.
        for bits in [0x7fff_ffffu32, 0xffff_ffff, 0x7fc0_0000] {
            assert!(tf32_round(f32::from_bits(bits)).is_nan(), "{bits:#x}");
            let (big, small) = tf32_split(f32::from_bits(bits));
            assert!(big.is_nan() && small.is_nan(), "{bits:#x}");
        }
        let x = 1.0 + ulp / 4.0 + 2f32.powi(-20);
        let (big, small) = tf32_split(x);
        assert_eq!((big, big + small), (1.0, x), "big + small is x where small fits TF32");
    }
}
