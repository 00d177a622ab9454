//! Status codes and the library's error type.
//!
//! `Status` is the C API's `sgpuStatus_t`: its numbers are part of the ABI and never reused.

use std::fmt;

/// Result status of every C API call (`sgpuStatus_t`). `SUCCESS` is 0; numbers are never reused.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    Success = 0,
    /// A NULL, destroyed or foreign handle.
    InvalidHandle = 1,
    /// A required pointer is NULL or misaligned for its element type, or an output overlaps an input.
    InvalidPointer = 2,
    /// A negative or inconsistent size (an array of more bytes than can be addressed included), or a
    /// leading dimension smaller than the matrix.
    InvalidSize = 3,
    /// An unknown enum value, τ < 0 or NaN, or another out-of-range scalar.
    InvalidValue = 4,
    /// Malformed CSR / CSC / COO structure (pointers, indices, nnz).
    InvalidSparseMatrix = 5,
    /// A host or device allocation failed (the message gives the bytes); never an abort.
    AllocationFailed = 6,
    /// The operation does not support this combination (e.g. a value type).
    NotSupported = 7,
    /// The requested backend (e.g. CUDA) is not usable on this machine.
    BackendUnavailable = 8,
    /// A kernel or device operation failed while executing.
    ExecutionFailed = 9,
    /// A bug in the library (including a caught Rust panic).
    InternalError = 10,
}

impl Status {
    /// Every status, in numeric order.
    pub fn all() -> [Status; 11] {
        [
            Status::Success,
            Status::InvalidHandle,
            Status::InvalidPointer,
            Status::InvalidSize,
            Status::InvalidValue,
            Status::InvalidSparseMatrix,
            Status::AllocationFailed,
            Status::NotSupported,
            Status::BackendUnavailable,
            Status::ExecutionFailed,
            Status::InternalError,
        ]
    }

    /// The C enumerator's name, e.g. `SGPU_STATUS_INVALID_SIZE`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "SGPU_STATUS_SUCCESS",
            Status::InvalidHandle => "SGPU_STATUS_INVALID_HANDLE",
            Status::InvalidPointer => "SGPU_STATUS_INVALID_POINTER",
            Status::InvalidSize => "SGPU_STATUS_INVALID_SIZE",
            Status::InvalidValue => "SGPU_STATUS_INVALID_VALUE",
            Status::InvalidSparseMatrix => "SGPU_STATUS_INVALID_SPARSE_MATRIX",
            Status::AllocationFailed => "SGPU_STATUS_ALLOCATION_FAILED",
            Status::NotSupported => "SGPU_STATUS_NOT_SUPPORTED",
            Status::BackendUnavailable => "SGPU_STATUS_BACKEND_UNAVAILABLE",
            Status::ExecutionFailed => "SGPU_STATUS_EXECUTION_FAILED",
            Status::InternalError => "SGPU_STATUS_INTERNAL_ERROR",
        }
    }

    /// A one-line human description.
    pub fn description(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::InvalidHandle => "the handle is NULL, destroyed, or of another family",
            Status::InvalidPointer => "a required pointer is NULL or misaligned, or an output overlaps an input",
            Status::InvalidSize => "a size or leading dimension is negative or inconsistent",
            Status::InvalidValue => "an enum or scalar argument is out of range",
            Status::InvalidSparseMatrix => "the sparse matrix structure is malformed",
            Status::AllocationFailed => "memory allocation failed",
            Status::NotSupported => "the operation does not support these arguments",
            Status::BackendUnavailable => "the requested backend is not available",
            Status::ExecutionFailed => "execution on the backend failed",
            Status::InternalError => "internal library error",
        }
    }
}

/// An error: a status plus a message that names the offending argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub status: Status,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        debug_assert!(status != Status::Success);
        Error { status, message: message.into() }
    }
    pub fn invalid_handle(msg: impl Into<String>) -> Self {
        Self::new(Status::InvalidHandle, msg)
    }
    pub fn invalid_pointer(msg: impl Into<String>) -> Self {
        Self::new(Status::InvalidPointer, msg)
    }
    pub fn invalid_size(msg: impl Into<String>) -> Self {
        Self::new(Status::InvalidSize, msg)
    }
    pub fn invalid_value(msg: impl Into<String>) -> Self {
        Self::new(Status::InvalidValue, msg)
    }
    pub fn invalid_sparse(msg: impl Into<String>) -> Self {
        Self::new(Status::InvalidSparseMatrix, msg)
    }
    pub fn alloc_failed(msg: impl Into<String>) -> Self {
        Self::new(Status::AllocationFailed, msg)
    }
    pub fn not_supported(msg: impl Into<String>) -> Self {
        Self::new(Status::NotSupported, msg)
    }
    pub fn backend_unavailable(msg: impl Into<String>) -> Self {
        Self::new(Status::BackendUnavailable, msg)
    }
    pub fn execution_failed(msg: impl Into<String>) -> Self {
        Self::new(Status::ExecutionFailed, msg)
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(Status::InternalError, msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// A float as messages show it, `%g`-like but exact: the shortest digits that read back as the value,
/// in plain notation for magnitudes in [1e-4, 1e15) and in scientific notation outside them, so that
/// τ = −1e-300 reads "-1e-300", not a 300-digit decimal. Zero, infinities and NaN read "0", "inf",
/// "-inf", "NaN".
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Float(pub f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let x = self.0;
        if x == 0.0 || !x.is_finite() || (1e-4..1e15).contains(&x.abs()) {
            write!(f, "{x}")
        } else {
            write!(f, "{x:e}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Float;

    #[test]
    fn floats_read_back_exactly_and_briefly() {
        let cases = [
            (-1e-300, "-1e-300"),
            (0.5, "0.5"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (9.5e-5, "9.5e-5"),
            (123456.75, "123456.75"),
            (1e15, "1e15"),
            (f64::MAX, "1.7976931348623157e308"),
            (f64::MIN_POSITIVE / 4.0, "5.562684646268003e-309"),
            (0.0, "0"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "NaN"),
        ];
        for (x, text) in cases {
            assert_eq!(Float(x).to_string(), text);
            if x.is_finite() {
                assert_eq!(text.parse::<f64>().unwrap(), x, "{text} does not read back");
            }
        }
    }
}
