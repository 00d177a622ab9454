//! `include/sparsegpu.f90` must stay in step with the generated C header: every function has a
//! `bind(c)` interface with the same C name and argument count, every enumerator and `#define`
//! constant has an `integer(c_int), parameter` of the same value, and every struct has a `bind(c)`
//! derived type with the same components in the same order.

use std::collections::BTreeMap;

const HEADER: &str = include_str!("../include/sparsegpu.h");
const MODULE: &str = include_str!("../include/sparsegpu.f90");

fn strip_comments(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// C function name → parameter count.
fn header_functions() -> BTreeMap<String, usize> {
    let code = strip_comments(HEADER);
    let body = code.split("extern \"C\" {").nth(1).expect("extern C block");
    let body = body.split("#ifdef __cplusplus").next().unwrap();
    let body = body.replace("#endif", "");
    let mut out = BTreeMap::new();
    for decl in body.split(';') {
        let decl = decl.split_whitespace().collect::<Vec<_>>().join(" ");
        let Some(open) = decl.find('(') else { continue };
        let name = decl[..open].rsplit([' ', '*']).next().unwrap().to_string();
        let params = decl[open + 1..decl.rfind(')').unwrap()].trim();
        let count = if params == "void" || params.is_empty() { 0 } else { params.split(',').count() };
        out.insert(name, count);
    }
    out
}

/// Enumerators and `#define` integer constants → value.
fn header_constants() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in strip_comments(HEADER).lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("#define ") {
            let mut parts = rest.split_whitespace();
            if let (Some(name), Some(value)) = (parts.next(), parts.next())
                && let Ok(v) = value.parse()
            {
                out.insert(name.to_string(), v);
            }
        } else if let Some((name, value)) = line.trim_end_matches(',').split_once(" = ")
            && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            out.insert(name.to_string(), value.parse().expect("enumerator value"));
        }
    }
    out
}

/// Struct name → field names in order.
fn header_structs() -> BTreeMap<String, Vec<String>> {
    let code = strip_comments(HEADER);
    let mut out = BTreeMap::new();
    for chunk in code.split("typedef struct {").skip(1) {
        let (fields, rest) = chunk.split_once('}').unwrap();
        let name = rest.split(';').next().unwrap().trim().to_string();
        let names = fields
            .split(';')
            .map(str::trim)
            .filter(|f| !f.is_empty())
            .map(|f| f.rsplit([' ', '*']).next().unwrap().to_string())
            .collect();
        out.insert(name, names);
    }
    out
}

fn fortran_lines() -> Vec<String> {
    // Join continuation lines and drop comments.
    let mut lines = Vec::new();
    let mut current = String::new();
    for raw in MODULE.lines() {
        let code = raw.split('!').next().unwrap_or("").trim_end();
        let (code, continues) = match code.strip_suffix('&') {
            Some(c) => (c, true),
            None => (code, false),
        };
        current.push_str(code.trim_start().trim_start_matches('&'));
        if !continues {
            lines.push(std::mem::take(&mut current));
        }
    }
    lines
}

#[test]
fn every_c_function_has_a_matching_fortran_interface() {
    let mut fortran = BTreeMap::new();
    for line in fortran_lines() {
        let lower = line.to_ascii_lowercase();
        let Some(bind) = lower.find("bind(c, name=\"") else { continue };
        if !(lower.contains("function ") || lower.contains("subroutine ")) {
            continue;
        }
        let cname = line[bind + 14..].split('"').next().unwrap().to_string();
        // The argument list follows the procedure name (a result type like `integer(c_int)` may precede it).
        let keyword = lower.find("function ").or_else(|| lower.find("subroutine ")).unwrap();
        let open = line[keyword..].find('(').unwrap() + keyword;
        let close = line[open..].find(')').unwrap() + open;
        let args = line[open + 1..close].trim();
        let count = if args.is_empty() { 0 } else { args.split(',').count() };
        fortran.insert(cname, count);
    }
    let header = header_functions();
    assert!(header.len() > 10, "header parse found only {header:?}");
    for (name, count) in &header {
        match fortran.get(name) {
            None => panic!("include/sparsegpu.f90 has no interface for {name}"),
            Some(c) => assert_eq!(c, count, "{name}: Fortran interface has {c} arguments, C has {count}"),
        }
    }
    for name in fortran.keys() {
        assert!(header.contains_key(name), "include/sparsegpu.f90 binds {name}, which the header lacks");
    }
}

#[test]
fn every_c_constant_has_a_matching_fortran_parameter() {
    let mut fortran = BTreeMap::new();
    for line in fortran_lines() {
        let lower = line.to_ascii_lowercase();
        if lower.contains("parameter") && lower.contains("::") {
            let decl = line.split("::").nth(1).unwrap();
            for item in decl.split(',') {
                if let Some((name, value)) = item.split_once('=') {
                    let value = value.trim().split('_').next().unwrap();
                    fortran.insert(name.trim().to_ascii_uppercase(), value.parse::<i64>().expect("integer parameter"));
                }
            }
        }
    }
    let header = header_constants();
    assert!(header.contains_key("SGPU_STATUS_SUCCESS"));
    for (name, value) in &header {
        if name == "SPARSEGPU_H" {
            continue;
        }
        assert_eq!(fortran.get(name), Some(value), "Fortran parameter {name} missing or different");
    }
}

#[test]
fn every_c_struct_has_a_matching_fortran_type() {
    let lines = fortran_lines();
    for (name, fields) in header_structs() {
        let start = lines
            .iter()
            .position(|l| {
                let l = l.to_ascii_lowercase();
                l.starts_with("type, bind(c)") && l.ends_with(&format!(":: {}", name.to_ascii_lowercase()))
            })
            .unwrap_or_else(|| panic!("no `type, bind(c) :: {name}` in include/sparsegpu.f90"));
        let components: Vec<String> = lines[start + 1..]
            .iter()
            .take_while(|l| !l.to_ascii_lowercase().starts_with("end type"))
            .filter(|l| l.contains("::"))
            .map(|l| l.split("::").nth(1).unwrap().trim().to_ascii_lowercase())
            .collect();
        let expected: Vec<String> = fields.iter().map(|f| f.to_ascii_lowercase()).collect();
        assert_eq!(components, expected, "components of {name}");
    }
}
