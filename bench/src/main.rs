//! sparsegpu-bench: each family of libsparsegpu against the vendor library doing the same job, in one
//! process and one run, on device-resident inputs, timed with CUDA events on one stream.
//!
//!     sparsegpu-bench [--family spamm|smat|msrep|sddmm|all] [--n N] [--quick] [--json PATH]
//!                     [--mtx PATH]... [--suite [NAME,...]] [--devices K | K,K,...]
//!                     [--partitions P,...] [--formats F,...] [--large]
//!     sparsegpu-bench --demo [--quick] [--json PATH]
//!
//! Method (docs/benchmarks.md): warm-up calls, then repeats, each after an L2 flush and with the
//! stream idle; medians of CUDA-event times. Our result is compared with the vendor's (relative
//! Frobenius error); a disagreement beyond the type's tolerance is flagged MISMATCH and makes the exit
//! status 1. Without a usable GPU the binary exits with status 2 (but for --demo, which then runs
//! each family against an f64 reference: src/demo.rs).

mod demo;
mod gpu;
mod msrep;
mod report;
mod sddmm;
mod smat;
mod spamm;
mod suite;
mod vendor;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};
use gpu::{DeviceBuffer, Gpu, Outcome, Repeats};
use rayon::prelude::*;
use report::Report;
use sparsegpu::ValueType;
use sparsegpu::capi::common::{sgpuGetLastErrorMessage, sgpuGetStatusName};
use sparsegpu::sparse::CsrMatrix;
use std::ffi::CStr;
use std::path::PathBuf;
use std::process::ExitCode;

const ABOUT: &str = "Runs each libsparsegpu family and the vendor library doing the same job (cuBLAS GEMM, \
    cuSPARSE SpMM / SpMV / SDDMM) on the same device-resident inputs, on GPU 0, and prints per family: time, GFLOP/s \
    or GB/s, speedup over the vendor, percentage of the peaks measured at start (device copy bandwidth, vendor GEMM \
    rate), and the relative error of our result against the vendor's.";

/// The synopsis `--help` and usage errors show.
const USAGE: &str = "\
sparsegpu-bench [--family spamm|smat|msrep|sddmm|all] [--n N] [--quick] [--json PATH]
                       [--mtx PATH]... [--suite [NAME,...]] [--widths N,N,...] [--devices K|K,...]
                       [--partitions P,...] [--formats F,...] [--large] [--block-size B] [--ratios R,R,...]
                       [--densities D,...] [--types T,T,...]
                       [--decay algebraic|exponential|both] [--no-exact] [--square]
       sparsegpu-bench --demo [--quick] [--json PATH]";

const EXIT_STATUS: &str = "\
Exit status: 0 done, 1 a result disagreed with the vendor's (MISMATCH), 2 no usable GPU or vendor \
library, 64 bad arguments.";

