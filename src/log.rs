//! What the library chose, on standard error: with `SPARSEGPU_LOG=info` every product, analysis and
//! partitioning reports in one line the algorithm, kernels, tile shapes and partitioning it used.
//!
//! The family serving a call opens a [`Call`] where the call starts and finishes it with the plan it
//! made; the backend adds what only it knows (the kernels it launched, how it cut the work) with
//! [`note`] while the call is open on the thread. The line is written when the call succeeds; a call
//! that fails reports through its status and message instead. The level is read once per process;
//! when it is off (the default), opening, noting and finishing cost one load of it, and nothing is
//! formatted.

use std::cell::RefCell;
use std::io::Write;
use std::sync::OnceLock;

/// The environment variable holding the level.
pub const VARIABLE: &str = "SPARSEGPU_LOG";

/// How much the library reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing (unset, empty or `off`).
    Off,
    /// One line per call (`info`).
    Info,
}

impl Level {
    /// The level a value of [`VARIABLE`] names (case aside); None for anything else.
    pub fn parse(value: &str) -> Option<Level> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "off" => Some(Level::Off),
            "info" => Some(Level::Info),
            _ => None,
        }
    }
}

/// The process's level, from [`VARIABLE`] at first use. A value that names no level leaves logging
/// off and says so once.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let value = std::env::var_os(VARIABLE).unwrap_or_default();
        match value.to_str().and_then(Level::parse) {
            Some(level) => level,
            None => {
                write_line(&format!("{VARIABLE}={value:?} is not a log level (off, info): logging stays off"));
                Level::Off
            }
        }
    })
}

#[inline]
pub fn enabled() -> bool {
    level() >= Level::Info
}

thread_local! {
    /// What the backend noted of the call open on this thread; None when no call is open.
    static NOTES: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// A call being reported, from its start to [`Call::finish`]; inert when logging is off. Dropped
/// unfinished (the call failed), it writes nothing.
#[must_use = "a call's line is written by Call::finish"]
pub struct Call {
    open: bool,
    /// The notes of a call this one runs inside, given back when this one ends.
    outer: Option<Vec<String>>,
}

impl Call {
    pub fn open() -> Call {
        if !enabled() {
            return Call { open: false, outer: None };
        }
        let outer = NOTES.with(|notes| notes.borrow_mut().replace(Vec::new()));
        Call { open: true, outer }
    }

    /// Whether the call will be reported: work done only to describe it belongs behind this.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Writes the call's line: `describe()` (the family's plan), then the backend's notes.
    pub fn finish(mut self, describe: impl FnOnce() -> String) {
        if !self.open {
            return;
        }
        self.open = false;
        let notes = NOTES.with(|notes| std::mem::replace(&mut *notes.borrow_mut(), self.outer.take()));
        let mut line = describe();
        for note in notes.unwrap_or_default() {
            line += "; ";
            line += &note;
        }
        write_line(&line);
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if self.open {
            let outer = self.outer.take();
            NOTES.with(|notes| *notes.borrow_mut() = outer);
        }
    }
}

/// Adds `describe()` to the line of the call open on this thread (once: a note made again, as by
/// each device of a shared product, is kept once). Nothing happens when no call is open.
pub fn note(describe: impl FnOnce() -> String) {
    if !enabled() || NOTES.with(|notes| notes.borrow().is_none()) {
        return;
    }
    let note = describe();
    NOTES.with(|notes| {
        if let Some(notes) = notes.borrow_mut().as_mut()
            && !notes.contains(&note)
        {
            notes.push(note);
        }
    });
}

/// One whole line on standard error, written at once so that lines of calls on several threads do
/// not interleave.
fn write_line(text: &str) {
    let line = format!("sparsegpu: {text}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_named_off_and_info_in_any_case() {
        for (value, level) in [("", Level::Off), ("off", Level::Off), (" OFF ", Level::Off), ("info", Level::Info)] {
            assert_eq!(Level::parse(value), Some(level), "{value:?}");
        }
        assert_eq!(Level::parse("Info"), Some(Level::Info));
        for value in ["debug", "1", "on", "verbose"] {
            assert_eq!(Level::parse(value), None, "{value:?}");
        }
    }
}
