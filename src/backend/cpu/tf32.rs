//! TF32 rounding on the CPU, bit for bit what the GPU kernels do: the 3xTF32 math modes of SpAMM and
//! SMaT split FP32 operands with it.

/// TF32 of an FP32 value rounded to nearest with ties away from zero: 10 explicit mantissa bits, on
/// the bits (as the GPU kernel does; a carry into the exponent is the correct rounding, up to ∞).
pub fn tf32_round(x: f32) -> f32 {
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
