//! The get-norm kernel's launchers: block norm maps of op(A) and op(B) on the device, bit-identical
//! to the CPU's (`crate::spamm::NormMap`).

use super::*;

/// A block norm map of `op(X)` in device memory, laid out as [`NormMap`].
pub struct DeviceNormMap {
    pub block_rows: usize,
    pub block_cols: usize,
    pub norms: DeviceBuffer,
}

impl DeviceNormMap {
    /// Copies the map back (waits for the stream).
    pub fn to_host(&self) -> Result<NormMap> {
        let len = element_count(self.block_rows, self.block_cols, "a block norm map")?;
        let mut norms = try_vec(len, 0.0f64, "a block norm map")?;
        self.norms.copy_to_host(&mut norms)?;
        Ok(NormMap { block_rows: self.block_rows, block_cols: self.block_cols, norms })
    }
}

/// Threads per block and a grid-stride grid for `items` independent work items.
pub(super) fn flat_launch(device: &GpuDevice, items: usize) -> Launch {
    let blocks = items.div_ceil(256).clamp(1, device.multiprocessors * 32) as u32;
    Launch { grid: (blocks, 1, 1), block: (256, 1, 1), shared_bytes: 0 }
}

/// The get-norm kernel: the Frobenius norm of every `bs × bs` block of `op(X)`, stored at `x` on the
/// device, summed in [`NormMap::of_operand`]'s order so that the map is bit-identical to the CPU's.
#[allow(clippy::too_many_arguments)]
pub fn norm_map<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: CUdeviceptr,
    op: Operation,
    stored_rows: usize,
    stored_cols: usize,
    ld: usize,
    bs: usize,
) -> Result<DeviceNormMap> {
    let [map] = norm_maps::<T, 1>(device, stream, x, [op], stored_rows, stored_cols, ld, bs)?;
    Ok(map)
}

/// Threads per block of the get-norm kernel (`SPAMM_NORM_THREADS` in kernels/spamm.cu).
pub(super) const NORM_THREADS: usize = 256;

/// [`norm_map`] for one or two `op`s of one stored matrix, reading the matrix once (one kernel
/// writes every map).
#[allow(clippy::too_many_arguments)]
pub(super) fn norm_maps<T: Element, const OPS: usize>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: CUdeviceptr,
    ops: [Operation; OPS],
    stored_rows: usize,
    stored_cols: usize,
    ld: usize,
    bs: usize,
) -> Result<[DeviceNormMap; OPS]> {
    const { assert!(OPS == 1 || OPS == 2, "the get-norm kernel writes one or two maps") };
    let (stored_block_rows, stored_block_cols) = (block_count(stored_rows, bs), block_count(stored_cols, bs));
    let blocks = stored_block_rows * stored_block_cols;
    let maps = ops.map(|op| {
        let (block_rows, block_cols) = match op {
            Operation::N => (stored_block_rows, stored_block_cols),
            Operation::T => (stored_block_cols, stored_block_rows),
        };
        DeviceBuffer::alloc(device, blocks * 8, stream, "the block norm map").map(|norms| DeviceNormMap {
            block_rows,
            block_cols,
            norms,
        })
    });
    let maps = maps.into_iter().collect::<Result<Vec<_>>>()?;
    if blocks > 0 {
        let function = device.function(&SPAMM, &format!("spamm_norm_blocks_{}", T::VALUE_TYPE.short_name()))?;
        // Thread blocks of NORM_THREADS threads over groups of whole row blocks (as many as fit in
        // NORM_THREADS rows, at least one) and over column blocks; the group's row sums in shared
        // memory, in three scaled parts for f64 data (crate::spamm::scaled_norm).
        let group_rows = (NORM_THREADS / bs).max(1) * bs;
        let sums_per_row = if T::VALUE_TYPE == ValueType::F64 { 3 } else { 1 };
        let grid_x = stored_rows.div_ceil(group_rows) as u32;
        let grid_y = stored_block_cols.min(65535) as u32;
        let cfg = Launch {
            grid: (grid_x, grid_y, 1),
            block: (NORM_THREADS as u32, 1, 1),
            shared_bytes: (group_rows * 8 * sums_per_row) as u32,
        };
        let (rows, cols, bs_i, ld) = (stored_rows as i32, stored_cols as i32, bs as i32, ld as i64);
        let transposed = |i: usize| (ops.get(i) == Some(&Operation::T)) as i32;
        let (map0, map1) = (maps[0].norms.ptr(), maps.get(1).map_or(0, |m| m.norms.ptr()));
        let (t0, t1) = (transposed(0), transposed(1));
        unsafe { launch(&function, cfg, stream, kernel_args![&rows, &cols, &x, &ld, &bs_i, &map0, &t0, &map1, &t1]) }?;
    }
    Ok(maps.try_into().unwrap_or_else(|_| unreachable!("one map per op")))
}

/// [`norm_map`] of an operand the caller passed (host or device memory).
///
/// # Safety
/// `x.ptr` must be readable for `x.len` elements (host or device memory of this device).
pub unsafe fn operand_norm_map<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    x: &RawOperand<T>,
    bs: usize,
) -> Result<DeviceNormMap> {
    let input = unsafe { DeviceInput::new(device, stream, x.ptr, x.len, "the operand") }?;
    norm_map::<T>(device, stream, input.ptr(), x.op, x.stored_rows, x.stored_cols, x.ld, bs)
}

/// The norm maps of a product's op(A) and op(B) (host or device memory), as [`gemm`] computes them:
/// one matrix used twice (A·A, Aᵀ·A) is staged and read once.
///
/// # Safety
/// `a.ptr` / `b.ptr` must be readable for `a.len` / `b.len` elements (host or device memory of this
/// device).
pub unsafe fn operand_norm_maps<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    a: &RawOperand<T>,
    b: &RawOperand<T>,
    bs: usize,
) -> Result<[DeviceNormMap; 2]> {
    let inputs = unsafe { StagedInputs::new(device, stream, a, b) }?;
    inputs.norm_maps(device, stream, a, b, bs)
}
