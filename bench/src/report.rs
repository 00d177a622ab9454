//! Results: one `Measurement` per comparison, printed as a table per family and written as JSON
//! lines (one object per measurement).

use std::fmt::Write as _;
use std::io::Write as _;

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
            let line = format!(
                "{{\"family\":\"peak\",\"op\":{},\"value\":{},\"unit\":{},\"method\":{},\"gpu\":{},\"date\":{}}}",
                json_str(name),
                json_num(value),
                json_str(unit),
                json_str(how),
                json_str(&self.gpu),
                json_str(&self.date)
            );
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

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(v: f64) -> String {
    if v.is_finite() { format!("{v:e}") } else { "null".into() }
}

fn json_opt(v: Option<f64>) -> String {
    v.map(json_num).unwrap_or_else(|| "null".into())
}

fn json_line(m: &Measurement, gpu: &str, date: &str) -> String {
    let (status, message) = match &m.verdict {
        Verdict::Ok => ("ok", String::new()),
        Verdict::Mismatch(why) => ("mismatch", why.clone()),
        Verdict::NotAvailable(why) => ("not available", why.clone()),
    };
    let fields: Vec<(&str, String)> = vec![
        ("family", json_str(m.family)),
        ("op", json_str(&m.op)),
        ("vendor_op", json_str(&m.vendor_op)),
        ("type", json_str(m.ty)),
        ("input", json_str(&m.input)),
        ("shape", json_str(&m.shape)),
        ("density", json_opt(m.density)),
        ("valid_ratio", json_opt(m.valid_ratio)),
        ("tau", json_opt(m.tau)),
        ("devices", m.devices.to_string()),
        ("ours_ms", json_opt(m.ours_ms)),
        ("ours_wall_ms", json_opt(m.ours_wall_ms)),
        ("vendor_ms", json_opt(m.vendor_ms)),
        ("vendor_wall_ms", json_opt(m.vendor_wall_ms)),
        ("speedup", json_opt(m.speedup())),
        ("gflops", json_opt(m.gflops())),
        ("gbps", json_opt(m.gbps())),
        ("pct_of_peak", json_opt(m.pct_of_peak())),
        ("vendor_gflops", json_opt(m.vendor_gflops())),
        ("vendor_gbps", json_opt(m.vendor_gbps())),
        ("peak", json_opt(m.peak.map(|p| p.0))),
        ("peak_unit", m.peak.map(|p| json_str(p.1)).unwrap_or_else(|| "null".into())),
        ("error", json_opt(m.error)),
        ("error_bound", json_opt(m.error_bound)),
        ("status", json_str(status)),
        ("message", json_str(&message)),
        ("note", json_str(&m.note)),
        ("gpu", json_str(gpu)),
        ("date", json_str(date)),
    ];
    let body: Vec<String> = fields.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", body.join(","))
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
