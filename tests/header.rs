//! The checked-in C header must be exactly what cbindgen generates from `src/capi` (build.rs writes
//! it to OUT_DIR). `SPARSEGPU_BLESS=1 cargo test --test header` rewrites the checked-in copy.

const GENERATED: &str = include_str!(concat!(env!("OUT_DIR"), "/sparsegpu.h"));

#[test]
fn checked_in_header_matches_generated() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/sparsegpu.h");
    if std::env::var("SPARSEGPU_BLESS").as_deref() == Ok("1") {
        std::fs::write(path, GENERATED).expect("write include/sparsegpu.h");
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        checked_in == GENERATED,
        "include/sparsegpu.h is stale: run `SPARSEGPU_BLESS=1 cargo test --test header` and commit it"
    );
}

#[test]
fn version_macros_match_the_crate_version() {
    let v = |name: &str| -> i32 {
        let line = GENERATED.lines().find(|l| l.starts_with(&format!("#define {name} "))).expect(name);
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    let major: i32 = env!("CARGO_PKG_VERSION_MAJOR").parse().unwrap();
    let minor: i32 = env!("CARGO_PKG_VERSION_MINOR").parse().unwrap();
    let patch: i32 = env!("CARGO_PKG_VERSION_PATCH").parse().unwrap();
    assert_eq!(v("SGPU_VERSION_MAJOR"), major);
    assert_eq!(v("SGPU_VERSION_MINOR"), minor);
    assert_eq!(v("SGPU_VERSION_PATCH"), patch);
    assert_eq!(v("SGPU_VERSION"), major * 10000 + minor * 100 + patch);
    let mut reported = 0;
    assert_eq!(unsafe { sparsegpu::capi::common::sgpuGetVersion(&mut reported) }, 0);
    assert_eq!(reported, major * 10000 + minor * 100 + patch);
}

#[test]
fn every_name_the_header_defines_is_namespaced() {
    // A C header shares one namespace with the program that includes it: every macro, enumerator,
    // type and function must carry the library's prefixes (a bare TILE_ROWS once leaked in).
    const PREFIXES: [&str; 10] =
        ["SGPU_", "SPAMM_", "SMAT_", "MSREP_", "SDDMM_", "sgpu", "spamm", "smat", "msrep", "sddmm"];
    let namespaced = |name: &str| name == "SPARSEGPU_H" || PREFIXES.iter().any(|p| name.starts_with(p));
    for line in GENERATED.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if line.starts_with('*') || line.starts_with("/*") || line.starts_with("//") {
            continue;
        }
        let name = if let Some(rest) = line.strip_prefix("#define ") {
            rest.split_whitespace().next()
        } else if let Some((name, _)) = line.trim_end_matches(',').split_once(" = ") {
            Some(name)
        } else if line.starts_with("} ") || (line.starts_with("typedef ") && line.ends_with(';')) {
            line.trim_end_matches(';').rsplit([' ', '*']).next()
        } else if line.contains('(') && !line.starts_with('#') {
            line.split('(').next().and_then(|head| head.rsplit([' ', '*']).next())
        } else {
            None
        };
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            assert!(namespaced(name), "include/sparsegpu.h defines `{name}` without a library prefix: {line}");
        }
    }
}
