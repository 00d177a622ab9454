//! NVRTC compilation of `kernels/*.cu` to CUBIN for one architecture, with an on-disk cache so that a
//! process's first use of a kernel after a cache hit pays no compile.
//!
//! Cache key: the kernel's source, the compile options, the architecture, the NVRTC version and the
//! crate version. Location: `SPARSEGPU_CACHE_DIR`, else `$XDG_CACHE_HOME/sparsegpu`, else
//! `~/.cache/sparsegpu`; `SPARSEGPU_DISABLE_CACHE=1` turns it off. A cache that cannot be written is
//! not an error: the kernel is simply compiled again next time.

use super::kernels::KernelSource;
use crate::error::{Error, Result, Status};
use cudarc::nvrtc::sys::{self as nv, nvrtcResult};
use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// Options every kernel is compiled with (plus `--gpu-architecture`). Kernels are self-contained:
/// no toolkit headers, so a machine with only the driver and libnvrtc works.
pub const BASE_OPTIONS: &[&str] = &["-std=c++17", "--device-as-default-execution-space", "-lineinfo"];

/// NVRTC's version as (major, minor).
pub fn version() -> Result<(i32, i32)> {
    if !super::library_present("nvrtc") {
        return Err(Error::backend_unavailable("libnvrtc is not installed or not on LD_LIBRARY_PATH"));
    }
    let (mut major, mut minor) = (0, 0);
    check(unsafe { nv::nvrtcVersion(&mut major, &mut minor) }, "nvrtcVersion")?;
    Ok((major, minor))
}

pub fn version_string() -> String {
    version().map(|(a, b)| format!("{a}.{b}")).unwrap_or_else(|_| "unavailable".into())
}

fn check(r: nvrtcResult, what: &str) -> Result<()> {
    if r == nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        let text = unsafe { CStr::from_ptr(nv::nvrtcGetErrorString(r)) }.to_string_lossy().into_owned();
        Err(Error::execution_failed(format!("{what}: {text}")))
    }
}

/// Compiles `kernel` for `arch` (e.g. "sm_90", "sm_90a") to CUBIN. A compile error is
/// `ExecutionFailed` whose message carries NVRTC's log.
pub fn compile(kernel: &KernelSource, arch: &str) -> Result<Vec<u8>> {
    version()?;
    let source = CString::new(kernel.source).map_err(|_| Error::internal("kernel source holds a NUL byte"))?;
    let name = CString::new(format!("{}.cu", kernel.name)).map_err(|_| Error::internal("kernel name holds NUL"))?;
    let mut program = std::ptr::null_mut();
    check(
        unsafe {
            nv::nvrtcCreateProgram(&mut program, source.as_ptr(), name.as_ptr(), 0, std::ptr::null(), std::ptr::null())
        },
        "nvrtcCreateProgram",
    )?;
    let options: Vec<CString> = options(arch).into_iter().map(|o| CString::new(o).unwrap_or_default()).collect();
    let option_ptrs: Vec<*const std::os::raw::c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let compiled = unsafe { nv::nvrtcCompileProgram(program, option_ptrs.len() as i32, option_ptrs.as_ptr()) };
    let result = if compiled != nvrtcResult::NVRTC_SUCCESS {
        let log = program_log(program);
        Err(Error::new(
            Status::ExecutionFailed,
            format!("NVRTC could not compile kernels/{}.cu for {arch}:\n{log}", kernel.name),
        ))
    } else {
        let mut size = 0usize;
        check(unsafe { nv::nvrtcGetCUBINSize(program, &mut size) }, "nvrtcGetCUBINSize").and_then(|_| {
            let mut cubin = vec![0u8; size];
            check(unsafe { nv::nvrtcGetCUBIN(program, cubin.as_mut_ptr().cast()) }, "nvrtcGetCUBIN").map(|_| cubin)
        })
    };
    unsafe { nv::nvrtcDestroyProgram(&mut program) };
    result
}

fn program_log(program: nv::nvrtcProgram) -> String {
    let mut size = 0usize;
    if unsafe { nv::nvrtcGetProgramLogSize(program, &mut size) } != nvrtcResult::NVRTC_SUCCESS || size == 0 {
        return "(no log)".into();
    }
    let mut log = vec![0u8; size];
    if unsafe { nv::nvrtcGetProgramLog(program, log.as_mut_ptr().cast()) } != nvrtcResult::NVRTC_SUCCESS {
        return "(log unreadable)".into();
    }
    String::from_utf8_lossy(&log).trim_end_matches('\0').to_string()
}

/// The full option list for `arch`.
pub fn options(arch: &str) -> Vec<String> {
    let mut o: Vec<String> = BASE_OPTIONS.iter().map(|s| s.to_string()).collect();
    o.push(format!("--gpu-architecture={arch}"));
    o
}

/// The cache directory, or `None` when caching is disabled.
pub fn cache_dir() -> Option<PathBuf> {
    if std::env::var("SPARSEGPU_DISABLE_CACHE").is_ok_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    if let Some(dir) = std::env::var_os("SPARSEGPU_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(xdg) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(xdg).join("sparsegpu"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache").join("sparsegpu"))
}

/// FNV-1a, 64 bits: stable across Rust versions and platforms (std's hashers are not).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in *part {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        // Separate the parts so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The cache file for `kernel` on `arch` with this NVRTC.
pub fn cache_path(kernel: &KernelSource, arch: &str) -> Option<PathBuf> {
    let dir = cache_dir()?;
    let nvrtc = version_string();
    let key = fnv1a(&[
        kernel.source.as_bytes(),
        options(arch).join(" ").as_bytes(),
        arch.as_bytes(),
        nvrtc.as_bytes(),
        env!("CARGO_PKG_VERSION").as_bytes(),
    ]);
    Some(dir.join(format!("{}-{arch}-{key:016x}.cubin", kernel.name)))
}

/// [`compile`], through the disk cache.
pub fn compile_cached(kernel: &KernelSource, arch: &str) -> Result<Vec<u8>> {
    let path = cache_path(kernel, arch);
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok())
        && !bytes.is_empty()
    {
        return Ok(bytes);
    }
    let cubin = compile(kernel, arch)?;
    if let Some(path) = path
        && let Some(dir) = path.parent()
        && std::fs::create_dir_all(dir).is_ok()
    {
        // Write then rename, so a concurrent reader never sees a partial file.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, &cubin).is_ok() {
            let _ = std::fs::rename(&tmp, &path);
        }
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(cubin)
}
