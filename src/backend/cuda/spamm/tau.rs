//! The τ searches' candidate evaluations on the device ([`DeviceTauEvaluator`]): sorted norm segments,
//! the range, counts and skipped sums per candidate, bit-identical to the CPU's evaluator.

use super::*;

/// The candidates of one τ-search iteration as a kernel parameter (`SpammTuneCandidates`): `count`
/// ascending τ, the remaining slots repeating the last.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct TuneCandidates {
    pub(super) count: i32,
    pub(super) tau: [f64; tune::RATIO_CANDIDATES],
}

/// Doubles of two segments (A's column k and B's row k, each padded to a power of two) that one thread
/// block sorts in shared memory (48 KiB, the default limit); longer ones are sorted in global memory,
/// one launch per bitonic step.
pub(super) const SORT_IN_SHARED_MEMORY: usize = 6144;

/// Doubles of A's column k and B's row k the counting kernel copies into shared memory (32 KiB).
pub(super) const STAGE_IN_SHARED_MEMORY: usize = 4096;

/// The τ searches' [`CandidateEvaluator`] on the device, bit-identical to the CPU's
/// [`tune::NormMapEvaluator`]: A's columns and B's rows of the norm maps are sorted once (one kernel
/// that also reduces the products' range); an iteration is one counting kernel (plus, for the error
/// bound, one pass over all block products) and one copy of a few kilobytes back. The iterations'
/// accumulators alternate between two slots, each kernel clearing the other, so nothing else is
/// queued per iteration. Before a valid-ratio search the first iteration can ride along with the
/// range ([`DeviceTauEvaluator::anticipating_ratio_search`]): one wait for both instead of two.
pub struct DeviceTauEvaluator<'a> {
    pub(super) device: &'a Arc<GpuDevice>,
    pub(super) stream: Stream,
    pub(super) a_norms: &'a DeviceNormMap,
    pub(super) b_norms: &'a DeviceNormMap,
    /// Sorted columns of A (column k at `k · pitches.0`), sorted rows of B (row k at `k · pitches.1`),
    /// the summary (4 words) and two iterations' accumulators (4 · RATIO_CANDIDATES words each).
    pub(super) workspace: DeviceBuffer,
    pub(super) pitches: (usize, usize),
    /// The accumulators the next iteration uses (0 or 1).
    pub(super) parity: usize,
    /// Per candidate and column of C blocks, the sums of squares (allocated by the first bound pass).
    pub(super) column_sums: Option<DeviceBuffer>,
    /// Whether [`CandidateEvaluator::range`] also counts the valid-ratio search's first candidates
    /// ([`DeviceTauEvaluator::anticipating_ratio_search`]); cleared once it has.
    pub(super) anticipate: bool,
    /// Those candidates' evaluations, until the search asks for them.
    pub(super) anticipated: Option<Vec<Evaluation>>,
    /// How many times the search's candidates were the anticipated ones.
    pub(super) anticipation_hits: usize,
}

pub(super) const ACCUMULATOR_WORDS: usize = 4 * tune::RATIO_CANDIDATES;

