//! Library-wide C API: status names and descriptions, the last-error message, version.

use sparsegpu::Status;
use sparsegpu::capi::common::*;
use std::ffi::CStr;

fn text(p: *const std::os::raw::c_char) -> String {
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
}

#[test]
fn every_status_has_a_distinct_name_and_description() {
    let mut names = std::collections::HashSet::new();
    for s in Status::all() {
        let name = text(sgpuGetStatusName(s as i32));
        assert_eq!(name, s.name());
        assert!(name.starts_with("SGPU_STATUS_"));
        assert!(names.insert(name));
        assert!(!text(sgpuGetStatusString(s as i32)).is_empty());
    }
    assert_eq!(text(sgpuGetStatusName(-1)), "SGPU_STATUS_UNKNOWN");
    assert_eq!(text(sgpuGetStatusName(9999)), "SGPU_STATUS_UNKNOWN");
    assert_eq!(text(sgpuGetStatusString(9999)), "unknown status");
    assert_eq!(Status::Success as i32, 0);
}

#[test]
fn null_output_is_reported_with_the_argument_name() {
    let st = unsafe { sgpuGetVersion(std::ptr::null_mut()) };
    assert_eq!(st, Status::InvalidPointer as i32);
    let msg = text(sgpuGetLastErrorMessage());
    assert!(msg.contains("sgpuGetVersion") && msg.contains("version"), "{msg}");
}

#[test]
fn last_error_is_per_thread() {
    assert_eq!(unsafe { sgpuGetVersion(std::ptr::null_mut()) }, Status::InvalidPointer as i32);
    let other = std::thread::spawn(|| text(sgpuGetLastErrorMessage())).join().unwrap();
    assert_eq!(other, "");
    assert!(!text(sgpuGetLastErrorMessage()).is_empty());
}
