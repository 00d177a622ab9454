//! `install.sh` lays the library out under a prefix as a vendor library is, and programs build
//! against the installed tree as users build them: a C program with the flags `pkg-config` gives,
//! and a CMake project through `find_package(sparsegpu)` and the `sparsegpu::sparsegpu` target
//! (after the installed tree has been moved, since the CMake files must not name the prefix), each
//! also in Fortran with the installed module source where gfortran is present. The programs
//! (`tests/install/use_sparsegpu.{c,f90}`) check the version and small products themselves.
//! Each test installs the library this test was built with (cargo's, not one `install.sh` would
//! build) into a prefix of its own under the temporary directory.

mod programs;

use programs::{
    built_library, dynamic_entry, dynamic_section, library_path_with, run, soname, sources, tool_present, work_dir,
};
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One run of the checkout's `install.sh`, in a work dir of its own.
struct Installed {
    src: PathBuf,
    work: PathBuf,
    /// The prefix the installed files name.
    prefix: PathBuf,
    /// Where the files are: the prefix, or the prefix below the staging root.
    root: PathBuf,
}

impl Drop for Installed {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.work);
        }
    }
}

/// Installs the library this test was built with into `WORK/prefix`, staged under `WORK/stage` when
/// `staged`. None where the sources are not found.
fn install(name: &str, staged: bool) -> Option<Installed> {
    let src = sources(&["install.sh", "packaging", "include", "tests/install"])?;
    let work = work_dir(&format!("install-{name}"));
    let prefix = work.join("prefix");
    let mut cmd = Command::new("sh");
    cmd.arg(src.join("install.sh")).arg("--prefix").arg(&prefix).arg("--library").arg(built_library());
    let root = if staged {
        let stage = work.join("stage");
        cmd.arg("--destdir").arg(&stage);
        stage.join(prefix.strip_prefix("/").expect("absolute prefix"))
    } else {
        prefix.clone()
    };
    run(&mut cmd, "install.sh");
    Some(Installed { src, work, prefix, root })
}

/// Runs a program built against the installed tree, with `libdir` in front of the loader path
/// where given, and checks its report.
fn run_program(exe: &Path, libdir: Option<&Path>) {
    let mut cmd = Command::new(exe);
    if let Some(libdir) = libdir {
        cmd.env("LD_LIBRARY_PATH", library_path_with(libdir));
    }
    let output = run(cmd.env("SPARSEGPU_BACKEND", "cpu"), &format!("running {}", exe.display()));
    println!("{output}");
    assert!(output.contains(" 0 failed"), "{} did not report its checks:\n{output}", exe.display());
}

/// The program links through the soname, not the file name of the library.
fn assert_needs_soname(exe: &Path) {
    if let Some(section) = dynamic_section(exe) {
        assert!(
            dynamic_entry(&section, "NEEDED", &soname()),
            "{} does not need {}:\n{section}",
            exe.display(),
            soname()
        );
    }
}

#[test]
fn prefix_holds_the_library_its_links_header_module_and_package_files() {
    let Some(installed) = install("layout", false) else {
        return;
    };
    let (prefix, lib) = (&installed.prefix, installed.prefix.join("lib"));
    let real = lib.join(format!("libsparsegpu.so.{VERSION}"));
    let metadata = std::fs::symlink_metadata(&real).expect("versioned library");
    assert!(metadata.file_type().is_file(), "{} is not a file", real.display());
    for (link, target) in [(soname(), format!("libsparsegpu.so.{VERSION}")), ("libsparsegpu.so".to_string(), soname())]
    {
        let found =
            std::fs::read_link(lib.join(&link)).unwrap_or_else(|e| panic!("lib/{link} is not a symbolic link: {e}"));
        assert_eq!(found, Path::new(&target), "lib/{link} points elsewhere");
    }
    assert!(
        std::fs::read(&real).unwrap() == std::fs::read(built_library()).unwrap(),
        "the installed library is not the built one"
    );
    for file in ["sparsegpu.h", "sparsegpu.f90"] {
        let installed_file =
            std::fs::read(prefix.join("include").join(file)).unwrap_or_else(|e| panic!("include/{file}: {e}"));
        let source = std::fs::read(installed.src.join("include").join(file)).unwrap();
        assert!(installed_file == source, "include/{file} differs from the source");
    }
    let pc = std::fs::read_to_string(lib.join("pkgconfig/sparsegpu.pc")).expect("sparsegpu.pc");
    assert!(
        pc.lines().any(|l| l == format!("prefix={}", prefix.display())),
        "sparsegpu.pc names another prefix:\n{pc}"
    );
    assert!(pc.lines().any(|l| l == format!("Version: {VERSION}")), "sparsegpu.pc has another version:\n{pc}");
    for file in ["sparsegpuConfig.cmake", "sparsegpuConfigVersion.cmake"] {
        let text =
            std::fs::read_to_string(lib.join("cmake/sparsegpu").join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!text.contains('@'), "{file} kept a template placeholder:\n{text}");
        assert!(
            !text.contains(&prefix.display().to_string()),
            "{file} names the prefix, so the tree cannot move:\n{text}"
        );
    }
    if let Some(section) = dynamic_section(&real) {
        assert!(dynamic_entry(&section, "SONAME", &soname()), "the library's soname is not {}:\n{section}", soname());
    }
}

