//! The multiplication: the tile kernels of `kernels/spamm_{f16,bf16,f32,f64}.cu`, their work lists
//! and launch orders, and the per-block kernel of `kernels/spamm.cu` where no tile kernel applies.

use super::*;

/// The multiplication of a product whose operands and norm maps are on `device`: `an` is op(A)'s norm
/// map (pointer, leading dimension: a panel of a larger map may be given by its first row), `bn`
/// op(B)'s (leading dimension kb); C at (`c`, `ldc`). The statistics are the caller's
/// ([`product_stats`], over the whole product).
///
/// # Safety
/// Every pointer must be device memory of `device` holding what the sizes say.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn multiply<T: Element>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    p: &Product,
    a: DeviceOperand,
    b: DeviceOperand,
    (an, an_ld): (CUdeviceptr, usize),
    bn: CUdeviceptr,
    alpha: T::Compute,
    beta: T::Compute,
    (c_dev, ldc): (CUdeviceptr, usize),
    kernels: KernelSettings,
) -> Result<()> {
    let Product { m, n, k, bs, tau } = *p;
    let (mb, nb, kb) = (block_count(m, bs), block_count(n, bs), block_count(k, bs));
    if m == 0 || n == 0 {
        return Ok(());
    }
    let transposes = (a.op == Operation::T, b.op == Operation::T);
    let tile = TileKernel::of::<T>(runs_3xtf32(kernels.mode, T::VALUE_TYPE, bs, kb), transposes);
    let (m_i, n_i, k_i, bs_i) = (m as i32, n as i32, k as i32, bs as i32);
    let (a_ptr, lda, ta) = (a.ptr, a.ld as i64, (a.op == Operation::T) as i32);
    let (b_ptr, ldb, tb) = (b.ptr, b.ld as i64, (b.op == Operation::T) as i32);
    let ldc = ldc as i64;
    if tile.applies(device, bs, kb) {
        let work = tile_work(device, stream, &tile, (an, an_ld), bn, tau, (m, n, bs, kb))?;
        let f = device.function(tile.module, tile.name)?;
        let shared_bytes = tile.shared_bytes_on(device, kernels.fewest_shared_memory);
        if shared_bytes > 48 * 1024 {
            device.allow_shared_memory(&f, shared_bytes as usize)?;
        }
        let cfg = Launch { grid: (work.tiles as u32, 1, 1), block: (tile.threads, 1, 1), shared_bytes };
        crate::log::note(|| {
            format!(
                "kernel {} ({}x{} C tiles, {} thread blocks, {}, {shared_bytes} B shared memory)",
                tile.name,
                tile.tile_m,
                tile.tile_n,
                work.tiles,
                arithmetic(T::VALUE_TYPE, runs_3xtf32(kernels.mode, T::VALUE_TYPE, bs, kb))
            )
        });
        let (order, counts, lists, stride) = (work.order.ptr(), work.counts.ptr(), work.lists.ptr(), kb as i32);
        return unsafe {
            launch(
                &f,
                cfg,
                stream,
                kernel_args![
                    &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc, &order,
                    &counts, &lists, &stride
                ],
            )
        };
    }
    // Other block sizes: one 32 × 32 tile of one C block per thread block, deciding its own k from
    // whole norm maps (never a panel: multi-device products use the tile kernels).
    debug_assert_eq!(an_ld, mb);
    let threads = if matches!(T::VALUE_TYPE, ValueType::F16 | ValueType::Bf16) { 128 } else { 256 };
    let tiles_per_block = bs.div_ceil(32);
    let f = device.function(&SPAMM, &format!("spamm_multiply_{}", T::VALUE_TYPE.short_name()))?;
    let grid = ((mb * tiles_per_block) as u32, (nb * tiles_per_block).min(65535) as u32, 1);
    let cfg = Launch { grid, block: (threads, 1, 1), shared_bytes: 0 };
    crate::log::note(|| {
        let arithmetic = if T::VALUE_TYPE == ValueType::F64 { "FP64 FMA" } else { arithmetic(T::VALUE_TYPE, false) };
        format!(
            "kernel spamm_multiply_{} (no tile kernel applies: a 32x32 C tile per thread block, {arithmetic})",
            T::VALUE_TYPE.short_name()
        )
    });
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &m_i, &n_i, &k_i, &bs_i, &alpha, &a_ptr, &lda, &ta, &b_ptr, &ldb, &tb, &beta, &c_dev, &ldc, &an, &bn,
                &tau
            ],
        )
    }
}

/// How the tile kernels of `value_type` multiply (`tf32x3`: FP32 in 3xTF32), as log lines say it.
fn arithmetic(value_type: ValueType, tf32x3: bool) -> &'static str {
    match value_type {
        ValueType::F32 if tf32x3 => "3xTF32 on tensor cores",
        ValueType::F32 => "FP32 FMA",
        ValueType::F64 => "FP64 DMMA on tensor cores",
        ValueType::F16 | ValueType::Bf16 => "tensor cores, FP32 accumulation",
    }
}

