//! SpAMM on the GPU: the CUDA executor's side of SpAMM's contract (`crate::spamm::contract`), by
//! concern: block norm maps (`norms`), one product's call sequence (`product`), products shared by
//! several devices (`shares`), the multiplication's tile kernels (`tiles`), statistics that leave the
//! caller's stream running (`stats`) and the τ searches' evaluations on the device (`tau`).

mod norms;
mod product;
mod shares;
mod stats;
mod tau;
mod tiles;

pub use norms::*;
pub use product::*;
pub use shares::*;
pub use stats::*;
pub use tau::*;
use tiles::*;

use super::CudaExecutor;
use super::kernels::{KernelSource, SPAMM, SPAMM_BF16, SPAMM_F16, SPAMM_F32, SPAMM_F64, UTIL};
use super::memory::{DeviceBuffer, DeviceInput, DeviceOutput};
use super::timeline::Timeline;
use super::{Event, GpuDevice, Launch, Stream, copy_matrix_async, driver_error, launch};
use crate::alloc::{element_count, try_vec};
use crate::error::{Error, Result};
use crate::kernel_args;
use crate::scalar::{ComputeScalar, Element};
use crate::spamm::contract::{self, Outcome, RawOperand, SpammBackend, SpammStatistics, Totals};
use crate::spamm::tune::{self, CandidateEvaluator, Evaluation, ProductRange, TauRule};
use crate::spamm::{MathMode, NormMap, block_count, runs_3xtf32};
use crate::types::{Operation, ValueType};
use cudarc::driver::CudaStream;
use cudarc::driver::result as drv;
use cudarc::driver::sys::{CU_MEMHOSTALLOC_PORTABLE, CUdeviceptr};
use std::sync::Arc;

/// What a handle's executor keeps between SpAMM products: where the statistics land (one slot, for
/// the lead device), and the other devices of multi-device products with the split of the work.
#[derive(Default)]
pub struct SpammState {
    stats_slot: Option<StatsSlot>,
    shared: Option<SharedDevices>,
}

impl CudaExecutor {
    /// The devices besides the lead that share a product: the placement's other devices, or (test
    /// hook [`crate::executor::TestHooks::spamm_shares_on_one_device`]) the lead itself again.
    fn spamm_share_gpus(&self, lead: &Arc<GpuDevice>) -> Result<Vec<Arc<GpuDevice>>> {
        let gpus = self.devices()?;
        Ok(if gpus.len() > 1 {
            gpus[1..].to_vec()
        } else {
            vec![lead.clone(); self.test_hooks.spamm_shares_on_one_device.saturating_sub(1)]
        })
    }
}

impl<T: Element> SpammBackend<T> for CudaExecutor {
    unsafe fn gemm(&mut self, product: &contract::Product<'_, T>) -> Result<Outcome> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let share_gpus = self.spamm_share_gpus(&gpu)?;
        let kernels = KernelSettings {
            mode: product.math_mode,
            fewest_shared_memory: self.test_hooks.spamm_fewest_shared_memory,
        };
        let bs = product.block_size;
        let state = &mut self.spamm;
        if state.stats_slot.as_ref().is_none_or(|slot| !Arc::ptr_eq(slot.device(), &gpu)) {
            state.stats_slot = Some(StatsSlot::new(&gpu)?);
        }
        let split = !share_gpus.is_empty()
            && splits::<T>(
                &std::iter::once(&gpu).chain(&share_gpus).collect::<Vec<_>>(),
                bs,
                product.a.op_shape().1,
                kernels.mode,
            );
        if split && state.shared.as_ref().is_none_or(|shared| !shared.serves(&gpu, &share_gpus)) {
            state.shared = None;
            state.shared = Some(SharedDevices::new(&gpu, &share_gpus)?);
        }
        let slot = state.stats_slot.as_ref().expect("just made");
        let shared = state.shared.as_mut().filter(|_| split);
        let contract::Product { a, b, alpha, beta, c, c_len, ldc, tau, .. } = *product;
        let (dims, tau) =
            unsafe { gemm(&gpu, stream, slot, shared, a, b, alpha, beta, c, c_len, ldc, tau, bs, kernels) }?;
        Ok(Outcome { dims, tau, totals: Totals::Pending })
    }

    unsafe fn search_tau(
        &mut self,
        a: &RawOperand<T>,
        b: &RawOperand<T>,
        block_size: usize,
        search: &mut dyn FnMut(&mut dyn CandidateEvaluator) -> Result<()>,
    ) -> Result<()> {
        let gpu = self.lead()?;
        gpu.bind()?;
        let stream = self.stream();
        let [a_norms, b_norms] = unsafe { operand_norm_maps(&gpu, stream, a, b, block_size) }?;
        search(&mut DeviceTauEvaluator::new(&gpu, stream, &a_norms, &b_norms)?)
    }
}

impl SpammStatistics for CudaExecutor {
    fn wait_totals(&mut self) -> Result<(u64, f64)> {
        match &self.spamm.stats_slot {
            Some(slot) => slot.wait(),
            None => Err(Error::internal("no SpAMM product left statistics on this executor")),
        }
    }
}
