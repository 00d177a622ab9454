//! Every kernel compiles with NVRTC for every supported architecture (and sm_90a where it uses
//! Hopper-only instructions). No GPU or driver is needed, only libnvrtc (CI installs the
//! `nvidia-cuda-nvrtc` wheel and sets SPARSEGPU_REQUIRE_NVRTC=1, so a missing NVRTC fails there).

#[path = "common/outcomes.rs"]
mod outcomes;

use outcomes::Category;
use sparsegpu::backend::cuda::{self, kernels, nvrtc};

/// Whether libnvrtc can be loaded, recorded for the run's summary; a test without it prints a
/// SKIPPED line, or fails where SPARSEGPU_REQUIRE_NVRTC=1.
fn nvrtc_or_skip() -> bool {
    let test = outcomes::current_test();
    if cuda::library_present("nvrtc") {
        outcomes::ran(Category::Nvrtc, &test);
        return true;
    }
    assert!(
        !Category::Nvrtc.required(),
        "SPARSEGPU_REQUIRE_NVRTC=1 but libnvrtc cannot be loaded (LD_LIBRARY_PATH = {:?})",
        std::env::var("LD_LIBRARY_PATH")
    );
    let reason = "libnvrtc is not installed; kernels were not compiled";
    outcomes::skipped(Category::Nvrtc, &test, reason);
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    false
}

