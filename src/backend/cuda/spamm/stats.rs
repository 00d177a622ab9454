//! Statistics without stopping the caller's stream: the per-C-block counts and skipped sums reduced on
//! the device in the CPU's order, copied into pinned host words behind an event.

use super::*;

/// Words the device copies into pinned host memory behind an event: the host reads them after
/// waiting for that event only, not for the stream.
pub(super) struct PinnedWords {
    pub(super) host: *mut u64,
    pub(super) len: usize,
    /// Recorded after every copy into `host`.
    pub(super) copied: Event,
}

// SAFETY: the pinned memory and the event belong to the device's context, usable from any thread; the
// handle owning them is used by one thread at a time.
unsafe impl Send for PinnedWords {}

impl PinnedWords {
    pub(super) fn new(device: &Arc<GpuDevice>, len: usize) -> Result<Self> {
        let copied = Event::new(device)?;
        let host = unsafe { drv::malloc_host(len.max(1) * 8, CU_MEMHOSTALLOC_PORTABLE) }
            .map_err(driver_error("allocating pinned host memory"))? as *mut u64;
        Ok(PinnedWords { host, len, copied })
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Queues on `stream` the copy of `words` words at `from` (device memory of the event's device)
    /// into the first words, after any earlier copy into them (which may have been queued on another
    /// stream), and records the event.
    pub(super) fn record_from(&self, stream: Stream, from: CUdeviceptr, words: usize) -> Result<()> {
        assert!(words <= self.len, "{words} words into pinned memory of {}", self.len);
        self.copied.wait_on(stream)?;
        unsafe { drv::memcpy_dtoh_async(std::slice::from_raw_parts_mut(self.host, words), from, stream.0) }
            .map_err(driver_error("copying to pinned host memory"))?;
        self.copied.record(stream)
    }

    /// The first `words` words (at most all) as the last copy left them (waits for it).
    pub(super) fn wait(&self, words: usize) -> Result<&[u64]> {
        self.copied.synchronize()?;
        // SAFETY: the copy into the memory has completed, and nothing writes it until the next
        // `record_from`, which takes `&self` only after this borrow ends.
        Ok(unsafe { std::slice::from_raw_parts(self.host, words.min(self.len)) })
    }
}

impl Drop for PinnedWords {
    fn drop(&mut self) {
        // A copy may still be in flight into the pinned memory: wait before freeing it (the event
        // goes after this, with the struct's fields).
        let _ = self.copied.synchronize();
        if self.copied.device().bind().is_ok() {
            unsafe { drv::free_host(self.host as *mut _) }.ok();
        }
    }
}

/// Where a product's statistics land without stopping the caller's stream: two pinned words the
/// device copies a product's statistics totals into, performed products and the bits of the f64 sum
/// of squared skipped sums. A handle keeps one per device, with a stream of that device on which
/// [`gemm`] computes the statistics beside the multiplication (nothing in the multiplication reads
/// them).
pub struct StatsSlot {
    pub(super) words: PinnedWords,
    pub(super) side: Arc<CudaStream>,
}

impl StatsSlot {
    pub fn new(device: &Arc<GpuDevice>) -> Result<Self> {
        Ok(StatsSlot { words: PinnedWords::new(device, 2)?, side: device.new_stream()? })
    }

    pub fn device(&self) -> &Arc<GpuDevice> {
        self.words.copied.device()
    }

    /// The totals of the last product recorded into the slot (waits for its copy).
    pub fn wait(&self) -> Result<(u64, f64)> {
        let words = self.words.wait(2)?;
        Ok((words[0], f64::from_bits(words[1])))
    }

    /// The stream the statistics are computed on.
    pub(super) fn side_stream(&self) -> Stream {
        Stream(self.side.cu_stream())
    }

    /// Queues on `stream` the copy of 16 bytes of device totals into the slot.
    pub(super) fn record(&self, stream: Stream, totals: &DeviceBuffer) -> Result<()> {
        self.record_from(stream, totals.ptr())
    }

    /// [`StatsSlot::record`] from 16 bytes at `totals` on the slot's device.
    pub(super) fn record_from(&self, stream: Stream, totals: CUdeviceptr) -> Result<()> {
        self.words.record_from(stream, totals, 2)
    }
}

/// The statistics totals of a product from its whole norm maps (`an` mb × kb, `bn` kb × nb), queued
/// on `stream`: 16 bytes, performed products and the bits of the sum of squared skipped sums, summed
/// in the CPU's order (`spamm_block_stats`, `spamm_stats_sum`; [`crate::spamm::BlockStats::totals`])
/// so that the reported bound is the CPU's to the bit. With `row_work` (mb zeroed u64), also each
/// block row's performed products.
pub(super) fn product_stats(
    device: &Arc<GpuDevice>,
    stream: Stream,
    (an, bn): (CUdeviceptr, CUdeviceptr),
    tau: f64,
    (mb, nb, kb): (usize, usize, usize),
    row_work: Option<CUdeviceptr>,
) -> Result<DeviceBuffer> {
    let totals = DeviceBuffer::zeroed(device, 16, stream, "SpAMM statistics")?;
    if mb * nb > 0 {
        let column_sums = DeviceBuffer::alloc(device, nb * 8, stream, "SpAMM statistics")?;
        let f = device.function(&SPAMM, "spamm_block_stats")?;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (sums, out, rows) = (column_sums.ptr(), totals.ptr(), row_work.unwrap_or(0));
        let cfg = Launch { grid: (nb.min(65535) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
        unsafe { launch(&f, cfg, stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &tau, &sums, &out, &rows]) }?;
        let f = device.function(&SPAMM, "spamm_stats_sum")?;
        let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
        unsafe { launch(&f, cfg, stream, kernel_args![&nb_i, &sums, &out]) }?;
    }
    Ok(totals)
}
