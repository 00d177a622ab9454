//! A diagnostic timeline of work spread over streams and devices, for finding where a multi-device
//! product waits: `SPARSEGPU_TIMELINE=1` makes such a product record a timed event after each step
//! on the stream that runs it and print the steps to standard error, in time order, once the
//! product is done. Events cost no SM, so a stamp on a copy stream does not wait for a busy device.
//! Each device's first stamp also runs a one-thread kernel that reads the device's global nanosecond
//! timer, which places that device's events on its own clock. The clocks of one host's GPUs need not
//! agree (on a 4-GPU H100 host they differed by up to 3.6 ms), so every other device also reads its
//! timer on an idle stream of its own that waits for the first device's reference: that read comes
//! a few microseconds after the first device's, which gives the difference of the two clocks. Off
//! (the default), a timeline queues nothing.

use super::kernels::UTIL;
use super::memory::DeviceBuffer;
use super::{Event, GpuDevice, Launch, Stream, launch};
use crate::error::Result;
use crate::kernel_args;
use std::sync::{Arc, OnceLock};

/// A device's reference: an event and the global timer read right after it; on any device but the
/// first, also its timer read as soon as the first device's reference event has completed (on an idle
/// stream of its own, kept until the timeline is printed).
struct Reference {
    ordinal: usize,
    event: Event,
    timer: DeviceBuffer,
    handshake: Option<(DeviceBuffer, Arc<cudarc::driver::CudaStream>)>,
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
            let f = device.function(&UTIL, "timeline_stamp")?;
            let one = Launch { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };
            let read_timer = |stream: Stream| -> Result<DeviceBuffer> {
                let timer = DeviceBuffer::alloc(device, 8, stream, "a timeline reference")?;
                let ptr = timer.ptr();
                unsafe { launch(&f, one, stream, kernel_args![&ptr]) }?;
                Ok(timer)
            };
            let handshake = match references.first() {
                Some(first) => {
                    let idle = device.new_stream()?;
                    first.event.wait_on(Stream(idle.cu_stream()))?;
                    Some((read_timer(Stream(idle.cu_stream()))?, idle))
                }
                None => None,
            };
            let event = Event::timed(device)?;
            event.record(stream)?;
            let timer = read_timer(stream)?;
            references.push(Reference { ordinal: device.ordinal, event, timer, handshake });
        }
        let event = Event::timed(device)?;
        event.record(stream)?;
        steps.push((label(), device.ordinal, event));
        Ok(())
    }

    /// Waits for every step and prints them in time order, in milliseconds after the first.
    pub fn print(self) -> Result<()> {
        let Some((references, steps)) = self.steps else { return Ok(()) };
        let read = |timer: &DeviceBuffer| -> Result<f64> {
            let mut now = [0u64];
            timer.copy_to_host(&mut now)?;
            Ok(now[0] as f64 * 1e-6)
        };
        // Each reference's timer on the first device's clock (milliseconds).
        let mut timers = Vec::with_capacity(references.len());
        for r in &references {
            let ahead = match &r.handshake {
                Some((timer, _)) => read(timer)? - timers[0],
                None => 0.0,
            };
            timers.push(read(&r.timer)? - ahead);
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
