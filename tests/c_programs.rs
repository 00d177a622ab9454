//! Builds the C (C99, -Wall -Wextra -Werror -pedantic), C++ and Fortran programs in `c_tests/`
//! against the installed-style header / module and the built `libsparsegpu.so`, runs them, and
//! requires each to exit 0 (each program checks its results against its own simple reference).

mod programs;

use programs::{built_library, run, soname, sources, tool_present, work_dir};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A directory holding the built library as an installed one is named: programs link
/// `libsparsegpu.so` and load the soname, `libsparsegpu.so.MAJOR`, which cargo does not create.
fn library_dir(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("create library dir");
    let built = built_library();
    for name in ["libsparsegpu.so".to_string(), soname()] {
        std::os::unix::fs::symlink(&built, lib.join(name)).expect("link the built library");
    }
    lib
}

/// Compiles with `compile(sources, library dir, work dir, executable)` and runs the program.
fn build_and_run(name: &str, compile: impl FnOnce(&Path, &Path, &Path, &Path) -> Command) {
    let Some(src) = sources(&["c_tests", "include"]) else {
        return;
    };
    let dir = work_dir(&format!("ctests-{name}"));
    let lib = library_dir(&dir);
    let exe = dir.join(name);
    let mut cmd = compile(&src, &lib, &dir, &exe);
    if !tool_present(&cmd.get_program().to_string_lossy()) {
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
