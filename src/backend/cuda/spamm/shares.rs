//! Multi-device products (cuSpAMM section 3.4): C's rows cut by valid work among the devices, the
//! operands sent along a chain of devices panel by panel, and the split adapted between products.

use super::*;

/// What a handle keeps on a device that computes a share of multi-device products: its streams, the
/// event that marks the share done, and its workspace.
pub(super) struct DeviceShare {
    pub(super) gpu: Arc<GpuDevice>,
    /// Multiplications, panel p on stream p % PANEL_STREAMS; the first also receives op(A)'s rows and
    /// the norm parts, orders the workspace and carries `done`.
    pub(super) compute: Vec<Arc<CudaStream>>,
    /// op(B) arriving from the lead device or the previous share, and C's rows when read.
    pub(super) copy_in: Arc<CudaStream>,
    /// Rows of C returning to the lead device.
    pub(super) copy_out: Arc<CudaStream>,
    pub(super) done: Event,
    /// The device's copies of its operands, norms and rows of C, kept between products (grown when a
    /// product needs more): allocating gigabytes anew for every product costs more than copying them.
    pub(super) workspace: Option<DeviceBuffer>,
}

impl DeviceShare {
    pub(super) fn new(gpu: &Arc<GpuDevice>) -> Result<Self> {
        Ok(DeviceShare {
            compute: (0..PANEL_STREAMS).map(|_| gpu.new_stream()).collect::<Result<_>>()?,
            copy_in: gpu.new_stream()?,
            copy_out: gpu.new_stream()?,
            done: Event::new(gpu)?,
            gpu: gpu.clone(),
            workspace: None,
        })
    }

    /// The compute streams (panel p on the p % PANEL_STREAMS-th), the copy-in and the copy-out stream.
    pub(super) fn streams(&self) -> (Vec<Stream>, Stream, Stream) {
        let compute = self.compute.iter().map(|stream| Stream(stream.cu_stream())).collect();
        (compute, Stream(self.copy_in.cu_stream()), Stream(self.copy_out.cu_stream()))
    }

    /// A workspace of at least `bytes` (of `grown` bytes when the one kept is smaller), free once
    /// `stream` reaches the point where this is called (the last product's work on it is done: `done`
    /// is recorded after everything of a share).
    pub(super) fn workspace(&mut self, bytes: usize, grown: usize, stream: Stream) -> Result<CUdeviceptr> {
        if self.workspace.as_ref().is_none_or(|w| w.bytes() < bytes) {
            // The old one may still be in use by the last product: freed after it (cuMemFree waits).
            self.done.synchronize()?;
            self.workspace = None;
            let bytes = grown.max(bytes);
            self.workspace = Some(DeviceBuffer::alloc(&self.gpu, bytes, stream, "SpAMM workspace")?.resident());
        }
        self.done.wait_on(stream)?;
        Ok(self.workspace.as_ref().expect("just made").ptr())
    }
}

/// The devices besides the lead that compute shares of a handle's multi-device products, and how the
/// valid work is divided among all of them. The fractions start equal and are adapted after every
/// product to how long each device took (measured in the lead's clock): a device that starts later —
/// the others wait for their operands to arrive over the interconnect, the lead does not — or
/// computes more slowly gets less work next time, so that the devices finish together. Repeated
/// products (purification's) converge in a few calls; a product of another shape starts from the
/// last split. The split changes which device computes a row, not the row's arithmetic, so it may
/// come from the last product's valid work per row: a product of the same dimensions (purification's
/// next square) is split before its own norm maps exist.
pub struct SharedDevices {
    pub(super) lead: Arc<GpuDevice>,
    pub(super) shares: Vec<DeviceShare>,
    /// Fraction of the valid work per device, the lead's first; they sum to 1.
    pub(super) fractions: Vec<f64>,
    /// Recorded on the caller's stream once a product's inputs are on the lead: where the devices'
    /// times are measured from.
    pub(super) started: Event,
    /// Per device, recorded on the lead once the device has finished its part of the product: the
    /// lead's on the caller's stream, each share's on its observer stream.
    pub(super) finished: Vec<Event>,
    /// Streams of the lead that wait for one share each and record its `finished` event.
    pub(super) observers: Vec<Arc<CudaStream>>,
    /// Valid block products per block row of C of the last product, copied to the host, with that
    /// product's (mb, nb, kb).
    pub(super) row_work: PinnedWords,
    pub(super) row_work_dims: Option<(usize, usize, usize)>,
    /// The block-row bounds of the last product, until its timings have been read.
    pub(super) unread: Option<Vec<usize>>,
}

