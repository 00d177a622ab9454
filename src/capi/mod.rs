//! The C ABI: the only `extern "C"` code in the crate.
//!
//! Every exported function runs its body inside [`boundary`], which turns `Err` into a status plus a
//! thread-local message and turns a panic into `SGPU_STATUS_INTERNAL_ERROR`, so nothing unwinds into C.
//! Handles and objects are values of a [`Registry`], never addresses and never reused, so a NULL,
//! destroyed, foreign or other-kind value is detected and reported.
#![allow(non_camel_case_types, non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

pub mod common;
pub mod msrep;
mod registry;
pub mod sddmm;
pub mod smat;
pub mod spamm;

use crate::alloc::byte_count;
use crate::error::{Error, Result, Status};
use crate::handle::HandleCore;
pub(crate) use registry::{ObjectKind, Registry};
use std::cell::RefCell;
use std::ffi::{CString, c_void};
use std::os::raw::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// `sgpuStatus_t` as passed through the ABI.
pub type sgpuStatus_t = c_int;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(function: &str, err: &Error) {
    let text = format!("{function}: {}", err.message).replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(text).unwrap_or_default());
}

pub(crate) fn last_error_ptr() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Runs an exported function's body: `Ok` → SUCCESS; `Err` → its status and message; panic →
/// INTERNAL_ERROR with the panic text. Outputs must only be written once all checks have passed.
pub(crate) fn boundary(function: &str, body: impl FnOnce() -> Result<()>) -> sgpuStatus_t {
    let result = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(r) => r,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            Err(Error::internal(format!("internal error (panic): {what}")))
        }
    };
    match result {
        Ok(()) => Status::Success as c_int,
        Err(e) => {
            set_last_error(function, &e);
            e.status as c_int
        }
    }
}

/// Prefixes an error's message with the argument it concerns.
pub(crate) fn arg_err(name: &str) -> impl Fn(Error) -> Error + '_ {
    move |e| Error::new(e.status, format!("argument {name}: {}", e.message))
}

/// Converts an enum argument, naming it on failure.
pub(crate) fn enum_arg<E: TryFrom<c_int, Error = Error>>(value: c_int, name: &str) -> Result<E> {
    E::try_from(value).map_err(arg_err(name))
}

/// A non-negative size argument as `usize`.
pub(crate) fn size_arg(value: i64, name: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::invalid_size(format!("argument {name} = {value} is negative")))
}

pub(crate) fn check_ptr<T>(ptr: *const T, name: &str) -> Result<()> {
    if ptr.is_null() {
        return Err(Error::invalid_pointer(format!("argument {name} is NULL")));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(Error::invalid_pointer(format!(
            "argument {name} = {ptr:p} is not aligned to {} bytes",
            std::mem::align_of::<T>()
        )));
    }
    Ok(())
}

/// Size, NULL and alignment checks of a caller array of `len` elements (NULL is accepted when `len`
/// is 0), without reading it: it may be device memory. No array holds more bytes than can be addressed,
/// so such a `len` means inconsistent sizes (INVALID_SIZE).
pub(crate) fn check_array<T>(ptr: *const T, len: usize, name: &str) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    // format_args!: the name is formatted only into an error (every call checks its arrays).
    byte_count::<T>(len, format_args!("argument {name}"))?;
    check_ptr(ptr, name)
}

/// The bytes of an array argument, for [`check_no_overlap`]: `len` elements of `T` at `ptr`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ArrayBytes<'a> {
    name: &'a str,
    start: usize,
    bytes: usize,
}

impl<'a> ArrayBytes<'a> {
    pub(crate) fn of<T>(ptr: *const T, len: usize, name: &'a str) -> Self {
        ArrayBytes { name, start: ptr as usize, bytes: len.saturating_mul(size_of::<T>()) }
    }

    fn end(&self) -> usize {
        self.start.saturating_add(self.bytes)
    }
}