#[test]
fn every_kernel_compiles_for_every_supported_architecture() {
    if !nvrtc_or_skip() {
        return;
    }
    println!("NVRTC {}", nvrtc::version_string());
    for kernel in kernels::all() {
        let mut arches: Vec<&str> = kernels::SUPPORTED_ARCHES.to_vec();
        if kernel.uses_sm90a {
            arches.push("sm_90a");
        }
        for arch in arches {
            let started = std::time::Instant::now();
            let cubin = nvrtc::compile(kernel, arch).unwrap_or_else(|e| panic!("{}: {e}", kernel.name));
            assert!(cubin.starts_with(b"\x7fELF"), "{} for {arch} is not a CUBIN (ELF) image", kernel.name);
            println!(
                "{}.cu for {arch}: {} bytes in {:.0} ms",
                kernel.name,
                cubin.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
    }
}

#[test]
fn a_compile_error_carries_the_nvrtc_log() {
    if !nvrtc_or_skip() {
        return;
    }
    static BROKEN: kernels::KernelSource = kernels::KernelSource {
        name: "broken",
        source: "extern \"C\" __global__ void k(int* p) { *p = undeclared_name; }",
        uses_sm90a: false,
    };
    let err = nvrtc::compile(&BROKEN, "sm_80").unwrap_err();
    assert_eq!(err.status, sparsegpu::Status::ExecutionFailed);
    assert!(err.message.contains("undeclared_name") && err.message.contains("broken.cu"), "{}", err.message);
}

#[test]
fn the_disk_cache_is_keyed_by_source_and_architecture() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sparsegpu-cache-test-{}", std::process::id()));
    // SAFETY of set_var: this test binary's other tests do not read the cache variables.
    unsafe { std::env::set_var("SPARSEGPU_CACHE_DIR", &dir) };
    let util = kernels::all()[0];
    let p80 = nvrtc::cache_path(util, "sm_80").unwrap();
    let p90 = nvrtc::cache_path(util, "sm_90").unwrap();
    assert_ne!(p80, p90);
    assert!(p80.starts_with(&dir));
    let cold = std::time::Instant::now();
    let first = nvrtc::compile_cached(util, "sm_80").unwrap();
    let cold = cold.elapsed();
    assert!(p80.exists(), "the compiled kernel was not cached");
    let warm = std::time::Instant::now();
    let second = nvrtc::compile_cached(util, "sm_80").unwrap();
    let warm = warm.elapsed();
    assert_eq!(first, second);
    println!(
        "util.cu sm_80: cold {:.1} ms, warm (disk cache) {:.3} ms",
        cold.as_secs_f64() * 1e3,
        warm.as_secs_f64() * 1e3
    );
    assert!(warm < cold, "a cache hit ({warm:?}) should be faster than a compile ({cold:?})");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Asserts that `module`, compiled for every supported architecture, holds a kernel of each name.
fn holds_entry_points(module: &kernels::KernelSource, names: &[String]) {
    for arch in kernels::SUPPORTED_ARCHES {
        let cubin = nvrtc::compile(module, arch).unwrap_or_else(|e| panic!("{}.cu for {arch}: {e}", module.name));
        for name in names {
            // The ELF symbol table's strings end with NUL.
            let symbol = format!("{name}\0");
            assert!(
                cubin.windows(symbol.len()).any(|w| w == symbol.as_bytes()),
                "{}.cu for {arch} has no kernel {name}",
                module.name
            );
        }
    }
}

/// kernels/sddmm.cu compiles with the validation of device-resident patterns fused into its
/// conversion kernel and its CSR compute kernels, and holds every entry point the launchers
/// (src/backend/cuda/sddmm.rs) name: among them the panels for the vectors a lane of A's row from
/// K = 64 on (f32 2-8, f64 4-8, f16 / bf16 1-4), and the tensor-core tiles of f16, bf16 and of f32
/// in both TF32 math modes.
#[test]
fn the_sddmm_module_holds_every_entry_point_its_launchers_name() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut names = vec!["sddmm_coo_rows".to_string(), "sddmm_band_order".to_string()];
    for (ty, widths) in [("f32", &[1, 2, 4][..]), ("f64", &[1, 2]), ("f16", &[1, 2, 4, 8]), ("bf16", &[1, 2, 4, 8])] {
        for source in ["coo", "csr"] {
            names.extend(widths.iter().map(|v| format!("sddmm_{source}_{ty}_v{v}")));
        }
    }
    for (ty, per_lane) in [("f32", &[2, 4, 8][..]), ("f64", &[4, 8]), ("f16", &[1, 2, 4]), ("bf16", &[1, 2, 4])] {
        names.extend(per_lane.iter().map(|n| format!("sddmm_panels_{ty}_g8_n{n}")));
    }
    names.extend(["f16", "bf16", "f32_tf32", "f32_3xtf32"].iter().map(|kind| format!("sddmm_tc_tiles_{kind}")));
    holds_entry_points(&kernels::SDDMM, &names);
}

/// kernels/msrep.cu holds the pCSR batch kernel for both index widths of each value type, with and
/// without a row map, each also for batches without row blocks, and those without a row map also for
/// launches that merge (src/backend/cuda/msrep/batch.rs), and the other kernels
/// src/backend/cuda/msrep.rs names.
#[test]
fn the_msrep_module_holds_every_entry_point_its_launchers_name() {
    if !nvrtc_or_skip() {
        return;
    }
    let mut names = Vec::new();
    for ty in ["f32", "f64"] {
        for kernel in ["csr_batch", "finish_batch", "merge_rows", "csc_merge"] {
            names.push(format!("msrep_{kernel}_{ty}"));
        }
        for suffix in ["_i16", "_mapped", "_i16_mapped"] {
            names.push(format!("msrep_csr_batch_{ty}{suffix}"));
        }
        for suffix in ["", "_i16", "_mapped", "_i16_mapped"] {
            names.push(format!("msrep_csr_batch_{ty}{suffix}_streamed"));
        }
        for suffix in ["", "_i16", "_streamed", "_i16_streamed"] {
            names.push(format!("msrep_csr_batch_{ty}{suffix}_merging"));
        }
    }
    // The layout of a batch built on the device.
    for kernel in ["scan", "offsets", "sliced_b2", "sliced_b4", "sliced_b8"] {
        names.push(format!("msrep_layout_{kernel}"));
    }
    // pCSC sorted by rows on the device.
    for kernel in
        ["sort_count", "sort_iota", "sort_columns", "sort_histogram", "sort_scatter", "scan_blocks", "scan_add"]
    {
        names.push(format!("msrep_{kernel}"));
    }
    for bytes in [2, 4, 8] {
        names.push(format!("msrep_sort_gather_b{bytes}"));
    }
    holds_entry_points(&kernels::MSREP, &names);
}