impl SharedDevices {
    pub fn new(lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> Result<Self> {
        let devices = share_gpus.len() + 1;
        Ok(SharedDevices {
            lead: lead.clone(),
            shares: share_gpus.iter().map(DeviceShare::new).collect::<Result<_>>()?,
            fractions: vec![1.0 / devices as f64; devices],
            started: Event::timed(lead)?,
            finished: (0..devices).map(|_| Event::timed(lead)).collect::<Result<_>>()?,
            observers: share_gpus.iter().map(|_| lead.new_stream()).collect::<Result<_>>()?,
            row_work: PinnedWords::new(lead, 0)?,
            row_work_dims: None,
            unread: None,
        })
    }

    /// Whether these are `lead` and then `share_gpus`.
    pub fn serves(&self, lead: &Arc<GpuDevice>, share_gpus: &[Arc<GpuDevice>]) -> bool {
        Arc::ptr_eq(&self.lead, lead)
            && self.shares.len() == share_gpus.len()
            && self.shares.iter().zip(share_gpus).all(|(share, gpu)| Arc::ptr_eq(&share.gpu, gpu))
    }

    /// The start of a product whose inputs the caller's `stream` has queued: the fractions follow the
    /// last product's timings, the stream waits until every share of the last product is done (the
    /// shares are about to overwrite their workspaces, which the last product's next share may still
    /// be reading: op(B)'s chain) and records `started` and the returned event, after which the
    /// shares may copy the lead's inputs.
    pub(super) fn begin(&mut self, stream: Stream) -> Result<Event> {
        self.rebalance()?;
        for side in &self.shares {
            side.done.wait_on(stream)?;
        }
        self.started.record(stream)?;
        let ready = Event::new(&self.lead)?;
        ready.record(stream)?;
        Ok(ready)
    }

    /// The split of a product of dimensions `dims` from the last product's valid work per row, when
    /// that product had the same dimensions.
    pub(super) fn last_split(&self, dims: (usize, usize, usize)) -> Result<Option<Vec<usize>>> {
        if self.row_work_dims != Some(dims) {
            return Ok(None);
        }
        Ok(Some(work_bounds(self.row_work.wait(dims.0)?, &self.fractions)))
    }

    /// Queues on `stream` the copy of this product's valid work per block row (`row_work`, mb words,
    /// counted by [`product_stats`]) to the host, for [`SharedDevices::this_split`], the next
    /// product's [`SharedDevices::last_split`] and the rates of [`SharedDevices::rebalance`].
    pub(super) fn keep_row_work(
        &mut self,
        stream: Stream,
        row_work: &DeviceBuffer,
        dims: (usize, usize, usize),
    ) -> Result<()> {
        if self.row_work.len() < dims.0 {
            self.row_work = PinnedWords::new(&self.lead, dims.0)?;
        }
        self.row_work.record_from(stream, row_work.ptr(), dims.0)?;
        self.row_work_dims = Some(dims);
        Ok(())
    }

    /// The split of this product from its own valid work per row (waits for the count).
    pub(super) fn this_split(&self) -> Result<Vec<usize>> {
        let mb = self.row_work_dims.map_or(0, |dims| dims.0);
        Ok(work_bounds(self.row_work.wait(mb)?, &self.fractions))
    }

    /// After a product has been queued: each share's observer records its `finished` once the share is
    /// done, and the product's split is kept for [`SharedDevices::rebalance`].
    pub(super) fn observe_finish(&mut self, bounds: &[usize]) -> Result<()> {
        self.lead.bind()?;
        for ((side, observer), finished) in self.shares.iter().zip(&self.observers).zip(&self.finished[1..]) {
            let observer = Stream(observer.cu_stream());
            side.done.wait_on(observer)?;
            finished.record(observer)?;
        }
        self.unread = Some(bounds.to_vec());
        Ok(())
    }

    /// Adapts the fractions to the last product's timings (waits for that product): each device's new
    /// fraction is proportional to the work it got over the time it took from `started` to its finish
    /// (its effective rate, start latency included), averaged with its old fraction to damp noise. A
    /// product in which some device got no work, or finished at once, changes nothing.
    pub(super) fn rebalance(&mut self) -> Result<()> {
        let Some(bounds) = self.unread.take() else { return Ok(()) };
        let row_work = self.row_work.wait(bounds.last().copied().unwrap_or(0))?;
        let mut rates = Vec::with_capacity(bounds.len() - 1);
        for (finished, range) in self.finished.iter().zip(bounds.windows(2)) {
            let work: u64 = row_work[range[0]..range[1]].iter().sum();
            finished.synchronize()?;
            let ms = self.started.elapsed_ms(finished)? as f64;
            if work == 0 || ms <= 0.0 {
                return Ok(());
            }
            rates.push(work as f64 / ms);
        }
        let total: f64 = rates.iter().sum();
        for (fraction, rate) in self.fractions.iter_mut().zip(&rates) {
            *fraction = 0.5 * *fraction + 0.5 * rate / total;
        }
        Ok(())
    }
}

/// Whether a product can be split over devices (the tile kernels take panels of C's rows; k = 0 only
/// scales C, nothing worth sharing).
pub fn splits<T: Element>(devices: &[&Arc<GpuDevice>], bs: usize, k: usize, mode: MathMode) -> bool {
    let kb = block_count(k, bs);
    let kernel = TileKernel::of::<T>(runs_3xtf32(mode, T::VALUE_TYPE, bs, kb), (false, false));
    k > 0 && devices.iter().all(|device| kernel.applies(device, bs, kb))
}

/// Column panels a device's share is cut into: op(B)'s next panel is copied in, and C's last one
/// copied out, while the current one is multiplied.
pub(super) const SHARE_PANELS: usize = 8;

/// Streams a share's panels are multiplied on, so that a panel's kernel starts while the last
/// one's heaviest tiles finish: a panel of a decay product has few heavy tiles (those crossing the
/// diagonal) and many light ones, and one after another on one stream each panel would take at
/// least its heaviest tile's time with the device mostly idle.
pub(super) const PANEL_STREAMS: usize = 4;

/// Chunks each panel of op(B) travels in along the chain of shares: a share forwards a chunk as soon
/// as it has it, so the last of d devices waits about d chunk copies, not d panel copies, for its
/// first panel.
pub(super) const CHUNKS_PER_PANEL: usize = 4;

/// The column panels of op(B) and C (in blocks of `bs`, n columns), each cut into chunks.
pub(super) struct Panels {
    pub(super) n: usize,
    pub(super) bs: usize,
    pub(super) nb: usize,
    pub(super) panel_blocks: usize,
    pub(super) chunk_blocks: usize,
}

impl Panels {
    pub(super) fn new(n: usize, bs: usize, nb: usize) -> Panels {
        let panel_blocks = nb.div_ceil(SHARE_PANELS).max(1);
        Panels { n, bs, nb, panel_blocks, chunk_blocks: panel_blocks.div_ceil(CHUNKS_PER_PANEL) }
    }

