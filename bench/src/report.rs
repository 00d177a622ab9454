//! Results: one `Measurement` per comparison, printed as a table per family and written as JSON
//! lines (one object per measurement).

use serde::Serialize;
use serde_json::ser::CharEscape;
use std::fmt::Write as _;
use std::io::{self, Write as _};

/// What became of our side of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Ran, and agrees with the vendor within the type's tolerance (or the SpAMM bound).
    Ok,
    /// Ran, but disagrees beyond the tolerance: the number is shown and flagged.
    Mismatch(String),
    /// Did not run: the library (or the vendor) refused or failed, with its message.
    NotAvailable(String),
}

#[derive(Clone, Debug)]
pub struct Measurement {
    pub family: &'static str,
    pub op: String,
    pub vendor_op: String,
    pub ty: &'static str,
    pub input: String,
    pub shape: String,
    /// nnz / (rows·cols) for the sparse families.
    pub density: Option<f64>,
    /// SpAMM: performed / all block products.
    pub valid_ratio: Option<f64>,
    pub tau: Option<f64>,
    pub devices: usize,
    pub ours_ms: Option<f64>,
    pub ours_wall_ms: Option<f64>,
    pub vendor_ms: Option<f64>,
    pub vendor_wall_ms: Option<f64>,
    /// Floating-point work of the operation (dense-equivalent for SpAMM).
    pub flops: Option<f64>,
    /// Compulsory memory traffic of the operation.
    pub bytes: Option<f64>,
    /// The peak `pct_of_peak` is taken against: GFLOP/s when `flops` is the measure, else GB/s.
    pub peak: Option<(f64, &'static str)>,
    /// Relative Frobenius error of ours against the vendor's result.
    pub error: Option<f64>,
    /// SpAMM: the reported bound of ‖C_exact − C‖_F, relative to ‖C_vendor‖_F.
    pub error_bound: Option<f64>,
    /// Extra facts (analysis time, algorithm chosen, tiles ...).
    pub note: String,
    pub verdict: Verdict,
    /// The class of matrix the input stands for (SMaT: stencil, fem, band, ...); empty where inputs
    /// have none. A measurement with a class also carries the fields below in its JSON line.
    pub class: &'static str,
    /// Which of the vendor's algorithms gave `vendor_ms`, where several were timed and the fastest
    /// taken (cusparseSpMM's CSR algorithms); empty otherwise.
    pub vendor_alg: &'static str,
    /// Our setup that is built once and reused by every call (SMaT's analysis, `smatCreateCsr`), wall
    /// time in milliseconds.
    pub analysis_ms: Option<f64>,
    /// Device bytes of what that setup built (SMaT's analysed matrix), and of the CSR it came from.
    pub analysed_bytes: Option<u64>,
    pub csr_bytes: Option<u64>,
    /// Our call with a choice of the library's forced (SDDMM's algorithm), timed beside the call that
    /// leaves the choice to the library; summaries of what a user gets leave it out.
    pub forced: bool,
}

/// After how many calls our setup has paid for itself against the vendor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakEven {
    Calls(u64),
    /// Ours is not faster per call: the setup is never repaid.
    Never,
}

impl std::fmt::Display for BreakEven {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BreakEven::Calls(calls) => write!(f, "{calls} calls"),
            BreakEven::Never => write!(f, "never"),
        }
    }
}

/// A number in JSON, or the string "never".
impl Serialize for BreakEven {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            BreakEven::Calls(calls) => serializer.serialize_u64(*calls),
            BreakEven::Never => serializer.serialize_str("never"),
        }
    }
}

impl Measurement {
    pub fn new(family: &'static str, op: &str, vendor_op: &str, ty: &'static str, input: &str, shape: String) -> Self {
        Measurement {
            family,
            op: op.into(),
            vendor_op: vendor_op.into(),
            ty,
            input: input.into(),
            shape,
            density: None,
            valid_ratio: None,
            tau: None,
            devices: 1,
            ours_ms: None,
            ours_wall_ms: None,
            vendor_ms: None,
            vendor_wall_ms: None,
            flops: None,
            bytes: None,
            peak: None,
            error: None,
            error_bound: None,
            note: String::new(),
            verdict: Verdict::Ok,
            class: "",
            vendor_alg: "",
            analysis_ms: None,
            analysed_bytes: None,
            csr_bytes: None,
            forced: false,
        }
    }

