//! SMaT on the GPU (the CUDA executor's [`SmatBackend`]): the analysed BCSR resident on a device, and
//! the launchers of `kernels/smat.cu`.
//!
//! The analysis (Jaccard reordering, BCSR blocking) runs on the host exactly as for the CPU backend,
//! on a CSR read where it lives (device arrays are downloaded first); [`DeviceBcsr::upload`] then
//! moves the blocks to the handle's device once, and the matrix holds them as the backend's own type. Device metadata is the
//! block-row pointers, one column index per nonzero block, the dense tiles in the type the kernel
//! consumes (f16 / bf16 bit patterns for the tensor-core path, f32, f64) and the row permutation.

use super::kernels::SMAT;
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput, Location, locate};
use super::{CudaExecutor, GpuDevice, Launch, Stream, driver_error, launch};
use crate::alloc::{try_collect, try_vec};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::Element;
use crate::smat::bcsr::Bcsr;
use crate::smat::contract::{HostCsr, PreparedBlocks, Product, RawCsr, SmatBackend, foreign_matrix};
use crate::smat::{MatrixInfo, SmatMatrix};
use crate::types::{Layout, ValueType};
use cudarc::driver::result as drv;
use std::borrow::Cow;
use std::sync::Arc;

/// Warps per thread block and columns per warp of every SMaT kernel (SMAT_WARPS_PER_BLOCK and
/// SMAT_STRIP in kernels/smat.cu).
const WARPS_PER_BLOCK: usize = 4;
const STRIP: usize = 32;

/// A matrix's BCSR on one device, resident (see `DeviceBuffer::resident`).
pub struct DeviceBcsr {
    device: Arc<GpuDevice>,
    /// `block rows + 1` offsets (i64) into the blocks.
    block_row_ptr: DeviceBuffer,
    /// Column-block index (i32) of each nonzero block.
    block_cols: DeviceBuffer,
    /// `blocks · tile area` values of the element type, each tile row-major.
    tiles: DeviceBuffer,
    /// Caller's row (i32) of each stored row; `None` when the rows are not reordered.
    row_order: Option<DeviceBuffer>,
}

impl std::fmt::Debug for DeviceBcsr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBcsr(device {}, {} tile bytes)", self.device.ordinal, self.tiles.bytes())
    }
}

impl PreparedBlocks for DeviceBcsr {
    fn backend_name(&self) -> &'static str {
        "CUDA"
    }
}

impl DeviceBcsr {
    /// Uploads the host BCSR of a matrix analysed for element type `T` (stored row `i` is the
    /// caller's row `row_order[i]`) to `device` on `stream`, and waits for the copies so that later
    /// calls may run on any stream of the device.
    pub fn upload<T: Element>(
        device: &Arc<GpuDevice>,
        stream: Stream,
        info: &MatrixInfo,
        row_order: Option<&[usize]>,
        bcsr: &Bcsr<T::Compute>,
    ) -> Result<DeviceBcsr> {
        let block_row_ptr =
            try_collect(bcsr.block_row_ptr.len(), "the BCSR block-row pointers", |i| bcsr.block_row_ptr[i] as i64)?;
        let block_cols = try_collect(bcsr.block_cols.len(), "the BCSR column indices", |i| bcsr.block_cols[i] as i32)?;
        let mut tiles: Vec<T> = try_vec(bcsr.values.len(), T::default(), "the device copy of the tiles")?;
        // Halves were widened (and duplicates summed) in f32 at analysis: round once to the type the
        // tensor cores read. A tile value that came from one entry round-trips exactly.
        for (t, &v) in tiles.iter_mut().zip(&bcsr.values) {
            *t = T::from_compute(v);
        }
        let row_order = match row_order {
            Some(order) => Some(try_collect(info.rows, "the row order", |r| order[r] as i32)?),
            None => None,
        };

        let resident = DeviceBcsr {
            device: device.clone(),
            block_row_ptr: DeviceBuffer::from_host(device, &block_row_ptr, stream, "the BCSR block-row pointers")?
                .resident(),
            block_cols: DeviceBuffer::from_host(device, &block_cols, stream, "the BCSR column indices")?.resident(),
            tiles: DeviceBuffer::from_host(device, &tiles, stream, "the BCSR tiles")?.resident(),
            row_order: match &row_order {
                Some(order) => Some(DeviceBuffer::from_host(device, order, stream, "the row permutation")?.resident()),
                None => None,
            },
        };
        // The host vectors are freed on return: the copies must be done first.
        device.synchronize(stream)?;
        Ok(resident)
    }

