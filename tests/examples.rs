//! Builds the C and Fortran examples in `examples/` against the header, the Fortran module and the
//! built `libsparsegpu.so`, and runs each on the CPU backend. Every example checks its own result
//! and exits non-zero when it is wrong; its last line is then not "OK".

mod programs;

use programs::{build_and_run, link_args};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// ergo's overlap, Fock and density matrices of 40 water molecules (`examples/data/README.md`).
const WATER_MATRICES: [&str; 3] = ["w40-S", "w40-F", "w40-D"];
/// 40 molecules of 10 electrons each, in doubly occupied orbitals.
const WATER_OCCUPIED_ORBITALS: &str = "200";

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

/// The purification's arguments: S, F, the occupation and the reference D, the matrices
/// decompressed into `dir` (the examples read plain Matrix Market).
fn water_arguments(src: &Path, dir: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = WATER_MATRICES
        .iter()
        .map(|name| {
            let packed = src.join(format!("examples/data/{name}.mtx.gz"));
            let file = std::fs::File::open(&packed).unwrap_or_else(|e| panic!("{}: {e}", packed.display()));
            let plain = dir.join(format!("{name}.mtx"));
            let mut out = std::fs::File::create(&plain).expect("create a matrix file");
            std::io::copy(&mut flate2::read::GzDecoder::new(file), &mut out).expect("decompress a matrix");
            plain.into_os_string()
        })
        .collect();
    args.insert(2, WATER_OCCUPIED_ORBITALS.into());
    args
}

#[test]
fn sp2_purification_in_c() {
    check_example(
        "sp2_purification",
        &["examples/sp2_purification.c", "examples/data", "include"],
        |src, lib, _dir, exe| compile_c("sp2_purification", src, lib, exe),
        water_arguments,
    );
}

#[test]
fn sp2_purification_in_fortran() {
    check_example(
        "sp2_purification_f",
        &["examples/sp2_purification.f90", "examples/data", "include"],
        |src, lib, dir, exe| {
            let mut cmd = Command::new("gfortran");
            cmd.args(["-std=f2008", "-Wall", "-Werror", "-O2"])
                .arg(format!("-J{}", dir.display()))
                .arg(src.join("include/sparsegpu.f90"))
                .arg(src.join("examples/sp2_purification.f90"))
                .arg("-o")
                .arg(exe);
            link_args(&mut cmd, lib);
            cmd
        },
        water_arguments,
    );
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