/// The command line: `--help` shows ABOUT, USAGE, each option's comment below and EXIT_STATUS. As
/// ever, an option takes the next word as its value, even one starting with '-', and an option given
/// twice counts the last time (`--mtx` adds a file each time).
#[derive(Clone, Debug, Parser)]
#[command(
    name = "sparsegpu-bench",
    about = ABOUT,
    long_about = None,
    override_usage = USAGE,
    after_help = EXIT_STATUS,
    args_override_self = true
)]
pub struct Options {
    /// spamm, smat, msrep, sddmm or all (default all)
    #[arg(
        long = "family",
        value_name = "F",
        value_parser = parse_family,
        default_value = "all",
        hide_default_value = true,
        allow_hyphen_values = true
    )]
    pub families: std::vec::Vec<Family>,
    /// matrix dimension of the generated inputs (SpAMM N×N, SMaT and SDDMM N×N sparse, MSREP band N×N
    /// and R-MAT 2^ceil(log2 N)); default per family
    #[arg(long, value_name = "N", value_parser = parse_n, allow_hyphen_values = true)]
    pub n: Option<usize>,
    /// small sizes and few repeats: finishes in well under a minute
    #[arg(long)]
    pub quick: bool,
    /// the demonstration: each family against the vendor at sizes where its method matters, then
    /// one table of speedups (SpAMM N = 8192 at valid ratios 10 % and 5 % and under an error
    /// budget, host staging timed apart; SMaT on six matrices of the suite; MSREP; SDDMM), a few
    /// minutes on an H100. Without a GPU or the vendor libraries: each family on the default backend
    /// against an f64 reference, in well under a minute. --quick and --json apply; other options
    /// are the demonstration's own
    #[arg(long)]
    pub demo: bool,
    /// also write one JSON object per measurement to PATH (JSON lines)
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    pub json: Option<PathBuf>,
    /// add a Matrix Market file (.mtx or .mtx.gz) to the SMaT and MSREP inputs; repeatable
    #[arg(long, value_name = "PATH", allow_hyphen_values = true)]
    pub mtx: Vec<PathBuf>,
    /// SMaT on the matrix suite instead of the generated N×N inputs: 14 matrices of the classes
    /// stencil, fem, band, block, graph, road, circuit, random, ergo and permuted, 2-4 M nonzeros
    /// each but ergo's 0.36 M (1/16 with --quick; --n does not apply); NAME,... takes those matrices
    /// or classes only (`all`: every one). Types f16, bf16, f32, f64 and widths 32, 128, 512 unless
    /// --types / --widths say otherwise. SDDMM: the suite's matrices as the patterns S instead of
    /// random ones. MSREP: the suite's matrices instead of the default inputs. Reads bench/data
    /// under the current directory: run from the repository root
    #[arg(
        long,
        value_name = "NAME,...",
        num_args = 0..=1,
        default_missing_value = "all",
        value_parser = suite::parse_selection
    )]
    pub suite: Option<std::vec::Vec<&'static str>>,
    /// SMaT: the columns n of B and C (default 128; 32,128,512 with --suite); SDDMM: the inner
    /// dimension k of A and B (default 64)
    #[arg(long, value_name = "N,...", value_parser = parse_positive_list, allow_hyphen_values = true)]
    pub widths: Option<std::vec::Vec<usize>>,
    /// MSREP on 1..K devices (default: every visible device); SpAMM on 1..K (default 1); a list
    /// K,K,... runs on exactly those numbers of devices (e.g. 1,2,4,8)
    #[arg(long, value_name = "K|K,...", value_parser = parse_devices, allow_hyphen_values = true)]
    pub devices: Option<std::vec::Vec<usize>>,
    /// MSREP: partitions per device, each number a run (default 1; e.g. 1,2,4,8)
    #[arg(long, value_name = "P,...", value_parser = parse_positive_list, allow_hyphen_values = true)]
    pub partitions: Option<std::vec::Vec<usize>>,
    /// MSREP: the partial formats, each a run: csr (pCSR from the CSR), csc (pCSC from the CSC),
    /// coo (pCOO from the row-sorted COO); each against cusparseSpMV on A in the same format
    /// (default csr)
    #[arg(long, value_name = "F,...", value_parser = parse_formats, allow_hyphen_values = true)]
    pub formats: Option<std::vec::Vec<sparsegpu::types::SparseFormat>>,
    /// MSREP on large matrices instead of the default inputs: band (half-width 8, 3.2 M rows, 54 M
    /// nonzeros), 3D 27-point stencil (140³, 74 M) and R-MAT scale 23 (edge factor 16, about 120 M);
    /// 1/64 of that with --quick; with --n N, a band of N rows and a stencil and an R-MAT of about as
    /// many nonzeros (--n 30000000: about 500 M each)
    #[arg(long)]
    pub large: bool,
    /// SpAMM LoNum (default 32)
    #[arg(long, value_name = "B", allow_hyphen_values = true)]
    pub block_size: Option<usize>,
    /// SpAMM target valid ratios besides tau = 0 (default 0.3,0.2,0.1,0.05)
    #[arg(long, value_name = "R,...", value_parser = parse_ratios, allow_hyphen_values = true)]
    pub ratios: Option<std::vec::Vec<f64>>,
    /// SDDMM densities of the random S (default 1e-5,1e-4,1e-3,1e-2,5e-2; 1e-4,1e-2 with --quick)
    #[arg(long, value_name = "D,...", value_parser = parse_ratios, allow_hyphen_values = true)]
    pub densities: Option<std::vec::Vec<f64>>,
    /// SpAMM without the tau = 0 rows (at large N they cost as much as dense GEMMs)
    #[arg(long)]
    pub no_exact: bool,
    /// SpAMM, SMaT, MSREP and SDDMM value types: f32, f16, bf16, f64 (default: SpAMM all four, SMaT
    /// f16,f32 or all four with --suite, MSREP and SDDMM f32,f64)
    #[arg(long, value_name = "T,...", value_parser = parse_types, allow_hyphen_values = true)]
    pub types: Option<std::vec::Vec<ValueType>>,
    /// SMaT storage format (smatSetFormat): auto, tiles (every block row as tensor-core tiles) or csr
    /// (default auto)
    #[arg(long, value_name = "F", value_parser = ["auto", "tiles", "csr"])]
    pub smat_format: Option<String>,
    /// SMaT math mode for f32 tiles (smatSetMathMode): default (exact FP32) or tf32x3 (3xTF32 on
    /// tensor cores; its f32 rows are then checked against an f64 product, relative error ≤ 1e-5)
    #[arg(long, value_name = "M", value_parser = ["default", "tf32x3"])]
    pub smat_math: Option<String>,
    /// SDDMM math mode for f32 (sddmmSetMathMode): default (exact FP32), tf32 or tf32x3 (the
    /// tensor-core tiles through a plan; f32 rows are then labelled "f32 tf32" / "f32 3xtf32", and TF32
    /// is checked against cuSPARSE's FP32 result to a relative error of 2e-3)
    #[arg(long, value_name = "M", value_parser = ["default", "tf32", "tf32x3"])]
    pub sddmm_math: Option<String>,
    /// SpAMM inputs: algebraic, exponential or both (default both)
    #[arg(
        long,
        value_name = "D",
        value_parser = ["algebraic", "exponential", "both"],
        hide_possible_values = true,
        allow_hyphen_values = true
    )]
    pub decay: Option<String>,
    /// SpAMM C = A·A (one matrix for both inputs, as the paper's a_ij = b_ij and purification's X·X;
    /// norms are computed once) instead of two independent draws
    #[arg(long)]
    pub square: bool,
}