    pub fn device_ordinal(&self) -> usize {
        self.device.ordinal
    }
}

/// A caller's CSR input array as host data: used in place when it is host memory, downloaded when it
/// is device memory of `device` (the analysis runs on the host).
///
/// # Safety
/// `ptr` must be valid for reading `len` elements of host or device memory, or `len` must be 0 (the
/// caller has already rejected NULL and misaligned pointers).
unsafe fn host_view<'a, T: Copy + Default>(
    device: &Arc<GpuDevice>,
    stream: Stream,
    ptr: *const T,
    len: usize,
    name: &str,
) -> Result<Cow<'a, [T]>> {
    if len == 0 {
        return Ok(Cow::Borrowed(&[]));
    }
    device.bind()?;
    match locate(ptr.cast()) {
        Location::Host => Ok(Cow::Borrowed(unsafe { std::slice::from_raw_parts(ptr, len) })),
        Location::Device(ordinal) => {
            if ordinal != device.ordinal {
                return Err(Error::invalid_pointer(format!(
                    "argument {name} is memory of device {ordinal}, but the handle runs on device {}",
                    device.ordinal
                )));
            }
            let mut host: Vec<T> = try_vec(len, T::default(), name)?;
            unsafe { drv::memcpy_dtoh_async(&mut host[..], ptr as u64, stream.0) }
                .map_err(driver_error("copying a CSR array to the host"))?;
            device.synchronize(stream)?;
            Ok(Cow::Owned(host))
        }
    }
}

/// SMaT's element types on the GPU: which kernel multiplies them.
pub trait GpuSpmmElement: Element {
    const KERNEL: &'static str;
}

impl GpuSpmmElement for half::f16 {
    const KERNEL: &'static str = "smat_spmm_f16";
}
impl GpuSpmmElement for half::bf16 {
    const KERNEL: &'static str = "smat_spmm_bf16";
}
impl GpuSpmmElement for f32 {
    const KERNEL: &'static str = "smat_spmm_f32";
}
impl GpuSpmmElement for f64 {
    const KERNEL: &'static str = "smat_spmm_f64";
}

fn strides(layout: Layout, ld: usize) -> (i64, i64) {
    let (rs, cs) = layout.strides(ld);
    (rs as i64, cs as i64)
}

