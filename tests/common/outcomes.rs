//! Records of the tests that depend on the machine: on a GPU, on NVRTC, on compilers and build tools,
//! or on files outside the test executable (the checkout's sources, shared data). Such a test passes
//! where what it needs is missing, having done nothing; so each records whether it ran or was skipped,
//! and why, and the run's last test target (`bench/tests/zz_summary.rs`) counts the records, so that a
//! run on a machine without a GPU cannot pass for a run of the GPU tests.
//!
//! The records of a run are files in a folder of its own under `sparsegpu-test-outcomes/`, beside
//! the folder of the test executables (in `target/<profile>/` for cargo's `deps/`), never in the
//! source tree. A run is the process that starts the test executables one after another: cargo, or
//! a script running executables carried to another machine. Every executable of the run has it as
//! parent, and its id with its start time names no other run, so records of earlier runs, complete
//! or not, are never counted.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;

/// What a test depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A usable CUDA device (libcuda, libnvrtc, a GPU).
    Gpu,
    /// libnvrtc, without a GPU.
    Nvrtc,
    /// C, C++ and Fortran compilers and build tools (pkg-config, CMake, make, readelf).
    Compilers,
    /// Files beside the test executable: the checkout's sources and data.
    Files,
}

impl Category {
    pub const ALL: [Category; 4] = [Category::Gpu, Category::Nvrtc, Category::Compilers, Category::Files];

    /// The category's name in the records.
    pub fn key(self) -> &'static str {
        match self {
            Category::Gpu => "gpu",
            Category::Nvrtc => "nvrtc",
            Category::Compilers => "compilers",
            Category::Files => "files",
        }
    }

    pub fn from_key(key: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.key() == key)
    }

    /// How the summary names the tests of the category.
    pub fn tests(self) -> &'static str {
        match self {
            Category::Gpu => "GPU-dependent",
            Category::Nvrtc => "NVRTC-dependent",
            Category::Compilers => "compiler-dependent",
            Category::Files => "file-dependent",
        }
    }

    /// The variable that, set to 1, makes a skip of the category a failure.
    pub fn required_by(self) -> Option<&'static str> {
        match self {
            Category::Gpu => Some("SPARSEGPU_REQUIRE_GPU"),
            Category::Nvrtc => Some("SPARSEGPU_REQUIRE_NVRTC"),
            Category::Compilers => Some("SPARSEGPU_REQUIRE_COMPILERS"),
            Category::Files => None,
        }
    }

    /// Whether the variable of [`Category::required_by`] is set to 1.
    pub fn required(self) -> bool {
        self.required_by().is_some_and(|var| std::env::var(var).as_deref() == Ok("1"))
    }
}

/// The test running on this thread: libtest names each test's thread after the test.
pub fn current_test() -> String {
    std::thread::current().name().unwrap_or("(unnamed thread)").to_string()
}

/// Records that `test` ran the part of it that depends on `category`.
pub fn ran(category: Category, test: &str) {
    record(category, test, None);
}

/// Records that `test` skipped what depends on `category`, and why.
pub fn skipped(category: Category, test: &str, reason: &str) {
    record(category, test, Some(reason));
}

fn record(category: Category, test: &str, skip_reason: Option<&str>) {
    let Some(dir) = this_run() else {
        return;
    };
    let binary = binary_name();
    // One file per process: a test executable run again in the same run (as a child of itself)
    // appends to a file of its own.
    let file = dir.join(format!("{binary}-{}.tsv", std::process::id()));
    let field = |text: &str| text.replace(['\t', '\n', '\r'], " ");
    let (outcome, reason) = match skip_reason {
        None => ("ran", String::new()),
        Some(reason) => ("skipped", field(reason)),
    };
    let line = format!("{binary}\t{}\t{}\t{outcome}\t{reason}\n", field(test), category.key());
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        // One write of a whole line in append mode: tests recording side by side do not interleave.
        std::fs::OpenOptions::new().create(true).append(true).open(&file)?.write_all(line.as_bytes())
    });
    if let Err(e) = written {
        let _ = writeln!(std::io::stderr(), "cannot record a test outcome in {}: {e}", file.display());
    }
}

/// The test executable's name without cargo's hash (`smat_gpu-0123456789abcdef`) or the prefix of
/// executables gathered to be carried (`test-test-smat_gpu`).
pub fn binary_name() -> String {
    let exe = std::env::current_exe().ok();
    let name = exe.as_ref().and_then(|e| e.file_name()).map_or("unknown".into(), |n| n.to_string_lossy().into_owned());
    let name = name.strip_prefix("test-test-").unwrap_or(&name);
    match name.rsplit_once('-') {
        Some((stem, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => stem.to_string(),
        _ => name.to_string(),
    }
}

/// The folder holding every run's records: beside the folder of the test executables.
pub fn records_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.join("sparsegpu-test-outcomes"))
}

/// The folder of this run's records.
pub fn this_run() -> Option<PathBuf> {
    Some(records_root()?.join(run_id()))
}

/// The id of the process that started this test executable and its start time, as
/// `PID-STARTTIME` (clock ticks after boot: field 22 of `/proc/PID/stat`).
pub fn run_id() -> String {
    let parent = std::os::unix::process::parent_id();
    let started = std::fs::read_to_string(format!("/proc/{parent}/stat")).ok().and_then(|stat| {
        // The command name (field 2, in parentheses) may hold spaces: count fields after it.
        let after_name = &stat[stat.rfind(')')? + 1..];
        after_name.split_whitespace().nth(19).map(str::to_string)
    });
    format!("{parent}-{}", started.unwrap_or_default())
}

/// One record: a test and what it did with one category.
#[derive(Clone, Debug)]
pub struct Record {
    pub binary: String,
    pub test: String,
    pub category: Category,
    /// Why the test skipped what depends on the category; None when it ran.
    pub skip_reason: Option<String>,
}

/// Every record of this run, from all its test executables.
pub fn read_this_run() -> Vec<Record> {
    let Some(dir) = this_run() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for line in text.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            if let [binary, test, category, outcome, reason] = fields[..]
                && let Some(category) = Category::from_key(category)
            {
                let skip_reason = (outcome == "skipped").then(|| reason.to_string());
                records.push(Record { binary: binary.into(), test: test.into(), category, skip_reason });
            }
        }
    }
    records
}

/// Removes the records of other runs last written more than `age` ago (a run still going writes
/// its records within minutes).
pub fn remove_old_runs(age: std::time::Duration) {
    let (Some(root), Some(this)) = (records_root(), this_run()) else {
        return;
    };
    let Ok(runs) = std::fs::read_dir(root) else {
        return;
    };
    for run in runs.flatten() {
        let old =
            run.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|e| e > age);
        if old && run.path() != this {
            let _ = std::fs::remove_dir_all(run.path());
        }
    }
}
