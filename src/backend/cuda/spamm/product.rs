//! One product's call sequence on the lead device: staging, norm maps, τ, the multiplication of the
//! lead's rows and the statistics beside it, and the shares of other devices when the product is split.

use super::*;

/// `C ← α·Σ_(valid k) op(A)_ik·op(B)_kj + β·C` on the handle's device (the lead), with C
/// column-major `m × n` (`ldc`) at `c_ptr` (host or device, `c_len` elements), shared with the
/// devices of `shared` when given (cuSpAMM section 3.4; the caller checked [`splits`]).
///
/// The statistics totals of the whole product are queued into `stats` (nothing waits for the stream
/// unless C or an input is in host memory, or the product is shared). `kernels` selects the FP32 kernel
/// ([`runs_3xtf32`]). A τ to be searched ([`TauRule`]) is searched on the product's own norm maps
/// once they are computed (the host waits for each search iteration). Returns (mb, nb, kb) and τ.
///
/// A shared product cuts C's rows at block-row boundaries by valid block products, each device
/// getting its fraction of them ([`SharedDevices`]: equal at first, then adapted so that the devices
/// finish together). The lead computes the first rows in place on the caller's stream; each other
/// device computes its rows in its workspace ([`start_shares`], [`finish_shares`]): op(A)'s rows
/// come from the lead, op(B) comes chunk by chunk along a chain (the lead sends it to the first
/// share, each share forwards every chunk it has received to the next), so each device sends op(B)
/// at most once whatever the number of devices; the lead's SMs write the norm maps' parts into each
/// ([`push_norms`]). The statistics run on the slot's stream beside the multiplication. When the last
/// product had these dimensions, its valid work per row gives the split at once and every share's
/// operands start moving before the norm maps are computed; otherwise the lead counts this
/// product's (with the statistics) and the host waits for the count. The caller's stream waits for
/// every share. Host inputs are staged on the lead first.
///
/// # Safety
/// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements and `c_ptr` readable and
/// writable for `c_len`, host memory or memory of the lead device, not overlapping.
#[allow(clippy::too_many_arguments)]
pub unsafe fn gemm<T: Element>(
    lead: &Arc<GpuDevice>,
    stream: Stream,
    stats: &StatsSlot,
    mut shared: Option<&mut SharedDevices>,
    a: &RawOperand<T>,
    b: &RawOperand<T>,
    alpha: T::Compute,
    beta: T::Compute,
    c_ptr: *mut T,
    c_len: usize,
    ldc: usize,
    tau: TauRule,
    bs: usize,
    kernels: KernelSettings,
) -> Result<((usize, usize, usize), f64)> {
    let (m, k) = a.op_shape();
    let n = b.op_shape().1;
    let size = std::mem::size_of::<T>();
    let dims @ (mb, nb, kb) = (block_count(m, bs), block_count(n, bs), block_count(k, bs));
    let devices = shared.as_ref().map_or(1, |s| s.shares.len() + 1);
    let mut timeline = Timeline::start(|| format!("SpAMM {m}x{n}x{k}, tau {tau:?}, {devices} device(s)"));
    timeline.stamp(lead, stream, || "called".into())?;
    let inputs = unsafe { StagedInputs::new(lead, stream, a, b) }?;
    let reads_c = reads_c(beta, m, n, ldc);
    let c = unsafe { DeviceOutput::new(lead, stream, c_ptr, c_len, "C", reads_c) }?;
    let (a_dev, b_dev) = (inputs.a_operand(a), inputs.b_operand(b));
    let operands = SharedOperands { a: a_dev, b: b_dev, b_rows: b.stored_rows, b_cols: b.stored_cols };
    // The shares' operands may leave the lead once it has them; a split known now starts them moving.
    let early = match shared.as_deref_mut() {
        None => None,
        Some(shared) => {
            let ready = shared.begin(stream)?;
            let runs = match shared.last_split(dims)? {
                None => None,
                Some(bounds) => {
                    let rows = SplitRows { bounds: &bounds, bs, m, n, k, dims, reads_c };
                    Some((unsafe { start_shares::<T>(lead, shared, &mut timeline, &ready, &rows, &operands) }?, bounds))
                }
            };
            Some((ready, runs))
        }
    };
    let norms = inputs.norm_maps(lead, stream, a, b, bs)?;
    timeline.stamp(lead, stream, || "norm maps".into())?;
    let (an, bn) = (norms[0].norms.ptr(), norms[1].norms.ptr());
    let tau = match tau.given() {
        Some(tau) => tau,
        None => {
            // A valid-ratio search has the evaluator anticipate its first iteration
            // (CandidateEvaluator::prepare_ratio_search).
            let mut evaluator = DeviceTauEvaluator::new(lead, stream, &norms[0], &norms[1])?;
            let tau = tau.choose(&mut evaluator, dims, alpha.to_f64().abs())?;
            timeline.stamp(lead, stream, || format!("tau {tau:e} searched"))?;
            tau
        }
    };
    let whole = Product { m, n, k, bs, tau };
    // The statistics on the slot's stream, beside the multiplication; the caller's stream waits for
    // them before the norm maps are freed.
    let side = stats.side_stream();
    let norms_done = Event::new(lead)?;
    norms_done.record(stream)?;
    norms_done.wait_on(side)?;
    let bounds = match shared.as_deref_mut() {
        // One device: the statistics are queued after the multiplication (below).
        None => vec![0, mb],
        Some(shared) => {
            let row_work = DeviceBuffer::zeroed(lead, mb * 8, side, "SpAMM row work")?;
            stats.record(side, &product_stats(lead, side, (an, bn), tau, dims, Some(row_work.ptr()))?)?;
            shared.keep_row_work(side, &row_work, dims)?;
            timeline.stamp(lead, side, || "statistics and work per row".into())?;
            match early.as_ref().and_then(|(_, runs)| runs.as_ref()) {
                Some((_, bounds)) => bounds.clone(),
                None => shared.this_split()?,
            }
        }
    };
    let fractions = shared.as_ref().map(|s| s.fractions.clone());
    timeline.stamp(lead, stream, || format!("split at block rows {bounds:?}, fractions {fractions:.3?}"))?;
    crate::log::note(|| match shared.as_deref() {
        None => format!("device {}", lead.ordinal),
        Some(shared) => {
            let ordinals: Vec<usize> =
                std::iter::once(lead.ordinal).chain(shared.shares.iter().map(|s| s.gpu.ordinal)).collect();
            format!("devices {ordinals:?} sharing C's block rows at {bounds:?}")
        }
    });
    let rows = SplitRows { bounds: &bounds, bs, m, n, k, dims, reads_c };
    // Multi-device: every share started (now, when the split came late), and the norm maps' parts
    // pushed to each before the lead's own rows.
    let in_flight = match (shared.as_deref_mut(), early) {
        (Some(shared), Some((ready, runs))) => {
            let runs = match runs {
                Some((runs, _)) => runs,
                None => unsafe { start_shares::<T>(lead, shared, &mut timeline, &ready, &rows, &operands) }?,
            };
            let norms_in = push_norms(lead, stream, shared, &runs, &rows, (an, bn))?;
            Some((ready, runs, norms_in))
        }
        _ => None,
    };
    // The lead's share, the first rows, in place.
    let lead_rows = rows.of(0);
    let a_lead = match a_dev.op {
        Operation::N => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * size) as u64, ..a_dev },
        Operation::T => DeviceOperand { ptr: a_dev.ptr + (lead_rows.start * a_dev.ld * size) as u64, ..a_dev },
    };
    timeline.stamp(lead, stream, || "lead's rows start".into())?;
    unsafe {
        multiply::<T>(
            lead,
            stream,
            &whole.rows(&lead_rows),
            a_lead,
            b_dev,
            (an + (bounds[0] * 8) as u64, mb),
            bn,
            alpha,
            beta,
            (c.ptr() + (lead_rows.start * size) as u64, ldc),
            kernels,
        )
    }?;
    timeline.stamp(lead, stream, || "lead's rows computed".into())?;
    if shared.is_none() {
        // Queued after the multiplication's kernels, so that the statistics' blocks take the SMs the
        // multiplication leaves idle (its tail) rather than delaying its start.
        stats.record(side, &product_stats(lead, side, (an, bn), tau, dims, None)?)?;
    }
    if let (Some(shared), Some((ready, mut runs, norms_in))) = (shared, in_flight) {
        shared.finished[0].record(stream)?;
        unsafe {
            finish_shares::<T>(
                lead,
                shared,
                &mut timeline,
                &mut runs,
                (&ready, &norms_in),
                &rows,
                &operands,
                &whole,
                (alpha, beta),
                (c.ptr(), ldc),
                kernels,
            )
        }?;
        // The caller's stream goes on (and this call's temporaries on the lead are freed) once every
        // share is done.
        for side in &shared.shares {
            side.done.wait_on(stream)?;
        }
        shared.observe_finish(&bounds)?;
        timeline.stamp(lead, stream, || "every share done".into())?;
    }
    let stats_done = Event::new(lead)?;
    stats_done.record(side)?;
    stats_done.wait_on(stream)?;
    c.finish()?;
    timeline.print()?;
    Ok(((mb, nb, kb), tau))
}