/// The one overlap check of every family: `output` is written while `inputs` are read, so it must not
/// share a byte with any of them. Overlap is SGPU_STATUS_INVALID_POINTER (the status of every other
/// pointer argument error, as a cuBLAS caller expects), naming both arguments. Empty arrays overlap
/// nothing. Only addresses are compared: host and device memory share one address space under CUDA's
/// unified addressing, so the arrays may be either.
pub(crate) fn check_no_overlap(output: ArrayBytes<'_>, inputs: &[ArrayBytes<'_>]) -> Result<()> {
    for input in inputs {
        if output.bytes > 0 && input.bytes > 0 && output.start < input.end() && input.start < output.end() {
            return Err(Error::invalid_pointer(format!(
                "argument {} overlaps argument {}: {} is written while {} is read",
                output.name, input.name, output.name, input.name
            )));
        }
    }
    Ok(())
}

/// A caller array of `len` elements. NULL is accepted only when `len` is 0 (as BLAS does).
pub(crate) unsafe fn slice_arg<'a, T>(ptr: *const T, len: usize, name: &str) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    check_array(ptr, len, name)?;
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// A caller output array of `len` elements. NULL is accepted only when `len` is 0.
pub(crate) unsafe fn slice_mut_arg<'a, T>(ptr: *mut T, len: usize, name: &str) -> Result<&'a mut [T]> {
    if len == 0 {
        return Ok(&mut []);
    }
    check_array(ptr as *const T, len, name)?;
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// A scalar passed by pointer (α, β).
pub(crate) unsafe fn scalar_arg<T: Copy>(ptr: *const T, name: &str) -> Result<T> {
    check_ptr(ptr, name)?;
    Ok(unsafe { *ptr })
}

/// An output pointer; the value is written by the caller of this helper after all checks.
pub(crate) unsafe fn out_arg<'a, T>(ptr: *mut T, name: &str) -> Result<&'a mut T> {
    check_ptr(ptr as *const T, name)?;
    Ok(unsafe { &mut *ptr })
}

/// A family handle: something with the shared state of [`HandleCore`], created from the environment.
pub(crate) trait FamilyHandle: Sized + 'static {
    fn registry() -> &'static Registry<Self>;
    fn create() -> Result<Self>;
    fn core(&mut self) -> &mut HandleCore;
    /// Finishes what the handle's executor still holds for the caller (statistics a product left on
    /// the device) before the executor is replaced.
    fn settle(&mut self) {}
}

// The handle functions every family exports are written out per family (cbindgen sees only literal
// `extern "C"` items); their bodies are these shared helpers.

pub(crate) unsafe fn handle_create<H: FamilyHandle>(function: &str, out: *mut *mut H) -> sgpuStatus_t {
    boundary(function, || {
        let out = unsafe { out_arg(out, "handle") }?;
        *out = H::registry().register(H::create()?)?;
        Ok(())
    })
}

pub(crate) unsafe fn handle_destroy<H: FamilyHandle>(function: &str, h: *mut H) -> sgpuStatus_t {
    boundary(function, || unsafe { H::registry().destroy(h, "handle") })
}

pub(crate) unsafe fn handle_set_stream<H: FamilyHandle>(
    function: &str,
    h: *mut H,
    stream: *mut c_void,
) -> sgpuStatus_t {
    boundary(function, || unsafe { H::registry().get(h, "handle") }?.core().set_stream(stream))
}

pub(crate) unsafe fn handle_get_stream<H: FamilyHandle>(
    function: &str,
    h: *mut H,
    out: *mut *mut c_void,
) -> sgpuStatus_t {
    boundary(function, || {
        let handle = unsafe { H::registry().get(h, "handle") }?;
        *unsafe { out_arg(out, "stream") }? = handle.core().stream();
        Ok(())
    })
}

pub(crate) unsafe fn handle_set_backend<H: FamilyHandle>(function: &str, h: *mut H, backend: c_int) -> sgpuStatus_t {
    boundary(function, || {
        let handle = unsafe { H::registry().get(h, "handle") }?;
        let kind = enum_arg(backend, "backend")?;
        handle.settle();
        handle.core().set_backend(kind)
    })
}

pub(crate) unsafe fn handle_get_backend<H: FamilyHandle>(function: &str, h: *mut H, out: *mut c_int) -> sgpuStatus_t {
    boundary(function, || {
        let handle = unsafe { H::registry().get(h, "handle") }?;
        *unsafe { out_arg(out, "backend") }? = handle.core().backend() as c_int;
        Ok(())
    })
}