    pub(super) fn count(&self) -> usize {
        self.nb.div_ceil(self.panel_blocks)
    }

    /// Panel p's block columns.
    pub(super) fn blocks(&self, p: usize) -> std::ops::Range<usize> {
        p * self.panel_blocks..((p + 1) * self.panel_blocks).min(self.nb)
    }

    pub(super) fn columns(&self, blocks: std::ops::Range<usize>) -> std::ops::Range<usize> {
        (blocks.start * self.bs).min(self.n)..(blocks.end * self.bs).min(self.n)
    }

    /// Panel p's chunks, as column ranges.
    pub(super) fn chunks(&self, p: usize) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let blocks = self.blocks(p);
        blocks
            .clone()
            .step_by(self.chunk_blocks)
            .map(move |first| self.columns(first..(first + self.chunk_blocks).min(blocks.end)))
    }
}

/// A product's split: block-row bounds per device (the lead's first), and what every share needs to
/// know about the whole product.
pub(super) struct SplitRows<'a> {
    pub(super) bounds: &'a [usize],
    pub(super) bs: usize,
    /// The whole product's op(A) rows, op(B) columns and inner dimension.
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    /// (mb, nb, kb) of the whole product.
    pub(super) dims: (usize, usize, usize),
    pub(super) reads_c: bool,
}

