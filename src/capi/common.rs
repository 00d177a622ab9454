//! Library-wide functions: version, status names, the last error message.

use super::{boundary, last_error_ptr, out_arg, sgpuStatus_t};
use crate::error::Status;
use std::os::raw::{c_char, c_int};

pub const SGPU_VERSION_MAJOR: c_int = 0;
pub const SGPU_VERSION_MINOR: c_int = 1;
pub const SGPU_VERSION_PATCH: c_int = 0;
/// `MAJOR * 10000 + MINOR * 100 + PATCH`, the number `sgpuGetVersion` returns.
pub const SGPU_VERSION: c_int = 100;

/// Writes the library version as `MAJOR * 10000 + MINOR * 100 + PATCH` (`SGPU_VERSION` of the header
/// the program was compiled against may differ from the loaded library's).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sgpuGetVersion(version: *mut c_int) -> sgpuStatus_t {
    boundary("sgpuGetVersion", || {
        *unsafe { out_arg(version, "version") }? = SGPU_VERSION;
        Ok(())
    })
}

fn status_from(status: sgpuStatus_t) -> Option<Status> {
    Status::all().into_iter().find(|s| *s as c_int == status)
}

/// The enumerator name of a status, e.g. "SGPU_STATUS_INVALID_SIZE"; "SGPU_STATUS_UNKNOWN" for a
/// number that is not a status. The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn sgpuGetStatusName(status: sgpuStatus_t) -> *const c_char {
    match status_from(status) {
        Some(s) => static_cstr(s.name()),
        None => c"SGPU_STATUS_UNKNOWN".as_ptr(),
    }
}

/// A one-line description of a status. The string is static.
#[unsafe(no_mangle)]
pub extern "C" fn sgpuGetStatusString(status: sgpuStatus_t) -> *const c_char {
    match status_from(status) {
        Some(s) => static_cstr(s.description()),
        None => c"unknown status".as_ptr(),
    }
}

/// The message of the last failed call on this thread, naming the function and the offending argument;
/// "" when no call has failed. Valid until the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn sgpuGetLastErrorMessage() -> *const c_char {
    last_error_ptr()
}

/// Static NUL-terminated copies of the status texts, made once.
fn static_cstr(s: &'static str) -> *const c_char {
    use std::collections::HashMap;
    use std::ffi::CString;
    use std::sync::{Mutex, OnceLock};
    static TABLE: OnceLock<Mutex<HashMap<&'static str, &'static std::ffi::CStr>>> = OnceLock::new();
    let mut table = TABLE.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    table.entry(s).or_insert_with(|| Box::leak(CString::new(s).unwrap_or_default().into_boxed_c_str())).as_ptr()
}
