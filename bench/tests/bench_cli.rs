//! The benchmark binary's command line, on any machine: `--help`, bad arguments, and the clear
//! message (exit status 2) where no GPU is usable. The benchmark itself runs on the GPU machine.

#[path = "../../tests/common/outcomes.rs"]
mod outcomes;

use outcomes::Category;
use std::process::Command;

/// The binary cargo built, or, where the tests were packed and moved to another machine (the GPU
/// machine), the one packed beside this test executable.
fn bench() -> Command {
    let built = std::path::PathBuf::from(env!("CARGO_BIN_EXE_sparsegpu-bench"));
    let beside = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.join("sparsegpu-bench")));
    match beside {
        Some(path) if !built.exists() && path.exists() => Command::new(path),
        _ => Command::new(built),
    }
}

/// Whether the library can run on CUDA here (libcuda, libnvrtc and a device), asked as any caller
/// would: a handle set to the CUDA backend, which is refused when CUDA is unusable.
fn cuda_usable() -> bool {
    use sparsegpu::capi::spamm::{spammCreate, spammDestroy, spammSetBackend};
    let mut h = std::ptr::null_mut();
    assert_eq!(unsafe { spammCreate(&mut h) }, 0, "spammCreate failed");
    let usable = unsafe { spammSetBackend(h, sparsegpu::BackendKind::Cuda as i32) } == 0;
    unsafe { spammDestroy(h) };
    usable
}

#[test]
fn help_describes_every_option() {
    let out = bench().arg("--help").output().unwrap();
    assert!(out.status.success(), "--help failed: {out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for option in [
        "--family",
        "--n",
        "--quick",
        "--json",
        "--mtx",
        "--suite",
        "--widths",
        "--devices",
        "--partitions",
        "--formats",
        "--large",
        "--demo",
        "spamm|smat|msrep|sddmm|all",
    ] {
        assert!(text.contains(option), "--help does not mention {option}:\n{text}");
    }
}

#[test]
fn bad_arguments_are_refused_with_usage() {
    for args in [
        &["--family", "gemm"][..],
        &["--n", "zero"],
        &["--n"],
        &["--devices", "0"],
        &["--partitions", "0"],
        &["--formats", "ell"],
        &["--suite", "roads"],
        &["--widths", "0"],
        &["--frobnicate"],
    ] {
        let out = bench().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("Usage: sparsegpu-bench"), "{args:?} printed no usage:\n{err}");
    }
}

#[test]
fn without_a_gpu_it_exits_2_with_a_clear_message() {
    // It depends on the GPU too: on its absence. Recorded for the run's summary as GPU tests are.
    let test = "without_a_gpu_it_exits_2_with_a_clear_message";
    if cuda_usable() {
        let reason = "CUDA and a GPU are usable here (the test checks the message without one)";
        outcomes::skipped(Category::Gpu, test, reason);
        // Written to stderr directly so the skip shows even when output is captured.
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
        return;
    }
    outcomes::ran(Category::Gpu, test);
    let json = std::env::temp_dir().join(format!("sparsegpu-bench-cli-{}.jsonl", std::process::id()));
    let out = bench().args(["--quick", "--json"]).arg(&json).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("no usable GPU"), "unclear message: {err}");
    assert!(!err.contains("panicked"), "the binary panicked: {err}");
    assert!(!json.exists(), "a JSON file was written without any measurement");
}

#[test]
fn the_demonstration_runs_with_or_without_a_gpu() {
    // With a GPU it compares with the vendor; without one, against an f64 reference on the CPU.
    let test = "the_demonstration_runs_with_or_without_a_gpu";
    let on_gpu = cuda_usable();
    if on_gpu {
        outcomes::ran(Category::Gpu, test);
    }
    let out = bench().args(["--demo", "--quick"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "--demo failed: {out:?}\n{text}\n{err}");
    assert!(!err.contains("panicked"), "the demonstration panicked: {err}");
    if on_gpu {
        assert!(text.contains("== Summary"), "no summary:\n{text}");
        for family in ["spamm", "smat", "msrep", "sddmm"] {
            assert!(text.contains(&format!("{family:<6} geometric-mean speedup")), "no speedup of {family}:\n{text}");
        }
        assert!(text.contains("Host arrays: spammSgemm"), "host staging not reported:\n{text}");
        assert!(!text.contains("not measured"), "a comparison was not measured:\n{text}");
    } else {
        assert!(text.contains("no vendor library to compare with"), "{text}");
        for family in ["SpAMM", "SMaT", "MSREP", "SDDMM"] {
            assert!(text.contains(&format!("{family} ")), "{family} did not run:\n{text}");
        }
        assert!(text.contains("ergo D·D"), "the real matrix was not used:\n{text}");
    }
}