    pub fn speedup(&self) -> Option<f64> {
        Some(self.vendor_ms? / self.ours_ms?)
    }

    pub fn gflops(&self) -> Option<f64> {
        Some(self.flops? / (self.ours_ms? * 1e-3) / 1e9)
    }

    pub fn gbps(&self) -> Option<f64> {
        Some(self.bytes? / (self.ours_ms? * 1e-3) / 1e9)
    }

    pub fn vendor_gflops(&self) -> Option<f64> {
        Some(self.flops? / (self.vendor_ms? * 1e-3) / 1e9)
    }

    pub fn vendor_gbps(&self) -> Option<f64> {
        Some(self.bytes? / (self.vendor_ms? * 1e-3) / 1e9)
    }

    /// Ours as a percentage of the peak: GFLOP/s against a GEMM rate, or GB/s against the copy bandwidth.
    pub fn pct_of_peak(&self) -> Option<f64> {
        let (peak, unit) = self.peak?;
        let achieved = if unit == "GFLOP/s" { self.gflops()? } else { self.gbps()? };
        Some(100.0 * achieved / peak)
    }

    /// The setup's time in calls of the vendor: `analysis_ms / vendor_ms`.
    pub fn analysis_in_vendor_calls(&self) -> Option<f64> {
        Some(self.analysis_ms? / self.vendor_ms?).filter(|k| k.is_finite())
    }

    /// The calls after which the setup is repaid, `analysis_ms / (vendor_ms − ours_ms)` rounded up,
    /// where ours is faster per call.
    pub fn break_even(&self) -> Option<BreakEven> {
        let (analysis, ours, vendor) = (self.analysis_ms?, self.ours_ms?, self.vendor_ms?);
        if !(analysis.is_finite() && ours.is_finite() && vendor.is_finite()) {
            return None;
        }
        Some(if ours < vendor {
            BreakEven::Calls((analysis / (vendor - ours)).ceil() as u64)
        } else {
            BreakEven::Never
        })
    }

    pub fn not_available(&mut self, why: String) {
        self.verdict = Verdict::NotAvailable(why);
    }
}

pub struct Report {
    gpu: String,
    date: String,
    json: Option<std::fs::File>,
    pub rows: Vec<Measurement>,
}

impl Report {
    pub fn new(gpu: String, json: Option<std::fs::File>) -> Report {
        Report { gpu, date: utc_now(), json, rows: Vec::new() }
    }

    /// Records a measurement: printed at once (one line), and written as a JSON line.
    pub fn push(&mut self, m: Measurement) {
        println!("{}", table_line(&m));
        if let Some(file) = &mut self.json {
            let line = json_line(&m, &self.gpu, &self.date);
            if let Err(e) = writeln!(file, "{line}") {
                eprintln!("sparsegpu-bench: cannot write the JSON file: {e}");
            }
        }
        self.rows.push(m);
    }

    /// Writes a free-form record (the measured peaks) as a JSON line.
    pub fn push_peak(&mut self, name: &str, value: f64, unit: &str, how: &str) {
        if let Some(file) = &mut self.json {
            let line = peak_line(name, value, unit, how, &self.gpu, &self.date);
            if let Err(e) = writeln!(file, "{line}") {
                eprintln!("sparsegpu-bench: cannot write the JSON file: {e}");
            }
        }
    }

    pub fn mismatches(&self) -> usize {
        self.rows.iter().filter(|m| matches!(m.verdict, Verdict::Mismatch(_))).count()
    }
}

pub fn table_header(family: &str) {
    println!();
    println!("== {family}");
    println!(
        "{:<22} {:<5} {:<30} {:>9} {:>10} {:>10} {:>10} {:>8} {:>10} {:>6} {:>9}  vendor / notes",
        "op", "type", "input", "dens/vr", "ours ms", "vendor ms", "speedup", "GFLOP/s", "GB/s", "%peak", "error",
    );
}

fn opt(v: Option<f64>, width: usize, precision: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:>width$.precision$}"),
        _ => format!("{:>width$}", "-"),
    }
}