#[test]
fn destdir_stages_the_files_that_name_the_final_prefix() {
    let Some(installed) = install("destdir", true) else {
        return;
    };
    assert!(installed.root.join(format!("lib/libsparsegpu.so.{VERSION}")).is_file(), "nothing staged");
    assert!(!installed.prefix.exists(), "{} was written outside the staging root", installed.prefix.display());
    let pc = std::fs::read_to_string(installed.root.join("lib/pkgconfig/sparsegpu.pc")).expect("staged sparsegpu.pc");
    let named = format!("prefix={}", installed.prefix.display());
    assert!(pc.lines().any(|l| l == named), "sparsegpu.pc does not name the final prefix:\n{pc}");
}

#[test]
fn c_program_builds_with_pkg_config_flags() {
    if !(tool_present("cc") && tool_present("pkg-config")) {
        return;
    }
    let Some(installed) = install("pkg-config", false) else {
        return;
    };
    let pkg_config = |args: &[&str]| {
        let mut cmd = Command::new("pkg-config");
        cmd.args(args).arg("sparsegpu").env("PKG_CONFIG_PATH", installed.prefix.join("lib/pkgconfig"));
        run(&mut cmd, "pkg-config").trim().to_string()
    };
    assert_eq!(pkg_config(&["--modversion"]), VERSION);
    let flags = pkg_config(&["--cflags", "--libs"]);
    let exe = installed.work.join("use_sparsegpu");
    run(
        Command::new("cc")
            .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
            .arg(installed.src.join("tests/install/use_sparsegpu.c"))
            .args(flags.split_whitespace())
            .arg("-o")
            .arg(&exe),
        "compiling use_sparsegpu.c with pkg-config's flags",
    );
    assert_needs_soname(&exe);
    run_program(&exe, Some(&installed.prefix.join("lib")));

    // Fortran: the module's installed source compiled with the program, its .mod kept in the work dir.
    if !tool_present("gfortran") {
        return;
    }
    let fortran_exe = installed.work.join("use_sparsegpu_fortran");
    run(
        Command::new("gfortran")
            .args(["-std=f2008", "-Wall", "-Werror", "-O1"])
            .arg(format!("-J{}", installed.work.display()))
            .arg(pkg_config(&["--variable=fortran_module"]))
            .arg(installed.src.join("tests/install/use_sparsegpu.f90"))
            .args(pkg_config(&["--libs"]).split_whitespace())
            .arg("-o")
            .arg(&fortran_exe),
        "compiling use_sparsegpu.f90 with the installed module and pkg-config's flags",
    );
    run_program(&fortran_exe, Some(&installed.prefix.join("lib")));
}

#[test]
fn cmake_project_finds_the_moved_package() {
    // CMake's default generator writes Makefiles.
    let generator_present = std::env::var_os("CMAKE_GENERATOR").is_some() || tool_present("make");
    if !(tool_present("cc") && tool_present("cmake") && generator_present) {
        return;
    }
    let Some(installed) = install("cmake", false) else {
        return;
    };
    let prefix = installed.work.join("moved");
    std::fs::rename(&installed.prefix, &prefix).expect("move the installed tree");
    let fortran = tool_present("gfortran");
    let configure = |build: &str, version: &str| {
        let out = Command::new("cmake")
            .arg("-S")
            .arg(installed.src.join("tests/install/cmake_project"))
            .arg("-B")
            .arg(installed.work.join(build))
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
            .arg(format!("-DSPARSEGPU_REQUESTED_VERSION={version}"))
            .arg(format!("-DWITH_FORTRAN={}", if fortran { "ON" } else { "OFF" }))
            .output()
            .expect("run cmake");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    };
    let next_major = format!("{}.0", env!("CARGO_PKG_VERSION_MAJOR").parse::<u32>().unwrap() + 1);
    let (accepted, text) = configure("build-next-major", &next_major);
    assert!(!accepted, "find_package accepted version {next_major} of a {VERSION} install:\n{text}");
    let (configured, text) = configure("build", VERSION);
    assert!(configured, "configuring the CMake project failed:\n{text}");
    run(Command::new("cmake").arg("--build").arg(installed.work.join("build")), "building the CMake project");
    let exe = installed.work.join("build/use_sparsegpu");
    assert_needs_soname(&exe);
    // No loader path: the imported target gives the build tree's executable a run path to the library.
    run_program(&exe, None);
    if fortran {
        run_program(&installed.work.join("build/use_sparsegpu_fortran"), None);
    }
}
