//! Handle values through the C API, for every kind of object the library hands out (the four
//! families' handles, SMaT and MSREP matrices, SDDMM plans): a destroyed value is rejected however
//! many objects are made after it, and so are a second destroy, foreign values and values of another
//! family or kind, all with SGPU_STATUS_INVALID_HANDLE. Objects of different handles are used from
//! several threads at once.

use sparsegpu::Status;
use sparsegpu::capi::msrep::*;
use sparsegpu::capi::sddmm::*;
use sparsegpu::capi::smat::*;
use sparsegpu::capi::spamm::*;
use std::ffi::{CStr, c_void};
use std::ptr::null_mut;

const OK: i32 = Status::Success as i32;
const INVALID_HANDLE: i32 = Status::InvalidHandle as i32;
const F32: i32 = sparsegpu::ValueType::F32 as i32;

fn last_error() -> String {
    unsafe { CStr::from_ptr(sparsegpu::capi::common::sgpuGetLastErrorMessage()) }.to_string_lossy().into_owned()
}

/// One kind of object: how to make one, destroy one, and use one (a call that only looks it up).
struct Kind {
    /// The name messages give the kind.
    name: &'static str,
    /// The argument that names the object in `use_object`'s and `destroy`'s messages.
    argument: &'static str,
    create: fn() -> *mut c_void,
    destroy: unsafe fn(*mut c_void) -> i32,
    use_object: unsafe fn(*mut c_void) -> i32,
}

/// A 2×2 CSR matrix with a nonzero on the diagonal.
const ROW_PTR: [i32; 3] = [0, 1, 2];
const COL_IND: [i32; 2] = [0, 1];
const VALUES: [f32; 2] = [1.0, 2.0];

fn spamm_handle() -> *mut c_void {
    let mut h = null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, OK, "{}", last_error());
    h.cast()
}

fn smat_handle() -> *mut c_void {
    let mut h = null_mut();
    assert_eq!(unsafe { smatCreate(&mut h) }, OK, "{}", last_error());
    h.cast()
}

fn msrep_handle() -> *mut c_void {
    let mut h = null_mut();
    assert_eq!(unsafe { msrepCreate(&mut h) }, OK, "{}", last_error());
    h.cast()
}

fn sddmm_handle() -> *mut c_void {
    let mut h = null_mut();
    assert_eq!(unsafe { sddmmCreate(&mut h) }, OK, "{}", last_error());
    h.cast()
}

fn smat_matrix() -> *mut c_void {
    let h = smat_handle();
    let mut a = null_mut();
    let values = VALUES.as_ptr() as *const c_void;
    let st = unsafe { smatCreateCsr(h.cast(), &mut a, 2, 2, 2, ROW_PTR.as_ptr(), COL_IND.as_ptr(), values, F32, 0) };
    assert_eq!(st, OK, "{}", last_error());
    assert_eq!(unsafe { smatDestroy(h.cast()) }, OK);
    a.cast()
}

fn msrep_matrix() -> *mut c_void {
    let h = msrep_handle();
    let mut a = null_mut();
    let values = VALUES.as_ptr() as *const c_void;
    let st =
        unsafe { msrepCreateCsr(h.cast(), &mut a, 2, 2, 2, ROW_PTR.as_ptr(), COL_IND.as_ptr(), values, F32, 0, 1) };
    assert_eq!(st, OK, "{}", last_error());
    assert_eq!(unsafe { msrepDestroy(h.cast()) }, OK);
    a.cast()
}

fn sddmm_plan() -> *mut c_void {
    let h = sddmm_handle();
    let mut plan = null_mut();
    let st = unsafe { sddmmCreatePlan(h.cast(), &mut plan, 2, 2, 2, ROW_PTR.as_ptr(), COL_IND.as_ptr(), 0) };
    assert_eq!(st, OK, "{}", last_error());
    assert_eq!(unsafe { sddmmDestroy(h.cast()) }, OK);
    plan.cast()
}

fn kinds() -> [Kind; 7] {
    [
        Kind {
            name: "spamm handle",
            argument: "handle",
            create: spamm_handle,
            destroy: |v| unsafe { spammDestroy(v.cast()) },
            use_object: |v| unsafe { spammGetBackend(v.cast(), &mut 0) },
        },
        Kind {
            name: "smatHandle_t",
            argument: "handle",
            create: smat_handle,
            destroy: |v| unsafe { smatDestroy(v.cast()) },
            use_object: |v| unsafe { smatGetBackend(v.cast(), &mut 0) },
        },
        Kind {
            name: "msrepHandle_t",
            argument: "handle",
            create: msrep_handle,
            destroy: |v| unsafe { msrepDestroy(v.cast()) },
            use_object: |v| unsafe { msrepGetBackend(v.cast(), &mut 0) },
        },
        Kind {
            name: "sddmm handle",
            argument: "handle",
            create: sddmm_handle,
            destroy: |v| unsafe { sddmmDestroy(v.cast()) },
            use_object: |v| unsafe { sddmmGetBackend(v.cast(), &mut 0) },
        },
        Kind {
            name: "smatMatrix_t",
            argument: "A",
            create: smat_matrix,
            destroy: |v| unsafe { smatDestroyMatrix(v.cast()) },
            use_object: |v| unsafe { smatGetMatrixInfo(v.cast(), &mut smatMatrixInfo_t::default()) },
        },
        Kind {
            name: "msrepMatrix_t",
            argument: "matrix",
            create: msrep_matrix,
            destroy: |v| unsafe { msrepDestroyMatrix(v.cast()) },
            use_object: |v| unsafe { msrepGetPartitionCount(v.cast(), &mut 0) },
        },
        Kind {
            name: "sddmm plan",
            argument: "plan",
            create: sddmm_plan,
            destroy: |v| unsafe { sddmmDestroyPlan(v.cast()) },
            use_object: |v| {
                // Only the plan is looked up before the handle: a NULL handle fails after it.
                let h = sddmm_handle();
                let alpha = 1.0f32;
                let alpha = &alpha as *const f32 as *const c_void;
                let mut out = [0.0f32; 2];
                let out = out.as_mut_ptr() as *mut c_void;
                let st = unsafe {
                    sddmmExecutePlan(
                        h.cast(),
                        v.cast(),
                        0,
                        alpha,
                        null_mut(),
                        1,
                        null_mut(),
                        1,
                        0,
                        null_mut(),
                        F32,
                        out,
                    )
                };
                assert_eq!(unsafe { sddmmDestroy(h.cast()) }, OK);
                st
            },
        },
    ]
}

