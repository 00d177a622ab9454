//! A diagnostic timeline of work spread over streams and devices, for finding where a multi-device
//! product waits: `SPARSEGPU_TIMELINE=1` makes such a product record a timed event after each step
//! on the stream that runs it and print the steps to standard error, in time order, once the
//! product is done. Events cost no SM, so a stamp on a copy stream does not wait for a busy device.
//! Each device's first stamp also runs a one-thread kernel that reads the device's global nanosecond
//! timer, which places that device's events on one clock with the others' (the global timers of one
//! host's GPUs agree to about a microsecond). Off (the default), a timeline queues nothing.

use super::kernels::UTIL;
use super::memory::DeviceBuffer;
use super::{Event, GpuDevice, Launch, Stream, launch};
use crate::error::Result;
use crate::kernel_args;
use std::sync::{Arc, OnceLock};

/// A device's reference: an event and the global timer read right after it.
struct Reference {
    ordinal: usize,
    event: Event,
    timer: DeviceBuffer,
}

/// A step: its label, the device's ordinal, the event recorded after it.
type Step = (String, usize, Event);

/// The steps recorded so far; `None` when timelines are off.
pub struct Timeline {
    title: String,
    steps: Option<(Vec<Reference>, Vec<Step>)>,
}

impl Timeline {
    /// A timeline titled `title`, recording only when `SPARSEGPU_TIMELINE=1`.
    pub fn start(title: impl FnOnce() -> String) -> Timeline {
        static ENABLED: OnceLock<bool> = OnceLock::new();
        let enabled = *ENABLED.get_or_init(|| std::env::var("SPARSEGPU_TIMELINE").is_ok_and(|v| v == "1"));
        match enabled {
            true => Timeline { title: title(), steps: Some((Vec::new(), Vec::new())) },
            false => Timeline { title: String::new(), steps: None },
        }
    }

    /// Marks the step `label` on `stream` of `device` (whose context is left current).
    pub fn stamp(&mut self, device: &Arc<GpuDevice>, stream: Stream, label: impl FnOnce() -> String) -> Result<()> {
        let Some((references, steps)) = self.steps.as_mut() else { return Ok(()) };
        if !references.iter().any(|r| r.ordinal == device.ordinal) {
            let event = Event::timed(device)?;
            event.record(stream)?;
            let timer = DeviceBuffer::alloc(device, 8, stream, "a timeline reference")?;
            let f = device.function(&UTIL, "timeline_stamp")?;
            let ptr = timer.ptr();
            let one = Launch { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };
            unsafe { launch(&f, one, stream, kernel_args![&ptr]) }?;
            references.push(Reference { ordinal: device.ordinal, event, timer });
        }
        let event = Event::timed(device)?;
        event.record(stream)?;
        steps.push((label(), device.ordinal, event));
        Ok(())
    }

    /// Waits for every step and prints them in time order, in milliseconds after the first.
    pub fn print(self) -> Result<()> {
        let Some((references, steps)) = self.steps else { return Ok(()) };
        let mut timers = Vec::with_capacity(references.len());
        for r in &references {
            let mut now = [0u64];
            r.timer.copy_to_host(&mut now)?;
            timers.push(now[0] as f64 * 1e-6);
        }
        let mut times = Vec::with_capacity(steps.len());
        for (label, ordinal, event) in &steps {
            event.synchronize()?;
            let r = references.iter().position(|r| r.ordinal == *ordinal).expect("a reference per device");
            times.push((timers[r] + references[r].event.elapsed_ms(event)? as f64, *ordinal, label.as_str()));
        }
        times.sort_by(|a, b| a.0.total_cmp(&b.0));
        let first = times.first().map_or(0.0, |t| t.0);
        let mut out = format!("timeline: {}\n", self.title);
        for (ms, ordinal, label) in times {
            out += &format!("timeline: {:9.3} ms  device {ordinal}  {label}\n", ms - first);
        }
        eprint!("{out}");
        Ok(())
    }
}
