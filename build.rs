//! Generates the C header from `src/capi` into `$OUT_DIR/sparsegpu.h`. The checked-in
//! `include/sparsegpu.h` is compared with it by `tests/header.rs`, which rewrites it when
//! `SPARSEGPU_BLESS=1`.

fn main() {
    let crate_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let out_dir = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    let config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml parses");
    match cbindgen::Builder::new().with_crate(&crate_dir).with_config(config).generate() {
        Ok(bindings) => {
            bindings.write_to_file(format!("{out_dir}/sparsegpu.h"));
        }
        Err(e) => panic!("cbindgen failed to generate the header: {e}"),
    }
}
