//! Generates the C header from `src/capi` into `$OUT_DIR/sparsegpu.h`. The checked-in
//! `include/sparsegpu.h` is compared with it by `tests/header.rs`, which rewrites it when
//! `SPARSEGPU_BLESS=1`. Gives the shared library its soname.

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    // Programs linked against the library record its soname, `libsparsegpu.so.MAJOR`, and load
    // whatever file that name points to: an installed update of the same major version replaces
    // the library under them, an incompatible one (a new soname) does not. The argument reaches
    // the cdylib only; the rlib the tests and the benchmark link is unaffected.
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let elf = std::env::var("CARGO_CFG_TARGET_FAMILY").is_ok_and(|f| f.split(',').any(|f| f == "unix"))
        && !matches!(target_os.as_str(), "macos" | "ios" | "tvos" | "watchos" | "visionos");
    if elf {
        let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets CARGO_PKG_VERSION_MAJOR");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libsparsegpu.so.{major}");
    }
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml parses");
    match cbindgen::Builder::new().with_crate(&crate_dir).with_config(config).generate() {
        Ok(bindings) => {
            bindings.write_to_file(format!("{out_dir}/sparsegpu.h"));
        }
        Err(e) => panic!("cbindgen failed to generate the header: {e}"),
    }
}
