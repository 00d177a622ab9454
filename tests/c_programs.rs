//! Builds the C (C99, -Wall -Wextra -Werror -pedantic), C++ and Fortran programs in `c_tests/`
//! against the installed-style header / module and the built `libsparsegpu.so`, runs them, and
//! requires each to exit 0 (each program checks its results against its own simple reference).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout holding `c_tests/` and `include/`: `SPARSEGPU_SOURCE_DIR` when set, else the
/// checkout this test was built in, else the working directory (a test binary carried to another
/// machine and run from a copy of the repository's root).
fn source_dir() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("SPARSEGPU_SOURCE_DIR").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        std::env::current_dir().ok(),
    ];
    candidates.into_iter().flatten().find(|dir| dir.join("c_tests").is_dir() && dir.join("include").is_dir())
}

/// The directory holding the `libsparsegpu.so` this test links: cargo places the cdylib next to
/// the `deps/` folder of the test executable.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let mut dir = exe.parent().expect("deps dir").to_path_buf();
    for _ in 0..3 {
        if dir.join("libsparsegpu.so").exists() {
            return dir;
        }
        dir = dir.parent().expect("parent").to_path_buf();
    }
    panic!("libsparsegpu.so not found near {}", exe.display());
}

fn work_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparsegpu-ctests-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).expect("create work dir");
    d
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

/// The sources exist only in a checkout; a test binary run where none is found says so.
fn sources() -> Option<PathBuf> {
    let found = source_dir();
    if found.is_none() {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: c_tests/ sources not found (set SPARSEGPU_SOURCE_DIR, or run from the repository's root)"
        );
    }
    found
}

/// A compiler that is not installed skips its program (with a visible line) except where
/// SPARSEGPU_REQUIRE_COMPILERS=1 (CI installs them all), where it fails.
fn compiler_present(compiler: &str) -> bool {
    if Command::new(compiler).arg("--version").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var("SPARSEGPU_REQUIRE_COMPILERS").as_deref() != Ok("1"),
        "SPARSEGPU_REQUIRE_COMPILERS=1 but {compiler} is not installed"
    );
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {compiler} is not installed");
    false
}

/// Compiles with `compile(sources, library dir, work dir, executable)` and runs the program.
fn build_and_run(name: &str, compile: impl FnOnce(&Path, &Path, &Path, &Path) -> Command) {
    let Some(src) = sources() else {
        return;
    };
    let lib = library_dir();
    let dir = work_dir(name);
    let exe = dir.join(name);
    let mut cmd = compile(&src, &lib, &dir, &exe);
    if !compiler_present(&cmd.get_program().to_string_lossy()) {
        return;
    }
    run(&mut cmd, &format!("compiling {name}"));
    let output = run(Command::new(&exe).env("LD_LIBRARY_PATH", &lib), &format!("running {name}"));
    println!("{output}");
    assert!(output.contains("0 failed"), "{name} did not report its checks:\n{output}");
    let _ = std::fs::remove_dir_all(dir);
}

fn link_args(cmd: &mut Command, lib: &Path) {
    cmd.arg(format!("-L{}", lib.display())).arg("-lsparsegpu").arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lm");
}

#[test]
fn c99_program() {
    build_and_run("test_c", |src, lib, _dir, exe| {
        let mut cmd = Command::new("cc");
        cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
            .arg(format!("-I{}", src.join("include").display()))
            .arg(src.join("c_tests/test_c.c"))
            .arg("-o")
            .arg(exe);
        link_args(&mut cmd, lib);
        cmd
    });
}

#[test]
fn cpp_program() {
    build_and_run("test_cpp", |src, lib, _dir, exe| {
        let mut cmd = Command::new("c++");
        cmd.args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
            .arg(format!("-I{}", src.join("include").display()))
            .arg(src.join("c_tests/test_cpp.cpp"))
            .arg("-o")
            .arg(exe);
        link_args(&mut cmd, lib);
        cmd
    });
}

#[test]
fn fortran_program() {
    build_and_run("test_fortran", |src, lib, dir, exe| {
        let mut cmd = Command::new("gfortran");
        cmd.args(["-std=f2008", "-Wall", "-Werror", "-O1"])
            .arg(format!("-J{}", dir.display()))
            .arg(src.join("include/sparsegpu.f90"))
            .arg(src.join("c_tests/test_fortran.f90"))
            .arg("-o")
            .arg(exe);
        link_args(&mut cmd, lib);
        cmd
    });
}
