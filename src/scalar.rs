//! Element types and the arithmetic they compute in.
//!
//! Half-precision inputs compute in f32 (as tensor cores accumulate), f32 in f32, f64 in f64.

use crate::types::ValueType;
use half::{bf16, f16};
use std::fmt::Debug;
use std::ops::{Add, AddAssign, Mul, Sub};

/// A matrix element type the library accepts.
pub trait Element: Copy + Send + Sync + Default + Debug + PartialEq + 'static {
    const VALUE_TYPE: ValueType;
    /// The type arithmetic and accumulation run in.
    type Compute: ComputeScalar;
    fn to_compute(self) -> Self::Compute;
    fn from_compute(v: Self::Compute) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

/// f32 or f64: the types matrix products run in, with a BLAS-like dense kernel.
pub trait ComputeScalar:
    Element<Compute = Self>
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + PartialOrd
    + crate::alloc::ZeroBits
{
    const ZERO: Self;
    const ONE: Self;
    fn mul_add(self, a: Self, b: Self) -> Self;

    /// `C ← α·A·B + β·C` on strided operands (matrixmultiply's convention: row stride, column stride).
    /// With β = 0, C is overwritten without being read (NaN in C does not propagate).
    ///
    /// # Safety
    /// The pointers and strides must describe valid m×k, k×n and m×n matrices; C must not alias A or B.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        alpha: Self,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

macro_rules! compute_scalar {
    ($t:ty, $vt:expr, $gemm:path) => {
        impl Element for $t {
            const VALUE_TYPE: ValueType = $vt;
            type Compute = $t;
            #[inline]
            fn to_compute(self) -> $t {
                self
            }
            #[inline]
            fn from_compute(v: $t) -> $t {
                v
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn from_f64(v: f64) -> $t {
                v as $t
            }
        }
        impl ComputeScalar for $t {
            const ZERO: $t = 0.0;
            const ONE: $t = 1.0;
            #[inline]
            fn mul_add(self, a: $t, b: $t) -> $t {
                <$t>::mul_add(self, a, b)
            }
            unsafe fn gemm(
                m: usize,
                k: usize,
                n: usize,
                alpha: $t,
                a: *const $t,
                rsa: isize,
                csa: isize,
                b: *const $t,
                rsb: isize,
                csb: isize,
                beta: $t,
                c: *mut $t,
                rsc: isize,
                csc: isize,
            ) {
                // matrixmultiply reads C when β ≠ 0 only, so NaN in C is ignored at β = 0 as in BLAS.
                unsafe { $gemm(m, k, n, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}

compute_scalar!(f32, ValueType::F32, matrixmultiply::sgemm);
compute_scalar!(f64, ValueType::F64, matrixmultiply::dgemm);

macro_rules! half_element {
    ($t:ty, $vt:expr) => {
        impl Element for $t {
            const VALUE_TYPE: ValueType = $vt;
            type Compute = f32;
            #[inline]
            fn to_compute(self) -> f32 {
                self.to_f32()
            }
            #[inline]
            fn from_compute(v: f32) -> $t {
                <$t>::from_f32(v)
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self.to_f64()
            }
            #[inline]
            fn from_f64(v: f64) -> $t {
                <$t>::from_f64(v)
            }
        }
    };
}

half_element!(f16, ValueType::F16);
half_element!(bf16, ValueType::Bf16);
