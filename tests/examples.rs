//! Builds the C and Fortran examples in `examples/` against the header, the Fortran module and the
//! built `libsparsegpu.so`, and runs each on the CPU backend. Every example checks its own result
//! and exits non-zero when it is wrong; its last line is then not "OK".

mod programs;

use programs::{build_and_run, link_args};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Compiles `examples/{name}.c` as C99 with every warning an error.
fn compile_c(name: &str, src: &Path, lib: &Path, exe: &Path) -> Command {
    let mut cmd = Command::new("cc");
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2"])
        .arg(format!("-I{}", src.join("include").display()))
        .arg(src.join(format!("examples/{name}.c")))
        .arg("-o")
        .arg(exe);
    link_args(&mut cmd, lib);
    cmd
}

/// Builds and runs an example on the CPU backend with the arguments `args(checkout, work dir)`
/// gives; it must succeed and end with the line "OK".
fn check_example(
    name: &str,
    needs: &[&str],
    compile: impl FnOnce(&Path, &Path, &Path, &Path) -> Command,
    args: impl FnOnce(&Path, &Path) -> Vec<OsString>,
) {
    let configure = |src: &Path, dir: &Path, cmd: &mut Command| {
        cmd.env("SPARSEGPU_BACKEND", "cpu").args(args(src, dir));
    };
    let Some(output) = build_and_run(name, needs, compile, configure) else {
        return;
    };
    assert_eq!(output.lines().last(), Some("OK"), "{name} did not end with OK:\n{output}");
}

#[test]
fn conjugate_gradient_with_msrep_spmv() {
    check_example(
        "cg_msrep",
        &["examples/cg_msrep.c", "include"],
        |src, lib, _dir, exe| compile_c("cg_msrep", src, lib, exe),
        |_, _| Vec::new(),
    );
}

#[test]
fn graph_attention_with_sddmm_and_smat() {
    check_example(
        "graph_attention",
        &["examples/graph_attention.c", "include"],
        |src, lib, _dir, exe| compile_c("graph_attention", src, lib, exe),
        |_, _| Vec::new(),
    );
}