/// `C = α·A·B + β·C` on `gpu` (the handle's device, bound) and `stream`. B and C may be host or
/// device memory; the call returns without waiting unless C is host memory.
///
/// # Safety
/// B and C must be valid for their lengths.
unsafe fn spmm<T: GpuSpmmElement>(
    gpu: &Arc<GpuDevice>,
    stream: Stream,
    a: &SmatMatrix,
    resident: &DeviceBcsr,
    op: &Product<T>,
) -> Result<()> {
    let (alpha, beta) = (op.alpha, op.beta);
    if resident.device_ordinal() != gpu.ordinal {
        return Err(Error::invalid_value(format!(
            "argument A was analysed on device {}, but the handle runs on device {}",
            resident.device_ordinal(),
            gpu.ordinal
        )));
    }
    let info = a.info();
    debug_assert_eq!(info.value_type, T::VALUE_TYPE);
    let (rows, cols, n) = (info.rows, info.cols, op.n);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    let (b_len, c_len) = (op.b_len, op.c_len);
    let b = unsafe { DeviceInput::new(gpu, stream, op.b, b_len, "B") }?;
    // A staged host C is copied back whole: upload it first unless the kernel overwrites all of it
    // (β = 0 and no padding between leading dimensions).
    let c_inner = if op.layout == Layout::RowMajor { n } else { rows };
    let read_existing = beta != <T::Compute as crate::scalar::ComputeScalar>::ZERO || op.ldc != c_inner;
    let c = unsafe { DeviceOutput::new(gpu, stream, op.c, c_len, "C", read_existing) }?;

    let f = gpu.function(&SMAT, T::KERNEL)?;
    let block_rows = rows.div_ceil(info.tile.rows);
    let strips = n.div_ceil(STRIP);
    let cfg = Launch {
        grid: (block_rows as u32, strips.div_ceil(WARPS_PER_BLOCK).min(65535) as u32, 1),
        block: ((WARPS_PER_BLOCK * 32) as u32, 1, 1),
        shared_bytes: 0,
    };
    let (rows_i, cols_i, n_i) = (rows as i32, cols as i32, n as i32);
    let (brp, bcols, tiles) = (resident.block_row_ptr.ptr(), resident.block_cols.ptr(), resident.tiles.ptr());
    let order = resident.row_order.as_ref().map_or(0, |o| o.ptr());
    let (b_ptr, c_ptr) = (b.ptr(), c.ptr());
    let (b_rs, b_cs) = strides(op.layout, op.ldb);
    let (c_rs, c_cs) = strides(op.layout, op.ldc);
    debug_assert!(matches!(T::VALUE_TYPE, ValueType::F16 | ValueType::Bf16 | ValueType::F32 | ValueType::F64));
    // SAFETY: the argument list matches smat_spmm_* (α / β are float for the half types, i.e.
    // T::Compute); every pointer covers what the kernel reads or writes for these sizes.
    unsafe {
        launch(
            &f,
            cfg,
            stream,
            kernel_args![
                &rows_i, &cols_i, &n_i, &brp, &bcols, &tiles, &order, &alpha, &b_ptr, &b_rs, &b_cs, &beta, &c_ptr,
                &c_rs, &c_cs
            ],
        )
    }?;
    drop(b);
    c.finish()
}

/// The CUDA backend reads a device-resident CSR through host copies, keeps an analysed matrix's
/// blocks on the handle's device only ([`DeviceBcsr`]) and multiplies there.
impl<T: GpuSpmmElement> SmatBackend<T> for CudaExecutor {
    unsafe fn csr_to_host<'a>(&mut self, csr: &RawCsr<T>) -> Result<HostCsr<'a, T>> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        unsafe {
            Ok(HostCsr {
                row_ptr: host_view(&gpu, stream, csr.row_ptr, csr.rows + 1, "rowPtr")?,
                col_ind: host_view(&gpu, stream, csr.col_ind, csr.nnz, "colInd")?,
                values: host_view(&gpu, stream, csr.values, csr.nnz, "values")?,
            })
        }
    }

    fn prepare(
        &mut self,
        info: &MatrixInfo,
        row_order: Option<&[usize]>,
        bcsr: Bcsr<T::Compute>,
    ) -> Result<Box<dyn PreparedBlocks>> {
        let gpu = self.lead()?;
        gpu.bind()?;
        Ok(Box::new(DeviceBcsr::upload::<T>(&gpu, self.stream(), info, row_order, &bcsr)?))
    }

    unsafe fn spmm(&mut self, a: &SmatMatrix, product: &Product<T>) -> Result<()> {
        let resident = a.blocks::<DeviceBcsr>().ok_or_else(|| foreign_matrix(a, "CUDA"))?;
        let gpu = self.lead()?;
        gpu.bind()?;
        unsafe { spmm(&gpu, self.stream(), a, resident, product) }
    }
}