impl SplitRows<'_> {
    /// Device d's rows of C.
    pub(super) fn of(&self, d: usize) -> std::ops::Range<usize> {
        (self.bounds[d] * self.bs).min(self.m)..(self.bounds[d + 1] * self.bs).min(self.m)
    }

    pub(super) fn block_rows(&self, d: usize) -> std::ops::Range<usize> {
        self.bounds[d]..self.bounds[d + 1]
    }
}

/// The lead's operands of a shared product, as every share copies from them.
pub(super) struct SharedOperands {
    pub(super) a: DeviceOperand,
    pub(super) b: DeviceOperand,
    /// B's stored shape.
    pub(super) b_rows: usize,
    pub(super) b_cols: usize,
}

/// The element offset of op(B)'s column `col` in column-major storage of B with leading dimension
/// `ld`: a stored column (op N) or a stored row (op T).
pub(super) fn op_column_offset(op: Operation, col: usize, ld: usize) -> usize {
    match op {
        Operation::N => col * ld,
        Operation::T => col,
    }
}

/// One other device's share of a product in flight: where its copies live in its workspace, and
/// which of op(B)'s chunks have been queued to it.
pub(super) struct ShareRun {
    /// The device's index in [`SharedDevices::shares`] (its place in the chain is one more).
    pub(super) side: usize,
    /// op(A)'s rows, compact.
    pub(super) a: DeviceOperand,
    /// op(B), stored as the lead's is (leading dimension B's stored rows), and B's stored columns.
    pub(super) b: DeviceOperand,
    pub(super) b_cols: usize,
    pub(super) an: CUdeviceptr,
    pub(super) bn: CUdeviceptr,
    pub(super) c: CUdeviceptr,
    /// Per chunk of op(B) queued so far, in order: recorded once it has arrived here.
    pub(super) arrived: Vec<Event>,
    /// Recorded on the first compute stream once op(A)'s rows are in.
    pub(super) a_in: Option<Event>,
}