fn table_line(m: &Measurement) -> String {
    let ratio = m.valid_ratio.or(m.density);
    let ratio = match ratio {
        Some(r) if r < 1e-3 => format!("{r:>9.1e}"),
        Some(r) => format!("{r:>9.4}"),
        None => format!("{:>9}", "-"),
    };
    let mut line = format!(
        "{:<22} {:<5} {:<30} {} {} {} {} {} {} {} {}  {}",
        truncate(&m.op, 22),
        m.ty,
        truncate(&format!("{} {}", m.input, m.shape), 30),
        ratio,
        opt(m.ours_ms, 10, 3),
        opt(m.vendor_ms, 10, 3),
        m.speedup().map(|s| format!("{s:>9.2}x")).unwrap_or_else(|| format!("{:>10}", "-")),
        opt(m.gflops(), 8, 1),
        opt(m.gbps(), 10, 1),
        opt(m.pct_of_peak(), 6, 1),
        m.error.map(|e| format!("{e:>9.2e}")).unwrap_or_else(|| format!("{:>9}", "-")),
        m.vendor_op
    );
    if !m.vendor_alg.is_empty() {
        let _ = write!(line, " {}", m.vendor_alg);
    }
    if !m.class.is_empty() {
        let _ = write!(line, "; class {}", m.class);
    }
    if let Some(analysis) = m.analysis_ms {
        let _ = write!(line, "; analysis {analysis:.1} ms");
        if let Some(calls) = m.analysis_in_vendor_calls() {
            let _ = write!(line, " = {calls:.0} vendor calls");
        }
        if let Some(calls) = m.break_even() {
            let _ = write!(line, ", break-even {calls}");
        }
    }
    if let (Some(analysed), Some(csr)) = (m.analysed_bytes, m.csr_bytes) {
        let mib = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
        let _ = write!(
            line,
            "; {:.1} MiB analysed vs {:.1} MiB CSR ({:.2}x)",
            mib(analysed),
            mib(csr),
            analysed as f64 / csr as f64
        );
    }
    if let Some(b) = m.error_bound {
        let _ = write!(line, "; bound {b:.2e}");
    }
    if !m.note.is_empty() {
        let _ = write!(line, "; {}", m.note);
    }
    match &m.verdict {
        Verdict::Ok => {}
        Verdict::Mismatch(why) => {
            let _ = write!(line, "\n    MISMATCH: {why}");
        }
        Verdict::NotAvailable(why) => {
            let _ = write!(line, "\n    not available: {why}");
        }
    }
    line
}

fn truncate(s: &str, width: usize) -> String {
    if s.chars().count() <= width { s.to_string() } else { s.chars().take(width - 1).chain(['…']).collect() }
}

/// One measurement as a JSON line: these fields, in this order (`scripts/plot_bench.py` and
/// `scripts/spamm_table.py` read them). A missing or non-finite number is `null`.
#[derive(Serialize)]
struct MeasurementRecord<'a> {
    family: &'a str,
    op: &'a str,
    vendor_op: &'a str,
    #[serde(rename = "type")]
    ty: &'a str,
    input: &'a str,
    shape: &'a str,
    density: Option<f64>,
    valid_ratio: Option<f64>,
    tau: Option<f64>,
    devices: usize,
    ours_ms: Option<f64>,
    ours_wall_ms: Option<f64>,
    vendor_ms: Option<f64>,
    vendor_wall_ms: Option<f64>,
    speedup: Option<f64>,
    gflops: Option<f64>,
    gbps: Option<f64>,
    pct_of_peak: Option<f64>,
    vendor_gflops: Option<f64>,
    vendor_gbps: Option<f64>,
    peak: Option<f64>,
    peak_unit: Option<&'a str>,
    error: Option<f64>,
    error_bound: Option<f64>,
    /// "ok", "mismatch" or "not available".
    status: &'a str,
    /// Why, for the last two; empty for "ok".
    message: &'a str,
    note: &'a str,
    gpu: &'a str,
    date: &'a str,
    /// Only on measurements with a class of input (SMaT), after the fields above.
    #[serde(flatten)]
    classified: Option<ClassifiedRecord<'a>>,
}

/// The fields a measurement with a class of input adds, in this order; a missing number is `null`,
/// `break_even_calls` a number or "never".
#[derive(Serialize)]
struct ClassifiedRecord<'a> {
    class: &'a str,
    vendor_alg: Option<&'a str>,
    analysis_ms: Option<f64>,
    analysis_vendor_calls: Option<f64>,
    break_even_calls: Option<BreakEven>,
    analysed_bytes: Option<u64>,
    csr_bytes: Option<u64>,
}

