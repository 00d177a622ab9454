//! The enums shared by every family. Each is `#[repr(C)]` and appears in the C header; C callers pass
//! them as `int`, so the C API converts with `TryFrom<c_int>` and rejects unknown values.
//! (The enums are written out, not macro-generated, because cbindgen does not expand macros.)

use crate::error::{Error, Result};
use std::os::raw::c_int;

/// Operation applied to a dense operand (`sgpuOperation`), as cuBLAS's `CUBLAS_OP_N` / `_T`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    N = 0,
    T = 1,
}

/// Element type of matrix values (`sgpuValueType`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// IEEE binary16, passed as 16-bit patterns (`uint16_t`, `__half`, `_Float16`).
    F16 = 0,
    /// bfloat16, passed as 16-bit patterns (`uint16_t`, `__nv_bfloat16`).
    Bf16 = 1,
    F32 = 2,
    F64 = 3,
}

/// Base of sparse indices (`sgpuIndexBase`): 0 for C, 1 for Fortran.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IndexBase {
    Zero = 0,
    One = 1,
}

/// Storage order of a dense operand of a sparse family (`sgpuLayout`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    RowMajor = 0,
    ColMajor = 1,
}

/// Sparse storage format (`sgpuSparseFormat`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SparseFormat {
    Csr = 0,
    Csc = 1,
    Coo = 2,
}

/// Where a handle executes (`sgpuBackend`). `AUTO` picks CUDA when a usable GPU, libcuda and libnvrtc
/// are present, the CPU otherwise.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendKind {
    Auto = 0,
    Cuda = 1,
    Cpu = 2,
}

/// `TryFrom<c_int>` and the list of variants for each C enum.
macro_rules! c_enum_conversions {
    ($($name:ident as $cname:literal { $($variant:ident),+ })+) => {$(
        impl $name {
            /// The C type name, used in error messages.
            pub const fn c_name() -> &'static str {
                $cname
            }
            /// Every variant, in numeric order.
            pub const fn variants() -> &'static [$name] {
                &[$($name::$variant),+]
            }
        }

        impl TryFrom<c_int> for $name {
            type Error = Error;
            fn try_from(v: c_int) -> Result<Self> {
                $(if v == $name::$variant as c_int {
                    return Ok($name::$variant);
                })+
                Err(Error::invalid_value(format!("{} is not a valid {}", v, $cname)))
            }
        }
    )+};
}

// The families' own enums use it too.
pub(crate) use c_enum_conversions;

c_enum_conversions! {
    Operation as "sgpuOperation_t" { N, T }
    ValueType as "sgpuValueType_t" { F16, Bf16, F32, F64 }
    IndexBase as "sgpuIndexBase_t" { Zero, One }
    Layout as "sgpuLayout_t" { RowMajor, ColMajor }
    SparseFormat as "sgpuSparseFormat_t" { Csr, Csc, Coo }
    BackendKind as "sgpuBackend_t" { Auto, Cuda, Cpu }
}

impl IndexBase {
    pub fn offset(self) -> i64 {
        self as i64
    }
}

impl Layout {
    /// (row stride, column stride) of a matrix stored in this layout with leading dimension `ld`.
    pub fn strides(self, ld: usize) -> (usize, usize) {
        match self {
            Layout::ColMajor => (1, ld),
            Layout::RowMajor => (ld, 1),
        }
    }
}

impl SparseFormat {
    /// The format's name, "CSR", "CSC" or "COO" (MSREP's partitions of it: "p" and the name).
    pub fn name(self) -> &'static str {
        match self {
            SparseFormat::Csr => "CSR",
            SparseFormat::Csc => "CSC",
            SparseFormat::Coo => "COO",
        }
    }
}

impl ValueType {
    /// The type's short name, "f32", "f64", "f16" or "bf16": how kernels of each type are named.
    pub fn short_name(self) -> &'static str {
        match self {
            ValueType::F32 => "f32",
            ValueType::F64 => "f64",
            ValueType::F16 => "f16",
            ValueType::Bf16 => "bf16",
        }
    }

    /// Size in bytes of one element.
    pub fn size(self) -> usize {
        match self {
            ValueType::F16 | ValueType::Bf16 => 2,
            ValueType::F32 => 4,
            ValueType::F64 => 8,
        }
    }
}