#[allow(dead_code)] // until a family with a device list (spamm, msrep) calls it
/// `xxxGetDevices(h, capacity, count, devices)`: the device count to `*count` and the first
/// min(count, capacity) ordinals to `devices` (NULL allowed when capacity is 0: a count query).
pub(crate) unsafe fn handle_get_devices<H: FamilyHandle>(
    function: &str,
    h: *mut H,
    capacity: c_int,
    count: *mut c_int,
    devices: *mut c_int,
) -> sgpuStatus_t {
    boundary(function, || {
        let handle = unsafe { H::registry().get(h, "handle") }?;
        let capacity = size_arg(capacity as i64, "capacity")?;
        let count = unsafe { out_arg(count, "count") }?;
        let ids = handle.core().devices();
        let written = capacity.min(ids.len());
        unsafe { slice_mut_arg(devices, written, "devices") }?.copy_from_slice(&ids[..written]);
        *count = ids.len() as c_int;
        Ok(())
    })
}

pub(crate) unsafe fn handle_set_devices<H: FamilyHandle>(
    function: &str,
    h: *mut H,
    count: c_int,
    devices: *const c_int,
) -> sgpuStatus_t {
    boundary(function, || {
        let handle = unsafe { H::registry().get(h, "handle") }?;
        let count = size_arg(count as i64, "count")?;
        let devices = unsafe { slice_arg(devices, count, "devices") }?;
        handle.core().set_devices(devices)
    })
}

/// Calls a function generic over the element type with the type a [`crate::types::ValueType`] names:
/// `for_value_type!(vt, f(args))` is `f::<f16>(args)`, `f::<bf16>(args)`, `f::<f32>(args)` or
/// `f::<f64>(args)`. The one place where a C value type becomes a Rust element type.
macro_rules! for_value_type {
    ($value_type:expr, $function:ident ( $($arg:expr),* $(,)? )) => {
        match $value_type {
            $crate::types::ValueType::F16 => $function::<half::f16>($($arg),*),
            $crate::types::ValueType::Bf16 => $function::<half::bf16>($($arg),*),
            $crate::types::ValueType::F32 => $function::<f32>($($arg),*),
            $crate::types::ValueType::F64 => $function::<f64>($($arg),*),
        }
    };
}
pub(crate) use for_value_type;

/// `sgpuOperation_t`: an `sgpuOperation` value passed as `int`.
pub type sgpuOperation_t = c_int;
/// `sgpuValueType_t`: an `sgpuValueType` value passed as `int`.
pub type sgpuValueType_t = c_int;
/// `sgpuIndexBase_t`: an `sgpuIndexBase` value passed as `int`.
pub type sgpuIndexBase_t = c_int;
/// `sgpuLayout_t`: an `sgpuLayout` value passed as `int`.
pub type sgpuLayout_t = c_int;
/// `sgpuSparseFormat_t`: an `sgpuSparseFormat` value passed as `int`.
pub type sgpuSparseFormat_t = c_int;
/// `sgpuBackend_t`: an `sgpuBackend` value passed as `int`.
pub type sgpuBackend_t = c_int;

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn last_message() -> String {
        unsafe { CStr::from_ptr(last_error_ptr()) }.to_string_lossy().into_owned()
    }

    #[test]
    fn a_panic_becomes_internal_error_with_its_message() {
        let status = boundary("sgpuTestPanic", || panic!("planted failure {}", 42));
        assert_eq!(status, Status::InternalError as c_int);
        let msg = last_message();
        assert!(msg.contains("sgpuTestPanic") && msg.contains("planted failure 42"), "{msg}");
    }

    #[test]
    fn an_error_sets_the_message_and_success_keeps_it() {
        let status = boundary("sgpuTestError", || Err(Error::invalid_size("argument m = -1 is negative")));
        assert_eq!(status, Status::InvalidSize as c_int);
        assert_eq!(boundary("sgpuTestOk", || Ok(())), 0);
        assert_eq!(last_message(), "sgpuTestError: argument m = -1 is negative");
    }
}