/// A tile kernel of `kernels/spamm_*.cu` (contract in `kernels/spamm_tiles.cuh`): one thread block
/// per `tile_m × tile_n` tile of C, walking the tile's work list.
pub(super) struct TileKernel {
    pub(super) module: &'static KernelSource,
    pub(super) name: &'static str,
    pub(super) tile_m: usize,
    pub(super) tile_n: usize,
    pub(super) threads: u32,
    /// Dynamic shared memory per thread block: as much as the kernel can use, and the least it runs
    /// with (the f64 kernel keeps three or two pipeline stages, whichever the device gives).
    pub(super) shared_bytes: u32,
    pub(super) fewest_shared_bytes: u32,
    /// The tiles' launch order unless `SPARSEGPU_SPAMM_SCHEDULE` says otherwise, as
    /// `spamm_tile_order`'s `group_cols` (0: heaviest first, G > 0: groups of G tile columns, -S:
    /// squares of S × S tiles heaviest first).
    pub(super) group_cols: i32,
}

impl TileKernel {
    /// The tile kernel of a product of `T` (`tf32x3`: FP32 in 3xTF32, see [`runs_3xtf32`]) with
    /// op(A), op(B) transposed as `transposes` says.
    pub(super) fn of<T: Element>(tf32x3: bool, transposes: (bool, bool)) -> TileKernel {
        match T::VALUE_TYPE {
            ValueType::F32 => f32_tile_kernel(tf32x3, transposes),
            ValueType::F64 => TileKernel {
                module: &SPAMM_F64,
                name: "spamm_tiles_f64",
                tile_m: 128,
                tile_n: 128,
                threads: 256,
                // SPAMM_F64_STAGE_BYTES in kernels/spamm_f64.cu: three stages, or two.
                shared_bytes: 3 * 65536,
                fewest_shared_bytes: 2 * 65536,
                // Squares of 4 × 4 tiles, heaviest first: longest job first as for FP32, while the
                // tiles running side by side share rows of A and columns of B (its 64 KiB stages make
                // it the kernel most bound by L2; docs/methods.md, load balance).
                group_cols: -4,
            },
            ValueType::F16 => half_tile_kernel(&SPAMM_F16, "spamm_tiles_f16"),
            ValueType::Bf16 => half_tile_kernel(&SPAMM_BF16, "spamm_tiles_bf16"),
        }
    }

    /// Whether the work lists can describe this product: a tile spans at most 4 × 4 C blocks (block
    /// sizes that are multiples of 32, tiles of at most 128 starting at multiples of 32), whose fragments
    /// each lie inside one C block, and k blocks fit an entry's 16 bits.
    /// A kernel whose shared memory the device cannot give (the f64 kernel's 128 KiB on a GPU of
    /// 99 KiB per block) leaves the product to the per-block kernels.
    pub(super) fn applies(&self, device: &GpuDevice, bs: usize, kb: usize) -> bool {
        bs.is_multiple_of(32)
            && self.tile_m <= 128
            && self.tile_n <= 128
            && kb < 1 << 16
            && self.fewest_shared_bytes as usize <= device.max_shared_memory_per_block_optin
    }

    /// The dynamic shared memory to launch with on `device` (where [`TileKernel::applies`]): the
    /// fewest bytes the kernel runs with when `fewest`.
    pub(super) fn shared_bytes_on(&self, device: &GpuDevice, fewest: bool) -> u32 {
        if !fewest && self.shared_bytes as usize <= device.max_shared_memory_per_block_optin {
            self.shared_bytes
        } else {
            self.fewest_shared_bytes
        }
    }
}

/// The 16-bit tile kernel of `kernels/spamm_half.cuh` for one format: 4 warps of 64 × 64; a 4-stage
/// cp.async ring (64 KiB), reused by the epilogue's f32 C tile (SPAMM_H_SHARED_BYTES there). Launched
/// in the natural order: its tiles are short and bound by L2, where tiles running side by side should
/// share rows of A and columns of B (docs/methods.md, load balance).
pub(super) fn half_tile_kernel(module: &'static KernelSource, name: &'static str) -> TileKernel {
    TileKernel {
        module,
        name,
        tile_m: 128,
        tile_n: 128,
        threads: 128,
        shared_bytes: 67584,
        fewest_shared_bytes: 67584,
        group_cols: 1,
    }
}