/// The first part of the other devices' shares of a shared [`gemm`]: each device's workspace, then
/// op(A)'s rows of the first share, op(B)'s first panel along the chain, and the other shares' rows
/// of op(A), all once `ready`. The lead's outgoing copies are served in the order queued: this order
/// lets the first share start after one share of op(A) and one panel of op(B), the next shares one
/// share of op(A) later each, while the rest of op(B) follows ([`finish_shares`]). Shares without rows
/// get no run.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
pub(super) unsafe fn start_shares<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &mut SharedDevices,
    timeline: &mut Timeline,
    ready: &Event,
    rows: &SplitRows,
    operands: &SharedOperands,
) -> Result<Vec<ShareRun>> {
    let size = std::mem::size_of::<T>();
    let (_, nb, kb) = rows.dims;
    let a_dev = operands.a;
    let mut runs = Vec::with_capacity(shared.shares.len());
    for (side, device) in shared.shares.iter_mut().enumerate() {
        let (share_rows, block_rows) = (rows.of(side + 1), rows.block_rows(side + 1));
        if share_rows.is_empty() {
            continue;
        }
        let (n, k) = (rows.n, rows.k);
        let gpu = &device.gpu.clone();
        gpu.enable_peer_access(lead)?;
        lead.enable_peer_access(gpu)?;
        gpu.bind()?;
        let (panel_streams, copy_in, copy_out) = device.streams();
        // The device's copies, in its workspace: op(A)'s rows, op(B) (stored as B is), the norm
        // parts, C's rows (each part 256-byte aligned), for `rows` rows in `block_rows` block rows.
        let layout = |rows: usize, block_rows: usize| {
            let sizes = [
                rows * k * size,
                operands.b_rows * operands.b_cols * size,
                block_rows * kb * 8,
                kb * nb * 8,
                rows * n * size,
            ];
            let mut offsets = [0usize; 5];
            let mut end = 0;
            for (offset, bytes) in offsets.iter_mut().zip(sizes) {
                *offset = end;
                end += bytes.div_ceil(256) * 256;
            }
            (offsets, end)
        };
        let (offsets, bytes) = layout(share_rows.len(), block_rows.len());
        // A workspace that must grow is made for a quarter more rows: the split moves a little with
        // every product, and growing frees and allocates gigabytes (tens of milliseconds).
        let headroom = |count: usize, limit: usize| (count + count / 4).min(limit);
        let grown = layout(headroom(share_rows.len(), rows.m), headroom(block_rows.len(), rows.dims.0)).1;
        let base = device.workspace(bytes, grown, panel_streams[0])?;
        let [a, b, an, bn, c] = offsets.map(|offset| base + offset as u64);
        let started = Event::new(gpu)?;
        started.record(panel_streams[0])?;
        for other in panel_streams[1..].iter().chain([&copy_in, &copy_out]) {
            started.wait_on(*other)?;
        }
        let a_ld = match a_dev.op {
            Operation::N => share_rows.len(),
            Operation::T => k,
        };
        runs.push(ShareRun {
            side,
            a: DeviceOperand { ptr: a, ld: a_ld, op: a_dev.op },
            b: DeviceOperand { ptr: b, ld: operands.b_rows, op: operands.b.op },
            b_cols: operands.b_cols,
            an,
            bn,
            c,
            arrived: Vec::new(),
            a_in: None,
        });
    }
    let panels = Panels::new(rows.n, rows.bs, nb);
    for r in 0..runs.len() {
        let run = &runs[r];
        let device = &shared.shares[run.side];
        let (gpu, share_rows) = (&device.gpu, rows.of(run.side + 1));
        let k = rows.k;
        let receive = device.streams().0[0];
        // op(A)'s rows: stored rows of A (op N) or stored columns (op T), into a compact matrix.
        let (a_src, a_width, a_height) = match a_dev.op {
            Operation::N => (a_dev.ptr + (share_rows.start * size) as u64, share_rows.len(), k),
            Operation::T => (a_dev.ptr + (share_rows.start * a_dev.ld * size) as u64, k, share_rows.len()),
        };
        gpu.bind()?;
        let s = run.side + 1;
        timeline.stamp(gpu, receive, || format!("share {s}: rows {share_rows:?} queued"))?;
        ready.wait_on(receive)?;
        unsafe {
            copy_matrix_async(
                (run.a.ptr, a_width * size, gpu),
                (a_src, a_dev.ld * size, lead),
                a_width * size,
                a_height,
                receive,
            )?;
        }
        let a_in = Event::new(gpu)?;
        a_in.record(receive)?;
        runs[r].a_in = Some(a_in);
        timeline.stamp(gpu, receive, || format!("share {s}: op(A)'s rows in"))?;
        if r == 0 && panels.count() > 0 {
            forward_panel::<T>(lead, shared, timeline, &mut runs, (operands.b, ready), &panels, 0)?;
        }
    }
    lead.bind()?;
    Ok(runs)
}

/// Queues panel `p` of op(B) along the chain of `runs`: the lead's op(B) (`lead_b`, readable once its
/// event has completed) to the first share, each share's copy to the next, chunk by chunk on the
/// copy-in streams, each chunk forwarded once it has arrived.
pub(super) fn forward_panel<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &SharedDevices,
    timeline: &mut Timeline,
    runs: &mut [ShareRun],
    lead_b: (DeviceOperand, &Event),
    panels: &Panels,
    p: usize,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    for r in 0..runs.len() {
        let (before, rest) = runs.split_at_mut(r);
        let run = &mut rest[0];
        let device = &shared.shares[run.side];
        let gpu = &device.gpu;
        let copy_in = device.streams().1;
        let (from_gpu, from) = match before.last() {
            None => (lead, lead_b.0),
            Some(previous) => (&shared.shares[previous.side].gpu, previous.b),
        };
        gpu.enable_peer_access(from_gpu)?;
        from_gpu.enable_peer_access(gpu)?;
        gpu.bind()?;
        for cols in panels.chunks(p) {
            let chunk = run.arrived.len();
            match before.last() {
                None => lead_b.1.wait_on(copy_in)?,
                Some(previous) => previous.arrived[chunk].wait_on(copy_in)?,
            }
            // op(B)'s columns: stored columns of B (op N) or stored rows (op T).
            let (width, height) = match run.b.op {
                Operation::N => (run.b.ld, cols.len()),
                Operation::T => (cols.len(), run.b_cols),
            };
            unsafe {
                copy_matrix_async(
                    (
                        run.b.ptr + (op_column_offset(run.b.op, cols.start, run.b.ld) * size) as u64,
                        run.b.ld * size,
                        gpu,
                    ),
                    (
                        from.ptr + (op_column_offset(from.op, cols.start, from.ld) * size) as u64,
                        from.ld * size,
                        from_gpu,
                    ),
                    width * size,
                    height,
                    copy_in,
                )?;
            }
            let event = Event::new(gpu)?;
            event.record(copy_in)?;
            run.arrived.push(event);
        }
        let s = run.side + 1;
        timeline.stamp(gpu, copy_in, || format!("share {s}: panel {p} in"))?;
    }
    lead.bind()
}