/// A peak measured at start, as a JSON line (family "peak").
#[derive(Serialize)]
struct PeakRecord<'a> {
    family: &'a str,
    op: &'a str,
    value: f64,
    unit: &'a str,
    method: &'a str,
    gpu: &'a str,
    date: &'a str,
}

/// serde_json's compact form with the number and string spellings these lines have always had:
/// numbers as Rust's `{:e}` (`2.125e0`), and every control character but `\n` as `\u00XX`.
struct LineFormatter;

impl serde_json::ser::Formatter for LineFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        write!(writer, "{value:e}")
    }

    fn write_char_escape<W: ?Sized + io::Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        let byte = match escape {
            CharEscape::Quote => return writer.write_all(b"\\\""),
            CharEscape::ReverseSolidus => return writer.write_all(b"\\\\"),
            CharEscape::Solidus => return writer.write_all(b"/"),
            CharEscape::LineFeed => return writer.write_all(b"\\n"),
            CharEscape::Backspace => 0x08,
            CharEscape::Tab => b'\t',
            CharEscape::FormFeed => 0x0c,
            CharEscape::CarriageReturn => b'\r',
            CharEscape::AsciiControl(byte) => byte,
        };
        write!(writer, "\\u{byte:04x}")
    }
}

fn to_line(record: &impl Serialize) -> String {
    let mut line = Vec::new();
    record
        .serialize(&mut serde_json::Serializer::with_formatter(&mut line, LineFormatter))
        .expect("records have string keys only and a Vec takes every write");
    String::from_utf8(line).expect("serde_json writes UTF-8")
}

fn json_line(m: &Measurement, gpu: &str, date: &str) -> String {
    let (status, message) = match &m.verdict {
        Verdict::Ok => ("ok", ""),
        Verdict::Mismatch(why) => ("mismatch", why.as_str()),
        Verdict::NotAvailable(why) => ("not available", why.as_str()),
    };
    to_line(&MeasurementRecord {
        family: m.family,
        op: &m.op,
        vendor_op: &m.vendor_op,
        ty: m.ty,
        input: &m.input,
        shape: &m.shape,
        density: m.density,
        valid_ratio: m.valid_ratio,
        tau: m.tau,
        devices: m.devices,
        ours_ms: m.ours_ms,
        ours_wall_ms: m.ours_wall_ms,
        vendor_ms: m.vendor_ms,
        vendor_wall_ms: m.vendor_wall_ms,
        speedup: m.speedup(),
        gflops: m.gflops(),
        gbps: m.gbps(),
        pct_of_peak: m.pct_of_peak(),
        vendor_gflops: m.vendor_gflops(),
        vendor_gbps: m.vendor_gbps(),
        peak: m.peak.map(|p| p.0),
        peak_unit: m.peak.map(|p| p.1),
        error: m.error,
        error_bound: m.error_bound,
        status,
        message,
        note: &m.note,
        gpu,
        date,
        classified: (!m.class.is_empty()).then(|| ClassifiedRecord {
            class: m.class,
            vendor_alg: Some(m.vendor_alg).filter(|a| !a.is_empty()),
            analysis_ms: m.analysis_ms,
            analysis_vendor_calls: m.analysis_in_vendor_calls(),
            break_even_calls: m.break_even(),
            analysed_bytes: m.analysed_bytes,
            csr_bytes: m.csr_bytes,
        }),
    })
}

fn peak_line(name: &str, value: f64, unit: &str, how: &str, gpu: &str, date: &str) -> String {
    to_line(&PeakRecord { family: "peak", op: name, value, unit, method: how, gpu, date })
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rest) = ((secs / 86400) as i64, secs % 86400);
    // Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// The JSON lines exactly as `scripts/plot_bench.py`, `scripts/spamm_table.py` and the files in
