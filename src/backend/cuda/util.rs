//! Launcher of `kernels/util.cu`, the runtime's own kernel (used by its tests: staging, streams, cache).

use super::kernels::UTIL;
use super::{GpuDevice, Launch, Stream, launch};
use crate::error::Result;
use crate::kernel_args;
use crate::scalar::Element;
use crate::types::ValueType;
use cudarc::driver::sys::CUdeviceptr;

#[allow(clippy::too_many_arguments)]
/// `C ← β·C` for a strided rows × cols matrix of `T` at `c` (β = 0 writes zeros without reading).
pub fn scale_matrix<T: Element>(
    device: &GpuDevice,
    stream: Stream,
    rows: usize,
    cols: usize,
    beta: T::Compute,
    c: CUdeviceptr,
    row_stride: usize,
    col_stride: usize,
) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    assert!(T::VALUE_TYPE != ValueType::Bf16, "no bf16 scaling is needed");
    let f = device.function(&UTIL, &format!("scale_matrix_{}", T::VALUE_TYPE.short_name()))?;
    let (r, k) = (rows as i32, cols as i32);
    let (rs, cs) = (row_stride as i64, col_stride as i64);
    let blocks = (rows * cols).div_ceil(256).min(device.multiprocessors * 16) as u32;
    let cfg = Launch { grid: (blocks, 1, 1), block: (256, 1, 1), shared_bytes: 0 };
    // The kernel's β parameter is float for f16 and the element type otherwise: T::Compute either way.
    unsafe { launch(&f, cfg, stream, kernel_args![&r, &k, &beta, &c, &rs, &cs]) }
}