/// Pushes each share's parts of the norm maps (its block rows of `an`, all of `bn`) into its
/// workspace with the lead's SMs, on the caller's `stream` once the maps are there, and returns the
/// event after them. The copy engines would serve them only after everything queued out of the lead
/// before them: op(A)'s rows for every share and op(B)'s first panel. (A device the lead cannot
/// reach peer to peer gets them by a copy, staged by the driver.)
pub(super) fn push_norms(
    lead: &Arc<GpuDevice>,
    stream: Stream,
    shared: &SharedDevices,
    runs: &[ShareRun],
    rows: &SplitRows,
    (an, bn): (CUdeviceptr, CUdeviceptr),
) -> Result<Event> {
    let (mb, nb, kb) = rows.dims;
    let f = lead.function(&UTIL, "copy_words")?;
    // `lines` lines of `width` words, from the lead to `gpu`.
    let push = |gpu: &Arc<GpuDevice>, (src, src_pitch): (CUdeviceptr, usize), (dst, dst_pitch), width, lines| {
        if !(lead.enable_peer_access(gpu)? && gpu.enable_peer_access(lead)?) {
            lead.bind()?;
            return unsafe {
                copy_matrix_async((dst, dst_pitch * 8, gpu), (src, src_pitch * 8, lead), width * 8, lines, stream)
            };
        }
        lead.bind()?;
        let (width_i, lines_i, src_pitch, dst_pitch) = (width as i32, lines as i32, src_pitch as i64, dst_pitch as i64);
        unsafe {
            launch(
                &f,
                flat_launch(lead, width * lines),
                stream,
                kernel_args![&width_i, &lines_i, &src, &src_pitch, &dst, &dst_pitch],
            )
        }
    };
    for run in runs {
        let gpu = &shared.shares[run.side].gpu;
        let block_rows = rows.block_rows(run.side + 1);
        // op(A)'s map is mb × kb column-major: the share's block rows of every column.
        push(gpu, (an + (block_rows.start * 8) as u64, mb), (run.an, block_rows.len()), block_rows.len(), kb)?;
        push(gpu, (bn, kb), (run.bn, kb), kb, nb)?;
    }
    let norms_in = Event::new(lead)?;
    norms_in.record(stream)?;
    Ok(norms_in)
}