/// How a product's tile kernels are chosen and launched.
#[derive(Clone, Copy, Debug)]
pub struct KernelSettings {
    /// The FP32 kernel ([`runs_3xtf32`]).
    pub mode: MathMode,
    /// Launch with the least shared memory the kernels run with ([`crate::executor::TestHooks`]).
    pub fewest_shared_memory: bool,
}

/// Whether C must be read: β ≠ 0, or a staged host C whose padding rows m..ldc go back whole and must
/// come back unchanged.
pub(super) fn reads_c<F: ComputeScalar>(beta: F, m: usize, n: usize, ldc: usize) -> bool {
    beta != F::ZERO || (ldc > m && n > 1)
}

/// The sizes and threshold of one product `op(A)·op(B)` (m × k times k × n, blocks of `bs`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Product {
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) bs: usize,
    pub(super) tau: f64,
}

impl Product {
    /// The part of this product that computes `rows` of C.
    pub(super) fn rows(&self, rows: &std::ops::Range<usize>) -> Product {
        Product { m: rows.len(), ..*self }
    }
}

/// A column-major operand in device memory, used as `op(X)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct DeviceOperand {
    pub(super) ptr: CUdeviceptr,
    pub(super) ld: usize,
    pub(super) op: Operation,
}

/// A product's inputs on its (lead) device, staged from host memory when needed. A product of a
/// matrix with itself (X·X, Xᵀ·X: purification's repeated squares) stages and reads the matrix once
/// and computes its norms in one pass.
pub(super) struct StagedInputs {
    pub(super) a: DeviceInput,
    pub(super) b: Option<DeviceInput>,
}