impl<'a> DeviceTauEvaluator<'a> {
    /// Queues the sorting of the norm maps and the range's reduction (nothing waits yet).
    pub fn new(
        device: &'a Arc<GpuDevice>,
        stream: Stream,
        a_norms: &'a DeviceNormMap,
        b_norms: &'a DeviceNormMap,
    ) -> Result<Self> {
        let (mb, kb, nb) = (a_norms.block_rows, a_norms.block_cols, b_norms.block_cols);
        let pitches = (mb.next_power_of_two(), nb.next_power_of_two());
        let sorted_words = if mb * nb * kb == 0 { 0 } else { kb * (pitches.0 + pitches.1) };
        let words = sorted_words + 4 + 2 * ACCUMULATOR_WORDS;
        let workspace = DeviceBuffer::alloc(device, words * 8, stream, "the tau search")?;
        let evaluator = DeviceTauEvaluator {
            device,
            stream,
            a_norms,
            b_norms,
            workspace,
            pitches,
            parity: 0,
            column_sums: None,
            anticipate: false,
            anticipated: None,
            anticipation_hits: 0,
        };
        if sorted_words == 0 {
            return Ok(evaluator);
        }
        let counters = evaluator.summary_ptr();
        unsafe { drv::memset_d8_async(counters, 0, (4 + 2 * ACCUMULATOR_WORDS) * 8, stream.0) }
            .map_err(driver_error("clearing the tau search's counters"))?;
        let (sorted_a, sorted_b) = evaluator.sorted_ptrs();
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (an, bn) = (a_norms.norms.ptr(), b_norms.norms.ptr());
        if pitches.0 + pitches.1 <= SORT_IN_SHARED_MEMORY {
            let f = device.function(&SPAMM, "spamm_tune_sort_pairs")?;
            let cfg = Launch {
                grid: (kb.min(65535) as u32, 1, 1),
                block: (256, 1, 1),
                shared_bytes: ((pitches.0 + pitches.1) * 8) as u32,
            };
            let (pa, pb) = (pitches.0 as i32, pitches.1 as i32);
            unsafe {
                launch(
                    &f,
                    cfg,
                    stream,
                    kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &sorted_a, &pa, &sorted_b, &pb, &counters],
                )
            }?;
        } else {
            let flags = counters + 8;
            // Column k of A: contiguous. Row k of B: stride kb.
            sort_in_global_memory(device, stream, an, (1, mb), mb, kb, pitches.0, sorted_a, flags)?;
            sort_in_global_memory(device, stream, bn, (kb, 1), nb, kb, pitches.1, sorted_b, flags)?;
            let f = device.function(&SPAMM, "spamm_tune_range")?;
            let (pa, pb) = (pitches.0 as i64, pitches.1 as i64);
            unsafe {
                launch(
                    &f,
                    flat_launch(device, kb),
                    stream,
                    kernel_args![&mb_i, &nb_i, &kb_i, &sorted_a, &pa, &sorted_b, &pb, &counters],
                )
            }?;
        }
        Ok(evaluator)
    }

    pub(super) fn dims(&self) -> (usize, usize, usize) {
        (self.a_norms.block_rows, self.b_norms.block_cols, self.a_norms.block_cols)
    }

    pub(super) fn sorted_ptrs(&self) -> (CUdeviceptr, CUdeviceptr) {
        let kb = self.a_norms.block_cols;
        let base = self.workspace.ptr();
        (base, base + (kb * self.pitches.0 * 8) as u64)
    }

    pub(super) fn summary_ptr(&self) -> CUdeviceptr {
        let (mb, nb, kb) = self.dims();
        let sorted_words = if mb * nb * kb == 0 { 0 } else { kb * (self.pitches.0 + self.pitches.1) };
        self.workspace.ptr() + (sorted_words * 8) as u64
    }

    pub(super) fn accumulators(&self, parity: usize) -> CUdeviceptr {
        self.summary_ptr() + ((4 + parity * ACCUMULATOR_WORDS) * 8) as u64
    }

    /// Has [`CandidateEvaluator::range`] also count the valid-ratio search's first candidates,
    /// derived from the range on the device exactly as [`tune::tune_for_ratio`] derives them on the
    /// host, and bring the range and the counts back in one copy: the search's first iteration then
    /// costs no round trip of its own. Only worth it before a valid-ratio search (the error-bound
    /// search starts from other candidates, and would pay for a count it never uses).
    pub fn anticipating_ratio_search(mut self) -> Self {
        self.anticipate = true;
        self
    }

    /// How many times an evaluation was served by the anticipated first iteration.
    pub fn anticipation_hits(&self) -> usize {
        self.anticipation_hits
    }

    /// Queues one iteration's kernels (for [`CandidateEvaluator::evaluate`], and for timing the
    /// device's share of an iteration); returns the accumulator slot its results go to.
    pub fn queue(&mut self, taus: &[f64], squares: bool) -> Result<usize> {
        let limit = if squares { tune::BOUND_CANDIDATES } else { tune::RATIO_CANDIDATES };
        if taus.is_empty() || taus.len() > limit {
            return Err(Error::internal(format!("the tau search asked for {} candidates", taus.len())));
        }
        let mut candidates =
            TuneCandidates { count: taus.len() as i32, tau: [taus[taus.len() - 1]; tune::RATIO_CANDIDATES] };
        candidates.tau[..taus.len()].copy_from_slice(taus);
        let parity = self.queue_count(&candidates, 0)?;
        if squares {
            let (mb, nb, kb) = self.dims();
            let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
            let (device, stream, out) = (self.device, self.stream, self.accumulators(parity));
            if self.column_sums.is_none() {
                let bytes = tune::BOUND_CANDIDATES * nb * 8;
                self.column_sums = Some(DeviceBuffer::alloc(device, bytes, stream, "the error-bound search")?);
            }
            let sums = self.column_sums.as_ref().map_or(0, |b| b.ptr());
            let (an, bn) = (self.a_norms.norms.ptr(), self.b_norms.norms.ptr());
            let skipped = device.function(&SPAMM, "spamm_tune_skipped")?;
            let cfg = Launch { grid: (nb.min(65535) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
            unsafe { launch(&skipped, cfg, stream, kernel_args![&mb_i, &nb_i, &kb_i, &an, &bn, &candidates, &sums]) }?;
            let total = device.function(&SPAMM, "spamm_tune_skipped_total")?;
            let cfg = Launch { grid: (1, 1, 1), block: (32, 1, 1), shared_bytes: 0 };
            let (count_i, totals) = (taus.len() as i32, out + (3 * tune::RATIO_CANDIDATES * 8) as u64);
            unsafe { launch(&total, cfg, stream, kernel_args![&nb_i, &count_i, &sums, &totals]) }?;
        }
        Ok(parity)
    }

    /// Queues the counting kernel over `candidates`, or over the first ratio candidates derived from
    /// the summary at `derive` (non-zero); returns the accumulator slot its results go to.
    pub(super) fn queue_count(&mut self, candidates: &TuneCandidates, derive: CUdeviceptr) -> Result<usize> {
        let (mb, nb, kb) = self.dims();
        if mb * nb * kb == 0 {
            return Err(Error::internal("the tau search evaluated candidates of an empty product"));
        }
        let (device, stream) = (self.device, self.stream);
        device.bind()?;
        let parity = self.parity;
        self.parity ^= 1;
        let (mb_i, nb_i, kb_i) = (mb as i32, nb as i32, kb as i32);
        let (sa, sb) = self.sorted_ptrs();
        let (pa, pb) = (self.pitches.0 as i64, self.pitches.1 as i64);
        let (out, next) = (self.accumulators(parity), self.accumulators(parity ^ 1));
        let staged = (mb + nb <= STAGE_IN_SHARED_MEMORY) as i32;
        let count = device.function(&SPAMM, "spamm_tune_count")?;
        let cfg = Launch {
            grid: (kb.min(device.multiprocessors * 2) as u32, 1, 1),
            block: (1024, 1, 1),
            // A's column, then B's row between the sentinels 0 and +inf.
            shared_bytes: if staged == 1 { ((mb + nb + 2) * 8) as u32 } else { 0 },
        };
        unsafe {
            launch(
                &count,
                cfg,
                stream,
                kernel_args![&mb_i, &nb_i, &kb_i, &sa, &pa, &sb, &pb, &staged, candidates, &derive, &out, &next],
            )
        }?;
        Ok(parity)
    }
}

/// The evaluations of `taus` from one iteration's accumulators as the counting kernel leaves them
/// (`[performed | largest skipped | ~smallest performed | skipped squares]`, slots of
/// [`tune::RATIO_CANDIDATES`]).
pub(super) fn evaluations_from(taus: &[f64], results: &[u64], squares: bool) -> Vec<Evaluation> {
    let slots = tune::RATIO_CANDIDATES;
    taus.iter()
        .enumerate()
        .map(|(c, &tau)| Evaluation {
            tau,
            performed: results[c],
            largest_skipped: f64::from_bits(results[slots + c]),
            smallest_performed: f64::from_bits(!results[2 * slots + c]),
            skipped_squares: if squares { f64::from_bits(results[3 * slots + c]) } else { f64::NAN },
        })
        .collect()
}

/// `segments` segments of `len` norms (element e of segment s at `src + 8·(s·strides.1 + e·strides.0)`)
/// sorted ascending into `dst`, segment s at `s · padded` (padded: a power of two ≥ len, the tail
/// +∞), one launch per bitonic step. Sets `*flags` bit 0 where a norm is not finite.
#[allow(clippy::too_many_arguments)]
pub(super) fn sort_in_global_memory(
    device: &Arc<GpuDevice>,
    stream: Stream,
    src: CUdeviceptr,
    (element_stride, segment_stride): (usize, usize),
    len: usize,
    segments: usize,
    padded: usize,
    dst: CUdeviceptr,
    flags: CUdeviceptr,
) -> Result<()> {
    let (es, ss, len_i, segments_i, padded_i) =
        (element_stride as i64, segment_stride as i64, len as i32, segments as i32, padded as i32);
    let load = device.function(&SPAMM, "spamm_tune_sort_load")?;
    unsafe {
        launch(
            &load,
            flat_launch(device, segments * padded),
            stream,
            kernel_args![&src, &es, &ss, &len_i, &segments_i, &padded_i, &dst, &flags],
        )
    }?;
    let step = device.function(&SPAMM, "spamm_tune_sort_step")?;
    let cfg = flat_launch(device, segments * padded / 2);
    let mut size = 2;
    while size <= padded {
        let mut stride = size / 2;
        while stride > 0 {
            let (size_i, stride_i) = (size as i32, stride as i32);
            unsafe { launch(&step, cfg, stream, kernel_args![&dst, &segments_i, &padded_i, &size_i, &stride_i]) }?;
            stride /= 2;
        }
        size *= 2;
    }
    Ok(())
}

impl CandidateEvaluator for DeviceTauEvaluator<'_> {
    fn prepare_ratio_search(&mut self) {
        self.anticipate = true;
    }

    fn range(&mut self) -> Result<ProductRange> {
        let dims = self.dims();
        if dims.0 * dims.1 * dims.2 == 0 {
            return Ok(ProductRange { dims, min: 0.0, max: 0.0, positive_floor: 0.0 });
        }
        // The summary, followed by the first slot of accumulators where the first iteration was
        // anticipated (its counts, and in the squares' slot the candidates it derived).
        let anticipate = std::mem::take(&mut self.anticipate);
        if anticipate {
            let empty = TuneCandidates { count: 0, tau: [0.0; tune::RATIO_CANDIDATES] };
            let parity = self.queue_count(&empty, self.summary_ptr())?;
            debug_assert_eq!(parity, 0, "the anticipated iteration is the first");
        }
        let mut copied = vec![0u64; if anticipate { 4 + ACCUMULATOR_WORDS } else { 4 }];
        self.device.bind()?;
        unsafe { drv::memcpy_dtoh_async(&mut copied[..], self.summary_ptr(), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        let summary = &copied[..4];
        if anticipate {
            let results = &copied[4..];
            let derived = &results[3 * tune::RATIO_CANDIDATES..];
            let taus: Vec<f64> =
                derived.iter().take_while(|&&bits| bits != 0).map(|&bits| f64::from_bits(bits)).collect();
            self.anticipated = Some(evaluations_from(&taus, results, false));
        }
        if summary[1] != 0 {
            return Err(tune::non_finite_norms());
        }
        // summary[3] == 0: no k has positive norms on both sides.
        let floor = if summary[3] == 0 { 0.0 } else { f64::from_bits(!summary[3]) };
        Ok(ProductRange {
            dims,
            min: f64::from_bits(!summary[2]),
            max: f64::from_bits(summary[0]),
            positive_floor: floor,
        })
    }

    fn evaluate(&mut self, taus: &[f64], squares: bool) -> Result<Vec<Evaluation>> {
        if let Some(anticipated) = self.anticipated.take() {
            let same = |e: &Evaluation, &tau: &f64| e.tau.to_bits() == tau.to_bits();
            if !squares && anticipated.len() == taus.len() && anticipated.iter().zip(taus).all(|(e, t)| same(e, t)) {
                self.anticipation_hits += 1;
                return Ok(anticipated);
            }
        }
        let parity = self.queue(taus, squares)?;
        let slots = tune::RATIO_CANDIDATES;
        let mut results = vec![0u64; if squares { 4 * slots } else { 3 * slots }];
        unsafe { drv::memcpy_dtoh_async(&mut results[..], self.accumulators(parity), self.stream.0) }
            .map_err(driver_error("copying to the host"))?;
        self.device.synchronize(self.stream)?;
        Ok(evaluations_from(taus, &results, squares))
    }
}
