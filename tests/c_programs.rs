//! Builds the C (C99, -Wall -Wextra -Werror -pedantic), C++ and Fortran programs in `c_tests/`
//! against the installed-style header / module and the built `libsparsegpu.so`, runs them, and
//! requires each to exit 0 (each program checks its results against its own simple reference).

mod programs;

use programs::{build_and_run, link_args};
use std::path::Path;
use std::process::Command;

/// Builds and runs one program of `c_tests/`, which must report its checks.
fn check_program(name: &str, compile: impl FnOnce(&Path, &Path, &Path, &Path) -> Command) {
    let Some(output) = build_and_run(name, &["c_tests", "include"], compile, |_, _, _| {}) else {
        return;
    };
    assert!(output.contains("0 failed"), "{name} did not report its checks:\n{output}");
}

#[test]
fn c99_program() {
    check_program("test_c", |src, lib, _dir, exe| {
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
    check_program("test_cpp", |src, lib, _dir, exe| {
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
    check_program("test_fortran", |src, lib, dir, exe| {
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