/// `docs/results/` have them: field names and order, numbers as Rust's `{:e}` (`1.5e0`), null for a
/// missing or non-finite number, control characters other than `\n` as `\u00XX`.
#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Measurement {
        let mut m = Measurement::new(
            "spamm",
            "spammSgemm x2",
            "cublasSgemm",
            "f32",
            "algebraic 0.1/(|i-j|^0.1+1), C = A·A",
            "N=4096".into(),
        );
        m.density = Some(0.1 + 0.2);
        m.valid_ratio = Some(0.0498);
        m.tau = Some(1.25e-7);
        m.devices = 2;
        m.ours_ms = Some(2.0);
        m.ours_wall_ms = Some(2.125);
        m.vendor_ms = Some(12.5);
        m.vendor_wall_ms = Some(-0.0);
        m.flops = Some(2.0 * 4096f64.powi(3));
        m.bytes = Some(3.0 * 4096.0 * 4096.0 * 4.0);
        m.peak = Some((51234.5, "GFLOP/s"));
        m.error = Some(f64::NAN);
        m.error_bound = Some(f64::INFINITY);
        m.note = "target 0.05, tuned to 0.0498 in 12 ms; tab\there, cr\r, bs\u{8}, ff\u{c}, \u{1}\u{1f}, del\u{7f}, \u{2028} τ³".into();
        m.verdict = Verdict::Mismatch("relative error 1.2e-3 \"against\" C:\\tmp\n  next line".into());
        m
    }

    const FULL: &str = concat!(
        r#"{"family":"spamm","op":"spammSgemm x2","vendor_op":"cublasSgemm","type":"f32","input":"algebraic 0.1/(|i-j|^0.1+1), C = A·A","shape":"N=4096","density":3.0000000000000004e-1,"valid_ratio":4.98e-2,"tau":1.25e-7,"devices":2,"ours_ms":2e0,"ours_wall_ms":2.125e0,"vendor_ms":1.25e1,"vendor_wall_ms":-0e0,"speedup":6.25e0,"gflops":6.8719476736e4,"gbps":1.00663296e2,"pct_of_peak":1.3412734921976403e2,"vendor_gflops":1.099511627776e4,"vendor_gbps":1.610612736e1,"peak":5.12345e4,"peak_unit":"GFLOP/s","error":null,"error_bound":null,"status":"mismatch","message":"relative error 1.2e-3 \"against\" C:\\tmp\n  next line","note":"target 0.05, tuned to 0.0498 in 12 ms; tab\u0009here, cr\u000d, bs\u0008, ff\u000c, \u0001\u001f, del"#,
        "\u{7f}",
        r#", "#,
        "\u{2028}",
        r#" τ³","gpu":"NVIDIA H100 80GB HBM3","date":"2026-11-25T13:10:00Z"}"#,
    );

    const BARE: &str = r#"{"family":"smat","op":"smatSpMM","vendor_op":"cusparseSpMM","type":"f16","input":"","shape":"","density":null,"valid_ratio":null,"tau":null,"devices":1,"ours_ms":null,"ours_wall_ms":null,"vendor_ms":null,"vendor_wall_ms":null,"speedup":null,"gflops":null,"gbps":null,"pct_of_peak":null,"vendor_gflops":null,"vendor_gbps":null,"peak":null,"peak_unit":null,"error":null,"error_bound":null,"status":"ok","message":"","note":"","gpu":"","date":""}"#;

    const NOT_AVAILABLE: &str = r#"{"family":"smat","op":"smatSpMM","vendor_op":"cusparseSpMM","type":"f16","input":"","shape":"","density":null,"valid_ratio":null,"tau":null,"devices":1,"ours_ms":1e0,"ours_wall_ms":null,"vendor_ms":null,"vendor_wall_ms":null,"speedup":null,"gflops":null,"gbps":1e3,"pct_of_peak":3.3333333333333336e1,"vendor_gflops":null,"vendor_gbps":null,"peak":3e3,"peak_unit":"GB/s","error":null,"error_bound":null,"status":"not available","message":"SGPU_STATUS_BACKEND_UNAVAILABLE: no \"CUDA\"","note":"","gpu":"gpu","date":"date"}"#;

    const PEAK: &str = r#"{"family":"peak","op":"gemm f16","value":7.00123456e5,"unit":"GFLOP/s","method":"cublasGemmEx(16F, COMPUTE_32F) 8192x8192x8192, column-major","gpu":"H100","date":"2026-01-01T00:00:00Z"}"#;

    const PEAK_NAN: &str = r#"{"family":"peak","op":"device copy","value":null,"unit":"GB/s","method":"cuMemcpyDtoDAsync of 1024 MiB, (read + written bytes) / time","gpu":"","date":""}"#;

    #[test]
    fn measurement_lines_are_unchanged() {
        assert_eq!(json_line(&full(), "NVIDIA H100 80GB HBM3", "2026-11-25T13:10:00Z"), FULL);
        let mut bare = Measurement::new("smat", "smatSpMM", "cusparseSpMM", "f16", "", String::new());
        assert_eq!(json_line(&bare, "", ""), BARE);
        bare.not_available("SGPU_STATUS_BACKEND_UNAVAILABLE: no \"CUDA\"".into());
        bare.peak = Some((3000.0, "GB/s"));
        bare.bytes = Some(1e9);
        bare.ours_ms = Some(1.0);
        assert_eq!(json_line(&bare, "gpu", "date"), NOT_AVAILABLE);
    }

    /// A SMaT row: the fields above, then those of a classified input.
    const CLASSIFIED: &str = r#"{"family":"smat","op":"smatSpMM","vendor_op":"cusparseSpMM CSR fastest","type":"f32","input":"road","shape":"4x4 n=128","density":null,"valid_ratio":null,"tau":null,"devices":1,"ours_ms":1e0,"ours_wall_ms":null,"vendor_ms":1.5e0,"vendor_wall_ms":null,"speedup":1.5e0,"gflops":null,"gbps":null,"pct_of_peak":null,"vendor_gflops":null,"vendor_gbps":null,"peak":null,"peak_unit":null,"error":null,"error_bound":null,"status":"ok","message":"","note":"","gpu":"g","date":"d","class":"road","vendor_alg":"CSR_ALG2","analysis_ms":1.2e1,"analysis_vendor_calls":8e0,"break_even_calls":24,"analysed_bytes":4096,"csr_bytes":1000}"#;

    const CLASSIFIED_SLOWER: &str = r#"{"family":"smat","op":"smatSpMM","vendor_op":"cublasSgemm","type":"f32","input":"road","shape":"","density":null,"valid_ratio":null,"tau":null,"devices":1,"ours_ms":2e0,"ours_wall_ms":null,"vendor_ms":1.5e0,"vendor_wall_ms":null,"speedup":7.5e-1,"gflops":null,"gbps":null,"pct_of_peak":null,"vendor_gflops":null,"vendor_gbps":null,"peak":null,"peak_unit":null,"error":null,"error_bound":null,"status":"ok","message":"","note":"","gpu":"","date":"","class":"road","vendor_alg":null,"analysis_ms":null,"analysis_vendor_calls":null,"break_even_calls":null,"analysed_bytes":null,"csr_bytes":null}"#;

    #[test]
    fn classified_lines_add_their_fields_at_the_end() {
        let mut m = Measurement::new("smat", "smatSpMM", "cusparseSpMM CSR fastest", "f32", "road", "4x4 n=128".into());
        (m.class, m.vendor_alg, m.ours_ms, m.vendor_ms) = ("road", "CSR_ALG2", Some(1.0), Some(1.5));
        (m.analysis_ms, m.analysed_bytes, m.csr_bytes) = (Some(12.0), Some(4096), Some(1000));
        assert_eq!(m.break_even(), Some(BreakEven::Calls(24)));
        assert_eq!(json_line(&m, "g", "d"), CLASSIFIED);
        let line = table_line(&m);
        for part in ["CSR_ALG2", "class road", "analysis 12.0 ms = 8 vendor calls, break-even 24 calls", "(4.10x)"] {
            assert!(line.contains(part), "{part:?} is not in {line}");
        }

        let mut slower = Measurement::new("smat", "smatSpMM", "cublasSgemm", "f32", "road", String::new());
        (slower.class, slower.ours_ms, slower.vendor_ms) = ("road", Some(2.0), Some(1.5));
        assert_eq!(json_line(&slower, "", ""), CLASSIFIED_SLOWER);
        slower.analysis_ms = Some(12.0);
        assert_eq!(slower.break_even(), Some(BreakEven::Never));
        assert!(json_line(&slower, "", "").contains(r#""break_even_calls":"never","#));
        assert!(table_line(&slower).contains("break-even never"));
    }

    #[test]
    fn peak_lines_are_unchanged() {
        let how = "cublasGemmEx(16F, COMPUTE_32F) 8192x8192x8192, column-major";
        assert_eq!(peak_line("gemm f16", 700123.456, "GFLOP/s", how, "H100", "2026-01-01T00:00:00Z"), PEAK);
        let how = "cuMemcpyDtoDAsync of 1024 MiB, (read + written bytes) / time";
        assert_eq!(peak_line("device copy", f64::NAN, "GB/s", how, "", ""), PEAK_NAN);
    }
}