#[track_caller]
fn assert_rejected(status: i32, parts: &[&str]) {
    let message = last_error();
    assert_eq!(status, INVALID_HANDLE, "status {status}, message: {message}");
    for part in parts {
        assert!(message.contains(part), "message lacks {part:?}: {message}");
    }
}

#[test]
fn a_destroyed_value_is_rejected_however_many_objects_are_made_after_it() {
    for kind in kinds() {
        let stale = (kind.create)();
        assert_eq!(unsafe { (kind.use_object)(stale) }, OK, "{}: {}", kind.name, last_error());
        assert_eq!(unsafe { (kind.destroy)(stale) }, OK);
        let later: Vec<_> = (0..200).map(|_| (kind.create)()).collect();
        assert!(!later.contains(&stale), "{}: a destroyed value was handed out again", kind.name);
        let not_live = format!("= {stale:p} is not a live {} (destroyed, or created by another family)", kind.name);
        assert_rejected(unsafe { (kind.use_object)(stale) }, &[&format!("argument {}", kind.argument), &not_live]);
        assert_rejected(unsafe { (kind.destroy)(stale) }, &["destroyed twice, or created by another family"]);
        for value in later {
            assert_eq!(unsafe { (kind.use_object)(value) }, OK, "{}: {}", kind.name, last_error());
            assert_eq!(unsafe { (kind.destroy)(value) }, OK);
        }
    }
}

#[test]
fn destroying_twice_is_rejected() {
    for kind in kinds() {
        let value = (kind.create)();
        assert_eq!(unsafe { (kind.destroy)(value) }, OK);
        assert_rejected(unsafe { (kind.destroy)(value) }, &[kind.name, "destroyed twice"]);
        assert_eq!(unsafe { (kind.destroy)(null_mut()) }, OK, "{}: NULL is accepted", kind.name);
    }
}

#[test]
fn foreign_values_are_rejected() {
    let mut local = [0u64; 8];
    let foreign: [*mut c_void; 4] = [
        local.as_mut_ptr().cast(),
        std::ptr::dangling_mut(),
        0x4200_0000_dead_beef as *mut c_void,
        usize::MAX as *mut c_void,
    ];
    for kind in kinds() {
        for value in foreign {
            assert_rejected(unsafe { (kind.use_object)(value) }, &[&format!("is not a live {}", kind.name)]);
            assert_rejected(unsafe { (kind.destroy)(value) }, &[&format!("is not a live {}", kind.name)]);
        }
        assert_rejected(unsafe { (kind.use_object)(null_mut()) }, &[&format!("argument {} is NULL", kind.argument)]);
    }
    // The foreign memory was never written.
    assert_eq!(local, [0; 8]);
}

#[test]
fn a_value_of_another_family_or_kind_is_reported_as_such() {
    let kinds = kinds();
    let values: Vec<_> = kinds.iter().map(|kind| (kind.create)()).collect();
    for (k, kind) in kinds.iter().enumerate() {
        for (o, other) in kinds.iter().enumerate().filter(|&(o, _)| o != k) {
            let wrong = format!("= {:p} is a {}, not a {}", values[o], other.name, kind.name);
            assert_rejected(unsafe { (kind.use_object)(values[o]) }, &[&wrong]);
            assert_rejected(unsafe { (kind.destroy)(values[o]) }, &[&wrong]);
        }
    }
    // Nothing was destroyed by the wrong destroy.
    for (kind, &value) in kinds.iter().zip(&values) {
        assert_eq!(unsafe { (kind.use_object)(value) }, OK, "{}: {}", kind.name, last_error());
        assert_eq!(unsafe { (kind.destroy)(value) }, OK);
    }
}

#[test]
fn handles_of_different_objects_are_used_from_several_threads_at_once() {
    std::thread::scope(|scope| {
        for t in 0..4 {
            scope.spawn(move || {
                let mut stale = Vec::new();
                for round in 0..200 {
                    let h: spammHandle_t = spamm_handle().cast();
                    let block_size = 1 + (t * 200 + round) % 64;
                    assert_eq!(unsafe { spammSetBlockSize(h, block_size) }, OK, "{}", last_error());
                    let mut read = 0;
                    assert_eq!(unsafe { spammGetBlockSize(h, &mut read) }, OK, "{}", last_error());
                    assert_eq!(read, block_size, "another thread's handle answered");
                    assert_eq!(unsafe { spammDestroy(h) }, OK);
                    stale.push(h);
                }
                for h in stale {
                    assert_eq!(unsafe { spammSetBlockSize(h, 8) }, INVALID_HANDLE, "{h:p} is still accepted");
                }
            });
        }
    });
}