impl StagedInputs {
    /// # Safety
    /// As [`gemm`] for `a` and `b`.
    pub(super) unsafe fn new<T: Element>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
    ) -> Result<Self> {
        let a_in = unsafe { DeviceInput::new(device, stream, a.ptr, a.len, "A") }?;
        let b_in = match a.same_matrix(b) {
            true => None,
            false => Some(unsafe { DeviceInput::new(device, stream, b.ptr, b.len, "B") }?),
        };
        Ok(StagedInputs { a: a_in, b: b_in })
    }

    /// The norm maps of op(A) and op(B), queued on `stream`.
    pub(super) fn norm_maps<T: Element>(
        &self,
        device: &Arc<GpuDevice>,
        stream: Stream,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        bs: usize,
    ) -> Result<[DeviceNormMap; 2]> {
        let a_in = self.a.ptr();
        match &self.b {
            None => norm_maps::<T, 2>(device, stream, a_in, [a.op, b.op], a.stored_rows, a.stored_cols, a.ld, bs),
            Some(b_in) => Ok([
                norm_map::<T>(device, stream, a_in, a.op, a.stored_rows, a.stored_cols, a.ld, bs)?,
                norm_map::<T>(device, stream, b_in.ptr(), b.op, b.stored_rows, b.stored_cols, b.ld, bs)?,
            ]),
        }
    }

    pub(super) fn a_operand<T>(&self, a: &RawOperand<T>) -> DeviceOperand {
        DeviceOperand { ptr: self.a.ptr(), ld: a.ld, op: a.op }
    }

    pub(super) fn b_operand<T>(&self, b: &RawOperand<T>) -> DeviceOperand {
        DeviceOperand { ptr: self.b.as_ref().unwrap_or(&self.a).ptr(), ld: b.ld, op: b.op }
    }
}