// The list-valued options above are typed `std::vec::Vec`, not `Vec`: clap's derive would read
// `Option<Vec<T>>` as an option given several times; these take one comma-separated value.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    Spamm,
    Smat,
    Msrep,
    Sddmm,
}

fn parse_family(v: &str) -> Result<Vec<Family>, String> {
    Ok(match v {
        "spamm" => vec![Family::Spamm],
        "smat" => vec![Family::Smat],
        "msrep" => vec![Family::Msrep],
        "sddmm" => vec![Family::Sddmm],
        "all" => vec![Family::Spamm, Family::Smat, Family::Msrep, Family::Sddmm],
        _ => return Err("spamm, smat, msrep, sddmm or all".into()),
    })
}

fn parse_n(v: &str) -> Result<usize, String> {
    let n: usize = v.parse().map_err(|_| "a positive integer is expected".to_string())?;
    if n == 0 || n > i32::MAX as usize {
        return Err(format!("{n} is out of range (1..={})", i32::MAX));
    }
    Ok(n)
}

/// One number K means 1..K; a list means exactly its numbers.
fn parse_devices(v: &str) -> Result<Vec<usize>, String> {
    let counts = v
        .split(',')
        .map(|k| k.trim().parse::<usize>().ok().filter(|&k| k > 0))
        .collect::<Option<Vec<usize>>>()
        .ok_or("positive integers separated by commas are expected")?;
    Ok(match counts[..] {
        [k] => (1..=k).collect(),
        _ => counts,
    })
}

fn parse_positive_list(v: &str) -> Result<Vec<usize>, String> {
    v.split(',')
        .map(|w| w.trim().parse::<usize>().ok().filter(|&w| w > 0 && w <= i32::MAX as usize))
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| "positive integers separated by commas are expected".into())
}

fn parse_ratios(v: &str) -> Result<Vec<f64>, String> {
    match v.split(',').map(|r| r.parse::<f64>()).collect::<Result<Vec<_>, _>>() {
        Ok(r) if r.iter().all(|x| *x > 0.0 && *x <= 1.0) => Ok(r),
        _ => Err("numbers in (0, 1] separated by commas are expected".into()),
    }
}

fn parse_types(v: &str) -> Result<Vec<ValueType>, String> {
    v.split(',')
        .map(|t| match t {
            "f32" => Ok(ValueType::F32),
            "f16" => Ok(ValueType::F16),
            "bf16" => Ok(ValueType::Bf16),
            "f64" => Ok(ValueType::F64),
            _ => Err("f32, f16, bf16 and f64 separated by commas are expected".to_string()),
        })
        .collect()
}

