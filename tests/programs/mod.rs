//! What the tests that build and run programs in other languages share: finding the checkout's
//! sources and the built `libsparsegpu.so`, tools that may be missing, and running commands.
#![allow(dead_code)]

#[path = "../common/outcomes.rs"]
pub mod outcomes;

use outcomes::Category;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The checkout holding `paths` (each relative to the repository's root): `SPARSEGPU_SOURCE_DIR`
/// when set, else the checkout this test was built in, else the working directory (a test binary
/// carried to another machine and run from a copy of the repository's root). None, with a visible
/// line, where no candidate holds them.
pub fn sources(paths: &[&str]) -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("SPARSEGPU_SOURCE_DIR").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
        std::env::current_dir().ok(),
    ];
    let found = candidates.into_iter().flatten().find(|dir| paths.iter().all(|p| dir.join(p).exists()));
    let test = outcomes::current_test();
    match found {
        Some(_) => outcomes::ran(Category::Files, &test),
        None => {
            let reason =
                format!("{} not found (set SPARSEGPU_SOURCE_DIR, or run from the repository's root)", paths.join(", "));
            outcomes::skipped(Category::Files, &test, &reason);
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
        }
    }
    found
}

/// The `libsparsegpu.so` built with this test: cargo places the cdylib next to the `deps/` folder
/// of the test executable, or in it.
pub fn built_library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let mut dir = exe.parent().expect("deps dir").to_path_buf();
    for _ in 0..3 {
        let library = dir.join("libsparsegpu.so");
        if library.exists() {
            return library;
        }
        dir = dir.parent().expect("parent").to_path_buf();
    }
    panic!("libsparsegpu.so not found near {}", exe.display());
}

/// The soname programs linked against the library record and load.
pub fn soname() -> String {
    format!("libsparsegpu.so.{}", env!("CARGO_PKG_VERSION_MAJOR"))
}

/// A fresh directory for one test's files, outside the source tree.
pub fn work_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sparsegpu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create work dir");
    d
}

/// Runs `cmd` and returns its standard output and error; fails the test when it does not succeed.
pub fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: cannot start {:?}: {e}", cmd.get_program()));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed ({}):\n{text}", out.status);
    text
}

/// Whether `tool` can be run, recorded for the run's summary. A tool that is not installed skips
/// its test or the part of it that needs the tool (with a visible line) except where
/// SPARSEGPU_REQUIRE_COMPILERS=1 (CI installs them all), where it fails.
pub fn tool_present(tool: &str) -> bool {
    let test = outcomes::current_test();
    if Command::new(tool).arg("--version").output().is_ok() {
        outcomes::ran(Category::Compilers, &test);
        return true;
    }
    assert!(!Category::Compilers.required(), "SPARSEGPU_REQUIRE_COMPILERS=1 but {tool} is not installed");
    let reason = format!("{tool} is not installed");
    outcomes::skipped(Category::Compilers, &test, &reason);
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
    false
}

/// A directory holding the built library as an installed one is named: programs link
/// `libsparsegpu.so` and load the soname, `libsparsegpu.so.MAJOR`, which cargo does not create.
pub fn library_dir(dir: &Path) -> PathBuf {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).expect("create library dir");
    let built = built_library();
    for name in ["libsparsegpu.so".to_string(), soname()] {
        std::os::unix::fs::symlink(&built, lib.join(name)).expect("link the built library");
    }
    lib
}

/// Links `cmd` against the library in `lib` (found again at run time through the run path) and libm.
pub fn link_args(cmd: &mut Command, lib: &Path) {
    cmd.arg(format!("-L{}", lib.display())).arg("-lsparsegpu").arg(format!("-Wl,-rpath,{}", lib.display())).arg("-lm");
}

/// Builds a program in a fresh work directory, with `compile(checkout, library dir, work dir,
/// executable)`, and runs it after `configure(checkout, work dir, command)` has added its arguments
/// and environment. Returns its standard output and error; fails the test when the build or the run
/// does not succeed. None (with a visible line) where the checkout lacks `needs` or the compiler
/// is missing.
pub fn build_and_run(
    name: &str,
    needs: &[&str],
    compile: impl FnOnce(&Path, &Path, &Path, &Path) -> Command,
    configure: impl FnOnce(&Path, &Path, &mut Command),
) -> Option<String> {
    let src = sources(needs)?;
    let dir = work_dir(&format!("programs-{name}"));
    let lib = library_dir(&dir);
    let exe = dir.join(name);
    let mut cmd = compile(&src, &lib, &dir, &exe);
    if !tool_present(&cmd.get_program().to_string_lossy()) {
        return None;
    }
    run(&mut cmd, &format!("compiling {name}"));
    let mut program = Command::new(&exe);
    program.env("LD_LIBRARY_PATH", &lib);
    configure(&src, &dir, &mut program);
    let output = run(&mut program, &format!("running {name}"));
    println!("{output}");
    let _ = std::fs::remove_dir_all(dir);
    Some(output)
}

/// `LD_LIBRARY_PATH` with `dir` in front of what the test was given (which may name libnvrtc).
pub fn library_path_with(dir: &Path) -> std::ffi::OsString {
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&old));
    }
    std::env::join_paths(dirs).expect("library path")
}

/// The ELF dynamic section of `file` as `readelf -d` or `objdump -p` prints it, recorded for the
/// run's summary; None (with a visible line) where neither tool is installed, except where
/// SPARSEGPU_REQUIRE_COMPILERS=1, where it fails.
pub fn dynamic_section(file: &Path) -> Option<String> {
    let test = outcomes::current_test();
    for (tool, flag) in [("readelf", "-d"), ("objdump", "-p")] {
        if let Ok(out) = Command::new(tool).arg(flag).arg(file).output()
            && out.status.success()
        {
            outcomes::ran(Category::Compilers, &test);
            return Some(String::from_utf8_lossy(&out.stdout).into_owned());
        }
    }
    let reason = "neither readelf nor objdump is installed";
    assert!(!Category::Compilers.required(), "SPARSEGPU_REQUIRE_COMPILERS=1 but {reason}");
    outcomes::skipped(Category::Compilers, &test, reason);
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason} to read {}", file.display());
    None
}

/// Whether a dynamic section (either tool's format) names `name` as the library's SONAME or as a
/// NEEDED library.
pub fn dynamic_entry(section: &str, entry: &str, name: &str) -> bool {
    section.lines().any(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        // readelf: `0x... (SONAME)  Library soname: [name]`; objdump: `SONAME  name`.
        (words.contains(&format!("({entry})").as_str()) && line.contains(&format!("[{name}]")))
            || (words.first() == Some(&entry) && words.get(1) == Some(&name))
    })
}
