//! `sparsegpu-bench --demo`: what the library is worth to a user, in one run of a few minutes.
//!
//! On a GPU with cuBLAS and cuSPARSE: each family against the vendor call doing the same job, on
//! device-resident inputs, at sizes where its method matters (the bench's own measurements, with the
//! presets below, which are printed as the bench command lines that repeat them), then one table of
//! every comparison and the geometric-mean speedup per family. What host arrays add to a call (the
//! copies in and out of the device) is timed apart, so it does not hide the product. Without a GPU,
//! or without the vendor libraries, there is nothing to compare with: each family runs on the default
//! backend against an f64 reference ([`reference`]).

mod reference;

use crate::gpu::{self, Outcome};
use crate::report::{Measurement, Verdict};
use crate::{Family, Options, spamm, vendor};
use clap::Parser;
use sparsegpu::ValueType;
use std::process::ExitCode;

/// Each family's run in the demonstration, as the bench's command line (`--quick` is added when the
/// demonstration was given it). SpAMM: N = 8192 (2048 with --quick), the exponential-decay input, at
/// valid ratios 10 % and 5 %. SMaT: matrices of the suite from the structured classes, the real
/// ergo overlap matrix and two unstructured ones, at n = 128.
const PRESETS: [(Family, &str); 4] = [
    (Family::Spamm, "--family spamm --ratios 0.1,0.05 --no-exact --decay exponential --types f32,f16,f64 --devices 1"),
    (Family::Smat, "--family smat --suite ergo,fem3x3,block16,stencil2d,rmat,random1e-3 --types f16,f32 --widths 128"),
    (Family::Msrep, "--family msrep --devices 1"),
    (Family::Sddmm, "--family sddmm"),
];

/// SpAMM's product under an error budget: ‖C_exact − C‖_F at most this fraction of ‖C‖_F.
const RELATIVE_ERROR_BUDGET: f64 = 1e-5;

pub fn main(opts: Options) -> ExitCode {
    let reason = match gpu::availability() {
        Ok(device_count) => {
            let missing = vendor::missing_libraries();
            if missing.is_empty() {
                return against_vendor(opts, device_count);
            }
            format!("the vendor libraries are missing ({})", missing.join(", "))
        }
        Err(why) => format!("no usable GPU ({why})"),
    };
    println!("sparsegpu demonstration: {reason}, so there is no vendor library to compare with.");
    println!("Each family on the default backend, on host arrays, against an f64 reference:\n");
    reference::run();
    ExitCode::SUCCESS
}

fn against_vendor(opts: Options, device_count: usize) -> ExitCode {
    match run(opts, device_count) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(mismatches) => {
            eprintln!("sparsegpu-bench: {mismatches} result(s) disagreed with the vendor's (flagged MISMATCH above)");
            ExitCode::from(1)
        }
        Err(why) => {
            eprintln!("sparsegpu-bench: {why}");
            ExitCode::from(2)
        }
    }
}

fn run(opts: Options, device_count: usize) -> Outcome<usize> {
    let quick = opts.quick;
    let n = if quick { 2048 } else { 8192 };
    let mut bench = crate::start(opts, device_count)?;
    crate::measure_peaks(&mut bench)?;
    for (family, preset) in PRESETS {
        let args = match family {
            Family::Spamm => format!("{preset} --n {n}"),
            _ => preset.to_string(),
        } + if quick { " --quick" } else { "" };
        println!("\n== sparsegpu-bench {args}");
        bench.opts = Options::try_parse_from(std::iter::once("sparsegpu-bench").chain(args.split(' ')))
            .map_err(|e| format!("the demonstration's preset '{args}' does not parse: {e}"))?;
        crate::run_family(&mut bench, family);
        if family == Family::Spamm {
            println!("\n== SpAMM under an error budget of {RELATIVE_ERROR_BUDGET:e}·‖C‖_F (spammGemmWithinErrorBound)");
            spamm::within_error_budget(&mut bench, n, &[ValueType::F32, ValueType::F64], RELATIVE_ERROR_BUDGET);
        }
    }
    let staging = spamm::host_staging(&bench, n, 0.1);
    summary(&bench.report.rows, n, staging);
    Ok(bench.report.mismatches())
}