/// spammSgemm's tile kernels (`kernels/spamm_f32.cu`): one per math mode and pair of transposes, with
/// the dynamic shared memory each takes (F32_SIMT_SMEM / F32_TC_SMEM there).
pub(super) fn f32_tile_kernel(tf32x3: bool, transposes: (bool, bool)) -> TileKernel {
    let name = match (tf32x3, transposes) {
        (false, (false, false)) => "spamm_tiles_f32_nn",
        (false, (false, true)) => "spamm_tiles_f32_nt",
        (false, (true, false)) => "spamm_tiles_f32_tn",
        (false, (true, true)) => "spamm_tiles_f32_tt",
        (true, (false, false)) => "spamm_tiles_3xtf32_nn",
        (true, (false, true)) => "spamm_tiles_3xtf32_nt",
        (true, (true, false)) => "spamm_tiles_3xtf32_tn",
        (true, (true, true)) => "spamm_tiles_3xtf32_tt",
    };
    // Exact: two stages of 2 × 32 × 132 floats; 3xTF32: three stages of 2 × 128 × 36 floats.
    let shared_bytes = if tf32x3 { 3 * 2 * 128 * 36 * 4 } else { 2 * 2 * 32 * 132 * 4 };
    TileKernel {
        module: &SPAMM_F32,
        name,
        tile_m: 128,
        tile_n: 128,
        threads: 256,
        shared_bytes,
        fewest_shared_bytes: shared_bytes,
        group_cols: 0,
    }
}

/// The work lists of a tile kernel's product, on the device.
pub(super) struct TileWork {
    pub(super) tiles: usize,
    pub(super) order: DeviceBuffer,
    pub(super) counts: DeviceBuffer,
    pub(super) lists: DeviceBuffer,
}

/// The tiles' launch order `SPARSEGPU_SPAMM_SCHEDULE` asks for, as `spamm_tile_order`'s
/// `group_cols`: `heaviest` (0), `natural` (1, column-major), `grouped:G` (G: groups of G tile
/// columns, row by row within a group) or `squares:S` (-S: squares of S × S tiles heaviest first, row
/// by row within a square); None (each kernel's own order) when unset or not one of these. Kept to
/// measure what the ordering buys.
pub(super) fn schedule_group_cols() -> Option<i32> {
    static GROUP_COLS: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
    *GROUP_COLS.get_or_init(|| match std::env::var("SPARSEGPU_SPAMM_SCHEDULE").ok()?.as_str() {
        "heaviest" => Some(0),
        "natural" => Some(1),
        v => match v.split_once(':')? {
            ("grouped", g) => g.parse().ok().filter(|&g| g > 0),
            ("squares", side) => side.parse().ok().filter(|&s: &i32| s > 0).map(|s| -s),
            _ => None,
        },
    })
}

/// Builds the per-tile lists of k blocks with their C-block masks (`spamm_tile_lists`), then the
/// launch order of the tiles (`spamm_tile_order`).
pub(super) fn tile_work(
    device: &Arc<GpuDevice>,
    stream: Stream,
    kernel: &TileKernel,
    (an, an_ld): (CUdeviceptr, usize),
    bn: CUdeviceptr,
    tau: f64,
    (m, n, bs, kb): (usize, usize, usize, usize),
) -> Result<TileWork> {
    let tiles = m.div_ceil(kernel.tile_m) * n.div_ceil(kernel.tile_n);
    let order = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM tile order")?;
    let counts = DeviceBuffer::alloc(device, tiles * 4, stream, "the SpAMM work lists")?;
    let lists = DeviceBuffer::alloc(device, tiles * kb.max(1) * 4, stream, "the SpAMM work lists")?;
    let f = device.function(&SPAMM, "spamm_tile_lists")?;
    let (m_i, n_i, bs_i, mb_i, kb_i) = (m as i32, n as i32, bs as i32, an_ld as i32, kb as i32);
    let (tm, tn) = (kernel.tile_m as i32, kernel.tile_n as i32);
    let (counts_ptr, lists_ptr) = (counts.ptr(), lists.ptr());
    let cfg =
        Launch { grid: (tiles.min(device.multiprocessors * 8) as u32, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![&m_i, &n_i, &bs_i, &mb_i, &kb_i, &tm, &tn, &an, &bn, &tau, &counts_ptr, &lists_ptr],
        )
    }?;
    let group_cols = schedule_group_cols().unwrap_or(kernel.group_cols);
    let (tiles_i, tile_rows) = (tiles as i32, m.div_ceil(kernel.tile_m) as i32);
    let order_ptr = order.ptr();
    let f = device.function(&SPAMM, "spamm_tile_order")?;
    let cfg = Launch { grid: (1, 1, 1), block: (1024, 1, 1), shared_bytes: 0 };
    unsafe {
        launch(&f, cfg, stream, kernel_args![&tiles_i, &tile_rows, &kb_i, &group_cols, &counts_ptr, &order_ptr])
    }?;
    Ok(TileWork { tiles, order, counts, lists })
}