fn parse_formats(v: &str) -> Result<Vec<sparsegpu::types::SparseFormat>, String> {
    use sparsegpu::types::SparseFormat;
    v.split(',')
        .map(|f| match f {
            "csr" => Ok(SparseFormat::Csr),
            "csc" => Ok(SparseFormat::Csc),
            "coo" => Ok(SparseFormat::Coo),
            _ => Err("csr, csc and coo separated by commas are expected".to_string()),
        })
        .collect()
}

/// The peaks measured at start that results are reported against.
#[derive(Clone, Debug, Default)]
pub struct Peaks {
    /// Device-to-device copy, bytes read plus bytes written per second, in GB/s.
    pub copy_gbps: f64,
    /// Vendor GEMM rate at 8192³ per value type, GFLOP/s.
    pub gemm_gflops: Vec<(ValueType, f64)>,
}

impl Peaks {
    pub fn gemm(&self, ty: ValueType) -> Option<f64> {
        self.gemm_gflops.iter().find(|(t, _)| *t == ty).map(|p| p.1)
    }
}

/// Everything a family run needs. Fields drop in declaration order: the vendor handles, bound to
/// the harness's stream, go before the stream does (with `gpu`, last).
pub struct Bench {
    pub blas: vendor::Cublas,
    pub sparse: vendor::Cusparse,
    pub opts: Options,
    pub peaks: Peaks,
    pub report: Report,
    pub device_count: usize,
    pub seed: u64,
    pub gpu: Gpu,
}

impl Bench {
    /// The numbers of devices a multi-device family runs on: `--devices`, or 1..=`default_max`,
    /// without those beyond the visible devices (said once on standard error).
    pub fn device_counts(&self, default_max: usize) -> Vec<usize> {
        let wanted = self.opts.devices.clone().unwrap_or_else(|| (1..=default_max).collect());
        let (usable, missing): (Vec<usize>, Vec<usize>) = wanted.into_iter().partition(|&k| k <= self.device_count);
        if !missing.is_empty() {
            eprintln!(
                "sparsegpu-bench: --devices asks for {missing:?} device(s), but only {} are visible: skipped",
                self.device_count
            );
        }
        usable
    }
}

pub fn type_name(ty: ValueType) -> &'static str {
    match ty {
        ValueType::F16 => "f16",
        ValueType::Bf16 => "bf16",
        ValueType::F32 => "f32",
        ValueType::F64 => "f64",
    }
}

/// The type products of `ty` are summed in, as our APIs and the vendor's take them: FP32 for the
/// 16-bit types, the type itself otherwise.
pub fn compute_type(ty: ValueType) -> ValueType {
    if ty == ValueType::F64 { ty } else { ValueType::F32 }
}

pub fn type_size(ty: ValueType) -> usize {
    match ty {
        ValueType::F16 | ValueType::Bf16 => 2,
        ValueType::F32 => 4,
        ValueType::F64 => 8,
    }
}

/// The relative Frobenius difference two correct implementations may show, from rounding of the
/// data type (16-bit outputs round to 11 / 8 significant bits; sums run in different orders).
pub fn tolerance(ty: ValueType) -> f64 {
    match ty {
        ValueType::F16 => 5e-3,
        ValueType::Bf16 => 3e-2,
        ValueType::F32 => 1e-4,
        ValueType::F64 => 1e-10,
    }
}

/// `data` converted to `ty` and copied to the device.
pub fn upload_as(gpu: &Gpu, ty: ValueType, data: &[f64], what: &str) -> Outcome<DeviceBuffer> {
    use sparsegpu::scalar::Element;
    fn conv<T: Element>(d: &[f64]) -> Vec<T> {
        d.par_iter().map(|&v| T::from_f64(v)).collect()
    }
    match ty {
        ValueType::F16 => gpu.upload(&conv::<half::f16>(data), what),
        ValueType::Bf16 => gpu.upload(&conv::<half::bf16>(data), what),
        ValueType::F32 => gpu.upload(&conv::<f32>(data), what),
        ValueType::F64 => gpu.upload(data, what),
    }
}

/// The first `len` elements of a device array of `ty`, as f64.
pub fn download_as(gpu: &Gpu, ty: ValueType, buffer: &DeviceBuffer, len: usize) -> Outcome<Vec<f64>> {
    match ty {
        ValueType::F16 => gpu.download::<half::f16>(buffer, len),
        ValueType::Bf16 => gpu.download::<half::bf16>(buffer, len),
        ValueType::F32 => gpu.download::<f32>(buffer, len),
        ValueType::F64 => gpu.download::<f64>(buffer, len),
    }
}