/// One table of every comparison of a call as a user makes it (no forced choices; where a case was
/// compared with several vendor calls, the fastest of them, as a user would pick), the geometric-mean speedup of each family, and what host arrays
/// cost a SpAMM call.
fn summary(rows: &[Measurement], n: usize, staging: Outcome<(f64, f64)>) {
    println!(
        "\n== Summary: ours against the fastest vendor call on the same device-resident inputs (GPU time per call)\n"
    );
    println!(
        "{:<6} {:<27} {:<4} {:<34} {:>9} {:>9} {:>8}  {:<8} vendor call",
        "family", "call", "type", "input", "ours ms", "vendor ms", "speedup", "error"
    );
    let users_calls: Vec<Measurement> = rows.iter().filter(|m| !m.forced).cloned().collect();
    let cases = fastest_vendor_per_case(&users_calls);
    for m in &cases {
        let (Some(ours), Some(vendor), Some(speedup)) = (m.ours_ms, m.vendor_ms, m.speedup()) else {
            let why = match &m.verdict {
                Verdict::NotAvailable(why) => why.as_str(),
                _ => "no vendor time",
            };
            println!("{:<6} {:<27} {:<4} {:<34} not measured: {why}", m.family, m.op, m.ty, case(m));
            continue;
        };
        let flag = if matches!(m.verdict, Verdict::Mismatch(_)) { " MISMATCH" } else { "" };
        let error = m.error.map_or("-".to_string(), |e| format!("{e:.1e}"));
        let vendor_call =
            if m.vendor_alg.is_empty() { m.vendor_op.clone() } else { format!("{} {}", m.vendor_op, m.vendor_alg) };
        println!(
            "{:<6} {:<27} {:<4} {:<34} {ours:>9.3} {vendor:>9.3} {speedup:>7.2}×  {error:<8} {vendor_call}{flag}",
            m.family,
            m.op,
            m.ty,
            case(m)
        );
    }
    println!();
    for family in ["spamm", "smat", "msrep", "sddmm"] {
        let speedups: Vec<f64> = cases.iter().filter(|m| m.family == family).filter_map(|m| m.speedup()).collect();
        if speedups.is_empty() {
            continue;
        }
        let geomean = (speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64).exp();
        let (low, high) = speedups.iter().fold((f64::INFINITY, 0.0f64), |(l, h), &s| (l.min(s), h.max(s)));
        println!(
            "{family:<6} geometric-mean speedup {geomean:5.2}× over {} comparisons (lowest {low:.2}×, highest {high:.2}×)",
            speedups.len()
        );
    }
    match staging {
        Ok((host_ms, device_ms)) => println!(
            "\nHost arrays: spammSgemm at N = {n}, valid ratio 10 %, takes {host_ms:.1} ms a call on host arrays against \
             {device_ms:.1} ms on device-resident ones: {:.1} ms is the copying of A and B to the device and of C back, \
             which the table above leaves out. Keep the matrices on the device across calls.",
            host_ms - device_ms
        ),
        Err(why) => println!("\nHost arrays: not measured: {why}"),
    }
}

/// One row per case (our call on one input): of the rows that compare it with different vendor
/// calls, the one whose vendor call ran fastest; a vendor call that did not run (a dense GEMM too
/// large to allocate) is no comparison. Order of first appearance.
fn fastest_vendor_per_case(rows: &[Measurement]) -> Vec<&Measurement> {
    let mut cases: Vec<&Measurement> = Vec::new();
    for m in rows {
        let same_case = |c: &&mut &Measurement| {
            (c.family, &c.op, c.ty, &c.input, &c.shape, c.valid_ratio.map(f64::to_bits))
                == (m.family, &m.op, m.ty, &m.input, &m.shape, m.valid_ratio.map(f64::to_bits))
        };
        match cases.iter_mut().find(same_case) {
            None => cases.push(m),
            Some(kept) => {
                let faster = |x: &Measurement, y: &Measurement| match (x.vendor_ms, y.vendor_ms) {
                    (Some(a), Some(b)) => a < b,
                    (Some(_), None) => true,
                    _ => false,
                };
                if m.ours_ms.is_some() && faster(m, kept) {
                    *kept = m;
                }
            }
        }
    }
    cases
}

/// The input of a comparison in a few words: the matrix, and the valid ratio, width or density.
fn case(m: &Measurement) -> String {
    let input = m.input.split(' ').next().unwrap_or_default();
    match (m.valid_ratio, m.density) {
        (Some(vr), _) => format!("{input} N{} vr {:.1} %", m.shape.trim_start_matches("N="), vr * 100.0),
        (None, _) if !m.class.is_empty() => format!("{input} {}", m.shape),
        (None, Some(density)) => format!("{input} {} d {density:.0e}", m.shape),
        _ => format!("{input} {}", m.shape),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_command_line_of_its_family() {
        for (family, preset) in PRESETS {
            let o = Options::try_parse_from(std::iter::once("sparsegpu-bench").chain(preset.split(' '))).unwrap();
            assert_eq!(o.families, [family], "{preset}");
        }
    }
}