/// The rest of the other devices' shares of a shared [`gemm`], after [`start_shares`] and
/// [`push_norms`] (`ready`, `norms_in`: their events on the lead): the rest of op(B) along the
/// chain, and per panel: C's rows when read (copy-in stream), the multiplication (the compute
/// streams in turn, once the panel's chunks, op(A)'s rows and the norm parts are in), C's rows back
/// to the lead (copy-out stream). Each share's `done` is recorded after all of it.
///
/// # Safety
/// As [`gemm`]; the lead's buffers stay alive until the caller's stream has waited.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn finish_shares<T: Element>(
    lead: &Arc<GpuDevice>,
    shared: &SharedDevices,
    timeline: &mut Timeline,
    runs: &mut [ShareRun],
    (ready, norms_in): (&Event, &Event),
    rows: &SplitRows,
    operands: &SharedOperands,
    whole: &Product,
    (alpha, beta): (T::Compute, T::Compute),
    (c_lead, ldc): (CUdeviceptr, usize),
    kernels: KernelSettings,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let (_, nb, kb) = rows.dims;
    let panels = Panels::new(whole.n, whole.bs, nb);
    for p in 0..panels.count() {
        if p > 0 {
            forward_panel::<T>(lead, shared, timeline, runs, (operands.b, ready), &panels, p)?;
        }
        for run in runs.iter() {
            let device = &shared.shares[run.side];
            let gpu = &device.gpu;
            let (share_rows, block_rows) = (rows.of(run.side + 1), rows.block_rows(run.side + 1));
            let panel_rows = share_rows.len();
            let (panel_streams, copy_in, copy_out) = device.streams();
            let panel_stream = panel_streams[p % PANEL_STREAMS];
            let blocks = panels.blocks(p);
            let cols = panels.columns(blocks.clone());
            let c_offset = (share_rows.start * size + cols.start * ldc * size) as u64;
            let c_panel = run.c + (cols.start * panel_rows * size) as u64;
            gpu.bind()?;
            if rows.reads_c {
                unsafe {
                    copy_matrix_async(
                        (c_panel, panel_rows * size, gpu),
                        (c_lead + c_offset, ldc * size, lead),
                        panel_rows * size,
                        cols.len(),
                        copy_in,
                    )?;
                }
            }
            // The panel's chunks of op(B) are the last queued on the copy-in stream, C's rows after them.
            let panel_in = Event::new(gpu)?;
            panel_in.record(copy_in)?;
            panel_in.wait_on(panel_stream)?;
            run.a_in.as_ref().expect("set by start_shares").wait_on(panel_stream)?;
            norms_in.wait_on(panel_stream)?;
            let s = run.side + 1;
            timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {p} starts"))?;
            unsafe {
                multiply::<T>(
                    gpu,
                    panel_stream,
                    &Product { n: cols.len(), ..whole.rows(&share_rows) },
                    run.a,
                    DeviceOperand {
                        ptr: run.b.ptr + (op_column_offset(run.b.op, cols.start, run.b.ld) * size) as u64,
                        ..run.b
                    },
                    (run.an, block_rows.len()),
                    run.bn + (blocks.start * kb * 8) as u64,
                    alpha,
                    beta,
                    (c_panel, panel_rows),
                    kernels,
                )
            }?;
            timeline.stamp(gpu, panel_stream, || format!("share {s}: panel {p} computed"))?;
            let panel_done = Event::new(gpu)?;
            panel_done.record(panel_stream)?;
            panel_done.wait_on(copy_out)?;
            unsafe {
                copy_matrix_async(
                    (c_lead + c_offset, ldc * size, lead),
                    (c_panel, panel_rows * size, gpu),
                    panel_rows * size,
                    cols.len(),
                    copy_out,
                )?;
            }
            timeline.stamp(gpu, copy_out, || format!("share {s}: panel {p} out"))?;
        }
    }
    // `done` (on the first compute stream) covers the other streams: the panels are computed, the
    // last panel of C has left, and the copies in are over even when no panel waited for them
    // (n = 0), before the caller may free the inputs or this workspace.
    for run in runs.iter() {
        let device = &shared.shares[run.side];
        let (panel_streams, copy_in, copy_out) = device.streams();
        device.gpu.bind()?;
        for &other in panel_streams[1..].iter().chain([&copy_out, &copy_in]) {
            let finished = Event::new(&device.gpu)?;
            finished.record(other)?;
            finished.wait_on(panel_streams[0])?;
        }
        device.done.record(panel_streams[0])?;
        let s = run.side + 1;
        timeline.stamp(&device.gpu, panel_streams[0], || format!("share {s}: done"))?;
    }
    lead.bind()
}

/// Cuts `work` (per block row) into consecutive ranges, range d holding about `fractions[d]` of the
/// total (the fractions sum to 1): boundary p is the first row where the running sum reaches the
/// fractions before p of the total. Rows of no work spread evenly when nothing is valid.
pub fn work_bounds(work: &[u64], fractions: &[f64]) -> Vec<usize> {
    let parts = fractions.len();
    let total: u64 = work.iter().sum();
    let mut bounds = vec![0; parts + 1];
    bounds[parts] = work.len();
    if total == 0 {
        for (p, bound) in bounds.iter_mut().enumerate() {
            *bound = work.len() * p / parts;
        }
        return bounds;
    }
    let (mut running, mut row, mut before) = (0u64, 0, 0.0);
    for (p, fraction) in fractions.iter().enumerate().take(parts - 1) {
        before += fraction;
        let target = (total as f64 * before).ceil().min(total as f64) as u64;
        while row < work.len() && running < target {
            running += work[row];
            row += 1;
        }
        bounds[p + 1] = row;
    }
    bounds
}