/// A host array of one value type, for the calls that take host data (analysis, τ tuning).
pub enum HostArray {
    F16(Vec<half::f16>),
    Bf16(Vec<half::bf16>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl HostArray {
    pub fn new(ty: ValueType, data: &[f64]) -> HostArray {
        match ty {
            ValueType::F16 => HostArray::F16(data.par_iter().map(|&v| half::f16::from_f64(v)).collect()),
            ValueType::Bf16 => HostArray::Bf16(data.par_iter().map(|&v| half::bf16::from_f64(v)).collect()),
            ValueType::F32 => HostArray::F32(data.par_iter().map(|&v| v as f32).collect()),
            ValueType::F64 => HostArray::F64(data.to_vec()),
        }
    }

    /// `len` values uniform in [-1, 1), drawn in parallel from streams of `seed`: for one seed the
    /// same values, rounded, in every type.
    pub fn random(ty: ValueType, len: usize, seed: u64) -> HostArray {
        use sparsegpu::scalar::Element;
        const CHUNK: usize = 1 << 16;
        fn draw<T: Element>(len: usize, seed: u64) -> Vec<T> {
            let mut rng = sparsegpu::testgen::Rng::new(seed);
            let seeds: Vec<u64> = (0..len.div_ceil(CHUNK)).map(|_| rng.next_u64()).collect();
            let mut values = vec![T::default(); len];
            values.par_chunks_mut(CHUNK).zip(seeds).for_each(|(chunk, seed)| {
                let mut stream = sparsegpu::testgen::Rng::new(seed);
                chunk.iter_mut().for_each(|v| *v = T::from_f64(stream.range(-1.0, 1.0)));
            });
            values
        }
        match ty {
            ValueType::F16 => HostArray::F16(draw(len, seed)),
            ValueType::Bf16 => HostArray::Bf16(draw(len, seed)),
            ValueType::F32 => HostArray::F32(draw(len, seed)),
            ValueType::F64 => HostArray::F64(draw(len, seed)),
        }
    }

    /// The values, widened exactly to f64.
    pub fn to_f64(&self) -> Vec<f64> {
        use sparsegpu::scalar::Element;
        fn widen<T: Element>(v: &[T]) -> Vec<f64> {
            v.par_iter().map(|x| x.to_f64()).collect()
        }
        match self {
            HostArray::F16(v) => widen(v),
            HostArray::Bf16(v) => widen(v),
            HostArray::F32(v) => widen(v),
            HostArray::F64(v) => v.clone(),
        }
    }

    pub fn ptr(&self) -> *const std::ffi::c_void {
        match self {
            HostArray::F16(v) => v.as_ptr().cast(),
            HostArray::Bf16(v) => v.as_ptr().cast(),
            HostArray::F32(v) => v.as_ptr().cast(),
            HostArray::F64(v) => v.as_ptr().cast(),
        }
    }

    /// A device copy.
    pub fn upload(&self, gpu: &Gpu, what: &str) -> Outcome<DeviceBuffer> {
        match self {
            HostArray::F16(v) => gpu.upload(v, what),
            HostArray::Bf16(v) => gpu.upload(v, what),
            HostArray::F32(v) => gpu.upload(v, what),
            HostArray::F64(v) => gpu.upload(v, what),
        }
    }
}

/// Whether a family runs on a CUDA handle, found with a tiny call on host arrays (always valid
/// memory). Only then is it given device pointers: an implementation still missing could read
/// them as host memory, which no status can report.
pub fn announce_probe(family: &str, probe: &Outcome<()>) {
    if let Err(why) = probe {
        println!("({family} on a CUDA handle is not available: {why}; our rows report it, the vendor's still run)");
    }
}

/// A CSR matrix's structure and values (as `ty`) on the device.
pub fn upload_csr(gpu: &Gpu, ty: ValueType, a: &CsrMatrix<f64>) -> Outcome<vendor::DeviceCsr> {
    Ok(vendor::DeviceCsr {
        rows: a.rows,
        cols: a.cols,
        nnz: a.nnz(),
        row_ptr: gpu.upload(&a.row_ptr, "rowPtr")?,
        col_ind: gpu.upload(&a.col_ind, "colInd")?,
        values: upload_as(gpu, ty, &a.values, "values")?,
        ty,
    })
}

/// A status of our C API as a result; the failure carries the status name and the library's message.
pub fn check(status: i32, call: &str) -> Outcome<()> {
    if status == 0 {
        return Ok(());
    }
    let name = unsafe { CStr::from_ptr(sgpuGetStatusName(status)) }.to_string_lossy().into_owned();
    let message = unsafe { CStr::from_ptr(sgpuGetLastErrorMessage()) }.to_string_lossy().into_owned();
    Err(format!("{call}: {name}: {message}"))
}

/// Reads a Matrix Market file (gzip-compressed when the name ends in .gz, through `gzip -dc`).
pub fn read_mtx(path: &std::path::Path) -> Outcome<CsrMatrix<f64>> {
    let shown = path.display();
    let parsed = if path.extension().is_some_and(|e| e == "gz") {
        let out = std::process::Command::new("gzip")
            .arg("-dc")
            .arg(path)
            .output()
            .map_err(|e| format!("{shown}: cannot run gzip: {e}"))?;
        if !out.status.success() {
            return Err(format!("{shown}: gzip -dc failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        sparsegpu::matrix_market::read_matrix_market(std::io::Cursor::new(out.stdout))
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        sparsegpu::matrix_market::read_matrix_market(std::io::BufReader::new(file))
    };
    parsed.map_err(|e| format!("{shown}: {e}"))
}

/// A short name for a Matrix Market input: its file name without extensions.
pub fn mtx_name(path: &std::path::Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    name.trim_end_matches(".gz").trim_end_matches(".mtx").to_string()
}

pub fn measure_peaks(b: &mut Bench) -> Outcome<()> {
    let gpu = &b.gpu;
    let copy_bytes: usize = if b.opts.quick { 256 << 20 } else { 1 << 30 };
    let src = gpu.zeros(copy_bytes, "the copy source")?;
    let dst = gpu.zeros(copy_bytes, "the copy destination")?;
    let stream = gpu.stream.cu_stream();
    let t = gpu.time(|| {
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst.ptr(), src.ptr(), copy_bytes, stream) }
            .map_err(gpu::driver("cuMemcpyDtoDAsync"))
    })?;
    b.peaks.copy_gbps = 2.0 * copy_bytes as f64 / (t.gpu_ms * 1e-3) / 1e9;
    drop((src, dst));
    println!(
        "peak: device-to-device copy {:.0} GB/s (cuMemcpyDtoDAsync of {} MiB, read + write counted, median of {})",
        b.peaks.copy_gbps,
        copy_bytes >> 20,
        t.repeats
    );
    let how = format!("cuMemcpyDtoDAsync of {} MiB, (read + written bytes) / time", copy_bytes >> 20);
    b.report.push_peak("device copy", b.peaks.copy_gbps, "GB/s", &how);

    let n = 8192usize;
    let mut rng = sparsegpu::testgen::Rng::new(b.seed ^ 0x9e37);
    let host: Vec<f64> = rng.vec(n * n);
    for ty in [ValueType::F32, ValueType::F64, ValueType::F16, ValueType::Bf16] {
        let gpu = &b.gpu;
        let a = upload_as(gpu, ty, &host, "GEMM A")?;
        let c = gpu.zeros(n * n * type_size(ty), "GEMM C")?;
        let t = gpu.time(|| b.blas.gemm(ty, (n, n, n), 1.0, a.ptr(), n, a.ptr(), n, 0.0, c.ptr(), n))?;
        let rate = 2.0 * (n as f64).powi(3) / (t.gpu_ms * 1e-3) / 1e9;
        println!(
            "peak: {} {ty_name} {n}³: {rate:.0} GFLOP/s ({:.2} ms, median of {})",
            vendor::Cublas::gemm_name(ty),
            t.gpu_ms,
            t.repeats,
            ty_name = type_name(ty)
        );
        b.peaks.gemm_gflops.push((ty, rate));
        let how = format!("{} {n}x{n}x{n}, column-major, no transposes", vendor::Cublas::gemm_name(ty));
        b.report.push_peak(&format!("gemm {}", type_name(ty)), rate, "GFLOP/s", &how);
    }
    Ok(())
}

fn main() -> ExitCode {
    let opts = match Options::try_parse() {
        Ok(o) => o,
        // --help is an "error" of clap's too, printed on standard output.
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(mut e) => {
            // clap shows the usage with some errors only (not with a bad value); ours always have.
            if e.get(ContextKind::Usage).is_none() {
                e.insert(ContextKind::Usage, ContextValue::StyledStr(Options::command().render_usage()));
            }
            let _ = e.print();
            return ExitCode::from(64);
        }
    };
    if opts.demo {
        return demo::main(opts);
    }
    let device_count = match gpu::availability() {
        Ok(count) => count,
        Err(why) => {
            eprintln!(
                "sparsegpu-bench: no usable GPU: {why}. The benchmark compares GPU implementations and needs one."
            );
            return ExitCode::from(2);
        }
    };
    let missing = vendor::missing_libraries();
    if !missing.is_empty() {
        eprintln!(
            "sparsegpu-bench: the vendor libraries the benchmark compares with are missing: {} (put the CUDA toolkit's lib directory on LD_LIBRARY_PATH)",
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    match run(opts, device_count) {
        Ok(mismatches) if mismatches > 0 => {
            eprintln!("sparsegpu-bench: {mismatches} result(s) disagreed with the vendor's (flagged MISMATCH above)");
            ExitCode::from(1)
        }
        Ok(_) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("sparsegpu-bench: {why}");
            ExitCode::from(2)
        }
    }
}

fn run(opts: Options, device_count: usize) -> Outcome<usize> {
    let mut bench = start(opts, device_count)?;
    measure_peaks(&mut bench)?;
    for family in bench.opts.families.clone() {
        run_family(&mut bench, family);
    }
    Ok(bench.report.mismatches())
}

pub fn run_family(bench: &mut Bench, family: Family) {
    match family {
        Family::Spamm => spamm::run(bench),
        Family::Smat => smat::run(bench),
        Family::Msrep => msrep::run(bench),
        Family::Sddmm => sddmm::run(bench),
    }
}

/// The harness on GPU 0: its stream, the vendor handles bound to it, the report (and JSON file).
pub fn start(opts: Options, device_count: usize) -> Outcome<Bench> {
    let repeats = if opts.quick {
        Repeats { warmup: 1, min: 3, max: 5, budget_s: 0.2 }
    } else {
        Repeats { warmup: 2, min: 5, max: 20, budget_s: 2.0 }
    };
    let json = match &opts.json {
        Some(path) => Some(std::fs::File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?),
        None => None,
    };
    let gpu = Gpu::new(0, repeats)?;
    let blas = vendor::Cublas::new(&gpu)?;
    let sparse = vendor::Cusparse::new(&gpu)?;
    let seed = std::env::var("SPARSEGPU_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20240601);
    println!(
        "sparsegpu-bench on {} (sm_{}{}, {} visible device(s), driver CUDA {}), {}; seed {seed}",
        gpu.name,
        gpu.capability.0,
        gpu.capability.1,
        device_count,
        gpu::driver_version(),
        report::utc_now()
    );
    let report = Report::new(gpu.name.clone(), json);
    Ok(Bench { opts, gpu, blas, sparse, peaks: Peaks::default(), report, device_count, seed })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, clap::Error> {
        Options::try_parse_from(std::iter::once("sparsegpu-bench").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Options::command().debug_assert();
    }

    #[test]
    fn without_options_everything_is_default() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.families, [Family::Spamm, Family::Smat, Family::Msrep, Family::Sddmm]);
        assert_eq!((o.n, o.quick, o.no_exact, o.square, o.demo), (None, false, false, false, false));
        assert!(o.json.is_none() && o.mtx.is_empty() && o.devices.is_none());
        assert!(o.suite.is_none() && o.widths.is_none());
        assert!(o.block_size.is_none() && o.ratios.is_none() && o.densities.is_none());
        assert!(o.types.is_none() && o.decay.is_none());
        assert!(o.smat_format.is_none() && o.smat_math.is_none() && o.sddmm_math.is_none());
    }

    #[test]
    fn every_option_is_read() {
        let o = parse(&[
            "--family",
            "smat",
            "--n",
            "4096",
            "--quick",
            "--json",
            "r.jsonl",
            "--mtx",
            "a.mtx",
            "--mtx",
            "b.mtx.gz",
            "--suite",
            "road,random",
            "--widths",
            "32,512",
            "--devices",
            "4",
            "--block-size",
            "64",
            "--ratios",
            "0.3,0.05",
            "--densities",
            "1e-3,0.05",
            "--types",
            "bf16,f32",
            "--decay",
            "algebraic",
            "--no-exact",
            "--square",
            "--smat-format",
            "tiles",
            "--smat-math",
            "tf32x3",
            "--sddmm-math",
            "tf32",
            "--demo",
        ])
        .unwrap();
        assert_eq!(o.families, [Family::Smat]);
        assert_eq!((o.n, o.quick, o.no_exact, o.square, o.demo), (Some(4096), true, true, true, true));
        assert_eq!(o.json, Some(PathBuf::from("r.jsonl")));
        assert_eq!(o.mtx, [PathBuf::from("a.mtx"), PathBuf::from("b.mtx.gz")]);
        assert_eq!(o.suite, Some(vec!["road", "random1e-4", "random1e-3", "random1e-2"]));
        assert_eq!(o.widths, Some(vec![32, 512]));
        assert_eq!(o.smat_format.as_deref(), Some("tiles"));
        assert_eq!(o.smat_math.as_deref(), Some("tf32x3"));
        assert_eq!(o.sddmm_math.as_deref(), Some("tf32"));
        assert_eq!(o.devices, Some(vec![1, 2, 3, 4]));
        assert_eq!(o.block_size, Some(64));
        assert_eq!(o.ratios, Some(vec![0.3, 0.05]));
        assert_eq!(o.densities, Some(vec![1e-3, 0.05]));
        assert_eq!(o.types, Some(vec![ValueType::Bf16, ValueType::F32]));
        assert_eq!(o.decay.as_deref(), Some("algebraic"));
        assert_eq!(parse(&["--family", "all"]).unwrap().families.len(), 4);
        assert_eq!(parse(&["--n", "2147483647"]).unwrap().n, Some(i32::MAX as usize));
        assert_eq!(parse(&["--ratios", "1"]).unwrap().ratios, Some(vec![1.0]));
    }

    #[test]
    fn suite_alone_means_the_whole_suite() {
        let every: Vec<&str> = suite::SUITE.iter().map(|e| e.name).collect();
        for args in [&["--suite"][..], &["--suite", "all"], &["--suite", "--quick"], &["--family", "smat", "--suite"]] {
            assert_eq!(parse(args).unwrap().suite.as_ref(), Some(&every), "{args:?}");
        }
        let o = parse(&["--suite", "--widths", "128", "--types", "f64"]).unwrap();
        assert_eq!(
            (o.suite.map(|s| s.len()), o.widths, o.types),
            (Some(every.len()), Some(vec![128]), Some(vec![ValueType::F64]))
        );
    }

    #[test]
    fn a_list_of_devices_is_taken_as_it_is() {
        assert_eq!(parse(&["--devices", "1,2,4,8"]).unwrap().devices, Some(vec![1, 2, 4, 8]));
        assert_eq!(parse(&["--devices", "8,2"]).unwrap().devices, Some(vec![8, 2]));
        assert_eq!(parse(&["--devices", "1, 2"]).unwrap().devices, Some(vec![1, 2]));
    }

    #[test]
    fn the_last_of_a_repeated_option_counts_and_values_may_start_with_a_dash() {
        let o =
            parse(&["--n", "5", "--n", "6", "--quick", "--quick", "--family", "spamm", "--family", "sddmm"]).unwrap();
        assert_eq!((o.n, o.quick, o.families), (Some(6), true, vec![Family::Sddmm]));
        assert_eq!(parse(&["--json", "--quick"]).unwrap().json, Some(PathBuf::from("--quick")));
        assert_eq!(parse(&["--mtx", "-x.mtx"]).unwrap().mtx, [PathBuf::from("-x.mtx")]);
    }

    #[test]
    fn bad_arguments_are_errors() {
        for args in [
            &["--family", "gemm"][..],
            &["--family"],
            &["--n", "0"],
            &["--n", "-1"],
            &["--n", "zero"],
            &["--n", "2147483648"],
            &["--n", "0", "--n", "6"],
            &["--json"],
            &["--devices", "0"],
            &["--devices", "1,,2"],
            &["--devices", "1,0"],
            &["--devices", ""],
            &["--block-size", "x"],
            &["--ratios", "0"],
            &["--ratios", "1.5"],
            &["--ratios", "0.1,x"],
            &["--ratios", "nan"],
            &["--densities", "0"],
            &["--types", "F32"],
            &["--types", "f32,"],
            &["--suite", "roads"],
            &["--suite", "road,"],
            &["--suite="],
            &["--widths", "0"],
            &["--widths", "32,"],
            &["--widths", "2147483648"],
            &["--widths"],
            &["--decay", "foo"],
            &["--quick=1"],
            &["--frobnicate"],
            &["positional"],
            &["--version"],
        ] {
            let e = parse(args).map(|_| ()).unwrap_err();
            assert!(!matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion), "{args:?}: {e}");
        }
    }
}
