//! A diagnostic timeline of work spread over streams and devices, for finding where a multi-device
//! product waits: `SPARSEGPU_TIMELINE=1` makes such a product record a timed event after each step
//! on the stream that runs it and print the steps to standard error, in time order, once the
//! product is done. Events cost no SM, so a stamp on a copy stream does not wait for a busy device.
//! Each device's first stamp also runs a one-thread kernel that reads the device's global nanosecond
//! timer, which places that device's events on its own clock. The clocks of one host's GPUs need not
//! agree (on a 4-GPU H100 host they differed by up to 3.6 ms), so each other device's first stamp
//! also compares its clock with the first device's: on idle streams of their own, the first device
//! spins for [`HANDSHAKE_NS`] and then reads its timer and records an event, and the other device
//! reads its timer once that event has completed. The spin outlasts the host's queueing of the
//! other half, so both reads follow the event's completion, the other one by the latency of an
//! event between devices. Off (the default), a timeline queues nothing.

use super::kernels::UTIL;
use super::memory::DeviceBuffer;
use super::{Event, GpuDevice, Launch, Stream, launch};
use crate::error::Result;
use crate::kernel_args;
use std::sync::{Arc, OnceLock};

/// How long the first device spins before its half of a handshake: far longer than the host takes
/// to queue the other device's half.
const HANDSHAKE_NS: u64 = 200_000;

/// The launch of a timer kernel: one thread.
const ONE_THREAD: Launch = Launch { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };

/// A device's reference: an event and the global timer read right after it; on any device but the
/// first, also the handshake that compares its clock with the first device's.
struct Reference {
    device: Arc<GpuDevice>,
    event: Event,
    timer: DeviceBuffer,
    handshake: Option<Handshake>,
}

/// The first device's timer read at the end of its spin (`first`), and this device's read once the
/// event recorded after the spin has completed (`this`); the streams and the event are kept until
/// the timeline is printed.
struct Handshake {
    first: DeviceBuffer,
    this: DeviceBuffer,
    _gate: Event,
    _streams: [Arc<cudarc::driver::CudaStream>; 2],
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
        if !references.iter().any(|r| r.device.ordinal == device.ordinal) {
            let handshake = match references.first() {
                Some(reference) => {
                    let first = &reference.device;
                    let first_idle = first.new_stream()?;
                    let on_first = Stream(first_idle.cu_stream());
                    let first_timer = DeviceBuffer::alloc(first, 8, on_first, "a timeline handshake")?;
                    let (f, ns, ptr) = (first.function(&UTIL, "timeline_spin_stamp")?, HANDSHAKE_NS, first_timer.ptr());
                    unsafe { launch(&f, ONE_THREAD, on_first, kernel_args![&ns, &ptr]) }?;
                    let gate = Event::new(first)?;
                    gate.record(on_first)?;
                    let idle = device.new_stream()?;
                    let on_this = Stream(idle.cu_stream());
                    gate.wait_on(on_this)?;
                    let this = read_timer(device, on_this)?;
                    Some(Handshake { first: first_timer, this, _gate: gate, _streams: [first_idle, idle] })
                }
                None => None,
            };
            let event = Event::timed(device)?;
            event.record(stream)?;
            let timer = read_timer(device, stream)?;
            references.push(Reference { device: device.clone(), event, timer, handshake });
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
                Some(h) => read(&h.this)? - read(&h.first)?,
                None => 0.0,
            };
            timers.push(read(&r.timer)? - ahead);
        }
        let mut times = Vec::with_capacity(steps.len());
        for (label, ordinal, event) in &steps {
            event.synchronize()?;
            let r = references.iter().position(|r| r.device.ordinal == *ordinal).expect("a reference per device");
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

/// Queues a read of `device`'s global timer on `stream`, into the returned word.
fn read_timer(device: &Arc<GpuDevice>, stream: Stream) -> Result<DeviceBuffer> {
    let timer = DeviceBuffer::alloc(device, 8, stream, "a timeline reference")?;
    let f = device.function(&UTIL, "timeline_stamp")?;
    let ptr = timer.ptr();
    unsafe { launch(&f, ONE_THREAD, stream, kernel_args![&ptr]) }?;
    Ok(timer)
}
